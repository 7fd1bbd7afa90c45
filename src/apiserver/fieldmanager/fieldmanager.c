/* fieldmanager.c - managedFields and server-side apply; see fieldmanager.h.
 *
 * Layout:
 *   1. field sets: a trie keyed by serialized path elements ("f:name",
 *      "k:{...}", "v:...", "i:n"), each node possibly a member;
 *   2. type resolution: what the schema (and strategic-merge metadata)
 *      says a map key or a list is;
 *   3. walks over values: the field set of a configuration, the
 *      comparison of two objects (added / modified / removed paths), the
 *      apply merge, and the removal of a set of paths;
 *   4. the managedFields list: decode, encode, cap;
 *   5. the two operations, Update and Apply, as upstream's chain of
 *      managers composes them.
 *
 * Memory: every function documents what it returns; sets and json values
 * built here are owned by their caller. Allocation failure aborts (the
 * server cannot do anything sensible half-way through a write).
 */
#include "apiserver/fieldmanager/fieldmanager.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "apiserver/registry/definitions/builtin_schemas.h"
#include "apiserver/apiextensions/schema.h"
#include "common/json_cost.h"
#include "common/json_parse.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/validation.h"

#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"
#define MAX_UPDATE_MANAGERS 10

/* ======================================================================
 * small helpers
 * ====================================================================== */

static void oom(void)
{
    CKUBE_ERROR("fieldmanager: out of memory");
    abort();
}

static void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        oom();
    return p;
}

static void *xrealloc(void *p, size_t size)
{
    p = realloc(p, size ? size : 1);
    if (!p)
        oom();
    return p;
}

static char *xstrdup(const char *s)
{
    char *d = strdup(s ? s : "");
    if (!d)
        oom();
    return d;
}

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        oom();
    va_end(ap);
    return s;
}

/* Compact JSON with sorted keys (path elements and last-applied). */
static char *dump_sorted(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s)
        oom();
    return s;
}

static const char *str_or(const char *s, const char *dflt)
{
    return s ? s : dflt;
}

/* ======================================================================
 * 1. field sets
 * ====================================================================== */

/* One allocation per node: the path element is stored inline (sets are
 * built on every write, so their allocations are on the write path). */
struct fm_set {
    bool member;    /* this path itself is in the set */
    fm_set *parent; /* NULL at the root */
    fm_set **kids;  /* sorted by pe_cmp */
    size_t n, cap;
    char pe[]; /* path element; "" at the root */
};

/* Upstream orders path elements: field names, then keys, then values,
 * then indexes. Within a type, the serialized text decides (keys and
 * values compare as their canonical JSON). */
static int pe_rank(const char *pe)
{
    switch (pe[0]) {
    case 'f':
        return 0;
    case 'k':
        return 1;
    case 'v':
        return 2;
    case 'i':
        return 3;
    default:
        return 4;
    }
}

static int pe_cmp(const char *a, const char *b)
{
    int ra = pe_rank(a), rb = pe_rank(b);
    if (ra != rb)
        return ra < rb ? -1 : 1;
    if (ra == 3) {
        long x = strtol(a + 2, NULL, 10), y = strtol(b + 2, NULL, 10);
        return x < y ? -1 : x > y;
    }
    return strcmp(a + 2, b + 2);
}

static fm_set *node_new(const char *pe)
{
    size_t n = strlen(pe);
    fm_set *c = xcalloc(1, sizeof(fm_set) + n + 1);
    memcpy(c->pe, pe, n + 1);
    return c;
}

static fm_set *set_new(void)
{
    return node_new(""); /* a root */
}

void fm_set_free(fm_set *s)
{
    if (!s)
        return;
    for (size_t i = 0; i < s->n; i++)
        fm_set_free(s->kids[i]);
    free(s->kids);
    free(s);
}

