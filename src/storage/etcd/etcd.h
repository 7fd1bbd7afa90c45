/* etcd.h - the etcd storage backend (etcd.c): storage.h's interface on
 * etcd's v3 API (issue #23), as kube-apiserver's etcd3 store uses it:
 * creates and updates are transactions comparing the key's revisions,
 * the etcd revision is the resourceVersion, reads are linearizable
 * Ranges (paginated at one revision), watches are etcd watch streams
 * from a revision, compaction is etcd's.
 *
 * Keys pass through unchanged (the caller's prefix, "/registry/...", is
 * the etcd key). Not yet: upstream's key layout for built-in resources,
 * the compaction key shared between servers, TLS flags from the command
 * line (the client has them). */
#ifndef CKUBE_STORAGE_ETCD_ETCD_H
#define CKUBE_STORAGE_ETCD_ETCD_H

#include "storage/etcd/etcd_client.h"
#include "storage/storage.h"

/* A backend on the etcd members of `endpoints` (etcd_client_new's
 * syntax; `tls` may be NULL). Checks that etcd answers (a Range within
 * 10 s) before returning. NULL with *err (malloc'd) otherwise. */
storage *storage_etcd_open(const char *endpoints, const etcd_tls *tls, char **err);

#endif
