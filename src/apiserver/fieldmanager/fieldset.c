/* Field sets (internal.h, section 1): the trie, its set algebra,
 * FieldsV1 and printed paths. */
#include "apiserver/fieldmanager/internal.h"

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

int fm_pe_cmp(const char *a, const char *b)
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

/* ---- the arena ---- */

struct fm_arena_chunk {
    fm_arena_chunk *next;
    max_align_t data[];
};

enum { ARENA_FIRST = 8192, ARENA_CHUNK = 16384 };

/* The first chunk is the thread's own, reused by every operation. */
static _Thread_local max_align_t arena_first[ARENA_FIRST / sizeof(max_align_t)];
static _Thread_local fm_arena *arena_cur;

void fm_arena_begin(fm_arena *a)
{
    a->p = (char *)arena_first;
    a->left = sizeof arena_first;
    a->extra = NULL;
    arena_cur = a;
}

void fm_arena_end(fm_arena *a)
{
    while (a->extra) {
        fm_arena_chunk *next = a->extra->next;
        free(a->extra);
        a->extra = next;
    }
    arena_cur = NULL;
}

/* n zeroed bytes from the current arena, or NULL when none is open. */
static void *arena_alloc(size_t n)
{
    fm_arena *a = arena_cur;
    if (!a)
        return NULL;
    n = (n + sizeof(max_align_t) - 1) / sizeof(max_align_t) * sizeof(max_align_t);
    if (n > a->left) {
        size_t size = n > ARENA_CHUNK ? n : ARENA_CHUNK;
        fm_arena_chunk *c = xmalloc(sizeof *c + size);
        c->next = a->extra;
        a->extra = c;
        a->p = (char *)c->data;
        a->left = size;
    }
    void *r = a->p;
    a->p += n;
    a->left -= n;
    memset(r, 0, n);
    return r;
}

static fm_set *node_new(const char *pe)
{
    size_t n = strlen(pe);
    fm_set *c = arena_alloc(sizeof(fm_set) + n + 1);
    if (c)
        c->in_arena = true;
    else
        c = xcalloc(1, sizeof(fm_set) + n + 1);
    memcpy(c->pe, pe, n + 1);
    return c;
}

fm_set *fm_set_new(void)
{
    return node_new(""); /* a root */
}

void fm_set_free(fm_set *s)
{
    if (!s || s->in_arena) /* (an arena node's kids are arena nodes too) */
        return;
    for (size_t i = 0; i < s->n; i++)
        fm_set_free(s->kids[i]);
    free(s->kids);
    free(s);
}

/* Room for one more child. An arena node's array moves within the arena
 * (the old one is left behind, as arena memory is). */
static void kids_grow(fm_set *s)
{
    size_t cap = s->cap ? s->cap * 2 : 4;
    if (s->in_arena) {
        fm_set **k = arena_alloc(cap * sizeof *k);
        if (s->n)
            memcpy(k, s->kids, s->n * sizeof *k);
        s->kids = k;
    } else {
        s->kids = xrealloc(s->kids, cap * sizeof *s->kids);
    }
    s->cap = cap;
}