/* Index of the first child whose element is >= pe. */
static size_t set_lower(const fm_set *s, const char *pe)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (pe_cmp(s->kids[mid]->pe, pe) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static fm_set *set_find(const fm_set *s, const char *pe)
{
    if (!s)
        return NULL;
    size_t i = set_lower(s, pe);
    return i < s->n && !pe_cmp(s->kids[i]->pe, pe) ? s->kids[i] : NULL;
}

/* The child for `pe`, created (not a member) if absent. */
static fm_set *set_child(fm_set *s, const char *pe)
{
    size_t i = set_lower(s, pe);
    if (i < s->n && !pe_cmp(s->kids[i]->pe, pe))
        return s->kids[i];
    if (s->n == s->cap) {
        s->cap = s->cap ? s->cap * 2 : 4;
        s->kids = xrealloc(s->kids, s->cap * sizeof *s->kids);
    }
    memmove(s->kids + i + 1, s->kids + i, (s->n - i) * sizeof *s->kids);
    fm_set *c = node_new(pe);
    c->parent = s;
    s->kids[i] = c;
    s->n++;
    return c;
}

static bool set_empty(const fm_set *s)
{
    if (!s)
        return true;
    if (s->member)
        return false;
    for (size_t i = 0; i < s->n; i++)
        if (!set_empty(s->kids[i]))
            return false;
    return true;
}

bool fm_set_empty(const fm_set *s)
{
    return set_empty(s);
}

/* Drops children that own nothing. */
static void set_compact(fm_set *s)
{
    size_t j = 0;
    for (size_t i = 0; i < s->n; i++) {
        set_compact(s->kids[i]);
        if (!s->kids[i]->member && !s->kids[i]->n)
            fm_set_free(s->kids[i]);
        else
            s->kids[j++] = s->kids[i];
    }
    s->n = j;
}

static void set_union_into(fm_set *dst, const fm_set *src)
{
    if (!src)
        return;
    dst->member |= src->member;
    for (size_t i = 0; i < src->n; i++)
        set_union_into(set_child(dst, src->kids[i]->pe), src->kids[i]);
}

static fm_set *set_copy(const fm_set *s)
{
    fm_set *c = set_new();
    set_union_into(c, s);
    set_compact(c);
    return c;
}

/* a -= b: members of b stop being members of a (children stay). */
static void set_subtract(fm_set *a, const fm_set *b)
{
    if (!b)
        return;
    if (b->member)
        a->member = false;
    for (size_t i = 0; i < a->n; i++)
        set_subtract(a->kids[i], set_find(b, a->kids[i]->pe));
}

static void set_clear(fm_set *s)
{
    for (size_t i = 0; i < s->n; i++)
        fm_set_free(s->kids[i]);
    s->n = 0;
    s->member = false;
}

static void intersect_into(fm_set *r, const fm_set *a, const fm_set *b)
{
    r->member = a->member && b->member;
    for (size_t i = 0; i < a->n; i++) {
        const fm_set *bk = set_find(b, a->kids[i]->pe);
        if (bk)
            intersect_into(set_child(r, a->kids[i]->pe), a->kids[i], bk);
    }
}

static fm_set *set_intersect(const fm_set *a, const fm_set *b)
{
    fm_set *r = set_new();
    if (a && b)
        intersect_into(r, a, b);
    set_compact(r);
    return r;
}

/* Node at a path of elements, or NULL. */
static fm_set *set_at(const fm_set *s, const char *const *pes, size_t n)
{
    for (size_t i = 0; s && i < n; i++)
        s = set_find(s, pes[i]);
    return (fm_set *)s;
}

/* ---- FieldsV1 ---- */

static json_t *fields_of(const fm_set *s)
{
    json_t *o = json_object();
    if (s->member && s->n && s->parent)
        json_object_set_new(o, ".", json_object());
    for (size_t i = 0; i < s->n; i++)
        json_object_set_new(o, s->kids[i]->pe, fields_of(s->kids[i]));
    return o;
}

json_t *fm_set_to_fields(const fm_set *s)
{
    return fields_of(s);
}

/* The value in a path element's text ("k:{...}", "v:..."): client-sent
 * managedFields can hold any text there. A real one is an object of a
 * list's merge keys or a scalar, a few times its text in memory at most,
 * so 64 KiB plus 8 times the text is room enough: dense JSON made to
 * amplify stops there. */
static json_t *pe_value(const char *text, json_error_t *je)
{
    size_t len = strlen(text);
    return ckube__json_loadb_limited(text, len, JSON_DECODE_ANY, ((size_t)64 << 10) + 8 * len, NULL,
                                     NULL, je);
}

/* Canonical form of a serialized path element, or NULL: *err set when it
 * is malformed, untouched for an unknown element type (skipped, as
 * upstream skips what a newer version may understand). */
static char *canon_pe(const char *key, char **err)
{
    size_t len = strlen(key);
    if (len < 2) {
        *err = xasprintf("key must be 2 characters long: %s", key);
        return NULL;
    }
    if (key[1] != ':') {
        *err = xasprintf("missing colon: %s", key);
        return NULL;
    }
    switch (key[0]) {
    case 'f':
        return xstrdup(key);
    case 'i': {
        const char *p = key + 2;
        if (*p == '+' || *p == '-')
            p++;
        if (!*p || strspn(p, "0123456789") != strlen(p)) {
            *err = xasprintf("parsing key as path element: invalid index %s", key);
            return NULL;
        }
        return xasprintf("i:%ld", strtol(key + 2, NULL, 10));
    }
    case 'k':
    case 'v': {
        json_error_t je;
        json_t *v = pe_value(key + 2, &je);
        if (!v || (key[0] == 'k' && !json_is_object(v))) {
            *err = xasprintf("parsing key as path element: %s: %s", key,
                             v ? "expected an object" : je.text);
            json_decref(v);
            return NULL;
        }
        char *d = dump_sorted(v);
        json_decref(v);
        char *pe = xasprintf("%c:%s", key[0], d);
        free(d);
        return pe;
    }
    default:
        return NULL;
    }
}

static int fields_parse(const json_t *o, fm_set *node, char **err)
{
    if (!json_is_object(o)) {
        *err = xstrdup("fields must be objects");
        return -1;
    }
    bool kids = false;
    const char *key;
    json_t *v;
    json_object_foreach((json_t *)o, key, v)
    {
        if (!strcmp(key, ".")) {
            node->member = true;
            continue;
        }
        char *pe = canon_pe(key, err);
        if (!pe) {
            if (*err)
                return -1;
            continue;
        }
        fm_set *c = set_child(node, pe);
        free(pe);
        if (fields_parse(v, c, err))
            return -1;
        kids = true;
    }
    if (!kids)
        node->member = true;
    return 0;
}

fm_set *fm_set_from_fields(const json_t *fields, char **err)
{
    *err = NULL;
    fm_set *s = set_new();
    if (fields && !json_is_null(fields) && fields_parse(fields, s, err)) {
        fm_set_free(s);
        return NULL;
    }
    s->member = false;
    set_compact(s);
    return s;
}

/* ---- paths as upstream prints them (".spec.containers[name=\"a\"].image") ---- */

static void print_pe(FILE *f, const char *pe)
{
    switch (pe[0]) {
    case 'f':
        fprintf(f, ".%s", pe + 2);
        return;
    case 'i':
        fprintf(f, "[%s]", pe + 2);
        return;
    case 'k':
    case 'v': {
        json_error_t je;
        json_t *v = pe_value(pe + 2, &je);
        if (pe[0] == 'v') {
            char *s = schema_format_value(v);
            fprintf(f, "[=%s]", s ? s : "");
            free(s);
        } else {
            fputc('[', f);
            const char *k;
            json_t *x;
            bool first = true;
            json_object_foreach(v, k, x)
            {
                char *s = schema_format_value(x);
                fprintf(f, "%s%s=%s", first ? "" : ",", k, s ? s : "");
                free(s);
                first = false;
            }
            fputc(']', f);
        }
        json_decref(v);
        return;
    }
    default:
        fputs(pe, f);
    }
}

static char *path_string(const char *const *pes, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        oom();
    for (size_t i = 0; i < n; i++)
        print_pe(f, pes[i]);
    fclose(f);
    return buf;
}

/* Path of a node, from its parents. */
static char *node_path(const fm_set *s)
{
    size_t depth = 0;
    for (const fm_set *p = s; p && p->parent; p = p->parent)
        depth++;
    const char **pes = xcalloc(depth, sizeof *pes);
    size_t i = depth;
    for (const fm_set *p = s; p && p->parent; p = p->parent)
        pes[--i] = p->pe;
    char *r = path_string(pes, depth);
    free(pes);
    return r;
}

/* Calls fn for every member, members of a node before its children's, as
 * upstream iterates. */
typedef void (*member_fn)(void *ctx, const char *const *pes, size_t n);

static void members_walk(const fm_set *s, const char **stack, size_t depth, member_fn fn, void *ctx)
{
    for (size_t i = 0; i < s->n; i++) {
        if (s->kids[i]->member) {
            stack[depth] = s->kids[i]->pe;
            fn(ctx, stack, depth + 1);
        }
    }
    for (size_t i = 0; i < s->n; i++) {
        if (s->kids[i]->n) {
            stack[depth] = s->kids[i]->pe;
            members_walk(s->kids[i], stack, depth + 1, fn, ctx);
        }
    }
}

static size_t set_depth(const fm_set *s)
{
    size_t d = 0;
    for (size_t i = 0; i < s->n; i++) {
        size_t k = set_depth(s->kids[i]) + 1;
        if (k > d)
            d = k;
    }
    return d;
}

static void set_members(const fm_set *s, member_fn fn, void *ctx)
{
    const char **stack = xcalloc(set_depth(s) + 1, sizeof *stack);
    members_walk(s, stack, 0, fn, ctx);
    free(stack);
}

/* ======================================================================
 * 2. type resolution
 * ====================================================================== */

/* Where a value sits in its type. */
typedef struct tnode {
    const json_t *s;                  /* schema node; NULL: deduced from the value */
    const ckube_patch_meta_entry *pm; /* strategic merge metadata; NULL: none */
    bool custom;                      /* lists follow x-kubernetes-list-type only */
    char path[256];                   /* field path for pm lookups; list items add nothing */
} tnode;

enum { REL_ATOMIC, REL_SET, REL_MAP };

#define MAX_KEYS 8
typedef struct lkind {
    int rel;
    const char *keys[MAX_KEYS];
    const json_t *defaults[MAX_KEYS]; /* borrowed; NULL: none */
    size_t nkeys;
} lkind;

static pthread_once_t statics_once = PTHREAD_ONCE_INIT;
static json_t *objectmeta_schema; /* process lifetime */
static json_t *tcp_default;       /* "TCP", process lifetime */

static void statics_init(void)
{
    objectmeta_schema = builtin_schema_fragment("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    tcp_default = json_string("TCP");
}

static tnode tn_root(const fm_type *t)
{
    pthread_once(&statics_once, statics_init);
    tnode n;
    memset(&n, 0, sizeof n);
    n.s = json_is_object(t->schema) ? t->schema : NULL;
    n.pm = t->patch_meta;
    n.custom = t->custom;
    return n;
}

static bool tn_is_root(const tnode *n)
{
    return !n->path[0];
}

/* c->path = n->path + "." + key. A path too long for the buffer becomes
 * "~", which no strategic-merge table names (so its lists are atomic). */
static void tn_path_append(tnode *c, const tnode *n, const char *key)
{
    size_t len = strlen(n->path), klen = strlen(key);
    if (len + 1 + klen >= sizeof c->path || !strcmp(n->path, "~")) {
        strcpy(c->path, "~");
        return;
    }
    if (len)
        c->path[len++] = '.';
    memcpy(c->path + len, key, klen + 1);
}

/* The type of field `key` of map `n`. Sets *named when key is a declared
 * property (a struct field) rather than a map entry. Returns false when
 * `n` is a closed struct that has no such field (the value is not part
 * of the type and owns nothing). */
static bool tn_field(const tnode *n, bool root, const char *key, tnode *c, bool *named)
{
    *c = *n;
    tn_path_append(c, n, key);
    *named = false;
    if (root && !strcmp(key, "metadata")) {
        /* ObjectMeta's rules whatever the type's schema says. */
        c->s = objectmeta_schema;
        c->pm = patchmeta_metadata_only;
        c->custom = false;
        *named = true;
        return true;
    }
    const json_t *s = n->s;
    if (!s) {
        c->s = NULL;
        return true;
    }
    const json_t *props = json_object_get(s, "properties");
    const json_t *p = json_object_get(props, key);
    if (json_is_object(p)) {
        c->s = p;
        *named = true;
        return true;
    }
    if (root && (!strcmp(key, "apiVersion") || !strcmp(key, "kind"))) {
        c->s = NULL;
        *named = true;
        return true;
    }
    const json_t *addl = json_object_get(s, "additionalProperties");
    if (json_is_object(addl)) {
        c->s = addl;
        return true;
    }
    if (json_is_true(addl) ||
        json_is_true(json_object_get(s, "x-kubernetes-preserve-unknown-fields"))) {
        c->s = NULL;
        return true;
    }
    const char *type = json_string_value(json_object_get(s, "type"));
    if (!props && !addl && !(type && !strcmp(type, "object"))) {
        c->s = NULL; /* the schema says nothing about this object */
        return true;
    }
    return false;
}

/* Upstream's +structType=atomic types among the built-in schemas. */
static const char *const atomic_structs[] = {
    "io.k8s.apimachinery.pkg.apis.meta.v1.LabelSelector",
    "io.k8s.apimachinery.pkg.apis.meta.v1.OwnerReference",
    "io.k8s.api.core.v1.LocalObjectReference",
    "io.k8s.api.core.v1.ObjectReference",
    "io.k8s.api.core.v1.ConfigMapKeySelector",
    "io.k8s.api.core.v1.SecretKeySelector",
    "io.k8s.api.core.v1.ObjectFieldSelector",
    "io.k8s.api.core.v1.ResourceFieldSelector",
    NULL,
};

static bool ends_with(const char *s, const char *suffix)
{
    size_t a = strlen(s), b = strlen(suffix);
    return a >= b && !strcmp(s + a - b, suffix);
}

static bool tn_map_atomic(const tnode *n)
{
    if (!n->s)
        return false;
    const char *mt = json_string_value(json_object_get(n->s, "x-kubernetes-map-type"));
    if (mt)
        return !strcmp(mt, "atomic");
    if (!n->custom) {
        /* +mapType=atomic maps: a Service's selector, a pod's nodeSelector
         * (a workload's spec.selector is a LabelSelector, atomic too). */
        if (!strcmp(n->path, "spec.selector") || ends_with(n->path, "nodeSelector"))
            return true;
        const char *ref = json_string_value(json_object_get(n->s, "x-ckube-ref"));
        for (const char *const *a = atomic_structs; ref && *a; a++)
            if (!strcmp(ref, *a))
                return true;
    }
    return false;
}

/* Built-in associative lists whose server-side-apply keys differ from the
 * strategic merge key (upstream's x-kubernetes-list-map-keys). */
static void builtin_keys(const char *path, const char *merge_key, lkind *lk)
{
    lk->rel = REL_MAP;
    lk->keys[0] = merge_key;
    lk->nkeys = 1;
    if (!strcmp(merge_key, "containerPort") && ends_with(path, ".ports")) {
        lk->keys[1] = "protocol";
        lk->defaults[1] = tcp_default;
        lk->nkeys = 2;
    } else if (!strcmp(merge_key, "port") && !strcmp(path, "spec.ports")) {
        lk->keys[1] = "protocol";
        lk->defaults[1] = tcp_default;
        lk->nkeys = 2;
    } else if (!strcmp(merge_key, "topologyKey")) {
        lk->keys[1] = "whenUnsatisfiable";
        lk->nkeys = 2;
    }
}

static void tn_list(const tnode *n, lkind *lk)
{
    memset(lk, 0, sizeof *lk);
    lk->rel = REL_ATOMIC;
    if (!n->s)
        return;
    const char *lt = json_string_value(json_object_get(n->s, "x-kubernetes-list-type"));
    if (lt) {
        if (!strcmp(lt, "set")) {
            lk->rel = REL_SET;
        } else if (!strcmp(lt, "map")) {
            size_t i;
            json_t *k;
            json_array_foreach(json_object_get(n->s, "x-kubernetes-list-map-keys"), i, k)
            {
                if (json_is_string(k) && lk->nkeys < MAX_KEYS)
                    lk->keys[lk->nkeys++] = json_string_value(k);
            }
            if (lk->nkeys)
                lk->rel = REL_MAP;
        }
    } else if (!n->custom && n->pm) {
        const char *mk = NULL;
        unsigned st = ckube_patch_meta_table((void *)n->pm, n->path, &mk);
        if ((st & CKUBE_STRATEGY_MERGE) && strcmp(n->path, "status.podIPs") &&
            strcmp(n->path, "status.hostIPs")) {
            if (mk)
                builtin_keys(n->path, mk, lk);
            else
                lk->rel = REL_SET;
        }
    }
    const json_t *iprops = json_object_get(json_object_get(n->s, "items"), "properties");
    for (size_t i = 0; i < lk->nkeys; i++) {
        const json_t *d = json_object_get(json_object_get(iprops, lk->keys[i]), "default");
        if (!lk->defaults[i] && d)
            lk->defaults[i] = d;
    }
}

static void tn_item(const tnode *n, tnode *c)
{
    *c = *n;
    const json_t *items = n->s ? json_object_get(n->s, "items") : NULL;
    c->s = json_is_object(items) ? items : NULL;
}

/* The path element of a list item: malloc'd, or NULL with *err. */
static char *item_pe(const lkind *lk, const json_t *item, char **err)
{
    if (lk->rel == REL_MAP) {
        if (!json_is_object(item)) {
            *err = xstrdup("associative list with keys may not have non-map elements");
            return NULL;
        }
        json_t *k = json_object();
        for (size_t i = 0; i < lk->nkeys; i++) {
            json_t *v = json_object_get(item, lk->keys[i]);
            if (!v)
                v = (json_t *)lk->defaults[i];
            if (!v) {
                *err = xasprintf("associative list with keys has an element that omits key "
                                 "field \"%s\" (and doesn't have default value)",
                                 lk->keys[i]);
                json_decref(k);
                return NULL;
            }
            json_object_set(k, lk->keys[i], v);
        }
        char *d = dump_sorted(k);
        json_decref(k);
        char *pe = xasprintf("k:%s", d);
        free(d);
        return pe;
    }
    if (json_is_object(item) || json_is_array(item)) {
        *err = xasprintf("associative list without keys has an element that's a %s type",
                         json_is_object(item) ? "map" : "list");
        return NULL;
    }
    char *d = dump_sorted(item);
    char *pe = xasprintf("v:%s", d);
    free(d);
    return pe;
}

/* The items of a granular list with their path elements, and a sorted
 * view for lookups. */
typedef struct lindex {
    size_t n;
    char **pe;
    const json_t **v;
    size_t *sorted; /* indexes into pe[], ordered by pe_cmp */
} lindex;

static void lindex_free(lindex *ix)
{
    for (size_t i = 0; i < ix->n; i++)
        free(ix->pe[i]);
    free(ix->pe);
    free(ix->v);
    free(ix->sorted);
    memset(ix, 0, sizeof *ix);
}

static int sort_cmp(const void *a, const void *b, void *ctx)
{
    const lindex *ix = ctx;
    return pe_cmp(ix->pe[*(const size_t *)a], ix->pe[*(const size_t *)b]);
}

/* Indexes `arr` (NULL or null: empty). Fails with *err on an item without
 * its keys or a duplicate. */
static int lindex_build(const lkind *lk, const json_t *arr, lindex *ix, char **err)
{
    memset(ix, 0, sizeof *ix);
    size_t n = json_array_size(arr);
    ix->pe = xcalloc(n, sizeof *ix->pe);
    ix->v = xcalloc(n, sizeof *ix->v);
    ix->sorted = xcalloc(n, sizeof *ix->sorted);
    for (size_t i = 0; i < n; i++) {
        const json_t *item = json_array_get(arr, i);
        char *pe = item_pe(lk, item, err);
        if (!pe) {
            char *e = xasprintf("element %zu: %s", i, *err);
            free(*err);
            *err = e;
            lindex_free(ix);
            return -1;
        }
        ix->pe[ix->n] = pe;
        ix->v[ix->n] = item;
        ix->sorted[ix->n] = ix->n;
        ix->n++;
    }
    qsort_r(ix->sorted, ix->n, sizeof *ix->sorted, sort_cmp, ix);
    for (size_t i = 1; i < ix->n; i++) {
        const char *a = ix->pe[ix->sorted[i - 1]], *b = ix->pe[ix->sorted[i]];
        if (!pe_cmp(a, b)) {
            char *p = path_string(&b, 1);
            *err = xasprintf("duplicate entries for key %s", p);
            free(p);
            lindex_free(ix);
            return -1;
        }
    }
    return 0;
}

static long lindex_find(const lindex *ix, const char *pe)
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = pe_cmp(ix->pe[ix->sorted[mid]], pe);
        if (!c)
            return (long)ix->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}

/* ======================================================================
 * 3. walks
 * ====================================================================== */

/* "f:" + key, built on every field of every write: in the caller's
 * buffer when it fits (nearly always), else malloc'd. pe_done frees. */
typedef struct pe_buf {
    char *p;
    char small[96];
} pe_buf;

static const char *key_pe(pe_buf *b, const char *key)
{
    size_t n = strlen(key);
    b->p = n + 3 <= sizeof b->small ? b->small : xcalloc(1, n + 3);
    b->p[0] = 'f';
    b->p[1] = ':';
    memcpy(b->p + 2, key, n + 1);
    return b->p;
}

static void pe_done(pe_buf *b)
{
    if (b->p != b->small)
        free(b->p);
}

/* ---- the field set of a configuration (upstream's ToFieldSet) ---- */

typedef struct toset_ctx {
    char *err; /* first error, with its path */
} toset_ctx;

static int toset(toset_ctx *w, const tnode *n, const json_t *v, fm_set *node)
{
    if (json_is_object(v)) {
        if (tn_map_atomic(n)) {
            node->member = true;
            return 0;
        }
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val)
        {
            tnode c;
            bool named;
            if (!tn_field(n, tn_is_root(n), key, &c, &named))
                continue;
            pe_buf pb;
            fm_set *ch = set_child(node, key_pe(&pb, key));
            pe_done(&pb);
            if (toset(w, &c, val, ch))
                return -1;
            if (!named)
                ch->member = true;
        }
        return 0;
    }
    if (json_is_array(v)) {
        lkind lk;
        tn_list(n, &lk);
        if (lk.rel == REL_ATOMIC) {
            node->member = true;
            return 0;
        }
        lindex ix;
        char *err = NULL;
        if (lindex_build(&lk, v, &ix, &err)) {
            char *p = node_path(node);
            w->err = xasprintf("%s: %s", p, err);
            free(p);
            free(err);
            return -1;
        }
        tnode ic;
        tn_item(n, &ic);
        for (size_t i = 0; i < ix.n; i++) {
            fm_set *ch = set_child(node, ix.pe[i]);
            if (toset(w, &ic, ix.v[i], ch)) {
                lindex_free(&ix);
                return -1;
            }
            ch->member = true;
        }
        lindex_free(&ix);
        return 0;
    }
    node->member = true; /* scalars, null included */
    return 0;
}

