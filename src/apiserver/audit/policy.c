/* policy.c - reading, validating and applying an audit policy (see
 * policy.h). Decoding walks the document the way Go's encoding/json
 * walks it into audit.k8s.io/v1's structs: fields in document order, the
 * first type error kept, unknown fields collected for the strict-decoding
 * warning. Strings keep their length: a policy string holding a NUL byte
 * is kept whole and, like upstream's, simply never equals a request's. */
#include "apiserver/audit/policy.h"

#include <errno.h>
#include <fcntl.h>
#include <jansson.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/validation.h"
#include "ckube/yaml.h"
#include "common/text.h"
#include "common/xalloc.h"

/* Where upstream's scheme was made: its decoder names it in errors. */
#define SCHEME_NAME "k8s.io/apiserver/pkg/audit/scheme.go:30"
#define AUDIT_GROUP "audit.k8s.io"

static const char *const level_names[] = {"None", "Metadata", "Request", "RequestResponse"};
static const char *const stage_names[] = {"RequestReceived", "ResponseStarted", "ResponseComplete",
                                          "Panic"};

const char *audit_level_name(audit_level level)
{
    return (unsigned)level < 4 ? level_names[level] : "";
}

const char *audit_stage_name(audit_stage stage)
{
    return (unsigned)stage < 4 ? stage_names[stage] : "";
}

/* ---- the policy ----------------------------------------------------------- */

/* A string with its length (it may hold NUL bytes). */
typedef struct astr {
    char *s;
    size_t n;
} astr;

typedef struct alist {
    astr *v;
    size_t n;
} alist;

typedef struct group_resources {
    astr group;
    alist resources;
    alist names;
} group_resources;

typedef struct rule {
    astr level_text; /* as written, for validation */
    audit_level level;
    alist users, groups, verbs, namespaces, urls, omit;
    group_resources *res;
    size_t nres;
    int omit_managed;   /* -1: not set, else 0 or 1 */
    unsigned omit_bits; /* the rule's stages with the policy's */
} rule;

struct audit_policy {
    rule *rules;
    size_t nrules;
    alist omit;
    unsigned omit_bits;
    bool omit_managed;
};

static void alist_free(alist *l)
{
    for (size_t i = 0; i < l->n; i++)
        free(l->v[i].s);
    free(l->v);
    *l = (alist){0};
}

static void resources_clear(rule *r)
{
    for (size_t j = 0; j < r->nres; j++) {
        free(r->res[j].group.s);
        alist_free(&r->res[j].resources);
        alist_free(&r->res[j].names);
    }
    free(r->res);
    r->res = NULL;
    r->nres = 0;
}

static void rules_clear(audit_policy *p)
{
    for (size_t i = 0; i < p->nrules; i++) {
        rule *r = &p->rules[i];
        free(r->level_text.s);
        alist_free(&r->users);
        alist_free(&r->groups);
        alist_free(&r->verbs);
        alist_free(&r->namespaces);
        alist_free(&r->urls);
        alist_free(&r->omit);
        resources_clear(r);
    }
    free(p->rules);
    p->rules = NULL;
    p->nrules = 0;
}

void audit_policy_free(audit_policy *p)
{
    if (!p)
        return;
    rules_clear(p);
    alist_free(&p->omit);
    free(p);
}

size_t audit_policy_rule_count(const audit_policy *p)
{
    return p ? p->nrules : 0;
}

/* ---- decoding, as encoding/json into the v1 structs -------------------- */

typedef struct dec {
    char *type_err;       /* the first type error, as Go keeps it */
    ckube__strbuf strict; /* unknown fields, ", "-separated */
} dec;

/* encoding/json's name for what a JSON value is. */
static const char *go_kind(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "bool";
    default:
        return "null";
    }
}

/* `strct` is the Go struct holding the field, `tpath` the JSON names from
 * the root (no indices, as Go's error context has them). */
static void type_error(dec *d, const json_t *v, const char *strct, const char *tpath,
                       const char *type)
{
    if (!d->type_err)
        d->type_err = xasprintf("json: cannot unmarshal %s into Go struct field %s.%s of type %s",
                                go_kind(v), strct, tpath, type);
}

