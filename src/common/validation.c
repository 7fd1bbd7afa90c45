/* Name, label and annotation validation; see ckube/validation.h.
 *
 * The regular expressions upstream uses are simple enough to check by hand
 * (no regex engine): each is_*_fmt() below states the pattern it implements.
 * Messages are assembled from the same pieces upstream uses (RegexError,
 * MaxLenError, ...) so that they match byte for byte.
 */
#include "ckube/validation.h"

#include <ctype.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "common/text.h"
#include "common/utf8.h"

/* ------------------------------------------------------------------------ */
/* Message lists: one check reports at most a handful of problems.           */

#define MSGS_MAX 8

typedef struct msgs {
    char *v[MSGS_MAX]; /* owned */
    size_t n;
} msgs;

static void msgs_addf(msgs *m, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void msgs_addf(msgs *m, const char *fmt, ...)
{
    if (m->n >= MSGS_MAX)
        return;
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    if (vasprintf(&s, fmt, ap) >= 0)
        m->v[m->n++] = s;
    va_end(ap);
}

static void msgs_free(msgs *m)
{
    for (size_t i = 0; i < m->n; i++)
        free(m->v[i]);
    m->n = 0;
}

/* Joins with "; " and frees the list; NULL when empty. */
static char *msgs_join(msgs *m)
{
    if (m->n == 0)
        return NULL;
    size_t len = 0;
    for (size_t i = 0; i < m->n; i++)
        len += strlen(m->v[i]) + 2;
    char *out = malloc(len + 1);
    if (out) {
        char *p = out;
        for (size_t i = 0; i < m->n; i++) {
            if (i) {
                memcpy(p, "; ", 2);
                p += 2;
            }
            size_t l = strlen(m->v[i]);
            memcpy(p, m->v[i], l);
            p += l;
        }
        *p = 0;
    }
    msgs_free(m);
    return out;
}

/* ------------------------------------------------------------------------ */
/* Upstream's message building blocks.                                      */

#define DNS1123_LABEL_FMT "[a-z0-9]([-a-z0-9]*[a-z0-9])?"
#define DNS1123_LABEL_MSG                                                                          \
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and "   \
    "must start and end with an alphanumeric character"
#define DNS1123_SUBDOMAIN_FMT DNS1123_LABEL_FMT "(\\." DNS1123_LABEL_FMT ")*"
#define DNS1123_SUBDOMAIN_MSG                                                                      \
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or "   \
    "'.', and must start and end with an alphanumeric character"
#define DNS1035_LABEL_FMT "[a-z]([-a-z0-9]*[a-z0-9])?"
#define DNS1035_LABEL_MSG                                                                          \
    "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start with an "   \
    "alphabetic character, and end with an alphanumeric character"
#define QNAME_FMT "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
#define QNAME_MSG                                                                                  \
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "    \
    "alphanumeric character"
#define LABEL_VALUE_FMT "(" QNAME_FMT ")?"
#define LABEL_VALUE_MSG                                                                            \
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or "    \
    "'.', and must start and end with an alphanumeric character"

/* RegexError(msg, fmt, examples...): "msg (e.g. 'a',  or 'b', regex used for
 * validation is 'fmt')". The odd double space is upstream's. */
static void add_regex_error(msgs *m, const char *prefix, const char *msg, const char *fmt,
                            const char *const *examples)
{
    char ex[256] = "";
    size_t off = 0;
    for (size_t i = 0; examples && examples[i]; i++)
        off +=
            (size_t)snprintf(ex + off, sizeof ex - off, "%s'%s', ", i ? " or " : "", examples[i]);
    if (off)
        msgs_addf(m, "%s%s (e.g. %sregex used for validation is '%s')", prefix, msg, ex, fmt);
    else
        msgs_addf(m, "%s%s (regex used for validation is '%s')", prefix, msg, fmt);
}

static void add_max_len_error(msgs *m, const char *prefix, size_t max)
{
    msgs_addf(m, "%smust be no more than %zu characters", prefix, max);
}

/* ------------------------------------------------------------------------ */
/* Pattern matchers.                                                        */

static bool is_lower_alnum(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
}

static bool is_alnum(char c)
{
    return is_lower_alnum(c) || (c >= 'A' && c <= 'Z');
}

/* [a-z0-9]([-a-z0-9]*[a-z0-9])? over s[0..n) */
static bool is_dns1123_label_fmt(const char *s, size_t n)
{
    if (n == 0 || !is_lower_alnum(s[0]) || !is_lower_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_lower_alnum(s[i]) && s[i] != '-')
            return false;
    return true;
}

/* label(\.label)* */
static bool is_dns1123_subdomain_fmt(const char *s, size_t n)
{
    size_t start = 0;
    for (size_t i = 0; i <= n; i++) {
        if (i == n || s[i] == '.') {
            if (!is_dns1123_label_fmt(s + start, i - start))
                return false;
            start = i + 1;
        }
    }
    return true;
}

/* [a-z]([-a-z0-9]*[a-z0-9])? */
static bool is_dns1035_label_fmt(const char *s, size_t n)
{
    return n > 0 && s[0] >= 'a' && s[0] <= 'z' && is_dns1123_label_fmt(s, n);
}

/* ([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9] */
static bool is_qname_fmt(const char *s, size_t n)
{
    if (n == 0 || !is_alnum(s[0]) || !is_alnum(s[n - 1]))
        return false;
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && s[i] != '-' && s[i] != '_' && s[i] != '.')
            return false;
    return true;
}