static fm_set *fieldset(const fm_type *t, const json_t *obj, char **err)
{
    tnode root = tn_root(t);
    toset_ctx w = {0};
    fm_set *s = set_new();
    if (toset(&w, &root, obj, s)) {
        fm_set_free(s);
        *err = w.err;
        return NULL;
    }
    set_compact(s);
    *err = NULL;
    return s;
}

fm_set *fm_set_of(const fm_type *t, const json_t *obj, char **err)
{
    return fieldset(t, obj, err);
}

/* ---- comparison (upstream's Compare: added, modified, removed) ---- */

enum { V_NONE, V_NULL, V_SCALAR, V_MAP, V_LIST };

static int vkind(const json_t *v)
{
    if (!v)
        return V_NONE;
    if (json_is_null(v))
        return V_NULL;
    if (json_is_object(v))
        return V_MAP;
    if (json_is_array(v))
        return V_LIST;
    return V_SCALAR;
}

static size_t vsize(const json_t *v)
{
    return json_is_object(v) ? json_object_size(v) : json_array_size(v);
}

typedef struct cmp_ctx {
    fm_set *added, *modified, *removed;
    const char **stack; /* current path (borrowed elements) */
    size_t depth, cap;
} cmp_ctx;

static void cmp_push(cmp_ctx *c, const char *pe)
{
    if (c->depth == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->stack = xrealloc(c->stack, c->cap * sizeof *c->stack);
    }
    c->stack[c->depth++] = pe;
}

static void cmp_mark(cmp_ctx *c, fm_set *root)
{
    if (!c->depth)
        return;
    fm_set *n = root;
    for (size_t i = 0; i < c->depth; i++)
        n = set_child(n, c->stack[i]);
    n->member = true;
}

