/* events.k8s.io/v1: events, with their printer columns and selectable
 * fields, and events_install, which serves them. */
#include "apiserver/registry/events/events.h"

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"

static json_t *cell_events_v1_object(const json_t *obj)
{
    return builtin_event_object(obj, "regarding");
}

static const col_def cols_events_v1[] = {
    {"Last Seen", "string", "", NULL, builtin_event_last_seen, 0, "Time since last seen."},
    {"Type", "string", "", ".type", NULL, 0, "Normal or Warning."},
    {"Reason", "string", "", ".reason", NULL, 0, "Why the event happened."},
    {"Object", "string", "", NULL, cell_events_v1_object, 0, "The object the event is about."},
    {"Message", "string", "", ".note", NULL, 0, "A human readable description."},
    {"Name", "string", "name", ".metadata.name", NULL, 1, "The event's name."},
    END_COL};

static const selectable_field fields_events_v1[] = {{"regarding.kind", "regarding.kind"},
                                                    {"regarding.namespace", "regarding.namespace"},
                                                    {"regarding.name", "regarding.name"},
                                                    {"regarding.uid", "regarding.uid"},
                                                    {"reason", "reason"},
                                                    {"reportingController", "reportingController"},
                                                    {"type", "type"},
                                                    {NULL, NULL}};

static const builtin types[] = {
    {"events.k8s.io",
     "v1",
     "events",
     "Event",
     "event",
     true,
     {"ev"},
     {NULL},
     false,
     false,
     false,
     CKUBE_NAME_DNS1123_SUBDOMAIN,
     patchmeta_events_v1_event,
     cols_events_v1,
     fields_events_v1,
     NULL,
     NULL,
     NULL,
     NULL,
     NULL, true},
};

int events_install(registry *reg)
{
    return builtin_install(reg, types, sizeof types / sizeof *types);
}
