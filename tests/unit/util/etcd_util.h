/* etcd_util.h - start and stop a real etcd member from C tests (the
 * Debian etcd-server package's /usr/bin/etcd, or $CKUBE_ETCD_BIN), on
 * free loopback ports with its data under $CKUBE_TEST_TMP. It dies with
 * the test (PR_SET_PDEATHSIG) and is killed at exit if still running, as
 * server_util.h's servers are. Include server_util.h first. */
#ifndef CKUBE_TEST_ETCD_UTIL_H
#define CKUBE_TEST_ETCD_UTIL_H

#include "util/server_util.h"

struct test_etcd {
    pid_t pid;
    int client_port, peer_port;
    char dir[512];
    char url[64]; /* http://127.0.0.1:PORT */
    char log[600];
};

/* Starts a one-member cluster and waits until its client port accepts
 * connections (30 s at most). 0, or -1 with the log's tail on stderr. */
static int teu_start(struct test_etcd *e)
{
    const char *bin = getenv("CKUBE_ETCD_BIN");
    if (!bin || !*bin)
        bin = "/usr/bin/etcd";
    if (access(bin, X_OK) != 0) {
        fprintf(stderr, "%s not found: the etcd tests need the etcd-server package\n", bin);
        return -1;
    }
    if (!e->client_port) {
        const char *tmp = getenv("CKUBE_TEST_TMP");
        if (!tmp || !*tmp)
            tmp = "/tmp";
        mkdir(tmp, 0755);
        static int seq;
        snprintf(e->dir, sizeof e->dir, "%s/etcd-%d-%ld-%d", tmp, (int)getpid(), (long)time(NULL),
                 ++seq);
        mkdir(e->dir, 0755);
        snprintf(e->log, sizeof e->log, "%s/etcd.log", e->dir);
        e->client_port = tsu_free_port();
        do
            e->peer_port = tsu_free_port();
        while (e->peer_port == e->client_port);
        snprintf(e->url, sizeof e->url, "http://127.0.0.1:%d", e->client_port);
    }
    char data[600], client[64], peer[64], cluster[96];
    snprintf(data, sizeof data, "%s/data", e->dir);
    snprintf(client, sizeof client, "http://127.0.0.1:%d", e->client_port);
    snprintf(peer, sizeof peer, "http://127.0.0.1:%d", e->peer_port);
    snprintf(cluster, sizeof cluster, "t=%s", peer);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        FILE *log = freopen(e->log, "a", stderr);
        (void)log;
        execl(bin, bin, "--name", "t", "--data-dir", data, "--listen-client-urls", client,
              "--advertise-client-urls", client, "--listen-peer-urls", peer,
              "--initial-advertise-peer-urls", peer, "--initial-cluster", cluster, "--log-level",
              "warn", (char *)NULL);
        _exit(127);
    }
    e->pid = pid;
    tsu_track(pid);
    for (int i = 0; i < 600; i++) {
        if (tsu_port_open(e->client_port))
            return 0;
        int st;
        if (waitpid(pid, &st, WNOHANG) == pid) {
            tsu_untrack(pid);
            e->pid = 0;
            fprintf(stderr, "etcd exited at start (see %s)\n", e->log);
            return -1;
        }
        usleep(50000);
    }
    fprintf(stderr, "etcd did not come up on port %d within 30 s\n", e->client_port);
    return -1;
}

/* Stops it with `sig` and reaps it. */
static void teu_stop(struct test_etcd *e, int sig)
{
    if (e->pid <= 0)
        return;
    kill(e->pid, sig);
    waitpid(e->pid, NULL, 0);
    tsu_untrack(e->pid);
    e->pid = 0;
}

#endif
