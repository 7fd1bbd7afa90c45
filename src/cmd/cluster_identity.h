/* cluster_identity.h - `ckube server` joining the cluster identity kept in
 * a shared datastore (apiserver/pki/identity.h says what and why). */
#ifndef CKUBE_CMD_CLUSTER_IDENTITY_H
#define CKUBE_CMD_CLUSTER_IDENTITY_H

#include <stdbool.h>

#include "apiserver/pki/pki.h"
#include "storage/storage.h"

/* What the server was told (--token, --token-file; NULL: not given). */
typedef struct cluster_token_opts {
    const char *token, *token_file;
} cluster_token_opts;

/* Run after pki_ensure has made or read DATA_DIR/pki (`pki`, with what
 * it made). With a shared storage `st`:
 *  - the datastore holds an identity: it is opened with the token (the
 *    flags', else DATA_DIR/token) and its CA and ServiceAccount key are
 *    installed in place of ones pki_ensure has just made (files that
 *    were there before and differ are an error: another cluster's);
 *  - it holds none: this server's are sealed with the token (a new one
 *    in DATA_DIR/token if none was given) and claimed; if another server
 *    claimed first, its identity is installed as above.
 * The token ends up in DATA_DIR/token (0600) either way, so a restart
 * needs no flag. *replaced is set when the CA or key changed on disk: the
 * caller runs pki_ensure again for leaf certificates of the new CA.
 * Returns 0, or -1 with *err (malloc'd). Nothing to do (0) on an
 * unshared storage. */
int cluster_identity_join(storage *st, const char *data_dir, const pki_options *po,
                          const pki_files *pki, const cluster_token_opts *t, bool *replaced,
                          char **err);

#endif
