/* events.k8s.io/v1: events, with their printer columns and selectable
 * fields, and events_install, which serves them.
 *
 * As upstream, they are core Events in storage (/registry/events/NS/NAME
 * in etcd, apiVersion v1): an event recorded through either API is seen
 * through both. events.k8s.io/v1 names some fields differently
 * (pkg/apis/events/v1's conversion): regarding is involvedObject, note
 * is message, reportingController is reportingComponent, and the
 * deprecated* fields are source, firstTimestamp, lastTimestamp and
 * count. */
#include "apiserver/registry/events/events.h"

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"

/* events.k8s.io/v1 name, core/v1 name. */
static const char *const RENAMED[][2] = {
    {"regarding", "involvedObject"},
    {"note", "message"},
    {"reportingController", "reportingComponent"},
    {"deprecatedSource", "source"},
    {"deprecatedFirstTimestamp", "firstTimestamp"},
    {"deprecatedLastTimestamp", "lastTimestamp"},
    {"deprecatedCount", "count"},
};
enum { NRENAMED = sizeof RENAMED / sizeof *RENAMED };

/* Moves obj's fields from names[from] to names[1 - from] and sets the
 * other shape's apiVersion and kind. A field the target shape already
 * has (a body that mixes the two) is kept, the other dropped. */
static void rename_fields(json_t *obj, int from, const char *api_version)
{
    for (int i = 0; i < NRENAMED; i++) {
        const char *src = RENAMED[i][from], *dst = RENAMED[i][1 - from];
        json_t *v = json_object_get(obj, src);
        if (!v)
            continue;
        if (!json_object_get(obj, dst))
            json_object_set(obj, dst, v);
        json_object_del(obj, src);
    }
    json_object_set_new(obj, "apiVersion", json_string(api_version));
    json_object_set_new(obj, "kind", json_string("Event"));
}

/* A stored core/v1 Event as events.k8s.io/v1 serves it. */
static void event_present(const resource_type *t, json_t *obj)
{
    (void)t;
    rename_fields(obj, 1, "events.k8s.io/v1");
}

/* An events.k8s.io/v1 Event as it is stored: core/v1. */
static void event_to_storage(const resource_type *t, json_t *obj)
{
    (void)t;
    rename_fields(obj, 0, "v1");
}

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

/* The paths are the stored core Event's: the core Events' cache bucket
 * extracts these too (cacher_configure_bucket's union). */
static const selectable_field fields_events_v1[] = {
    {"regarding.kind", "involvedObject.kind"},
    {"regarding.namespace", "involvedObject.namespace"},
    {"regarding.name", "involvedObject.name"},
    {"regarding.uid", "involvedObject.uid"},
    {"reason", "reason"},
    {"reportingController", "reportingComponent"},
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
     NULL,
     true,
     false},
};

int events_install(registry *reg)
{
    if (builtin_install(reg, types, sizeof types / sizeof *types) != 0)
        return -1;
    resource_type *t = registry_lookup(reg, "events.k8s.io", "v1", "events");
    if (t) {
        t->storage_group = "";
        t->present = event_present;
        t->to_storage = event_to_storage;
    }
    resource_type_unref(t);
    return t ? 0 : -1;
}
