/* internal.h - what the files of the field manager share (not for other
 * modules: they use fieldmanager.h).
 *
 *   fieldset.c  1. field sets: a trie keyed by serialized path elements
 *                  ("f:name", "k:{...}", "v:...", "i:n"), FieldsV1, paths
 *                  as upstream prints them;
 *   typeinfo.c  2. type resolution: what the schema (and strategic-merge
 *                  metadata) says a map key or a list is;
 *   walks.c     3. walks over values: the field set of a configuration,
 *                  the comparison of two objects, the apply merge, the
 *                  removal of a set of paths;
 *   managed.c   4. the managedFields list: decode, encode, cap;
 *   fieldmanager.c 5. the operations, Update and Apply, as upstream's
 *                  chain of managers composes them.
 *
 * Memory: every function documents what it returns; sets and json values
 * built here are owned by their caller. Allocation failure aborts
 * (common/xalloc.h), the server's policy.
 */
#ifndef CKUBE_APISERVER_FIELDMANAGER_INTERNAL_H
#define CKUBE_APISERVER_FIELDMANAGER_INTERNAL_H

#include "apiserver/fieldmanager/fieldmanager.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "apiserver/apiextensions/schema/schema.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "apiserver/registry/definitions/builtin_schemas.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/validation.h"
#include "common/json_cost.h"
#include "common/json_parse.h"
#include "common/xalloc.h"

#define LAST_APPLIED "kubectl.kubernetes.io/last-applied-configuration"
#define MAX_UPDATE_MANAGERS 10

/* Compact JSON with sorted keys (path elements and last-applied). */
static inline char *dump_sorted(const json_t *v)
{
    char *s = json_dumps(v, JSON_COMPACT | JSON_SORT_KEYS | JSON_ENCODE_ANY);
    if (!s)
        xalloc_die();
    return s;
}

static inline const char *str_or(const char *s, const char *dflt)
{
    return s ? s : dflt;
}

/* ---- 1. field sets ---- */

/* One allocation per node: the path element is stored inline (sets are
 * built on every write, so their allocations are on the write path). */
struct fm_set {
    bool member;    /* this path itself is in the set */
    bool in_arena;  /* node and kids array live in an fm_arena: never freed alone */
    fm_set *parent; /* NULL at the root */
    fm_set **kids;  /* sorted by fm_pe_cmp */
    size_t n, cap;
    char pe[]; /* path element; "" at the root */
};

/* Calls fn for every member, members of a node before its children's, as
 * upstream iterates. */
typedef void (*member_fn)(void *ctx, const char *const *pes, size_t n);

int fm_pe_cmp(const char *a, const char *b);

/* An arena for the sets of one operation on this thread: between
 * fm_arena_begin and fm_arena_end, nodes (and their kids arrays) come
 * from it and fm_set_free leaves them be; fm_arena_end releases them all
 * at once. A create builds and drops a few dozen nodes; from the arena
 * they cost a pointer bump instead of a malloc and a free each. No set
 * made inside may outlive fm_arena_end. Not nested. */
typedef struct fm_arena_chunk fm_arena_chunk;
typedef struct fm_arena {
    char *p;               /* next free byte */
    size_t left;           /* bytes left at p */
    fm_arena_chunk *extra; /* chunks beyond the first, malloc'd */
} fm_arena;

void fm_arena_begin(fm_arena *a);
void fm_arena_end(fm_arena *a);

fm_set *fm_set_new(void);

void fm_set_free(fm_set *s);

fm_set *fm_set_find(const fm_set *s, const char *pe);

/* The child for `pe`, created (not a member) if absent. */
fm_set *fm_set_child(fm_set *s, const char *pe);

bool fm_set_empty(const fm_set *s);

/* Drops children that own nothing. */
void fm_set_compact(fm_set *s);

void fm_set_union_into(fm_set *dst, const fm_set *src);

fm_set *fm_set_copy(const fm_set *s);

/* a -= b: members of b stop being members of a (children stay). */
void fm_set_subtract(fm_set *a, const fm_set *b);

void fm_set_clear(fm_set *s);

fm_set *fm_set_intersect(const fm_set *a, const fm_set *b);

json_t *fm_fields_of(const fm_set *s);

fm_set *fm_set_from_fields(const json_t *fields, char **err);

char *fm_path_string(const char *const *pes, size_t n);

