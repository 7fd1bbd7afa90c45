/* The one generic REST handler: get, list, create, update, patch, delete
 * and deletecollection for every resource type, built-in or custom.
 * Type-specific behaviour comes only from `struct resource_type`.
 *
 * Reads come from the cacher. A write decodes and checks the request
 * (its body, dryRun, fieldValidation, fieldManager, DeleteOptions), then
 * hands it to the generic store (registry/generic/store.h) with hooks for
 * what only the request knows: how the new object is built from the
 * current one (PUT body, patch, apply), its validation and managedFields.
 * The store ends the write on the request's loop, where write_done
 * shapes the reply. */
#include <ctype.h>
#include <event2/buffer.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/endpoints/handlers/handlers.h"
#include "apiserver/admission/admission.h"
#include "apiserver/endpoints/filters/audit.h"
#include "apiserver/endpoints/request/partial.h"
#include "apiserver/endpoints/request/table.h"
#include "apiserver/authorization/escalation.h"
#include "apiserver/registry/definitions/builtin_schemas.h"
#include "apiserver/codec/continue_token.h"
#include "apiserver/fieldmanager/fieldmanager.h"
#include "apiserver/codec/jscan.h"
#include "apiserver/codec/k8s_protobuf.h"
#include "apiserver/apiextensions/schema/schema.h"
#include "apiserver/registry/generic/store.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/patch.h"
#include "ckube/validation.h"
#include "ckube/yaml.h"
#include "common/json_cost.h"
#include "common/json_parse.h"
#include "common/xalloc.h"

static ckube_status *not_found(req_ctx *rc, const char *name)
{
    return ckube_status_not_found(rc->type->group, rc->type->resource, name);
}

static ckube_status *method_not_allowed(void)
{
    return ckube_status_new(405, CKUBE_REASON_METHOD_NOT_ALLOWED,
                            "the server does not allow this method on the requested resource");
}

static ckube_status *resource_not_found(void)
{
    return ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                            "the server could not find the requested resource");
}

/* ---- request bodies ------------------------------------------------------ */

typedef enum {
    BODY_JSON,
    BODY_YAML,
    BODY_JSON_PATCH,
    BODY_MERGE_PATCH,
    BODY_STRATEGIC_PATCH,
    BODY_APPLY_PATCH,
    BODY_PROTOBUF,
    BODY_UNSUPPORTED,
} body_type;

static body_type content_type(req_ctx *rc)
{
    const char *ct = httpd_req_header(rc->req, "Content-Type");
    if (!ct || !*ct)
        return BODY_JSON;
    size_t n = strcspn(ct, ";");
    while (n && ct[n - 1] == ' ')
        n--;
#define IS(s) (n == strlen(s) && !strncasecmp(ct, s, n))
    if (IS("application/json") || IS("*/*"))
        return BODY_JSON;
    if (IS("application/yaml") || IS("application/x-yaml") || IS("text/yaml"))
        return BODY_YAML;
    if (IS("application/json-patch+json"))
        return BODY_JSON_PATCH;
    if (IS("application/merge-patch+json"))
        return BODY_MERGE_PATCH;
    if (IS("application/strategic-merge-patch+json"))
        return BODY_STRATEGIC_PATCH;
    if (IS("application/apply-patch+yaml") || IS("application/apply-patch+json"))
        return BODY_APPLY_PATCH;
    if (IS("application/vnd.kubernetes.protobuf"))
        return BODY_PROTOBUF;
#undef IS
    return BODY_UNSUPPORTED;
}

/* Reads and decodes the body (JSON, or YAML for BODY_YAML/APPLY). With
 * `strict`, duplicate keys are an error; otherwise they give a warning.
 * Returns NULL and sets *st on error. */
static json_t *read_body(req_ctx *rc, body_type bt, int validation, ckube_status **st)
{
    struct evbuffer *in = httpd_req_body(rc->req);
    size_t len = evbuffer_get_length(in);
    if (len > APISERVER_MAX_BODY) {
        *st = ckube_status_new(413, CKUBE_REASON_TOO_LARGE, "Request entity too large: limit is %u",
                               APISERVER_MAX_BODY);
        return NULL;
    }
    if (len == 0) {
        *st = ckube_status_bad_request("the body of the request was empty");
        return NULL;
    }
    const char *data = (const char *)evbuffer_pullup(in, -1);
    json_t *v = NULL;
    char *err = NULL;
    size_t budget = apiserver_decode_budget(len);
    bool too_large = false;
    if (bt == BODY_YAML || bt == BODY_APPLY_PATCH) {
        /* Aliases may add no more than the body limit of JSON text: the
         * object could not be stored anyway. */
        ckube_yaml_limits lim = {
            .max_memory = budget, .max_alias_memory = budget, .max_alias_json = APISERVER_MAX_BODY};
        v = ckube_yaml_load_limited(data, len, &lim, &too_large, &err);
    } else if (bt == BODY_PROTOBUF) {
        /* client-go sends built-in types as protobuf; we keep JSON. */
        v = k8s_protobuf_decode(data, len, budget, &too_large, &err);
    } else {
        json_error_t je;
        v = ckube__json_loadb_limited(data, len, JSON_REJECT_DUPLICATES, budget, NULL, &too_large,
                                      &je);
        if (!v && !too_large && strstr(je.text, "duplicate")) {
            if (validation == 2) {
                *st = ckube_status_bad_request("strict decoding error: json: %s", je.text);
                return NULL;
            }
            v = ckube__json_loadb_limited(data, len, 0, budget, NULL, &too_large, &je);
            if (v && validation == 1) {
                char msg[256];
                snprintf(msg, sizeof msg, "json: %s", je.text);
                req_add_warning(rc, msg);
            }
        }
        if (!v && asprintf(&err, "%s (line %d, column %d)", je.text, je.line, je.column) < 0)
            err = NULL;
    }
    if (!v && too_large) {
        free(err);
        *st = ckube_status_new(413, CKUBE_REASON_TOO_LARGE,
                               "Request entity too large: decoding the body needs more than %zu "
                               "bytes of memory",
                               budget);
        return NULL;
    }
    if (!v && bt == BODY_PROTOBUF && err && !strncmp(err, "unsupported protobuf type", 25)) {
        *st = ckube_status_new(415, CKUBE_REASON_UNSUPPORTED_MEDIA,
                               "%s: send it as application/json", err);
        free(err);
        return NULL;
    }
    if (!v) {
        if (bt == BODY_APPLY_PATCH)
            *st =
                ckube_status_bad_request("error decoding YAML: %s", err ? err : "invalid document");
        else
            *st = ckube_status_bad_request("error decoding request body: %s",
                                           err ? err : "invalid document");
        free(err);
        return NULL;
    }
    return v;
}

/* fieldValidation: 0 Ignore, 1 Warn (default), 2 Strict; -1 invalid. */
static int field_validation(req_ctx *rc)
{
    const char *v = req_query(rc, "fieldValidation");
    if (!v || !*v || !strcmp(v, "Warn"))
        return 1;
    if (!strcmp(v, "Strict"))
        return 2;
    if (!strcmp(v, "Ignore"))
        return 0;
    return -1;
}

/* field_validation, or a 400 sent (and false) when the value is not one
 * upstream accepts. */
static bool field_validation_or_reply(req_ctx *rc, int *fv)
{
    *fv = field_validation(rc);
    if (*fv >= 0)
        return true;
    reply_status(rc, ckube_status_bad_request(
                         "fieldValidation must be one of \"Ignore\", \"Warn\", or \"Strict\""));
    return false;
}

/* dryRun: 1 for All, 0 absent, -1 invalid. */
static int dry_run(req_ctx *rc)
{
    const char *v = req_query(rc, "dryRun");
    if (!v || !*v)
        return 0;
    if (!strcmp(v, "All"))
        return 1;
    return -1;
}

/* ---- object helpers ----------------------------------------------------- */

static int64_t parse_rv(const char *s, bool *ok)
{
    *ok = true;
    if (!s || !*s)
        return 0;
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*end || v < 0) {
        *ok = false;
        return 0;
    }
    return v;
}

/* The object a PUT sends, or a patch produces, must name the object of
 * the URL (upstream's checkName): checked before anything is read from
 * storage, so a mismatch is a 400 ahead of a 404 or a 409. A namespace
 * left out is filled in later; a different one is refused. */
static ckube_status *check_name(req_ctx *rc, const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    const char *name = json_string_value(json_object_get(meta, "name"));
    if (!name || !*name)
        return ckube_status_bad_request(
            "the name of the object (%s based on URL) was undeterminable: name must be provided",
            rc->ri.name);
    if (strcmp(name, rc->ri.name))
        return ckube_status_bad_request(
            "the name of the object (%s) does not match the name on the URL (%s)", name,
            rc->ri.name);
    const char *ns = json_string_value(json_object_get(meta, "namespace"));
    if (rc->type->namespaced && ns && *ns && strcmp(ns, rc->ri.ns))
        return ckube_status_bad_request(
            "the namespace of the object (%s) does not match the namespace on the request (%s)", ns,
            rc->ri.ns);
    return NULL;
}

/* Puts kind and apiVersion (set to these values) first in obj, the other
 * members after them in their order. Runs on every write: members are
 * moved, not copied, and an object already in that shape is left alone. */
static void lead_with_gvk(json_t *obj, const char *kind, const char *api_version)
{
    void *it = json_object_iter(obj);
    void *it2 = it ? json_object_iter_next(obj, it) : NULL;
    if (it2 && !strcmp(json_object_iter_key(it), "kind") &&
        !strcmp(json_object_iter_key(it2), "apiVersion")) {
        const char *k = json_string_value(json_object_iter_value(it));
        const char *av = json_string_value(json_object_iter_value(it2));
        if (k && av && !strcmp(k, kind) && !strcmp(av, api_version))
            return;
    }
    size_t n = json_object_size(obj), k = 0;
    const char **keys = xcalloc(n ? n : 1, sizeof *keys);
    json_t **vals = xcalloc(n ? n : 1, sizeof *vals);
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (!strcmp(key, "kind") || !strcmp(key, "apiVersion"))
            continue;
        keys[k] = xstrdup(key);
        vals[k++] = json_incref(v);
    }
    json_object_clear(obj);
    json_object_set_new_nocheck(obj, "kind", json_string(kind));
    json_object_set_new_nocheck(obj, "apiVersion", json_string(api_version));
    for (size_t i = 0; i < k; i++) {
        json_object_set_new_nocheck(obj, keys[i], vals[i]); /* keys were valid members */
        free((char *)keys[i]);
    }
    free(keys);
    free(vals);
}

/* kind/apiVersion in a body must match the URL's type. */
static ckube_status *check_gvk(req_ctx *rc, json_t *obj)
{
    const resource_type *t = rc->type;
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    const char *kind = json_string_value(json_object_get(obj, "kind"));
    if (json_object_get(obj, "apiVersion") && !av)
        return ckube_status_bad_request("apiVersion must be a string");
    if (json_object_get(obj, "kind") && !kind)
        return ckube_status_bad_request("kind must be a string");
    if (av && *av && strcmp(av, t->api_version))
        return ckube_status_bad_request(
            "the API version in the data (%s) does not match the expected API version (%s)", av,
            t->api_version);
    if (kind && *kind && strcmp(kind, t->kind))
        return ckube_status_bad_request(
            "the kind in the data (%s) does not match the expected kind (%s)", kind, t->kind);
    /* kind and apiVersion lead, as upstream serializes them. */
    lead_with_gvk(obj, t->kind, t->api_version);
    json_t *meta = json_object_get(obj, "metadata");
    if (meta && !json_is_object(meta))
        return ckube_status_bad_request("metadata must be an object");
    return NULL;
}

/* Reports unknown fields as fieldValidation asks: a 400 for Strict,
 * warnings for Warn. Frees `unknown`. */
