/* text.h - small text helpers shared inside libckube (not public API):
 * a growable NUL-terminated string and first-error recording. */
#ifndef CKUBE_COMMON_TEXT_H
#define CKUBE_COMMON_TEXT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* A growable string. Zero-initialize it; `s` stays NUL-terminated (or
 * NULL while empty). After an allocation failure every operation is a
 * no-op and `oom` is set; ckube__sb_take then frees and returns NULL. */
typedef struct ckube__strbuf {
    char *s;
    size_t len, cap;
    bool oom;
} ckube__strbuf;

void ckube__sb_reserve(ckube__strbuf *b, size_t extra);
void ckube__sb_addn(ckube__strbuf *b, const char *s, size_t n);
void ckube__sb_add(ckube__strbuf *b, const char *s);
void ckube__sb_addc(ckube__strbuf *b, char c);
void ckube__sb_printf(ckube__strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* Hands over the text (caller frees; "" if nothing was added), or frees
 * it and returns NULL if an allocation failed. */
char *ckube__sb_take(ckube__strbuf *b);

/* FNV-1a over n bytes, continuing from h: start from CKUBE__FNV1A_INIT.
 * The one small non-cryptographic hash of the project (hash tables of
 * the metrics registry, the key scanner, the server's metric caches). */
#define CKUBE__FNV1A_INIT 1469598103934665603ull
static inline uint64_t ckube__fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ull;
    return h;
}

/* Sets *err (when err is non-NULL and *err still NULL) to a malloc'd
 * message. The first error recorded wins: it is the innermost, most
 * specific one. */
void ckube__set_err(char **err, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Writes the JSON escape of the ASCII byte c (c < 0x80) into out: the
 * short form (\" \\ \b \f \n \r \t) where JSON has one, else \u00XX
 * in the digits of `hex` (upper case as jansson writes them, lower case
 * as Go's encoding/json does). Returns its length, 2 or 6. Shared by the
 * canonical encoder and the Go-compatible continue tokens. */
size_t ckube__json_escape_ascii(unsigned char c, const char *hex, char out[6]);

/* Joins the strings up to the NULL that ends the list into buf (n
 * bytes), as snprintf(buf, n, "%s%s...") would: cut to n - 1 bytes and
 * always terminated when n > 0. Returns the length the whole join has.
 * For paths taken by every request (object keys, verbs), where
 * snprintf's format parsing showed in a create's profile. */
size_t ckube__concat(char *buf, size_t n, ...);

/* The standard reason phrase of an HTTP status code ("Not Found"), or ""
 * for codes without one here. Shared by the server's replies and the
 * client's request logs. */
const char *ckube__http_reason(long code);

/* A duration as kubectl prints ages: "45s", "3m12s", "5h", "2d3h",
 * "400d", "3y20d" ("<invalid>" below -1 s), into buf (n bytes). */
void ckube__human_duration(int64_t seconds, char *buf, size_t n);

/* Decodes padded standard base64 (Go's StdEncoding, as JSON's []byte
 * and YAML's !!binary are written), skipping '\r' and '\n'. Returns
 * malloc'd bytes, NUL-terminated, with *out_len; NULL when the input is
 * not base64 or memory runs out. Defined in yaml.c. */
char *ckube__base64_decode(const char *s, size_t n, size_t *out_len);

/* A dotted name's labels in reverse order into buf (n bytes, always
 * terminated; as many whole labels as fit): "samplecrd.k8s.io" ->
 * "io.k8s.samplecrd", as OpenAPI names the schemas of a group's types. */
void ckube__reverse_dns(const char *name, char *buf, size_t n);

#endif
