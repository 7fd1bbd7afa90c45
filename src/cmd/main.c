/* ckube: one multi-call binary: `ckube server` (the API server) and
 * `ckube controller-manager` (the built-in controllers). */
#include <stdio.h>
#include <string.h>

#include "cmd/cmd.h"

static void usage(FILE *f)
{
    fprintf(f, "Usage: ckube COMMAND [FLAGS]\n\n"
               "Commands:\n"
               "  server              Run the Kubernetes-compatible API server (with the\n"
               "                      controller-manager in-process unless disabled)\n"
               "  controller-manager  Run the built-in controllers against an API server\n"
               "  version      Print the version\n\n"
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
    if (!strcmp(cmd, "controller-manager"))
        return cmd_controller_manager(argc - 1, argv + 1);
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