static ckube_status *unknown_fields(req_ctx *rc, char **unknown, size_t nunknown, int validation)
{
    const resource_type *t = rc->type;
    ckube_status *st = NULL;
    if (nunknown && validation == 2) {
        size_t cap = 64;
        char *msg = xmalloc(cap);
        size_t len = 0;
        msg[0] = 0;
        for (size_t i = 0; i < nunknown; i++) {
            size_t need = strlen(unknown[i]) + 24;
            if (len + need >= cap) {
                cap = (len + need) * 2;
                msg = xrealloc(msg, cap);
            }
            len += (size_t)snprintf(msg + len, cap - len, "%sunknown field \"%s\"", i ? ", " : "",
                                    unknown[i]);
        }
        st = ckube_status_bad_request(
            "%s in version \"%s\" cannot be handled as a %s: strict decoding error: %s", t->kind,
            t->version, t->kind, msg);
        free(msg);
    } else if (nunknown && validation == 1) {
        for (size_t i = 0; i < nunknown; i++) {
            char msg[512];
            snprintf(msg, sizeof msg, "unknown field \"%s\"", unknown[i]);
            req_add_warning(rc, msg);
        }
    }
    for (size_t i = 0; i < nunknown; i++)
        free(unknown[i]);
    free(unknown);
    return st;
}

/* Unknown-field handling and schema validation shared by every write.
 * Adds Invalid causes to *inv (created on demand); returns a Status for a
 * Strict-mode unknown field. */
static ckube_status *apply_schema(req_ctx *rc, json_t *obj, int validation, ckube_status *inv)
{
    const resource_type *t = rc->type;
    if (!t->schema)
        return NULL;
    char **unknown = NULL;
    size_t nunknown = 0;
    unsigned flags = SCHEMA_PRUNE | SCHEMA_DEFAULT | SCHEMA_VALIDATE;
    if (!t->is_custom)
        flags |= SCHEMA_OMITEMPTY;
    schema_apply(t->schema, obj, flags, inv, &unknown, &nunknown);
    return unknown_fields(rc, unknown, nunknown, validation);
}

/* The 400 for the first wrong-type cause in `causes` (upstream's wording
 * of a body that does not decode), or NULL when there is none. */
static ckube_status *cannot_be_handled(const resource_type *t, const ckube_status *causes)
{
    for (size_t i = 0; i < causes->ncauses; i++) {
        const ckube_status_cause *c = &causes->causes[i];
        if (c->type && !strcmp(c->type, CKUBE_CAUSE_FIELD_TYPE_INVALID))
            return ckube_status_bad_request(
                "%s in version \"%s\" cannot be handled as a %s: %s: %s", t->kind, t->version,
                t->kind, c->field ? c->field : "", c->message ? c->message : "invalid type");
    }
    return NULL;
}

/* A built-in's body that does not fit its Go types fails decoding
 * upstream: 400, not 422. Returns that 400 when the schema found a field
 * of the wrong type in a built-in (inv is left to the caller), else NULL. */
static ckube_status *decoding_error(const resource_type *t, const ckube_status *inv)
{
    return t->is_custom ? NULL : cannot_be_handled(t, inv);
}

/* ObjectMeta's fields by the JSON they hold (MF_NONE: not a field of
 * ObjectMeta). Every write looks at each metadata key a few times, so
 * one switch on the first letter replaces lists of names to compare. */
typedef enum {
    MF_NONE,
    MF_STRING,  /* names, uid, resourceVersion, selfLink */
    MF_TIME,    /* creationTimestamp, deletionTimestamp (strings) */
    MF_INTEGER, /* generation, deletionGracePeriodSeconds */
    MF_MAP,     /* labels, annotations */
    MF_LIST,    /* finalizers */
    MF_OWNERS,  /* ownerReferences */
    MF_MANAGED, /* managedFields */
} meta_field;

static meta_field meta_field_of(const char *k)
{
    switch (k[0]) {
    case 'a':
        return !strcmp(k, "annotations") ? MF_MAP : MF_NONE;
    case 'c':
        return !strcmp(k, "creationTimestamp") ? MF_TIME : MF_NONE;
    case 'd':
        return !strcmp(k, "deletionTimestamp")            ? MF_TIME
               : !strcmp(k, "deletionGracePeriodSeconds") ? MF_INTEGER
                                                          : MF_NONE;
    case 'f':
        return !strcmp(k, "finalizers") ? MF_LIST : MF_NONE;
    case 'g':
        return !strcmp(k, "generateName") ? MF_STRING
               : !strcmp(k, "generation") ? MF_INTEGER
                                          : MF_NONE;
    case 'l':
        return !strcmp(k, "labels") ? MF_MAP : MF_NONE;
    case 'm':
        return !strcmp(k, "managedFields") ? MF_MANAGED : MF_NONE;
    case 'n':
        return !strcmp(k, "name") || !strcmp(k, "namespace") ? MF_STRING : MF_NONE;
    case 'o':
        return !strcmp(k, "ownerReferences") ? MF_OWNERS : MF_NONE;
    case 'r':
        return !strcmp(k, "resourceVersion") ? MF_STRING : MF_NONE;
    case 's':
        return !strcmp(k, "selfLink") ? MF_STRING : MF_NONE;
    case 'u':
        return !strcmp(k, "uid") ? MF_STRING : MF_NONE;
    default:
        return MF_NONE;
    }
}

/* Whether a metadata value is what Go's omitempty leaves out when
 * ObjectMeta is encoded: null; "" of a plain string field; 0 of
 * generation (a plain int64; deletionGracePeriodSeconds is a pointer and
 * keeps its 0); an empty labels, annotations, ownerReferences or
 * finalizers. A value of the wrong type stays, for validation to reject. */
static bool meta_value_omitted(const char *key, meta_field f, const json_t *v)
{
    if (json_is_null(v))
        return true;
    if (json_is_string(v)) /* the plain strings; timestamps are pointers */
        return f == MF_STRING && !*json_string_value(v);
    if (json_is_object(v))
        return !json_object_size(v) && f == MF_MAP;
    if (json_is_array(v))
        return !json_array_size(v) && (f == MF_OWNERS || f == MF_LIST);
    return json_is_integer(v) && !json_integer_value(v) && !strcmp(key, "generation");
}

/* ObjectMeta fields; anything else in metadata is dropped, as decoding
 * into ObjectMeta does upstream (metadata coercion), and so are empty
 * values, which encoding ObjectMeta again leaves out: `annotations: {}`
 * in a body (kubectl diff's dry-run patch sends one) is stored and
 * returned as no annotations at all. `managedFields: []` stays: it is a
 * request to reset them (upstream's isResetManagedFields: a non-nil empty
 * list), which the field manager acts on and removes. */
static void coerce_metadata(json_t *obj)
{
    json_t *meta = json_object_get(obj, "metadata");
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(meta, tmp, k, v)
    {
        meta_field f = meta_field_of(k);
        if (f == MF_NONE || meta_value_omitted(k, f, v))
            json_object_del(meta, k);
    }
}

static json_t *objectmeta_schema_v;

static void objectmeta_schema_init(void)
{
    objectmeta_schema_v =
        builtin_schema_fragment("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
}

/* The ObjectMeta schema, built once and kept for the process (NULL only
 * if that failed: the type check is then skipped). */
static const json_t *objectmeta_schema(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, objectmeta_schema_init);
    return objectmeta_schema_v;
}

/* Whether every field of an object's entries in a list field has the
 * JSON type `want` names for it ('s' string, 'b' boolean, 'o' object;
 * fields not named are not looked at). */
static bool entries_typed(const json_t *list, const char *const *names, const char *want)
{
    if (!json_is_array(list))
        return false;
    size_t i;
    const json_t *e;
    json_array_foreach(list, i, e)
    {
        if (!json_is_object(e))
            return false;
        for (size_t k = 0; names[k]; k++) {
            const json_t *v = json_object_get(e, names[k]);
            if (v && !(want[k] == 's'   ? json_is_string(v)
                       : want[k] == 'b' ? json_is_boolean(v)
                                        : json_is_object(v)))
                return false;
        }
    }
    return true;
}

static bool all_strings(const json_t *v)
{
    const char *k;
    const json_t *e;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, k, e) if (!json_is_string(e)) return false;
        return true;
    }
    if (json_is_array(v)) {
        json_array_foreach(v, i, e) if (!json_is_string(e)) return false;
        return true;
    }
    return false;
}

/* A quick look at coerced metadata (known keys, no nulls): true when each
 * field has the JSON type the ObjectMeta schema gives it, which is every
 * write but a malformed one. Never more lenient than the schema walk,
 * which runs only when this says no (a walk costs about 2 us; a create
 * about 65). */
static bool metadata_well_typed(const json_t *meta)
{
    static const char *const owner[] = {"apiVersion",         "kind", "name", "uid", "controller",
                                        "blockOwnerDeletion", NULL};
    static const char *const managed[] = {"manager",    "operation",   "apiVersion", "time",
                                          "fieldsType", "subresource", "fieldsV1",   NULL};
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)meta, k, v)
    {
        bool ok;
        switch (meta_field_of(k)) {
        case MF_INTEGER:
            ok = json_is_integer(v);
            break;
        case MF_MAP:
            ok = json_is_object(v) && all_strings(v);
            break;
        case MF_LIST:
            ok = json_is_array(v) && all_strings(v);
            break;
        case MF_OWNERS:
            ok = entries_typed(v, owner, "ssssbb");
            break;
        case MF_MANAGED:
            ok = entries_typed(v, managed, "sssssso");
            break;
        default:
            ok = json_is_string(v); /* the names, uid, resourceVersion, timestamps */
            break;
        }
        if (!ok)
            return false;
    }
    return true;
}

/* Every kind's metadata decodes into ObjectMeta upstream, custom
 * resources' too, so `labels: ""` or a number among the annotations is a
 * decoding error (400) there; stored, it would break every client that
 * lists the resource. Returns that 400, or NULL when the metadata fits. */
static ckube_status *metadata_decoding_error(const resource_type *t, const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta))
        return NULL; /* a missing or non-object metadata is reported elsewhere */
    if (metadata_well_typed(meta))
        return NULL;
    ckube_status *scratch = ckube_status_invalid_begin(t->group, t->kind, "");
    schema_validate_at(objectmeta_schema(), meta, "metadata", scratch);
    /* Only a wrong type stops decoding; missing owner reference fields
     * and the like are ckube_validate_object_meta's 422. */
    ckube_status *bad = cannot_be_handled(t, scratch);
    ckube_status_free(scratch);
    return bad;
}

/* Validates a prepared object: metadata, the type's rules, the schema.
 * Returns NULL if valid. */
static ckube_status *validate_object(req_ctx *rc, json_t *obj, const json_t *old, int validation)
{
    const resource_type *t = rc->type;
    coerce_metadata(obj);
    const char *name = ckube_obj_name(obj);
    ckube_status *inv = ckube_status_invalid_begin(t->group, t->kind, name ? name : "");
    ckube_status *st = apply_schema(rc, obj, validation, inv);
    if (st) {
        ckube_status_free(inv);
        return st;
    }
    ckube_status *bad = metadata_decoding_error(t, obj);
    if (!bad)
        bad = decoding_error(t, inv);
    if (bad) {
        ckube_status_free(inv);
        return bad;
    }
    ckube_validate_object_meta(obj, t->namespaced, t->name_kind, inv);
    if (old) {
        const char *ouid = ckube_obj_uid(old), *nuid = ckube_obj_uid(obj);
        if (ouid && nuid && strcmp(ouid, nuid))
            ckube_field_invalid(inv, "metadata.uid", nuid, "field is immutable");
    }
    /* Type rules assume well-typed fields: skip them when the schema
     * already found the object malformed. */
    if (t->validate && !inv->ncauses)
        t->validate(t, obj, old, inv);
    if (inv->ncauses) {
        ckube_status_invalid_finish(inv);
        return inv;
    }
    ckube_status_free(inv);
    return NULL; /* the size limit is checked where the object is encoded */
}

