/* ckube: the API server (`ckube server`) and the command front end.
 * `ckube controller-manager` runs the ckube-controller-manager program
 * installed beside this one, as git runs its git-* programs: the server
 * binary links no network client, the controllers' binary does. */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmd/cm_child.h"
#include "cmd/cmd.h"

/* Replaces this process with ckube-controller-manager (same pid, so
 * signals and exit status reach it directly). Returns only on failure. */
static int exec_controller_manager(char **argv)
{
    char *bin = cm_child_find_binary();
    if (!bin) {
        fprintf(stderr, "ckube: ckube-controller-manager is not installed beside this binary\n");
        return 1;
    }
    argv[0] = bin;
    execv(bin, argv);
    fprintf(stderr, "ckube: cannot execute %s: %s\n", bin, strerror(errno));
    free(bin);
    return 1;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: ckube COMMAND [FLAGS]\n\n"
               "Commands:\n"
               "  server              Run the Kubernetes-compatible API server (and the\n"
               "                      controller-manager as its child unless disabled)\n"
               "  controller-manager  Run the built-in controllers against an API server\n"
               "  backup              Copy the SQLite store to a file while the server runs\n"
               "                      (as etcdctl snapshot save)\n"
               "  restore             Install such a copy as a data dir's store (server\n"
               "                      stopped; as etcdctl snapshot restore)\n"
               "  migrate             Copy the SQLite store's objects into an empty etcd\n"
               "  version             Print the version\n\n"
               "Run 'ckube COMMAND --help' for a command's flags.\n");
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        usage(stderr);
        return 2;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "server"))
        return cmd_server(argc - 1, argv + 1);
    if (!strcmp(cmd, "backup"))
        return cmd_backup(argc - 1, argv + 1);
    if (!strcmp(cmd, "restore"))
        return cmd_restore(argc - 1, argv + 1);
    if (!strcmp(cmd, "migrate"))
        return cmd_migrate(argc - 1, argv + 1);
    if (!strcmp(cmd, "controller-manager"))
        return exec_controller_manager(argv + 1);
    if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
        printf("ckube %s (Kubernetes API v1.31 compatible)\n", CKUBE_VERSION);
        return 0;
    }
    if (!strcmp(cmd, "help") || !strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        usage(stdout);
        return 0;
    }
    fprintf(stderr, "ckube: unknown command \"%s\"\n\n", cmd);
    usage(stderr);
    return 2;
}
