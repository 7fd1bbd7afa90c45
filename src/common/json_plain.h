/* json_plain.h - the one scanner for runs of JSON string bytes that need
 * no attention (internal, not public API).
 *
 * A "plain" byte is printable ASCII other than '"' and '\\': a JSON
 * string may hold it as is and a writer copies it as is. Everything else
 * (control bytes, the quote, the backslash, bytes >= 0x80 that start or
 * continue UTF-8) goes through the caller's byte-by-byte path. Strings in
 * API objects are long plain runs (ConfigMap data, certificates,
 * last-applied annotations), so the JSON reader (json_parse.c), the
 * stored-bytes scanner (codec/jscan.c) and the writer (json_dump.c) spend
 * most of their time here: it looks at 16 bytes per step with SSE2 and 8
 * with plain 64-bit arithmetic elsewhere. */
#ifndef CKUBE_COMMON_JSON_PLAIN_H
#define CKUBE_COMMON_JSON_PLAIN_H

#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

static inline bool ckube__json_plain(unsigned char c)
{
    return c >= 0x20 && c < 0x80 && c != '"' && c != '\\';
}

/* The first byte in [p, end) that is not plain, or end. */
static inline const unsigned char *ckube__json_plain_end(const unsigned char *p,
                                                         const unsigned char *end)
{
#ifdef __SSE2__
    while (end - p >= 16) {
        __m128i x = _mm_loadu_si128((const __m128i *)(const void *)p);
        /* Signed compare: bytes >= 0x80 are negative, so "< 0x20" takes
         * them too. */
        __m128i sp = _mm_or_si128(_mm_cmplt_epi8(x, _mm_set1_epi8(0x20)),
                                  _mm_or_si128(_mm_cmpeq_epi8(x, _mm_set1_epi8('"')),
                                               _mm_cmpeq_epi8(x, _mm_set1_epi8('\\'))));
        unsigned mask = (unsigned)_mm_movemask_epi8(sp);
        if (mask)
            return p + __builtin_ctz(mask);
        p += 16;
    }
#elif defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
    /* The "has zero byte" and "has byte less than" tests flag every
     * special byte; a borrow can flag a plain byte too, but only one more
     * significant than a special byte, so the lowest flag is exact. */
    const uint64_t ones = 0x0101010101010101ULL, highs = 0x8080808080808080ULL;
    while (end - p >= 8) {
        uint64_t x, quote, bslash, m;
        memcpy(&x, p, sizeof x);
        quote = x ^ (ones * '"');
        bslash = x ^ (ones * '\\');
        m = (((quote - ones) & ~quote) | ((bslash - ones) & ~bslash) | (x - ones * 0x20) | x) &
            highs;
        if (m)
            return p + (__builtin_ctzll(m) >> 3);
        p += 8;
    }
#endif
    while (p < end && ckube__json_plain(*p))
        p++;
    return p;
}

#endif