/* `spath` is the strict decoder's path, with indices. */
static void unknown_field(dec *d, const char *spath)
{
    char *q = ckube_go_quote(spath);
    if (!q)
        xalloc_die();
    if (d->strict.len)
        ckube__sb_add(&d->strict, ", ");
    ckube__sb_printf(&d->strict, "unknown field %s", q);
    if (d->strict.oom)
        xalloc_die();
    free(q);
}

static char *join_path(const char *base, const char *key)
{
    return *base ? xasprintf("%s.%s", base, key) : xstrdup(key);
}

static void astr_set(astr *a, const json_t *v)
{
    size_t n = json_string_length(v);
    free(a->s);
    a->s = xmalloc(n + 1);
    memcpy(a->s, json_string_value(v), n);
    a->s[n] = '\0';
    a->n = n;
}

/* A string field; null leaves it as it was (Go's rule). */
static void dec_str(dec *d, const json_t *v, const char *strct, const char *tpath, const char *type,
                    astr *out)
{
    if (json_is_null(v))
        return;
    if (!json_is_string(v)) {
        type_error(d, v, strct, tpath, type);
        return;
    }
    astr_set(out, v);
}

/* A list of strings ([]string, []v1.Stage): null empties it, a null
 * element is "". */
static void dec_strs(dec *d, const json_t *v, const char *strct, const char *tpath,
                     const char *type, const char *elem_type, alist *out)
{
    if (json_is_null(v)) {
        alist_free(out);
        return;
    }
    if (!json_is_array(v)) {
        type_error(d, v, strct, tpath, type);
        return;
    }
    alist_free(out);
    size_t n = json_array_size(v);
    out->v = xcalloc(n, sizeof *out->v);
    out->n = n;
    for (size_t i = 0; i < n; i++) {
        out->v[i].s = xstrdup("");
        dec_str(d, json_array_get(v, i), strct, tpath, elem_type, &out->v[i]);
    }
}

/* A bool field: null leaves it as it was. `*out` is -1, 0 or 1. */
static void dec_bool(dec *d, const json_t *v, const char *strct, const char *tpath, int *out)
{
    if (json_is_null(v))
        return;
    if (!json_is_boolean(v)) {
        type_error(d, v, strct, tpath, "bool");
        return;
    }
    *out = json_is_true(v);
}

static void dec_group_resources(dec *d, const json_t *v, const char *spath, const char *tpath,
                                group_resources *g)
{
    if (json_is_null(v))
        return;
    if (!json_is_object(v)) {
        type_error(d, v, "PolicyRule", tpath, "v1.GroupResources");
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        char *tp = join_path(tpath, key);
        if (!strcmp(key, "group")) {
            dec_str(d, val, "GroupResources", tp, "string", &g->group);
        } else if (!strcmp(key, "resources")) {
            dec_strs(d, val, "GroupResources", tp, "[]string", "string", &g->resources);
        } else if (!strcmp(key, "resourceNames")) {
            dec_strs(d, val, "GroupResources", tp, "[]string", "string", &g->names);
        } else {
            char *sp = join_path(spath, key);
            unknown_field(d, sp);
            free(sp);
        }
        free(tp);
    }
}

