/* ckube/patch.h - the three patch formats Kubernetes speaks, over jansson.
 *
 *  - JSON Patch (RFC 6902, application/json-patch+json)
 *  - JSON Merge Patch (RFC 7386, application/merge-patch+json)
 *  - Strategic Merge Patch (application/strategic-merge-patch+json), as
 *    apimachinery's strategicpatch package applies it: lists of objects are
 *    merged by a per-field merge key, directives $patch (replace, delete,
 *    merge), $setElementOrder/FIELD, $deleteFromPrimitiveList/FIELD and
 *    $retainKeys.
 *
 * None of these functions modify their inputs. On error they return NULL
 * and, if `err` is non-NULL, set *err to a malloc'd message the server can
 * put in a 422/400 Status (caller frees).
 */
#ifndef CKUBE_PATCH_H
#define CKUBE_PATCH_H

#include <jansson.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Applies an RFC 6902 patch (an array of operations) to `doc`. Supports
 * add, remove, replace, move, copy, test, RFC 6901 pointers with ~0/~1
 * escapes and "-" for append. Returns a new document (caller decrefs). */
json_t *ckube_json_patch_apply(const json_t *doc, const json_t *patch, char **err);

/* The RFC 6902 patch that turns `from` into `to` (both borrowed), as
 * controller-runtime's PatchResponseFromRaw computes a mutating
 * webhook's answer: per member of objects (add, remove, or a change
 * below), arrays of equal length element by element, others replaced
 * whole; keys escaped as RFC 6901 says (~0, ~1). An empty array when
 * they are equal. Applying it to `from` gives `to` (JSON equality).
 * Returns a new array (caller decrefs); NULL only on out of memory. */
json_t *ckube_json_patch_diff(const json_t *from, const json_t *to);

/* Applies an RFC 7386 merge patch. `patch` must be an object or the result
 * is `patch` itself (per the RFC). Returns a new document. */
json_t *ckube_merge_patch_apply(const json_t *doc, const json_t *patch, char **err);

/* Patch strategies of a list field, as `x-kubernetes-patch-strategy`. */
enum ckube_patch_strategy {
    CKUBE_STRATEGY_REPLACE = 0,     /* default: the patch's list replaces the old one */
    CKUBE_STRATEGY_MERGE = 1,       /* merge elements (by merge key for objects; as a
                                    set union for primitives) */
    CKUBE_STRATEGY_RETAIN_KEYS = 2, /* $retainKeys allowed on this object field */
};

/* Describes the merge behaviour of fields of one type. `path` is the field
 * path from the root with '.' between field names; list elements add no
 * segment (the containers list and each container are both at
 * "spec.containers"; a container's ports at "spec.containers.ports").
 * Return the strategy bits for that path and, for a merged list of objects,
 * set *merge_key (borrowed, static storage). Unknown paths return
 * CKUBE_STRATEGY_REPLACE. */
typedef unsigned (*ckube_patch_meta_fn)(void *ctx, const char *path, const char **merge_key);

/* A static table is the usual way to describe a type; terminate with a
 * zeroed entry. Use ckube_patch_meta_table as the lookup with the table as
 * ctx. */
typedef struct ckube_patch_meta_entry {
    const char *path;
    unsigned strategy;     /* ckube_patch_strategy bits */
    const char *merge_key; /* NULL for lists of primitives */
} ckube_patch_meta_entry;

unsigned ckube_patch_meta_table(void *ctx, const char *path, const char **merge_key);

/* Applies a strategic merge patch to `doc`, using `meta` (may be NULL:
 * every list is replaced, i.e. merge-patch semantics for lists). Returns a
 * new document; on a malformed patch (e.g. a list element without its merge
 * key, an unknown $patch directive) returns NULL with *err set. */
json_t *ckube_strategic_merge_patch_apply(const json_t *doc, const json_t *patch,
                                          ckube_patch_meta_fn meta, void *ctx, char **err);

/* Deep equality as the patch formats need it: like json_equal, but numbers
 * compare by value (1 == 1.0), as RFC 6902 "test" requires. Returns 1 when
 * equal, else 0; two NULLs are equal. */
int ckube_patch_json_equal(const json_t *a, const json_t *b);

/* Limits protecting the server from hostile JSON patches: at most this
 * many operations (as upstream), and all "copy" operations of one patch
 * together may add at most this many bytes of memory, counting each copied
 * value as jansson allocates it (an empty object is some 224 bytes, a
 * string 80 plus its length; upstream counts the copies' JSON text against
 * the same 3 MiB, which lets a patch of copies of `[{},{},...]` take a
 * hundred times more). Repeated copies would otherwise double the
 * document each time. */
#define CKUBE_JSON_PATCH_MAX_OPS 10000
#define CKUBE_JSON_PATCH_MAX_COPY_BYTES (3 << 20)

#ifdef __cplusplus
}
#endif
#endif
