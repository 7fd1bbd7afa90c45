/* patch_strategic.c - strategic merge patch, with the semantics of
 * apimachinery's strategicpatch (server side: parallel lists are merged,
 * unmatched nulls ignored).
 *
 * Summary of the rules implemented (see ckube/patch.h for the contract):
 *  - maps merge recursively; a null value deletes the field;
 *  - a map with "$patch": "replace" replaces the old map, "delete" empties
 *    it, "merge" is the default made explicit;
 *  - "$retainKeys": [..] clears the old map's fields not listed (and every
 *    non-null field of the patch must be listed);
 *  - lists whose metadata says CKUBE_STRATEGY_MERGE merge: lists of objects by
 *    the merge key (elements with "$patch": "delete" remove matching
 *    elements, an element {"$patch": "replace"} makes the rest of the patch
 *    list replace the old list), lists of primitives as a set union;
 *    other lists are replaced by the patch's list. An empty patch list
 *    leaves a merged list unchanged, as upstream;
 *  - "$deleteFromPrimitiveList/F": [..] removes those values from list F;
 *  - "$setElementOrder/F": [..] orders list F after merging;
 *  - merged lists are ordered as upstream orders them: the patch's items
 *    in patch order, interleaved with the items only the server had,
 *    keeping those in their old relative order.
 *
 * Deliberate differences from upstream, all on inputs upstream handles
 * inconsistently: values new to the document are merged into an empty
 * value, so directives and nulls inside them never reach the stored
 * object; "$patch": "merge" is accepted (as the default) on maps and list
 * elements; a "$deleteFromPrimitiveList" for an absent list is a no-op; a
 * "$setElementOrder" for a list that is not merged is ignored; elements of
 * the old list lacking the merge key are kept (never matched).
 *
 * Ownership: every function borrows its inputs and returns new
 * references; results never share values with the document or the patch.
 */
#include "ckube/patch.h"

#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/text.h"

#define DIRECTIVE_MARKER "$patch"
#define RETAIN_KEYS_DIRECTIVE "$retainKeys"
#define SET_ORDER_PREFIX "$setElementOrder"
#define DELETE_PRIMITIVE_PREFIX "$deleteFromPrimitiveList"

/* Longest rendering of a JSON value in an error message. */
#define RENDER_MAX 200

typedef struct smp {
    ckube_patch_meta_fn meta;
    void *ctx;
    char **err;
} smp;

/* Compact JSON of `v` for a message, cut at RENDER_MAX bytes. Caller
 * frees. */
static char *render(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s)
        return strdup("?");
    if (strlen(s) > RENDER_MAX)
        strcpy(s + RENDER_MAX - 3, "...");
    return s;
}

static void oom(smp *s)
{
    ckube__set_err(s->err, "strategic merge patch: out of memory");
}

static unsigned lookup_meta(const smp *s, const char *path, const char **merge_key)
{
    *merge_key = NULL;
    if (!s->meta)
        return CKUBE_STRATEGY_REPLACE;
    return s->meta(s->ctx, path, merge_key);
}

/* "parent.key" (or "key" at the root). Caller frees. Keys holding NULs
 * are cut at the first NUL: such fields have no metadata anyway. */
static char *child_path(const char *parent, const char *key, size_t key_len)
{
    size_t pl = strlen(parent);
    char *p = malloc(pl + key_len + 2);
    if (!p)
        return NULL;
    size_t off = 0;
    if (pl) {
        memcpy(p, parent, pl);
        p[pl] = '.';
        off = pl + 1;
    }
    memcpy(p + off, key, key_len);
    p[off + key_len] = '\0';
    return p;
}

static bool has_prefix(const char *key, size_t key_len, const char *prefix)
{
    size_t n = strlen(prefix);
    return key_len >= n && memcmp(key, prefix, n) == 0;
}

/* The value of "<prefix>/<field>" in `patch`, or NULL. */
static json_t *parallel_directive(const json_t *patch, const char *prefix, const char *field,
                                  size_t field_len)
{
    size_t pl = strlen(prefix);
    char *k = malloc(pl + 1 + field_len);
    if (!k)
        return NULL;
    memcpy(k, prefix, pl);
    k[pl] = '/';
    memcpy(k + pl + 1, field, field_len);
    json_t *v = json_object_getn(patch, k, pl + 1 + field_len);
    free(k);
    return v;
}