/* ------------------------------------------------------------------------ */
/* Checks producing message lists.                                          */

static const char *const EX_SUBDOMAIN[] = {"example.com", NULL};
static const char *const EX_1123_LABEL[] = {"my-name", "123-abc", NULL};
static const char *const EX_1035_LABEL[] = {"my-name", "abc-123", NULL};
static const char *const EX_QNAME[] = {"MyName", "my.name", "123-abc", NULL};
static const char *const EX_LABEL_VALUE[] = {"MyValue", "my_value", "12345", NULL};

static void check_dns1123_subdomain(msgs *m, const char *prefix, const char *v, size_t n)
{
    if (n > CKUBE_DNS1123_SUBDOMAIN_MAX)
        add_max_len_error(m, prefix, CKUBE_DNS1123_SUBDOMAIN_MAX);
    if (!is_dns1123_subdomain_fmt(v, n))
        add_regex_error(m, prefix, DNS1123_SUBDOMAIN_MSG, DNS1123_SUBDOMAIN_FMT, EX_SUBDOMAIN);
}

static void check_dns1123_label(msgs *m, const char *v, size_t n)
{
    if (n > CKUBE_DNS1123_LABEL_MAX)
        add_max_len_error(m, "", CKUBE_DNS1123_LABEL_MAX);
    if (!is_dns1123_label_fmt(v, n)) {
        /* A valid subdomain that is not a label can only have dots. */
        if (is_dns1123_subdomain_fmt(v, n))
            msgs_addf(m, "must not contain dots");
        else
            add_regex_error(m, "", DNS1123_LABEL_MSG, DNS1123_LABEL_FMT, EX_1123_LABEL);
    }
}

static void check_dns1035_label(msgs *m, const char *v, size_t n)
{
    if (n > CKUBE_DNS1035_LABEL_MAX)
        add_max_len_error(m, "", CKUBE_DNS1035_LABEL_MAX);
    if (!is_dns1035_label_fmt(v, n))
        add_regex_error(m, "", DNS1035_LABEL_MSG, DNS1035_LABEL_FMT, EX_1035_LABEL);
}

static void check_path_segment(msgs *m, const char *v, bool prefix)
{
    if (!prefix) {
        if (strcmp(v, ".") == 0 || strcmp(v, "..") == 0) {
            msgs_addf(m, "may not be '%s'", v);
            return;
        }
    }
    if (strchr(v, '/'))
        msgs_addf(m, "may not contain '/'");
    if (strchr(v, '%'))
        msgs_addf(m, "may not contain '%%'");
}

