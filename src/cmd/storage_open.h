/* storage_open.h - opening a storage backend from a ckube command: the
 * etcd backend, which lives in a module loaded at run time (etcd.h says
 * why), for `ckube server --storage etcd` and `ckube migrate`. */
#ifndef CKUBE_CMD_STORAGE_OPEN_H
#define CKUBE_CMD_STORAGE_OPEN_H

#include "storage/etcd/etcd.h"

/* Loads STORAGE_ETCD_MODULE from the directory of the running binary and
 * opens the etcd backend on `servers` (--etcd-servers' list) with keys
 * under `prefix` ("/registry/"), TLS per `tls` (may be NULL). The module
 * stays loaded for the life of the process: the storage's threads run
 * its code until storage_close. Returns the storage (the caller closes
 * it with storage_close) or NULL with *err set (malloc'd). */
storage *cmd_storage_open_etcd(const char *servers, const char *prefix, const etcd_tls *tls,
                               char **err);

#endif