static bool is_directive_key(const char *key, size_t key_len)
{
    return (key_len == strlen(DIRECTIVE_MARKER) && !memcmp(key, DIRECTIVE_MARKER, key_len)) ||
           (key_len == strlen(RETAIN_KEYS_DIRECTIVE) &&
            !memcmp(key, RETAIN_KEYS_DIRECTIVE, key_len)) ||
           has_prefix(key, key_len, SET_ORDER_PREFIX) ||
           has_prefix(key, key_len, DELETE_PRIMITIVE_PREFIX);
}

static bool is_scalar(const json_t *v)
{
    return !json_is_object(v) && !json_is_array(v);
}

/* ---- small vector of json_t pointers ------------------------------------ */

/* Whether the vector owns a reference to each item is up to its user
 * (documented where used). */
typedef struct jvec {
    json_t **v;
    size_t n, cap;
} jvec;

static int jvec_push(jvec *a, json_t *x)
{
    if (a->n == a->cap) {
        size_t cap = a->cap ? a->cap * 2 : 8;
        json_t **nv = realloc(a->v, cap * sizeof *nv);
        if (!nv)
            return -1;
        a->v = nv;
        a->cap = cap;
    }
    a->v[a->n++] = x;
    return 0;
}

/* Releases an owning vector. */
static void jvec_release(jvec *a)
{
    for (size_t i = 0; i < a->n; i++)
        json_decref(a->v[i]);
    free(a->v);
    *a = (jvec){0};
}

/* A borrowed view of a JSON array (NULL: empty). On failure *a is left
 * empty. */
static int jvec_view(jvec *a, const json_t *arr)
{
    *a = (jvec){0};
    for (size_t i = 0; i < json_array_size(arr); i++) {
        if (jvec_push(a, json_array_get(arr, i)) < 0) {
            free(a->v);
            *a = (jvec){0};
            return -1;
        }
    }
    return 0;
}

/* ---- list element identity and order ------------------------------------ */

/* What identifies a list element: its merge-key value for lists of maps,
 * the element itself for primitives. NULL when the map lacks the key. */
static const json_t *elem_key(const json_t *item, const char *mk)
{
    return mk ? json_object_get(item, mk) : item;
}

static bool same_elem(const json_t *a, const json_t *b, const char *mk)
{
    const json_t *ka = elem_key(a, mk), *kb = elem_key(b, mk);
    return ka && kb && ckube_patch_json_equal(ka, kb);
}

/* Position of the first element of `list` identified like `item`, or -1. */
static long index_in(const jvec *list, const json_t *item, const char *mk)
{
    for (size_t i = 0; i < list->n; i++)
        if (same_elem(list->v[i], item, mk))
            return (long)i;
    return -1;
}

typedef struct ranked {
    long rank;  /* position in the reference list; LONG_MAX when absent */
    size_t pos; /* position before sorting: makes the sort stable */
    json_t *item;
} ranked;