/* Index of the first child whose element is >= pe. */
static size_t set_lower(const fm_set *s, const char *pe)
{
    size_t lo = 0, hi = s->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (fm_pe_cmp(s->kids[mid]->pe, pe) < 0)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

fm_set *fm_set_find(const fm_set *s, const char *pe)
{
    if (!s)
        return NULL;
    size_t i = set_lower(s, pe);
    return i < s->n && !fm_pe_cmp(s->kids[i]->pe, pe) ? s->kids[i] : NULL;
}

fm_set *fm_set_child(fm_set *s, const char *pe)
{
    size_t i = set_lower(s, pe);
    if (i < s->n && !fm_pe_cmp(s->kids[i]->pe, pe))
        return s->kids[i];
    if (s->n == s->cap)
        kids_grow(s);
    memmove(s->kids + i + 1, s->kids + i, (s->n - i) * sizeof *s->kids);
    fm_set *c = node_new(pe);
    c->parent = s;
    s->kids[i] = c;
    s->n++;
    return c;
}

bool fm_set_empty(const fm_set *s)
{
    if (!s)
        return true;
    if (s->member)
        return false;
    for (size_t i = 0; i < s->n; i++)
        if (!fm_set_empty(s->kids[i]))
            return false;
    return true;
}

void fm_set_compact(fm_set *s)
{
    size_t j = 0;
    for (size_t i = 0; i < s->n; i++) {
        fm_set_compact(s->kids[i]);
        if (!s->kids[i]->member && !s->kids[i]->n)
            fm_set_free(s->kids[i]);
        else
            s->kids[j++] = s->kids[i];
    }
    s->n = j;
}

void fm_set_union_into(fm_set *dst, const fm_set *src)
{
    if (!src)
        return;
    dst->member |= src->member;
    for (size_t i = 0; i < src->n; i++)
        fm_set_union_into(fm_set_child(dst, src->kids[i]->pe), src->kids[i]);
}

fm_set *fm_set_copy(const fm_set *s)
{
    fm_set *c = fm_set_new();
    fm_set_union_into(c, s);
    fm_set_compact(c);
    return c;
}

void fm_set_subtract(fm_set *a, const fm_set *b)
{
    if (!b)
        return;
    if (b->member)
        a->member = false;
    for (size_t i = 0; i < a->n; i++)
        fm_set_subtract(a->kids[i], fm_set_find(b, a->kids[i]->pe));
}

void fm_set_clear(fm_set *s)
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
        const fm_set *bk = fm_set_find(b, a->kids[i]->pe);
        if (bk)
            intersect_into(fm_set_child(r, a->kids[i]->pe), a->kids[i], bk);
    }
}

fm_set *fm_set_intersect(const fm_set *a, const fm_set *b)
{
    fm_set *r = fm_set_new();
    if (a && b)
        intersect_into(r, a, b);
    fm_set_compact(r);
    return r;
}

json_t *fm_fields_of(const fm_set *s)
{
    json_t *o = json_object();
    /* Path elements are valid UTF-8: built from the keys and values of
     * decoded objects, or checked when decoded from FieldsV1. */
    if (s->member && s->n && s->parent)
        json_object_set_new_nocheck(o, ".", json_object());
    for (size_t i = 0; i < s->n; i++)
        json_object_set_new_nocheck(o, s->kids[i]->pe, fm_fields_of(s->kids[i]));
    return o;
}

json_t *fm_set_to_fields(const fm_set *s)
{
    return fm_fields_of(s);
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
        fm_set *c = fm_set_child(node, pe);
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
    fm_set *s = fm_set_new();
    if (fields && !json_is_null(fields) && fields_parse(fields, s, err)) {
        fm_set_free(s);
        return NULL;
    }
    s->member = false;
    fm_set_compact(s);
    return s;
}

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

char *fm_path_string(const char *const *pes, size_t n)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        xalloc_die();
    for (size_t i = 0; i < n; i++)
        print_pe(f, pes[i]);
    fclose(f);
    return buf;
}

char *fm_node_path(const fm_set *s)
{
    size_t depth = 0;
    for (const fm_set *p = s; p && p->parent; p = p->parent)
        depth++;
    const char **pes = xcalloc(depth, sizeof *pes);
    size_t i = depth;
    for (const fm_set *p = s; p && p->parent; p = p->parent)
        pes[--i] = p->pe;
    char *r = fm_path_string(pes, depth);
    free(pes);
    return r;
}

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

void fm_set_members(const fm_set *s, member_fn fn, void *ctx)
{
    const char **stack = xcalloc(set_depth(s) + 1, sizeof *stack);
    members_walk(s, stack, 0, fn, ctx);
    free(stack);
}