static void cmp_leaf(cmp_ctx *c, const json_t *l, const json_t *r)
{
    if (!l)
        cmp_mark(c, c->added);
    else if (!r)
        cmp_mark(c, c->removed);
    else if (!ckube_patch_json_equal(l, r))
        cmp_mark(c, c->modified);
}

static void cmp_walk(cmp_ctx *c, const tnode *n, const json_t *l, const json_t *r);

static void cmp_map(cmp_ctx *c, const tnode *n, const json_t *l, const json_t *r)
{
    const char *key;
    json_t *v;
    bool root = tn_is_root(n);
    json_object_foreach((json_t *)l, key, v)
    {
        tnode ct;
        bool named;
        if (!tn_field(n, root, key, &ct, &named))
            continue;
        pe_buf pb;
        cmp_push(c, key_pe(&pb, key));
        cmp_walk(c, &ct, v, json_object_get(r, key));
        c->depth--;
        pe_done(&pb);
    }
    json_object_foreach((json_t *)r, key, v)
    {
        tnode ct;
        bool named;
        if (json_object_get(l, key) || !tn_field(n, root, key, &ct, &named))
            continue;
        pe_buf pb;
        cmp_push(c, key_pe(&pb, key));
        cmp_walk(c, &ct, NULL, v);
        c->depth--;
        pe_done(&pb);
    }
}

/* Returns false when the lists cannot be compared item by item (then they
 * are compared whole). */
static bool cmp_list(cmp_ctx *c, const tnode *n, const lkind *lk, const json_t *l, const json_t *r)
{
    lindex li, ri;
    char *err = NULL;
    if (lindex_build(lk, l, &li, &err)) {
        free(err);
        return false;
    }
    if (lindex_build(lk, r, &ri, &err)) {
        free(err);
        lindex_free(&li);
        return false;
    }
    tnode it;
    tn_item(n, &it);
    for (size_t i = 0; i < li.n; i++) {
        long j = lindex_find(&ri, li.pe[i]);
        cmp_push(c, li.pe[i]);
        cmp_walk(c, &it, li.v[i], j >= 0 ? ri.v[j] : NULL);
        c->depth--;
    }
    for (size_t j = 0; j < ri.n; j++) {
        if (lindex_find(&li, ri.pe[j]) >= 0)
            continue;
        cmp_push(c, ri.pe[j]);
        cmp_walk(c, &it, NULL, ri.v[j]);
        c->depth--;
    }
    lindex_free(&li);
    lindex_free(&ri);
    return true;
}

/* l, r: the values on each side, NULL when absent. */
static void cmp_walk(cmp_ctx *c, const tnode *n, const json_t *l, const json_t *r)
{
    int kl = vkind(l), kr = vkind(r);
    /* A container on one side with null or nothing on the other is
     * compared as that container (null is its empty value). */
    int k = kl > V_NULL ? kl : kr;
    bool fits_l = kl <= V_NULL || kl == k, fits_r = kr <= V_NULL || kr == k;
    if (k <= V_SCALAR || !fits_l || !fits_r) {
        cmp_leaf(c, l, r);
        return;
    }
    bool both_empty = vsize(l) == 0 && vsize(r) == 0;
    if (k == V_MAP) {
        if (tn_map_atomic(n) || both_empty) {
            cmp_leaf(c, l, r);
            return;
        }
        cmp_map(c, n, l, r);
    } else {
        lkind lk;
        tn_list(n, &lk);
        if (lk.rel == REL_ATOMIC || both_empty || !cmp_list(c, n, &lk, l, r)) {
            cmp_leaf(c, l, r);
            return;
        }
    }
    if (!l)
        cmp_mark(c, c->added);
    else if (!r)
        cmp_mark(c, c->removed);
}

typedef struct comparison {
    fm_set *added, *modified, *removed;
} comparison;

static void comparison_free(comparison *cm)
{
    fm_set_free(cm->added);
    fm_set_free(cm->modified);
    fm_set_free(cm->removed);
}

static void compare(const fm_type *t, const json_t *l, const json_t *r, comparison *out)
{
    tnode root = tn_root(t);
    cmp_ctx c = {.added = set_new(), .modified = set_new(), .removed = set_new()};
    cmp_walk(&c, &root, l, r);
    free(c.stack);
    set_compact(c.added);
    set_compact(c.modified);
    set_compact(c.removed);
    out->added = c.added;
    out->modified = c.modified;
    out->removed = c.removed;
}

/* ---- apply merge (upstream's Merge, keeping the right-hand side) ---- */

static json_t *merge_walk(const tnode *n, const json_t *l, const json_t *r, char **err);

static json_t *merge_map(const tnode *n, const json_t *l, const json_t *r, char **err)
{
    json_t *out = json_object();
    const char *key;
    json_t *v;
    bool root = tn_is_root(n);
    json_object_foreach((json_t *)l, key, v)
    {
        json_t *rv = json_object_get(r, key);
        tnode ct;
        bool named;
        json_t *m;
        if (!rv)
            m = json_deep_copy(v);
        else if (!tn_field(n, root, key, &ct, &named))
            m = json_deep_copy(rv);
        else if (!(m = merge_walk(&ct, v, rv, err))) {
            json_decref(out);
            return NULL;
        }
        json_object_set_new(out, key, m);
    }
    json_object_foreach((json_t *)r, key, v)
    {
        if (!json_object_get(l, key))
            json_object_set_new(out, key, json_deep_copy(v));
    }
    return out;
}

/* Items in a stable order: items only in the live list keep their place,
 * items of the configuration come in its order, shared items merged
 * where the configuration puts them. */
static json_t *merge_list(const tnode *n, const lindex *li, const lindex *ri, char **err)
{
    json_t *out = json_array();
    tnode it;
    tn_item(n, &it);
    /* Shared items, in the configuration's order. */
    size_t *shared = xcalloc(ri->n, sizeof *shared), nshared = 0, next = 0;
    for (size_t j = 0; j < ri->n; j++)
        if (lindex_find(li, ri->pe[j]) >= 0)
            shared[nshared++] = j;
    size_t i = 0, j = 0;
    while (i < li->n || j < ri->n) {
        const char *want = next < nshared ? ri->pe[shared[next]] : NULL;
        json_t *m = NULL;
        if (i < li->n && j < ri->n && !pe_cmp(li->pe[i], ri->pe[j])) {
            m = merge_walk(&it, li->v[i], ri->v[j], err);
            i++;
            j++;
            next++;
        } else if (i < li->n && lindex_find(ri, li->pe[i]) >= 0 && want &&
                   pe_cmp(want, li->pe[i])) {
            i++; /* shared, but placed later by the configuration */
            continue;
        } else if (i < li->n && lindex_find(ri, li->pe[i]) < 0) {
            m = json_deep_copy(li->v[i]);
            i++;
        } else if (j < ri->n) {
            long lj = lindex_find(li, ri->pe[j]);
            m = lj >= 0 ? merge_walk(&it, li->v[lj], ri->v[j], err) : json_deep_copy(ri->v[j]);
            if (want && !pe_cmp(want, ri->pe[j]))
                next++;
            j++;
        } else {
            i++; /* a shared live item already merged */
            continue;
        }
        if (!m) {
            free(shared);
            json_decref(out);
            return NULL;
        }
        json_array_append_new(out, m);
    }
    free(shared);
    return out;
}

static json_t *merge_walk(const tnode *n, const json_t *l, const json_t *r, char **err)
{
    if (!r)
        return json_deep_copy(l);
    if (!l)
        return json_deep_copy(r);
    int kl = vkind(l), kr = vkind(r);
    if (kl != kr || kl <= V_SCALAR)
        return json_deep_copy(r);
    bool both_empty = vsize(l) == 0 && vsize(r) == 0;
    if (kl == V_MAP) {
        if (tn_map_atomic(n) || both_empty)
            return json_deep_copy(r);
        return merge_map(n, l, r, err);
    }
    lkind lk;
    tn_list(n, &lk);
    if (lk.rel == REL_ATOMIC || both_empty)
        return json_deep_copy(r);
    lindex li, ri;
    if (lindex_build(&lk, r, &ri, err))
        return NULL;
    char *lerr = NULL;
    if (lindex_build(&lk, l, &li, &lerr)) {
        /* A live list that cannot be keyed is replaced whole. */
        free(lerr);
        lindex_free(&ri);
        return json_deep_copy(r);
    }
    json_t *out = merge_list(n, &li, &ri, err);
    lindex_free(&li);
    lindex_free(&ri);
    return out;
}

/* ---- removal of paths (upstream's RemoveItems) ---- */

/* Removes the members of `rm` from v (in place). Returns true when v had
 * content and has none left. */
static bool remove_walk(const tnode *n, json_t *v, const fm_set *rm)
{
    if (!rm || !rm->n || vsize(v) == 0)
        return false;
    if (json_is_object(v)) {
        if (tn_map_atomic(n))
            return false;
        const char *key;
        json_t *val;
        void *tmp;
        bool root = tn_is_root(n);
        json_object_foreach_safe(v, tmp, key, val)
        {
            pe_buf pb;
            const fm_set *c = set_find(rm, key_pe(&pb, key));
            pe_done(&pb);
            tnode ct;
            bool named;
            if (!c || !tn_field(n, root, key, &ct, &named))
                continue;
            if (c->member || remove_walk(&ct, val, c))
                json_object_del(v, key);
        }
        return json_object_size(v) == 0;
    }
    if (json_is_array(v)) {
        lkind lk;
        tn_list(n, &lk);
        if (lk.rel == REL_ATOMIC)
            return false;
        lindex ix;
        char *err = NULL;
        if (lindex_build(&lk, v, &ix, &err)) {
            free(err);
            return false;
        }
        tnode it;
        tn_item(n, &it);
        json_t *keep = json_array();
        for (size_t i = 0; i < ix.n; i++) {
            const fm_set *c = set_find(rm, ix.pe[i]);
            if (c && (c->member || remove_walk(&it, (json_t *)ix.v[i], c)))
                continue;
            json_array_append(keep, (json_t *)ix.v[i]);
        }
        lindex_free(&ix);
        json_array_clear(v);
        json_array_extend(v, keep);
        json_decref(keep);
        return json_array_size(v) == 0;
    }
    return false;
}

