/* `ckube server`: flags, kubeconfig, signals, and the server's life. */
#include <arpa/inet.h>
#include <errno.h>
#include <event2/event.h>
#include <malloc.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "apiserver/server/apiserver.h"
#include "ckube/log.h"
#include "ckube/clock.h"
#include "ckube/json.h"
#include "cmd/cm_child.h"
#include "cmd/cmd.h"
#include "common/xalloc.h"

static void server_usage(FILE *f)
{
    fprintf(f, "Usage: ckube server [FLAGS]\n\n"
               "Runs a Kubernetes-compatible API server on an embedded SQLite store.\n\n"
               "Flags:\n"
               "  --data-dir DIR            where state lives (default ./.ckube)\n"
               "  --listen HOST:PORT        address to serve on (default 127.0.0.1:6443;\n"
               "                            loopback only until TLS and authentication land)\n"
               "  --write-kubeconfig PATH   kubeconfig pointing at this server\n"
               "                            (default DATA_DIR/kubeconfig)\n"
               "  --storage sqlite|memory   storage backend (default sqlite)\n"
               "  --http-threads N          HTTP event loops (default: CPUs, at most 4)\n"
               "  --watch-cache-size N      recent events kept per resource (default 4096):\n"
               "                            how far back a watch resumes, a paginated list\n"
               "                            continues and an Exact list reads\n"
               "  --controller-manager=BOOL run the built-in controllers (default true): the\n"
               "                            ckube-controller-manager beside this binary, as a\n"
               "                            supervised child process on the same Lease\n"
               "  --shutdown-delay-duration D\n"
               "                            on SIGTERM, keep serving for D (\"10s\", \"1m\";\n"
               "                            default 0) with /readyz failing, so load balancers\n"
               "                            move away first; then requests in flight finish\n"
               "                            (up to 60s) before the server exits. A second\n"
               "                            signal stops it at once\n"
               "  -v, --v N                 log verbosity (klog levels; -v=N, --v=N, -v N)\n"
               "  --vmodule PATTERN=N,...   verbosity per source file (klog's)\n"
               "  --log-file PATH           log to PATH (with --logtostderr=false, as klog)\n"
               "  --logtostderr=BOOL        log to stderr only (default true)\n"
               "  --alsologtostderr=BOOL    with --logtostderr=false, stderr too\n"
               "  -h, --help                this help\n");
}

static int split_listen(const char *s, char *host, size_t hn, int *port)
{
    const char *colon = strrchr(s, ':');
    if (!colon)
        return -1;
    size_t len = (size_t)(colon - s);
    if (len && s[0] == '[' && s[len - 1] == ']') {
        s++;
        len -= 2;
    }
    if (len == 0 || len >= hn)
        return -1;
    memcpy(host, s, len);
    host[len] = 0;
    char *end;
    long p = strtol(colon + 1, &end, 10);
    if (*end || p < 0 || p > 65535)
        return -1;
    *port = (int)p;
    return 0;
}

static bool is_loopback(const char *host)
{
    struct in_addr a4;
    struct in6_addr a6;
    if (inet_pton(AF_INET, host, &a4) == 1)
        return (ntohl(a4.s_addr) >> 24) == 127;
    if (inet_pton(AF_INET6, host, &a6) == 1)
        return IN6_IS_ADDR_LOOPBACK(&a6);
    return false;
}

static int mkdir_p(const char *dir)
{
    char buf[4096];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++) {
        if (*p == '/') {
            *p = 0;
            if (mkdir(buf, 0700) && errno != EEXIST)
                return -1;
            *p = '/';
        }
    }
    if (mkdir(buf, 0700) && errno != EEXIST)
        return -1;
    return 0;
}

