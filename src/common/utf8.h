/* utf8.h - the one UTF-8 decoder of ckube's text code (internal, not public
 * API): JSON reading and writing, YAML, the stored-bytes scanners, the
 * protobuf bridge, continue tokens and validation all accept exactly the
 * same sequences, so they share this. */
#ifndef CKUBE_COMMON_UTF8_H
#define CKUBE_COMMON_UTF8_H

#include <stddef.h>
#include <stdint.h>

/* Length (1 to 4) of the well-formed UTF-8 sequence that starts at s, with
 * n > 0 bytes readable there, and its code point in *cp (cp may be NULL);
 * 0 when s does not start with one. Ill-formed: a stray continuation byte,
 * an overlong form, a UTF-16 surrogate (U+D800..U+DFFF), a code point above
 * U+10FFFF, or a sequence cut short by n. These are the rules of Go's
 * utf8.DecodeRune and of jansson, which agree. ASCII (NUL included) is a
 * 1-byte sequence. Inline: JSON scanners call it for every non-ASCII byte. */
static inline size_t ckube__utf8_decode(const unsigned char *s, size_t n, uint32_t *cp)
{
    unsigned c = s[0];
    size_t len;
    uint32_t v, min;
    if (c < 0x80) {
        if (cp)
            *cp = c;
        return 1;
    }
    if (c >= 0xC2 && c <= 0xDF) {
        len = 2, v = c & 0x1F, min = 0x80;
    } else if (c >= 0xE0 && c <= 0xEF) {
        len = 3, v = c & 0x0F, min = 0x800;
    } else if (c >= 0xF0 && c <= 0xF4) {
        len = 4, v = c & 0x07, min = 0x10000;
    } else {
        return 0;
    }
    if (n < len)
        return 0;
    for (size_t i = 1; i < len; i++) {
        if ((s[i] & 0xC0) != 0x80)
            return 0;
        v = (v << 6) | (s[i] & 0x3F);
    }
    if (v < min || v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF))
        return 0;
    if (cp)
        *cp = v;
    return len;
}

#endif
