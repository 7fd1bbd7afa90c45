/* Structural OpenAPI v3 schema engine; see schema.h.
 *
 * Wording follows apiextensions-apiserver, which runs kube-openapi's
 * validator and converts its errors to field errors:
 *   type        TypeInvalid(value = JSON type name) "P in body must be of type T: \"t\""
 *   required    Required                             "Required value"
 *   enum        NotSupported(value)                  "supported values: \"a\", \"b\""
 *   maxLength   TooLong                              "may not be more than N bytes"
 *   maxItems    TooMany(count, max)                  "must have at most N items"
 *   maxProps    TooMany(count, max)
 *   everything else: Invalid(value, "P in body should ...")
 * where P is the field path (kube-openapi's "in body" message repeats it).
 */
#include "apiserver/apiextensions/schema.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <regex.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/text.h"

#define MAX_DEPTH 200

enum { CTX_NORMAL = 0, CTX_ROOT = 1, CTX_EMBEDDED = 2 };

/* ---------------------------------------------------------------- text */

static size_t utf8_len(const char *s, size_t n)
{
    /* Length in bytes of the UTF-8 sequence starting at s (1 if invalid). */
    unsigned char c = (unsigned char)s[0];
    size_t want = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (want > n)
        return 1;
    for (size_t i = 1; i < want; i++)
        if (((unsigned char)s[i] & 0xc0) != 0x80)
            return 1;
    return want;
}

char *schema_go_quote(const char *s)
{
    ckube__strbuf b = {0};
    size_t n = strlen(s);
    ckube__sb_addc(&b, '"');
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        if (c >= 0x80) {
            size_t l = utf8_len(s + i, n - i);
            if (l == 1)
                ckube__sb_printf(&b, "\\x%02x", c);
            else
                ckube__sb_addn(&b, s + i, l);
            i += l;
            continue;
        }
        switch (c) {
        case '"':
            ckube__sb_add(&b, "\\\"");
            break;
        case '\\':
            ckube__sb_add(&b, "\\\\");
            break;
        case '\a':
            ckube__sb_add(&b, "\\a");
            break;
        case '\b':
            ckube__sb_add(&b, "\\b");
            break;
        case '\f':
            ckube__sb_add(&b, "\\f");
            break;
        case '\n':
            ckube__sb_add(&b, "\\n");
            break;
        case '\r':
            ckube__sb_add(&b, "\\r");
            break;
        case '\t':
            ckube__sb_add(&b, "\\t");
            break;
        case '\v':
            ckube__sb_add(&b, "\\v");
            break;
        default:
            if (c < 0x20 || c == 0x7f)
                ckube__sb_printf(&b, "\\x%02x", c);
            else
                ckube__sb_addc(&b, (char)c);
        }
        i++;
    }
    ckube__sb_addc(&b, '"');
    return ckube__sb_take(&b);
}

/* Go's %v of a float64 (strconv 'g' with the shortest precision): the
 * shortest digits that round-trip, in %e form when the decimal exponent is
 * < -4 or >= 6 (so 1e+06 and 123456), else plain. */
static void go_float(char *out, size_t outsz, double d)
{
    if (isnan(d)) {
        snprintf(out, outsz, "NaN");
        return;
    }
    if (isinf(d)) {
        snprintf(out, outsz, d > 0 ? "+Inf" : "-Inf");
        return;
    }
    if (d == 0) {
        snprintf(out, outsz, signbit(d) ? "-0" : "0");
        return;
    }
    char tmp[64];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    /* tmp: [-]D[.DDD]e[+-]XX */
    bool neg = tmp[0] == '-';
    char digits[32];
    size_t nd = 0;
    const char *p = tmp + (neg ? 1 : 0);
    for (; *p && *p != 'e'; p++)
        if (isdigit((unsigned char)*p) && nd < sizeof digits - 1)
            digits[nd++] = *p;
    digits[nd] = 0;
    int exp10 = *p == 'e' ? atoi(p + 1) : 0;
    ckube__strbuf b = {0};
    if (neg)
        ckube__sb_addc(&b, '-');
    if (exp10 < -4 || exp10 >= 6) {
        /* %e: d.ddde+XX with at least two exponent digits */
        ckube__sb_addc(&b, digits[0]);
        if (nd > 1) {
            ckube__sb_addc(&b, '.');
            ckube__sb_add(&b, digits + 1);
        }
        ckube__sb_printf(&b, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (exp10 < 0) {
        ckube__sb_add(&b, "0.");
        for (int i = -1; i > exp10; i--)
            ckube__sb_addc(&b, '0');
        ckube__sb_add(&b, digits);
    } else {
        for (int i = 0; i <= exp10; i++)
            ckube__sb_addc(&b, (size_t)i < nd ? digits[i] : '0');
        if ((size_t)exp10 + 1 < nd) {
            ckube__sb_addc(&b, '.');
            ckube__sb_add(&b, digits + exp10 + 1);
        }
    }
    char *s = ckube__sb_take(&b);
    snprintf(out, outsz, "%s", s ? s : "0");
    free(s);
}

static char *dump_canonical(const json_t *v)
{
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
}

char *schema_format_value(const json_t *v)
{
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_STRING:
        return schema_go_quote(json_string_value(v));
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return strdup(buf);
    case JSON_REAL:
        go_float(buf, sizeof buf, json_real_value(v));
        return strdup(buf);
    case JSON_TRUE:
        return strdup("true");
    case JSON_FALSE:
        return strdup("false");
    case JSON_NULL:
        return strdup("null");
    default:
        return dump_canonical(v);
    }
}

/* A schema number (limit) as text: integral values as integers when the
 * data is an integer (kube-openapi's *Int variants), else Go's %v. */
static void format_limit(char *out, size_t n, double limit, bool data_is_int)
{
    if (data_is_int && limit == floor(limit) && fabs(limit) < 9.2e18)
        snprintf(out, n, "%lld", (long long)limit);
    else
        go_float(out, n, limit);
}

/* ---------------------------------------------------------------- walk */

typedef struct walk {
    unsigned flags;
    ckube_status *st;
    int ncauses;
    bool oom;
    bool collect_unknown;
    char **unknown;
    size_t nunknown, capunknown;
    ckube__strbuf path;
    int depth;
} walk;

static size_t path_push_key(walk *w, const char *key)
{
    size_t old = w->path.len;
    if (old)
        ckube__sb_addc(&w->path, '.');
    ckube__sb_add(&w->path, key);
    return old;
}

static size_t path_push_index(walk *w, size_t i)
{
    size_t old = w->path.len;
    ckube__sb_printf(&w->path, "[%zu]", i);
    return old;
}

static void path_pop(walk *w, size_t old)
{
    if (w->path.s && old <= w->path.len) {
        w->path.len = old;
        w->path.s[old] = 0;
    }
}

static const char *cur_path(const walk *w)
{
    return w->path.s ? w->path.s : "";
}

static void add_cause(walk *w, const char *type, const char *field, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static void add_cause(walk *w, const char *type, const char *field, const char *fmt, ...)
{
    w->ncauses++;
    if (!w->st)
        return;
    char *msg = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&msg, fmt, ap);
    va_end(ap);
    if (r < 0) {
        w->oom = true;
        return;
    }
    ckube_status_add_cause(w->st, type, field, "%s", msg);
    free(msg);
}

/* Adds "<Kind of error>: <value>: <detail>" at the current path. `value`
 * NULL renders as "" (upstream substitutes "" for a nil bad value). */
static void add_value_cause(walk *w, const char *type, const char *label, const json_t *value,
                            const char *detail)
{
    char *v = value ? schema_format_value(value) : strdup("\"\"");
    if (!v) {
        w->oom = true;
        return;
    }
    if (detail && *detail)
        add_cause(w, type, cur_path(w), "%s: %s: %s", label, v, detail);
    else
        add_cause(w, type, cur_path(w), "%s: %s", label, v);
    free(v);
}

static void add_invalid(walk *w, const json_t *value, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void add_invalid(walk *w, const json_t *value, const char *fmt, ...)
{
    char *detail = NULL;
    va_list ap;
    va_start(ap, fmt);
    int r = vasprintf(&detail, fmt, ap);
    va_end(ap);
    if (r < 0) {
        w->oom = true;
        return;
    }
    add_value_cause(w, CKUBE_CAUSE_FIELD_INVALID, "Invalid value", value, detail);
    free(detail);
}

static void add_type_invalid(walk *w, const char *expected, const char *actual)
{
    json_t *a = json_string(actual);
    char *q = schema_go_quote(actual);
    if (!a || !q) {
        w->oom = true;
    } else {
        char *detail = NULL;
        if (asprintf(&detail, "%s in body must be of type %s: %s", cur_path(w), expected, q) < 0)
            w->oom = true;
        else
            add_value_cause(w, CKUBE_CAUSE_FIELD_TYPE_INVALID, "Invalid value", a, detail);
        free(detail);
    }
    free(q);
    json_decref(a);
}

static void record_unknown(walk *w)
{
    if (!w->collect_unknown || w->nunknown >= SCHEMA_MAX_UNKNOWN)
        return;
    if (w->nunknown == w->capunknown) {
        size_t cap = w->capunknown ? w->capunknown * 2 : 8;
        char **n = realloc(w->unknown, cap * sizeof *n);
        if (!n) {
            w->oom = true;
            return;
        }
        w->unknown = n;
        w->capunknown = cap;
    }
    char *p = strdup(cur_path(w));
    if (!p) {
        w->oom = true;
        return;
    }
    w->unknown[w->nunknown++] = p;
}

/* ------------------------------------------------------ schema helpers */

static bool sch_true(const json_t *s, const char *key)
{
    return json_is_true(json_object_get(s, key));
}

static const json_t *sch_obj(const json_t *s, const char *key)
{
    const json_t *v = json_object_get(s, key);
    return json_is_object(v) ? v : NULL;
}

static const char *json_type_name(const json_t *v)
{
    switch (json_typeof(v)) {
    case JSON_OBJECT:
        return "object";
    case JSON_ARRAY:
        return "array";
    case JSON_STRING:
        return "string";
    case JSON_INTEGER:
        return "integer";
    case JSON_REAL:
        return "number";
    case JSON_TRUE:
    case JSON_FALSE:
        return "boolean";
    default:
        return "null";
    }
}

static bool is_integral(const json_t *v)
{
    if (json_is_integer(v))
        return true;
    if (!json_is_real(v))
        return false;
    double d = json_real_value(v);
    return isfinite(d) && d == floor(d);
}

static bool type_name_matches(const char *t, const json_t *v)
{
    if (!strcmp(t, "object"))
        return json_is_object(v);
    if (!strcmp(t, "array"))
        return json_is_array(v);
    if (!strcmp(t, "string"))
        return json_is_string(v);
    if (!strcmp(t, "boolean"))
        return json_is_boolean(v);
    if (!strcmp(t, "integer"))
        return is_integral(v);
    if (!strcmp(t, "number"))
        return json_is_number(v);
    if (!strcmp(t, "null"))
        return json_is_null(v);
    return true; /* unknown type names are not enforced */
}

/* The `type` keyword as a list: a string or an array of strings. Returns
 * false when the schema has no usable type. */
static bool type_matches(const json_t *type, const json_t *v, bool *contains_null)
{
    *contains_null = false;
    if (json_is_string(type)) {
        *contains_null = !strcmp(json_string_value(type), "null");
        return type_name_matches(json_string_value(type), v);
    }
    bool any = false, match = false;
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t)
    {
        if (!json_is_string(t))
            continue;
        any = true;
        if (!strcmp(json_string_value(t), "null"))
            *contains_null = true;
        if (type_name_matches(json_string_value(t), v))
            match = true;
    }
    return !any || match;
}

static bool has_type(const json_t *type)
{
    if (json_is_string(type))
        return true;
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t) if (json_is_string(t)) return true;
    return false;
}

