/* server_util.h - start and stop a real `ckube server` from C tests.
 *
 * The server binary is $CKUBE_BIN (set by CTest). It listens on a free
 * loopback port, keeps its state in a fresh directory under
 * $CKUBE_TEST_TMP and writes a kubeconfig there. An atexit hook kills any
 * server still running, so a failed assertion never leaves one behind.
 */
#ifndef CKUBE_TEST_SERVER_UTIL_H
#define CKUBE_TEST_SERVER_UTIL_H

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

struct test_server {
    pid_t pid;
    int port;
    char dir[512];
    char kubeconfig[600];
    char log[600];
};

/* The pids of the servers running now, so that they are killed at exit
 * even when a failed assertion left a test early: pids, not pointers to
 * the tests' structs, which may be stack frames long gone by then. */
static pid_t tsu_live[8];

static void tsu_kill_all(void)
{
    for (int i = 0; i < 8; i++) {
        if (tsu_live[i] > 0) {
            kill(tsu_live[i], SIGKILL);
            waitpid(tsu_live[i], NULL, 0);
            tsu_live[i] = 0;
        }
    }
}

static void tsu_track(pid_t pid)
{
    static bool hooked;
    if (!hooked) {
        atexit(tsu_kill_all);
        hooked = true;
    }
    for (int i = 0; i < 8; i++) {
        if (tsu_live[i] <= 0) {
            tsu_live[i] = pid;
            return;
        }
    }
}

static void tsu_untrack(pid_t pid)
{
    for (int i = 0; i < 8; i++)
        if (tsu_live[i] == pid)
            tsu_live[i] = 0;
}

/* A port nothing listens on right now (bind to 0, read, close). */
static int tsu_free_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof(a);
    if (fd < 0 || bind(fd, (struct sockaddr *)&a, sizeof(a)) != 0 ||
        getsockname(fd, (struct sockaddr *)&a, &len) != 0) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    close(fd);
    return ntohs(a.sin_port);
}

static bool tsu_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bool ok = fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Starts (or restarts, same port and data) the server; waits until it
 * accepts connections (up to 30 s). Returns 0 or -1. `storage` is
 * "sqlite" or "memory". */
static int tsu_start(struct test_server *s, const char *storage)
{
    const char *bin = getenv("CKUBE_BIN");
    if (!bin || !*bin) {
        fprintf(stderr, "CKUBE_BIN is not set\n");
        return -1;
    }
    if (s->port == 0) {
        const char *tmp = getenv("CKUBE_TEST_TMP");
        if (!tmp || !*tmp)
            tmp = "/tmp";
        mkdir(tmp, 0755);
        /* Unique per server: two started within a second must not share
         * a kubeconfig (the second would read the first's port). */
        static int seq;
        snprintf(s->dir, sizeof(s->dir), "%s/srv-%d-%ld-%d", tmp, (int)getpid(), (long)time(NULL),
                 ++seq);
        mkdir(s->dir, 0755);
        snprintf(s->kubeconfig, sizeof(s->kubeconfig), "%s/kubeconfig", s->dir);
        snprintf(s->log, sizeof(s->log), "%s/server.log", s->dir);
        s->port = tsu_free_port();
        if (s->port <= 0)
            return -1;
    }
    char listen[64], data[600];
    snprintf(listen, sizeof(listen), "127.0.0.1:%d", s->port);
    snprintf(data, sizeof(data), "%s/data", s->dir);
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        FILE *log = freopen(s->log, "a", stderr);
        (void)log;
        execl(bin, bin, "server", "--data-dir", data, "--listen", listen, "--write-kubeconfig",
              s->kubeconfig, "--storage", storage, (char *)NULL);
        _exit(127);
    }
    s->pid = pid;
    tsu_track(pid);
    for (int i = 0; i < 600; i++) {
        if (tsu_port_open(s->port) && access(s->kubeconfig, R_OK) == 0)
            return 0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            tsu_untrack(pid);
            s->pid = 0;
            fprintf(stderr, "ckube server exited at start; see %s\n", s->log);
            return -1;
        }
        usleep(50000);
    }
    return -1;
}

/* Stops the server with `sig` (SIGTERM: graceful; SIGKILL: crash) and
 * reaps it. Returns the exit status for SIGTERM (0 = clean). */
static int tsu_stop(struct test_server *s, int sig)
{
    if (s->pid <= 0)
        return -1;
    kill(s->pid, sig);
    int st = 0;
    waitpid(s->pid, &st, 0);
    tsu_untrack(s->pid);
    s->pid = 0;
    return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
}

#endif
