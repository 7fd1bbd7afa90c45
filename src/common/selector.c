/* Label and field selectors; see ckube/selector.h.
 *
 * The label selector parser mirrors the structure of apimachinery's
 * labels.Parse (a lexer that scans every token up front, then a recursive
 * descent parser with one token of lookahead) because its error messages
 * name the token found and what was expected, and clients show them
 * verbatim. The field selector parser mirrors fields.ParseSelector: split
 * on unescaped commas, sort the terms, split each at its first operator and
 * unescape the value.
 */
#include "ckube/selector.h"

#include "ckube/validation.h"

#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/text.h"

/* ------------------------------------------------------------------------ */
/* Small helpers.                                                           */

static char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static void set_err(char **err, char *msg)
{
    if (err)
        *err = msg;
    else
        free(msg);
}

/* A growable string. */
/* Go's strconv.ParseInt(s, 10, 64): optional sign, at least one digit, no
 * spaces, in range. */
static int parse_int64(const char *s, int64_t *out)
{
    const char *p = s;
    if (*p == '+' || *p == '-')
        p++;
    if (!*p)
        return -1;
    for (const char *q = p; *q; q++)
        if (*q < '0' || *q > '9')
            return -1;
    errno = 0;
    char *end = NULL;
    long long v = strtoll(s, &end, 10);
    if (errno || !end || *end)
        return -1;
    *out = (int64_t)v;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Selector storage.                                                        */

static void req_clear(ckube_sel_requirement *r)
{
    free(r->key);
    for (size_t i = 0; i < r->nvalues; i++)
        free(r->values[i]);
    free(r->values);
    memset(r, 0, sizeof *r);
}

void ckube_selector_free(ckube_selector *sel)
{
    if (!sel)
        return;
    for (size_t i = 0; i < sel->nreqs; i++)
        req_clear(&sel->reqs[i]);
    free(sel->reqs);
    free(sel);
}

/* Appends *r (taking ownership of its strings). */
static int sel_append(ckube_selector *sel, ckube_sel_requirement *r)
{
    /* Room doubles at powers of two (no capacity field to keep). */
    size_t n0 = sel->nreqs;
    if ((n0 & (n0 - 1)) == 0) {
        ckube_sel_requirement *n = realloc(sel->reqs, (n0 ? 2 * n0 : 1) * sizeof *n);
        if (!n)
            return -1;
        sel->reqs = n;
    }
    sel->reqs[sel->nreqs++] = *r;
    memset(r, 0, sizeof *r);
    return 0;
}

/* A set of strings (upstream's sets.String): values are appended as
 * parsed, then strset_finish sorts them and drops repeats, as its List()
 * gives them. Sorting once keeps a selector of 100,000 values in reverse
 * order from costing a quadratic insertion sort. */
typedef struct strset {
    char **v;
    size_t n, cap;
} strset;

static int strset_insert(strset *s, const char *val)
{
    if (s->n == s->cap) {
        size_t cap = s->cap ? 2 * s->cap : 4;
        char **n = realloc(s->v, cap * sizeof *n);
        if (!n)
            return -1;
        s->v = n;
        s->cap = cap;
    }
    char *copy = strdup(val);
    if (!copy)
        return -1;
    s->v[s->n++] = copy;
    return 0;
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static void strset_finish(strset *s)
{
    if (s->n < 2)
        return;
    qsort(s->v, s->n, sizeof *s->v, cmp_str);
    size_t out = 1;
    for (size_t i = 1; i < s->n; i++) {
        if (strcmp(s->v[i], s->v[out - 1]) == 0)
            free(s->v[i]);
        else
            s->v[out++] = s->v[i];
    }
    s->n = out;
}

static void strset_free(strset *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = 0;
}

/* ------------------------------------------------------------------------ */
/* Label selector lexer.                                                    */

enum tok {
    T_ERROR = 0,
    T_EOS,
    T_CLOSE_PAR,
    T_COMMA,
    T_NOT,
    T_DOUBLE_EQ,
    T_EQ,
    T_GT,
    T_ID,
    T_IN,
    T_LT,
    T_NOT_EQ,
    T_NOT_IN,
    T_OPEN_PAR,
};

static const struct {
    const char *lit;
    enum tok tok;
} TOKENS[] = {
    {")", T_CLOSE_PAR}, {",", T_COMMA},      {"!", T_NOT},      {"==", T_DOUBLE_EQ},
    {"=", T_EQ},        {">", T_GT},         {"in", T_IN},      {"<", T_LT},
    {"!=", T_NOT_EQ},   {"notin", T_NOT_IN}, {"(", T_OPEN_PAR},
};

static enum tok token_of(const char *s, size_t n)
{
    for (size_t i = 0; i < sizeof TOKENS / sizeof TOKENS[0]; i++)
        if (strlen(TOKENS[i].lit) == n && memcmp(TOKENS[i].lit, s, n) == 0)
            return TOKENS[i].tok;
    return T_ERROR;
}

static int is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\r' || c == '\n';
}

static int is_special(char c)
{
    return c == '=' || c == '!' || c == '(' || c == ')' || c == ',' || c == '>' || c == '<';
}

typedef struct item {
    enum tok tok;
    const char *lit; /* in the parser's text */
} item;

/* The tokens of one selector. Their texts sit NUL-terminated, one after
 * another, in `text`: a token is at least one byte of the input, so twice
 * the input's length (plus the end's empty token) always holds them, and
 * a token costs its item and its bytes, not an allocation each. */
typedef struct parser {
    item *items;
    size_t n;
    size_t pos;
    char *text;
    size_t text_len;
} parser;

static int push_item(parser *p, enum tok t, const char *lit, size_t n)
{
    if ((p->n & (p->n - 1)) == 0) { /* room doubles at powers of two */
        item *it = realloc(p->items, (p->n ? 2 * p->n : 1) * sizeof *it);
        if (!it)
            return -1;
        p->items = it;
    }
    char *s = p->text + p->text_len;
    memcpy(s, lit, n);
    s[n] = '\0';
    p->text_len += n + 1;
    p->items[p->n].tok = t;
    p->items[p->n].lit = s;
    p->n++;
    return 0;
}

/* Longest run of special characters that still forms a token. */
static enum tok scan_special(const char *s, size_t *pos, size_t *len)
{
    size_t start = *pos, i = *pos;
    enum tok last = T_ERROR;
    size_t last_len = 0;
    while (s[i] && is_special(s[i])) {
        i++;
        enum tok t = token_of(s + start, i - start);
        if (t != T_ERROR) {
            last = t;
            last_len = i - start;
        } else if (last != T_ERROR) {
            break;
        }
    }
    *len = last != T_ERROR ? last_len : i - start;
    *pos = start + *len;
    return last;
}

/* Tokenizes all of `s` into p->items, ending with T_EOS. */
static int scan_all(parser *p, const char *s)
{
    p->text = malloc(2 * strlen(s) + 2);
    if (!p->text)
        return -1;
    size_t pos = 0;
    for (;;) {
        while (is_ws(s[pos]))
            pos++;
        if (!s[pos])
            return push_item(p, T_EOS, "", 0);
        size_t start = pos, len;
        enum tok t;
        if (is_special(s[pos])) {
            t = scan_special(s, &pos, &len);
        } else {
            while (s[pos] && !is_special(s[pos]) && !is_ws(s[pos]))
                pos++;
            len = pos - start;
            t = token_of(s + start, len);
            if (t != T_IN && t != T_NOT_IN)
                t = T_ID;
        }
        if (push_item(p, t, s + start, len) < 0)
            return -1;
    }
}

static void parser_free(parser *p)
{
    free(p->items);
    free(p->text);
}

/* In a values context the keywords `in`/`notin` are plain identifiers. */
static enum tok in_ctx(enum tok t, int values)
{
    return values && (t == T_IN || t == T_NOT_IN) ? T_ID : t;
}

static const item *peek_item(const parser *p)
{
    return &p->items[p->pos < p->n ? p->pos : p->n - 1];
}

static enum tok lookahead(const parser *p, int values, const char **lit)
{
    const item *it = peek_item(p);
    if (lit)
        *lit = it->lit;
    return in_ctx(it->tok, values);
}

static enum tok consume(parser *p, int values, const char **lit)
{
    enum tok t = lookahead(p, values, lit);
    if (p->pos < p->n)
        p->pos++;
    return t;
}

/* ------------------------------------------------------------------------ */
/* Label requirements.                                                      */

/* field.ErrorList aggregated like utilerrors.NewAggregate(...).Error():
 * duplicates dropped, several errors as "[a, b]". */
typedef struct errlist {
    char **v;
    size_t n;
} errlist;

static void errlist_add(errlist *e, char *msg)
{
    if (!msg)
        return;
    for (size_t i = 0; i < e->n; i++) {
        if (strcmp(e->v[i], msg) == 0) {
            free(msg);
            return;
        }
    }
    char **n = realloc(e->v, (e->n + 1) * sizeof *n);
    if (!n) {
        free(msg);
        return;
    }
    e->v = n;
    e->v[e->n++] = msg;
}

static char *errlist_aggregate(errlist *e)
{
    if (e->n == 0)
        return NULL;
    ckube__strbuf b = {0};
    if (e->n > 1)
        ckube__sb_add(&b, "[");
    for (size_t i = 0; i < e->n; i++) {
        if (i)
            ckube__sb_add(&b, ", ");
        ckube__sb_add(&b, e->v[i]);
        free(e->v[i]);
    }
    if (e->n > 1)
        ckube__sb_add(&b, "]");
    free(e->v);
    e->v = NULL;
    e->n = 0;
    return ckube__sb_take(&b);
}

/* "<path>: Invalid value: \"v\": detail" as field.Error.Error(). */
static char *invalid_error(const char *path, const char *value, const char *detail)
{
    char *q = ckube_go_quote(value);
    char *m = q ? xasprintf("%s: Invalid value: %s: %s", path, q, detail) : NULL;
    free(q);
    return m;
}

/* Upstream's validateLabelKey with the parser's (nil) path. */
static char *validate_label_key(const char *key)
{
    char *why = ckube_is_qualified_name(key);
    if (!why)
        return NULL;
    char *m = invalid_error("<nil>", key, why);
    free(why);
    return m ? m : strdup("out of memory");
}

/* NewRequirement's value checks; returns the aggregated error or NULL. */
static char *check_requirement_values(const char *key, ckube_sel_op op, const strset *vals)
{
    errlist e = {0};
    if (op == CKUBE_SEL_GT || op == CKUBE_SEL_LT) {
        for (size_t i = 0; i < vals->n; i++) {
            int64_t dummy;
            if (parse_int64(vals->v[i], &dummy) < 0) {
                char path[32];
                snprintf(path, sizeof path, "values[%zu]", i);
                errlist_add(&e, invalid_error(path, vals->v[i],
                                              "for 'Gt', 'Lt' operators, the value must be an "
                                              "integer"));
            }
        }
    }
    for (size_t i = 0; i < vals->n; i++) {
        char *why = ckube_is_label_value(vals->v[i]);
        if (!why)
            continue;
        char *path = xasprintf("values[%zu][%s]", i, key);
        if (path)
            errlist_add(&e, invalid_error(path, vals->v[i], why));
        free(path);
        free(why);
    }
    return errlist_aggregate(&e);
}

/* Parses `[!] key` and infers exists/does-not-exist when no operator
 * follows. *op is 0 when an operator must still be parsed. */
static char *parse_key(parser *p, char **key, ckube_sel_op *op)
{
    const char *lit;
    *op = 0;
    enum tok t = consume(p, 1, &lit);
    if (t == T_NOT) {
        *op = CKUBE_SEL_DOES_NOT_EXIST;
        t = consume(p, 1, &lit);
    }
    if (t != T_ID)
        return xasprintf("found '%s', expected: identifier", lit);
    char *err = validate_label_key(lit);
    if (err)
        return err;
    enum tok next = lookahead(p, 1, NULL);
    if ((next == T_EOS || next == T_COMMA) && *op != CKUBE_SEL_DOES_NOT_EXIST)
        *op = CKUBE_SEL_EXISTS;
    *key = strdup(lit);
    return *key ? NULL : strdup("out of memory");
}

static char *parse_operator(parser *p, ckube_sel_op *op)
{
    const char *lit;
    switch (consume(p, 0, &lit)) {
    case T_IN:
        *op = CKUBE_SEL_IN;
        return NULL;
    case T_EQ:
    case T_DOUBLE_EQ:
        *op = CKUBE_SEL_EQUALS;
        return NULL;
    case T_GT:
        *op = CKUBE_SEL_GT;
        return NULL;
    case T_LT:
        *op = CKUBE_SEL_LT;
        return NULL;
    case T_NOT_IN:
        *op = CKUBE_SEL_NOT_IN;
        return NULL;
    case T_NOT_EQ:
        *op = CKUBE_SEL_NOT_EQUALS;
        return NULL;
    default:
        return xasprintf("found '%s', expected: in, notin, =, ==, !=, gt, lt", lit);
    }
}

/* A comma separated, possibly empty, list of possibly empty values; the
 * opening parenthesis is already consumed. */
static char *parse_identifiers(parser *p, strset *s)
{
    for (;;) {
        const char *lit;
        enum tok t = consume(p, 1, &lit);
        if (t == T_ID) {
            if (strset_insert(s, lit) < 0)
                return strdup("out of memory");
            const char *lit2;
            enum tok t2 = lookahead(p, 1, &lit2);
            if (t2 == T_COMMA)
                continue;
            if (t2 == T_CLOSE_PAR)
                return NULL;
            return xasprintf("found '%s', expected: ',' or ')'", lit2);
        }
        if (t == T_COMMA) {
            if (s->n == 0 && strset_insert(s, "") < 0) /* "(," */
                return strdup("out of memory");
            enum tok t2 = lookahead(p, 1, NULL);
            if (t2 == T_CLOSE_PAR) /* ",)" */
                return strset_insert(s, "") < 0 ? strdup("out of memory") : NULL;
            if (t2 == T_COMMA) { /* ",," */
                consume(p, 1, NULL);
                if (strset_insert(s, "") < 0)
                    return strdup("out of memory");
            }
            continue;
        }
        return xasprintf("found '%s', expected: ',', or identifier", lit);
    }
}

static char *parse_values(parser *p, strset *s)
{
    const char *lit;
    if (consume(p, 1, &lit) != T_OPEN_PAR)
        return xasprintf("found '%s' expected: '('", lit);
    enum tok t = lookahead(p, 1, &lit);
    if (t == T_ID || t == T_COMMA) {
        char *err = parse_identifiers(p, s);
        if (err)
            return err;
        consume(p, 1, NULL); /* the ')' parse_identifiers saw */
        return NULL;
    }
    if (t == T_CLOSE_PAR) { /* "()" is the set {""} */
        consume(p, 1, NULL);
        return strset_insert(s, "") < 0 ? strdup("out of memory") : NULL;
    }
    return xasprintf("found '%s', expected: ',', ')' or identifier", lit);
}

static char *parse_exact_value(parser *p, strset *s)
{
    enum tok t = lookahead(p, 1, NULL);
    if (t == T_EOS || t == T_COMMA)
        return strset_insert(s, "") < 0 ? strdup("out of memory") : NULL;
    const char *lit;
    t = consume(p, 1, &lit);
    if (t == T_ID)
        return strset_insert(s, lit) < 0 ? strdup("out of memory") : NULL;
    return xasprintf("found '%s', expected: identifier", lit);
}

/* One requirement into *r. Returns NULL or the error (without the
 * "unable to parse requirement: " prefix). */
static char *parse_requirement(parser *p, ckube_sel_requirement *r)
{
    char *key = NULL;
    ckube_sel_op op;
    char *err = parse_key(p, &key, &op);
    if (err)
        return err;
    strset vals = {0};
    if (op != CKUBE_SEL_EXISTS && op != CKUBE_SEL_DOES_NOT_EXIST) {
        err = parse_operator(p, &op);
        if (!err)
            err = (op == CKUBE_SEL_IN || op == CKUBE_SEL_NOT_IN) ? parse_values(p, &vals)
                                                                 : parse_exact_value(p, &vals);
        strset_finish(&vals);
        if (!err)
            err = check_requirement_values(key, op, &vals);
    }
    if (err) {
        free(key);
        strset_free(&vals);
        return err;
    }
    r->key = key;
    r->op = op;
    r->values = vals.v;
    r->nvalues = vals.n;
    return NULL;
}

/* The top-level loop: requirements separated by commas. */
static char *parse_label_selector(parser *p, ckube_selector *sel)
{
    for (;;) {
        const char *lit;
        enum tok t = lookahead(p, 1, &lit);
        if (t == T_EOS)
            return NULL;
        if (t != T_ID && t != T_NOT)
            return xasprintf("found '%s', expected: !, identifier, or 'end of string'", lit);
        ckube_sel_requirement r = {0};
        char *err = parse_requirement(p, &r);
        if (err) {
            char *m = xasprintf("unable to parse requirement: %s", err);
            free(err);
            return m ? m : strdup("out of memory");
        }
        if (sel_append(sel, &r) < 0) {
            req_clear(&r);
            return strdup("out of memory");
        }
        t = consume(p, 1, &lit);
        if (t == T_EOS)
            return NULL;
        if (t != T_COMMA)
            return xasprintf("found '%s', expected: ',' or 'end of string'", lit);
        const char *lit2;
        enum tok t2 = lookahead(p, 1, &lit2);
        if (t2 != T_ID && t2 != T_NOT)
            return xasprintf("found '%s', expected: identifier after ','", lit2);
    }
}

/* Stable sort by key: equal keys keep their input order (the index
 * breaks ties), in O(n log n) however many requirements there are. */
typedef struct keyed {
    ckube_sel_requirement r;
    size_t idx;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->r.key, y->r.key);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

static int sort_by_key(ckube_selector *sel)
{
    if (sel->nreqs < 2)
        return 0;
    keyed *k = malloc(sel->nreqs * sizeof *k);
    if (!k)
        return -1;
    for (size_t i = 0; i < sel->nreqs; i++)
        k[i] = (keyed){sel->reqs[i], i};
    qsort(k, sel->nreqs, sizeof *k, cmp_keyed);
    for (size_t i = 0; i < sel->nreqs; i++)
        sel->reqs[i] = k[i].r;
    free(k);
    return 0;
}

int ckube_label_selector_parse(const char *s, ckube_selector **out, char **err)
{
    if (err)
        *err = NULL;
    *out = NULL;
    ckube_selector *sel = calloc(1, sizeof *sel);
    if (!sel) {
        set_err(err, strdup("out of memory"));
        return -1;
    }
    parser p = {0};
    char *msg = NULL;
    if (scan_all(&p, s ? s : "") < 0)
        msg = strdup("out of memory");
    else
        msg = parse_label_selector(&p, sel);
    parser_free(&p);
    if (msg) {
        ckube_selector_free(sel);
        set_err(err, msg);
        return -1;
    }
    if (sort_by_key(sel) < 0) {
        ckube_selector_free(sel);
        set_err(err, strdup("out of memory"));
        return -1;
    }
    *out = sel;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* LabelSelector objects (metav1.LabelSelectorAsSelector).                  */

/* Go's %#v of the []string a requirement was given: []string(nil) when
 * empty (LabelSelectorAsSelector appends the values to a nil slice),
 * else []string{"a", "b"}. */
static char *go_string_slice(const char *const *v, size_t n)
{
    if (n == 0)
        return strdup("[]string(nil)");
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "[]string{");
    for (size_t i = 0; i < n; i++) {
        char *q = ckube_go_quote(v[i]);
        ckube__sb_printf(&b, "%s%s", i ? ", " : "", q ? q : "\"\"");
        free(q);
    }
    ckube__sb_add(&b, "}");
    return ckube__sb_take(&b);
}

/* labels.NewRequirement(key, op, vals) with the LabelSelector operators
 * (=, in, notin, exists, !): every problem found, aggregated as upstream's
 * ErrorList does, or NULL with *r filled (owning copies of key and the
 * values, which are borrowed here). */
static char *new_requirement(const char *key, ckube_sel_op op, const char *const *vals, size_t n,
                             ckube_sel_requirement *r)
{
    errlist e = {0};
    char *why = ckube_is_qualified_name(key);
    if (why) {
        char *m = invalid_error("key", key, why);
        errlist_add(&e, m ? m : strdup("out of memory"));
        free(why);
    }
    const char *detail = NULL;
    if ((op == CKUBE_SEL_IN || op == CKUBE_SEL_NOT_IN) && n == 0)
        detail = "for 'in', 'notin' operators, values set can't be empty";
    else if (op == CKUBE_SEL_EQUALS && n != 1)
        detail = "exact-match compatibility requires one single value";
    else if ((op == CKUBE_SEL_EXISTS || op == CKUBE_SEL_DOES_NOT_EXIST) && n != 0)
        detail = "values set must be empty for exists and does not exist";
    if (detail) {
        char *slice = go_string_slice(vals, n);
        char *m = slice ? xasprintf("values: Invalid value: %s: %s", slice, detail) : NULL;
        errlist_add(&e, m ? m : strdup("out of memory"));
        free(slice);
    }
    for (size_t i = 0; i < n; i++) {
        char *bad = ckube_is_label_value(vals[i]);
        if (!bad)
            continue;
        char *path = xasprintf("values[%zu][%s]", i, key);
        char *m = path ? invalid_error(path, vals[i], bad) : NULL;
        errlist_add(&e, m ? m : strdup("out of memory"));
        free(path);
        free(bad);
    }
    char *msg = errlist_aggregate(&e);
    if (msg)
        return msg;
    strset set = {0};
    for (size_t i = 0; i < n; i++) {
        if (strset_insert(&set, vals[i]) < 0) {
            strset_free(&set);
            return strdup("out of memory");
        }
    }
    strset_finish(&set);
    r->key = strdup(key);
    if (!r->key) {
        strset_free(&set);
        return strdup("out of memory");
    }
    r->op = op;
    r->values = set.v;
    r->nvalues = set.n;
    return NULL;
}

/* Appends the requirement new_requirement makes, or returns its error. */
static char *add_requirement(ckube_selector *sel, const char *key, ckube_sel_op op,
                             const char *const *vals, size_t n)
{
    ckube_sel_requirement r = {0};
    char *msg = new_requirement(key, op, vals, n, &r);
    if (!msg && sel_append(sel, &r) < 0) {
        req_clear(&r);
        msg = strdup("out of memory");
    }
    return msg;
}

/* One matchExpressions entry (its index i names it in type errors). */
static char *add_expression(ckube_selector *sel, const json_t *expr, size_t i)
{
    if (!json_is_object(expr))
        return xasprintf("matchExpressions[%zu]: must be an object", i);
    const json_t *k = json_object_get(expr, "key"), *o = json_object_get(expr, "operator");
    const json_t *vs = json_object_get(expr, "values");
    if ((k && !json_is_null(k) && !json_is_string(k)) ||
        (o && !json_is_null(o) && !json_is_string(o)))
        return xasprintf("matchExpressions[%zu]: key and operator must be strings", i);
    if (vs && !json_is_null(vs) && !json_is_array(vs))
        return xasprintf("matchExpressions[%zu].values: must be an array of strings", i);
    const char *key = json_is_string(k) ? json_string_value(k) : "";
    const char *opname = json_is_string(o) ? json_string_value(o) : "";
    ckube_sel_op op;
    if (!strcmp(opname, "In"))
        op = CKUBE_SEL_IN;
    else if (!strcmp(opname, "NotIn"))
        op = CKUBE_SEL_NOT_IN;
    else if (!strcmp(opname, "Exists"))
        op = CKUBE_SEL_EXISTS;
    else if (!strcmp(opname, "DoesNotExist"))
        op = CKUBE_SEL_DOES_NOT_EXIST;
    else {
        char *q = ckube_go_quote(opname);
        char *m = q ? xasprintf("%s is not a valid label selector operator", q) : NULL;
        free(q);
        return m ? m : strdup("out of memory");
    }
    size_t n = json_array_size(vs);
    const char **vals = n ? calloc(n, sizeof *vals) : NULL;
    if (n && !vals)
        return strdup("out of memory");
    for (size_t j = 0; j < n; j++) {
        vals[j] = json_string_value(json_array_get(vs, j));
        if (!vals[j]) {
            free(vals);
            return xasprintf("matchExpressions[%zu].values[%zu]: must be a string", i, j);
        }
    }
    char *msg = add_requirement(sel, key, op, vals, n);
    free(vals);
    return msg;
}

static char *label_selector_from_json(const json_t *ls, ckube_selector *sel)
{
    if (!json_is_object(ls))
        return strdup("a LabelSelector must be an object");
    const json_t *ml = json_object_get(ls, "matchLabels");
    const json_t *me = json_object_get(ls, "matchExpressions");
    if (ml && !json_is_null(ml) && !json_is_object(ml))
        return strdup("matchLabels: must be an object of strings");
    if (me && !json_is_null(me) && !json_is_array(me))
        return strdup("matchExpressions: must be an array");
    const char *k;
    const json_t *v;
    json_object_foreach((json_t *)ml, k, v)
    {
        const char *val = json_string_value(v);
        if (!val)
            return xasprintf("matchLabels[%s]: must be a string", k);
        char *msg = add_requirement(sel, k, CKUBE_SEL_EQUALS, &val, 1);
        if (msg)
            return msg;
    }
    size_t i;
    json_array_foreach(me, i, v)
    {
        char *msg = add_expression(sel, v, i);
        if (msg)
            return msg;
    }
    return NULL;
}

int ckube_label_selector_from_json(const json_t *ls, ckube_selector **out, char **err)
{
    if (err)
        *err = NULL;
    *out = NULL;
    ckube_selector *sel = calloc(1, sizeof *sel);
    char *msg = sel ? label_selector_from_json(ls, sel) : strdup("out of memory");
    if (!msg && sort_by_key(sel) < 0)
        msg = strdup("out of memory");
    if (msg) {
        ckube_selector_free(sel);
        set_err(err, msg);
        return -1;
    }
    *out = sel;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Field selectors.                                                         */

/* Length of the UTF-8 sequence at s (1 for an invalid byte). */
static size_t utf8_len(const unsigned char *s)
{
    size_t n = s[0] < 0x80 ? 1 : s[0] >= 0xf0 ? 4 : s[0] >= 0xe0 ? 3 : s[0] >= 0xc0 ? 2 : 1;
    for (size_t i = 1; i < n; i++)
        if ((s[i] & 0xc0) != 0x80)
            return 1;
    return n;
}

/* fields.UnescapeValue: "\\", "\," and "\=" are the only escapes and bare
 * ',' or '=' are errors. Returns the value (malloc'd) or NULL with *err. */
static char *unescape_value(const char *s, char **err)
{
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "");
    int in_slash = 0;
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        size_t n = utf8_len(p);
        if (in_slash) {
            if (*p == '\\' || *p == ',' || *p == '=') {
                ckube__sb_addn(&b, (const char *)p, 1);
            } else {
                /* Go ranges over runes: an invalid byte shows as U+FFFD. */
                int bad = n == 1 && *p >= 0x80;
                *err = xasprintf("invalid field selector: invalid escape sequence: \\%.*s",
                                 bad ? 3 : (int)n, bad ? "\xef\xbf\xbd" : (const char *)p);
                free(b.s);
                return NULL;
            }
            in_slash = 0;
        } else if (*p == '\\') {
            in_slash = 1;
        } else if (*p == ',' || *p == '=') {
            *err = xasprintf("invalid field selector: unescaped character in value: %d", *p);
            free(b.s);
            return NULL;
        } else {
            ckube__sb_addn(&b, (const char *)p, n);
        }
        p += n;
    }
    if (in_slash) {
        *err = strdup("invalid field selector: invalid escape sequence: \\");
        free(b.s);
        return NULL;
    }
    return ckube__sb_take(&b);
}