/* Path of a node, from its parents. */
char *fm_node_path(const fm_set *s);

void fm_set_members(const fm_set *s, member_fn fn, void *ctx);

/* ---- 2. type resolution ---- */

/* Where a value sits in its type. */
typedef struct tnode {
    const json_t *s;                  /* schema node; NULL: deduced from the value */
    const ckube_patch_meta_entry *pm; /* strategic merge metadata; NULL: none */
    bool custom;                      /* lists follow x-kubernetes-list-type only */
    char path[256];                   /* field path for pm lookups; list items add nothing */
} tnode;

enum { REL_ATOMIC, REL_SET, REL_MAP };

#define MAX_KEYS 8

typedef struct lkind {
    int rel;
    const char *keys[MAX_KEYS];
    const json_t *defaults[MAX_KEYS]; /* borrowed; NULL: none */
    size_t nkeys;
} lkind;

/* The items of a granular list with their path elements, and a sorted
 * view for lookups. */
typedef struct lindex {
    size_t n;
    char **pe;
    const json_t **v;
    size_t *sorted; /* indexes into pe[], ordered by pe_cmp */
} lindex;

tnode fm_tn_root(const fm_type *t);

bool fm_tn_is_root(const tnode *n);

/* The type of field `key` of map `n`. Sets *named when key is a declared
 * property (a struct field) rather than a map entry. Returns false when
 * `n` is a closed struct that has no such field (the value is not part
 * of the type and owns nothing). */
bool fm_tn_field(const tnode *n, bool root, const char *key, tnode *c, bool *named);

bool fm_tn_map_atomic(const tnode *n);

void fm_tn_list(const tnode *n, lkind *lk);

void fm_tn_item(const tnode *n, tnode *c);

void fm_lindex_free(lindex *ix);

/* Indexes `arr` (NULL or null: empty). Fails with *err on an item without
 * its keys or a duplicate. */
int fm_lindex_build(const lkind *lk, const json_t *arr, lindex *ix, char **err);

long fm_lindex_find(const lindex *ix, const char *pe);

/* ---- 3. walks ---- */

typedef struct comparison {
    fm_set *added, *modified, *removed;
} comparison;

fm_set *fm_fieldset(const fm_type *t, const json_t *obj, char **err);

void fm_comparison_free(comparison *cm);

void fm_compare(const fm_type *t, const json_t *l, const json_t *r, comparison *out);

json_t *fm_merge_walk(const tnode *n, const json_t *l, const json_t *r, char **err);

/* Removes the members of `rm` from v (in place). Returns true when v had
 * content and has none left. */
bool fm_remove_walk(const tnode *n, json_t *v, const fm_set *rm);

/* Marks struct fields that have owned children as members themselves
 * (upstream's EnsureNamedFieldsAreMembers), so that pruning sees them. */
void fm_ensure_named(const tnode *n, fm_set *s);

/* ---- 4. managedFields ---- */

typedef struct fm_entry {
    char *manager;
    bool apply;
    char *api_version;
    char *subresource; /* "" for the main resource */
    char *time;        /* NULL: none recorded */
    fm_set *set;
} fm_entry;

struct fm_managed {
    fm_entry *e;
    size_t n, cap;
};

fm_managed *fm_managed_new(void);

void fm_managed_free(fm_managed *m);

fm_managed *fm_managed_copy(const fm_managed *m);

/* Entries are identified by manager, operation, subresource and, for
 * updates, apiVersion (upstream's BuildManagerIdentifier). */
long fm_managed_find(const fm_managed *m, const char *manager, bool apply, const char *api_version,
                     const char *subresource);

/* Adds an entry (taking `set`), or replaces the set of an existing one.
 * Returns its index. */
size_t fm_managed_put(fm_managed *m, const char *manager, bool apply, const char *api_version,
                      const char *subresource, fm_set *set);

void fm_managed_drop_empty(fm_managed *m);

void fm_set_time(fm_entry *e, const char *now);

/* Decodes metadata.managedFields as upstream's DecodeManagedFields: any
 * malformed entry fails the whole list. NULL/null: empty. */
fm_managed *fm_managed_decode(const json_t *list, char **err);

void fm_managed_store(const fm_managed *m, json_t *obj);

/* Upstream keeps at most 10 update entries: the oldest are merged into
 * one "ancient-changes" entry per apiVersion. */
void fm_managed_cap(fm_managed *m);

#endif