static int write_kubeconfig(const char *path, const char *host, int port)
{
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", path) >= sizeof tmp)
        return -1;
    FILE *f = fopen(tmp, "w");
    if (!f)
        return -1;
    bool v6 = strchr(host, ':') != NULL;
    fprintf(f,
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- name: ckube\n"
            "  cluster:\n"
            "    server: http://%s%s%s:%d\n"
            /* Plain HTTP has no TLS to verify; @kubernetes/client-node refuses
             * an http:// server unless this is set. */
            "    insecure-skip-tls-verify: true\n"
            "contexts:\n"
            "- name: ckube\n"
            "  context:\n"
            "    cluster: ckube\n"
            "    user: ckube\n"
            "    namespace: default\n"
            "current-context: ckube\n"
            "users:\n"
            "- name: ckube\n"
            "  user: {}\n"
            "preferences: {}\n",
            v6 ? "[" : "", host, v6 ? "]" : "", port);
    if (fclose(f) != 0 || rename(tmp, path) != 0)
        return -1;
    return 0;
}

/* The built-in controllers: ckube-controller-manager as a child process,
 * with the same controllers and Lease as `ckube controller-manager`,
 * talking to this server over loopback like any client, without metrics
 * or health listeners of its own. NULL when it cannot run (logged); the
 * API is served either way. */
static cm_child *start_controller_manager(const char *url, const char *kubeconfig)
{
    char *bin = cm_child_find_binary();
    if (!bin) {
        CKUBE_ERROR("ckube-controller-manager is not beside this executable; serving without "
                    "the built-in controllers (--controller-manager=false silences this)");
        return NULL;
    }
    /* No client rate limit: it shares the machine with its server, as the
     * controllers did when they ran in-process. Logging as the server's
     * flags say (-v, --vmodule, --log-file, ...). */
    const char *args[24] = {"--master",       url, "--port",         "0",
                            "--healthz-port", "0", "--kube-api-qps", "-1"};
    size_t n = 8;
    for (const char *const *f = ckube_log_flag_args(); *f && n < 20; f++)
        args[n++] = *f;
    if (kubeconfig) { /* NULL when the kubeconfig could not be written */
        args[n++] = "--kubeconfig";
        args[n++] = kubeconfig;
    }
    args[n] = NULL;
    cm_child *c = cm_child_new(bin, args);
    free(bin);
    if (!c || cm_child_start(c) != 0) {
        CKUBE_ERROR("the built-in controllers did not start");
        cm_child_free(c);
        return NULL;
    }
    return c;
}

/* Serves until SIGTERM or SIGINT, restarting the controller-manager child
 * (when there is one) on SIGCHLD. Returns the signal that ended it. */
static int wait_for_shutdown(const sigset_t *set, cm_child *ctl)
{
    for (;;) {
        long ms = ctl ? cm_child_timeout_ms(ctl, ckube_monotonic_ns()) : -1;
        int sig;
        if (ms < 0) {
            sig = sigwaitinfo(set, NULL);
        } else {
            struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L};
            sig = sigtimedwait(set, NULL, &ts);
        }
        if (sig == SIGTERM || sig == SIGINT)
            return sig;
        if (ctl && (sig == SIGCHLD || (sig < 0 && errno == EAGAIN)))
            cm_child_poll(ctl, ckube_monotonic_ns());
    }
}

/* How long requests in flight get to finish once the listeners close
 * (kube-apiserver gives non-long-running requests 60 s as well). */
#define DRAIN_TIMEOUT_MS 60000

/* Waits until `until` (monotonic ns) or, when `drained` is set, until
 * that server has no request in flight. Returns false if a second
 * SIGTERM or SIGINT came first: the user asks to stop now. */
static bool shutdown_wait(const sigset_t *set, uint64_t until, apiserver *drained)
{
    for (;;) {
        uint64_t now = ckube_monotonic_ns();
        if (now >= until || (drained && apiserver_inflight(drained) <= 0))
            return true;
        uint64_t left = until - now;
        if (drained && left > 5000000u)
            left = 5000000u; /* look at the count every 5 ms */
        struct timespec ts = {.tv_sec = (time_t)(left / 1000000000u),
                              .tv_nsec = (long)(left % 1000000000u)};
        int sig = sigtimedwait(set, NULL, &ts);
        if (sig == SIGTERM || sig == SIGINT) {
            CKUBE_INFO("received a second %s, stopping now", sig == SIGTERM ? "SIGTERM" : "SIGINT");
            return false;
        }
    }
}

