/* jscan.h - a scanner for JSON in the canonical form ckube stores.
 *
 * Every object ckube writes to storage is serialised by jansson's
 * json_dumps(JSON_COMPACT): no whitespace, keys in insertion order, strings
 * as raw UTF-8 with only the escapes \" \\ \b \f \n \r \t and \u00XX
 * (uppercase hex) for the other control characters, integers as %lld.
 * Call such bytes "canonical": json_dumps(json_loadb(b), JSON_COMPACT)
 * gives b back, byte for byte.
 *
 * jscan_canonical() decides that in one pass without building a tree. On
 * canonical bytes the cacher can splice metadata.resourceVersion in and
 * read labels and selectable fields directly, and still serve exactly the
 * bytes a decode + re-encode would produce. Anything else (whitespace,
 * other escapes, reals, duplicate keys, invalid UTF-8, nesting deeper than
 * JSCAN_MAX_DEPTH, ...) is "not canonical": callers fall back to jansson.
 *
 * This is not a general JSON parser: it never decodes numbers or builds
 * values. The navigation functions (jscan_skip and below) assume canonical
 * input; on any other input they still never read outside [buf, buf+len)
 * and report failure instead of crashing, but their answers are
 * meaningless.
 *
 * Offsets are byte offsets into buf. No function allocates except
 * jscan_str_dup and jscan_scalar_dup (caller frees), and jscan_canonical
 * (temporarily, for objects with more than 64 keys in all open levels).
 */
#ifndef CKUBE_APISERVER_JSCAN_H
#define CKUBE_APISERVER_JSCAN_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Deeper nesting is reported as not canonical (jansson accepts 2048). */
#define JSCAN_MAX_DEPTH 256

/* A value's bytes: buf[off, off+len). For strings handed out as keys or
 * by jscan_member the span is the contents between the quotes. */
typedef struct jspan {
    size_t off, len;
} jspan;

/* Where a Kubernetes object's metadata parts are, recorded while
 * validating. Offsets are never 0 when set (0 is the top-level '{'). */
typedef struct jscan_meta {
    size_t metadata;     /* the '{' of the top-level member "metadata" when
                          * that is an object, else 0 */
    size_t metadata_end; /* its closing '}' */
    jspan rv;            /* value of metadata.resourceVersion; off 0 if none */
    size_t labels;       /* start of metadata.labels's value, 0 if none */
} jscan_meta;

/* True iff buf[0..len) is one JSON object or array (the only top-level
 * values json_loadb accepts by default) in canonical form, without reals
 * (numbers with a fraction or exponent), duplicate keys in any object, or
 * nesting deeper than JSCAN_MAX_DEPTH. Safe on any input. If meta is not
 * NULL it receives the positions above (all 0 when false is returned). */
bool jscan_canonical(const char *buf, size_t len, jscan_meta *meta);

/* Encodes v as ckube_json_dumps does (same bytes; NULL on the same
 * failures, caller frees) and learns what jscan_canonical would say of
 * the result while writing it, without a second pass: *canonical, and
 * when true *meta as jscan_canonical records it (all 0 otherwise). The
 * output of a tree can fail to be canonical only by a real, a string
 * holding U+0000 or nesting deeper than JSCAN_MAX_DEPTH (a tree has no
 * duplicate keys, and the writer's escapes are the canonical ones). */
char *jscan_dump(const json_t *v, size_t *len, jscan_meta *meta, bool *canonical);

/* Sets metadata.resourceVersion of canonical bytes with metadata (meta
 * from jscan_canonical, meta->metadata != 0) to the JSON string `rv`
 * (digits only), as jansson's json_object_set_new does: an existing value
 * is replaced in place, else the member goes last. Writes the result to
 * `out` (which must hold the returned size plus a NUL) unless out is NULL;
 * returns the result's size without the NUL. */
size_t jscan_set_rv(const char *buf, size_t len, const jscan_meta *meta, const char *rv, char *out);

/* Offset just past the value that starts at `pos`, or 0 when there is no
 * well-formed value there. */
size_t jscan_skip(const char *buf, size_t len, size_t pos);

/* Iterates an object's members. Set *pos to the offset of the object's
 * '{' before the first call; each call stores the next member's key
 * (contents between the quotes, still escaped) and value span and returns
 * true, or returns false at the end of the object (or on bad input). */
bool jscan_next_member(const char *buf, size_t len, size_t *pos, jspan *key, jspan *val);

/* The value of member `key` (an unescaped C string) of the object at
 * `obj` (offset of its '{'), in *val. False if absent or obj is not an
 * object. */
bool jscan_member(const char *buf, size_t len, size_t obj, const char *key, jspan *val);

/* Follows a path like ckube_json_get_path does ("a.b", ".a.b", "a[2].c")
 * from the value at `root`. False if the path leads nowhere. */
bool jscan_path(const char *buf, size_t len, size_t root, const char *path, jspan *val);

/* Compares the escaped string contents `s` (a key span) with the C string
 * `want` after unescaping. */
bool jscan_str_eq(const char *buf, jspan s, const char *want);

/* Unescapes string contents (a key span, or a string value's span without
 * its quotes) into out, which must hold s.len + 1 bytes (unescaping never
 * lengthens), and NUL-terminates it. Returns the length written. */
size_t jscan_str_copy(const char *buf, jspan s, char *out);
/* The same into a new string; NULL on allocation failure. */
char *jscan_str_dup(const char *buf, jspan s);

/* The text a selectable field shows for the value at `v` (a whole value
 * span as jscan_member returns it): a string's contents, an integer's
 * digits, "true"/"false", and "" for anything else (null, objects,
 * arrays). New string; NULL on allocation failure. */
char *jscan_scalar_dup(const char *buf, jspan v);

/* The kind of the value at `v`: '{', '[', '"', 'n' (number), 't'/'f'
 * (booleans), 'N' (null), or 0 for none. */
char jscan_kind(const char *buf, jspan v);

#endif