/* IsQualifiedName: [prefix '/'] name. */
static void check_qualified_name(msgs *m, const char *v)
{
    const char *slash = strchr(v, '/');
    const char *name = v;
    if (slash && strchr(slash + 1, '/')) {
        char inner[512];
        msgs tmp = {0};
        add_regex_error(&tmp, "", QNAME_MSG, QNAME_FMT, EX_QNAME);
        snprintf(inner, sizeof inner, "%s", tmp.n ? tmp.v[0] : "");
        msgs_free(&tmp);
        msgs_addf(m,
                  "a qualified name %s with an optional DNS subdomain prefix and '/' (e.g. "
                  "'example.com/MyName')",
                  inner);
        return;
    }
    if (slash) {
        size_t plen = (size_t)(slash - v);
        if (plen == 0)
            msgs_addf(m, "prefix part must be non-empty");
        else
            check_dns1123_subdomain(m, "prefix part ", v, plen);
        name = slash + 1;
    }
    size_t n = strlen(name);
    if (n == 0)
        msgs_addf(m, "name part must be non-empty");
    else if (n > CKUBE_QUALIFIED_NAME_MAX)
        add_max_len_error(m, "name part ", CKUBE_QUALIFIED_NAME_MAX);
    if (!is_qname_fmt(name, n))
        add_regex_error(m, "name part ", QNAME_MSG, QNAME_FMT, EX_QNAME);
}

static void check_label_value(msgs *m, const char *v)
{
    size_t n = strlen(v);
    if (n > CKUBE_LABEL_VALUE_MAX)
        add_max_len_error(m, "", CKUBE_LABEL_VALUE_MAX);
    if (n > 0 && !is_qname_fmt(v, n))
        add_regex_error(m, "", LABEL_VALUE_MSG, LABEL_VALUE_FMT, EX_LABEL_VALUE);
}

/* nameFn(name, prefix): for a generateName a trailing '-' is replaced the
 * way upstream's maskTrailingDash does (drop two characters, append 'a'). */
static void check_name(msgs *m, int kind, const char *name, bool prefix)
{
    if (kind == CKUBE_NAME_PATH_SEGMENT) {
        check_path_segment(m, name, prefix);
        return;
    }
    size_t n = strlen(name);
    char *masked = NULL;
    if (prefix && n > 1 && name[n - 1] == '-') {
        masked = malloc(n);
        if (!masked) {
            msgs_addf(m, "out of memory");
            return;
        }
        memcpy(masked, name, n - 2);
        masked[n - 2] = 'a';
        masked[n - 1] = 0;
        name = masked;
        n--;
    }
    switch (kind) {
    case CKUBE_NAME_DNS1123_LABEL:
        check_dns1123_label(m, name, n);
        break;
    case CKUBE_NAME_DNS1035_LABEL:
        check_dns1035_label(m, name, n);
        break;
    default:
        check_dns1123_subdomain(m, "", name, n);
        break;
    }
    free(masked);
}

/* ------------------------------------------------------------------------ */
/* Public single-value checks.                                              */

char *ckube_is_dns1123_subdomain(const char *value)
{
    msgs m = {0};
    check_dns1123_subdomain(&m, "", value, strlen(value));
    return msgs_join(&m);
}

char *ckube_is_dns1123_label(const char *value)
{
    msgs m = {0};
    check_dns1123_label(&m, value, strlen(value));
    return msgs_join(&m);
}

char *ckube_is_dns1035_label(const char *value)
{
    msgs m = {0};
    check_dns1035_label(&m, value, strlen(value));
    return msgs_join(&m);
}

char *ckube_is_path_segment_name(const char *value, bool prefix)
{
    msgs m = {0};
    check_path_segment(&m, value, prefix);
    return msgs_join(&m);
}

char *ckube_is_qualified_name(const char *value)
{
    msgs m = {0};
    check_qualified_name(&m, value);
    return msgs_join(&m);
}

char *ckube_is_label_value(const char *value)
{
    msgs m = {0};
    check_label_value(&m, value);
    return msgs_join(&m);
}

char *ckube_validate_name(int kind, const char *name, bool prefix)
{
    msgs m = {0};
    check_name(&m, kind, name, prefix);
    return msgs_join(&m);
}

/* ------------------------------------------------------------------------ */
/* Go's strconv.Quote.                                                      */

/* An approximation of Go's unicode.IsPrint for non-ASCII runes: the
 * control, format, separator and private-use ranges are not printable. */