static int cmp_ranked(const void *pa, const void *pb)
{
    const ranked *a = pa, *b = pb;
    if (a->rank != b->rank)
        return a->rank < b->rank ? -1 : 1;
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

/* Stable-sorts `items` in place by position in `ref` (absent ones last). */
static int sort_by(jvec *items, const jvec *ref, const char *mk)
{
    if (items->n < 2)
        return 0;
    ranked *r = malloc(items->n * sizeof *r);
    if (!r)
        return -1;
    for (size_t i = 0; i < items->n; i++) {
        long at = index_in(ref, items->v[i], mk);
        r[i] = (ranked){at < 0 ? LONG_MAX : at, i, items->v[i]};
    }
    qsort(r, items->n, sizeof *r, cmp_ranked);
    for (size_t i = 0; i < items->n; i++)
        items->v[i] = r[i].item;
    free(r);
    return 0;
}

/* Orders the merged list as upstream's normalizeElementOrder does.
 * `merged` (owning) is consumed. Items identified in `order` come in that
 * order; the others ("server-only") keep their order in `server`; the two
 * sequences are interleaved so that a server-only item goes before a
 * patch item exactly when both were in `server` and it was earlier there
 * (so items new to the list come before the server-only items that
 * follow them). Returns a new array. */
static json_t *normalize_order(smp *s, jvec *merged, const jvec *order, const jvec *server,
                               const char *mk)
{
    jvec pitems = {0}, sonly = {0};
    json_t *out = json_array();
    if (!out)
        goto fail;
    for (size_t i = 0; i < merged->n; i++) {
        jvec *dst = index_in(order, merged->v[i], mk) >= 0 ? &pitems : &sonly;
        if (jvec_push(dst, merged->v[i]) < 0)
            goto fail;
        merged->v[i] = NULL; /* moved */
    }
    if (sort_by(&pitems, order, mk) < 0 || sort_by(&sonly, server, mk) < 0)
        goto fail;
    size_t i = 0, j = 0;
    while (i < sonly.n || j < pitems.n) {
        bool left;
        if (i >= sonly.n) {
            left = false;
        } else if (j >= pitems.n) {
            left = true;
        } else {
            long li = index_in(server, sonly.v[i], mk), ri = index_in(server, pitems.v[j], mk);
            left = li >= 0 && ri >= 0 && li < ri;
        }
        json_t *x = left ? sonly.v[i] : pitems.v[j];
        if (left)
            sonly.v[i++] = NULL;
        else
            pitems.v[j++] = NULL;
        if (json_array_append_new(out, x) < 0)
            goto fail;
    }
    jvec_release(&pitems);
    jvec_release(&sonly);
    jvec_release(merged);
    return out;
fail:
    oom(s);
    json_decref(out);
    jvec_release(&pitems);
    jvec_release(&sonly);
    jvec_release(merged);
    return NULL;
}

/* ---- maps --------------------------------------------------------------- */

static json_t *merge_map(smp *s, const json_t *orig, const json_t *patch, const char *path);
static json_t *merge_list(smp *s, const json_t *orig, const json_t *patch, unsigned strategy,
                          const char *mk, const char *path);

/* A value new to the document, or replacing one of another type: merged
 * into nothing, which drops directives and nulls. */
static json_t *merge_value(smp *s, const json_t *orig, const json_t *patch, unsigned strategy,
                           const char *mk, const char *path)
{
    json_t *v;
    if (json_is_object(patch))
        v = merge_map(s, json_is_object(orig) ? orig : NULL, patch, path);
    else if (json_is_array(patch))
        v = merge_list(s, json_is_array(orig) ? orig : NULL, patch, strategy, mk, path);
    else if (!(v = json_deep_copy(patch)))
        oom(s);
    return v;
}

/* Checks the shape of every directive of a patch map. */
static int validate_directives(smp *s, const json_t *patch, const char *path)
{
    const char *key;
    size_t key_len;
    json_t *v;
    json_object_keylen_foreach((json_t *)patch, key, key_len, v)
    {
        const char *what = NULL;
        if (key_len == strlen(RETAIN_KEYS_DIRECTIVE) &&
            !memcmp(key, RETAIN_KEYS_DIRECTIVE, key_len)) {
            if (!json_is_array(v))
                what = "retainKeys";
        } else if (has_prefix(key, key_len, SET_ORDER_PREFIX)) {
            if (key_len <= strlen(SET_ORDER_PREFIX) || key[strlen(SET_ORDER_PREFIX)] != '/' ||
                !json_is_array(v))
                what = "setElementOrder list";
        } else if (has_prefix(key, key_len, DELETE_PRIMITIVE_PREFIX)) {
            bool ok = key_len > strlen(DELETE_PRIMITIVE_PREFIX) &&
                      key[strlen(DELETE_PRIMITIVE_PREFIX)] == '/' && json_is_array(v);
            for (size_t i = 0; ok && i < json_array_size(v); i++)
                ok = is_scalar(json_array_get(v, i));
            if (!ok)
                what = "primitive list";
        }
        if (what) {
            ckube__set_err(s->err, "invalid patch format of %s: \"%s\" at \"%s\" must be a list%s",
                           what, key, path[0] ? path : ".",
                           *what == 'p' ? " of primitive values" : "");
            return -1;
        }
    }
    return 0;
}

static bool retained(const json_t *retain, const char *key, size_t key_len)
{
    for (size_t i = 0; i < json_array_size(retain); i++) {
        const json_t *r = json_array_get(retain, i);
        if (json_is_string(r) && json_string_length(r) == key_len &&
            !memcmp(json_string_value(r), key, key_len))
            return true;
    }
    return false;
}

/* Every non-null field the patch sets must be listed in $retainKeys. */
static int validate_retain_keys(smp *s, const json_t *patch, const json_t *retain, const char *path)
{
    const char *key;
    size_t key_len;
    json_t *v;
    json_object_keylen_foreach((json_t *)patch, key, key_len, v)
    {
        if (json_is_null(v) || is_directive_key(key, key_len) || retained(retain, key, key_len))
            continue;
        ckube__set_err(
            s->err,
            "invalid patch format of retainKeys: field \"%s\" is set at \"%s\" but is not "
            "listed in $retainKeys",
            key, path[0] ? path : ".");
        return -1;
    }
    return 0;
}

static const json_t *directive_of(const json_t *elem)
{
    return json_is_object(elem) ? json_object_get(elem, DIRECTIVE_MARKER) : NULL;
}

static bool directive_is(const json_t *d, const char *what)
{
    return json_is_string(d) && !strcmp(json_string_value(d), what);
}

static void err_no_merge_key(smp *s, const json_t *elem, const char *mk, const char *path)
{
    char *r = render(elem);
    ckube__set_err(s->err, "map: %s does not contain declared merge key: %s (in list \"%s\")", r,
                   mk, path);
    free(r);
}

/* Checks a patch list against its $setElementOrder list: the patch's
 * items (ignoring deletions and other directives) must appear in the
 * order list, in the same relative order. */
static int validate_set_order(smp *s, const json_t *plist, const json_t *order, const char *mk,
                              const char *path)
{
    size_t pi = 0, si = 0, np = json_array_size(plist), ns = json_array_size(order);
    for (size_t i = 0; mk && i < ns; i++) {
        const json_t *o = json_array_get(order, i);
        if (!json_is_object(o) || !json_object_get(o, mk)) {
            err_no_merge_key(s, o, mk, path);
            return -1;
        }
    }
    while (pi < np) {
        const json_t *p = json_array_get(plist, pi);
        if (mk && directive_of(p)) {
            pi++; /* deletions and other directives are not ordered */
            continue;
        }
        if (mk && !json_object_get(p, mk)) {
            err_no_merge_key(s, p, mk, path);
            return -1;
        }
        if (si >= ns)
            break;
        if (same_elem(p, json_array_get(order, si), mk))
            pi++;
        si++;
    }
    if (pi < np) {
        char *a = render(plist), *b = render(order);
        ckube__set_err(
            s->err, "the order in patch list %s doesn't match $setElementOrder list %s at \"%s\"",
            a, b, path);
        free(a);
        free(b);
        return -1;
    }
    return 0;
}

/* Reorders merged list `v` (consumed) by a $setElementOrder list; `old` is
 * the list before merging (array or NULL). */
static json_t *apply_set_order(smp *s, json_t *v, const json_t *order, const json_t *old,
                               const char *mk)
{
    jvec items = {0}, ord = {0}, srv = {0};
    json_t *out = NULL;
    if (jvec_view(&ord, order) < 0 || jvec_view(&srv, old) < 0) {
        oom(s);
        goto done;
    }
    for (size_t i = 0; i < json_array_size(v); i++) {
        if (jvec_push(&items, json_incref(json_array_get(v, i))) < 0) {
            json_decref(json_array_get(v, i));
            oom(s);
            jvec_release(&items);
            goto done;
        }
    }
    out = normalize_order(s, &items, &ord, &srv, mk);
done:
    free(ord.v);
    free(srv.v);
    json_decref(v);
    return out;
}

/* Copy of list `v` (consumed) without the values listed in `dels`. */
static json_t *delete_from_list(smp *s, json_t *v, const json_t *dels)
{
    json_t *out = json_array();
    for (size_t i = 0; out && i < json_array_size(v); i++) {
        const json_t *e = json_array_get(v, i);
        bool drop = false;
        for (size_t j = 0; !drop && j < json_array_size(dels); j++)
            drop = ckube_patch_json_equal(e, json_array_get(dels, j));
        if (!drop && json_array_append(out, (json_t *)e) < 0) {
            json_decref(out);
            out = NULL;
        }
    }
    if (!out)
        oom(s);
    json_decref(v);
    return out;
}

/* Computes the new value of field `key` of a map whose old value is `ov`
 * (NULL: absent). Sets *out to a new reference, or to NULL when the field
 * is to be absent from the result. */
static int merge_field(smp *s, const json_t *ov, const json_t *patch, const char *key,
                       size_t key_len, const char *parent, json_t **out)
{
    *out = NULL;
    const json_t *pv = json_object_getn(patch, key, key_len);
    if (json_is_null(pv))
        return 0; /* null deletes */
    char *path = child_path(parent, key, key_len);
    if (!path) {
        oom(s);
        return -1;
    }
    const json_t *order = parallel_directive(patch, SET_ORDER_PREFIX, key, key_len);
    const json_t *dels = parallel_directive(patch, DELETE_PRIMITIVE_PREFIX, key, key_len);
    const char *mk;
    unsigned strategy = lookup_meta(s, path, &mk);
    bool ordered = order && (strategy & CKUBE_STRATEGY_MERGE);
    json_t *v = NULL;
    int rc = -1;

    if (pv) {
        if (ordered && json_is_array(pv) && validate_set_order(s, pv, order, mk, path) < 0)
            goto out;
        if (!(v = merge_value(s, ov, pv, strategy, mk, path)))
            goto out;
    } else if (ov && !(v = json_deep_copy(ov))) {
        oom(s);
        goto out;
    }
    if (v && ordered && json_is_array(v)) {
        if (mk && !pv && validate_set_order(s, NULL, order, mk, path) < 0)
            goto out;
        if (!(v = apply_set_order(s, v, order, json_is_array(ov) ? ov : NULL, mk)))
            goto out;
    }
    if (v && dels && json_is_array(v) && !(v = delete_from_list(s, v, dels)))
        goto out;
    *out = v;
    v = NULL;
    rc = 0;
out:
    json_decref(v);
    free(path);
    return rc;
}

static bool field_touched(const json_t *patch, const char *key, size_t key_len)
{
    return json_object_getn(patch, key, key_len) ||
           parallel_directive(patch, SET_ORDER_PREFIX, key, key_len) ||
           parallel_directive(patch, DELETE_PRIMITIVE_PREFIX, key, key_len);
}

static int set_field(smp *s, json_t *obj, const char *key, size_t key_len, json_t *v)
{
    if (v && json_object_setn_new(obj, key, key_len, v) < 0) {
        oom(s);
        return -1;
    }
    return 0;
}

/* Merges patch map `patch` into `orig` (NULL: absent), ignoring any
 * "$patch" member (merge_map has handled it). Keys of `orig` keep their
 * order; new keys follow in patch order. */
static json_t *merge_map_body(smp *s, const json_t *orig, const json_t *patch, const char *path)
{
    if (validate_directives(s, patch, path) < 0)
        return NULL;
    const json_t *retain = json_object_get(patch, RETAIN_KEYS_DIRECTIVE);
    if (retain && validate_retain_keys(s, patch, retain, path) < 0)
        return NULL;
    json_t *out = json_object();
    if (!out) {
        oom(s);
        return NULL;
    }
    const char *key;
    size_t key_len;
    json_t *ov, *pv, *v;
    json_object_keylen_foreach((json_t *)orig, key, key_len, ov)
    {
        if (retain && !retained(retain, key, key_len))
            continue;
        if (!field_touched(patch, key, key_len))
            v = json_deep_copy(ov);
        else if (merge_field(s, ov, patch, key, key_len, path, &v) < 0)
            goto fail;
        else if (!v)
            continue; /* deleted */
        if (!v || set_field(s, out, key, key_len, v) < 0)
            goto fail_oom;
    }
    json_object_keylen_foreach((json_t *)patch, key, key_len, pv)
    {
        if (is_directive_key(key, key_len) || json_object_getn(orig, key, key_len))
            continue; /* directives were applied with their field; old fields above */
        if (merge_field(s, NULL, patch, key, key_len, path, &v) < 0 ||
            set_field(s, out, key, key_len, v) < 0)
            goto fail;
    }
    return out;
fail_oom:
    oom(s);
fail:
    json_decref(out);
    return NULL;
}

/* Merges map `patch` into `orig` (an object or NULL), honouring a "$patch"
 * directive on the map itself. */
static json_t *merge_map(smp *s, const json_t *orig, const json_t *patch, const char *path)
{
    const json_t *d = json_object_get(patch, DIRECTIVE_MARKER);
    if (!d || directive_is(d, "merge"))
        return merge_map_body(s, orig, patch, path);
    if (directive_is(d, "replace"))
        return merge_map_body(s, NULL, patch, path);
    if (directive_is(d, "delete")) {
        json_t *empty = json_object();
        if (!empty)
            oom(s);
        return empty;
    }
    char *dr = render(d), *pr = render(patch);
    ckube__set_err(s->err, "unknown patch type: %s in map: %s", dr, pr);
    free(dr);
    free(pr);
    return NULL;
}

/* ---- lists -------------------------------------------------------------- */

enum elem_kind { EK_NONE, EK_OBJECT, EK_STRING, EK_NUMBER, EK_BOOL, EK_NULL, EK_ARRAY };

static enum elem_kind kind_of(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return EK_OBJECT;
    case JSON_ARRAY:
        return EK_ARRAY;
    case JSON_STRING:
        return EK_STRING;
    case JSON_INTEGER:
    case JSON_REAL:
        return EK_NUMBER;
    case JSON_TRUE:
    case JSON_FALSE:
        return EK_BOOL;
    default:
        return EK_NULL;
    }
}