static void dec_rule(dec *d, const json_t *v, const char *spath, rule *r)
{
    if (json_is_null(v))
        return;
    if (!json_is_object(v)) {
        type_error(d, v, "Policy", "rules", "v1.PolicyRule");
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        char *tp = join_path("rules", key);
        if (!strcmp(key, "level")) {
            dec_str(d, val, "PolicyRule", tp, "v1.Level", &r->level_text);
        } else if (!strcmp(key, "users")) {
            dec_strs(d, val, "PolicyRule", tp, "[]string", "string", &r->users);
        } else if (!strcmp(key, "userGroups")) {
            dec_strs(d, val, "PolicyRule", tp, "[]string", "string", &r->groups);
        } else if (!strcmp(key, "verbs")) {
            dec_strs(d, val, "PolicyRule", tp, "[]string", "string", &r->verbs);
        } else if (!strcmp(key, "namespaces")) {
            dec_strs(d, val, "PolicyRule", tp, "[]string", "string", &r->namespaces);
        } else if (!strcmp(key, "nonResourceURLs")) {
            dec_strs(d, val, "PolicyRule", tp, "[]string", "string", &r->urls);
        } else if (!strcmp(key, "omitStages")) {
            dec_strs(d, val, "PolicyRule", tp, "[]v1.Stage", "v1.Stage", &r->omit);
        } else if (!strcmp(key, "omitManagedFields")) {
            dec_bool(d, val, "PolicyRule", tp, &r->omit_managed);
        } else if (!strcmp(key, "resources")) {
            if (json_is_array(val)) {
                resources_clear(r);
                r->nres = json_array_size(val);
                r->res = xcalloc(r->nres, sizeof *r->res);
                for (size_t j = 0; j < r->nres; j++) {
                    char *sp = xasprintf("%s.resources[%zu]", spath, j);
                    dec_group_resources(d, json_array_get(val, j), sp, tp, &r->res[j]);
                    free(sp);
                }
            } else if (!json_is_null(val)) {
                type_error(d, val, "PolicyRule", tp, "[]v1.GroupResources");
            }
        } else {
            char *sp = join_path(spath, key);
            unknown_field(d, sp);
            free(sp);
        }
        free(tp);
    }
}

/* ObjectMeta's fields: only their names and the string-typed ones are
 * checked (a policy's metadata means nothing to the server). */
static void dec_metadata(dec *d, const json_t *v)
{
    static const char *const strings[] = {"name",     "generateName",    "namespace",
                                          "selfLink", "resourceVersion", NULL};
    static const char *const others[] = {"uid",
                                         "generation",
                                         "creationTimestamp",
                                         "deletionTimestamp",
                                         "deletionGracePeriodSeconds",
                                         "labels",
                                         "annotations",
                                         "ownerReferences",
                                         "finalizers",
                                         "managedFields",
                                         NULL};
    if (json_is_null(v))
        return;
    if (!json_is_object(v)) {
        type_error(d, v, "Policy", "metadata", "v1.ObjectMeta");
        return;
    }
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        bool known = false;
        for (size_t i = 0; strings[i] && !known; i++) {
            if (!strcmp(key, strings[i])) {
                known = true;
                if (!json_is_null(val) && !json_is_string(val)) {
                    char *tp = join_path("metadata", key);
                    type_error(d, val, "ObjectMeta", tp, "string");
                    free(tp);
                }
            }
        }
        for (size_t i = 0; others[i] && !known; i++)
            known = !strcmp(key, others[i]);
        if (!known) {
            char *sp = join_path("metadata", key);
            unknown_field(d, sp);
            free(sp);
        }
    }
}

static void dec_policy(dec *d, const json_t *v, audit_policy *p)
{
    const char *key;
    json_t *val;
    json_object_foreach((json_t *)v, key, val)
    {
        if (!strcmp(key, "apiVersion") || !strcmp(key, "kind")) {
            continue; /* read (and type-checked) before */
        } else if (!strcmp(key, "metadata")) {
            dec_metadata(d, val);
        } else if (!strcmp(key, "rules")) {
            if (json_is_array(val)) {
                rules_clear(p); /* (a key is given once: the readers refuse twice) */
                p->nrules = json_array_size(val);
                p->rules = xcalloc(p->nrules, sizeof *p->rules);
                for (size_t i = 0; i < p->nrules; i++) {
                    p->rules[i].omit_managed = -1;
                    char *sp = xasprintf("rules[%zu]", i);
                    dec_rule(d, json_array_get(val, i), sp, &p->rules[i]);
                    free(sp);
                }
            } else if (!json_is_null(val)) {
                type_error(d, val, "Policy", "rules", "[]v1.PolicyRule");
            }
        } else if (!strcmp(key, "omitStages")) {
            dec_strs(d, val, "Policy", "omitStages", "[]v1.Stage", "v1.Stage", &p->omit);
        } else if (!strcmp(key, "omitManagedFields")) {
            int b = p->omit_managed;
            dec_bool(d, val, "Policy", "omitManagedFields", &b);
            p->omit_managed = b == 1;
        } else {
            unknown_field(d, key);
        }
    }
}

