/* cmd.h - the subcommands of the ckube binary. Each takes argv with its
 * own name in argv[0] and returns the process exit code. */
#ifndef CKUBE_CMD_H
#define CKUBE_CMD_H

int cmd_server(int argc, char **argv);

#endif