/* Marks struct fields that have owned children as members themselves
 * (upstream's EnsureNamedFieldsAreMembers), so that pruning sees them. */
static void ensure_named(const tnode *n, fm_set *s)
{
    bool root = tn_is_root(n);
    for (size_t i = 0; i < s->n; i++) {
        fm_set *k = s->kids[i];
        tnode ct;
        if (k->pe[0] == 'f') {
            bool named;
            if (!tn_field(n, root, k->pe + 2, &ct, &named))
                continue;
            if (named && k->n)
                k->member = true;
        } else {
            tn_item(n, &ct);
        }
        ensure_named(&ct, k);
    }
}

/* ======================================================================
 * 4. managedFields
 * ====================================================================== */

typedef struct fm_entry {
    char *manager;
    bool apply;
    char *api_version;
    char *subresource; /* "" for the main resource */
    char *time;        /* NULL: none recorded */
    fm_set *set;
} fm_entry;

struct fm_managed {
    fm_entry *e;
    size_t n, cap;
};

static fm_managed *managed_new(void)
{
    return xcalloc(1, sizeof(fm_managed));
}

static void entry_free(fm_entry *e)
{
    free(e->manager);
    free(e->api_version);
    free(e->subresource);
    free(e->time);
    fm_set_free(e->set);
}

void fm_managed_free(fm_managed *m)
{
    if (!m)
        return;
    for (size_t i = 0; i < m->n; i++)
        entry_free(&m->e[i]);
    free(m->e);
    free(m);
}

static fm_managed *managed_copy(const fm_managed *m)
{
    fm_managed *c = managed_new();
    c->cap = c->n = m->n;
    c->e = xcalloc(m->n, sizeof *c->e);
    for (size_t i = 0; i < m->n; i++) {
        const fm_entry *s = &m->e[i];
        c->e[i] = (fm_entry){xstrdup(s->manager),
                             s->apply,
                             xstrdup(s->api_version),
                             xstrdup(s->subresource),
                             s->time ? xstrdup(s->time) : NULL,
                             set_copy(s->set)};
    }
    return c;
}

/* Entries are identified by manager, operation, subresource and, for
 * updates, apiVersion (upstream's BuildManagerIdentifier). */
static long managed_find(const fm_managed *m, const char *manager, bool apply,
                         const char *api_version, const char *subresource)
{
    for (size_t i = 0; i < m->n; i++) {
        const fm_entry *e = &m->e[i];
        if (e->apply == apply && !strcmp(e->manager, manager) &&
            !strcmp(e->subresource, subresource) && (apply || !strcmp(e->api_version, api_version)))
            return (long)i;
    }
    return -1;
}

/* Adds an entry (taking `set`), or replaces the set of an existing one.
 * Returns its index. */
static size_t managed_put(fm_managed *m, const char *manager, bool apply, const char *api_version,
                          const char *subresource, fm_set *set)
{
    long i = managed_find(m, manager, apply, api_version, subresource);
    if (i >= 0) {
        fm_set_free(m->e[i].set);
        m->e[i].set = set;
        free(m->e[i].api_version);
        m->e[i].api_version = xstrdup(api_version);
        return (size_t)i;
    }
    if (m->n == m->cap) {
        m->cap = m->cap ? m->cap * 2 : 4;
        m->e = xrealloc(m->e, m->cap * sizeof *m->e);
    }
    m->e[m->n] =
        (fm_entry){xstrdup(manager), apply, xstrdup(api_version), xstrdup(subresource), NULL, set};
    return m->n++;
}

static void managed_remove(fm_managed *m, size_t i)
{
    entry_free(&m->e[i]);
    memmove(m->e + i, m->e + i + 1, (m->n - i - 1) * sizeof *m->e);
    m->n--;
}

static void managed_drop_empty(fm_managed *m)
{
    for (size_t i = 0; i < m->n;) {
        set_compact(m->e[i].set);
        if (set_empty(m->e[i].set))
            managed_remove(m, i);
        else
            i++;
    }
}

static void set_time(fm_entry *e, const char *now)
{
    free(e->time);
    e->time = xstrdup(now);
}

/* Decodes metadata.managedFields as upstream's DecodeManagedFields: any
 * malformed entry fails the whole list. NULL/null: empty. */
static fm_managed *managed_decode(const json_t *list, char **err)
{
    *err = NULL;
    fm_managed *m = managed_new();
    if (!list || json_is_null(list))
        return m;
    if (!json_is_array(list)) {
        *err = xstrdup("managedFields must be a list");
        fm_managed_free(m);
        return NULL;
    }
    size_t i;
    json_t *it;
    json_array_foreach(list, i, it)
    {
        const char *op = json_string_value(json_object_get(it, "operation"));
        const char *av = json_string_value(json_object_get(it, "apiVersion"));
        const char *ft = json_string_value(json_object_get(it, "fieldsType"));
        json_t *mgr = json_object_get(it, "manager"), *sub = json_object_get(it, "subresource");
        json_t *tm = json_object_get(it, "time");
        if (!json_is_object(it))
            *err = xasprintf("managed fields entry %zu is not an object", i);
        else if (!op || (strcmp(op, "Apply") && strcmp(op, "Update")))
            *err = xstrdup("operation must be `Apply` or `Update`");
        else if (!av || !*av)
            *err = xstrdup("apiVersion must not be empty");
        else if (!ft || !*ft)
            *err = xasprintf("missing fieldsType in managed fields entry %zu", i);
        else if (strcmp(ft, "FieldsV1"))
            *err = xasprintf("invalid fieldsType \"%s\" in managed fields entry %zu", ft, i);
        else if ((mgr && !json_is_string(mgr) && !json_is_null(mgr)) ||
                 (sub && !json_is_string(sub) && !json_is_null(sub)) ||
                 (tm && !json_is_string(tm) && !json_is_null(tm)))
            *err = xasprintf("managed fields entry %zu has a field of the wrong type", i);
        if (*err) {
            fm_managed_free(m);
            return NULL;
        }
        char *ferr = NULL;
        fm_set *set = fm_set_from_fields(json_object_get(it, "fieldsV1"), &ferr);
        if (!set) {
            *err = xasprintf("error decoding versioned set from entry %zu: %s", i, ferr);
            free(ferr);
            fm_managed_free(m);
            return NULL;
        }
        size_t k = managed_put(m, str_or(json_string_value(mgr), ""), !strcmp(op, "Apply"), av,
                               str_or(json_string_value(sub), ""), set);
        free(m->e[k].time);
        m->e[k].time = json_string_value(tm) ? xstrdup(json_string_value(tm)) : NULL;
    }
    return m;
}

static int64_t entry_seconds(const fm_entry *e)
{
    int64_t s = e->time ? ckube_parse_rfc3339(e->time) : 0;
    return s < 0 ? 0 : s;
}

/* Upstream's order: Apply before Update, then by time, manager,
 * apiVersion, subresource. */
static int entry_cmp(const void *pa, const void *pb)
{
    const fm_entry *a = *(const fm_entry *const *)pa, *b = *(const fm_entry *const *)pb;
    if (a->apply != b->apply)
        return a->apply ? -1 : 1;
    int64_t x = entry_seconds(a), y = entry_seconds(b);
    if (x != y)
        return x < y ? -1 : 1;
    int c = strcmp(a->manager, b->manager);
    if (!c)
        c = strcmp(a->api_version, b->api_version);
    if (!c)
        c = strcmp(a->subresource, b->subresource);
    return c;
}

static json_t *managed_encode(const fm_managed *m)
{
    const fm_entry **order = xcalloc(m->n, sizeof *order);
    for (size_t i = 0; i < m->n; i++)
        order[i] = &m->e[i];
    qsort(order, m->n, sizeof *order, entry_cmp);
    json_t *list = json_array();
    for (size_t i = 0; i < m->n; i++) {
        const fm_entry *e = order[i];
        json_t *o = json_object();
        json_object_set_new(o, "manager", json_string(e->manager));
        json_object_set_new(o, "operation", json_string(e->apply ? "Apply" : "Update"));
        json_object_set_new(o, "apiVersion", json_string(e->api_version));
        if (e->time)
            json_object_set_new(o, "time", json_string(e->time));
        json_object_set_new(o, "fieldsType", json_string("FieldsV1"));
        json_object_set_new(o, "fieldsV1", fields_of(e->set));
        if (*e->subresource)
            json_object_set_new(o, "subresource", json_string(e->subresource));
        json_array_append_new(list, o);
    }
    free(order);
    return list;
}

void fm_managed_store(const fm_managed *m, json_t *obj)
{
    json_t *meta = ckube_json_object_ensure(obj, "metadata");
    if (!m || !m->n) {
        json_object_del(meta, "managedFields");
        return;
    }
    json_object_set_new(meta, "managedFields", managed_encode(m));
}

/* Upstream keeps at most 10 update entries: the oldest are merged into
 * one "ancient-changes" entry per apiVersion. */