static char *type_label(const json_t *type, bool int_or_string)
{
    if (int_or_string)
        return strdup("integer,string");
    if (json_is_string(type))
        return strdup(json_string_value(type));
    ckube__strbuf b = {0};
    size_t i;
    const json_t *t;
    json_array_foreach(type, i, t)
    {
        if (!json_is_string(t))
            continue;
        if (b.len)
            ckube__sb_addc(&b, ',');
        ckube__sb_add(&b, json_string_value(t));
    }
    return ckube__sb_take(&b);
}

static bool schema_type_is(const json_t *s, const char *name)
{
    const json_t *type = json_object_get(s, "type");
    if (json_is_string(type))
        return !strcmp(json_string_value(type), name);
    size_t i;
    const json_t *t;
    json_array_foreach(type, i,
                       t) if (json_is_string(t) && !strcmp(json_string_value(t), name)) return true;
    return false;
}

/* ------------------------------------------------------ prune/default */

static void prune_node(walk *w, const json_t *s, json_t *v, int ctx);

static bool is_resource_key(const char *k)
{
    return !strcmp(k, "apiVersion") || !strcmp(k, "kind");
}

/* Drops non-nullable nulls and applies defaults of `props` into object v. */
static void default_object(walk *w, const json_t *props, json_t *v, int ctx)
{
    const char *pk;
    json_t *ps;
    json_object_foreach((json_t *)props, pk, ps)
    {
        if (!json_is_object(ps))
            continue;
        if (ctx == CTX_ROOT && !strcmp(pk, "metadata"))
            continue;
        json_t *cur = json_object_get(v, pk);
        if (cur && !json_is_null(cur))
            continue;
        if (cur && sch_true(ps, "nullable"))
            continue;
        json_t *def = json_object_get(ps, "default");
        if (def && !json_is_null(def)) {
            json_t *copy = json_deep_copy(def);
            if (!copy || json_object_set_new(v, pk, copy)) {
                w->oom = true;
                return;
            }
        } else if (cur) {
            json_object_del(v, pk);
        }
    }
}

static bool schema_requires(const json_t *s, const char *key)
{
    size_t i;
    const json_t *r;
    json_array_foreach(json_object_get(s, "required"), i, r)
    {
        if (json_is_string(r) && !strcmp(json_string_value(r), key))
            return true;
    }
    return false;
}

/* SCHEMA_OMITEMPTY: whether property `key` of object schema s, whose own
 * schema is cs, is an empty map or list that Go's omitempty leaves out. */
static bool omitted_when_empty(const json_t *s, const char *key, const json_t *cs, const json_t *v)
{
    bool empty_list = json_is_array(v) && !json_array_size(v);
    bool empty_map = json_is_object(v) && !json_object_size(v) &&
                     json_is_object(json_object_get(cs, "additionalProperties")) &&
                     !sch_obj(cs, "properties") &&
                     !sch_true(cs, "x-kubernetes-preserve-unknown-fields");
    return (empty_list || empty_map) && !schema_requires(s, key);
}

static void prune_object(walk *w, const json_t *s, json_t *v, int ctx)
{
    const json_t *props = sch_obj(s, "properties");
    const json_t *addl = json_object_get(s, "additionalProperties");
    bool preserve = sch_true(s, "x-kubernetes-preserve-unknown-fields");
    bool embedded = ctx != CTX_NORMAL || sch_true(s, "x-kubernetes-embedded-resource");
    /* Only a schema that describes objects prunes: one with properties, an
     * additionalProperties decision or `type: object`. */
    bool structural =
        props || json_is_object(addl) || json_is_false(addl) || schema_type_is(s, "object");

    if ((w->flags & SCHEMA_DEFAULT) && props)
        default_object(w, props, v, ctx);

    const char *key;
    json_t *child;
    void *tmp;
    json_object_foreach_safe(v, tmp, key, child)
    {
        if (ctx == CTX_ROOT && !strcmp(key, "metadata"))
            continue;
        const json_t *cs = props ? json_object_get(props, key) : NULL;
        if (!json_is_object(cs))
            cs = NULL;
        if (embedded && (is_resource_key(key) || !strcmp(key, "metadata"))) {
            if (cs) {
                size_t old = path_push_key(w, key);
                prune_node(w, cs, child, CTX_NORMAL);
                path_pop(w, old);
            }
            continue;
        }
        size_t old = path_push_key(w, key);
        if (cs) {
            prune_node(w, cs, child, CTX_NORMAL);
            if ((w->flags & SCHEMA_OMITEMPTY) && omitted_when_empty(s, key, cs, child))
                json_object_del(v, key);
        } else if (json_is_object(addl)) {
            prune_node(w, addl, child, CTX_NORMAL);
        } else if (!(json_is_true(addl) || preserve || !structural)) {
            record_unknown(w);
            if (w->flags & SCHEMA_PRUNE)
                json_object_del(v, key);
        }
        path_pop(w, old);
    }
}