/* ---- validation (pkg/apis/audit/validation) ----------------------------- */

typedef struct errlist {
    char **v;
    size_t n;
} errlist;

static void errs_add(errlist *e, char *msg)
{
    e->v = xrealloc(e->v, (e->n + 1) * sizeof *e->v);
    e->v[e->n++] = msg;
}

static char *quote(const astr *a)
{
    char *q = ckube_go_quote(a->s);
    if (!q)
        xalloc_die();
    return q;
}

/* Go's %#v of a []string: []string{"a", "b"}. */
static char *quote_list(const alist *l)
{
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "[]string{");
    for (size_t i = 0; i < l->n; i++) {
        char *q = quote(&l->v[i]);
        if (i)
            ckube__sb_add(&b, ", ");
        ckube__sb_add(&b, q);
        free(q);
    }
    ckube__sb_add(&b, "}");
    char *s = ckube__sb_take(&b);
    if (!s)
        xalloc_die();
    return s;
}

/* (A field never given has a NULL string: compare no bytes then.) */
static bool astr_is(const astr *a, const char *s)
{
    size_t n = strlen(s);
    return a->n == n && (n == 0 || !memcmp(a->s, s, n));
}

static int stage_of(const astr *a)
{
    for (int i = 0; i < 4; i++)
        if (astr_is(a, stage_names[i]))
            return i;
    return -1;
}

static void check_stages(errlist *e, const alist *l, const char *path, unsigned *bits)
{
    for (size_t i = 0; i < l->n; i++) {
        int s = stage_of(&l->v[i]);
        if (s >= 0) {
            *bits |= AUDIT_STAGE_BIT(s);
            continue;
        }
        char *q = quote(&l->v[i]);
        errs_add(e, xasprintf("%s[%zu]: Invalid value: %s: allowed stages are "
                              "RequestReceived,ResponseStarted,ResponseComplete,Panic",
                              path, i, q));
        free(q);
    }
}