static void managed_cap(fm_managed *m)
{
    size_t nupd = 0;
    for (size_t i = 0; i < m->n; i++)
        nupd += !m->e[i].apply;
    if (nupd <= MAX_UPDATE_MANAGERS)
        return;
    fm_entry **upd = xcalloc(nupd, sizeof *upd);
    size_t k = 0;
    for (size_t i = 0; i < m->n; i++)
        if (!m->e[i].apply)
            upd[k++] = &m->e[i];
    qsort(upd, nupd, sizeof *upd, entry_cmp);
    /* Work on identities: entries move in m->e as others are removed. */
    typedef struct ident {
        char *manager, *api_version, *subresource;
    } ident;
    ident *ids = xcalloc(nupd, sizeof *ids);
    for (size_t i = 0; i < nupd; i++)
        ids[i] = (ident){xstrdup(upd[i]->manager), xstrdup(upd[i]->api_version),
                         xstrdup(upd[i]->subresource)};
    free(upd);
    size_t length = nupd;
    for (size_t i = 0; i < nupd && length > MAX_UPDATE_MANAGERS; i++) {
        const char *version = ids[i].api_version;
        long first = -1;
        for (size_t j = 0; j < i && first < 0; j++)
            if (!strcmp(ids[j].api_version, version))
                first = (long)j;
        if (first < 0)
            continue; /* the first of its version stays until a second comes */
        long bucket = managed_find(m, "ancient-changes", false, version, "");
        if (bucket < 0) {
            long f = managed_find(m, ids[first].manager, false, version, ids[first].subresource);
            if (f < 0)
                continue;
            free(m->e[f].manager);
            m->e[f].manager = xstrdup("ancient-changes");
            free(m->e[f].subresource);
            m->e[f].subresource = xstrdup("");
            bucket = f;
        }
        long cur = managed_find(m, ids[i].manager, false, version, ids[i].subresource);
        if (cur < 0 || cur == bucket)
            continue;
        set_union_into(m->e[bucket].set, m->e[cur].set);
        free(m->e[bucket].time);
        m->e[bucket].time = m->e[cur].time ? xstrdup(m->e[cur].time) : NULL;
        managed_remove(m, (size_t)cur);
        length--;
    }
    for (size_t i = 0; i < nupd; i++) {
        free(ids[i].manager);
        free(ids[i].api_version);
        free(ids[i].subresource);
    }
    free(ids);
}

/* ======================================================================
 * 5. operations
 * ====================================================================== */

/* Fields no manager ever owns (upstream's stripMeta). */
static const char *const strip_paths[][2] = {
    {"f:apiVersion", NULL},
    {"f:kind", NULL},
    {"f:metadata", NULL},
    {"f:metadata", "f:name"},
    {"f:metadata", "f:namespace"},
    {"f:metadata", "f:creationTimestamp"},
    {"f:metadata", "f:selfLink"},
    {"f:metadata", "f:uid"},
    {"f:metadata", "f:clusterName"},
    {"f:metadata", "f:generation"},
    {"f:metadata", "f:managedFields"},
    {"f:metadata", "f:resourceVersion"},
};

static void strip_meta(fm_set *s)
{
    for (size_t i = 0; i < sizeof strip_paths / sizeof *strip_paths; i++) {
        fm_set *n = set_at(s, strip_paths[i], strip_paths[i][1] ? 2 : 1);
        if (n)
            n->member = false;
    }
    set_compact(s);
}

/* Fields a write through `subresource` never owns (upstream's reset
 * fields): .status for the main resource of a type with a status
 * subresource, everything but .status for /status. */
static void filter_ignored(const fm_type *t, const char *subresource, fm_set *s)
{
    if (!strcmp(subresource, "status")) {
        for (size_t i = 0; i < s->n; i++)
            if (strcmp(s->kids[i]->pe, "f:status"))
                set_clear(s->kids[i]);
        s->member = false;
    } else if (!*subresource && t->status_subresource) {
        fm_set *st = set_find(s, "f:status");
        if (st)
            set_clear(st);
    }
    set_compact(s);
}

/* The object without metadata.managedFields and resourceVersion: a
 * shallow copy sharing everything else (read-only). */
static json_t *without_mf(const json_t *obj)
{
    json_t *c = json_copy((json_t *)obj);
    json_t *meta = json_object_get(c, "metadata");
    if (json_is_object(meta)) {
        meta = json_copy(meta);
        json_object_del(meta, "managedFields");
        json_object_del(meta, "resourceVersion");
        json_object_set_new(c, "metadata", meta);
    }
    return c;
}

/* What an object of the type looks like before anything is set: upstream
 * compares a create with a zero Go struct, whose non-pointer struct
 * fields are present (empty) and whose non-omitempty lists are null. */
static json_t *skeleton(const fm_type *t)
{
    json_t *o = json_object();
    if (t->custom)
        return o;
    json_object_set_new(o, "metadata", json_object());
    static const struct {
        const char *path;
        bool null; /* a null list rather than an empty struct */
    } parts[] = {
        {"spec", false},
        {"status", false},
        {"spec.containers", true},
        {"spec.template", false},
        {"spec.template.metadata", false},
        {"spec.template.spec", false},
        {"spec.template.spec.containers", true},
        {"spec.strategy", false},
    };
    for (size_t i = 0; i < sizeof parts / sizeof *parts; i++) {
        char buf[64];
        strcpy(buf, parts[i].path); /* all shorter than buf */
        const json_t *s = t->schema;
        json_t *cur = o;
        char *save = NULL;
        for (char *seg = strtok_r(buf, ".", &save); seg; seg = strtok_r(NULL, ".", &save)) {
            s = json_object_get(json_object_get(s, "properties"), seg);
            const char *type = json_string_value(json_object_get(s, "type"));
            bool last = !save || !*save;
            if (last && parts[i].null) {
                if (type && !strcmp(type, "array"))
                    json_object_set_new(cur, seg, json_null());
                break;
            }
            if (!s || !type || strcmp(type, "object"))
                break;
            cur = ckube_json_object_ensure(cur, seg);
        }
    }
    return o;
}

/* One conflict set per manager entry (index into the managed list). */
typedef struct conflicts {
    size_t n;
    size_t *entry;
    fm_set **set;
} conflicts;

static void conflicts_free(conflicts *c)
{
    for (size_t i = 0; i < c->n; i++)
        fm_set_free(c->set[i]);
    free(c->entry);
    free(c->set);
    memset(c, 0, sizeof *c);
}

/* Upstream's Updater.update: compares live and new (ignoring what the
 * write cannot own) and takes the changed fields from every entry but
 * `self` (-1: none), and the removed ones too. Without force, fields
 * another entry owns that changed are conflicts: returns 1 with *cf set
 * and changes nothing. `cmp_out` (may be NULL) receives the filtered
 * comparison. */
static int take_changes(const fm_type *t, const char *subresource, fm_managed *m, long self,
                        const json_t *live, const json_t *nobj, bool force, comparison *cmp_out,
                        conflicts *cf)
{
    comparison cm;
    compare(t, live, nobj, &cm);
    filter_ignored(t, subresource, cm.added);
    filter_ignored(t, subresource, cm.modified);
    filter_ignored(t, subresource, cm.removed);
    bool others = m->n > (self >= 0 ? 1u : 0u); /* a create has none */
    fm_set *changed = others ? set_copy(cm.modified) : NULL;
    if (changed)
        set_union_into(changed, cm.added);
    conflicts found = {0};
    for (size_t i = 0; others && i < m->n; i++) {
        if ((long)i == self)
            continue;
        fm_set *c = set_intersect(m->e[i].set, changed);
        if (set_empty(c)) {
            fm_set_free(c);
            continue;
        }
        found.entry = xrealloc(found.entry, (found.n + 1) * sizeof *found.entry);
        found.set = xrealloc(found.set, (found.n + 1) * sizeof *found.set);
        found.entry[found.n] = i;
        found.set[found.n++] = c;
    }
    fm_set_free(changed);
    if (!force && found.n) {
        comparison_free(&cm);
        if (cf)
            *cf = found;
        else
            conflicts_free(&found);
        return 1;
    }
    for (size_t i = 0; i < found.n; i++)
        set_subtract(m->e[found.entry[i]].set, found.set[i]);
    for (size_t i = 0; i < m->n; i++)
        if ((long)i != self)
            set_subtract(m->e[i].set, cm.removed);
    conflicts_free(&found);
    if (cmp_out)
        *cmp_out = cm;
    else
        comparison_free(&cm);
    return 0;
}

/* Upstream's managedFieldsUpdater around Updater.Update: the writer gets
 * what it added or changed, merged into its previous entry, with a new
 * time when it got anything. */
static void record_update(const fm_type *t, const char *manager, const char *subresource,
                          const char *now, fm_managed *m, const json_t *live, const json_t *nobj)
{
    comparison cm;
    take_changes(t, subresource, m, -1, live, nobj, true, &cm, NULL);
    fm_set *mine = cm.modified;
    cm.modified = NULL;
    set_union_into(mine, cm.added);
    set_compact(mine);
    comparison_free(&cm);
    strip_meta(mine);
    if (set_empty(mine)) {
        fm_set_free(mine);
    } else {
        long i = managed_find(m, manager, false, t->api_version, subresource);
        if (i >= 0) {
            set_union_into(m->e[i].set, mine);
            fm_set_free(mine);
        } else {
            i = (long)managed_put(m, manager, false, t->api_version, subresource, mine);
        }
        set_time(&m->e[i], now);
    }
    managed_drop_empty(m);
}

/* `[]` or `[{}]` asks for managedFields to be reset. */
static bool is_reset(const json_t *mf)
{
    if (!json_is_array(mf))
        return false;
    if (json_array_size(mf) == 0)
        return true;
    if (json_array_size(mf) != 1 || !json_is_object(json_array_get(mf, 0)))
        return false;
    const char *k;
    json_t *v;
    json_object_foreach(json_array_get(mf, 0), k, v)
    {
        bool zero = json_is_null(v) || (json_is_string(v) && !*json_string_value(v)) ||
                    (json_is_object(v) && !json_object_size(v));
        if (!zero)
            return false;
    }
    return true;
}

static const char *op_manager(const fm_op *op)
{
    return op->manager && *op->manager ? op->manager : "unknown";
}

