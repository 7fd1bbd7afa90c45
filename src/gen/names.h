/* names.h - C names for what ckube-gen generates (docs/ckube-gen.md,
 * "Types"): JSON property names in snake case, C keywords avoided, and
 * the clashes that mangling can make found and reported, never renamed
 * away (a rename would not be stable across regenerations). */
#ifndef CKUBE_GEN_NAMES_H
#define CKUBE_GEN_NAMES_H

#include <stdbool.h>
#include <stddef.h>

/* `name` (a JSON property, a kind, a version) in snake case:
 * "podCIDR" -> "pod_cidr", "IPAddress" -> "ip_address",
 * "x-kubernetes.io" -> "x_kubernetes_io", "2fa" -> "_2fa"; a C keyword
 * or a name the generated code uses itself gets a trailing '_'
 * ("default" -> "default_"). Malloc'd; NULL when nothing of `name` is
 * usable (it has no letter or digit) or out of memory. */
char *gen_c_name(const char *name);

/* The same for a part of a longer identifier (a kind, version or
 * property inside a type's name, an enum value inside a constant's): a
 * keyword needs no '_' there ("Namespace" -> "namespace", so the kind's
 * type is PKG_v1_namespace). */
char *gen_c_part(const char *name);

/* Whether `s` is a C keyword or a member name the generated structs use
 * for themselves ("base", "unknown"). */
bool gen_reserved(const char *s);

/* A set of C names with the JSON path each came from, to find clashes:
 * two paths whose names mangle to one C name. */
typedef struct gen_nameset gen_nameset;

gen_nameset *gen_nameset_new(void); /* NULL: out of memory */
void gen_nameset_free(gen_nameset *s);
/* Adds name (from JSON path `path`): 0 when it is new; 1 when the set
 * had it, with *first the path it came from (borrowed from the set); -1
 * out of memory. */
int gen_nameset_add(gen_nameset *s, const char *name, const char *path, const char **first);

#endif