static bool rune_is_print(uint32_t r)
{
    if (r < 0xa1 || r == 0xad)
        return false;
    if ((r >= 0x2000 && r <= 0x200f) || (r >= 0x2028 && r <= 0x202f) ||
        (r >= 0x205f && r <= 0x206f) || r == 0x3000 || r == 0xfeff ||
        (r >= 0xfff9 && r <= 0xfffb) || (r >= 0xe000 && r <= 0xf8ff) || r >= 0xf0000 ||
        (r & 0xfffe) == 0xfffe)
        return false;
    return true;
}

char *ckube_go_quote(const char *s)
{
    ckube__strbuf b = {0};
    const unsigned char *p = (const unsigned char *)s;
    char tmp[16];
    ckube__sb_addn(&b, "\"", 1);
    while (*p) {
        uint32_t r;
        /* NUL-terminated: the terminator is never a continuation byte, so
         * the decoder stops there whatever length it is told. */
        size_t n = ckube__utf8_decode(p, 4, &r);
        if (n == 0) {
            snprintf(tmp, sizeof tmp, "\\x%02x", *p);
            ckube__sb_add(&b, tmp);
            p++;
            continue;
        }
        if (n == 1) {
            char c = (char)r;
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
                if (r < 0x20 || r == 0x7f) {
                    snprintf(tmp, sizeof tmp, "\\x%02x", (unsigned)r);
                    ckube__sb_add(&b, tmp);
                } else {
                    ckube__sb_addn(&b, &c, 1);
                }
            }
        } else if (rune_is_print(r)) {
            ckube__sb_addn(&b, (const char *)p, n);
        } else if (r < 0x10000) {
            snprintf(tmp, sizeof tmp, "\\u%04x", (unsigned)r);
            ckube__sb_add(&b, tmp);
        } else {
            snprintf(tmp, sizeof tmp, "\\U%08x", (unsigned)r);
            ckube__sb_add(&b, tmp);
        }
        p += n;
    }
    ckube__sb_addn(&b, "\"", 1);
    return ckube__sb_take(&b);
}

/* ------------------------------------------------------------------------ */
/* Field errors.                                                            */

void ckube_field_invalid(ckube_status *st, const char *field, const char *value, const char *detail)
{
    char *q = ckube_go_quote(value ? value : "");
    if (detail && *detail)
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field, "Invalid value: %s: %s",
                               q ? q : "\"\"", detail);
    else
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field, "Invalid value: %s",
                               q ? q : "\"\"");
    free(q);
}

void ckube_field_invalid_int(ckube_status *st, const char *field, int64_t value, const char *detail)
{
    if (detail && *detail)
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field,
                               "Invalid value: %" PRId64 ": %s", value, detail);
    else
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field, "Invalid value: %" PRId64,
                               value);
}

void ckube_field_required(ckube_status *st, const char *field, const char *detail)
{
    if (detail && *detail)
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field, "Required value: %s", detail);
    else
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_REQUIRED, field, "Required value");
}

void ckube_field_forbidden(ckube_status *st, const char *field, const char *detail)
{
    if (detail && *detail)
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_FORBIDDEN, field, "Forbidden: %s", detail);
    else
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_FORBIDDEN, field, "Forbidden");
}

void ckube_field_too_long(ckube_status *st, const char *field, long max_bytes)
{
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_TOO_LONG, field,
                           "Too long: may not be more than %ld %s", max_bytes,
                           max_bytes == 1 ? "byte" : "bytes");
}

/* One Invalid cause per message, each with the same bad value. */
static void add_invalid_each(ckube_status *st, const char *field, const char *value, msgs *m)
{
    for (size_t i = 0; i < m->n; i++)
        ckube_field_invalid(st, field, value, m->v[i]);
    msgs_free(m);
}

/* ------------------------------------------------------------------------ */
/* Metadata validation.                                                     */

void ckube_validate_name_field(ckube_status *st, const char *field, const char *name, int kind,
                               bool prefix)
{
    msgs m = {0};
    check_name(&m, kind, name, prefix);
    add_invalid_each(st, field, name, &m);
}

void ckube_validate_labels(const json_t *labels, const char *field, ckube_status *st)
{
    if (!json_is_object(labels))
        return;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)labels, k, v)
    {
        msgs m = {0};
        check_qualified_name(&m, k);
        add_invalid_each(st, field, k, &m);
        const char *sv = json_string_value(v);
        if (!sv)
            continue;
        check_label_value(&m, sv);
        add_invalid_each(st, field, sv, &m);
    }
}