/* ---- writes ---------------------------------------------------------------- */

/* A write request: the request's side of a generic-store write (what the
 * body says and how the reply looks); registry/generic does the rest. */
typedef enum { W_CREATE, W_UPDATE, W_PATCH, W_STATUS, W_FINALIZE, W_DELETE } write_kind;

typedef struct write_req write_req;
typedef struct collection_del collection_del;

struct write_req {
    store_write sw; /* first: the store's hooks get &w->sw */
    req_ctx *rc;
    write_kind kind;
    json_t *body; /* request body (object or patch); owned */
    body_type btype;
    int validation;
    bool scale_reply; /* /scale: answer with the Scale, not the object */
    bool internal;    /* built by the server (scale): no client precondition */
    /* field management */
    char *manager;           /* fieldManager, or derived from the User-Agent; owned */
    const char *subresource; /* "", "status", "scale", "finalize" (static) */
    bool force;              /* apply: force=true */
    fm_managed *applied;     /* managedFields an apply computed; owned */
    /* delete preconditions (sw.pre_uid, sw.pre_rv point here) */
    char *pre_uid;
    char *pre_rv;
    collection_del *parent;
    /* admission: the webhooks being asked */
    adm_run *adm;
    /* The answer's object being converted (a type with convert), and the
     * code to answer with. */
    resource_conversion *conv;
    int conv_code;
    /* A /scale write under admission: the Scale objects webhooks see
     * (owned) and the object the new replicas go back into (borrowed
     * from the store while it waits). */
    json_t *adm_scale, *adm_old_scale, *adm_target;
};

/* A deletecollection: the objects matched when it arrived, deleted at
 * most COLLECTION_INFLIGHT at a time (each delete holds its object as a
 * tree until its write is done), and the deleted objects kept encoded
 * for the answer, not as trees. */
#define COLLECTION_INFLIGHT 32
struct collection_del {
    req_ctx *rc;
    cobj **objs; /* the snapshot; an entry is released once its delete starts */
    size_t n, next;
    size_t running; /* deletes started and not settled */
    bool pumping;   /* collection_pump is on the stack */
    bool dry_run;
    const char *propagation;
    struct evbuffer *items; /* the deleted objects, encoded, comma separated */
    size_t nitems;
    ckube_status *error;
};

static void write_free(write_req *w)
{
    if (w->adm)
        adm_run_cancel(w->adm);
    if (w->conv)
        w->sw.type->convert_cancel(w->conv);
    json_decref(w->adm_scale);
    json_decref(w->adm_old_scale);
    json_decref(w->body);
    free(w->manager);
    fm_managed_free(w->applied);
    free(w->pre_uid);
    free(w->pre_rv);
    free(w);
}

static void collection_settle(collection_del *p, ckube_status *st, json_t *obj);

static bool is_status_body(const json_t *body)
{
    const char *kind = json_string_value(json_object_get(body, "kind"));
    return kind && !strcmp(kind, "Status");
}

/* Finishes a write: replies (or reports to the collection) and frees. */
static bool retry_create_fresh(req_ctx *rc, const ckube_status *st);

static void write_finish_converted(write_req *w, int code, json_t *body, ckube_status *st);
static json_t *scale_of(const resource_type *t, const json_t *obj);

static void write_converted(void *arg, json_t *objs, ckube_status *st)
{
    write_req *w = arg;
    w->conv = NULL;
    json_t *body = json_incref(json_array_get(objs, 0));
    json_decref(objs);
    if (!body && !st)
        st = ckube_status_internal("conversion returned no object");
    write_finish_converted(w, w->conv_code, body, st);
}

/* Finishes a write: its object (a type that converts through a webhook
 * answers in the request's version) and the reply. */
static void write_finish(write_req *w, int code, json_t *body, ckube_status *st)
{
    const resource_type *t = w->rc ? w->rc->type : NULL;
    if (body && !st && t && t->convert && !is_status_body(body)) {
        w->conv_code = code;
        json_t *objs = json_pack("[o]", body);
        w->conv = t->convert(t, w->rc->lp->out, w->rc->srv->cache, objs, false, false,
                             write_converted, w);
        json_decref(objs);
        return;
    }
    write_finish_converted(w, code, body, st);
}

static void write_finish_converted(write_req *w, int code, json_t *body, ckube_status *st)
{
    if (body && !st && w->scale_reply && w->rc) {
        json_t *scale = scale_of(w->rc->type, body);
        json_decref(body);
        body = scale;
    } else if (body && w->rc && w->rc->type->present && !is_status_body(body)) {
        json_t *copy = json_deep_copy(body);
        json_decref(body);
        w->rc->type->present(w->rc->type, copy);
        body = copy;
    }
    if (w->parent) {
        collection_settle(w->parent, st, body);
        write_free(w);
        return;
    }
    req_ctx *rc = w->rc;
    w->rc = NULL;
    write_free(w);
    if (st && retry_create_fresh(rc, st)) {
        ckube_status_free(st);
        json_decref(body);
    } else if (st)
        reply_status(rc, st);
    else
        reply_json(rc, code, rc->want_partial ? partial_of(rc, body) : body);
}

static json_t *delete_success_body(const resource_type *t, const json_t *obj)
{
    json_t *st = json_pack("{s:s,s:s,s:{},s:s,s:{s:s,s:s,s:s},s:i}", "kind", "Status", "apiVersion",
                           "v1", "metadata", "status", "Success", "details", "name",
                           ckube_obj_name(obj) ? ckube_obj_name(obj) : "", "kind", t->resource,
                           "uid", ckube_obj_uid(obj) ? ckube_obj_uid(obj) : "", "code", 200);
    if (*t->group)
        json_object_set_new(json_object_get(st, "details"), "group", json_string(t->group));
    return st;
}

static json_t *scale_of(const resource_type *t, const json_t *obj);

/* evbuffer cleanup for malloc'd bytes. */
static void free_ref_cb(const void *data, size_t len, void *arg)
{
    (void)len;
    (void)arg;
    free((void *)data);
}

/* evbuffer cleanup for a cached object's bytes. */
static void unref_cobj_cb(const void *data, size_t len, void *arg)
{
    (void)data;
    (void)len;
    cobj_unref(arg);
}

/* The reply to a stored create or update, without encoding the object
 * again: the bytes just stored (r->value: r->obj without resourceVersion,
 * as ckube_json_dumps writes it) with resourceVersion set as the store
 * set it in r->obj, byte for byte what encoding r->obj would give. The
 * watch cache has usually made exactly those bytes already: the committer
 * hands a group's events to its watchers before it reports the writes
 * done (storage.c, run_group), so the object at r->rev is sent from the
 * cache by reference, without scanning or copying it again. Where the
 * cache lags the write (etcd's watch is its own stream) the bytes are
 * made here. Returns false (nothing sent) when that does not apply:
 * another shape to present, a collection child, bytes the scanner does
 * not vouch for. */
static bool reply_stored(write_req *w, int code, const store_result *r)
{
    const resource_type *t = w->rc->type;
    if (t->present || t->convert || w->parent || !r->value || !r->value_len || w->rc->want_partial)
        return false;
    struct evbuffer *buf = evbuffer_new();
    cobj *o = cacher_get(w->rc->srv->cache, w->sw.key);
    if (o && o->rev == r->rev) {
        evbuffer_add_reference(buf, o->json, o->len, unref_cobj_cb, o);
    } else {
        cobj_unref(o);
        jscan_meta meta;
        if (!jscan_canonical(r->value, r->value_len, &meta) || !meta.metadata) {
            evbuffer_free(buf);
            return false;
        }
        char rv[32];
        snprintf(rv, sizeof rv, "%" PRId64, r->rev);
        size_t n = jscan_set_rv(r->value, r->value_len, &meta, rv, NULL);
        char *out = xmalloc(n + 1);
        jscan_set_rv(r->value, r->value_len, &meta, rv, out);
        evbuffer_add_reference(buf, out, n, free_ref_cb, NULL);
    }
    req_ctx *rc = w->rc;
    w->rc = NULL;
    write_free(w);
    reply_evbuffer(rc, code, buf);
    evbuffer_free(buf);
    return true;
}

/* The store's done hook: the reply's shape. */
static void write_done(store_write *sw, store_result *r)
{
    write_req *w = (write_req *)sw;
    const resource_type *t = w->rc->type;
    if (r->st) {
        write_finish(w, 0, NULL, r->st);
        return;
    }
    json_t *obj = r->obj;
    if (r->deleted) {
        /* A deletecollection child reports the object it deleted: the
         * collection's answer lists them. */
        json_t *body = obj;
        if (w->kind == W_DELETE && !t->return_deleted_object && !w->parent) {
            body = delete_success_body(t, obj);
            json_decref(obj);
        }
        free(r->value);
        write_finish(w, 200, body, NULL);
        return;
    }
    if (w->scale_reply) {
        /* the Scale is made from the object in the request's version
         * (write_finish_converted) */
        free(r->value);
        write_finish(w, 200, obj, NULL);
        return;
    }
    int code = r->code;
    if (reply_stored(w, code, r)) {
        json_decref(obj);
        free(r->value);
        return;
    }
    free(r->value);
    write_finish(w, code, obj, NULL);
}

/* What the field manager needs to know about the request's type. */
static fm_type field_type(const resource_type *t)
{
    return (fm_type){.schema = t->schema,
                     .patch_meta = t->patch_meta,
                     .custom = t->is_custom,
                     .status_subresource = t->status_subresource,
                     .api_version = t->api_version,
                     .kind = t->kind};
}

static fm_op field_op(const write_req *w)
{
    return (fm_op){.manager = w->manager, .subresource = w->subresource, .force = w->force};
}

/* The store's decorate hook: managedFields on the prepared object. An
 * apply stores what it computed, every other write is an Update from
 * `old` (NULL on create). Then a change of nothing but managedFields
 * times is undone, so a no-op stays a no-op. */
static void record_managed_fields(store_write *sw, const json_t *old, json_t *obj)
{
    write_req *w = (write_req *)sw;
    if (w->applied) {
        fm_managed_store(w->applied, obj);
    } else {
        fm_type ft = field_type(w->rc->type);
        fm_op op = field_op(w);
        fm_update(&ft, &op, old, obj);
    }
    fm_ignore_timestamp_only_changes(old, obj);
}

/* The store's validate hook. */
static ckube_status *write_validate(store_write *sw, json_t *obj, const json_t *old)
{
    write_req *w = (write_req *)sw;
    ckube_status *st = validate_object(w->rc, obj, old, w->validation);
    /* RBAC's own objects: no one grants rights they do not hold. */
    const resource_type *t = w->rc->type;
    if (!st && w->rc->srv->rbac && !strcmp(t->group, "rbac.authorization.k8s.io"))
        st = authz_check_rbac_write(w->rc->srv->rbac, w->rc->user, t->resource, w->rc->ri.ns, obj,
                                    old);
    return st;
}

/* The object a create writes. A create starts again from the body only
 * when a generated name collides; with a name given, the body is used up
 * (no copy). */
static json_t *create_body(write_req *w)
{
    const char *name = ckube_obj_name(w->body);
    if (name && *name) {
        json_t *body = w->body;
        w->body = NULL;
        return body;
    }
    return json_deep_copy(w->body);
}