/* The common element kind of both lists (EK_NONE if both are empty);
 * lists of lists and mixed lists are errors, as upstream. */
static int element_kind(smp *s, const json_t *a, const json_t *b, const char *path,
                        enum elem_kind *out)
{
    enum elem_kind k = EK_NONE;
    const json_t *lists[2] = {a, b};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < json_array_size(lists[l]); i++) {
            enum elem_kind e = kind_of(json_array_get(lists[l], i));
            if (e == EK_ARRAY) {
                ckube__set_err(s->err, "lists of lists are not supported (in list \"%s\")", path);
                return -1;
            }
            if (k != EK_NONE && e != k) {
                ckube__set_err(s->err, "list element types are not identical in list \"%s\"", path);
                return -1;
            }
            k = e;
        }
    }
    *out = k;
    return 0;
}

/* Set union of two lists of primitives, ordered by normalize_order. */
static json_t *merge_primitive_list(smp *s, const json_t *orig, const json_t *patch)
{
    jvec merged = {0}, ord = {0}, srv = {0};
    json_t *out = NULL;
    if (jvec_view(&ord, patch) < 0 || jvec_view(&srv, orig) < 0)
        goto fail;
    const json_t *lists[2] = {orig, patch};
    for (int l = 0; l < 2; l++) {
        for (size_t i = 0; i < json_array_size(lists[l]); i++) {
            json_t *e = json_array_get(lists[l], i);
            if (index_in(&merged, e, NULL) >= 0)
                continue;
            json_t *c = json_deep_copy(e);
            if (!c || jvec_push(&merged, c) < 0) {
                json_decref(c);
                goto fail;
            }
        }
    }
    out = normalize_order(s, &merged, &ord, &srv, NULL);
    free(ord.v);
    free(srv.v);
    return out;
fail:
    oom(s);
    jvec_release(&merged);
    free(ord.v);
    free(srv.v);
    return NULL;
}