/* "0", "0s" or what ckube_parse_duration takes, up to an hour; -1 if not. */
static int64_t parse_delay(const char *s)
{
    if (!strcmp(s, "0") || !strcmp(s, "0s"))
        return 0;
    uint64_t ns = ckube_parse_duration(s);
    if (!ns || ns > 3600ull * 1000000000u)
        return -1;
    return (int64_t)ns;
}

int cmd_server(int argc, char **argv)
{
    /* The server's out-of-memory policy (common/xalloc.h): allocation
     * failure aborts, in jansson and libevent as in our own code. Before
     * either allocates anything. */
    json_set_alloc_funcs(xalloc_malloc, free);
    event_set_mem_functions(xalloc_malloc, xalloc_realloc, free);
    const char *data_dir = "./.ckube";
    const char *listen = "127.0.0.1:6443";
    const char *kubeconfig = NULL;
    const char *backend = "sqlite";
    int threads = 0;
    long ring = 0;
    bool run_cm = true;
    int64_t delay_ns = 0;
    static const struct option opts[] = {
        {"shutdown-delay-duration", required_argument, NULL, 'D'},
        {"controller-manager", optional_argument, NULL, 'C'},
        {"data-dir", required_argument, NULL, 'd'},
        {"listen", required_argument, NULL, 'l'},
        {"write-kubeconfig", required_argument, NULL, 'k'},
        {"storage", required_argument, NULL, 's'},
        {"http-threads", required_argument, NULL, 't'},
        {"watch-cache-size", required_argument, NULL, 'w'},
        CKUBE_LOG_GETOPT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    optind = 1;
    while ((c = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        char *lerr = NULL;
        int logflag = ckube_log_getopt(c, optarg, &lerr);
        if (logflag < 0) {
            fprintf(stderr, "ckube server: %s\n", lerr ? lerr : "out of memory");
            free(lerr);
            return 2;
        }
        if (logflag > 0)
            continue;
        switch (c) {
        case 'd':
            data_dir = optarg;
            break;
        case 'l':
            listen = optarg;
            break;
        case 'k':
            kubeconfig = optarg;
            break;
        case 's':
            backend = optarg;
            break;
        case 't':
            threads = atoi(optarg);
            break;
        case 'w': {
            char *end;
            ring = strtol(optarg, &end, 10);
            if (*end || ring < 16 || ring > (1L << 24)) {
                fprintf(stderr,
                        "ckube server: --watch-cache-size wants a number from 16 to %ld, got "
                        "\"%s\"\n",
                        1L << 24, optarg);
                return 2;
            }
            break;
        }
        case 'D':
            delay_ns = parse_delay(optarg);
            if (delay_ns < 0) {
                fprintf(stderr,
                        "ckube server: --shutdown-delay-duration wants a duration from 0s to 1h "
                        "(\"10s\", \"1m30s\"), got \"%s\"\n",
                        optarg);
                return 2;
            }
            break;
        case 'C':
            if (!optarg || !strcmp(optarg, "true")) {
                run_cm = true;
            } else if (!strcmp(optarg, "false")) {
                run_cm = false;
            } else {
                fprintf(stderr, "ckube server: --controller-manager wants true or false\n");
                return 2;
            }
            break;
        case 'h':
            server_usage(stdout);
            return 0;
        default:
            server_usage(stderr);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ckube server: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    char host[256];
    int port;
    if (split_listen(listen, host, sizeof host, &port) != 0) {
        fprintf(stderr, "ckube server: --listen wants HOST:PORT, got \"%s\"\n", listen);
        return 2;
    }
    if (!is_loopback(host)) {
        fprintf(stderr,
                "ckube server: refusing to listen on %s: without TLS and authentication the "
                "server only serves loopback addresses (127.0.0.0/8, ::1)\n",
                host);
        return 2;
    }
    if (strcmp(backend, "sqlite") && strcmp(backend, "memory")) {
        fprintf(stderr, "ckube server: --storage must be sqlite or memory\n");
        return 2;
    }
    if (mkdir_p(data_dir) != 0) {
        fprintf(stderr, "ckube server: cannot create %s: %s\n", data_dir, strerror(errno));
        return 1;
    }
    char kcbuf[4096 + 16];
    if (!kubeconfig) {
        snprintf(kcbuf, sizeof kcbuf, "%s/kubeconfig", data_dir);
        kubeconfig = kcbuf;
    }

    /* Signals are taken synchronously by this thread: block them before
     * any other thread starts so every thread inherits the mask. */
    signal(SIGPIPE, SIG_IGN);
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGTERM);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGCHLD);
    pthread_sigmask(SIG_BLOCK, &set, NULL);

    apiserver_config cfg = {
        .data_dir = strcmp(backend, "memory") ? data_dir : NULL,
        .listen_host = host,
        .port = port,
        .kubeconfig_path = kubeconfig,
        .nloops = threads,
        .watch_ring = (size_t)ring,
    };
    char *err = NULL;
    apiserver *s = apiserver_new(&cfg, &err);
    if (!s) {
        fprintf(stderr, "ckube server: %s\n", err ? err : "cannot start");
        free(err);
        return 1;
    }
    if (apiserver_start(s, &err) != 0) {
        fprintf(stderr, "ckube server: %s\n", err ? err : "cannot start");
        free(err);
        apiserver_stop(s);
        apiserver_free(s);
        return 1;
    }
    bool kc_written = write_kubeconfig(kubeconfig, host, s->port) == 0;
    if (!kc_written)
        CKUBE_WARN("could not write kubeconfig %s: %s", kubeconfig, strerror(errno));
    CKUBE_INFO("ckube server ready: serving http://%s%s%s:%d, %s storage in %s, kubeconfig %s",
               strchr(host, ':') ? "[" : "", host, strchr(host, ':') ? "]" : "", s->port, backend,
               data_dir, kubeconfig);

    char url[300];
    snprintf(url, sizeof url, "http://%s%s%s:%d", strchr(host, ':') ? "[" : "", host,
             strchr(host, ':') ? "]" : "", s->port);
    cm_child *ctl = run_cm ? start_controller_manager(url, kc_written ? kubeconfig : NULL) : NULL;
    /* Start-up builds large transient trees (schemas, the first list of
     * every resource); give their freed pages back so an idle server's
     * RSS is its real working set. */
    malloc_trim(0);

    int sig = wait_for_shutdown(&set, ctl);
    int rc = 0;
    CKUBE_INFO("received %s, shutting down", sig == SIGTERM ? "SIGTERM" : "SIGINT");
    /* kube-apiserver's order: not ready at once, still serving; after the
     * delay, no new connections and the requests in flight finish; then
     * watches end and the store closes. */
    apiserver_shutdown_begin(s);
    uint64_t t0 = ckube_monotonic_ns();
    if (ctl) {
        /* Controllers first (releasing their Lease) while the API is up;
         * their own graceful shutdown takes up to 30 s. */
        if (cm_child_stop(ctl, 25000) != 0)
            rc = 1;
        cm_child_free(ctl);
    }
    bool patient = true;
    if (delay_ns > 0) {
        CKUBE_INFO("/readyz is failing; serving for %.1fs more (--shutdown-delay-duration)",
                   (double)delay_ns / 1e9);
        patient = shutdown_wait(&set, t0 + (uint64_t)delay_ns, NULL);
    }
    apiserver_drain_begin(s);
    if (patient)
        shutdown_wait(&set, ckube_monotonic_ns() + (uint64_t)DRAIN_TIMEOUT_MS * 1000000u, s);
    if (apiserver_inflight(s) > 0)
        CKUBE_WARN("stopping with %ld requests in flight", apiserver_inflight(s));
    apiserver_stop(s);
    apiserver_free(s);
    CKUBE_INFO("stopped");
    return rc;
}
