/* patch.c - JSON Patch (RFC 6902), JSON Merge Patch (RFC 7386), the shared
 * value equality and the table lookup for strategic-merge-patch metadata.
 * The strategic merge patch itself lives in patch_strategic.c.
 *
 * Every function here borrows its inputs and returns new references: the
 * document is deep-copied before it is changed, and values taken from the
 * patch are deep-copied before they are inserted, so a result never shares
 * a json_t with the caller's document or patch.
 */
#include "ckube/patch.h"
#include "common/json_cost.h"

#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/text.h"

/* ---- equality ---------------------------------------------------------- */

static bool numbers_equal(const json_t *a, const json_t *b)
{
    if (json_is_integer(a) && json_is_integer(b))
        return json_integer_value(a) == json_integer_value(b);
    return json_number_value(a) == json_number_value(b);
}

static bool objects_equal(const json_t *a, const json_t *b)
{
    if (json_object_size(a) != json_object_size(b))
        return false;
    const char *key;
    size_t key_len;
    json_t *va;
    json_object_keylen_foreach((json_t *)a, key, key_len, va)
    {
        if (!ckube_patch_json_equal(va, json_object_getn(b, key, key_len)))
            return false;
    }
    return true;
}

static bool arrays_equal(const json_t *a, const json_t *b)
{
    size_t n = json_array_size(a);
    if (n != json_array_size(b))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!ckube_patch_json_equal(json_array_get(a, i), json_array_get(b, i)))
            return false;
    return true;
}

int ckube_patch_json_equal(const json_t *a, const json_t *b)
{
    if (a == b)
        return 1;
    if (!a || !b)
        return 0;
    if (json_is_number(a) && json_is_number(b))
        return numbers_equal(a, b);
    if (json_typeof(a) != json_typeof(b))
        return 0;
    switch (json_typeof(a)) {
    case JSON_OBJECT:
        return objects_equal(a, b);
    case JSON_ARRAY:
        return arrays_equal(a, b);
    case JSON_STRING:
        return json_string_length(a) == json_string_length(b) &&
               memcmp(json_string_value(a), json_string_value(b), json_string_length(a)) == 0;
    default: /* true, false, null: the type is the value */
        return 1;
    }
}

/* ---- strategic-merge-patch metadata tables ------------------------------ */

unsigned ckube_patch_meta_table(void *ctx, const char *path, const char **merge_key)
{
    const ckube_patch_meta_entry *e = ctx;
    if (merge_key)
        *merge_key = NULL;
    for (; e && e->path; e++) {
        if (strcmp(e->path, path) == 0) {
            if (merge_key)
                *merge_key = e->merge_key;
            return e->strategy;
        }
    }
    return CKUBE_STRATEGY_REPLACE;
}

/* ---- JSON Merge Patch (RFC 7386) ---------------------------------------- */

/* MergePatch(target, patch) from RFC 7386 section 2, without mutation:
 * keys of `target` keep their order, keys new from `patch` follow in the
 * patch's order. `target` may be NULL (absent). NULL only when out of
 * memory. */
static json_t *merge_patch(const json_t *target, const json_t *patch)
{
    if (!json_is_object(patch))
        return json_deep_copy(patch);
    json_t *out = json_object();
    if (!out)
        return NULL;
    const char *key;
    size_t key_len;
    json_t *tv, *pv;
    if (json_is_object(target)) {
        json_object_keylen_foreach((json_t *)target, key, key_len, tv)
        {
            pv = json_object_getn(patch, key, key_len);
            if (json_is_null(pv))
                continue; /* null removes the member */
            json_t *v = pv ? merge_patch(tv, pv) : json_deep_copy(tv);
            if (json_object_setn_new(out, key, key_len, v) < 0)
                goto oom;
        }
    }
    json_object_keylen_foreach((json_t *)patch, key, key_len, pv)
    {
        if (json_is_null(pv) || json_object_getn(target, key, key_len))
            continue; /* deleted, or merged above */
        if (json_object_setn_new(out, key, key_len, merge_patch(NULL, pv)) < 0)
            goto oom;
    }
    return out;
oom:
    json_decref(out);
    return NULL;
}

