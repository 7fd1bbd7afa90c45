/* The schema engine (internal.h): values and limits as kube-openapi words them in messages. */
#include "apiserver/apiextensions/schema/internal.h"
#include "ckube/validation.h"
#include "common/xalloc.h"

size_t sch_utf8_len(const char *s, size_t n)
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

char *sch_dump_canonical(const json_t *v)
{
    return json_dumps(v, JSON_ENCODE_ANY | JSON_COMPACT | JSON_SORT_KEYS);
}

char *schema_format_value(const json_t *v)
{
    char buf[64];
    switch (json_typeof(v)) {
    case JSON_STRING:
        return ckube_go_quote(json_string_value(v));
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return xstrdup(buf);
    case JSON_REAL:
        go_float(buf, sizeof buf, json_real_value(v));
        return xstrdup(buf);
    case JSON_TRUE:
        return xstrdup("true");
    case JSON_FALSE:
        return xstrdup("false");
    case JSON_NULL:
        return xstrdup("null");
    default:
        return sch_dump_canonical(v);
    }
}

void sch_format_limit(char *out, size_t n, double limit, bool data_is_int)
{
    if (data_is_int && limit == floor(limit) && fabs(limit) < 9.2e18)
        snprintf(out, n, "%lld", (long long)limit);
    else
        go_float(out, n, limit);
}