static const char *op_sub(const fm_op *op)
{
    return op->subresource ? op->subresource : "";
}

void fm_update(const fm_type *t, const fm_op *op, const json_t *old, json_t *obj)
{
    char now[32];
    if (op->now)
        snprintf(now, sizeof now, "%s", op->now);
    else
        ckube_now_rfc3339(now, sizeof now);
    const char *sub = op_sub(op);
    json_t *meta = ckube_json_object_ensure(obj, "metadata");
    const json_t *sent = json_object_get(meta, "managedFields");
    const json_t *live_mf = ckube_json_get_path(old, "metadata.managedFields");
    char *err = NULL;
    fm_managed *m = NULL;
    if (*sub) {
        m = managed_decode(live_mf, &err); /* a subresource cannot set them */
    } else if (is_reset(sent)) {
        m = managed_new();
    } else {
        m = managed_decode(sent, &err);
        if (!m || !m->n) {
            fm_managed_free(m);
            free(err);
            m = managed_decode(live_mf, &err);
        }
    }
    if (!m) {
        CKUBE_V(2, "fieldmanager: ignoring undecodable managedFields: %s", err);
        m = managed_new();
    }
    free(err);
    json_object_del(meta, "managedFields");
    /* An object whose managedFields are gone is not tracked again until
     * it is applied (upstream's skipNonApplied). */
    if (!m->n && old) {
        fm_managed_free(m);
        return;
    }
    json_t *live = old ? without_mf(old) : skeleton(t);
    /* On create obj has no managedFields any more (deleted above) and its
     * resourceVersion, if any, is stripped from the result like every
     * server-owned field: no copy needed then. */
    json_t *nobj = old ? without_mf(obj) : json_incref(obj);
    record_update(t, op_manager(op), sub, now, m, live, nobj);
    managed_cap(m);
    fm_managed_store(m, obj);
    json_decref(live);
    json_decref(nobj);
    fm_managed_free(m);
}

/* ---- apply ---- */

/* Go's GroupVersionKind.String() of what the body names. */
static char *gvk_string(const char *api_version, const char *kind)
{
    const char *av = str_or(api_version, "");
    const char *slash = strchr(av, '/');
    if (slash && strchr(slash + 1, '/'))
        return xstrdup("/, Kind=");
    if (slash)
        return xasprintf("%.*s/%s, Kind=%s", (int)(slash - av), av, slash + 1, str_or(kind, ""));
    return xasprintf("/%s, Kind=%s", av, str_or(kind, ""));
}

static char *manager_display(const fm_entry *e)
{
    char *q = ckube_go_quote(e->manager);
    char *s;
    if (*e->subresource) {
        char *qs = ckube_go_quote(e->subresource);
        s = xasprintf("%s with subresource %s", q, qs);
        free(qs);
    } else {
        s = xstrdup(q);
    }
    free(q);
    if (!e->apply) {
        char *u = xasprintf("%s using %s", s, e->api_version);
        free(s);
        s = u;
    }
    return s;
}

typedef struct conflict_msg {
    ckube_status *st;
    const char *who;
    FILE *f;
    size_t count;
} conflict_msg;

static void add_conflict(void *ctx, const char *const *pes, size_t n)
{
    conflict_msg *c = ctx;
    char *p = path_string(pes, n);
    ckube_status_add_cause(c->st, CKUBE_CAUSE_FIELD_MANAGER_CONFLICT, p, "conflict with %s",
                           c->who);
    if (c->f)
        fprintf(c->f, "\n- %s", p);
    c->count++;
    free(p);
}

/* The 409 upstream answers: "Apply failed with 1 conflict: conflict with
 * "m" using v1: .data.key", or for several a list per manager. */
static ckube_status *conflict_status(const fm_managed *m, const conflicts *cf)
{
    ckube_status *st = ckube_status_new(409, CKUBE_REASON_CONFLICT, NULL);
    st->has_details = 1;
    /* Managers by display name, as upstream sorts them. */
    size_t *order = xcalloc(cf->n, sizeof *order);
    char **names = xcalloc(cf->n, sizeof *names);
    for (size_t i = 0; i < cf->n; i++) {
        order[i] = i;
        names[i] = manager_display(&m->e[cf->entry[i]]);
    }
    for (size_t i = 1; i < cf->n; i++)
        for (size_t j = i; j > 0 && strcmp(names[order[j - 1]], names[order[j]]) > 0; j--) {
            size_t x = order[j];
            order[j] = order[j - 1];
            order[j - 1] = x;
        }
    char *body = NULL;
    size_t blen = 0;
    FILE *f = open_memstream(&body, &blen);
    if (!f)
        oom();
    size_t total = 0;
    for (size_t k = 0; k < cf->n; k++) {
        size_t i = order[k];
        fprintf(f, "%sconflicts with %s:", k ? "\n" : "", names[i]);
        conflict_msg c = {st, names[i], f, 0};
        set_members(cf->set[i], add_conflict, &c);
        total += c.count;
    }
    fclose(f);
    if (total == 1) {
        st->message = xasprintf("Apply failed with 1 conflict: conflict with %s: %s",
                                names[order[0]], st->causes[0].field);
    } else {
        st->message = xasprintf("Apply failed with %zu conflicts: %s", total, body);
    }
    free(body);
    for (size_t i = 0; i < cf->n; i++)
        free(names[i]);
    free(names);
    free(order);
    return st;
}

/* The fields of kubectl's last-applied annotation that still hold their
 * applied value: conflicts on those are client-side apply's, which
 * "kubectl" may take over (upstream's lastAppliedManager). NULL: none. */
static fm_set *last_applied_allowed(const fm_type *t, const json_t *live)
{
    const char *la = json_string_value(
        json_object_get(ckube_json_get_path(live, "metadata.annotations"), LAST_APPLIED));
    if (!la || !*la)
        return NULL;
    /* An annotation is at most 256 KiB, but as dense as JSON gets it
     * would decode into 20 MiB: read within a body's budget. */
    size_t la_len = strlen(la);
    json_t *obj =
        ckube__json_loadb_limited(la, la_len, 0, ckube__decode_budget(la_len), NULL, NULL, NULL);
    const char *av = json_string_value(json_object_get(obj, "apiVersion"));
    if (!json_is_object(obj) || !av || strcmp(av, t->api_version)) {
        json_decref(obj);
        return NULL;
    }
    char *err = NULL;
    fm_set *s = fieldset(t, obj, &err);
    if (!s) {
        free(err);
        json_decref(obj);
        return NULL;
    }
    comparison cm;
    compare(t, obj, live, &cm);
    set_subtract(s, cm.modified);
    set_subtract(s, cm.added);
    set_subtract(s, cm.removed);
    set_compact(s);
    comparison_free(&cm);
    json_decref(obj);
    return s;
}

/* Conflicts left once the allowed ones are taken out; true when none. */
static bool conflicts_allowed(conflicts *cf, const fm_set *allowed)
{
    bool all = true;
    for (size_t i = 0; i < cf->n; i++) {
        set_subtract(cf->set[i], allowed);
        set_compact(cf->set[i]);
        if (!set_empty(cf->set[i]))
            all = false;
    }
    /* Drop the managers whose conflicts were all allowed. */
    size_t j = 0;
    for (size_t i = 0; i < cf->n; i++) {
        if (set_empty(cf->set[i])) {
            fm_set_free(cf->set[i]);
        } else {
            cf->entry[j] = cf->entry[i];
            cf->set[j++] = cf->set[i];
        }
    }
    cf->n = j;
    return all;
}

/* One apply attempt on `m` (modified): returns the merged object, or NULL
 * with *cf (conflicts) or *err (malformed configuration). */
static json_t *apply_once(const fm_type *t, const fm_op *op, const char *now, fm_managed *m,
                          const json_t *live, const json_t *config, const fm_set *cfgset,
                          bool force, conflicts *cf, char **err)
{
    const char *me = op_manager(op), *sub = op_sub(op);
    tnode root = tn_root(t);
    json_t *merged = merge_walk(&root, live, config, err);
    if (!merged)
        return NULL;
    long mine = managed_find(m, me, true, t->api_version, sub);
    fm_set *last = mine >= 0 ? set_copy(m->e[mine].set) : NULL;
    if (take_changes(t, sub, m, mine, live, merged, force, NULL, cf)) {
        fm_set_free(last);
        json_decref(merged);
        return NULL;
    }
    mine = (long)managed_put(m, me, true, t->api_version, sub, set_copy(cfgset));
    /* Remove what this manager applied last time, applies no more, and
     * nobody else owns (upstream's prune). */
    if (last && !set_empty(last)) {
        fm_set *owned = set_new();
        for (size_t i = 0; i < m->n; i++)
            set_union_into(owned, m->e[i].set);
        ensure_named(&root, last);
        ensure_named(&root, owned);
        set_subtract(last, owned);
        set_compact(last);
        remove_walk(&root, merged, last);
        fm_set_free(owned);
    }
    fm_set_free(last);
    /* Fields the prune removed are no one's any more. */
    take_changes(t, sub, m, mine, live, merged, true, NULL, NULL);
    strip_meta(m->e[mine].set);
    json_t *a = without_mf(live), *b = without_mf(merged);
    bool changed = !ckube_patch_json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (changed)
        set_time(&m->e[mine], now);
    managed_drop_empty(m);
    return merged;
}

/* Keeps kubectl's client-side-apply annotation current when "kubectl"
 * applies an object that has one (upstream's lastAppliedUpdater). */
