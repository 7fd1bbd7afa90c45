/* What every built-in API group's install uses: the static type table
 * (builtin.h) and builtin_install, which turns it into registered
 * resource types, plus printer cells and defaults shared between groups. */
#include "apiserver/registry/builtin/builtin.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiserver/registry/definitions/builtin_schemas.h"
#include "ckube/json.h"
#include "common/text.h"
#include "common/xalloc.h"

json_t *builtin_str_or_none(const char *s)
{
    return json_string(s && *s ? s : "<none>");
}

json_t *builtin_selector_map(const json_t *obj, const char *path)
{
    char buf[1024] = "";
    const char *k;
    json_t *v;
    json_object_foreach(ckube_json_get_path(obj, path), k, v)
    {
        snprintf(buf + strlen(buf), sizeof buf - strlen(buf), "%s%s=%s", *buf ? "," : "", k,
                 json_string_value(v) ? json_string_value(v) : "");
    }
    return builtin_str_or_none(buf);
}

json_t *builtin_int_path(const json_t *obj, const char *path)
{
    json_t *v = ckube_json_get_path(obj, path);
    return json_integer(json_is_integer(v) ? json_integer_value(v) : 0);
}

/* Event columns: "Last Seen" is a relative time, "Object" kind/name. */
json_t *builtin_event_age(const json_t *obj, const char *const *paths)
{
    for (; *paths; paths++) {
        const char *ts = json_string_value(ckube_json_get_path(obj, *paths));
        int64_t t = ckube_parse_rfc3339(ts);
        if (t > 0) {
            char buf[32];
            ckube__human_duration((int64_t)time(NULL) - t, buf, sizeof buf);
            return json_string(buf);
        }
    }
    return json_string("<unknown>");
}

json_t *builtin_event_object(const json_t *obj, const char *ref)
{
    json_t *io = json_object_get(obj, ref);
    const char *kind = json_string_value(json_object_get(io, "kind"));
    const char *name = json_string_value(json_object_get(io, "name"));
    char buf[512];
    char lower[128] = "";
    for (size_t i = 0; kind && kind[i] && i < sizeof lower - 1; i++)
        lower[i] = (char)((kind[i] >= 'A' && kind[i] <= 'Z') ? kind[i] + 32 : kind[i]);
    snprintf(buf, sizeof buf, "%s/%s", lower, name ? name : "");
    return json_string(buf);
}

json_t *builtin_event_last_seen(const json_t *obj)
{
    static const char *const paths[] = {
        "lastTimestamp", "series.lastObservedTime",    "deprecatedLastTimestamp",
        "eventTime",     "metadata.creationTimestamp", NULL};
    return builtin_event_age(obj, paths);
}

/* Sets obj[key] = value (taken) unless obj has that key already: a
 * default. */
void builtin_set_if_absent(json_t *obj, const char *key, json_t *value)
{
    if (json_object_get(obj, key))
        json_decref(value);
    else
        json_object_set_new(obj, key, value);
}

/* ---- pod specs ------------------------------------------------------ */

/* Whether an image reference names the tag "latest", as the image name
 * parser upstream's defaulting uses reads it: the tag follows the last
 * ':' after the last '/' ("localhost:5000/app" has none), none means
 * "latest", and a digest means no tag. An empty or missing image parses
 * to no tag. */
static bool image_is_latest(const char *img)
{
    if (!img || !*img || strchr(img, '@'))
        return false;
    const char *slash = strrchr(img, '/');
    const char *colon = strrchr(slash ? slash : img, ':');
    return !colon || !strcmp(colon + 1, "latest");
}

/* SetDefaults_Container and SetDefaults_ContainerPort for each entry of
 * a containers or initContainers list. `resources` is a struct in the Go
 * types, so an object always shows it, empty or not. */
