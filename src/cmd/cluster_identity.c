/* `ckube server` joining the shared cluster identity (cluster_identity.h). */
#include "cmd/cluster_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "apiserver/pki/identity.h"
#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

/* The first line of a token file, malloc'd; NULL with *err. */
static char *read_token(const char *path, bool must_exist, char **err)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        if (must_exist || errno != ENOENT)
            ckube__set_err(err, "cannot read the token from %s: %s", path, strerror(errno));
        return NULL;
    }
    char buf[1024];
    char *line = fgets(buf, sizeof buf, f);
    fclose(f);
    size_t n = line ? strcspn(buf, "\r\n") : 0;
    if (!n) {
        ckube__set_err(err, "%s holds no token", path);
        return NULL;
    }
    return xstrndup(buf, n);
}

static int write_token(const char *path, const char *token, char **err)
{
    char *tmp = xasprintf("%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    bool ok = fd >= 0 && dprintf(fd, "%s\n", token) > 0 && fsync(fd) == 0;
    if (fd >= 0)
        close(fd);
    ok = ok && rename(tmp, path) == 0;
    if (!ok) {
        ckube__set_err(err, "cannot write %s: %s", path, strerror(errno));
        unlink(tmp);
    }
    free(tmp);
    return ok ? 0 : -1;
}

/* Installs the datastore's identity `blob`. Files this start made
 * (fresh CA and key) give way; files that were there must match. */
static int install(const char *blob, size_t len, const char *token, const pki_options *po,
                   const pki_files *pki, bool *replaced, char **err)
{
    bool ours_new = pki->made_ca && pki->made_sa, changed = false;
    if (identity_unseal(po->dir, token, blob, len, ours_new, &changed, err) != 0)
        return -1;
    *replaced = changed;
    return 0;
}

int cluster_identity_join(storage *st, const char *data_dir, const pki_options *po,
                          const pki_files *pki, const cluster_token_opts *t, bool *replaced,
                          char **err)
{
    *replaced = false;
    if (!storage_shared(st))
        return 0;
    char *token_path = xasprintf("%s/token", data_dir);
    char *token = t->token        ? xstrdup(t->token)
                  : t->token_file ? read_token(t->token_file, true, err)
                                  : read_token(token_path, false, err);
    int rc = -1;
    if (!token && (t->token_file || (err && *err)))
        goto out;
    char *blob = NULL;
    size_t len = 0;
    int got = storage_claim_cluster_data(st, NULL, 0, &blob, &len);
    if (got == STORAGE_OK) {
        if (!token) {
            ckube__set_err(err, "the datastore already holds a cluster's identity (its CA and "
                                "ServiceAccount key): give this server the first server's token "
                                "(its DATA_DIR/token) with --token-file or --token");
            free(blob);
            goto out;
        }
        rc = install(blob, len, token, po, pki, replaced, err);
        free(blob);
        if (rc == 0)
            CKUBE_INFO("joined the cluster: its CA and ServiceAccount key are in the datastore");
    } else if (got == STORAGE_ERR_NOT_FOUND) {
        bool made_token = !token;
        if (made_token && !(token = identity_token_new())) {
            ckube__set_err(err, "no randomness for a cluster token");
            goto out;
        }
        char *mine = NULL;
        size_t mine_len = 0;
        if (identity_seal(po->dir, token, &mine, &mine_len, err) != 0)
            goto out;
        got = storage_claim_cluster_data(st, mine, mine_len, &blob, &len);
        if (got != STORAGE_OK) {
            ckube__set_err(err, "cannot store the cluster identity: %s", storage_strerror(got));
            free(mine);
            goto out;
        }
        bool won = len == mine_len && !memcmp(blob, mine, len);
        free(mine);
        rc = won ? 0 : install(blob, len, token, po, pki, replaced, err);
        free(blob);
        if (rc == 0 && won)
            CKUBE_INFO("stored the cluster identity (CA, ServiceAccount key) in the datastore, "
                       "sealed with the token in %s: give it to the other servers with "
                       "--token-file",
                       token_path);
        else if (rc == 0)
            CKUBE_INFO("joined the cluster: another server stored its identity first");
    } else {
        ckube__set_err(err, "cannot read the cluster identity from the datastore: %s",
                       storage_strerror(got));
        goto out;
    }
    /* the token beside the data, so that a restart needs no flag */
    if (rc == 0) {
        char *have = read_token(token_path, false, NULL);
        if (!have || strcmp(have, token))
            rc = write_token(token_path, token, err);
        free(have);
    }
out:
    if (token)
        memset(token, 0, strlen(token));
    free(token);
    free(token_path);
    return rc;
}