json_t *ckube_merge_patch_apply(const json_t *doc, const json_t *patch, char **err)
{
    if (err)
        *err = NULL;
    if (!patch) {
        ckube__set_err(err, "merge patch: no patch document");
        return NULL;
    }
    json_t *out = merge_patch(doc, patch);
    if (!out)
        ckube__set_err(err, "merge patch: out of memory");
    return out;
}

/* ---- JSON Patch (RFC 6902) ---------------------------------------------- */

/* One reference token of a JSON pointer, unescaped (~1 -> '/', ~0 -> '~').
 * `s` is NUL-terminated for messages but may contain NULs; use `len`. */
typedef struct ptr_token {
    char *s;
    size_t len;
} ptr_token;

/* A parsed JSON pointer (RFC 6901). `text` is the pointer as written, for
 * error messages (borrowed from the operation). */
typedef struct json_ptr {
    ptr_token *tok;
    size_t n;
    const char *text;
} json_ptr;

static void ptr_free(json_ptr *p)
{
    for (size_t i = 0; i < p->n; i++)
        free(p->tok[i].s);
    free(p->tok);
    p->tok = NULL;
    p->n = 0;
}

/* Unescapes one token [s, s+len) into a new string. Returns -1 on a '~'
 * that is not followed by '0' or '1'. */
static int unescape_token(const char *s, size_t len, ptr_token *out)
{
    char *d = malloc(len + 1);
    if (!d)
        return -1;
    size_t j = 0;
    for (size_t i = 0; i < len; i++) {
        if (s[i] != '~') {
            d[j++] = s[i];
            continue;
        }
        if (i + 1 >= len || (s[i + 1] != '0' && s[i + 1] != '1')) {
            free(d);
            return -1;
        }
        d[j++] = s[i + 1] == '0' ? '~' : '/';
        i++;
    }
    d[j] = '\0';
    out->s = d;
    out->len = j;
    return 0;
}

/* Parses `str` (of byte length `len`) as an RFC 6901 pointer. */
static int ptr_parse(const char *str, size_t len, json_ptr *out, const char *op, char **err)
{
    out->tok = NULL;
    out->n = 0;
    out->text = str;
    if (len == 0)
        return 0; /* the whole document */
    if (str[0] != '/') {
        ckube__set_err(
            err, "%s operation: invalid JSON pointer \"%s\": it must be empty or start with '/'",
            op, str);
        return -1;
    }
    size_t count = 1;
    for (size_t i = 1; i < len; i++)
        count += str[i] == '/';
    out->tok = calloc(count, sizeof *out->tok);
    if (!out->tok) {
        ckube__set_err(err, "%s operation: out of memory", op);
        return -1;
    }
    const char *p = str + 1, *end = str + len;
    while (out->n < count) {
        const char *slash = memchr(p, '/', (size_t)(end - p));
        size_t tlen = slash ? (size_t)(slash - p) : (size_t)(end - p);
        if (unescape_token(p, tlen, &out->tok[out->n]) < 0) {
            ckube__set_err(
                err,
                "%s operation: invalid JSON pointer \"%s\": '~' must be followed by '0' or '1'", op,
                str);
            ptr_free(out);
            return -1;
        }
        out->n++;
        p += tlen + 1;
    }
    return 0;
}

/* An RFC 6901 array index: "0" or digits without a leading zero. Returns
 * -1 for anything else (including "-" and negative numbers). */
static int parse_index(const ptr_token *t, size_t *out)
{
    if (t->len == 0 || t->len > 18 || (t->len > 1 && t->s[0] == '0'))
        return -1;
    size_t v = 0;
    for (size_t i = 0; i < t->len; i++) {
        if (t->s[i] < '0' || t->s[i] > '9')
            return -1;
        v = v * 10 + (size_t)(t->s[i] - '0');
    }
    *out = v;
    return 0;
}

