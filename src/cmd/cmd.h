/* cmd.h - the subcommands of the ckube binary. Each takes argv with its
 * own name in argv[0] and returns the process exit code. */
#ifndef CKUBE_CMD_H
#define CKUBE_CMD_H

#include <stdbool.h>
#include <stdio.h>

int cmd_server(int argc, char **argv);
/* The SQLite store's online backup, its restore, and its move to etcd
 * (backup.c, restore.c, migrate.c). */
int cmd_backup(int argc, char **argv);
int cmd_restore(int argc, char **argv);
/* The flags backup and restore share (--data-dir, --force, -h, one FILE),
 * into *data_dir, *force and *file (borrowed from argv). Returns -1 to go
 * on, else the exit code (usage said on stdout or stderr). */
int cmd_snapshot_flags(int argc, char **argv, const char *cmd, void (*usage)(FILE *),
                       const char **data_dir, bool *force, const char **file);
int cmd_migrate(int argc, char **argv);

#endif