static void prune_node(walk *w, const json_t *s, json_t *v, int ctx)
{
    if (!json_is_object(s) || !v || w->oom)
        return;
    if (++w->depth > MAX_DEPTH) {
        w->depth--;
        return;
    }
    if (json_is_object(v)) {
        prune_object(w, s, v, ctx);
    } else if (json_is_array(v)) {
        const json_t *items = sch_obj(s, "items");
        if (items) {
            const json_t *def = json_object_get(items, "default");
            for (size_t i = 0; i < json_array_size(v); i++) {
                json_t *e = json_array_get(v, i);
                if ((w->flags & SCHEMA_DEFAULT) && json_is_null(e) && def && !json_is_null(def) &&
                    !sch_true(items, "nullable")) {
                    json_t *copy = json_deep_copy(def);
                    if (!copy || json_array_set_new(v, i, copy)) {
                        w->oom = true;
                        break;
                    }
                    e = json_array_get(v, i);
                }
                size_t old = path_push_index(w, i);
                prune_node(w, items, e, CTX_NORMAL);
                path_pop(w, old);
            }
        }
    }
    w->depth--;
}

/* ------------------------------------------------------------ regexes */

static bool is_class_escape(char c)
{
    return c == 'd' || c == 'D' || c == 'w' || c == 'W' || c == 's' || c == 'S';
}

static const char *class_body(char c)
{
    switch (c) {
    case 'd':
    case 'D':
        return "0-9";
    case 'w':
    case 'W':
        return "A-Za-z0-9_";
    default:
        return "[:space:]";
    }
}

static int escape_char(char c)
{
    switch (c) {
    case 'n':
        return '\n';
    case 't':
        return '\t';
    case 'r':
        return '\r';
    case 'f':
        return '\f';
    case 'v':
        return '\v';
    case '0':
        return -1; /* NUL cannot be expressed */
    default:
        if (isalnum((unsigned char)c))
            return -1; /* \b, \B, \uXXXX, \cX, backrefs: unsupported */
        return (unsigned char)c;
    }
}

/* Converts a bracket expression starting at p ('[') into POSIX form.
 * Returns the position after ']' or NULL if unsupported. */
static const char *convert_bracket(const char *p, ckube__strbuf *out)
{
    p++; /* '[' */
    bool neg = false;
    if (*p == '^') {
        neg = true;
        p++;
    }
    bool has_rbracket = false, has_dash = false, has_caret = false;
    ckube__strbuf body = {0};
    bool first = true;
    while (*p && (*p != ']' || first)) {
        first = false;
        int c;
        if (*p == '\\') {
            if (!p[1])
                goto fail;
            if (is_class_escape(p[1])) {
                if (isupper((unsigned char)p[1]))
                    goto fail; /* negated class inside brackets */
                ckube__sb_add(&body, class_body(p[1]));
                p += 2;
                continue;
            }
            c = escape_char(p[1]);
            if (c < 0)
                goto fail;
            p += 2;
        } else if (*p == '[' && p[1] == ':') {
            const char *end = strstr(p, ":]");
            if (!end)
                goto fail;
            ckube__sb_addn(&body, p, (size_t)(end + 2 - p));
            p = end + 2;
            continue;
        } else {
            c = (unsigned char)*p++;
        }
        /* a range? */
        if (*p == '-' && p[1] && p[1] != ']') {
            int hi;
            if (p[1] == '\\') {
                if (!p[2] || is_class_escape(p[2]))
                    goto fail;
                hi = escape_char(p[2]);
                if (hi < 0)
                    goto fail;
                p += 3;
            } else {
                hi = (unsigned char)p[1];
                p += 2;
            }
            if (hi < c)
                goto fail;
            if (c == ']' || c == '-' || c == '^' || hi == ']' || hi == '-' || hi == '^')
                goto fail;
            ckube__sb_addc(&body, (char)c);
            ckube__sb_addc(&body, '-');
            ckube__sb_addc(&body, (char)hi);
            continue;
        }
        if (c == ']')
            has_rbracket = true;
        else if (c == '-')
            has_dash = true;
        else if (c == '^')
            has_caret = true;
        else
            ckube__sb_addc(&body, (char)c);
    }
    if (*p != ']')
        goto fail;
    p++;
    if (!body.len && !has_rbracket && !has_dash && !has_caret) {
        /* [] matches nothing, [^] anything */
        ckube__sb_add(out, neg ? "(.|\n)" : "[^\\x00-\\xff]");
        free(body.s);
        return p;
    }
    ckube__sb_addc(out, '[');
    if (neg)
        ckube__sb_addc(out, '^');
    if (has_rbracket)
        ckube__sb_addc(out, ']');
    if (body.s)
        ckube__sb_add(out, body.s);
    if (has_caret)
        ckube__sb_addc(out, '^');
    if (has_dash)
        ckube__sb_addc(out, '-');
    ckube__sb_addc(out, ']');
    free(body.s);
    return p;
fail:
    free(body.s);
    return NULL;
}

/* Guards against patterns that would make regcomp blow up. glibc
 * compiles a{n,m} by copying a's tree m times (and a+ by copying it
 * once), so nested repetitions multiply: ((a{1000}){1000}) is a million
 * nodes, and a+++... doubles per '+'. Go's regexp, which upstream
 * compiles patterns with, refuses such patterns outright (invalid repeat
 * count over 1000, invalid nested repetition operator, expression too
 * large); here they are not enforced, like any pattern POSIX cannot
 * express. `weight` estimates the compiled tree's nodes. */
#define RE_MAX_REPEAT 1000
#define RE_MAX_WEIGHT 20000
#define RE_MAX_GROUPS 64

typedef struct re_size {
    double cur[RE_MAX_GROUPS + 1]; /* weight of each open group so far */
    int depth;
    double last; /* weight of the last atom or group (what a quantifier repeats) */
} re_size;

static void re_atom(re_size *z, double w)
{
    z->last = w;
    z->cur[z->depth] += w;
}

/* A quantifier on the last atom that makes `copies` of it in all. */
static bool re_repeat(re_size *z, double copies)
{
    z->cur[z->depth] += z->last * (copies - 1);
    z->last *= copies;
    return z->cur[z->depth] <= RE_MAX_WEIGHT;
}

/* Parses a counted repetition at p ("{n}", "{n,}", "{n,m}"); sets *end
 * past it, and *min and *max (-1: unbounded). False when p is not one (Go
 * then reads the '{' as a literal). */
static bool re2_counted(const char *p, const char **end, long *min, long *max)
{
    const char *q = p + 1;
    if (!isdigit((unsigned char)*q))
        return false;
    *min = 0;
    for (; isdigit((unsigned char)*q); q++)
        *min = *min > 100000 ? *min : *min * 10 + (*q - '0');
    *max = *min;
    if (*q == ',') {
        q++;
        if (*q == '}') {
            *max = -1;
        } else {
            if (!isdigit((unsigned char)*q))
                return false;
            *max = 0;
            for (; isdigit((unsigned char)*q); q++)
                *max = *max > 100000 ? *max : *max * 10 + (*q - '0');
        }
    }
    if (*q != '}')
        return false;
    *end = q + 1;
    return true;
}

/* Go's limits on counts: each at most 1000, and min <= max. */
static bool re2_counts_ok(long min, long max)
{
    return min <= RE_MAX_REPEAT && max <= RE_MAX_REPEAT && (max < 0 || min <= max);
}