/* Removes from `work` (owning) every element whose merge key equals `kv`. */
static void delete_matching(jvec *work, const json_t *kv, const char *mk)
{
    size_t j = 0;
    for (size_t i = 0; i < work->n; i++) {
        const json_t *k = json_object_get(work->v[i], mk);
        if (k && ckube_patch_json_equal(k, kv))
            json_decref(work->v[i]);
        else
            work->v[j++] = work->v[i];
    }
    work->n = j;
}

/* A patch list element that only says {"$patch": "merge"}: nothing to do. */
static bool is_bare_merge(const json_t *e)
{
    return json_object_size(e) == 1 && directive_is(directive_of(e), "merge");
}

/* First pass over a patch list of maps: applies "$patch" elements.
 * Deletions remove matching elements from `work`; sets *replace when the
 * list is to be replaced. */
static int apply_list_directives(smp *s, jvec *work, const json_t *patch, const char *mk,
                                 const char *path, bool *replace)
{
    *replace = false;
    for (size_t i = 0; i < json_array_size(patch); i++) {
        const json_t *e = json_array_get(patch, i);
        const json_t *d = directive_of(e);
        if (!d || directive_is(d, "merge"))
            continue;
        if (directive_is(d, "replace")) {
            *replace = true;
        } else if (directive_is(d, "delete")) {
            const json_t *kv = json_object_get(e, mk);
            if (!kv) {
                err_no_merge_key(s, e, mk, path);
                return -1;
            }
            delete_matching(work, kv, mk);
        } else {
            char *dr = render(d), *er = render(e);
            ckube__set_err(s->err, "unknown patch type: %s in map: %s", dr, er);
            free(dr);
            free(er);
            return -1;
        }
    }
    return 0;
}

