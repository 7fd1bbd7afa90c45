/* The values ckube-gen keeps as strings, read (ckube/typed.h): Quantity
 * and date-time. */
#include "ckube/json.h"
#include "ckube/typed.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

typedef __int128 wide;

/* The suffix's scale: a power of ten (*exp10) or of two (*exp2). false
 * when it is no suffix. */
static bool suffix_scale(const char *s, int *exp10, int *exp2)
{
    static const struct {
        const char *name;
        int e10, e2;
    } suffixes[] = {
        {"", 0, 0},    {"n", -9, 0},  {"u", -6, 0},  {"m", -3, 0},  {"k", 3, 0},   {"M", 6, 0},
        {"G", 9, 0},   {"T", 12, 0},  {"P", 15, 0},  {"E", 18, 0},  {"Ki", 0, 10}, {"Mi", 0, 20},
        {"Gi", 0, 30}, {"Ti", 0, 40}, {"Pi", 0, 50}, {"Ei", 0, 60},
    };
    for (size_t i = 0; i < sizeof suffixes / sizeof *suffixes; i++) {
        if (!strcmp(s, suffixes[i].name)) {
            *exp10 = suffixes[i].e10;
            *exp2 = suffixes[i].e2;
            return true;
        }
    }
    if (*s != 'e' && *s != 'E') /* a decimal exponent: e3, E-2, e+6 */
        return false;
    const char *p = s + 1;
    if (*p == '+' || *p == '-')
        p++;
    if (!isdigit((unsigned char)*p) || strlen(p) > 4)
        return false;
    for (const char *q = p; *q; q++)
        if (!isdigit((unsigned char)*q))
            return false;
    *exp10 = atoi(s + 1);
    *exp2 = 0;
    return true;
}

/* s * 10^scale10 (scale10 is 3 for milli-units), rounded away from zero. */
static int quantity_scaled(const char *s, int scale10, int64_t *out)
{
    if (!s || !*s)
        return -1;
    const char *p = s;
    bool neg = false;
    if (*p == '+' || *p == '-')
        neg = *p++ == '-';
    /* At most 19 significant digits (an int64's precision; zeros past them
     * are dropped, anything else is refused): mant < 10^19 < 2^64, so the
     * binary suffix's shift (at most 60) stays within 127 bits. */
    wide mant = 0;
    int frac = 0, digits = 0, seen = 0, dropped = 0;
    bool dot = false;
    for (; *p == '.' || isdigit((unsigned char)*p); p++) {
        if (*p == '.') {
            if (dot)
                return -1;
            dot = true;
            continue;
        }
        seen++;
        if (mant == 0 && *p == '0') {
            frac += dot; /* (a zero after the point still scales) */
            continue;
        }
        if (digits == 19) {
            if (*p != '0')
                return -1;
            dropped += !dot; /* an integer zero: one more power of ten */
            continue;
        }
        digits++;
        mant = mant * 10 + (*p - '0');
        frac += dot;
    }
    if (!seen)
        return -1; /* no digits */
    int e10, e2;
    if (!suffix_scale(p, &e10, &e2))
        return -1;
    /* value = mant * 2^e2 * 10^(e10 - frac + dropped + scale10) */
    mant <<= e2;
    int e = e10 - frac + dropped + scale10;
    const wide limit = (wide)INT64_MAX;
    if (e >= 0) {
        for (int i = 0; i < e && mant; i++) {
            if (mant > limit)
                return -1;
            mant *= 10;
        }
        if (mant > limit)
            return -1;
    } else {
        bool rest = false;
        for (int i = 0; i < -e && mant; i++) {
            rest |= mant % 10 != 0;
            mant /= 10;
        }
        if (rest)
            mant += 1; /* away from zero */
        if (mant > limit)
            return -1;
    }
    *out = neg ? -(int64_t)mant : (int64_t)mant;
    return 0;
}

int ckube_quantity_milli(const char *s, int64_t *milli)
{
    return quantity_scaled(s, 3, milli);
}

int ckube_quantity_value(const char *s, int64_t *value)
{
    return quantity_scaled(s, 0, value);
}

int ckube_time_parse(const char *s, int64_t *seconds, int32_t *nanos)
{
    if (!s)
        return -1;
    int64_t secs = ckube_parse_rfc3339(s);
    if (secs < 0 && strncmp(s, "1969", 4) != 0)
        return -1;
    int32_t ns = 0;
    const char *dot = strchr(s, '.');
    const char *t = strchr(s, 'T');
    if (!t)
        t = strchr(s, 't');
    if (dot && t && dot > t) {
        int n = 0;
        for (const char *p = dot + 1; isdigit((unsigned char)*p); p++, n++)
            if (n < 9)
                ns = ns * 10 + (*p - '0');
        for (; n < 9; n++)
            ns *= 10;
    }
    *seconds = secs;
    *nanos = ns;
    return 0;
}