/* An apply to an object that does not exist creates it. */
static json_t *apply_create(write_req *w, ckube_status **st)
{
    req_ctx *rc = w->rc;
    fm_type ft = field_type(rc->type);
    fm_op op = field_op(w);
    fm_managed_free(w->applied);
    w->applied = NULL;
    json_t *obj = fm_apply(&ft, &op, NULL, w->body, &w->applied, st);
    if (!obj)
        return NULL;
    const char *name = ckube_obj_name(obj);
    if (!name || strcmp(name, rc->ri.name)) {
        *st = ckube_status_bad_request(
            "the name of the object (%s) does not match the name on the URL (%s)", name ? name : "",
            rc->ri.name);
        json_decref(obj);
        return NULL;
    }
    if ((*st = check_gvk(rc, obj))) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

/* The object a PUT writes: the body itself when it names a
 * resourceVersion (a conflict is then the client's to retry, so the body
 * is not needed again), else a copy kept for retries. Not copying a body
 * that may be as large as the decode budget keeps a PUT to the body, the
 * stored object and their result. */
static json_t *body_for_update(write_req *w)
{
    const char *rv = ckube_obj_resource_version(w->body);
    if (rv && *rv) {
        json_t *obj = w->body;
        w->body = NULL;
        return obj;
    }
    return json_deep_copy(w->body);
}

/* A patch applies to the object as this version serves it (a custom
 * resource's other version, a v1beta1 CRD); the store's prepare turns
 * the result back into the stored form. */
static json_t *patch_object(write_req *w, const json_t *old, ckube_status **st)
{
    req_ctx *rc = w->rc;
    const resource_type *t = rc->type;
    char *err = NULL;
    json_t *obj = NULL;
    json_t *base = (json_t *)old;
    if (t->present) {
        base = json_deep_copy(old);
        t->present(t, base);
    }
    switch (w->btype) {
    case BODY_JSON_PATCH:
        obj = ckube_json_patch_apply(base, w->body, &err);
        break;
    case BODY_MERGE_PATCH:
        obj = ckube_merge_patch_apply(base, w->body, &err);
        break;
    case BODY_STRATEGIC_PATCH:
        obj = ckube_strategic_merge_patch_apply(base, w->body, ckube_patch_meta_table,
                                                (void *)t->patch_meta, &err);
        break;
    case BODY_APPLY_PATCH: {
        fm_type ft = field_type(t);
        fm_op op = field_op(w);
        fm_managed_free(w->applied);
        w->applied = NULL;
        obj = fm_apply(&ft, &op, base, w->body, &w->applied, st);
        break;
    }
    default:
        break;
    }
    if (base != old)
        json_decref(base);
    if (!obj && w->btype == BODY_APPLY_PATCH)
        return NULL;
    if (!obj) {
        *st = ckube_status_new(422, CKUBE_REASON_INVALID, "%s", err ? err : "invalid patch");
        free(err);
        return NULL;
    }
    if (!json_is_object(obj)) {
        json_decref(obj);
        *st = ckube_status_bad_request("the patch did not produce an object");
        return NULL;
    }
    if ((*st = check_gvk(rc, obj)) || (*st = check_name(rc, obj))) {
        json_decref(obj);
        return NULL;
    }
    return obj;
}

/* /finalize: the namespace's spec.finalizers from the body. */
static json_t *finalize_object(write_req *w, const json_t *old)
{
    json_t *obj = json_deep_copy(old);
    json_t *fin = ckube_json_get_path(w->body, "spec.finalizers");
    json_t *spec = ckube_json_object_ensure(obj, "spec");
    if (fin)
        json_object_set(spec, "finalizers", fin);
    else
        json_object_del(spec, "finalizers");
    return obj;
}

/* The store's transform hook: the object to write, from the body and the
 * current object (NULL: a create). */
static json_t *write_transform(store_write *sw, const json_t *old, ckube_status **st)
{
    write_req *w = (write_req *)sw;
    if (!old)
        return w->kind == W_CREATE ? create_body(w) : apply_create(w, st);
    json_t *obj = NULL;
    switch (w->kind) {
    case W_UPDATE:
    case W_STATUS:
        obj = body_for_update(w);
        break;
    case W_PATCH:
        obj = patch_object(w, old, st);
        break;
    case W_FINALIZE:
        obj = finalize_object(w, old);
        break;
    default:
        break;
    }
    return obj;
}

/* The store's precondition hook: the resourceVersion the client asked
 * to be current. For PUT that is the body's; for PATCH only one the
 * patch itself carries (the patched object otherwise inherits the
 * current resourceVersion, and a lost race is retried on the newer
 * object). */
static const char *explicit_rv(store_write *sw, const json_t *result)
{
    write_req *w = (write_req *)sw;
    if (w->kind != W_PATCH)
        return ckube_obj_resource_version(result);
    if (w->btype != BODY_JSON_PATCH)
        return ckube_obj_resource_version(w->body);
    /* A JSON patch names it by pointer. */
    size_t i;
    json_t *op;
    json_array_foreach(w->body, i, op)
    {
        const char *path = json_string_value(json_object_get(op, "path"));
        if (path && !strcmp(path, "/metadata/resourceVersion"))
            return ckube_obj_resource_version(result);
    }
    return NULL;
}

/* ---- admission webhooks (apiserver/admission) ---------------------------- */

static req_ctx *write_rc(const write_req *w)
{
    return w->rc ? w->rc : w->parent->rc;
}

static void set_path(json_t *obj, const char *path, json_t *v);

static void admit_done(void *arg, ckube_status *st)
{
    write_req *w = arg;
    w->adm = NULL;
    /* a mutated Scale: its replicas are the object's */
    json_t *replicas = ckube_json_get_path(w->adm_scale, "spec.replicas");
    if (!st && w->adm_target && json_is_integer(replicas))
        set_path(w->adm_target, w->sw.type->scale_spec_replicas_path, replicas);
    json_decref(w->adm_scale);
    json_decref(w->adm_old_scale);
    w->adm_scale = w->adm_old_scale = w->adm_target = NULL;
    store_admit_resume(&w->sw, st);
}

static void admit_warn(void *arg, const char *text)
{
    req_add_warning(write_rc(arg), text);
}

static void admit_annotate(void *arg, const char *key, const char *value)
{
    audit_req *a = write_rc(arg)->audit;
    /* the patches a webhook made are recorded from level Request up, as
     * upstream's AddAnnotationWithLevel */
    if (!strncmp(key, "patch.webhook.admission.k8s.io/", 31) &&
        (!a || audit_req_level(a) < AUDIT_LEVEL_REQUEST))
        return;
    audit_req_annotate(a, key, value);
}

static const adm_callbacks admit_callbacks = {admit_done, admit_warn, admit_annotate};

/* The operation's options as webhooks see them (metav1's CreateOptions,
 * UpdateOptions, DeleteOptions). */
static json_t *admission_options(void *ctx, const char *op)
{
    const write_req *w = ctx;
    const char *kind = !strcmp(op, "CREATE") ? "CreateOptions"
                       : !strcmp(op, "UPDATE")
                           ? (w->kind == W_PATCH ? "PatchOptions" : "UpdateOptions")
                           : "DeleteOptions";
    json_t *o = json_pack("{s:s,s:s}", "kind", kind, "apiVersion", "meta.k8s.io/v1");
    if (w->sw.dry_run)
        json_object_set_new(o, "dryRun", json_pack("[s]", "All"));
    if (w->manager && strcmp(kind, "DeleteOptions"))
        json_object_set_new(o, "fieldManager", json_string(w->manager));
    if (w->force)
        json_object_set_new(o, "force", json_true());
    if (w->sw.propagation)
        json_object_set_new(o, "propagationPolicy", json_string(w->sw.propagation));
    return o;
}

/* The store's admit hook: the matching webhooks, asked while the write
 * waits. Nothing matching (the common case) costs a look at the
 * configurations' snapshot. */
static bool write_admit(store_write *sw, store_admit_stage stage, json_t *obj, const json_t *old,
                        ckube_status **st)
{
    (void)st;
    write_req *w = (write_req *)sw;
    req_ctx *rc = write_rc(w);
    if (!rc->srv->admission || !rc->lp->out)
        return true;
    const resource_type *t = rc->type;
    const char *op = sw->verb == STORE_DELETE ? "DELETE" : old ? "UPDATE" : "CREATE";
    const char *name = obj ? ckube_obj_name(obj) : old ? ckube_obj_name(old) : NULL;
    adm_attrs at = {.operation = op,
                    .group = t->group,
                    .version = t->version,
                    .resource = t->resource,
                    .kind = t->kind,
                    .subresource = w->subresource ? w->subresource : "",
                    .namespaced = t->namespaced,
                    .ns = t->namespaced ? sw->ns : "",
                    .name = name ? name : "",
                    .user = rc->user,
                    .dry_run = sw->dry_run,
                    .options = admission_options,
                    .options_ctx = w,
                    .type = t,
                    .reg = rc->srv->registry};
    if (!strcmp(at.subresource, "scale") && t->scale_subresource && sw->verb != STORE_DELETE) {
        /* webhooks of /scale see autoscaling/v1 Scales, as upstream's */
        at.kind = "Scale";
        at.kind_group = "autoscaling";
        at.kind_version = "v1";
        w->adm_scale = obj ? scale_of(t, obj) : NULL;
        w->adm_old_scale = old ? scale_of(t, old) : NULL;
        w->adm_target = stage == STORE_ADMIT_MUTATE ? obj : NULL;
        w->adm = admission_run(rc->srv->admission, rc->lp->out, stage == STORE_ADMIT_MUTATE, &at,
                               w->adm_scale, w->adm_old_scale, &admit_callbacks, w);
        if (!w->adm) {
            json_decref(w->adm_scale);
            json_decref(w->adm_old_scale);
            w->adm_scale = w->adm_old_scale = w->adm_target = NULL;
        }
        return w->adm == NULL;
    }
    w->adm = admission_run(rc->srv->admission, rc->lp->out, stage == STORE_ADMIT_MUTATE, &at, obj,
                           old, &admit_callbacks, w);
    return w->adm == NULL;
}

static const store_hooks write_hooks = {
    .transform = write_transform,
    .precondition_rv = explicit_rv,
    .validate = write_validate,
    .decorate = record_managed_fields,
    .admit = write_admit,
    .done = write_done,
};

/* The store ends writes on the request's loop. */
static void post_to_loop(void *lp, void (*fn)(void *), void *arg)
{
    loop_post(lp, fn, arg);
}

/* Hands the write to the generic store. w may be freed before this
 * returns: callers must not touch it after. */
static void run_write(write_req *w)
{
    store_write *sw = &w->sw;
    sw->verb = w->kind == W_CREATE   ? STORE_CREATE
               : w->kind == W_DELETE ? STORE_DELETE
                                     : STORE_UPDATE;
    sw->require_rv = w->kind == W_UPDATE && !w->internal;
    sw->finalize = w->kind == W_FINALIZE;
    /* apply creates what is missing; so does a PUT of a type whose
     * upstream strategy allows create on update (not of a subresource) */
    sw->create_on_missing =
        !sw->status_only && ((w->kind == W_PATCH && w->btype == BODY_APPLY_PATCH) ||
                             (w->kind == W_UPDATE && !w->internal &&
                              sw->type->allow_create_on_update && !*w->subresource));
    sw->pre_uid = w->pre_uid;
    sw->pre_rv = w->pre_rv;
    store_write_start(sw);
}

static write_req *write_new(req_ctx *rc, write_kind kind)
{
    write_req *w = xcalloc(1, sizeof *w);
    w->rc = rc;
    w->kind = kind;
    w->subresource = "";
    w->sw.store = rc->srv->store;
    w->sw.type = rc->type;
    w->sw.hooks = &write_hooks;
    w->sw.ns = rc->ri.ns;
    w->sw.name = rc->ri.name;
    w->sw.post = post_to_loop;
    w->sw.post_ctx = rc->lp;
    w->sw.out = rc->lp->out;
    return w;
}

/* Common query checks of every write: dryRun and fieldValidation. */
static bool write_params(req_ctx *rc, write_req *w)
{
    int dr = dry_run(rc);
    if (dr < 0) {
        reply_status(rc,
                     ckube_status_bad_request("Invalid dry run value: %s, valid values are: All",
                                              req_query(rc, "dryRun")));
        return false;
    }
    int fv;
    if (!field_validation_or_reply(rc, &fv))
        return false;
    w->sw.dry_run = dr == 1;
    w->validation = fv;
    return true;
}

/* Resolves the write's field manager: fieldManager, else the product
 * part of the User-Agent (as upstream), after checking it the way
 * upstream validates Create/Update/PatchOptions. Replies (422) and
 * returns false when it is invalid. */
static bool write_manager(req_ctx *rc, write_req *w, const char *options_kind, bool apply)
{
    const char *m = req_query(rc, "fieldManager");
    ckube_status *st = fm_validate_manager(m, options_kind, apply);
    if (st) {
        reply_status(rc, st);
        return false;
    }
    if (m && *m)
        w->manager = xstrdup(m);
    else
        w->manager = fm_manager_from_user_agent(httpd_req_header(rc->req, "User-Agent"));
    return true;
}

/* Create and update (PUT) take a whole object: JSON, YAML or protobuf.
 * Returns the write with its decoded body, or NULL after replying. */
static write_req *object_write(req_ctx *rc, write_kind kind)
{
    body_type bt = content_type(rc);
    if (bt != BODY_JSON && bt != BODY_YAML && bt != BODY_PROTOBUF) {
        reply_status(rc, ckube_status_new(415, CKUBE_REASON_UNSUPPORTED_MEDIA,
                                          "the body of the request was in an unknown format - "
                                          "accepted media types include: application/json, "
                                          "application/yaml, application/vnd.kubernetes.protobuf"));
        return NULL;
    }
    write_req *w = write_new(rc, kind);
    w->sw.status_only = kind == W_STATUS;
    w->subresource = kind == W_STATUS ? "status" : kind == W_FINALIZE ? "finalize" : "";
    if (!write_params(rc, w) ||
        !write_manager(rc, w, kind == W_CREATE ? "CreateOptions" : "UpdateOptions", false)) {
        write_free(w);
        return NULL;
    }
    ckube_status *st = NULL;
    w->body = read_body(rc, bt, w->validation, &st);
    if (!st && !json_is_object(w->body))
        st = ckube_status_bad_request("the request body must be a JSON object");
    if (!st && kind != W_FINALIZE)
        st = check_gvk(rc, w->body);
    if (!st && kind != W_CREATE)
        st = check_name(rc, w->body);
    if (st) {
        write_finish(w, 0, NULL, st);
        return NULL;
    }
    return w;
}

static void do_create(req_ctx *rc)
{
    write_req *w = object_write(rc, W_CREATE);
    if (w)
        run_write(w);
}

static void do_update(req_ctx *rc, write_kind kind)
{
    write_req *w = object_write(rc, kind);
    if (w)
        run_write(w);
}

/* Drops the fields an apply configuration names that the type does not
 * have, reporting them as fieldValidation asks (Strict: 400). Applied
 * fields are owned, so unknown ones must go before ownership is
 * computed. */
static ckube_status *prune_apply_config(req_ctx *rc, write_req *w)
{
    const resource_type *t = rc->type;
    if (!t->schema)
        return NULL;
    char **unknown = NULL;
    size_t nunknown = 0;
    schema_apply(t->schema, w->body, SCHEMA_PRUNE, NULL, &unknown, &nunknown);
    return unknown_fields(rc, unknown, nunknown, w->validation);
}

/* The value upstream's YAML decoder names when an apply body is not a
 * mapping. */
static const char *go_json_type(const json_t *v)
{
    if (json_is_array(v))
        return "array";
    if (json_is_string(v))
        return "string";
    if (json_is_number(v))
        return "number";
    return "bool";
}

static void do_patch(req_ctx *rc, write_kind kind)
{
    body_type bt = content_type(rc);
    const resource_type *t = rc->type;
    if (bt == BODY_UNSUPPORTED || bt == BODY_JSON || bt == BODY_YAML ||
        (bt == BODY_STRATEGIC_PATCH && !t->patch_meta)) {
        reply_status(rc, ckube_status_new(
                             415, CKUBE_REASON_UNSUPPORTED_MEDIA,
                             "the body of the request was in an unknown format - accepted media "
                             "types include: application/json-patch+json, "
                             "application/merge-patch+json%s, application/apply-patch+yaml",
                             t->patch_meta ? ", application/strategic-merge-patch+json" : ""));
        return;
    }
    bool apply = bt == BODY_APPLY_PATCH;
    rc->is_apply = apply;
    if (!apply && req_query(rc, "force")) {
        ckube_status *st = ckube_status_invalid_begin("meta.k8s.io", "PatchOptions", "");
        ckube_field_forbidden(st, "force", "may not be specified for non-apply patch");
        ckube_status_invalid_finish(st);
        reply_status(rc, st);
        return;
    }
    write_req *w = write_new(rc, kind);
    w->subresource = kind == W_STATUS ? "status" : "";
    if (!write_params(rc, w) || !write_manager(rc, w, "PatchOptions", apply)) {
        write_free(w);
        return;
    }
    w->btype = bt;
    w->force = apply && req_query_bool(rc, "force");
    ckube_status *st = NULL;
    w->body = read_body(rc, bt, w->validation, &st);
    if (!st && apply && json_is_null(w->body)) {
        json_decref(w->body);
        w->body = json_object();
    }
    if (!st && apply && !json_is_object(w->body))
        st = ckube_status_bad_request("error decoding YAML: error unmarshaling JSON: while "
                                      "decoding JSON: json: cannot unmarshal %s into Go value of "
                                      "type map[string]interface {}",
                                      go_json_type(w->body));
    if (!st && bt == BODY_JSON_PATCH && !json_is_array(w->body))
        st = ckube_status_bad_request("json patch must be an array of operations");
    if (!st && bt != BODY_JSON_PATCH && !json_is_object(w->body))
        st = ckube_status_bad_request("the patch must be a JSON object");
    if (!st && apply)
        st = prune_apply_config(rc, w);
    if (st) {
        write_finish(w, 0, NULL, st);
        return;
    }
    if (kind == W_STATUS) {
        /* Patch /status: patch the whole object, keep only its status. */
        w->kind = W_PATCH;
        w->sw.status_only = true;
    }
    run_write(w);
}

/* Records the propagation policy of a delete (propagationPolicy, or the
 * deprecated orphanDependents); both set and disagreeing is a 422 as
 * upstream. `orphan` may be NULL. */
static ckube_status *set_propagation(write_req *w, const char *pp, const json_t *orphan)
{
    static const char *const policies[] = {"Background", "Foreground", "Orphan"};
    const char *policy = NULL;
    if (pp) {
        for (size_t i = 0; i < 3; i++)
            if (!strcmp(pp, policies[i]))
                policy = policies[i];
        if (!policy)
            return ckube_status_bad_request("invalid propagationPolicy %s", pp);
    }
    if (json_is_boolean(orphan)) {
        if (policy) {
            ckube_status *st = ckube_status_invalid_begin("meta.k8s.io", "DeleteOptions", "");
            ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, "propagationPolicy",
                                   "Invalid value: \"%s\": orphanDependents and "
                                   "deletionPropagation cannot be both set",
                                   policy);
            ckube_status_invalid_finish(st);
            return st;
        }
        policy = json_is_true(orphan) ? "Orphan" : "Background";
    }
    if (policy)
        w->sw.propagation = policy;
    return NULL;
}