/* True for patch list elements that are merged (not directives). */
static bool is_plain_elem(const json_t *e)
{
    const json_t *d = directive_of(e);
    return !d || (directive_is(d, "merge") && !is_bare_merge(e));
}

/* "$patch": "replace" in a list: the list becomes the patch's other
 * elements, in patch order. */
static json_t *replace_list(smp *s, const json_t *patch, const char *path)
{
    json_t *out = json_array();
    if (!out) {
        oom(s);
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(patch); i++) {
        const json_t *e = json_array_get(patch, i);
        if (!is_plain_elem(e))
            continue;
        json_t *v = merge_map(s, NULL, e, path);
        if (!v || json_array_append_new(out, v) < 0) {
            if (v)
                oom(s);
            json_decref(out);
            return NULL;
        }
    }
    return out;
}

/* Merges a patch list of maps into `orig` by merge key `mk`. */
static json_t *merge_map_list(smp *s, const json_t *orig, const json_t *patch, const char *mk,
                              const char *path)
{
    jvec work = {0}, ord = {0}, srv = {0};
    bool replace;
    /* work owns deep copies of the old elements, replaced as merged. */
    for (size_t i = 0; i < json_array_size(orig); i++) {
        json_t *c = json_deep_copy(json_array_get(orig, i));
        if (!c || jvec_push(&work, c) < 0) {
            json_decref(c);
            goto fail_oom;
        }
    }
    if (apply_list_directives(s, &work, patch, mk, path, &replace) < 0)
        goto fail;
    if (replace) {
        jvec_release(&work);
        return replace_list(s, patch, path);
    }
    for (size_t i = 0; i < json_array_size(patch); i++) {
        json_t *e = json_array_get(patch, i);
        if (!is_plain_elem(e))
            continue;
        const json_t *kv = json_object_get(e, mk);
        if (!kv) {
            err_no_merge_key(s, e, mk, path);
            goto fail;
        }
        if (jvec_push(&ord, e) < 0)
            goto fail_oom;
        long at = index_in(&work, e, mk);
        json_t *m = merge_map(s, at >= 0 ? work.v[at] : NULL, e, path);
        if (!m)
            goto fail;
        if (at >= 0) {
            json_decref(work.v[at]);
            work.v[at] = m;
        } else if (jvec_push(&work, m) < 0) {
            json_decref(m);
            goto fail_oom;
        }
    }
    if (jvec_view(&srv, orig) < 0)
        goto fail_oom;
    json_t *out = normalize_order(s, &work, &ord, &srv, mk);
    free(ord.v);
    free(srv.v);
    return out;
fail_oom:
    oom(s);
fail:
    jvec_release(&work);
    free(ord.v);
    free(srv.v);
    return NULL;
}