static void check_rule(errlist *e, rule *r, size_t idx)
{
    /* level */
    if (r->level_text.n == 0) {
        errs_add(e, xasprintf("rules[%zu].level: Required value", idx));
    } else {
        int l = -1;
        for (int i = 0; i < 4 && l < 0; i++)
            if (astr_is(&r->level_text, level_names[i]))
                l = i;
        if (l < 0) {
            char *q = quote(&r->level_text);
            errs_add(e, xasprintf("rules[%zu].level: Unsupported value: %s: supported values: "
                                  "\"None\", \"Metadata\", \"Request\", \"RequestResponse\"",
                                  idx, q));
            free(q);
        } else {
            r->level = (audit_level)l;
        }
    }
    /* nonResourceURLs */
    for (size_t i = 0; i < r->urls.n; i++) {
        const astr *u = &r->urls.v[i];
        if (astr_is(u, "*"))
            continue;
        if (u->n == 0 || u->s[0] != '/') {
            char *q = quote(u);
            errs_add(e, xasprintf("rules[%zu].nonResourceURLs[%zu]: Invalid value: %s: "
                                  "non-resource URL rules must begin with a '/' character",
                                  idx, i, q));
            free(q);
        }
        if (u->n && memchr(u->s, '*', u->n - 1)) {
            char *q = quote(u);
            errs_add(e, xasprintf("rules[%zu].nonResourceURLs[%zu]: Invalid value: %s: "
                                  "non-resource URL wildcards '*' must be the final character "
                                  "of the rule",
                                  idx, i, q));
            free(q);
        }
    }
    /* resources: upstream names the fields without the list's index */
    for (size_t j = 0; j < r->nres; j++) {
        const group_resources *g = &r->res[j];
        if (g->group.n && !astr_is(&g->group, "*")) {
            char *msg = ckube_is_dns1123_subdomain(g->group.s);
            if (!msg && memchr(g->group.s, '\0', g->group.n))
                msg =
                    xstrdup("a lowercase RFC 1123 subdomain must consist of lower case "
                            "alphanumeric characters, '-' or '.', and must start and end with "
                            "an alphanumeric character (e.g. 'example.com', regex used for "
                            "validation is "
                            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')");
            if (msg) {
                /* The checker joins its messages with "; ", upstream's
                 * audit validation with ",". */
                ckube__strbuf b = {0};
                for (const char *p = msg; *p;) {
                    const char *sep = strstr(p, "; ");
                    size_t n = sep ? (size_t)(sep - p) : strlen(p);
                    ckube__sb_addn(&b, p, n);
                    if (!sep)
                        break;
                    ckube__sb_add(&b, ",");
                    p = sep + 2;
                }
                char *joined = ckube__sb_take(&b);
                char *q = quote(&g->group);
                errs_add(e, xasprintf("rules[%zu].resources.group: Invalid value: %s: %s", idx, q,
                                      joined ? joined : ""));
                free(q);
                free(joined);
                free(msg);
            }
        }
        if (g->names.n && !g->resources.n) {
            char *q = quote_list(&g->names);
            errs_add(e, xasprintf("rules[%zu].resources.resourceNames: Invalid value: %s: using "
                                  "resourceNames requires at least one resource",
                                  idx, q));
            free(q);
        }
    }
    /* omitStages */
    char *path = xasprintf("rules[%zu].omitStages", idx);
    check_stages(e, &r->omit, path, &r->omit_bits);
    free(path);
    if (r->urls.n && (r->nres || r->namespaces.n)) {
        char *q = quote_list(&r->urls);
        errs_add(e, xasprintf("rules[%zu].nonResourceURLs: Invalid value: %s: rules cannot apply "
                              "to both regular resources and non-resource URLs",
                              idx, q));
        free(q);
    }
}

/* field.ErrorList.ToAggregate().Error(): one message alone, several
 * (each once) as "[a, b]". Consumes the list. */
static char *errs_aggregate(errlist *e)
{
    ckube__strbuf b = {0};
    size_t shown = 0;
    for (size_t i = 0; i < e->n; i++) {
        bool seen = false;
        for (size_t j = 0; j < i && !seen; j++)
            seen = !strcmp(e->v[i], e->v[j]);
        if (seen)
            continue;
        if (shown++)
            ckube__sb_add(&b, ", ");
        ckube__sb_add(&b, e->v[i]);
    }
    char *body = ckube__sb_take(&b);
    if (!body)
        xalloc_die();
    char *out = shown > 1 ? xasprintf("[%s]", body) : xstrdup(body);
    free(body);
    for (size_t i = 0; i < e->n; i++)
        free(e->v[i]);
    free(e->v);
    *e = (errlist){0};
    return out;
}

/* ---- reading ------------------------------------------------------------- */

/* utilyaml.IsJSONBuffer: JSON when the first non-space byte is '{'. */
static bool looks_like_json(const char *s, size_t n)
{
    size_t i = 0;
    while (i < n && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r' || s[i] == '\v' ||
                     s[i] == '\f'))
        i++;
    return i < n && s[i] == '{';
}

static audit_policy *fail(audit_policy *p, char **err, char *msg)
{
    audit_policy_free(p);
    if (err)
        *err = msg;
    else
        free(msg);
    return NULL;
}

/* The reflect name of the struct Interpret decodes apiVersion and kind
 * into, as Go prints it in a type error. */
#define FIND_KIND_TYPE                                                                             \
    "struct { APIVersion string \"json:\\\"apiVersion,omitempty\\\"\"; Kind string "               \
    "\"json:\\\"kind,omitempty\\\"\" }"