/* The child of container `c` named by token `t`, or NULL if there is
 * none (missing member, bad or out-of-range index, scalar container). */
static json_t *child(json_t *c, const ptr_token *t)
{
    size_t idx;
    if (json_is_object(c))
        return json_object_getn(c, t->s, t->len);
    if (json_is_array(c) && parse_index(t, &idx) == 0)
        return json_array_get(c, idx);
    return NULL;
}

/* Follows the first `n` tokens of `p` from `root`; NULL if missing. */
static json_t *resolve(json_t *root, const json_ptr *p, size_t n)
{
    json_t *cur = root;
    for (size_t i = 0; cur && i < n; i++)
        cur = child(cur, &p->tok[i]);
    return cur;
}

/* The container holding the value `p` points to (p must not be the root);
 * sets an error naming `op` when it does not exist. */
static json_t *resolve_parent(json_t *root, const json_ptr *p, const char *op, char **err)
{
    json_t *parent = resolve(root, p, p->n - 1);
    if (!json_is_object(parent) && !json_is_array(parent)) {
        ckube__set_err(err, "%s operation does not apply: doc is missing path: \"%s\"", op,
                       p->text);
        return NULL;
    }
    return parent;
}

/* Adds `value` (stolen) at `p`, per RFC 6902 "add": replaces the root or
 * an object member, inserts into an array ("-" appends). */
static int do_add(json_t **root, const json_ptr *p, json_t *value, const char *op, char **err)
{
    if (p->n == 0) {
        json_decref(*root);
        *root = value;
        return 0;
    }
    json_t *parent = resolve_parent(*root, p, op, err);
    if (!parent) {
        json_decref(value);
        return -1;
    }
    const ptr_token *last = &p->tok[p->n - 1];
    if (json_is_object(parent)) {
        if (json_object_setn_new(parent, last->s, last->len, value) < 0)
            goto oom;
        return 0;
    }
    if (last->len == 1 && last->s[0] == '-') {
        if (json_array_append_new(parent, value) < 0)
            goto oom;
        return 0;
    }
    size_t idx;
    if (parse_index(last, &idx) < 0 || idx > json_array_size(parent)) {
        ckube__set_err(
            err,
            "%s operation does not apply: invalid array index \"%s\" in path \"%s\" (array "
            "length %zu)",
            op, last->s, p->text, json_array_size(parent));
        json_decref(value);
        return -1;
    }
    if (json_array_insert_new(parent, idx, value) < 0)
        goto oom;
    return 0;
oom:
    ckube__set_err(err, "%s operation: out of memory", op);
    return -1;
}

/* Checks that `p` names an existing value and returns it (borrowed) with
 * its parent (NULL for the root). */
static json_t *locate(json_t *root, const json_ptr *p, json_t **parent, const char *op, char **err)
{
    *parent = NULL;
    if (p->n == 0)
        return root;
    json_t *par = resolve_parent(root, p, op, err);
    if (!par)
        return NULL;
    json_t *v = child(par, &p->tok[p->n - 1]);
    if (!v) {
        if (json_is_array(par))
            ckube__set_err(err,
                           "%s operation does not apply: invalid array index \"%s\" in path \"%s\" "
                           "(array length %zu)",
                           op, p->tok[p->n - 1].s, p->text, json_array_size(par));
        else
            ckube__set_err(err, "%s operation does not apply: doc is missing path: \"%s\"", op,
                           p->text);
        return NULL;
    }
    *parent = par;
    return v;
}

/* Removes the value at `p`; if `taken` is non-NULL it receives the removed
 * value (a new reference). */