/* The copies glibc makes for the counted repetition at p ({n}, {n,} or
 * {n,m}); 0 when it is not one (e.g. {,m}), a count is over
 * RE_MAX_REPEAT or m < n. */
static double brace_copies(const char *p)
{
    const char *end;
    long min, max;
    if (!re2_counted(p, &end, &min, &max) || !re2_counts_ok(min, max))
        return 0;
    return max < 0 ? (double)min + 1 : max ? (double)max : 1;
}

char *schema_ecma_to_posix(const char *pattern)
{
    ckube__strbuf out = {0};
    const char *p = pattern;
    bool prev_quant = false;
    re_size z = {0};
    ckube__sb_add(&out, "");
    while (*p) {
        if (z.cur[z.depth] > RE_MAX_WEIGHT)
            goto fail;
        char c = *p;
        if (c == '\\') {
            if (!p[1])
                goto fail;
            if (is_class_escape(p[1])) {
                ckube__sb_addc(&out, '[');
                if (isupper((unsigned char)p[1]))
                    ckube__sb_addc(&out, '^');
                ckube__sb_add(&out, class_body(p[1]));
                ckube__sb_addc(&out, ']');
            } else {
                int e = escape_char(p[1]);
                if (e < 0)
                    goto fail;
                if (strchr(".[]{}()*+?^$|\\", e)) {
                    ckube__sb_addc(&out, '\\');
                    ckube__sb_addc(&out, (char)e);
                } else {
                    ckube__sb_addc(&out, (char)e);
                }
            }
            p += 2;
            prev_quant = false;
            re_atom(&z, 1);
            continue;
        }
        if (c == '[') {
            p = convert_bracket(p, &out);
            if (!p)
                goto fail;
            prev_quant = false;
            re_atom(&z, 1);
            continue;
        }
        if (c == '(' && p[1] == '?' && p[2] != ':')
            goto fail; /* lookaround, flags, named groups */
        if (c == '(') {
            if (z.depth == RE_MAX_GROUPS)
                goto fail;
            z.cur[++z.depth] = 0;
            ckube__sb_addc(&out, '(');
            p += p[1] == '?' ? 3 : 1;
            prev_quant = false;
            continue;
        }
        if (c == ')') {
            if (z.depth == 0)
                goto fail;
            double group = z.cur[z.depth--];
            re_atom(&z, group);
            ckube__sb_addc(&out, ')');
            p++;
            prev_quant = false;
            continue;
        }
        if (c == '?' && prev_quant) {
            /* lazy quantifier: same set of matching strings */
            p++;
            prev_quant = false;
            continue;
        }
        if (c == '{') {
            const char *end = strchr(p, '}');
            bool ok = end != NULL && end > p + 1;
            for (const char *q = p + 1; ok && q < end; q++)
                if (!isdigit((unsigned char)*q) && *q != ',')
                    ok = false;
            if (!ok) {
                ckube__sb_add(&out, "\\{"); /* literal brace, as ECMA allows */
                p++;
                prev_quant = false;
                re_atom(&z, 1);
                continue;
            }
            double copies = brace_copies(p);
            if (prev_quant || copies == 0 || !re_repeat(&z, copies))
                goto fail; /* nested repetition, or too many copies */
            ckube__sb_addn(&out, p, (size_t)(end + 1 - p));
            p = end + 1;
            prev_quant = true;
            continue;
        }
        if (c == '}') {
            ckube__sb_add(&out, "\\}");
            p++;
            prev_quant = false;
            re_atom(&z, 1);
            continue;
        }
        bool quant = c == '*' || c == '+' || c == '?';
        if (quant && prev_quant)
            goto fail; /* a** or a+*: Go's "invalid nested repetition operator" */
        if (quant && !re_repeat(&z, c == '+' ? 2 : 1))
            goto fail;
        if (!quant && c != '|' && c != '^' && c != '$')
            re_atom(&z, 1);
        ckube__sb_addc(&out, c);
        prev_quant = quant;
        p++;
    }
    return ckube__sb_take(&out);
fail:
    free(out.s);
    return NULL;
}

/* ------------------------------------------------------ Go regexp syntax */

static char *re2_err(const char *code, const char *expr, size_t n)
{
    ckube__strbuf b = {0};
    ckube__sb_printf(&b, "error parsing regexp: %s: `%.*s`", code, (int)n, expr);
    return ckube__sb_take(&b);
}

/* The end of the character class that starts at p ('['), or NULL when it
 * has no closing ']' (a ']' right after "[" or "[^" is a literal). */
static const char *re2_class_end(const char *p)
{
    const char *q = p + 1;
    if (*q == '^')
        q++;
    if (*q == ']')
        q++;
    for (; *q && *q != ']'; q++) {
        if (*q == '\\' && q[1])
            q++;
        else if (*q == '[' && q[1] == ':') {
            const char *close = strstr(q + 2, ":]");
            if (close)
                q = close + 1;
        }
    }
    return *q == ']' ? q : NULL;
}

char *schema_re2_error(const char *pattern)
{
    const char *p = pattern;
    int depth = 0;
    bool atom = false;              /* something repeatable precedes */
    const char *last_repeat = NULL; /* start of the repetition just before */
    while (*p) {
        const char *start = p;
        char c = *p;
        bool repeat = false;
        if (c == '\\') {
            if (!p[1])
                return re2_err("trailing backslash at end of expression", "", 0);
            /* \1-\9 alone would be a backreference, which RE2 lacks;
             * with more octal digits it is an octal escape */
            if (p[1] >= '1' && p[1] <= '9' && !(p[2] >= '0' && p[2] <= '7'))
                return re2_err("invalid escape sequence", p, 2);
            p += 2;
            atom = true;
        } else if (c == '[') {
            const char *end = re2_class_end(p);
            if (!end)
                return re2_err("missing closing ]", p, strlen(p));
            p = end + 1;
            atom = true;
        } else if (c == '(') {
            if (p[1] == '?' && (p[2] == '=' || p[2] == '!'))
                return re2_err("invalid or unsupported Perl syntax", p, 3);
            if (p[1] == '?') {
                /* (?P<name> and (?<name> open a group, (?flags: too;
                 * (?flags) opens none. Anything else is left alone. */
                const char *q = p + 2;
                if (*q == 'P' || *q == '<') {
                    q += *q == 'P';
                    if (*q != '<' || q[1] == '=' || q[1] == '!' || !(q = strchr(q, '>')))
                        return NULL;
                    p = q + 1;
                    depth++;
                    atom = false;
                    last_repeat = NULL;
                    continue;
                }
                while (isalpha((unsigned char)*q) || *q == '-')
                    q++;
                if (*q == ')') {
                    p = q + 1; /* flags for what follows: nothing to repeat yet */
                    last_repeat = NULL;
                    continue;
                }
                if (*q != ':')
                    return NULL;
                p = q + 1;
            } else {
                p++;
            }
            depth++;
            atom = false;
        } else if (c == ')') {
            if (depth == 0)
                return re2_err("unexpected )", pattern, strlen(pattern));
            depth--;
            p++;
            atom = true;
        } else if (c == '|') {
            p++;
            atom = false;
        } else if (c == '*' || c == '+' || c == '?' || c == '{') {
            const char *end = p + 1;
            long min = 0, max = 0;
            if (c == '{' && !re2_counted(p, &end, &min, &max)) {
                p++; /* a literal '{' */
                atom = true;
                last_repeat = NULL;
                continue;
            }
            if (c == '{' && !re2_counts_ok(min, max))
                return re2_err("invalid repeat count", p, (size_t)(end - p));
            if (*end == '?')
                end++; /* non-greedy */
            if (last_repeat)
                return re2_err("invalid nested repetition operator", last_repeat,
                               (size_t)(end - last_repeat));
            if (!atom)
                return re2_err("missing argument to repetition operator", p, (size_t)(end - p));
            p = end;
            repeat = true;
        } else {
            p++;
            atom = true;
        }
        last_repeat = repeat ? start : NULL;
    }
    if (depth > 0)
        return re2_err("missing closing )", pattern, strlen(pattern));
    return NULL;
}