audit_policy *audit_policy_parse(const char *data, size_t len, char **err)
{
    if (err)
        *err = NULL;
    json_t *doc;
    char *perr = NULL;
    if (looks_like_json(data, len)) {
        doc = ckube_json_loads(data, len, &perr);
        if (!doc) {
            char *m = xasprintf("failed decoding: couldn't get version/kind; json parse error: %s",
                                perr ? perr : "invalid JSON");
            free(perr);
            return fail(NULL, err, m);
        }
    } else {
        doc = ckube_yaml_load(data, len, &perr);
        if (!doc) {
            char *m = xasprintf("failed decoding: error converting YAML to JSON: %s",
                                perr ? perr : "yaml: invalid document");
            free(perr);
            return fail(NULL, err, m);
        }
    }
    if (!json_is_object(doc) && !json_is_null(doc)) {
        char *m = xasprintf("failed decoding: couldn't get version/kind; json parse error: json: "
                            "cannot unmarshal %s into Go value of type " FIND_KIND_TYPE,
                            go_kind(doc));
        json_decref(doc);
        return fail(NULL, err, m);
    }

    /* The serializer's Interpret: apiVersion and kind, as strings. */
    const char *api_version = "", *kind = "";
    static const char *const tm_keys[] = {"apiVersion", "kind"};
    for (int i = 0; i < 2; i++) {
        json_t *v = json_object_get(doc, tm_keys[i]);
        if (!v || json_is_null(v))
            continue;
        if (!json_is_string(v)) {
            char *m = xasprintf("failed decoding: couldn't get version/kind; json parse error: "
                                "json: cannot unmarshal %s into Go struct field .%s of type string",
                                go_kind(v), tm_keys[i]);
            json_decref(doc);
            return fail(NULL, err, m);
        }
        *(i ? &kind : &api_version) = json_string_value(v);
    }
    /* schema.ParseGroupVersion, then the defaults the decoder takes from
     * the internal type it decodes into. */
    char *group, *version;
    const char *slash = strchr(api_version, '/');
    if (!*api_version || !strcmp(api_version, "/")) {
        group = xstrdup("");
        version = xstrdup("");
    } else if (!slash) {
        group = xstrdup("");
        version = xstrdup(api_version);
    } else if (!strchr(slash + 1, '/')) {
        group = xstrndup(api_version, (size_t)(slash - api_version));
        version = xstrdup(slash + 1);
    } else {
        char *m = xasprintf("failed decoding: unexpected GroupVersion string: %s", api_version);
        json_decref(doc);
        return fail(NULL, err, m);
    }
    if (!*kind)
        kind = "Policy";
    if (!*version && (!*group || !strcmp(group, AUDIT_GROUP))) {
        free(group);
        free(version);
        group = xstrdup(AUDIT_GROUP);
        version = xstrdup("__internal");
    }
    char *gv = *group ? xasprintf("%s/%s", group, version) : xstrdup(version);
    bool is_v1 = !strcmp(group, AUDIT_GROUP) && !strcmp(version, "v1");
    bool internal = !strcmp(group, AUDIT_GROUP) && !strcmp(version, "__internal");
    free(group);
    free(version);
    char *m = NULL;
    if (internal) {
        /* Decoded into the internal type, whose fields carry no JSON
         * names: nothing but kind is read, then the version is refused. */
        m = xasprintf("unknown group version field %s, Kind=%s in policy", gv, kind);
    } else if (is_v1 && (!strcmp(kind, "Event") || !strcmp(kind, "EventList") ||
                         !strcmp(kind, "PolicyList"))) {
        m = xasprintf("failed decoding: converting (v1.%s) to (audit.Policy): unknown conversion",
                      kind);
    } else if (!is_v1 || strcmp(kind, "Policy")) {
        char *qk = ckube_go_quote(kind), *qv = ckube_go_quote(gv);
        if (!qk || !qv)
            xalloc_die();
        m = xasprintf("failed decoding: no kind %s is registered for version %s in scheme "
                      "\"" SCHEME_NAME "\"",
                      qk, qv);
        free(qk);
        free(qv);
    }
    free(gv);
    if (m) {
        json_decref(doc);
        return fail(NULL, err, m);
    }

    audit_policy *p = xcalloc(1, sizeof *p);
    dec d = {0};
    if (json_is_object(doc))
        dec_policy(&d, doc, p);
    json_decref(doc);
    if (d.type_err) {
        m = xasprintf("failed decoding: %s", d.type_err);
        free(d.type_err);
        free(d.strict.s);
        return fail(p, err, m);
    }
    if (d.strict.len)
        CKUBE_WARN("Audit policy contains errors, falling back to lenient decoding: strict "
                   "decoding error: %s",
                   d.strict.s);
    free(d.strict.s);

    errlist e = {0};
    check_stages(&e, &p->omit, "omitStages", &p->omit_bits);
    for (size_t i = 0; i < p->nrules; i++)
        check_rule(&e, &p->rules[i], i);
    if (e.n)
        return fail(p, err, errs_aggregate(&e));
    if (p->nrules == 0)
        return fail(p, err, xstrdup("loaded illegal policy with 0 rules"));
    /* NewPolicyRuleEvaluator: each rule omits the policy's stages too. */
    for (size_t i = 0; i < p->nrules; i++)
        p->rules[i].omit_bits |= p->omit_bits;
    CKUBE_V(4, "Load audit policy rules success policyCnt=%zu", p->nrules);
    return p;
}