static void default_containers(json_t *list)
{
    size_t i, j;
    json_t *c, *port;
    json_array_foreach(list, i, c)
    {
        if (!json_is_object(c))
            continue;
        const char *img = json_string_value(json_object_get(c, "image"));
        builtin_set_if_absent(c, "imagePullPolicy",
                              json_string(image_is_latest(img) ? "Always" : "IfNotPresent"));
        builtin_set_if_absent(c, "terminationMessagePath", json_string("/dev/termination-log"));
        builtin_set_if_absent(c, "terminationMessagePolicy", json_string("File"));
        builtin_set_if_absent(c, "resources", json_object());
        json_array_foreach(json_object_get(c, "ports"), j, port)
        {
            if (json_is_object(port))
                builtin_set_if_absent(port, "protocol", json_string("TCP"));
        }
    }
}

/* SetDefaults_PodSpec: what a pod and every pod template get. */
void builtin_default_pod_spec(json_t *spec)
{
    builtin_set_if_absent(spec, "restartPolicy", json_string("Always"));
    builtin_set_if_absent(spec, "dnsPolicy", json_string("ClusterFirst"));
    builtin_set_if_absent(spec, "schedulerName", json_string("default-scheduler"));
    builtin_set_if_absent(spec, "terminationGracePeriodSeconds", json_integer(30));
    builtin_set_if_absent(spec, "securityContext", json_object());
    default_containers(json_object_get(spec, "containers"));
    default_containers(json_object_get(spec, "initContainers"));
}

void builtin_default_pod_template(json_t *spec)
{
    json_t *tspec = ckube_json_get_path(spec, "template.spec");
    if (json_is_object(tspec))
        builtin_default_pod_spec(tspec);
}

/* ---- install -------------------------------------------------------- */

static char **strv_dup(const char *const *v, size_t max)
{
    size_t n = 0;
    while (n < max && v[n])
        n++;
    if (!n)
        return NULL;
    char **out = xcalloc(n + 1, sizeof *out);
    for (size_t i = 0; i < n; i++)
        out[i] = xstrdup(v[i]);
    return out;
}

static char *sdup(const char *s)
{
    return s ? xstrdup(s) : NULL;
}

int builtin_install(registry *reg, const builtin *types, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        const builtin *b = &types[i];
        resource_type *t = xcalloc(1, sizeof *t);
        atomic_init(&t->refs, 1);
        t->group = xstrdup(b->group);
        t->version = xstrdup(b->version);
        t->resource = xstrdup(b->resource);
        t->kind = xstrdup(b->kind);
        t->singular = xstrdup(b->singular);
        t->namespaced = b->namespaced;
        t->short_names = strv_dup(b->short_names, 4);
        t->categories = strv_dup(b->categories, 3);
        t->verbs = VERB_ALL;
        t->status_subresource = b->status_sub;
        t->scale_subresource = b->scale_sub;
        if (b->scale_sub) {
            t->scale_spec_replicas_path = xstrdup(".spec.replicas");
            t->scale_status_replicas_path = xstrdup(".status.replicas");
            t->scale_label_selector_path = xstrdup(".status.selector");
        }
        t->tracks_generation = b->generation;
        t->allow_unconditional_update = !b->conditional_update;
        t->allow_create_on_update = b->create_on_update;
        t->patch_meta = b->patch_meta;
        t->schema = builtin_schema(b->group, b->version, b->kind);
        t->selectable_fields = b->fields;
        t->prepare_create = b->prepare_create;
        t->prepare_update = b->prepare_update;
        t->validate = b->validate;
        t->pending_finalizers = b->pending_finalizers;
        t->prepare_delete = b->prepare_delete;
        t->name_kind = b->name_kind;
        size_t nc = 0;
        while (b->cols && b->cols[nc].name)
            nc++;
        t->columns = xcalloc(nc ? nc : 1, sizeof *t->columns);
        for (size_t c = 0; c < nc; c++) {
            const col_def *d = &b->cols[c];
            t->columns[c].name = xstrdup(d->name);
            t->columns[c].type = xstrdup(d->type);
            t->columns[c].format = xstrdup(d->format);
            t->columns[c].description = xstrdup(d->description);
            t->columns[c].priority = d->priority;
            t->columns[c].json_path = sdup(d->path);
            t->columns[c].fn = d->fn;
        }
        t->ncolumns = nc;
        if (registry_add(reg, t) != 0) {
            resource_type_unref(t);
            return -1;
        }
    }
    return 0;
}
