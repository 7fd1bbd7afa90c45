/* server_util.h - start and stop a real `ckube server` from C tests.
 *
 * The server binary is $CKUBE_BIN (set by CTest). It listens on a free
 * loopback port over HTTPS (its default), keeps its state in a fresh
 * directory under $CKUBE_TEST_TMP (its certificates in data/pki) and
 * writes a kubeconfig there (https URL, the cluster CA, the admin's client
 * certificate), which tsu_client uses. An atexit hook kills any
 * server still running, so a failed assertion never leaves one behind;
 * a test that dies without running it takes its servers along (they
 * ask for SIGKILL when their parent dies).
 *
 * For tests that include <cmocka.h> first (tsu_do_json asserts).
 */
#ifndef CKUBE_TEST_SERVER_UTIL_H
#define CKUBE_TEST_SERVER_UTIL_H

#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/json.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/time.h>
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
    /* Set before tsu_start: --controller-manager=false, for tests of a
     * built-in controller that the server's own child would also run. */
    bool no_controller_manager;
};

/* The pids of the servers running now, so that they are killed at exit
 * even when a failed assertion left a test early: pids, not pointers to
 * the tests' structs, which may be stack frames long gone by then. */
static pid_t tsu_live[8];

static inline void tsu_kill_all(void)
{
    for (int i = 0; i < 8; i++) {
        if (tsu_live[i] > 0) {
            kill(tsu_live[i], SIGKILL);
            waitpid(tsu_live[i], NULL, 0);
            tsu_live[i] = 0;
        }
    }
}

static inline void tsu_track(pid_t pid)
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

static inline void tsu_untrack(pid_t pid)
{
    for (int i = 0; i < 8; i++)
        if (tsu_live[i] == pid)
            tsu_live[i] = 0;
}

/* A port nothing listens on right now, chosen below the kernel's
 * ephemeral range. A port from that range (what binding to port 0 gives)
 * can be taken while a killed server is down: a client that reconnects
 * to 127.0.0.1:P can be handed P as its own source port, and that
 * connect succeeds as a TCP self-connection, so the restarted server
 * finds its port in use. Below the range no client socket ever gets it. */
static inline int tsu_free_port(void)
{
    int lo = 32768;
    FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "r");
    if (f) {
        if (fscanf(f, "%d", &lo) != 1)
            lo = 32768;
        fclose(f);
    }
    if (lo <= 12000)
        lo = 32768; /* an odd range: keep to the default's lower part */
    static unsigned seed;
    if (!seed)
        seed = (unsigned)getpid() * 2654435761u ^ (unsigned)time(NULL);
    for (int attempt = 0; attempt < 200; attempt++) {
        int port = 10000 + (int)(rand_r(&seed) % (unsigned)(lo - 10000));
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        if (fd < 0)
            return -1;
        struct sockaddr_in a = {.sin_family = AF_INET,
                                .sin_port = htons((uint16_t)port),
                                .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = bind(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
        close(fd);
        if (ok)
            return port;
    }
    return -1;
}

static inline bool tsu_port_open(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((uint16_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    /* Bounded: a connect to a listener whose backlog is full waits for
     * SYN retries, minutes by default (connect honours SO_SNDTIMEO). */
    struct timeval tv = {.tv_sec = 1};
    bool ok = fd >= 0 && setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv) == 0 &&
              connect(fd, (struct sockaddr *)&a, sizeof(a)) == 0;
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Copies the last `n` bytes of the server's log to stderr, so that a
 * failure in CI shows why the server did not come up. */
static inline void tsu_log_tail(const struct test_server *s, long n)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return;
    if (fseek(f, 0, SEEK_END) == 0 && ftell(f) > n)
        fseek(f, -n, SEEK_END);
    else
        rewind(f);
    fprintf(stderr, "--- last lines of %s ---\n", s->log);
    char buf[4096];
    size_t got;
    while ((got = fread(buf, 1, sizeof buf, f)) > 0)
        fwrite(buf, 1, got, stderr);
    fprintf(stderr, "--- end of %s ---\n", s->log);
    fclose(f);
}

/* Whether the server's log says its port was taken. */
static inline bool tsu_log_says_port_taken(const struct test_server *s)
{
    FILE *f = fopen(s->log, "r");
    if (!f)
        return false;
    char line[1024];
    bool taken = false;
    while (fgets(line, sizeof line, f))
        taken |= strstr(line, "Address already in use") != NULL;
    fclose(f);
    return taken;
}

static inline int tsu_start_once(struct test_server *s, const char *storage_kind);

/* Starts (or restarts, same port and data) the server; waits until it
 * accepts connections (up to 30 s). Returns 0 or -1. `storage` is
 * "sqlite" or "memory". A first start whose free port another process
 * took between tsu_free_port and the server's bind (tests run in
 * parallel) tries again on another port, at most three times. */
static inline int tsu_start(struct test_server *s, const char *storage_kind)
{
    bool fresh = s->port == 0;
    for (int attempt = 0;; attempt++) {
        int rc = tsu_start_once(s, storage_kind);
        if (rc == 0 || !fresh || attempt == 2 || !tsu_log_says_port_taken(s))
            return rc;
        fprintf(stderr, "port %d was taken: starting on another\n", s->port);
        s->port = 0;
    }
}

static inline int tsu_start_once(struct test_server *s, const char *storage_kind)
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
    /* The server writes it once it listens: on a restart, the previous
     * run's copy must not be taken for readiness. */
    unlink(s->kubeconfig);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0)
        return -1;
    if (pid == 0) {
        /* The server dies with the test even when the test cannot run its
         * atexit cleanup (abort, a sanitizer's halt_on_error, SIGKILL). */
        prctl(PR_SET_PDEATHSIG, SIGKILL);
        if (getppid() != parent)
            _exit(127);
        FILE *log = freopen(s->log, "a", stderr);
        (void)log;
        execl(bin, bin, "server", "--data-dir", data, "--listen", listen, "--write-kubeconfig",
              s->kubeconfig, "--storage", storage_kind,
              s->no_controller_manager ? "--controller-manager=false" : (char *)NULL, (char *)NULL);
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
            fprintf(stderr, "ckube server exited at start\n");
            tsu_log_tail(s, 4000);
            return -1;
        }
        usleep(50000);
    }
    fprintf(stderr, "ckube server did not come up on port %d within 30 s\n", s->port);
    tsu_log_tail(s, 4000);
    return -1;
}