/* Go prints syscall errors in lower case ("no such file or directory"). */
static char *go_errno(int e)
{
    char *s = xstrdup(strerror(e));
    if (s[0] >= 'A' && s[0] <= 'Z' && !(s[1] >= 'A' && s[1] <= 'Z'))
        s[0] = (char)(s[0] - 'A' + 'a');
    return s;
}

static char *read_file(const char *path, size_t *len, char **err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        char *q = ckube_go_quote(path), *es = go_errno(errno);
        *err = xasprintf("failed to read file path %s: open %s: %s", q ? q : path, path, es);
        free(q);
        free(es);
        return NULL;
    }
    ckube__strbuf b = {0};
    char buf[65536];
    for (;;) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0 || b.len + (size_t)got > AUDIT_POLICY_MAX_FILE) {
            char *q = ckube_go_quote(path);
            if (got < 0) {
                char *es = go_errno(errno);
                *err =
                    xasprintf("failed to read file path %s: read %s: %s", q ? q : path, path, es);
                free(es);
            } else {
                *err = xasprintf("failed to read file path %s: the file is larger than %u bytes",
                                 q ? q : path, AUDIT_POLICY_MAX_FILE);
            }
            free(q);
            free(b.s);
            close(fd);
            return NULL;
        }
        if (got == 0)
            break;
        ckube__sb_addn(&b, buf, (size_t)got);
        if (b.oom)
            xalloc_die();
    }
    close(fd);
    *len = b.len;
    return b.s ? b.s : xstrdup("");
}

audit_policy *audit_policy_load(const char *path, char **err)
{
    char *e = NULL;
    if (err)
        *err = NULL;
    if (!path || !*path)
        return fail(NULL, err, xstrdup("file path not specified"));
    size_t len = 0;
    char *data = read_file(path, &len, &e);
    if (!data)
        return fail(NULL, err, e);
    audit_policy *p = audit_policy_parse(data, len, &e);
    free(data);
    if (!p) {
        char *m = xasprintf("%s: from file %s", e, path);
        free(e);
        return fail(NULL, err, m);
    }
    return p;
}

int audit_policy_from_flag(const char *policy_file, audit_policy **out, char **err)
{
    if (err)
        *err = NULL;
    *out = NULL;
    if (!policy_file || !*policy_file) {
        CKUBE_V(2, "No audit policy file provided, no events will be recorded for log backend");
        return 0;
    }
    char *e = NULL;
    *out = audit_policy_load(policy_file, &e);
    if (!*out) {
        char *m = xasprintf("loading audit policy file: %s", e);
        free(e);
        fail(NULL, err, m);
        return -1;
    }
    return 0;
}

/* ---- deciding (pkg/audit/policy/checker.go) --------------------------- */

static const char *nz(const char *s)
{
    return s ? s : "";
}

