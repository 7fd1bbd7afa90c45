/* `ckube backup`: an online, consistent copy of the SQLite store in one
 * file, as `etcdctl snapshot save` makes of etcd (storage/sqlite/
 * snapshot.h does the work; this file is flags and words). */
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "cmd/cmd.h"
#include "storage/sqlite/snapshot.h"

static void backup_usage(FILE *f)
{
    fprintf(f, "Usage: ckube backup [--data-dir DIR] [--force] FILE\n\n"
               "Copies the SQLite store (DIR/state.db) to FILE, consistently and online:\n"
               "`ckube server` keeps serving and writing while the copy is made, and FILE\n"
               "holds the store as of one commit (every write acknowledged before the\n"
               "backup began, and none half). FILE is written as FILE.tmp, fsync'd and\n"
               "renamed, with mode 0600 (the store holds Secrets). It is a complete store:\n"
               "`ckube restore` installs it as a data directory's state.db, which `ckube\n"
               "server --data-dir` opens.\n\n"
               "The copy holds the API objects only, as an etcd snapshot does: the\n"
               "cluster's certificates and keys (DIR/pki) are not in it; keep a copy of\n"
               "DIR/pki with it, or a restored server makes a new CA and ServiceAccount key.\n\n"
               "Upstream: kube-apiserver has no backup command; `etcdctl snapshot save`\n"
               "is its counterpart.\n\n"
               "Flags:\n"
               "  --data-dir DIR   the server's data directory (default ./.ckube)\n"
               "  --force          overwrite FILE if it exists\n"
               "  -h, --help       this help\n");
}

int cmd_snapshot_flags(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                       const char **data_dir, bool *force, const char **file)
{
    static const struct option opts[] = {
        {"data-dir", required_argument, NULL, 'd'},
        {"force", no_argument, NULL, 'f'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        switch (c) {
        case 'd':
            *data_dir = optarg;
            break;
        case 'f':
            *force = true;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    if (argc - optind != 1) {
        fprintf(stderr, "ckube %s: %s\n\n", cmd,
                optind < argc ? "one FILE only" : "the backup FILE is missing");
        usage(stderr);
        return 2;
    }
    *file = argv[optind];
    return -1;
}

int cmd_backup(int argc, char **argv)
{
    const char *data_dir = "./.ckube", *file = NULL;
    bool force = false;
    int code = cmd_snapshot_flags(argc, argv, "backup", backup_usage, &data_dir, &force, &file);
    if (code >= 0)
        return code;
    storage_sqlite_info info;
    char *err = NULL;
    if (storage_sqlite_backup(data_dir, file, force, &info, &err) != 0) {
        fprintf(stderr, "ckube backup: %s\n", err ? err : "failed");
        free(err);
        return 1;
    }
    /* etcdctl's words, then what `etcdutl snapshot status` would add */
    printf("Snapshot saved at %s\n", file);
    printf("revision %lld, %lld objects, %lld bytes (%s/pki is not included)\n",
           (long long)info.rev, (long long)info.objects, (long long)info.bytes, data_dir);
    return 0;
}
