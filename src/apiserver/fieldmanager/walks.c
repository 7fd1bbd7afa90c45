/* Walks over values (internal.h, section 3): ToFieldSet, Compare, the
 * apply merge and RemoveItems, as structured-merge-diff does them. */
#include "apiserver/fieldmanager/internal.h"

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

typedef struct toset_ctx {
    char *err; /* first error, with its path */
} toset_ctx;

static int toset(toset_ctx *w, const tnode *n, const json_t *v, fm_set *node)
{
    if (json_is_object(v)) {
        if (fm_tn_map_atomic(n)) {
            node->member = true;
            return 0;
        }
        const char *key;
        json_t *val;
        json_object_foreach((json_t *)v, key, val)
        {
            tnode c;
            bool named;
            if (!fm_tn_field(n, fm_tn_is_root(n), key, &c, &named))
                continue;
            pe_buf pb;
            fm_set *ch = fm_set_child(node, key_pe(&pb, key));
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
        fm_tn_list(n, &lk);
        if (lk.rel == REL_ATOMIC) {
            node->member = true;
            return 0;
        }
        lindex ix;
        char *err = NULL;
        if (fm_lindex_build(&lk, v, &ix, &err)) {
            char *p = fm_node_path(node);
            w->err = xasprintf("%s: %s", p, err);
            free(p);
            free(err);
            return -1;
        }
        tnode ic;
        fm_tn_item(n, &ic);
        for (size_t i = 0; i < ix.n; i++) {
            fm_set *ch = fm_set_child(node, ix.pe[i]);
            if (toset(w, &ic, ix.v[i], ch)) {
                fm_lindex_free(&ix);
                return -1;
            }
            ch->member = true;
        }
        fm_lindex_free(&ix);
        return 0;
    }
    node->member = true; /* scalars, null included */
    return 0;
}

fm_set *fm_fieldset(const fm_type *t, const json_t *obj, char **err)
{
    tnode root = fm_tn_root(t);
    toset_ctx w = {0};
    fm_set *s = fm_set_new();
    if (toset(&w, &root, obj, s)) {
        fm_set_free(s);
        *err = w.err;
        return NULL;
    }
    fm_set_compact(s);
    *err = NULL;
    return s;
}

fm_set *fm_set_of(const fm_type *t, const json_t *obj, char **err)
{
    return fm_fieldset(t, obj, err);
}

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

enum { CMP_ADDED, CMP_MODIFIED, CMP_REMOVED, CMP_SETS };

/* Where the current path is in one of the result sets: node[i] is the
 * node of stack[0..i], for i < valid. Marks come in walk order, so a
 * mark usually shares all but its last element with the one before and
 * descends from there instead of from the root. */
typedef struct mark_path {
    fm_set **node;
    size_t valid;
} mark_path;

typedef struct cmp_ctx {
    fm_set *set[CMP_SETS];
    mark_path at[CMP_SETS];
    const char **stack; /* current path (borrowed elements) */
    size_t depth, cap;
} cmp_ctx;

static void cmp_push(cmp_ctx *c, const char *pe)
{
    if (c->depth == c->cap) {
        c->cap = c->cap ? c->cap * 2 : 16;
        c->stack = xrealloc(c->stack, c->cap * sizeof *c->stack);
        for (int k = 0; k < CMP_SETS; k++)
            c->at[k].node = xrealloc(c->at[k].node, c->cap * sizeof *c->at[k].node);
    }
    for (int k = 0; k < CMP_SETS; k++)
        if (c->at[k].valid > c->depth)
            c->at[k].valid = c->depth; /* stack[depth] is about to change */
    c->stack[c->depth++] = pe;
}

static void cmp_mark(cmp_ctx *c, int which)
{
    if (!c->depth)
        return;
    mark_path *at = &c->at[which];
    if (at->valid > c->depth)
        at->valid = c->depth;
    fm_set *n = at->valid ? at->node[at->valid - 1] : c->set[which];
    for (size_t i = at->valid; i < c->depth; i++) {
        n = fm_set_child(n, c->stack[i]); /* nodes never move: pointers stay valid */
        at->node[i] = n;
    }
    at->valid = c->depth;
    n->member = true;
}

static void cmp_leaf(cmp_ctx *c, const json_t *l, const json_t *r)
{
    if (!l)
        cmp_mark(c, CMP_ADDED);
    else if (!r)
        cmp_mark(c, CMP_REMOVED);
    else if (!ckube_patch_json_equal(l, r))
        cmp_mark(c, CMP_MODIFIED);
}

static void cmp_walk(cmp_ctx *c, const tnode *n, const json_t *l, const json_t *r);

static void cmp_map(cmp_ctx *c, const tnode *n, const json_t *l, const json_t *r)
{
    const char *key;
    json_t *v;
    bool root = fm_tn_is_root(n);
    json_object_foreach((json_t *)l, key, v)
    {
        tnode ct;
        bool named;
        if (!fm_tn_field(n, root, key, &ct, &named))
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
        if (json_object_get(l, key) || !fm_tn_field(n, root, key, &ct, &named))
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
    if (fm_lindex_build(lk, l, &li, &err)) {
        free(err);
        return false;
    }
    if (fm_lindex_build(lk, r, &ri, &err)) {
        free(err);
        fm_lindex_free(&li);
        return false;
    }
    tnode it;
    fm_tn_item(n, &it);
    for (size_t i = 0; i < li.n; i++) {
        long j = fm_lindex_find(&ri, li.pe[i]);
        cmp_push(c, li.pe[i]);
        cmp_walk(c, &it, li.v[i], j >= 0 ? ri.v[j] : NULL);
        c->depth--;
    }
    for (size_t j = 0; j < ri.n; j++) {
        if (fm_lindex_find(&li, ri.pe[j]) >= 0)
            continue;
        cmp_push(c, ri.pe[j]);
        cmp_walk(c, &it, NULL, ri.v[j]);
        c->depth--;
    }
    fm_lindex_free(&li);
    fm_lindex_free(&ri);
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
        if (fm_tn_map_atomic(n) || both_empty) {
            cmp_leaf(c, l, r);
            return;
        }
        cmp_map(c, n, l, r);
    } else {
        lkind lk;
        fm_tn_list(n, &lk);
        if (lk.rel == REL_ATOMIC || both_empty || !cmp_list(c, n, &lk, l, r)) {
            cmp_leaf(c, l, r);
            return;
        }
    }
    if (!l)
        cmp_mark(c, CMP_ADDED);
    else if (!r)
        cmp_mark(c, CMP_REMOVED);
}

void fm_comparison_free(comparison *cm)
{
    fm_set_free(cm->added);
    fm_set_free(cm->modified);
    fm_set_free(cm->removed);
}

void fm_compare(const fm_type *t, const json_t *l, const json_t *r, comparison *out)
{
    tnode root = fm_tn_root(t);
    cmp_ctx c = {.set = {fm_set_new(), fm_set_new(), fm_set_new()}};
    cmp_walk(&c, &root, l, r);
    free(c.stack);
    for (int k = 0; k < CMP_SETS; k++) {
        free(c.at[k].node);
        fm_set_compact(c.set[k]);
    }
    out->added = c.set[CMP_ADDED];
    out->modified = c.set[CMP_MODIFIED];
    out->removed = c.set[CMP_REMOVED];
}

static json_t *merge_map(const tnode *n, const json_t *l, const json_t *r, char **err)
{
    json_t *out = json_object();
    const char *key;
    json_t *v;
    bool root = fm_tn_is_root(n);
    json_object_foreach((json_t *)l, key, v)
    {
        json_t *rv = json_object_get(r, key);
        tnode ct;
        bool named;
        json_t *m;
        if (!rv)
            m = json_deep_copy(v);
        else if (!fm_tn_field(n, root, key, &ct, &named))
            m = json_deep_copy(rv);
        else if (!(m = fm_merge_walk(&ct, v, rv, err))) {
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
    fm_tn_item(n, &it);
    /* Shared items, in the configuration's order. */
    size_t *shared = xcalloc(ri->n, sizeof *shared), nshared = 0, next = 0;
    for (size_t j = 0; j < ri->n; j++)
        if (fm_lindex_find(li, ri->pe[j]) >= 0)
            shared[nshared++] = j;
    size_t i = 0, j = 0;
    while (i < li->n || j < ri->n) {
        const char *want = next < nshared ? ri->pe[shared[next]] : NULL;
        json_t *m = NULL;
        if (i < li->n && j < ri->n && !fm_pe_cmp(li->pe[i], ri->pe[j])) {
            m = fm_merge_walk(&it, li->v[i], ri->v[j], err);
            i++;
            j++;
            next++;
        } else if (i < li->n && fm_lindex_find(ri, li->pe[i]) >= 0 && want &&
                   fm_pe_cmp(want, li->pe[i])) {
            i++; /* shared, but placed later by the configuration */
            continue;
        } else if (i < li->n && fm_lindex_find(ri, li->pe[i]) < 0) {
            m = json_deep_copy(li->v[i]);
            i++;
        } else if (j < ri->n) {
            long lj = fm_lindex_find(li, ri->pe[j]);
            m = lj >= 0 ? fm_merge_walk(&it, li->v[lj], ri->v[j], err) : json_deep_copy(ri->v[j]);
            if (want && !fm_pe_cmp(want, ri->pe[j]))
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

json_t *fm_merge_walk(const tnode *n, const json_t *l, const json_t *r, char **err)
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
        if (fm_tn_map_atomic(n) || both_empty)
            return json_deep_copy(r);
        return merge_map(n, l, r, err);
    }
    lkind lk;
    fm_tn_list(n, &lk);
    if (lk.rel == REL_ATOMIC || both_empty)
        return json_deep_copy(r);
    lindex li, ri;
    if (fm_lindex_build(&lk, r, &ri, err))
        return NULL;
    char *lerr = NULL;
    if (fm_lindex_build(&lk, l, &li, &lerr)) {
        /* A live list that cannot be keyed is replaced whole. */
        free(lerr);
        fm_lindex_free(&ri);
        return json_deep_copy(r);
    }
    json_t *out = merge_list(n, &li, &ri, err);
    fm_lindex_free(&li);
    fm_lindex_free(&ri);
    return out;
}

bool fm_remove_walk(const tnode *n, json_t *v, const fm_set *rm)
{
    if (!rm || !rm->n || vsize(v) == 0)
        return false;
    if (json_is_object(v)) {
        if (fm_tn_map_atomic(n))
            return false;
        const char *key;
        json_t *val;
        void *tmp;
        bool root = fm_tn_is_root(n);
        json_object_foreach_safe(v, tmp, key, val)
        {
            pe_buf pb;
            const fm_set *c = fm_set_find(rm, key_pe(&pb, key));
            pe_done(&pb);
            tnode ct;
            bool named;
            if (!c || !fm_tn_field(n, root, key, &ct, &named))
                continue;
            if (c->member || fm_remove_walk(&ct, val, c))
                json_object_del(v, key);
        }
        return json_object_size(v) == 0;
    }
    if (json_is_array(v)) {
        lkind lk;
        fm_tn_list(n, &lk);
        if (lk.rel == REL_ATOMIC)
            return false;
        lindex ix;
        char *err = NULL;
        if (fm_lindex_build(&lk, v, &ix, &err)) {
            free(err);
            return false;
        }
        tnode it;
        fm_tn_item(n, &it);
        json_t *keep = json_array();
        for (size_t i = 0; i < ix.n; i++) {
            const fm_set *c = fm_set_find(rm, ix.pe[i]);
            if (c && (c->member || fm_remove_walk(&it, (json_t *)ix.v[i], c)))
                continue;
            json_array_append(keep, (json_t *)ix.v[i]);
        }
        fm_lindex_free(&ix);
        json_array_clear(v);
        json_array_extend(v, keep);
        json_decref(keep);
        return json_array_size(v) == 0;
    }
    return false;
}

void fm_ensure_named(const tnode *n, fm_set *s)
{
    bool root = fm_tn_is_root(n);
    for (size_t i = 0; i < s->n; i++) {
        fm_set *k = s->kids[i];
        tnode ct;
        if (k->pe[0] == 'f') {
            bool named;
            if (!fm_tn_field(n, root, k->pe + 2, &ct, &named))
                continue;
            if (named && k->n)
                k->member = true;
        } else {
            fm_tn_item(n, &ct);
        }
        fm_ensure_named(&ct, k);
    }
}