size_t ckube_validate_label_selector(const json_t *sel, const char *path, bool allow_invalid_values,
                                     ckube_status *st)
{
    size_t before = st->ncauses + st->ncauses_dropped;
    if (!json_is_object(sel))
        return 0;
    char field[320];
    snprintf(field, sizeof field, "%s.matchLabels", path);
    ckube_validate_labels(json_object_get(sel, "matchLabels"), field, st);
    size_t i, j;
    json_t *expr, *v;
    json_array_foreach(json_object_get(sel, "matchExpressions"), i, expr)
    {
        const char *op = json_string_value(json_object_get(expr, "operator"));
        op = op ? op : "";
        size_t nvalues = json_array_size(json_object_get(expr, "values"));
        if (!strcmp(op, "In") || !strcmp(op, "NotIn")) {
            if (!nvalues) {
                snprintf(field, sizeof field, "%s.matchExpressions[%zu].values", path, i);
                ckube_field_required(st, field,
                                     "must be specified when `operator` is 'In' or 'NotIn'");
            }
        } else if (!strcmp(op, "Exists") || !strcmp(op, "DoesNotExist")) {
            if (nvalues) {
                snprintf(field, sizeof field, "%s.matchExpressions[%zu].values", path, i);
                ckube_field_forbidden(
                    st, field,
                    "may not be specified when `operator` is 'Exists' or 'DoesNotExist'");
            }
        } else {
            snprintf(field, sizeof field, "%s.matchExpressions[%zu].operator", path, i);
            ckube_field_invalid(st, field, op, "not a valid selector operator");
        }
        const char *key = json_string_value(json_object_get(expr, "key"));
        key = key ? key : "";
        snprintf(field, sizeof field, "%s.matchExpressions[%zu].key", path, i);
        msgs m = {0};
        check_qualified_name(&m, key);
        add_invalid_each(st, field, key, &m);
        if (allow_invalid_values)
            continue;
        json_array_foreach(json_object_get(expr, "values"), j, v)
        {
            const char *val = json_string_value(v);
            val = val ? val : "";
            snprintf(field, sizeof field, "%s.matchExpressions[%zu].values[%zu]", path, i, j);
            check_label_value(&m, val);
            add_invalid_each(st, field, val, &m);
        }
    }
    return st->ncauses + st->ncauses_dropped - before;
}

void ckube_validate_annotations(const json_t *annotations, const char *field, ckube_status *st)
{
    if (!json_is_object(annotations))
        return;
    const char *k;
    json_t *v;
    uint64_t total = 0;
    json_object_foreach((json_t *)annotations, k, v)
    {
        /* Upstream checks the lower-cased key but reports the original. */
        char *lower = strdup(k);
        if (lower) {
            for (char *c = lower; *c; c++)
                *c = (char)tolower((unsigned char)*c);
            msgs m = {0};
            check_qualified_name(&m, lower);
            add_invalid_each(st, field, k, &m);
            free(lower);
        }
        total += strlen(k);
        if (json_is_string(v))
            total += json_string_length(v);
    }
    if (total > CKUBE_ANNOTATIONS_SIZE_MAX)
        ckube_field_too_long(st, field, CKUBE_ANNOTATIONS_SIZE_MAX);
}

static const char *meta_str(const json_t *meta, const char *key)
{
    const char *s = json_string_value(json_object_get(meta, key));
    return s ? s : "";
}

/* `Invalid value: <compact JSON of v>: <detail>`, for the list- and
 * object-valued errors (upstream prints Go's %#v of the value there). */
static void field_invalid_json(ckube_status *st, const char *field, const json_t *v,
                               const char *detail)
{
    char *text = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field, "Invalid value: %s: %s",
                           text ? text : "null", detail);
    free(text);
}

/* The version of an apiVersion ("v1", "apps/v1"), "" when it has none or
 * more than one '/' (upstream's ParseGroupVersion then fails). */