static int do_remove(json_t **root, const json_ptr *p, json_t **taken, const char *op, char **err)
{
    if (p->n == 0) {
        ckube__set_err(err, "%s operation does not apply: cannot remove the whole document", op);
        return -1;
    }
    json_t *parent;
    json_t *v = locate(*root, p, &parent, op, err);
    if (!v)
        return -1;
    if (taken)
        *taken = json_incref(v);
    const ptr_token *last = &p->tok[p->n - 1];
    size_t idx;
    if (json_is_object(parent))
        json_object_deln(parent, last->s, last->len);
    else if (parse_index(last, &idx) == 0)
        json_array_remove(parent, idx);
    return 0;
}

static int do_replace(json_t **root, const json_ptr *p, json_t *value, char **err)
{
    json_t *parent;
    if (!locate(*root, p, &parent, "replace", err)) {
        json_decref(value);
        return -1;
    }
    if (!parent) {
        json_decref(*root);
        *root = value;
        return 0;
    }
    const ptr_token *last = &p->tok[p->n - 1];
    size_t idx = 0;
    int rc = json_is_object(parent) ? json_object_setn_new(parent, last->s, last->len, value)
             : parse_index(last, &idx) == 0 ? json_array_set_new(parent, idx, value)
                                            : -1;
    if (rc < 0)
        ckube__set_err(err, "replace operation: out of memory");
    return rc;
}

/* True if pointer `a` is a proper prefix of pointer `b` (b is inside a). */
static bool ptr_is_proper_prefix(const json_ptr *a, const json_ptr *b)
{
    if (a->n >= b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->tok[i].len != b->tok[i].len || memcmp(a->tok[i].s, b->tok[i].s, a->tok[i].len))
            return false;
    return true;
}

/* State of one patch application. */
typedef struct jp_state {
    json_t *root;  /* owned: the document being built */
    size_t copied; /* ckube__json_cost of all "copy" operations so far */
    char **err;
} jp_state;

/* Reads a string member of an operation; missing/non-string is an error. */
static const char *op_string(const json_t *op, const char *member, size_t *len, const char *opname,
                             char **err)
{
    const json_t *v = json_object_get(op, member);
    if (!json_is_string(v)) {
        ckube__set_err(err, "%s operation: %s \"%s\"", opname, v ? "non-string" : "missing",
                       member);
        return NULL;
    }
    *len = json_string_length(v);
    return json_string_value(v);
}

static int parse_member_ptr(const json_t *op, const char *member, const char *opname, json_ptr *out,
                            char **err)
{
    size_t len;
    const char *s = op_string(op, member, &len, opname, err);
    if (!s)
        return -1;
    return ptr_parse(s, len, out, opname, err);
}

/* The operation's "value", deep-copied; NULL (with error) when absent. */
static json_t *op_value(const json_t *op, const char *opname, char **err)
{
    const json_t *v = json_object_get(op, "value");
    if (!v) {
        ckube__set_err(err, "%s operation: missing \"value\"", opname);
        return NULL;
    }
    json_t *c = json_deep_copy(v);
    if (!c)
        ckube__set_err(err, "%s operation: out of memory", opname);
    return c;
}

static bool ptr_equal(const json_ptr *a, const json_ptr *b)
{
    if (a->n != b->n)
        return false;
    for (size_t i = 0; i < a->n; i++)
        if (a->tok[i].len != b->tok[i].len || memcmp(a->tok[i].s, b->tok[i].s, a->tok[i].len))
            return false;
    return true;
}

/* RFC 6902 "move": remove at "from", then add at "path". Moving a value
 * into its own child is an error; moving it onto itself is a no-op. */