/* Stops the server with `sig` (SIGTERM: graceful; SIGKILL: crash) and
 * reaps it. Returns the exit status for SIGTERM (0 = clean). */
static inline int tsu_stop(struct test_server *s, int sig)
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

/* A client for server s, from the kubeconfig it wrote, without the
 * client-side rate limit; NULL on failure. The caller frees it. */
static inline ckube_client *tsu_client(const struct test_server *s)
{
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    ckube_config_overrides ov = {.kubeconfig = s->kubeconfig};
    if (ckube_config_load(&ov, &cfg, &err) != 0) {
        ckube_status_free(err);
        return NULL;
    }
    cfg->qps = -1;
    ckube_client *c = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    ckube_status_free(err);
    return c;
}

/* A request with a JSON body through c that must succeed (the test fails
 * with the server's message otherwise); *out, when asked for, is the
 * answer parsed (a new reference, NULL if it is not JSON). */
static inline void tsu_do_json(ckube_client *c, const char *method, const char *path,
                               const char *body, json_t **out)
{
    ckube_request rq = {.method = method, .path = path, .body = body, .body_len = strlen(body)};
    ckube_response resp = {0};
    ckube_status *err = NULL;
    if (ckube_client_do(c, &rq, &resp, &err) != 0)
        fail_msg("%s %s: %s", method, path, err && err->message ? err->message : "?");
    if (out)
        *out = ckube_json_loads(resp.body, resp.body_len, NULL);
    ckube_response_free(&resp);
}

/* Makes ServiceAccount ns/name through c and returns a token of it (the
 * TokenRequest's, malloc'd); the test fails if either request does. */
static inline char *tsu_sa_token(ckube_client *c, const char *ns, const char *name)
{
    char path[512], body[300];
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/serviceaccounts", ns);
    snprintf(body, sizeof body, "{\"metadata\":{\"name\":\"%s\"}}", name);
    tsu_do_json(c, "POST", path, body, NULL);
    snprintf(path, sizeof path, "/api/v1/namespaces/%s/serviceaccounts/%s/token", ns, name);
    json_t *tr = NULL;
    tsu_do_json(c, "POST", path, "{\"spec\":{}}", &tr);
    const char *token = json_string_value(json_object_get(json_object_get(tr, "status"), "token"));
    if (!token)
        fail_msg("no token for ServiceAccount %s/%s", ns, name);
    char *out = strdup(token);
    json_decref(tr);
    return out;
}

#endif