/* A small cache of compiled patterns: CRD schemas repeat the same few. */
#define RE_CACHE_SIZE 64
typedef struct re_entry {
    char *pattern;
    regex_t re;
    bool ok;
} re_entry;
static re_entry re_cache[RE_CACHE_SIZE];
static size_t re_next;
static pthread_mutex_t re_lock = PTHREAD_MUTEX_INITIALIZER;

/* Returns 1 match, 0 no match, -1 pattern not enforceable. */
static int pattern_match(const char *pattern, const char *s)
{
    pthread_mutex_lock(&re_lock);
    re_entry *e = NULL;
    for (size_t i = 0; i < RE_CACHE_SIZE; i++)
        if (re_cache[i].pattern && !strcmp(re_cache[i].pattern, pattern)) {
            e = &re_cache[i];
            break;
        }
    if (!e) {
        e = &re_cache[re_next];
        re_next = (re_next + 1) % RE_CACHE_SIZE;
        if (e->pattern) {
            if (e->ok)
                regfree(&e->re);
            free(e->pattern);
        }
        e->pattern = strdup(pattern);
        e->ok = false;
        char *posix = schema_ecma_to_posix(pattern);
        if (posix && e->pattern)
            e->ok = regcomp(&e->re, posix, REG_EXTENDED | REG_NOSUB) == 0;
        free(posix);
        if (!e->pattern) {
            pthread_mutex_unlock(&re_lock);
            return -1;
        }
    }
    int r = -1;
    if (e->ok)
        r = regexec(&e->re, s, 0, NULL, 0) == 0 ? 1 : 0;
    pthread_mutex_unlock(&re_lock);
    return r;
}

/* ------------------------------------------------------------ formats */

static bool all_hex(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isxdigit((unsigned char)s[i]))
            return false;
    return true;
}

static bool digits_n(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isdigit((unsigned char)s[i]))
            return false;
    return true;
}

static int num2(const char *s)
{
    return (s[0] - '0') * 10 + (s[1] - '0');
}

static bool valid_date(const char *s)
{
    if (strlen(s) < 10 || !digits_n(s, 4) || s[4] != '-' || !digits_n(s + 5, 2) || s[7] != '-' ||
        !digits_n(s + 8, 2))
        return false;
    int y = (s[0] - '0') * 1000 + (s[1] - '0') * 100 + num2(s + 2);
    int m = num2(s + 5), d = num2(s + 8);
    static const int mdays[] = {31, 29, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
    if (m < 1 || m > 12 || d < 1 || d > mdays[m - 1])
        return false;
    if (m == 2 && d == 29 && !((y % 4 == 0 && y % 100 != 0) || y % 400 == 0))
        return false;
    return true;
}

static bool valid_date_time(const char *s)
{
    if (!valid_date(s))
        return false;
    s += 10;
    if (*s != 'T' && *s != 't' && *s != ' ')
        return false;
    s++;
    if (!digits_n(s, 2) || s[2] != ':' || !digits_n(s + 3, 2) || s[5] != ':' || !digits_n(s + 6, 2))
        return false;
    if (num2(s) > 23 || num2(s + 3) > 59 || num2(s + 6) > 60)
        return false;
    s += 8;
    if (*s == '.') {
        s++;
        if (!isdigit((unsigned char)*s))
            return false;
        while (isdigit((unsigned char)*s))
            s++;
    }
    if (*s == 'Z' || *s == 'z')
        return s[1] == 0;
    if (*s == '+' || *s == '-')
        return digits_n(s + 1, 2) && s[3] == ':' && digits_n(s + 4, 2) && s[6] == 0 &&
               num2(s + 1) <= 23 && num2(s + 4) <= 59;
    return *s == 0; /* strfmt also accepts a local time without offset */
}

/* Standard base64 with padding; like Go's decoder, CR and LF are ignored. */
static bool valid_base64(const char *s)
{
    size_t n = 0, pad = 0;
    for (; *s; s++) {
        char c = *s;
        if (c == '\r' || c == '\n')
            continue;
        n++;
        if (c == '=') {
            pad++;
            continue;
        }
        if (pad || !(isalnum((unsigned char)c) || c == '+' || c == '/'))
            return false;
    }
    return n % 4 == 0 && pad <= 2;
}

static bool valid_uuid(const char *s, int version)
{
    if (strlen(s) != 36)
        return false;
    for (int i = 0; i < 36; i++) {
        if (i == 8 || i == 13 || i == 18 || i == 23) {
            if (s[i] != '-')
                return false;
        } else if (!isxdigit((unsigned char)s[i])) {
            return false;
        }
    }
    if (version && s[14] != '0' + version)
        return false;
    if (version == 4 || version == 5) {
        char v = (char)tolower((unsigned char)s[19]);
        if (v != '8' && v != '9' && v != 'a' && v != 'b')
            return false;
    }
    return true;
}

static bool valid_hostname(const char *s)
{
    size_t n = strlen(s);
    if (n == 0 || n > 255)
        return false;
    const char *label = s;
    while (*label) {
        const char *dot = strchr(label, '.');
        size_t len = dot ? (size_t)(dot - label) : strlen(label);
        if (len == 0 || len > 63 || label[0] == '-' || label[len - 1] == '-')
            return false;
        for (size_t i = 0; i < len; i++) {
            unsigned char c = (unsigned char)label[i];
            if (!(isalnum(c) || c == '-' || c >= 0x80))
                return false;
        }
        if (!dot)
            break;
        label = dot + 1;
        if (!*label)
            return false;
    }
    return true;
}

static bool valid_ip(const char *s, int af)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(af, s, buf) == 1;
}

static bool valid_cidr(const char *s)
{
    const char *slash = strchr(s, '/');
    if (!slash || slash == s || !slash[1] || strlen(slash + 1) > 3 ||
        !digits_n(slash + 1, strlen(slash + 1)))
        return false;
    char ip[64];
    size_t n = (size_t)(slash - s);
    if (n >= sizeof ip)
        return false;
    memcpy(ip, s, n);
    ip[n] = 0;
    int bits = atoi(slash + 1);
    if (valid_ip(ip, AF_INET))
        return bits <= 32;
    if (valid_ip(ip, AF_INET6))
        return bits <= 128;
    return false;
}

static bool valid_mac(const char *s)
{
    size_t n = strlen(s);
    if (n != 17)
        return false;
    char sep = s[2];
    if (sep != ':' && sep != '-')
        return false;
    for (size_t i = 0; i < n; i++) {
        if (i % 3 == 2) {
            if (s[i] != sep)
                return false;
        } else if (!isxdigit((unsigned char)s[i])) {
            return false;
        }
    }
    return true;
}

static bool valid_email(const char *s)
{
    const char *at = strchr(s, '@');
    if (!at || at == s || !at[1] || strchr(at + 1, '@'))
        return false;
    for (const char *p = s; *p; p++)
        if (isspace((unsigned char)*p))
            return false;
    return true;
}

/* Returns false if `s` violates a known string format; unknown formats pass. */
static bool string_format_ok(const char *format, const char *s)
{
    if (!strcmp(format, "date-time") || !strcmp(format, "datetime"))
        return valid_date_time(s);
    if (!strcmp(format, "date"))
        return strlen(s) == 10 && valid_date(s);
    if (!strcmp(format, "byte"))
        return valid_base64(s);
    if (!strcmp(format, "uuid"))
        return valid_uuid(s, 0);
    if (!strcmp(format, "uuid3"))
        return valid_uuid(s, 3);
    if (!strcmp(format, "uuid4"))
        return valid_uuid(s, 4);
    if (!strcmp(format, "uuid5"))
        return valid_uuid(s, 5);
    if (!strcmp(format, "hostname"))
        return valid_hostname(s);
    if (!strcmp(format, "ipv4"))
        return valid_ip(s, AF_INET);
    if (!strcmp(format, "ipv6"))
        return valid_ip(s, AF_INET6);
    if (!strcmp(format, "cidr"))
        return valid_cidr(s);
    if (!strcmp(format, "mac"))
        return valid_mac(s);
    if (!strcmp(format, "email"))
        return valid_email(s);
    if (!strcmp(format, "bsonobjectid"))
        return strlen(s) == 24 && all_hex(s, 24);
    return true;
}