/* DeleteOptions.dryRun from a body (may be NULL): every entry must be
 * "All" (upstream's ValidateDryRun), else a 422 that names the list as
 * Go prints a []string. */
static ckube_status *delete_dry_run(const json_t *dr, bool *dry)
{
    if (!dr || json_is_null(dr))
        return NULL;
    bool ok = json_is_array(dr);
    size_t i;
    json_t *v;
    json_array_foreach(dr, i, v) ok &= json_is_string(v);
    if (!ok)
        return ckube_status_bad_request("DeleteOptions.dryRun must be a list of strings");
    char *list = xstrdup("[]string{");
    bool all = true;
    json_array_foreach(dr, i, v)
    {
        all &= !strcmp(json_string_value(v), "All");
        char *q = ckube_go_quote(json_string_value(v));
        char *next = xasprintf("%s%s%s", list, i ? ", " : "", q);
        free(q);
        free(list);
        list = next;
    }
    ckube_status *st = NULL;
    if (!all) {
        st = ckube_status_invalid_begin("meta.k8s.io", "DeleteOptions", "");
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, "dryRun",
                               "Unsupported value: %s}: supported values: \"All\"", list);
        ckube_status_invalid_finish(st);
    }
    free(list);
    *dry = all && json_array_size(dr) > 0;
    return st;
}

/* DeleteOptions come from the body when there is one, else the query. */
static ckube_status *delete_options(req_ctx *rc, write_req *w)
{
    struct evbuffer *in = httpd_req_body(rc->req);
    if (evbuffer_get_length(in) > 0) {
        ckube_status *st = NULL;
        body_type bt = content_type(rc);
        json_t *opts =
            read_body(rc, bt == BODY_PROTOBUF || bt == BODY_YAML ? bt : BODY_JSON, 1, &st);
        if (st)
            return st;
        if (!json_is_object(opts)) {
            json_decref(opts);
            return ckube_status_bad_request("DeleteOptions must be an object");
        }
        json_t *pre = json_object_get(opts, "preconditions");
        const char *uid = json_string_value(json_object_get(pre, "uid"));
        const char *rv = json_string_value(json_object_get(pre, "resourceVersion"));
        if (uid)
            w->pre_uid = xstrdup(uid);
        if (rv)
            w->pre_rv = xstrdup(rv);
        st = delete_dry_run(json_object_get(opts, "dryRun"), &w->sw.dry_run);
        if (!st)
            st = set_propagation(w, json_string_value(json_object_get(opts, "propagationPolicy")),
                                 json_object_get(opts, "orphanDependents"));
        json_decref(opts);
        if (st)
            return st;
    }
    if (!w->sw.propagation) {
        const char *od = req_query(rc, "orphanDependents");
        json_t *odj = od ? json_boolean(req_query_bool(rc, "orphanDependents")) : NULL;
        ckube_status *st = set_propagation(w, req_query(rc, "propagationPolicy"), odj);
        json_decref(odj);
        if (st)
            return st;
    }
    return NULL;
}

static void do_delete(req_ctx *rc)
{
    write_req *w = write_new(rc, W_DELETE);
    if (!write_params(rc, w)) {
        write_free(w);
        return;
    }
    ckube_status *st = delete_options(rc, w);
    if (st) {
        write_finish(w, 0, NULL, st);
        return;
    }
    run_write(w);
}

/* ---- deletecollection -------------------------------------------------- */

static void collection_pump(collection_del *p);

/* One child of a deletecollection settled (st or obj, both taken). */
static void collection_settle(collection_del *p, ckube_status *st, json_t *obj)
{
    if (st) {
        if (st->code == 404) {
            ckube_status_free(st); /* deleted meanwhile: fine */
        } else if (!p->error) {
            p->error = st;
        } else {
            ckube_status_free(st);
        }
    } else if (obj) {
        if (json_is_object(obj) && !is_status_body(obj)) {
            if (p->rc->want_partial)
                obj = partial_of(p->rc, obj);
            size_t len;
            char *text = ckube_json_dumps(obj, &len);
            if (text) {
                if (p->nitems++)
                    evbuffer_add(p->items, ",", 1);
                evbuffer_add(p->items, text, len);
            }
            free(text);
        }
        json_decref(obj);
    }
    p->running--;
    collection_pump(p);
}