static const char *api_version_version(const char *av)
{
    const char *slash = strchr(av, '/');
    if (!slash)
        return av;
    return strchr(slash + 1, '/') ? "" : slash + 1;
}

void ckube_validate_owner_references(const json_t *refs, const char *field, ckube_status *st)
{
    if (!json_is_array(refs))
        return;
    char sub[256];
    const char *controller = NULL;
    size_t i;
    const json_t *r;
    json_array_foreach(refs, i, r)
    {
        /* Upstream names the fields without the list index. */
        const char *av = meta_str(r, "apiVersion"), *kind = meta_str(r, "kind");
        const char *name = meta_str(r, "name"), *uid = meta_str(r, "uid");
        static const char *const what[] = {"apiVersion", "kind", "name", "uid"};
        static const char *const msg[] = {"version must not be empty", "kind must not be empty",
                                          "name must not be empty", "uid must not be empty"};
        const char *val[] = {av, kind, name, uid};
        const char *check[] = {api_version_version(av), kind, name, uid};
        for (size_t k = 0; k < 4; k++) {
            if (*check[k])
                continue;
            snprintf(sub, sizeof sub, "%s.%s", field, what[k]);
            ckube_field_invalid(st, sub, val[k], msg[k]);
        }
        /* Events cannot own anything (upstream's BannedOwners). */
        if (!strcmp(av, "v1") && !strcmp(kind, "Event"))
            field_invalid_json(st, field, r, "/v1, Kind=Event is disallowed from being an owner");
        if (json_is_true(json_object_get(r, "controller"))) {
            if (controller) {
                char detail[600];
                snprintf(detail, sizeof detail,
                         "Only one reference can have Controller set to true. Found \"true\" in "
                         "references for %s and %s",
                         controller, name);
                field_invalid_json(st, field, refs, detail);
            } else {
                controller = name;
            }
        }
    }
}

void ckube_validate_finalizers(const json_t *finalizers, const char *field, ckube_status *st)
{
    if (!json_is_array(finalizers))
        return;
    bool orphan = false, foreground = false;
    size_t i;
    const json_t *f;
    json_array_foreach(finalizers, i, f)
    {
        const char *v = json_string_value(f);
        if (!v)
            continue; /* a decoding concern */
        msgs m = {0};
        check_qualified_name(&m, v);
        add_invalid_each(st, field, v, &m);
        orphan = orphan || !strcmp(v, "orphan");
        foreground = foreground || !strcmp(v, "foregroundDeletion");
    }
    if (orphan && foreground)
        field_invalid_json(st, field, finalizers,
                           "finalizer orphan and foregroundDeletion cannot be both set");
}

void ckube_validate_object_meta(const json_t *obj, bool namespaced, int name_kind, ckube_status *st)
{
    const json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta))
        meta = NULL;
    const char *name = meta_str(meta, "name");
    const char *gen = meta_str(meta, "generateName");
    const char *ns = meta_str(meta, "namespace");

    if (*gen)
        ckube_validate_name_field(st, "metadata.generateName", gen, name_kind, true);
    if (*name)
        ckube_validate_name_field(st, "metadata.name", name, name_kind, false);
    else if (!*gen)
        ckube_field_required(st, "metadata.name", "name or generateName is required");

    if (namespaced) {
        if (!*ns)
            ckube_field_required(st, "metadata.namespace", NULL);
        else
            ckube_validate_name_field(st, "metadata.namespace", ns, CKUBE_NAME_DNS1123_LABEL,
                                      false);
    } else if (*ns) {
        ckube_field_forbidden(st, "metadata.namespace", "not allowed on this type");
    }

    json_t *g = json_object_get(meta, "generation");
    if (json_is_integer(g) && json_integer_value(g) < 0)
        ckube_field_invalid_int(st, "metadata.generation", (int64_t)json_integer_value(g),
                                "must be greater than or equal to 0");

    ckube_validate_labels(json_object_get(meta, "labels"), "metadata.labels", st);
    ckube_validate_annotations(json_object_get(meta, "annotations"), "metadata.annotations", st);
    ckube_validate_owner_references(json_object_get(meta, "ownerReferences"),
                                    "metadata.ownerReferences", st);
    ckube_validate_finalizers(json_object_get(meta, "finalizers"), "metadata.finalizers", st);
}