/* Splits at commas not preceded by a backslash escape. Pieces keep their
 * escapes. Returns the count, or -1 on allocation failure. */
static long split_terms(const char *s, char ***out)
{
    char **v = NULL;
    size_t n = 0;
    size_t start = 0, i = 0;
    int in_slash = 0;
    for (;; i++) {
        int end = s[i] == 0;
        if (!end && in_slash) {
            in_slash = 0;
            continue;
        }
        if (!end && s[i] == '\\') {
            in_slash = 1;
            continue;
        }
        if (end || s[i] == ',') {
            char **nv = realloc(v, (n + 1) * sizeof *nv);
            char *piece = strndup(s + start, i - start);
            if (!nv || !piece) {
                free(piece);
                v = nv ? nv : v;
                for (size_t k = 0; k < n; k++)
                    free(v[k]);
                free(v);
                return -1;
            }
            v = nv;
            v[n++] = piece;
            start = i + 1;
        }
        if (end)
            break;
    }
    *out = v;
    return (long)n;
}

/* Splits a term at the first "!=", "==" or "=". */
static int split_term(const char *term, size_t *lhs_len, ckube_sel_op *op, const char **rhs)
{
    for (size_t i = 0; term[i]; i++) {
        if (strncmp(term + i, "!=", 2) == 0) {
            *op = CKUBE_SEL_NOT_EQUALS;
            *rhs = term + i + 2;
        } else if (strncmp(term + i, "==", 2) == 0) {
            *op = CKUBE_SEL_EQUALS;
            *rhs = term + i + 2;
        } else if (term[i] == '=') {
            *op = CKUBE_SEL_EQUALS;
            *rhs = term + i + 1;
        } else {
            continue;
        }
        *lhs_len = i;
        return 0;
    }
    return -1;
}

