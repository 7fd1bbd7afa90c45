/* ckube/yaml.h - YAML <-> JSON (jansson) conversion on libyaml.
 *
 * Used by the API server for `application/yaml` request bodies and by the
 * client library for kubeconfig files and manifests. Loading follows what
 * Kubernetes' sigs.k8s.io/yaml does (go-yaml v2, YAML 1.1 scalar rules),
 * because users write manifests that rely on those rules:
 *
 *  - Plain scalars: y/Y/yes/Yes/YES/true/True/TRUE/on/On/ON -> true;
 *    n/N/no/No/NO/false/False/FALSE/off/Off/OFF -> false;
 *    "", ~, null, Null, NULL -> null; integers with optional sign,
 *    '_' separators (removed), 0x/0o/0b prefixes and C-style leading-0
 *    octal (0755 == 493); floats like 1.5, .5, 1e3, 685.230_15e+03;
 *    everything else (timestamps, "1:20", "08.x", ...) is a string.
 *    Quoted and block (| >) scalars are always strings.
 *  - Tags: !!str, !!int, !!float, !!bool, !!null, !!timestamp (kept as a
 *    string), !!binary (base64-decoded; invalid UTF-8 bytes become U+FFFD as
 *    Go's JSON encoder does). A value that does not fit its tag is an error
 *    ("cannot decode !!str `abc` as a !!int"). Unknown tags (`!foo`, `!`)
 *    leave the value a string; tags on collections are ignored.
 *  - Numbers are stored as the JSON that sigs.k8s.io/yaml would print:
 *    integers as json_integer; floats with an integral value below 1e21
 *    that fit int64 (1.0, 1e3) as json_integer too (Go prints them "1",
 *    "1000"); other floats as json_real. Integers beyond int64 become
 *    json_real (precision lost; jansson cannot hold them). .inf/.nan are
 *    errors (JSON cannot represent them).
 *  - Mapping keys: strings as is; other scalars converted as
 *    sigs.k8s.io/yaml does (1 -> "1", yes -> "true", 1.5 -> "1.5", float
 *    keys printed with float32 precision, .inf -> ".inf"); null keys,
 *    integers beyond int64 and mapping/sequence keys are errors. Duplicate
 *    keys (after conversion) are errors. Merge keys (`<<: *base`,
 *    `<<: [*a, *b]`) work; explicit keys win over merged ones and earlier
 *    merge sources win over later ones.
 *  - Aliases: an alias to a scalar shares the anchor's value (a reference,
 *    not a copy: jansson values are immutable once built), an alias to a
 *    collection copies its collections and shares its scalars. Against
 *    "billion laughs" bombs a document is refused with
 *    "yaml: document contains excessive aliasing" (go-yaml's words) before
 *    anything is built for the alias that passes any of:
 *     - go-yaml v2's ratio rule, which Kubernetes' own YAML reading applies:
 *       once a document has decoded over 1000 nodes, over 100 of them
 *       through aliases, at most 99% of them may come from aliases (falling
 *       to 10% as the document grows from 400,000 to 4,000,000 nodes);
 *       nodes are counted as go-yaml counts them (keys and alias nodes
 *       too), so every document go-yaml refuses is refused here;
 *     - the bytes alias expansion adds, in memory and as JSON text: a
 *       shared 1 MiB string repeated a thousand times is cheap to hold but
 *       a gigabyte to print (ckube_yaml_limits; CKUBE_YAML_MAX_ALIAS_BYTES
 *       each by default).
 *    Nesting deeper than CKUBE_YAML_MAX_DEPTH collections (counting the
 *    depth an alias adds) is an error, never a stack overflow.
 *
 * Errors are malloc'd strings like
 *   "yaml: line 3: mapping values are not allowed in this context"
 * (1-based line numbers).
 *
 * All functions are reentrant (no global state).
 */
#ifndef CKUBE_YAML_H
#define CKUBE_YAML_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Maximum collection nesting depth of a loaded document. */
#define CKUBE_YAML_MAX_DEPTH 1000
/* Default bound of ckube_yaml_load and _load_all on what alias expansion
 * adds in one call: estimated memory, and JSON text, each. */
#define CKUBE_YAML_MAX_ALIAS_BYTES ((size_t)16 << 20)

/* Bounds on what one load call builds; a field of 0 means no bound.
 * Memory is estimated per value as jansson allocates it (an empty mapping
 * is ~224 bytes however little text it took), counted before each
 * allocation, so a call stops before it allocates past a bound. */
typedef struct ckube_yaml_limits {
    /* Everything the call builds, in bytes of memory. Over it the call
     * fails with "yaml: document too large: decoding it needs more than N
     * bytes of memory" and *too_large set (unless the excess comes from an
     * alias: that is excessive aliasing). */
    size_t max_memory;
    /* What alias expansion adds, in bytes of memory. */
    size_t max_alias_memory;
    /* What alias expansion adds, in bytes of compact JSON text (what the
     * document takes once printed, e.g. to store it). */
    size_t max_alias_json;
} ckube_yaml_limits;

/* Parses the first document of `buf` (`len` bytes, need not be
 * NUL-terminated; UTF-8, or UTF-16 with a BOM). Later documents are not
 * read. An empty stream or empty document gives JSON null.
 * Returns a new reference (caller json_decref()s), or NULL with *err set to
 * a malloc'd message the caller frees (err may be NULL to ignore it). */
json_t *ckube_yaml_load(const char *buf, size_t len, char **err);

/* ckube_yaml_load with explicit bounds (lim may be NULL: no bounds beyond
 * go-yaml's ratio rule). *too_large (when too_large is non-NULL) tells
 * whether a failure was lim->max_memory being passed; it is false for
 * every other error. The API server decodes request bodies with this. */
json_t *ckube_yaml_load_limited(const char *buf, size_t len, const ckube_yaml_limits *lim,
                                bool *too_large, char **err);

/* Parses every document of the stream (`---` separated). Documents whose
 * value is null (empty documents, comment-only documents, `~`) are skipped,
 * as kubectl does. On success returns 0 and stores a new array reference
 * in *docs_out (caller json_decref()s; may be empty). On error returns -1,
 * sets *docs_out to NULL and *err (if err is non-NULL) to a malloc'd
 * message the caller frees. The alias bounds hold for the whole call (a
 * bomb split over documents is still one bomb); go-yaml's ratio rule is
 * applied per document, as go-yaml decodes one document at a time. */
int ckube_yaml_load_all(const char *buf, size_t len, json_t **docs_out, char **err);

/* Serializes `v` (borrowed) as a block-style YAML document ending in a
 * newline, in the object's key order, with sequences inside mappings not
 * indented (as kubectl prints them). Strings that would load as something
 * else ("true", "1", "", "null", "0x1", "2024-01-01", "<<", ...) are
 * double-quoted; strings with special characters are quoted by libyaml;
 * multi-line strings use literal `|` blocks when that round-trips exactly,
 * double quotes otherwise (a block keeping trailing newlines may make the
 * output end with a "..." document-end line). Loading the output with
 * ckube_yaml_load gives a value equal to `v`, except that integral reals
 * load as integers.
 * Returns a malloc'd NUL-terminated string the caller frees, or NULL on
 * failure (NULL input, nesting deeper than 10000, out of memory). */
char *ckube_yaml_dump(const json_t *v);

#ifdef __cplusplus
}
#endif
#endif
