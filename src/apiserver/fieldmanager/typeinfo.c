/* Type resolution (internal.h, section 2): what a map key or a list is,
 * from the schema, the strategic-merge metadata, or the value. */
#include "apiserver/fieldmanager/internal.h"

static pthread_once_t statics_once = PTHREAD_ONCE_INIT;

static json_t *objectmeta_schema; /* process lifetime */
static json_t *tcp_default;       /* "TCP", process lifetime */

static void statics_init(void)
{
    objectmeta_schema = builtin_schema_fragment("io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta");
    tcp_default = json_string("TCP");
}

tnode fm_tn_root(const fm_type *t)
{
    pthread_once(&statics_once, statics_init);
    tnode n;
    memset(&n, 0, sizeof n);
    n.s = json_is_object(t->schema) ? t->schema : NULL;
    n.pm = t->patch_meta;
    n.custom = t->custom;
    return n;
}

bool fm_tn_is_root(const tnode *n)
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

bool fm_tn_field(const tnode *n, bool root, const char *key, tnode *c, bool *named)
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

bool fm_tn_map_atomic(const tnode *n)
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

void fm_tn_list(const tnode *n, lkind *lk)
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

void fm_tn_item(const tnode *n, tnode *c)
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
            json_t *v = json_incref(json_object_get(item, lk->keys[i]));
            /* A default is the schema's, shared by every serving thread:
             * copied, never referenced (jansson's counts are not safe to
             * change from two threads at once). */
            if (!v && lk->defaults[i])
                v = json_deep_copy(lk->defaults[i]);
            if (!v) {
                *err = xasprintf("associative list with keys has an element that omits key "
                                 "field \"%s\" (and doesn't have default value)",
                                 lk->keys[i]);
                json_decref(k);
                return NULL;
            }
            json_object_set_new(k, lk->keys[i], v);
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

void fm_lindex_free(lindex *ix)
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
    return fm_pe_cmp(ix->pe[*(const size_t *)a], ix->pe[*(const size_t *)b]);
}

int fm_lindex_build(const lkind *lk, const json_t *arr, lindex *ix, char **err)
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
            fm_lindex_free(ix);
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
        if (!fm_pe_cmp(a, b)) {
            char *p = fm_path_string(&b, 1);
            *err = xasprintf("duplicate entries for key %s", p);
            free(p);
            fm_lindex_free(ix);
            return -1;
        }
    }
    return 0;
}

long fm_lindex_find(const lindex *ix, const char *pe)
{
    size_t lo = 0, hi = ix->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        int c = fm_pe_cmp(ix->pe[ix->sorted[mid]], pe);
        if (!c)
            return (long)ix->sorted[mid];
        if (c < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return -1;
}