/* Starts deletes while fewer than COLLECTION_INFLIGHT run, and answers
 * once all have settled. A delete may settle before run_write returns
 * (a dry run, an object gone): its settle finds the pump running and
 * returns, so the loop below goes on without the stack growing. */
static void collection_pump(collection_del *p)
{
    if (p->pumping)
        return;
    p->pumping = true;
    while (p->running < COLLECTION_INFLIGHT && p->next < p->n) {
        write_req *w = write_new(p->rc, W_DELETE);
        w->parent = p;
        w->sw.dry_run = p->dry_run;
        w->sw.propagation = p->propagation;
        w->sw.name = NULL;
        snprintf(w->sw.key, sizeof w->sw.key, "%s", p->objs[p->next]->key);
        cobj_unref(p->objs[p->next]);
        p->objs[p->next++] = NULL;
        p->running++;
        run_write(w);
    }
    p->pumping = false;
    if (p->running || p->next < p->n)
        return;
    req_ctx *rc = p->rc;
    if (p->error) {
        reply_status(rc, p->error);
    } else {
        const char *kind, *gv;
        served_kind(rc, true, &kind, &gv);
        struct evbuffer *out = evbuffer_new();
        evbuffer_add_printf(out,
                            "{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{"
                            "\"resourceVersion\":\"\"},\"items\":[",
                            kind, gv);
        evbuffer_add_buffer(out, p->items);
        evbuffer_add(out, "]}", 2);
        reply_evbuffer(rc, 200, out);
        evbuffer_free(out);
    }
    evbuffer_free(p->items);
    free(p->objs);
    free(p);
}

static void do_deletecollection(req_ctx *rc)
{
    write_req probe = {0};
    if (!write_params(rc, &probe))
        return;
    ckube_status *st = delete_options(rc, &probe);
    if (st) {
        free(probe.pre_uid);
        free(probe.pre_rv);
        reply_status(rc, st);
        return;
    }
    ckube_selector *ls = NULL, *fs = NULL;
    if ((st = request_selectors(rc, &ls, &fs))) {
        free(probe.pre_uid);
        free(probe.pre_rv);
        reply_status(rc, st);
        return;
    }
    char prefix[512];
    resource_type_key_prefix(rc->type, prefix, sizeof prefix);
    if (rc->type->namespaced && *rc->ri.ns)
        snprintf(prefix + strlen(prefix), sizeof prefix - strlen(prefix), "%s/", rc->ri.ns);
    cfilter f = {.ns = rc->ri.ns, .labels = ls, .fields = fs};
    size_t n, more;
    int64_t rev;
    cobj **objs = cacher_list(rc->srv->cache, prefix, NULL, &f, 0, &n, &rev, &more);
    ckube_selector_free(ls);
    ckube_selector_free(fs);
    free(probe.pre_uid);
    free(probe.pre_rv);
    collection_del *p = xcalloc(1, sizeof *p);
    struct evbuffer *items = evbuffer_new(); /* libevent allocates with xalloc: never NULL */
    p->rc = rc;
    p->objs = objs;
    p->n = n;
    p->items = items;
    p->dry_run = probe.sw.dry_run;
    p->propagation = probe.sw.propagation;
    collection_pump(p);
}

/* ---- reads ---------------------------------------------------------------- */

ckube_status *request_selectors(req_ctx *rc, ckube_selector **ls, ckube_selector **fs)
{
    char *err = NULL;
    *ls = *fs = NULL;
    if (ckube_label_selector_parse(req_query(rc, "labelSelector"), ls, &err) != 0) {
        ckube_status *st = ckube_status_bad_request("unable to parse requirement: %s",
                                                    err ? err : "invalid label selector");
        if (err && !strncmp(err, "unable to parse", 15)) {
            free(st->message);
            st->message = xstrdup(err);
        }
        free(err);
        return st;
    }
    if (ckube_field_selector_parse(req_query(rc, "fieldSelector"), fs, &err) != 0) {
        ckube_status *st = ckube_status_bad_request("%s", err ? err : "invalid field selector");
        free(err);
        ckube_selector_free(*ls);
        *ls = NULL;
        return st;
    }
    /* Only known fields can be selected on. */
    for (size_t i = 0; *fs && i < (*fs)->nreqs; i++) {
        const char *k = (*fs)->reqs[i].key;
        bool known = !strcmp(k, "metadata.name") || !strcmp(k, "metadata.namespace");
        for (const selectable_field *sf = rc->type->selectable_fields; !known && sf && sf->field;
             sf++)
            known = !strcmp(sf->field, k);
        if (!known) {
            ckube_status *st = ckube_status_bad_request("field label not supported: %s", k);
            ckube_selector_free(*ls);
            ckube_selector_free(*fs);
            *ls = *fs = NULL;
            return st;
        }
    }
    return NULL;
}

static void get_reply(req_ctx *rc, cobj *o);

static void get_converted(req_ctx *rc, cobj **objs, size_t n, ckube_status *st, void *arg)
{
    (void)arg;
    if (st) {
        reply_status(rc, st);
        return;
    }
    cobj *o = n ? objs[0] : NULL;
    free(objs);
    get_reply(rc, o);
}

static void do_get(req_ctx *rc)
{
    char key[STORE_KEY_MAX];
    store_object_key(rc->type, rc->ri.ns, rc->ri.name, key, sizeof key);
    cobj *o = cacher_get(rc->srv->cache, key);
    if (!o) {
        reply_status(rc, not_found(rc, rc->ri.name));
        return;
    }
    if (rc->type->convert) {
        cobj **one = xmalloc(sizeof *one);
        one[0] = o;
        read_convert(rc, one, 1, false, get_converted, NULL);
        return;
    }
    get_reply(rc, o);
}

/* Answers a get with o (taken). */
static void get_reply(req_ctx *rc, cobj *o)
{
    if (rc->want_partial) {
        struct evbuffer *buf = evbuffer_new();
        partial_append(buf, rc, o);
        cobj_unref(o);
        reply_evbuffer(rc, 200, buf);
        evbuffer_free(buf);
        return;
    }
    if (rc->want_table) {
        cobj *one[1] = {o};
        json_t *table = table_for_objects(rc, one, 1);
        cobj_unref(o);
        reply_json(rc, 200, table);
        return;
    }
    if (rc->type->present) {
        json_t *obj = cobj_decode(o);
        cobj_unref(o);
        rc->type->present(rc->type, obj);
        reply_json(rc, 200, obj);
        return;
    }
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add_reference(buf, o->json, o->len, unref_cobj_cb, o);
    reply_evbuffer(rc, 200, buf);
    evbuffer_free(buf);
}

/* A list request, checked: what list_parse read from the query. */
typedef struct list_req {
    ckube_selector *ls, *fs; /* owned */
    size_t limit;
    int64_t rv;        /* resourceVersion asked for (0: none) */
    int64_t at_rev;    /* revision to serve at (0: now) */
    const char *cont;  /* the continue query, or NULL */
    char *after;       /* the key to resume after, or NULL; owned */
    char prefix[512];  /* the keys listed */
    size_t bucket_len; /* the type's part of prefix */
    const char *ns;    /* namespace listed ("" for all) */
} list_req;

static void list_req_free(list_req *q)
{
    ckube_selector_free(q->ls);
    ckube_selector_free(q->fs);
    free(q->after);
}

/* The limit query: 0 for none. */
static ckube_status *list_limit(req_ctx *rc, size_t *limit)
{
    const char *s = req_query(rc, "limit");
    *limit = 0;
    if (!s || !*s)
        return NULL;
    char *end;
    long long l = strtoll(s, &end, 10);
    if (*end || l < 0)
        return ckube_status_bad_request("invalid limit \"%s\"", s);
    *limit = (size_t)l;
    return NULL;
}

/* Reads and checks a list's query into q (list_req_free frees it even
 * on error). */
static ckube_status *list_parse(req_ctx *rc, list_req *q)
{
    const resource_type *t = rc->type;
    ckube_status *st = request_selectors(rc, &q->ls, &q->fs);
    if (!st)
        st = list_limit(rc, &q->limit);
    if (st)
        return st;
    const char *rvs = req_query(rc, "resourceVersion");
    const char *match = req_query(rc, "resourceVersionMatch");
    bool ok;
    q->rv = parse_rv(rvs, &ok);
    if (!ok)
        return ckube_status_bad_request("invalid resourceVersion \"%s\"", rvs);
    /* resourceVersion=0 ("any version") lists are served whole from the
     * watch cache, ignoring limit, as kube-apiserver's cacher does:
     * informers list with RV=0 and limit=500, and paging a large list
     * through them would cost one round trip (and one client rate-limit
     * token) per 500 objects for no consistency gain. */
    q->cont = req_query(rc, "continue");
    if (q->cont && !*q->cont)
        q->cont = NULL;
    if (rvs && !strcmp(rvs, "0") && (!match || strcmp(match, "Exact")) && !q->cont)
        q->limit = 0;
    if (match && *match && strcmp(match, "Exact") && strcmp(match, "NotOlderThan"))
        return ckube_status_bad_request("invalid resourceVersionMatch \"%s\"", match);
    int64_t cur = cacher_rev(rc->srv->cache);
    if (q->rv > cur) {
        /* The cache is never behind storage, so this revision does not
         * exist yet: upstream answers 504 after waiting for it. */
        st = ckube_status_new(504, CKUBE_REASON_TIMEOUT,
                              "Too large resource version: %" PRId64 ", current: %" PRId64, q->rv,
                              cur);
        ckube_status_add_cause(st, "ResourceVersionTooLarge", NULL, "Too large resource version");
        st->retry_after_seconds = 1;
        return st;
    }
    /* Served at an earlier revision: a list asked for one exactly (with
     * resourceVersionMatch=Exact, or, as upstream's legacy rule, a non-zero
     * resourceVersion with a limit and no match), and the later pages of a
     * paginated list (the first page's revision). */
    bool exact = match ? !strcmp(match, "Exact") : q->limit && q->rv > 0;
    q->at_rev = exact ? q->rv : 0;
    resource_type_key_prefix(t, q->prefix, sizeof q->prefix);
    q->bucket_len = strlen(q->prefix);
    q->ns = rc->ri.ns;
    if (t->namespaced && !*q->ns && q->fs) {
        const char *want = ckube_selector_required_value(q->fs, "metadata.namespace");
        if (want)
            q->ns = want;
    }
    if (t->namespaced && *q->ns)
        snprintf(q->prefix + q->bucket_len, sizeof q->prefix - q->bucket_len, "%s/", q->ns);
    if (!q->cont)
        return NULL;
    /* Continue token: resume after the key it names. */
    int64_t snap_rev = 0;
    char *start = NULL, *err = NULL;
    if (continue_token_decode(q->cont, &snap_rev, &start, &err) != 0) {
        st = ckube_status_bad_request("continue key is not valid: %s", err ? err : "");
        free(err);
        return st;
    }
    q->after = xasprintf("%.*s%s", (int)q->bucket_len, q->prefix, start);
    free(start);
    /* snap_rev < 0: the rest of the list now (an inconsistent
     * continuation, offered with an expired token). */
    q->at_rev = snap_rev > 0 ? snap_rev : 0;
    return NULL;
}

/* The 410 for a list whose revision the cache no longer reaches. */
static ckube_status *list_expired(const list_req *q, int64_t oldest)
{
    if (!q->cont)
        return ckube_status_new(410, CKUBE_REASON_EXPIRED,
                                "too old resource version: %" PRId64 " (%" PRId64 ")", q->rv,
                                oldest);
    ckube_status *st = ckube_status_new(
        410, CKUBE_REASON_EXPIRED,
        "The provided continue parameter is too old to display a consistent list result. You "
        "can start a new list without the continue parameter, or use the continue token in this "
        "response to retrieve the remainder of the results. Continuing with the provided token "
        "results in an inconsistent list - objects that were created, modified, or deleted "
        "between the time the first chunk was returned and now may show up in the list.");
    st->list_continue = q->after ? continue_token_encode(-1, q->after + q->bucket_len) : NULL;
    return st;
}