/* Parses one non-empty term into *r. */
static char *parse_field_term(const char *selector, const char *term, ckube_sel_requirement *r)
{
    size_t lhs_len;
    ckube_sel_op op;
    const char *rhs;
    if (split_term(term, &lhs_len, &op, &rhs) < 0)
        return xasprintf("invalid selector: '%s'; can't understand '%s'", selector, term);
    char *err = NULL;
    char *value = unescape_value(rhs, &err);
    if (!value)
        return err ? err : strdup("out of memory");
    r->key = strndup(term, lhs_len);
    r->values = malloc(sizeof *r->values);
    if (!r->key || !r->values) {
        free(value);
        req_clear(r);
        return strdup("out of memory");
    }
    r->values[0] = value;
    r->nvalues = 1;
    r->op = op;
    return NULL;
}

int ckube_field_selector_parse(const char *s, ckube_selector **out, char **err)
{
    if (err)
        *err = NULL;
    *out = NULL;
    s = s ? s : "";
    ckube_selector *sel = calloc(1, sizeof *sel);
    char **terms = NULL;
    long n = sel && *s ? split_terms(s, &terms) : 0;
    if (!sel || n < 0) {
        free(sel);
        set_err(err, strdup("out of memory"));
        return -1;
    }
    sel->is_field = true;
    if (n > 1)
        qsort(terms, (size_t)n, sizeof *terms, cmp_str);
    char *msg = NULL;
    for (long i = 0; i < n && !msg; i++) {
        if (!*terms[i])
            continue;
        ckube_sel_requirement r = {0};
        msg = parse_field_term(s, terms[i], &r);
        if (!msg && sel_append(sel, &r) < 0) {
            req_clear(&r);
            msg = strdup("out of memory");
        }
    }
    for (long i = 0; i < n; i++)
        free(terms[i]);
    free(terms);
    if (msg) {
        ckube_selector_free(sel);
        set_err(err, msg);
        return -1;
    }
    *out = sel;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Matching and introspection.                                              */

static bool has_value(const ckube_sel_requirement *r, const char *v)
{
    for (size_t i = 0; i < r->nvalues; i++)
        if (strcmp(r->values[i], v) == 0)
            return true;
    return false;
}

/* `v` is the object's value, NULL when it lacks the key. */
static bool req_matches(const ckube_sel_requirement *r, const char *v)
{
    int64_t have, want;
    switch (r->op) {
    case CKUBE_SEL_EQUALS:
    case CKUBE_SEL_IN:
        return v && has_value(r, v);
    case CKUBE_SEL_NOT_EQUALS:
    case CKUBE_SEL_NOT_IN:
        return !v || !has_value(r, v);
    case CKUBE_SEL_EXISTS:
        return v != NULL;
    case CKUBE_SEL_DOES_NOT_EXIST:
        return v == NULL;
    case CKUBE_SEL_GT:
    case CKUBE_SEL_LT:
        if (!v || r->nvalues != 1 || parse_int64(v, &have) < 0 ||
            parse_int64(r->values[0], &want) < 0)
            return false;
        return r->op == CKUBE_SEL_GT ? have > want : have < want;
    }
    return false;
}

bool ckube_selector_matches(const ckube_selector *sel, ckube_sel_lookup_fn lookup, void *ctx)
{
    if (!sel)
        return true;
    for (size_t i = 0; i < sel->nreqs; i++) {
        const ckube_sel_requirement *r = &sel->reqs[i];
        const char *v = lookup(ctx, r->key);
        if (sel->is_field && !v)
            v = ""; /* fields.Set.Get of a missing field */
        if (!req_matches(r, v))
            return false;
    }
    return true;
}

bool ckube_selector_empty(const ckube_selector *sel)
{
    return !sel || sel->nreqs == 0;
}

const char *ckube_selector_required_value(const ckube_selector *sel, const char *key)
{
    if (!sel)
        return NULL;
    for (size_t i = 0; i < sel->nreqs; i++) {
        const ckube_sel_requirement *r = &sel->reqs[i];
        if (strcmp(r->key, key) != 0)
            continue;
        bool exact = (r->op == CKUBE_SEL_EQUALS || r->op == CKUBE_SEL_IN) && r->nvalues == 1;
        if (exact)
            return r->values[0];
        /* labels: the first requirement on the key decides; fields: a
         * != term is skipped and a later = term may still pin the value. */
        if (!sel->is_field)
            return NULL;
    }
    return NULL;
}

/* fields.EscapeValue */
static void put_escaped(ckube__strbuf *b, const char *v)
{
    for (; *v; v++) {
        if (*v == '\\' || *v == ',' || *v == '=')
            ckube__sb_addn(b, "\\", 1);
        ckube__sb_addn(b, v, 1);
    }
}

static void put_requirement(ckube__strbuf *b, const ckube_sel_requirement *r, bool field)
{
    static const char *const OPS[] = {
        [CKUBE_SEL_EQUALS] = "=",        [CKUBE_SEL_NOT_EQUALS] = "!=", [CKUBE_SEL_IN] = " in (",
        [CKUBE_SEL_NOT_IN] = " notin (", [CKUBE_SEL_GT] = ">",          [CKUBE_SEL_LT] = "<",
    };
    if (r->op == CKUBE_SEL_DOES_NOT_EXIST)
        ckube__sb_add(b, "!");
    ckube__sb_add(b, r->key);
    if (r->op == CKUBE_SEL_EXISTS || r->op == CKUBE_SEL_DOES_NOT_EXIST)
        return;
    ckube__sb_add(b, OPS[r->op]);
    for (size_t i = 0; i < r->nvalues; i++) {
        if (i)
            ckube__sb_add(b, ",");
        if (field)
            put_escaped(b, r->values[i]);
        else
            ckube__sb_add(b, r->values[i]);
    }
    if (r->op == CKUBE_SEL_IN || r->op == CKUBE_SEL_NOT_IN)
        ckube__sb_add(b, ")");
}

char *ckube_selector_string(const ckube_selector *sel)
{
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "");
    for (size_t i = 0; sel && i < sel->nreqs; i++) {
        if (i)
            ckube__sb_add(&b, ",");
        put_requirement(&b, &sel->reqs[i], sel->is_field);
    }
    return ckube__sb_take(&b);
}