static void update_last_applied(json_t *merged, const json_t *live, const json_t *config)
{
    const char *la = json_string_value(
        json_object_get(ckube_json_get_path(live, "metadata.annotations"), LAST_APPLIED));
    if (!la || !*la)
        return;
    json_t *c = json_deep_copy(config);
    json_t *ann = ckube_json_get_path(c, "metadata.annotations");
    if (json_is_object(ann)) {
        json_object_del(ann, LAST_APPLIED);
        if (!json_object_size(ann))
            json_object_del(json_object_get(c, "metadata"), "annotations");
    }
    char *d = dump_sorted(c);
    json_decref(c);
    char *value = xasprintf("%s\n", d);
    free(d);
    json_t *anns =
        ckube_json_object_ensure(ckube_json_object_ensure(merged, "metadata"), "annotations");
    json_object_set_new(anns, LAST_APPLIED, json_string(value));
    free(value);
    size_t total = 0;
    const char *k;
    json_t *v;
    json_object_foreach(anns, k, v) total += strlen(k) + strlen(str_or(json_string_value(v), ""));
    if (total > CKUBE_ANNOTATIONS_SIZE_MAX)
        json_object_del(anns, LAST_APPLIED);
}

json_t *fm_apply(const fm_type *t, const fm_op *op, const json_t *live, const json_t *config,
                 fm_managed **managed, ckube_status **st)
{
    *managed = NULL;
    *st = NULL;
    const char *av = json_string_value(json_object_get(config, "apiVersion"));
    const char *kind = json_string_value(json_object_get(config, "kind"));
    if (!av || !kind || strcmp(av, t->api_version) || strcmp(kind, t->kind)) {
        char *g = gvk_string(av, kind);
        *st = ckube_status_bad_request("invalid object type: %s", g);
        free(g);
        return NULL;
    }
    const json_t *cmeta = json_object_get(config, "metadata");
    if (cmeta && !json_is_object(cmeta) && !json_is_null(cmeta)) {
        *st = ckube_status_bad_request("metadata must be an object");
        return NULL;
    }
    const json_t *cmf = ckube_json_get_path(config, "metadata.managedFields");
    if (cmf && !json_is_null(cmf)) {
        *st = ckube_status_bad_request("metadata.managedFields must be nil");
        return NULL;
    }
    char now[32];
    if (op->now)
        snprintf(now, sizeof now, "%s", op->now);
    else
        ckube_now_rfc3339(now, sizeof now);
    const char *sub = op_sub(op);
    char *err = NULL;
    fm_set *cfgset = fieldset(t, config, &err);
    if (!cfgset) {
        char *g = gvk_string(av, kind);
        const char *ns = json_string_value(ckube_json_get_path(config, "metadata.namespace"));
        const char *name = json_string_value(ckube_json_get_path(config, "metadata.name"));
        *st = ckube_status_bad_request("failed to create typed patch object (%s/%s; %s): %s",
                                       str_or(ns, ""), str_or(name, ""), g, err);
        free(g);
        free(err);
        return NULL;
    }
    filter_ignored(t, sub, cfgset);

    fm_managed *base = managed_decode(ckube_json_get_path(live, "metadata.managedFields"), &err);
    if (!base)
        base = managed_new();
    free(err);
    err = NULL;
    json_t *live0 = live ? without_mf(live) : json_object();
    if (live && !base->n) {
        /* Fields set before the first apply belong to "before-first-apply"
         * (upstream's skipNonApplied). */
        json_t *empty = skeleton(t);
        record_update(t, "before-first-apply", sub, now, base, empty, live0);
        json_decref(empty);
    }

    fm_managed *m = managed_copy(base);
    conflicts cf = {0};
    json_t *merged = apply_once(t, op, now, m, live0, config, cfgset, op->force, &cf, &err);
    if (!merged && cf.n && !strcmp(op_manager(op), "kubectl")) {
        fm_set *allowed = last_applied_allowed(t, live0);
        if (allowed && conflicts_allowed(&cf, allowed)) {
            conflicts_free(&cf);
            fm_managed_free(m);
            m = managed_copy(base);
            merged = apply_once(t, op, now, m, live0, config, cfgset, true, &cf, &err);
        }
        fm_set_free(allowed);
    }
    if (!merged) {
        if (cf.n) {
            *st = conflict_status(m, &cf);
        } else {
            char *g = gvk_string(av, kind);
            *st = ckube_status_bad_request("failed to merge config (%s): %s", g,
                                           str_or(err, "invalid configuration"));
            free(g);
        }
        conflicts_free(&cf);
        free(err);
        fm_managed_free(m);
        fm_managed_free(base);
        fm_set_free(cfgset);
        json_decref(live0);
        return NULL;
    }
    if (live && !strcmp(op_manager(op), "kubectl"))
        update_last_applied(merged, live0, config);
    fm_managed_free(base);
    fm_set_free(cfgset);
    json_decref(live0);
    json_object_del(ckube_json_object_ensure(merged, "metadata"), "managedFields");
    *managed = m;
    return merged;
}

/* ---- options ---- */

/* Decodes one UTF-8 sequence; invalid bytes decode as U+FFFD, one byte
 * long, as Go's range over a string does. */
static size_t utf8_next(const unsigned char *p, uint32_t *r)
{
    if (p[0] < 0x80) {
        *r = p[0];
        return 1;
    }
    size_t n = p[0] >= 0xf0 ? 4 : p[0] >= 0xe0 ? 3 : p[0] >= 0xc0 ? 2 : 0;
    uint32_t v = n == 4 ? p[0] & 0x07u : n == 3 ? p[0] & 0x0fu : p[0] & 0x1fu;
    for (size_t i = 1; n && i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) {
            n = 0;
            break;
        }
        v = (v << 6) | (p[i] & 0x3fu);
    }
    if (!n || (n == 2 && v < 0x80) || (n == 3 && v < 0x800) || (n == 4 && v < 0x10000) ||
        v > 0x10ffff || (v >= 0xd800 && v <= 0xdfff)) {
        *r = 0xfffd;
        return 1;
    }
    *r = v;
    return n;
}

/* Go's unicode.IsPrint, closely enough for manager names: no control
 * characters, no line/paragraph separators, no space other than ' '. */
static bool rune_printable(uint32_t r)
{
    if (r < 0x20 || (r >= 0x7f && r < 0xa0))
        return false;
    if (r == 0xad || r == 0x2028 || r == 0x2029 || r == 0xfeff)
        return false;
    if ((r >= 0x2000 && r <= 0x200f) || r == 0x3000 || r == 0x1680 || r == 0x202f || r == 0x205f ||
        r == 0xa0)
        return false;
    return true;
}

ckube_status *fm_validate_manager(const char *manager, const char *options_kind, bool apply)
{
    ckube_status *st = ckube_status_invalid_begin("meta.k8s.io", options_kind, "");
    if (apply && (!manager || !*manager))
        ckube_field_required(st, "fieldManager", "is required for apply patch");
    if (manager) {
        if (strlen(manager) > FM_MANAGER_MAX)
            ckube_field_too_long(st, "fieldManager", FM_MANAGER_MAX);
        const unsigned char *p = (const unsigned char *)manager;
        for (size_t i = 0; p[i];) {
            uint32_t r;
            size_t n = utf8_next(p + i, &r);
            if (!rune_printable(r)) {
                char detail[96];
                snprintf(detail, sizeof detail, "invalid character U+%04X (at position %zu)",
                         (unsigned)r, i);
                ckube_field_invalid(st, "fieldManager", manager, detail);
            }
            i += n;
        }
    }
    if (!st->ncauses) {
        ckube_status_free(st);
        return NULL;
    }
    ckube_status_invalid_finish(st);
    return st;
}

char *fm_manager_from_user_agent(const char *ua)
{
    const unsigned char *p = (const unsigned char *)str_or(ua, "");
    size_t end = strcspn((const char *)p, "/");
    char *out = xcalloc(FM_MANAGER_MAX + 1, 1);
    size_t len = 0;
    for (size_t i = 0; i < end;) {
        uint32_t r;
        size_t n = utf8_next(p + i, &r);
        if (i + n > end)
            break;
        if (rune_printable(r)) {
            size_t enc = r == 0xfffd && n == 1 ? 3 : n;
            if (len + enc > FM_MANAGER_MAX)
                break;
            if (r == 0xfffd && n == 1) {
                memcpy(out + len, "\xef\xbf\xbd", 3);
            } else {
                memcpy(out + len, p + i, n);
            }
            len += enc;
        }
        i += n;
    }
    out[len] = 0;
    return out;
}

/* ---- no-op detection ---- */

static json_t *entry_without_time(const json_t *e)
{
    json_t *c = json_copy((json_t *)e);
    json_object_del(c, "time");
    return c;
}

void fm_ignore_timestamp_only_changes(const json_t *old, json_t *obj)
{
    if (!old || !obj)
        return;
    const json_t *om = ckube_json_get_path(old, "metadata.managedFields");
    json_t *nm = ckube_json_get_path(obj, "metadata.managedFields");
    if (!json_is_array(om) || !json_is_array(nm) || json_array_size(om) != json_array_size(nm))
        return;
    json_t *a = without_mf(old), *b = without_mf(obj);
    bool same = ckube_patch_json_equal(a, b);
    json_decref(a);
    json_decref(b);
    if (!same)
        return;
    /* Every new entry must match an old one but for its time. */
    size_t n = json_array_size(om);
    bool *used = xcalloc(n, sizeof *used);
    bool all = true;
    for (size_t i = 0; i < n && all; i++) {
        json_t *x = entry_without_time(json_array_get(nm, i));
        bool found = false;
        for (size_t j = 0; j < n && !found; j++) {
            if (used[j])
                continue;
            json_t *y = entry_without_time(json_array_get(om, j));
            if (ckube_patch_json_equal(x, y))
                found = used[j] = true;
            json_decref(y);
        }
        json_decref(x);
        all = found;
    }
    free(used);
    if (all)
        json_object_set_new(json_object_get(obj, "metadata"), "managedFields", json_deep_copy(om));
}