static int op_move(jp_state *st, const json_t *op, const json_ptr *path)
{
    json_ptr from;
    if (parse_member_ptr(op, "from", "move", &from, st->err) < 0)
        return -1;
    int rc = -1;
    json_t *parent, *taken = NULL;
    if (ptr_is_proper_prefix(&from, path))
        ckube__set_err(
            st->err, "move operation does not apply: cannot move \"%s\" into its own child \"%s\"",
            from.text, path->text);
    else if (!locate(st->root, &from, &parent, "move", st->err))
        ; /* error set */
    else if (ptr_equal(&from, path))
        rc = 0;
    else if (do_remove(&st->root, &from, &taken, "move", st->err) == 0)
        rc = do_add(&st->root, path, taken, "move", st->err);
    ptr_free(&from);
    return rc;
}

static int op_copy(jp_state *st, const json_t *op, const json_ptr *path)
{
    json_ptr from;
    if (parse_member_ptr(op, "from", "copy", &from, st->err) < 0)
        return -1;
    int rc = -1;
    json_t *parent;
    json_t *v = locate(st->root, &from, &parent, "copy", st->err);
    if (v) {
        st->copied += ckube__json_cost(v, CKUBE_JSON_PATCH_MAX_COPY_BYTES);
        if (st->copied > CKUBE_JSON_PATCH_MAX_COPY_BYTES) {
            ckube__set_err(st->err, "copy operation: the patch copies more than %d bytes in total",
                           CKUBE_JSON_PATCH_MAX_COPY_BYTES);
        } else {
            json_t *c = json_deep_copy(v);
            if (!c)
                ckube__set_err(st->err, "copy operation: out of memory");
            else
                rc = do_add(&st->root, path, c, "copy", st->err);
        }
    }
    ptr_free(&from);
    return rc;
}

static int op_test(jp_state *st, const json_t *op, const json_ptr *path)
{
    const json_t *want = json_object_get(op, "value");
    if (!want) {
        ckube__set_err(st->err, "test operation: missing \"value\"");
        return -1;
    }
    json_t *parent;
    json_t *have = locate(st->root, path, &parent, "test", st->err);
    if (!have)
        return -1;
    if (!ckube_patch_json_equal(have, want)) {
        ckube__set_err(st->err, "testing value %s failed: test failed", path->text);
        return -1;
    }
    return 0;
}

/* Applies one operation (index `i`) to st->root. */
static int apply_op(jp_state *st, const json_t *op, size_t i)
{
    if (!json_is_object(op)) {
        ckube__set_err(st->err, "invalid JSON patch: operation %zu is not a JSON object", i);
        return -1;
    }
    const json_t *kind = json_object_get(op, "op");
    if (!json_is_string(kind)) {
        ckube__set_err(st->err, "invalid JSON patch: operation %zu has no \"op\" string", i);
        return -1;
    }
    const char *name = json_string_value(kind);
    static const char *const known[] = {"add", "remove", "replace", "move", "copy", "test"};
    bool ok = false;
    for (size_t k = 0; k < sizeof known / sizeof *known; k++)
        ok = ok || strcmp(name, known[k]) == 0;
    if (!ok) {
        ckube__set_err(st->err, "Unexpected kind: %s", name);
        return -1;
    }
    json_ptr path;
    if (parse_member_ptr(op, "path", name, &path, st->err) < 0)
        return -1;
    int rc = -1;
    json_t *v;
    if (!strcmp(name, "add")) {
        if ((v = op_value(op, name, st->err)))
            rc = do_add(&st->root, &path, v, name, st->err);
    } else if (!strcmp(name, "remove")) {
        rc = do_remove(&st->root, &path, NULL, name, st->err);
    } else if (!strcmp(name, "replace")) {
        if ((v = op_value(op, name, st->err)))
            rc = do_replace(&st->root, &path, v, st->err);
    } else if (!strcmp(name, "move")) {
        rc = op_move(st, op, &path);
    } else if (!strcmp(name, "copy")) {
        rc = op_copy(st, op, &path);
    } else {
        rc = op_test(st, op, &path);
    }
    ptr_free(&path);
    return rc;
}

