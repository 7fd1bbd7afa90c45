/* `ckube restore`: installs a `ckube backup` file as a data directory's
 * SQLite store, as `etcdctl snapshot restore` makes a member's data dir
 * from a snapshot (storage/sqlite/snapshot.h does the work). */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "cmd/cmd.h"
#include "storage/sqlite/snapshot.h"
#include "storage/sqlite/sqlite.h"

static void restore_usage(FILE *f)
{
    fprintf(f, "Usage: ckube restore [--data-dir DIR] [--force] FILE\n\n"
               "Installs FILE, a copy made by `ckube backup`, as the SQLite store of DIR\n"
               "(DIR/state.db; DIR is made if missing). FILE is checked first (SQLite's\n"
               "integrity_check and ckube's schema), then copied into DIR, fsync'd and\n"
               "renamed into place, so DIR holds either the old store or the whole new one.\n"
               "Refuses while a ckube server runs on DIR (it holds DIR/state.lock), and\n"
               "refuses to replace an existing store unless --force.\n\n"
               "The objects keep their uids, resourceVersions and creation times. Clients\n"
               "must relist, as after any etcd restore: the store went back in time.\n"
               "DIR/pki (the cluster's CA, certificates and ServiceAccount key) is not part\n"
               "of the store: copy the backed-up DIR/pki to the new DIR before starting the\n"
               "server, or it makes a new CA and ServiceAccount key (old kubeconfigs and\n"
               "tokens stop working).\n\n"
               "Upstream: `etcdctl snapshot restore` is the counterpart.\n\n"
               "Flags:\n"
               "  --data-dir DIR   the data directory to restore into (default ./.ckube)\n"
               "  --force          replace DIR's existing store\n"
               "  -h, --help       this help\n");
}

int cmd_restore(int argc, char **argv)
{
    const char *data_dir = "./.ckube", *file = NULL;
    bool force = false;
    int code = cmd_snapshot_flags(argc, argv, "restore", restore_usage, &data_dir, &force, &file);
    if (code >= 0)
        return code;
    storage_sqlite_info info;
    bool busy = false;
    char *err = NULL;
    if (storage_sqlite_restore(file, data_dir, force, &busy, &info, &err) != 0) {
        if (busy)
            fprintf(
                stderr,
                "ckube restore: a ckube server is running on %s (it holds %s/" STORAGE_SQLITE_LOCK
                "); stop it first\n",
                data_dir, data_dir);
        else
            fprintf(stderr, "ckube restore: %s\n", err ? err : "failed");
        free(err);
        return 1;
    }
    printf("Restored %s to %s/" STORAGE_SQLITE_DB ": revision %lld, %lld objects\n", file, data_dir,
           (long long)info.rev, (long long)info.objects);
    char pki[4096];
    snprintf(pki, sizeof pki, "%s/pki", data_dir);
    if (access(pki, F_OK) != 0)
        printf("Note: %s does not exist: copy the backed-up pki directory there before starting "
               "the server, or it makes a new cluster CA and ServiceAccount key\n",
               pki);
    return 0;
}
