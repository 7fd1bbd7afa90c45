/* keymap.h - where ckube's storage keys live in etcd (keymap.c).
 *
 * ckube's server names every object by an internal key,
 * "/registry/GROUP/RESOURCE/NAMESPACE/NAME" or, cluster-scoped,
 * "/registry/GROUP/RESOURCE/NAME", GROUP being "core" for the legacy
 * group (store_object_key, resource_type_key_prefix). kube-apiserver lays
 * the same objects out in etcd differently, and etcdctl users, backup
 * tools and a kube-apiserver sharing the etcd expect its layout, so the
 * etcd backend translates every key it writes, reads and watches:
 *
 *   PREFIX/RESOURCE_PREFIX/[NAMESPACE/]NAME
 *
 * PREFIX is --etcd-prefix ("/registry" by default) and RESOURCE_PREFIX is
 * upstream's per-resource prefix: the resource's name for built-in types
 * ("configmaps", "deployments", "leases"), a few historical names
 * ("minions" for nodes, "services/specs", "services/endpoints"), and
 * "GROUP/RESOURCE" for what apiextensions-apiserver stores: CRDs
 * ("apiextensions.k8s.io/customresourcedefinitions") and custom
 * resources ("example.com/widgets"). keymap.c has the table, the sources
 * upstream, and the one place ckube differs (events.k8s.io Events).
 *
 * The mapping is a bijection between the internal keys ckube writes and
 * the etcd keys they map to: etcd_key_from_etcd(etcd_key_to_etcd(k)) is
 * k, and the other way round, for every key either function accepts.
 * Keys are bytes (a name may hold any byte a Kubernetes name may); both
 * functions are pure (no I/O, no global state) and thread-safe on a
 * shared keymap. */
#ifndef CKUBE_STORAGE_ETCD_KEYMAP_H
#define CKUBE_STORAGE_ETCD_KEYMAP_H

#include <stdbool.h>
#include <stddef.h>

/* The internal keyspace's root: every internal key starts with it, and
 * it is itself the prefix of the whole store (a range over everything). */
#define ETCD_KEYMAP_INTERNAL_ROOT "/registry/"

/* The etcd side of the mapping: its prefix, normalised as upstream's etcd3
 * store does (path.Join("/", prefix) plus a trailing "/"), so "/registry",
 * "/registry/", "registry" and "//registry/" are all "/registry/", "/a/b"
 * is "/a/b/" and "" or "/" is "/". Read-only once made; owns `prefix`. */
typedef struct etcd_keymap {
    char *prefix;      /* starts and ends with '/'; NUL-terminated */
    size_t prefix_len; /* strlen(prefix) */
} etcd_keymap;

/* A keymap for --etcd-prefix `etcd_prefix` (any string, normalised as
 * above; NULL is taken as ""). Never NULL: out of memory aborts, as
 * xalloc.h does, so that NULL from the functions below always means "not
 * a key of ours". Free with etcd_keymap_free. */
etcd_keymap *etcd_keymap_new(const char *etcd_prefix);
void etcd_keymap_free(etcd_keymap *m); /* NULL is fine */

/* The etcd key of an internal key, malloc'd (the caller frees it), or
 * NULL when internal_key is not one ckube writes or ranges over. Accepted:
 *   "/registry/"                         the whole store: PREFIX itself
 *   "/registry/GROUP/RESOURCE/"          a type's prefix
 *   "/registry/GROUP/RESOURCE/NS/"       a namespace of a namespaced type
 *   "/registry/GROUP/RESOURCE/NS/NAME"   a namespaced object
 *   "/registry/GROUP/RESOURCE/NAME"      a cluster-scoped object
 * where GROUP/RESOURCE is a built-in type ckube serves (with its scope) or
 * a custom resource (GROUP has a dot; either scope, as the key does not
 * say which). NULL for anything else: another root, an empty, "." or ".."
 * segment, a segment with '%' (no Kubernetes name, namespace, group or
 * resource has one: upstream's path-segment rule), a group alone
 * ("/registry/apps/": built-in groups are not contiguous in etcd), a
 * built-in type ckube does not serve, the wrong number of segments for
 * the type's scope. */
char *etcd_key_to_etcd(const etcd_keymap *m, const char *internal_key);

/* The internal key of the etcd key etcd_key[0..len) (bytes, not
 * NUL-terminated), malloc'd (the caller frees it), or NULL when it is not
 * the key of an object ckube serves: outside PREFIX, a key kube-apiserver
 * keeps for itself ("PREFIX/ranges/serviceips", "PREFIX/masterleases/..."),
 * a type ckube does not serve ("PREFIX/statefulsets/..."), a layout
 * upstream never writes
 * ("PREFIX/coordination.k8s.io/leases/..."), a malformed key (an empty
 * segment, a trailing '/', a NUL byte, the wrong number of segments). The
 * caller skips such keys (and may log them). Only object keys map back:
 * prefixes are never stored. */
char *etcd_key_from_etcd(const etcd_keymap *m, const char *etcd_key, size_t len);

/* One built-in type the keymap knows: every type ckube serves and stores.
 * `group` is the internal key's ("core" for the legacy group), `etcd` the
 * resource prefix under PREFIX (no leading or trailing '/'). */
typedef struct etcd_keymap_resource {
    const char *group, *resource, *etcd;
    bool namespaced;
} etcd_keymap_resource;

/* The static table (for tests and diagnostics): *n rows. */
const etcd_keymap_resource *etcd_keymap_resources(size_t *n);

#endif