static bool has(const alist *l, const char *s)
{
    size_t n = strlen(s);
    for (size_t i = 0; i < l->n; i++)
        if (l->v[i].n == n && !memcmp(l->v[i].s, s, n))
            return true;
    return false;
}

/* "*", the path itself, or a prefix ending in '*'s (all trimmed). */
static bool path_matches(const char *path, const astr *spec)
{
    if (astr_is(spec, "*") || astr_is(spec, path))
        return true;
    if (spec->n && spec->s[spec->n - 1] == '*') {
        size_t n = spec->n;
        while (n && spec->s[n - 1] == '*')
            n--;
        return strlen(path) >= n && !memcmp(path, spec->s, n);
    }
    return false;
}

static bool resource_matches(const astr *res, const char *resource, const char *sub)
{
    size_t rl = strlen(resource), sl = strlen(sub);
    if (astr_is(res, "*"))
        return true;
    /* "resource" or "resource/subresource" */
    if (!sl) {
        if (astr_is(res, resource))
            return true;
    } else if (res->n == rl + 1 + sl && !memcmp(res->s, resource, rl) && res->s[rl] == '/' &&
               !memcmp(res->s + rl + 1, sub, sl)) {
        return true;
    }
    /* "*\/subresource" */
    if (sl && res->n == sl + 2 && res->s[0] == '*' && res->s[1] == '/' &&
        !memcmp(res->s + 2, sub, sl))
        return true;
    /* "resource/\*": the resource itself and every subresource of it */
    if (res->n >= 2 && res->s[res->n - 2] == '/' && res->s[res->n - 1] == '*' && res->n - 2 == rl &&
        !memcmp(res->s, resource, rl))
        return true;
    return false;
}

static bool rule_matches_resource(const rule *r, const audit_attributes *at)
{
    if (!at->resource_request)
        return false;
    if (r->namespaces.n && !has(&r->namespaces, nz(at->namespace_)))
        return false;
    if (!r->nres)
        return true;
    const char *group = nz(at->api_group), *resource = nz(at->resource);
    const char *sub = nz(at->subresource), *name = nz(at->name);
    for (size_t i = 0; i < r->nres; i++) {
        const group_resources *g = &r->res[i];
        if (!astr_is(&g->group, group) && !astr_is(&g->group, "*"))
            continue;
        if (!g->resources.n)
            return true;
        if (g->names.n && !has(&g->names, name))
            continue;
        for (size_t j = 0; j < g->resources.n; j++)
            if (resource_matches(&g->resources.v[j], resource, sub))
                return true;
    }
    return false;
}

static bool rule_matches(const rule *r, const audit_attributes *at)
{
    if (r->users.n && (!at->user || !has(&r->users, at->user)))
        return false;
    if (r->groups.n) {
        if (!at->user)
            return false;
        bool matched = false;
        for (size_t i = 0; i < at->ngroups && !matched; i++)
            matched = at->groups[i] && has(&r->groups, at->groups[i]);
        if (!matched)
            return false;
    }
    if (r->verbs.n && !has(&r->verbs, nz(at->verb)))
        return false;
    if (r->namespaces.n || r->nres)
        return rule_matches_resource(r, at);
    if (r->urls.n) {
        if (at->resource_request)
            return false;
        for (size_t i = 0; i < r->urls.n; i++)
            if (path_matches(nz(at->path), &r->urls.v[i]))
                return true;
        return false;
    }
    return true;
}

audit_level audit_policy_decide(const audit_policy *p, const audit_attributes *at,
                                audit_decision *out)
{
    audit_decision d = {AUDIT_LEVEL_NONE, 0, false};
    if (p) {
        d.omit_stages = p->omit_bits;
        d.omit_managed_fields = p->omit_managed;
        for (size_t i = 0; i < p->nrules; i++) {
            const rule *r = &p->rules[i];
            if (rule_matches(r, at)) {
                d.level = r->level;
                d.omit_stages = r->omit_bits;
                d.omit_managed_fields = r->omit_managed < 0 ? p->omit_managed : r->omit_managed;
                break;
            }
        }
    }
    if (out)
        *out = d;
    return d.level;
}