/* ---------------------------------------------------------- validation */

static void validate_node(walk *w, const json_t *s, const json_t *v, int ctx);

static double num_value(const json_t *v)
{
    return json_is_integer(v) ? (double)json_integer_value(v) : json_real_value(v);
}

static void validate_string(walk *w, const json_t *s, const json_t *v)
{
    const char *str = json_string_value(v);
    size_t bytes = json_string_length(v);
    const json_t *maxl = json_object_get(s, "maxLength");
    const json_t *minl = json_object_get(s, "minLength");
    /* Characters, as Go's utf8.RuneCountInString; counted only when a
     * length is checked (data values are kilobytes long). */
    size_t chars = 0;
    if (maxl || minl)
        for (size_t i = 0; i < bytes; i += utf8_len(str + i, bytes - i))
            chars++;
    const json_t *pat = json_object_get(s, "pattern");
    /* kube-openapi's string validator stops at its first failure. */
    if (json_is_integer(maxl) && (json_int_t)chars > json_integer_value(maxl)) {
        json_int_t m = json_integer_value(maxl);
        add_cause(w, CKUBE_CAUSE_FIELD_TOO_LONG, cur_path(w),
                  "Too long: may not be more than %" JSON_INTEGER_FORMAT " %s", m,
                  m == 1 ? "byte" : "bytes");
    } else if (json_is_integer(minl) && (json_int_t)chars < json_integer_value(minl)) {
        add_invalid(w, v, "%s in body should be at least %" JSON_INTEGER_FORMAT " chars long",
                    cur_path(w), json_integer_value(minl));
    } else if (json_is_string(pat) && strlen(str) == bytes &&
               pattern_match(json_string_value(pat), str) == 0) {
        add_invalid(w, v, "%s in body should match '%s'", cur_path(w), json_string_value(pat));
    }
    const char *format = json_string_value(json_object_get(s, "format"));
    if (format && !string_format_ok(format, str)) {
        char *q = schema_go_quote(str);
        if (!q) {
            w->oom = true;
            return;
        }
        char *detail = NULL;
        if (asprintf(&detail, "%s in body must be of type %s: %s", cur_path(w), format, q) >= 0) {
            add_value_cause(w, CKUBE_CAUSE_FIELD_TYPE_INVALID, "Invalid value", v, detail);
            free(detail);
        } else {
            w->oom = true;
        }
        free(q);
    }
}

static void validate_number(walk *w, const json_t *s, const json_t *v)
{
    bool is_int = json_is_integer(v);
    double d = num_value(v);
    char lim[64];
    const json_t *mult = json_object_get(s, "multipleOf");
    if (json_is_number(mult) && num_value(mult) > 0) {
        double f = num_value(mult);
        bool ok;
        if (is_int && json_is_integer(mult))
            ok = json_integer_value(v) % json_integer_value(mult) == 0;
        else {
            double q = d / f;
            ok = isfinite(q) && (q == floor(q) || fabs(q - nearbyint(q)) <= 1e-9 * fabs(q));
        }
        if (!ok) {
            format_limit(lim, sizeof lim, f, is_int);
            add_invalid(w, v, "%s in body should be a multiple of %s", cur_path(w), lim);
        }
    }
    const json_t *min = json_object_get(s, "minimum");
    if (json_is_number(min)) {
        bool excl = sch_true(s, "exclusiveMinimum");
        bool bad;
        if (is_int && json_is_integer(min))
            bad = excl ? json_integer_value(v) <= json_integer_value(min)
                       : json_integer_value(v) < json_integer_value(min);
        else
            bad = excl ? d <= num_value(min) : d < num_value(min);
        if (bad) {
            format_limit(lim, sizeof lim, num_value(min), is_int);
            add_invalid(w, v, "%s in body should be greater than %s%s", cur_path(w),
                        excl ? "" : "or equal to ", lim);
        }
    }
    const json_t *max = json_object_get(s, "maximum");
    if (json_is_number(max)) {
        bool excl = sch_true(s, "exclusiveMaximum");
        bool bad;
        if (is_int && json_is_integer(max))
            bad = excl ? json_integer_value(v) >= json_integer_value(max)
                       : json_integer_value(v) > json_integer_value(max);
        else
            bad = excl ? d >= num_value(max) : d > num_value(max);
        if (bad) {
            format_limit(lim, sizeof lim, num_value(max), is_int);
            add_invalid(w, v, "%s in body should be less than %s%s", cur_path(w),
                        excl ? "" : "or equal to ", lim);
        }
    }
    /* int32 fields of built-in types: Go would fail to decode these. */
    const char *format = json_string_value(json_object_get(s, "format"));
    if (format && !strcmp(format, "int32") && is_integral(v) && (d < INT32_MIN || d > INT32_MAX)) {
        add_invalid(w, v, "%s in body should be %s", cur_path(w),
                    d < 0 ? "greater than or equal to -2147483648"
                          : "less than or equal to 2147483647");
    }
}

/* Entry of a list being checked for duplicates. */
typedef struct dup_entry {
    char *key;
    size_t idx;
} dup_entry;