/* Merges patch list `patch` into old list `orig` (NULL: absent) according
 * to the field's strategy. */
static json_t *merge_list(smp *s, const json_t *orig, const json_t *patch, unsigned strategy,
                          const char *mk, const char *path)
{
    json_t *v;
    if (!(strategy & CKUBE_STRATEGY_MERGE)) {
        if (!(v = json_deep_copy(patch)))
            oom(s);
        return v;
    }
    enum elem_kind kind;
    if (element_kind(s, orig, patch, path, &kind) < 0)
        return NULL;
    if (kind == EK_NONE) {
        if (!(v = json_array()))
            oom(s);
        return v;
    }
    if (kind != EK_OBJECT)
        return merge_primitive_list(s, orig, patch);
    if (!mk) {
        ckube__set_err(s->err, "cannot merge lists without merge key: list \"%s\" has no merge key",
                       path);
        return NULL;
    }
    return merge_map_list(s, orig, patch, mk, path);
}

json_t *ckube_strategic_merge_patch_apply(const json_t *doc, const json_t *patch,
                                          ckube_patch_meta_fn meta, void *ctx, char **err)
{
    if (err)
        *err = NULL;
    smp s = {.meta = meta, .ctx = ctx, .err = err};
    if (!json_is_object(patch)) {
        ckube__set_err(err, "strategic merge patch: the patch must be a JSON object");
        return NULL;
    }
    if (doc && !json_is_object(doc) && !json_is_null(doc)) {
        ckube__set_err(err, "strategic merge patch: the document must be a JSON object");
        return NULL;
    }
    json_t *out = merge_map(&s, json_is_object(doc) ? doc : NULL, patch, "");
    if (!out)
        ckube__set_err(err, "strategic merge patch failed");
    return out;
}
