/* json_parse.h - a fast JSON reader that builds jansson trees (internal to
 * ckube, not public API).
 *
 * ckube__json_parse() accepts exactly the inputs jansson 2.14's
 * json_loadb(buf, len, flags) accepts, and builds the same tree: same values,
 * same integer/real types, same object key order (including jansson's
 * duplicate-key rule: the last value wins, in the first key's place). It does
 * not report errors: when it returns NULL the caller calls json_loadb with the
 * same buffer and flags, which produces jansson's own error text (and, in the
 * rare cases where this reader declines an input jansson takes, such as an
 * allocation failure or a flag it does not support, jansson's tree). */
#ifndef CKUBE_COMMON_JSON_PARSE_H
#define CKUBE_COMMON_JSON_PARSE_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The flags have jansson's values, so one flags word serves both readers. */
/* Any JSON value may stand at the top level (default: an object or array). */
#define CKUBE_JP_DECODE_ANY JSON_DECODE_ANY
/* An object holding the same key twice is an error. */
#define CKUBE_JP_REJECT_DUPLICATES JSON_REJECT_DUPLICATES

/* Parses the len bytes at buf (never reads past them; buf need not be
 * NUL-terminated). Returns a new reference the caller must json_decref, or
 * NULL when jansson's json_loadb(buf, len, flags) would fail, when an
 * allocation fails, or when flags holds a bit other than the two above. On
 * NULL, call json_loadb(buf, len, flags, &error) for the error (and use its
 * result if it succeeds). Thread-safe; keeps no state between calls. */
json_t *ckube__json_parse(const char *buf, size_t len, int flags);

/* What every caller wants: ckube__json_parse, and when it declines,
 * json_loadb(buf, len, flags, error) for jansson's verdict and error text
 * (error may be NULL). Returns a new reference or NULL. */
json_t *ckube__json_loadb(const char *buf, size_t len, int flags, json_error_t *error);

/* ckube__json_loadb for untrusted input: the tree it builds may take at
 * most `max_memory` bytes as json_cost.h estimates them (0: no bound).
 * Past that it stops before the next allocation and returns NULL with
 * *too_large (when non-NULL) set and error->text "decoding it needs more
 * than N bytes of memory"; jansson's reader is not run then, as it would
 * build the whole tree. *too_large is false on every other outcome.
 * *used (when non-NULL) receives the estimated memory of the tree
 * returned. */
json_t *ckube__json_loadb_limited(const char *buf, size_t len, int flags, size_t max_memory,
                                  size_t *used, bool *too_large, json_error_t *error);

#endif