json_t *ckube_json_patch_apply(const json_t *doc, const json_t *patch, char **err)
{
    if (err)
        *err = NULL;
    if (!json_is_array(patch)) {
        ckube__set_err(err, "invalid JSON patch: expected a JSON array of operations");
        return NULL;
    }
    if (json_array_size(patch) > CKUBE_JSON_PATCH_MAX_OPS) {
        ckube__set_err(err, "The allowed maximum operations in a JSON patch is %d, got %zu",
                       CKUBE_JSON_PATCH_MAX_OPS, json_array_size(patch));
        return NULL;
    }
    jp_state st = {.root = doc ? json_deep_copy(doc) : json_null(), .copied = 0, .err = err};
    if (!st.root) {
        ckube__set_err(err, "json patch: out of memory");
        return NULL;
    }
    for (size_t i = 0; i < json_array_size(patch); i++) {
        if (apply_op(&st, json_array_get(patch, i), i) < 0) {
            json_decref(st.root);
            ckube__set_err(err, "json patch: operation %zu failed", i); /* only if none was set */
            return NULL;
        }
    }
    return st.root;
}

/* ---- diff: the JSON Patch between two documents ----------------------------- */

/* path + "/" + the RFC 6901 escape of key. */
static char *pointer_join(const char *path, const char *key)
{
    size_t extra = 0;
    for (const char *k = key; *k; k++)
        extra += *k == '~' || *k == '/';
    size_t plen = strlen(path), klen = strlen(key);
    char *out = malloc(plen + 1 + klen + extra + 1);
    if (!out)
        return NULL;
    memcpy(out, path, plen);
    char *w = out + plen;
    *w++ = '/';
    for (const char *k = key; *k; k++) {
        if (*k == '~') {
            *w++ = '~';
            *w++ = '0';
        } else if (*k == '/') {
            *w++ = '~';
            *w++ = '1';
        } else {
            *w++ = *k;
        }
    }
    *w = 0;
    return out;
}

static int add_op(json_t *ops, const char *op, const char *path, const json_t *value)
{
    json_t *o = json_pack("{s:s,s:s}", "op", op, "path", path);
    if (!o)
        return -1;
    if (value && json_object_set_new(o, "value", json_deep_copy(value)) != 0) {
        json_decref(o);
        return -1;
    }
    return json_array_append_new(ops, o);
}

static int diff_into(json_t *ops, const char *path, const json_t *a, const json_t *b)
{
    if (json_equal(a, b))
        return 0;
    if (json_is_object(a) && json_is_object(b)) {
        const char *k;
        json_t *v;
        int rc = 0;
        /* removals first, in a's order; then changes and additions in b's */
        json_object_foreach((json_t *)a, k, v)
        {
            if (json_object_get(b, k))
                continue;
            char *p = pointer_join(path, k);
            rc = p ? add_op(ops, "remove", p, NULL) : -1;
            free(p);
            if (rc)
                return rc;
        }
        json_object_foreach((json_t *)b, k, v)
        {
            char *p = pointer_join(path, k);
            if (!p)
                return -1;
            json_t *old = json_object_get(a, k);
            rc = old ? diff_into(ops, p, old, v) : add_op(ops, "add", p, v);
            free(p);
            if (rc)
                return rc;
        }
        return 0;
    }
    if (json_is_array(a) && json_is_array(b) && json_array_size(a) == json_array_size(b)) {
        for (size_t i = 0; i < json_array_size(a); i++) {
            char idx[24], *p;
            snprintf(idx, sizeof idx, "%zu", i);
            p = pointer_join(path, idx);
            int rc = p ? diff_into(ops, p, json_array_get(a, i), json_array_get(b, i)) : -1;
            free(p);
            if (rc)
                return rc;
        }
        return 0;
    }
    return add_op(ops, "replace", path, b);
}

json_t *ckube_json_patch_diff(const json_t *from, const json_t *to)
{
    json_t *ops = json_array();
    if (ops && diff_into(ops, "", from, to) != 0) {
        json_decref(ops);
        return NULL;
    }
    return ops;
}