static int dup_cmp(const void *a, const void *b)
{
    const dup_entry *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    if (c)
        return c;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int size_cmp(const void *a, const void *b)
{
    size_t x = *(const size_t *)a, y = *(const size_t *)b;
    return x < y ? -1 : x > y;
}

/* Finds, for each value that occurs more than once, the index of its
 * second occurrence (upstream reports that one). `keys[i]` are canonical
 * encodings. Fills out[] (sorted) and returns its length, or -1 on OOM. */
static long find_duplicates(char **keys, size_t n, size_t *out)
{
    dup_entry *e = malloc(n * sizeof *e);
    if (!e)
        return -1;
    for (size_t i = 0; i < n; i++)
        e[i] = (dup_entry){keys[i], i};
    qsort(e, n, sizeof *e, dup_cmp);
    size_t nout = 0;
    for (size_t i = 1; i < n; i++)
        if (!strcmp(e[i].key, e[i - 1].key) && (i < 2 || strcmp(e[i - 1].key, e[i - 2].key)))
            out[nout++] = e[i].idx;
    free(e);
    qsort(out, nout, sizeof *out, size_cmp);
    return (long)nout;
}

static void free_keys(char **keys, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(keys[i]);
    free(keys);
}

/* x-kubernetes-list-type: set and map uniqueness. */
static void validate_list_type(walk *w, const json_t *s, const json_t *v)
{
    const char *lt = json_string_value(json_object_get(s, "x-kubernetes-list-type"));
    if (!lt || (strcmp(lt, "set") && strcmp(lt, "map")))
        return;
    bool is_map = !strcmp(lt, "map");
    size_t n = json_array_size(v);
    if (is_map) {
        for (size_t i = 0; i < n; i++) {
            const json_t *e = json_array_get(v, i);
            if (!json_is_null(e) && !json_is_object(e)) {
                size_t old = path_push_index(w, i);
                add_invalid(w, e, "must be an object for an array of list-type map");
                path_pop(w, old);
                return;
            }
        }
    }
    if (n <= 1)
        return;
    const json_t *mkeys = json_object_get(s, "x-kubernetes-list-map-keys");
    char **keys = calloc(n, sizeof *keys);
    json_t **shown = calloc(n, sizeof *shown);
    size_t *dups = malloc(n * sizeof *dups);
    if (!keys || !shown || !dups) {
        w->oom = true;
        goto out;
    }
    for (size_t i = 0; i < n; i++) {
        const json_t *e = json_array_get(v, i);
        if (!is_map) {
            keys[i] = dump_canonical(e);
            shown[i] = json_incref((json_t *)e);
        } else {
            json_t *k = json_object();
            if (!k) {
                w->oom = true;
                goto out;
            }
            size_t j;
            const json_t *mk;
            json_array_foreach(mkeys, j, mk)
            {
                const json_t *kv = json_is_string(mk) && json_is_object(e)
                                       ? json_object_get(e, json_string_value(mk))
                                       : NULL;
                if (kv)
                    json_object_set(k, json_string_value(mk), (json_t *)kv);
            }
            keys[i] = dump_canonical(k);
            shown[i] = k;
        }
        if (!keys[i]) {
            w->oom = true;
            goto out;
        }
    }
    long nd = find_duplicates(keys, n, dups);
    if (nd < 0) {
        w->oom = true;
        goto out;
    }
    for (long i = 0; i < nd; i++) {
        size_t old = path_push_index(w, dups[i]);
        add_value_cause(w, CKUBE_CAUSE_FIELD_DUPLICATE, "Duplicate value", shown[dups[i]], NULL);
        path_pop(w, old);
    }
out:
    if (shown)
        for (size_t i = 0; i < n; i++)
            json_decref(shown[i]);
    free(shown);
    if (keys)
        free_keys(keys, n);
    free(dups);
}

static void validate_array(walk *w, const json_t *s, const json_t *v)
{
    size_t n = json_array_size(v);
    const json_t *mini = json_object_get(s, "minItems");
    const json_t *maxi = json_object_get(s, "maxItems");
    if (json_is_integer(mini) && (json_int_t)n < json_integer_value(mini)) {
        json_t *cnt = json_integer((json_int_t)n);
        add_invalid(w, cnt, "%s in body should have at least %" JSON_INTEGER_FORMAT " items",
                    cur_path(w), json_integer_value(mini));
        json_decref(cnt);
    }
    if (json_is_integer(maxi) && (json_int_t)n > json_integer_value(maxi)) {
        json_int_t m = json_integer_value(maxi);
        add_cause(w, "FieldValueTooMany", cur_path(w),
                  "Too many: %zu: must have at most %" JSON_INTEGER_FORMAT " %s", n, m,
                  m == 1 ? "item" : "items");
    }
    if (sch_true(s, "uniqueItems") && n > 1) {
        char **keys = calloc(n, sizeof *keys);
        size_t *dups = malloc(n * sizeof *dups);
        bool ok = keys && dups;
        for (size_t i = 0; ok && i < n; i++)
            ok = (keys[i] = dump_canonical(json_array_get(v, i))) != NULL;
        long nd = ok ? find_duplicates(keys, n, dups) : -1;
        if (nd < 0)
            w->oom = true;
        else if (nd > 0)
            add_invalid(w, NULL, "%s in body shouldn't contain duplicates", cur_path(w));
        if (keys)
            free_keys(keys, n);
        free(dups);
    }
    const json_t *items = sch_obj(s, "items");
    if (items) {
        for (size_t i = 0; i < n && !w->oom; i++) {
            size_t old = path_push_index(w, i);
            validate_node(w, items, json_array_get(v, i), CTX_NORMAL);
            path_pop(w, old);
        }
    }
    validate_list_type(w, s, v);
}

/* apiVersion/kind/metadata of a resource root or an embedded resource.
 * The root's apiVersion and kind are checked by the request handler. */
static void validate_resource_keys(walk *w, const json_t *v, bool embedded)
{
    static const char *const keys[] = {"apiVersion", "kind"};
    for (size_t i = 0; embedded && i < 2; i++) {
        const json_t *f = json_object_get(v, keys[i]);
        size_t old = path_push_key(w, keys[i]);
        if (!f) {
            add_cause(w, CKUBE_CAUSE_FIELD_REQUIRED, cur_path(w), "Required value");
        } else if (!json_is_string(f)) {
            add_invalid(w, f, "must be a string");
        } else if (json_string_length(f) == 0) {
            add_invalid(w, f, "must not be empty");
        }
        path_pop(w, old);
    }
    const json_t *md = json_object_get(v, "metadata");
    if (md && !json_is_object(md) && !json_is_null(md)) {
        size_t old = path_push_key(w, "metadata");
        add_type_invalid(w, "object", json_type_name(md));
        path_pop(w, old);
    }
}

static void validate_object(walk *w, const json_t *s, const json_t *v, int ctx)
{
    size_t nkeys = json_object_size(v);
    const json_t *minp = json_object_get(s, "minProperties");
    const json_t *maxp = json_object_get(s, "maxProperties");
    if (json_is_integer(minp) && (json_int_t)nkeys < json_integer_value(minp)) {
        json_t *cnt = json_integer((json_int_t)nkeys);
        add_invalid(w, cnt, "%s in body should have at least %" JSON_INTEGER_FORMAT " properties",
                    cur_path(w), json_integer_value(minp));
        json_decref(cnt);
        return;
    }
    if (json_is_integer(maxp) && (json_int_t)nkeys > json_integer_value(maxp)) {
        json_int_t m = json_integer_value(maxp);
        add_cause(w, "FieldValueTooMany", cur_path(w),
                  "Too many: %zu: must have at most %" JSON_INTEGER_FORMAT " %s", nkeys, m,
                  m == 1 ? "item" : "items");
        return;
    }
    const json_t *props = sch_obj(s, "properties");
    const json_t *addl = json_object_get(s, "additionalProperties");
    bool embedded = ctx != CTX_NORMAL || sch_true(s, "x-kubernetes-embedded-resource");
    const char *key;
    const json_t *child;
    json_object_foreach((json_t *)v, key, child)
    {
        if (ctx == CTX_ROOT && !strcmp(key, "metadata"))
            continue;
        const json_t *cs = props ? json_object_get(props, key) : NULL;
        if (!json_is_object(cs))
            cs = NULL;
        if (embedded && !cs && (is_resource_key(key) || !strcmp(key, "metadata")))
            continue;
        if (cs) {
            size_t old = path_push_key(w, key);
            validate_node(w, cs, child, CTX_NORMAL);
            path_pop(w, old);
        } else if (json_is_object(addl)) {
            size_t old = path_push_key(w, key);
            validate_node(w, addl, child, CTX_NORMAL);
            path_pop(w, old);
        } else if (json_is_false(addl)) {
            json_t *k = json_string(key);
            char *p = w->path.len ? strdup(cur_path(w)) : strdup("");
            if (!k || !p)
                w->oom = true;
            else
                add_invalid(w, k, "%s.%s in body is a forbidden property", p, key);
            free(p);
            json_decref(k);
        }
        if (w->oom)
            return;
    }
    const json_t *req = json_object_get(s, "required");
    size_t i;
    const json_t *r;
    json_array_foreach(req, i, r)
    {
        if (!json_is_string(r) || json_object_get(v, json_string_value(r)))
            continue;
        size_t old = path_push_key(w, json_string_value(r));
        add_cause(w, CKUBE_CAUSE_FIELD_REQUIRED, cur_path(w), "Required value");
        path_pop(w, old);
    }
    if (embedded)
        validate_resource_keys(w, v, ctx != CTX_ROOT);
}

/* Validates v against sub-schema `s` into a scratch status; returns the
 * number of causes. The caller may keep the scratch causes. */
static int validate_scratch(walk *w, const json_t *s, const json_t *v, ckube_status **out)
{
    ckube_status *scratch = ckube_status_new(422, CKUBE_REASON_INVALID, NULL);
    if (!scratch) {
        w->oom = true;
        return 0;
    }
    ckube_status *saved_st = w->st;
    int saved_n = w->ncauses;
    w->st = scratch;
    w->ncauses = 0;
    validate_node(w, s, v, CTX_NORMAL);
    int n = w->ncauses;
    w->st = saved_st;
    w->ncauses = saved_n;
    if (out)
        *out = scratch;
    else
        ckube_status_free(scratch);
    return n;
}

static void merge_causes(walk *w, const ckube_status *from)
{
    if (!from)
        return;
    for (size_t i = 0; i < from->ncauses; i++) {
        w->ncauses++;
        if (w->st)
            ckube_status_add_cause(w->st, from->causes[i].type, from->causes[i].field, "%s",
                                   from->causes[i].message ? from->causes[i].message : "");
    }
}

/* A composite failure (anyOf & co.): upstream reports it without a field. */
static void add_composite(walk *w, const char *fmt, const char *extra)
{
    char *q = schema_go_quote(cur_path(w));
    if (!q) {
        w->oom = true;
        return;
    }
    char *detail = NULL;
    if (asprintf(&detail, fmt, q, extra) < 0) {
        w->oom = true;
    } else {
        add_cause(w, CKUBE_CAUSE_FIELD_INVALID, "", "Invalid value: \"\": %s", detail);
        free(detail);
    }
    free(q);
}

static void validate_combinators(walk *w, const json_t *s, const json_t *v)
{
    const json_t *anyof = json_object_get(s, "anyOf");
    if (json_is_array(anyof) && json_array_size(anyof)) {
        ckube_status *best = NULL;
        int best_n = INT_MAX;
        bool ok = false;
        size_t i;
        const json_t *sub;
        json_array_foreach(anyof, i, sub)
        {
            ckube_status *res = NULL;
            int n = validate_scratch(w, sub, v, &res);
            if (n == 0) {
                ok = true;
                ckube_status_free(res);
                break;
            }
            if (n < best_n) {
                ckube_status_free(best);
                best = res;
                best_n = n;
            } else {
                ckube_status_free(res);
            }
        }
        if (!ok) {
            add_composite(w, "%s must validate at least one schema (anyOf)%s", "");
            merge_causes(w, best);
        }
        ckube_status_free(best);
    }
    const json_t *oneof = json_object_get(s, "oneOf");
    if (json_is_array(oneof) && json_array_size(oneof)) {
        ckube_status *best = NULL;
        int best_n = INT_MAX, valid = 0;
        size_t i;
        const json_t *sub;
        json_array_foreach(oneof, i, sub)
        {
            ckube_status *res = NULL;
            int n = validate_scratch(w, sub, v, &res);
            if (n == 0) {
                valid++;
                ckube_status_free(res);
            } else if (valid == 0 && n < best_n) {
                ckube_status_free(best);
                best = res;
                best_n = n;
            } else {
                ckube_status_free(res);
            }
        }
        if (valid != 1) {
            char extra[64];
            if (valid == 0)
                snprintf(extra, sizeof extra, "Found none valid");
            else
                snprintf(extra, sizeof extra, "Found %d valid alternatives", valid);
            add_composite(w, "%s must validate one and only one schema (oneOf). %s", extra);
            if (valid == 0)
                merge_causes(w, best);
        }
        ckube_status_free(best);
    }
    const json_t *allof = json_object_get(s, "allOf");
    if (json_is_array(allof) && json_array_size(allof)) {
        size_t valid = 0, i;
        const json_t *sub;
        json_array_foreach(allof, i, sub)
        {
            ckube_status *res = NULL;
            int n = validate_scratch(w, sub, v, &res);
            if (n == 0)
                valid++;
            merge_causes(w, res);
            ckube_status_free(res);
        }
        if (valid != json_array_size(allof))
            add_composite(w, "%s must validate all the schemas (allOf)%s",
                          valid == 0 ? ". None validated" : "");
    }
    const json_t *notv = sch_obj(s, "not");
    if (notv && validate_scratch(w, notv, v, NULL) == 0)
        add_composite(w, "%s must not validate the schema (not)%s", "");
}

static bool enum_contains(const json_t *en, const json_t *v)
{
    size_t i;
    const json_t *e;
    json_array_foreach(en, i, e)
    {
        if (json_is_number(e) && json_is_number(v)) {
            if (num_value(e) == num_value(v))
                return true;
        } else if (json_equal((json_t *)e, (json_t *)v)) {
            return true;
        }
    }
    return false;
}

static void validate_enum(walk *w, const json_t *en, const json_t *v)
{
    ckube__strbuf b = {0};
    ckube__sb_add(&b, "supported values: ");
    size_t i;
    const json_t *e;
    json_array_foreach(en, i, e)
    {
        char *text = json_is_string(e) ? strdup(json_string_value(e)) : dump_canonical(e);
        char *q = text ? schema_go_quote(text) : NULL;
        if (!q)
            b.oom = true;
        else {
            if (i)
                ckube__sb_add(&b, ", ");
            ckube__sb_add(&b, q);
        }
        free(q);
        free(text);
    }
    char *detail = ckube__sb_take(&b);
    if (!detail) {
        w->oom = true;
        return;
    }
    add_value_cause(w, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, "Unsupported value", v,
                    json_array_size(en) ? detail : NULL);
    free(detail);
}

static void validate_node(walk *w, const json_t *s, const json_t *v, int ctx)
{
    if (!json_is_object(s) || !v || w->oom)
        return;
    if (++w->depth > MAX_DEPTH) {
        w->depth--;
        return;
    }
    const json_t *type = json_object_get(s, "type");
    bool ios = sch_true(s, "x-kubernetes-int-or-string");
    bool typed = ios || has_type(type);
    const json_t *en = json_object_get(s, "enum");
    bool has_enum = json_is_array(en) && json_array_size(en) > 0;

    if (json_is_null(v)) {
        bool contains_null = false;
        if (type)
            type_matches(type, v, &contains_null);
        if (typed && !contains_null && !sch_true(s, "nullable")) {
            char *label = type_label(type, ios);
            if (!label)
                w->oom = true;
            else
                add_type_invalid(w, label, "null");
            free(label);
        } else if (has_enum && !enum_contains(en, v))
            validate_enum(w, en, v);
        goto out;
    }
    if (typed) {
        bool contains_null;
        bool ok =
            ios ? (json_is_string(v) || is_integral(v)) : type_matches(type, v, &contains_null);
        if (!ok) {
            char *label = type_label(type, ios);
            if (!label)
                w->oom = true;
            else
                add_type_invalid(w, label, json_type_name(v));
            free(label);
            goto out;
        }
    }
    validate_combinators(w, s, v);
    if (json_is_string(v))
        validate_string(w, s, v);
    else if (json_is_number(v))
        validate_number(w, s, v);
    else if (json_is_array(v))
        validate_array(w, s, v);
    if (has_enum && !enum_contains(en, v))
        validate_enum(w, en, v);
    if (json_is_object(v))
        validate_object(w, s, v, ctx);
out:
    w->depth--;
}

/* ---------------------------------------------------------------- API */

int schema_apply(const json_t *schema, json_t *obj, unsigned flags, ckube_status *invalid,
                 char ***unknown_fields, size_t *nunknown)
{
    if (unknown_fields)
        *unknown_fields = NULL;
    if (nunknown)
        *nunknown = 0;
    if (!json_is_object(schema) || !obj)
        return 0;
    walk w = {.flags = flags, .st = invalid, .collect_unknown = unknown_fields != NULL};
    if (flags & (SCHEMA_PRUNE | SCHEMA_DEFAULT | SCHEMA_OMITEMPTY) || unknown_fields)
        prune_node(&w, schema, obj, CTX_ROOT);
    if (!w.oom && (flags & SCHEMA_VALIDATE)) {
        path_pop(&w, 0);
        validate_node(&w, schema, obj, CTX_ROOT);
    }
    free(w.path.s);
    if (w.oom || w.path.oom) {
        schema_free_paths(w.unknown, w.nunknown);
        return -1;
    }
    if (unknown_fields) {
        *unknown_fields = w.unknown;
        if (nunknown)
            *nunknown = w.nunknown;
    } else {
        schema_free_paths(w.unknown, w.nunknown);
    }
    return w.ncauses;
}

int schema_validate_at(const json_t *schema, const json_t *value, const char *path,
                       ckube_status *invalid)
{
    if (!json_is_object(schema) || !value)
        return 0;
    walk w = {.flags = SCHEMA_VALIDATE, .st = invalid};
    if (path && *path)
        path_push_key(&w, path);
    validate_node(&w, schema, value, CTX_NORMAL);
    free(w.path.s);
    return w.oom || w.path.oom ? -1 : w.ncauses;
}

void schema_free_paths(char **paths, size_t n)
{
    if (!paths)
        return;
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}
