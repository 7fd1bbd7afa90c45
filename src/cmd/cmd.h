/* cmd.h - the subcommands of the ckube binary. Each takes argv with its
 * own name in argv[0] and returns the process exit code. */
#ifndef CKUBE_CMD_H
#define CKUBE_CMD_H

int cmd_server(int argc, char **argv);
/* The SQLite store's online backup, its restore, and its move to etcd
 * (backup.c, restore.c, migrate.c). */
int cmd_backup(int argc, char **argv);
int cmd_restore(int argc, char **argv);
int cmd_migrate(int argc, char **argv);

#endif