/* Answers a list as a Table: streamed when large. Takes objs, next. */
static void list_reply_table(req_ctx *rc, cobj **objs, size_t n, int64_t rev, char *next,
                             size_t more)
{
    if (list_stream_wanted(rc, objs, n)) {
        size_t head_len;
        char *head = table_head(rc, rev, next, more, &head_len);
        free(next);
        if (!head)
            xalloc_die(); /* table_head fails only out of memory */
        list_stream_start(rc, head, head_len, objs, n);
        return;
    }
    json_t *table = table_for_objects(rc, objs, n);
    json_t *meta = json_object_get(table, "metadata");
    char rvbuf[32];
    snprintf(rvbuf, sizeof rvbuf, "%" PRId64, rev);
    json_object_set_new(meta, "resourceVersion", json_string(rvbuf));
    if (next) {
        json_object_set_new(meta, "continue", json_string(next));
        json_object_set_new(meta, "remainingItemCount", json_integer((json_int_t)more));
    }
    free(next);
    cacher_objs_free(objs, n);
    reply_json(rc, 200, table);
}

/* Answers a list: streamed when large, else one buffer of references to
 * the cached bytes. Takes objs (and their references) and next. */
static void list_reply(req_ctx *rc, cobj **objs, size_t n, int64_t rev, char *next, size_t more)
{
    const resource_type *t = rc->type;
    const char *list_kind, *list_gv;
    served_kind(rc, true, &list_kind, &list_gv);
    char *head = next ? xasprintf("{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{"
                                  "\"resourceVersion\":\"%" PRId64
                                  "\",\"continue\":\"%s\",\"remainingItemCount\":%zu},"
                                  "\"items\":[",
                                  list_kind, list_gv, rev, next, more)
                      : xasprintf("{\"kind\":\"%s\",\"apiVersion\":\"%s\",\"metadata\":{"
                                  "\"resourceVersion\":\"%" PRId64 "\"},\"items\":[",
                                  list_kind, list_gv, rev);
    size_t head_len = strlen(head);
    free(next);
    if (list_stream_wanted(rc, objs, n)) {
        list_stream_start(rc, head, head_len, objs, n);
        return;
    }
    /* A small list is written whole, as references to the cached bytes. */
    struct evbuffer *buf = evbuffer_new();
    evbuffer_add_reference(buf, head, head_len, free_ref_cb, NULL);
    for (size_t i = 0; i < n; i++) {
        if (i)
            evbuffer_add(buf, ",", 1);
        if (rc->want_partial) {
            partial_append(buf, rc, objs[i]);
            cobj_unref(objs[i]);
            continue;
        }
        if (t->present) {
            /* Served in another shape than stored: re-encode this item. */
            json_t *obj = cobj_decode(objs[i]);
            t->present(t, obj);
            size_t len;
            char *s = ckube_json_dumps(obj, &len);
            json_decref(obj);
            if (s)
                evbuffer_add(buf, s, len);
            free(s);
            cobj_unref(objs[i]);
            continue;
        }
        evbuffer_add_reference(buf, objs[i]->json, objs[i]->len, unref_cobj_cb, objs[i]);
    }
    evbuffer_add(buf, "]}", 2);
    free(objs); /* references now belong to the buffer */
    reply_evbuffer(rc, 200, buf);
    evbuffer_free(buf);
}

static void list_answer(req_ctx *rc, cobj **objs, size_t n, int64_t rev, char *next, size_t more)
{
    if (rc->want_table)
        list_reply_table(rc, objs, n, rev, next, more);
    else
        list_reply(rc, objs, n, rev, next, more);
}

/* A page of a type that converts through a webhook, waiting for it. */
typedef struct list_conv {
    int64_t rev;
    char *next;
    size_t more;
} list_conv;

static void list_converted(req_ctx *rc, cobj **objs, size_t n, ckube_status *st, void *arg)
{
    list_conv lc = *(list_conv *)arg;
    free(arg);
    if (st) {
        free(lc.next);
        reply_status(rc, st);
        return;
    }
    list_answer(rc, objs, n, lc.rev, lc.next, lc.more);
}

static void do_list(req_ctx *rc)
{
    list_req q = {0};
    ckube_status *st = list_parse(rc, &q);
    cfilter f = {.ns = q.ns, .labels = q.ls, .fields = q.fs};
    size_t n = 0, more = 0;
    int64_t rev = 0, oldest = 0;
    cobj **objs = NULL;
    if (!st && cacher_list_at(rc->srv->cache, q.prefix, q.after, &f, q.limit, q.at_rev, &objs, &n,
                              &rev, &more, &oldest) != 0)
        st = list_expired(&q, oldest);
    char *next =
        !st && more && n ? continue_token_encode(rev, objs[n - 1]->key + q.bucket_len) : NULL;
    list_req_free(&q);
    if (st) {
        reply_status(rc, st);
    } else if (rc->type->convert && n) {
        list_conv *lc = xmalloc(sizeof *lc);
        *lc = (list_conv){.rev = rev, .next = next, .more = more};
        read_convert(rc, objs, n, true, list_converted, lc);
    } else {
        list_answer(rc, objs, n, rev, next, more);
    }
}

/* ---- /scale ------------------------------------------------------------- */

static json_t *scale_of(const resource_type *t, const json_t *obj)
{
    json_t *spec_r = ckube_json_get_path(obj, t->scale_spec_replicas_path);
    json_t *stat_r = ckube_json_get_path(obj, t->scale_status_replicas_path);
    json_t *scale = json_pack(
        "{s:s,s:s,s:{s:s,s:s,s:s,s:s,s:s},s:{s:I},s:{s:I}}", "kind", "Scale", "apiVersion",
        "autoscaling/v1", "metadata", "name", ckube_obj_name(obj), "namespace",
        ckube_obj_namespace(obj) ? ckube_obj_namespace(obj) : "", "uid",
        ckube_obj_uid(obj) ? ckube_obj_uid(obj) : "", "resourceVersion",
        ckube_obj_resource_version(obj) ? ckube_obj_resource_version(obj) : "", "creationTimestamp",
        json_string_value(ckube_json_get_path(obj, "metadata.creationTimestamp"))
            ? json_string_value(ckube_json_get_path(obj, "metadata.creationTimestamp"))
            : "",
        "spec", "replicas", (json_int_t)(spec_r ? json_integer_value(spec_r) : 0), "status",
        "replicas", (json_int_t)(stat_r ? json_integer_value(stat_r) : 0));
    if (t->scale_label_selector_path) {
        json_t *sel = ckube_json_get_path(obj, t->scale_label_selector_path);
        if (json_is_string(sel))
            json_object_set(json_object_get(scale, "status"), "selector", sel);
    }
    return scale;
}

/* A /scale request of a type that converts through a webhook: the
 * object in the request's version first (the replica paths are that
 * version's). */
typedef void (*scale_fn)(req_ctx *rc, cobj *o, bool patch);

typedef struct scale_conv {
    scale_fn fn;
    bool patch;
} scale_conv;

static void scale_converted(req_ctx *rc, cobj **objs, size_t n, ckube_status *st, void *arg)
{
    scale_conv sc = *(scale_conv *)arg;
    free(arg);
    if (st) {
        reply_status(rc, st);
        return;
    }
    cobj *o = n ? objs[0] : NULL;
    free(objs);
    sc.fn(rc, o, sc.patch);
}

/* Reads the object a /scale request names and hands it (a reference) to
 * fn, converted first when its type converts through a webhook. */
static void scale_read(req_ctx *rc, scale_fn fn, bool patch)
{
    char key[STORE_KEY_MAX];
    store_object_key(rc->type, rc->ri.ns, rc->ri.name, key, sizeof key);
    cobj *o = cacher_get(rc->srv->cache, key);
    if (!o) {
        reply_status(rc, not_found(rc, rc->ri.name));
        return;
    }
    if (!rc->type->convert) {
        fn(rc, o, patch);
        return;
    }
    cobj **one = xmalloc(sizeof *one);
    one[0] = o;
    scale_conv *sc = xmalloc(sizeof *sc);
    *sc = (scale_conv){fn, patch};
    read_convert(rc, one, 1, false, scale_converted, sc);
}

static void scale_get_reply(req_ctx *rc, cobj *o, bool patch)
{
    (void)patch;
    json_t *obj = cobj_decode(o);
    cobj_unref(o);
    json_t *scale = scale_of(rc->type, obj);
    json_decref(obj);
    reply_json(rc, 200, scale);
}

/* Sets the value at a simple ".a.b.c" path, creating objects. */
static void set_path(json_t *obj, const char *path, json_t *v)
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s", *path == '.' ? path + 1 : path);
    json_t *cur = obj;
    char *save = NULL;
    char *seg = strtok_r(buf, ".", &save);
    while (seg) {
        char *next = strtok_r(NULL, ".", &save);
        if (!next) {
            json_object_set(cur, seg, v);
            break;
        }
        cur = ckube_json_object_ensure(cur, seg);
        seg = next;
    }
}

static void do_scale_get(req_ctx *rc)
{
    scale_read(rc, scale_get_reply, false);
}

static void scale_write(req_ctx *rc, cobj *o, bool patch);

/* PUT/PATCH on /scale become a patch of the replicas path. */
static void do_scale_write(req_ctx *rc, bool patch)
{
    scale_read(rc, scale_write, patch);
}

static void scale_write(req_ctx *rc, cobj *o, bool patch)
{
    const resource_type *t = rc->type;
    json_t *obj = cobj_decode(o);
    cobj_unref(o);
    json_t *scale = scale_of(t, obj);
    ckube_status *st = NULL;
    body_type bt = content_type(rc);
    json_t *body = read_body(rc, bt == BODY_YAML || bt == BODY_PROTOBUF ? bt : BODY_JSON, 1, &st);
    json_t *newscale = NULL;
    if (!st) {
        char *err = NULL;
        if (!patch)
            newscale = json_incref(body);
        else if (bt == BODY_JSON_PATCH)
            newscale = ckube_json_patch_apply(scale, body, &err);
        else
            newscale = ckube_merge_patch_apply(scale, body, &err);
        if (!newscale)
            st = ckube_status_new(422, CKUBE_REASON_INVALID, "%s", err ? err : "invalid patch");
        free(err);
    }
    json_t *replicas = newscale ? ckube_json_get_path(newscale, "spec.replicas") : NULL;
    if (!st && (!json_is_integer(replicas) || json_integer_value(replicas) < 0)) {
        st = ckube_status_invalid_begin("autoscaling", "Scale", rc->ri.name);
        ckube_field_invalid_int(st, "spec.replicas", json_integer_value(replicas),
                                "must be greater than or equal to 0");
        ckube_status_invalid_finish(st);
    }
    const char *rv = newscale ? ckube_obj_resource_version(newscale) : NULL;
    if (!st && !patch && rv && *rv && strcmp(rv, ckube_obj_resource_version(obj)))
        st = ckube_status_conflict(t->group, t->resource, rc->ri.name,
                                   "the object has been modified; please apply your changes to "
                                   "the latest version and try again");
    if (st) {
        json_decref(obj);
        json_decref(scale);
        json_decref(body);
        json_decref(newscale);
        reply_status(rc, st);
        return;
    }
    /* Becomes an update of the whole object with the new replicas; the
     * Scale's resourceVersion was checked above, so races are retried. */
    set_path(obj, t->scale_spec_replicas_path, replicas);
    json_object_del(json_object_get(obj, "metadata"), "resourceVersion");
    json_decref(scale);
    json_decref(body);
    json_decref(newscale);
    write_req *w = write_new(rc, W_UPDATE);
    w->body = obj;
    w->scale_reply = true;
    w->internal = true;
    w->subresource = "scale";
    if (!write_params(rc, w) ||
        !write_manager(rc, w, patch ? "PatchOptions" : "UpdateOptions", false)) {
        write_free(w);
        return;
    }
    w->validation = 0;
    run_write(w);
}

