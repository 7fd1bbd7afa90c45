/* etcd.h - the etcd storage backend (etcd.c): storage.h's interface on
 * etcd's v3 API (issue #23), as kube-apiserver's etcd3 store uses it:
 * creates and updates are transactions comparing the key's revisions,
 * the etcd revision is the resourceVersion, reads are linearizable
 * Ranges (paginated at one revision), watches are etcd watch streams
 * from a revision, compaction is etcd's.
 *
 * Keys are laid out as kube-apiserver's (keymap.h) under --etcd-prefix.
 * Compaction is upstream's: a compare-and-swap on the version of the key
 * "compact_rev_key" elects one server per interval to compact. */
#ifndef CKUBE_STORAGE_ETCD_ETCD_H
#define CKUBE_STORAGE_ETCD_ETCD_H

#include <stdbool.h>

#include "storage/storage.h"

/* kube-apiserver's --etcd-cafile, --etcd-certfile, --etcd-keyfile (PEM
 * files; NULL = none). With any of them, or an https:// endpoint, the
 * connection is TLS. */
typedef struct etcd_tls {
    const char *ca_file, *cert_file, *key_file;
} etcd_tls;

/* A backend on the etcd members of `endpoints` ("http://127.0.0.1:2379"
 * or several, comma-separated, as --etcd-servers; `tls` may be NULL).
 * With `kube_layout` (the server's), keys are the API server's
 * ("/registry/GROUP/RESOURCE/...") and live in etcd as kube-apiserver lays
 * them out under `prefix` (--etcd-prefix, "/registry" by default; see
 * keymap.h). Without it, keys pass unchanged and must all start with
 * `prefix` (not empty). Either way a range of "" and every watch cover the
 * prefix alone, so keys beside it (upstream's "compact_rev_key", another
 * program's) never reach the caller. Checks that etcd answers (a Range
 * within 10 s) before returning. NULL with *err (malloc'd) otherwise. */
storage *storage_etcd_open(const char *endpoints, const char *prefix, bool kube_layout,
                           const etcd_tls *tls, char **err);

/* The backend is built as a module the server loads only when asked for
 * etcd (gRPC's libraries would otherwise be mapped by every server):
 * this file beside the `ckube` binary, and this function in it. This
 * header needs nothing of gRPC, so the server can include it. */
#define STORAGE_ETCD_MODULE "ckube-storage-etcd.so"
#define STORAGE_ETCD_OPEN_SYMBOL "storage_etcd_open"
typedef storage *(*storage_etcd_open_fn)(const char *endpoints, const char *prefix,
                                         bool kube_layout, const etcd_tls *tls, char **err);

#endif