/* ---- dispatch ------------------------------------------------------------ */

static bool valid_path_name(const char *name)
{
    return *name && strcmp(name, ".") && strcmp(name, "..") && !strchr(name, '/') &&
           !strchr(name, '%');
}

json_t *handlers_read_object(req_ctx *rc, const char *kind, ckube_status **st)
{
    int fv;
    *st = NULL;
    if (!field_validation_or_reply(rc, &fv)) {
        *st = NULL;
        return NULL; /* (answered) */
    }
    json_t *obj = read_body(rc, content_type(rc), fv, st);
    if (!*st && !json_is_object(obj)) {
        json_decref(obj);
        obj = NULL;
        *st = ckube_status_bad_request("the body of the request must be a %s object", kind);
    }
    return obj;
}

/* A review (registry.h: resource_type.review): the question is decoded
 * and validated as a create's body, answered, and sent back as created;
 * nothing is stored. */
static void do_review(req_ctx *rc)
{
    const resource_type *t = rc->type;
    ckube_status *st = NULL;
    int fv;
    if (!field_validation_or_reply(rc, &fv))
        return;
    body_type bt = content_type(rc);
    json_t *obj = read_body(rc, bt, fv, &st);
    if (!st && !json_is_object(obj))
        st = ckube_status_bad_request("the body of the request must be a %s object", t->kind);
    if (!st)
        st = check_gvk(rc, obj);
    ckube_status *inv = st ? NULL : ckube_status_invalid_begin(t->group, t->kind, "");
    /* Unknown fields are dropped (and reported as fieldValidation asks),
     * ill-typed ones are a 400, as decoding the body does upstream. */
    if (!st)
        st = apply_schema(rc, obj, fv, inv);
    if (!st)
        st = decoding_error(t, inv);
    if (st) {
        ckube_status_free(inv);
        json_decref(obj);
        reply_status(rc, st);
        return;
    }
    t->review(t, obj, rc->ri.ns, rc->user, inv);
    if (inv->code != 422) { /* the review answered another error itself */
        json_decref(obj);
        reply_status(rc, inv);
        return;
    }
    if (inv->ncauses) {
        ckube_status_invalid_finish(inv);
        json_decref(obj);
        reply_status(rc, inv);
        return;
    }
    ckube_status_free(inv);
    /* The answer as upstream encodes its typed review: an ObjectMeta is
     * always there, and its zero creationTimestamp reads null. */
    json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta))
        json_object_set_new(obj, "metadata", meta = json_object());
    if (!json_object_get(meta, "creationTimestamp"))
        json_object_set_new(meta, "creationTimestamp", json_null());
    reply_json(rc, 201, obj);
}

/* ---- reads and writes on a shared storage ---------------------------------
 *
 * With several servers on one etcd, this server's cache may lag a write
 * another server acknowledged. As kube-apiserver 1.31's cacher, a read
 * that must be current (resourceVersion unset) first waits for the cache
 * to reach etcd's current revision, and a read at resourceVersion=N for
 * N; updates, patches and deletes wait too, so that an object created
 * through another server a moment ago is found (upstream's read etcd).
 * A create does not wait (upstream's reads nothing from etcd: etcd's
 * transaction says whether the name is free) unless it finds something
 * missing, a namespace, a CRD's resource, a parent object: then it waits
 * and runs again (retry_create_fresh), as upstream's NamespaceLifecycle
 * looks a namespace up in etcd when its cache lacks it. The wait gives
 * up after upstream's 3 s with its 504. On an unshared storage nothing
 * waits: the cache is never behind an acknowledged write. */

enum { CACHE_WAIT_MS = 3000 };

/* The revision a request must see: -1 the storage's current one, 0 none,
 * else that revision. */
static int64_t revision_needed(req_ctx *rc)
{
    const char *verb = rc->ri.verb;
    bool read = !strcmp(verb, "get") || !strcmp(verb, "list");
    if (!read && strcmp(verb, "watch"))
        return strcmp(verb, "create") || rc->create_stale ? -1 : 0; /* writes */
    const char *rvs = req_query(rc, "resourceVersion");
    if (!rvs || !*rvs)
        return read ? -1 : 0; /* a watch from now needs nothing */
    char *end;
    long long rv = strtoll(rvs, &end, 10);
    return *end || rv < 0 ? 0 : (int64_t)rv; /* bad ones are refused later */
}

static void resume_request(void *rc)
{
    handle_resource(rc);
}

/* Called on the cacher's thread: back to the request's loop. */
static void cache_waited(void *arg, int result, int64_t want, int64_t have)
{
    req_ctx *rc = arg;
    rc->cache_wait_rc = result;
    rc->cache_want = want;
    rc->cache_have = have;
    loop_post(rc->lp, resume_request, rc);
}

/* Starts the wait a request needs; true if the request now waits (it
 * comes back through handle_resource). */
static bool wait_for_cache(req_ctx *rc)
{
    if (rc->cache_waited || !cacher_shared(rc->srv->cache))
        return false;
    rc->cache_waited = true;
    int64_t rev = revision_needed(rc);
    return rev && !cacher_wait(rc->srv->cache, rev, CACHE_WAIT_MS, cache_waited, rc);
}

/* A create answered `st` (borrowed): if that is a 404 that a cache behind
 * another server's writes may have caused, starts the wait for the cache
 * and returns true: the request comes back through handle_resource, and
 * the caller drops its answer. Once per request. */
static bool retry_create_fresh(req_ctx *rc, const ckube_status *st)
{
    if (!st || st->code != 404 || rc->create_stale || strcmp(rc->ri.verb, "create") ||
        !cacher_shared(rc->srv->cache))
        return false;
    rc->create_stale = true;
    rc->cache_waited = false;
    /* the second pass looks the type up again (it may be a CRD's that
     * the cache had not seen) */
    resource_type_unref(rc->type);
    rc->type = NULL;
    CKUBE_V(4, "create of %s in %s: %s; waiting for the cache to reach etcd's revision",
            rc->ri.resource, *rc->ri.ns ? rc->ri.ns : "the cluster",
            st->message ? st->message : "not found");
    return wait_for_cache(rc);
}

/* How a wait that did not reach its revision is answered. */
static ckube_status *cache_wait_failed(req_ctx *rc)
{
    if (rc->cache_wait_rc == FRESH_UNAVAILABLE) /* etcd's Go client's words */
        return ckube_status_new(500, NULL, "context deadline exceeded");
    if (rc->cache_wait_rc == FRESH_CLOSED)
        return ckube_status_internal("storage error: %s", storage_strerror(STORAGE_ERR_CLOSED));
    ckube_status *st = ckube_status_new(
        504, CKUBE_REASON_TIMEOUT, "Too large resource version: %" PRId64 ", current: %" PRId64,
        rc->cache_want, rc->cache_have);
    ckube_status_add_cause(st, "ResourceVersionTooLarge", NULL, "Too large resource version");
    st->retry_after_seconds = 1;
    return st;
}

void handle_resource(req_ctx *rc)
{
    request_info *ri = &rc->ri;
    if (wait_for_cache(rc))
        return;
    if (rc->cache_wait_rc != FRESH_OK) {
        reply_status(rc, cache_wait_failed(rc));
        return;
    }
    rc->type = registry_lookup(rc->srv->registry, ri->group, ri->version, ri->resource);
    if (!rc->type) {
        ckube_status *st = resource_not_found();
        if (retry_create_fresh(rc, st))
            ckube_status_free(st);
        else
            reply_status(rc, st);
        return;
    }
    const resource_type *t = rc->type;
    /* Scope: cluster-scoped resources have no namespace in the URL (except
     * the namespace object itself, whose name parses as one). */
    if (!t->namespaced && *ri->ns && strcmp(t->resource, "namespaces")) {
        reply_status(rc, resource_not_found());
        return;
    }
    if (!t->namespaced)
        ri->ns[0] = 0;
    if (*ri->name && !valid_path_name(ri->name)) {
        reply_status(rc, resource_not_found());
        return;
    }
    if (t->namespaced && *ri->ns && !valid_path_name(ri->ns)) {
        reply_status(rc, resource_not_found());
        return;
    }
    const char *verb = ri->verb;
    if (t->namespaced && !*ri->ns && (*ri->name || !strcmp(verb, "create"))) {
        reply_status(rc, resource_not_found());
        return;
    }
    if (t->review) {
        if (!strcmp(verb, "create") && !*ri->name && !*ri->subresource)
            do_review(rc);
        else
            reply_status(rc, method_not_allowed());
        return;
    }
    /* PartialObjectMetadata in the form the verb answers: a list for list
     * and deletecollection, one object for everything else (a watch's
     * events included). The other form is a 406, before any work. */
    bool answers_list =
        !*ri->subresource && (!strcmp(verb, "list") || !strcmp(verb, "deletecollection"));
    ckube_status *refused = partial_refused(rc, answers_list);
    if (refused) {
        reply_status(rc, refused);
        return;
    }
    if (*ri->subresource) {
        const char *sub = ri->subresource;
        bool is_status = !strcmp(sub, "status") && t->status_subresource;
        bool is_scale = !strcmp(sub, "scale") && t->scale_subresource;
        bool is_finalize =
            !strcmp(sub, "finalize") && !strcmp(t->resource, "namespaces") && !*t->group;
        if (!strcmp(sub, "token") && !strcmp(t->resource, "serviceaccounts") && !*t->group &&
            rc->srv->sa) {
            if (!strcmp(verb, "create"))
                handle_token_request(rc);
            else
                reply_status(rc, method_not_allowed());
            return;
        }
        if (!is_status && !is_scale && !is_finalize) {
            reply_status(rc, resource_not_found());
            return;
        }
        if (!strcmp(verb, "get")) {
            if (is_scale)
                do_scale_get(rc);
            else if (is_status)
                do_get(rc);
            else
                reply_status(rc, method_not_allowed());
        } else if (!strcmp(verb, "update")) {
            if (is_scale)
                do_scale_write(rc, false);
            else
                do_update(rc, is_status ? W_STATUS : W_FINALIZE);
        } else if (!strcmp(verb, "patch") && !is_finalize) {
            if (is_scale)
                do_scale_write(rc, true);
            else
                do_patch(rc, W_STATUS);
        } else {
            reply_status(rc, method_not_allowed());
        }
        return;
    }
    if (!strcmp(verb, "create") && !(t->verbs & VERB_CREATE)) {
        reply_status(rc, ckube_status_new(405, CKUBE_REASON_METHOD_NOT_ALLOWED,
                                          "create not allowed while custom resource definition "
                                          "is terminating"));
        return;
    }
    if (!strcmp(verb, "get"))
        do_get(rc);
    else if (!strcmp(verb, "list"))
        do_list(rc);
    else if (!strcmp(verb, "watch"))
        handle_watch(rc);
    else if (!strcmp(verb, "create"))
        *ri->name ? reply_status(rc, method_not_allowed()) : do_create(rc);
    else if (!strcmp(verb, "update"))
        do_update(rc, W_UPDATE);
    else if (!strcmp(verb, "patch"))
        do_patch(rc, W_PATCH);
    else if (!strcmp(verb, "delete"))
        do_delete(rc);
    else if (!strcmp(verb, "deletecollection"))
        do_deletecollection(rc);
    else
        reply_status(rc, method_not_allowed());
}
