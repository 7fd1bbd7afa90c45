/* `ckube server`: flags, kubeconfig, signals, and the server's life. */
#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <event2/event.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <fcntl.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>

#include "apiserver/pki/pki.h"
#include "apiserver/server/apiserver.h"
#include "ckube/log.h"
#include "ckube/clock.h"
#include "ckube/json.h"
#include "apiserver/audit/log.h"
#include "apiserver/audit/policy.h"
#include "cmd/allocator.h"
#include "cmd/cm_child.h"
#include "cmd/cmd.h"
#include "common/text.h"
#include "common/xalloc.h"
#include "cmd/cluster_identity.h"
#include "cmd/storage_open.h"
#include "storage/etcd/etcd.h"

static void server_usage(FILE *f)
{
    fprintf(f, "Usage: ckube server [FLAGS]\n\n"
               "Runs a Kubernetes-compatible API server on an embedded SQLite store.\n\n"
               "Flags:\n"
               "  --data-dir DIR            where state lives (default ./.ckube)\n"
               "  --listen HOST:PORT        address to serve on (default 127.0.0.1:6443;\n"
               "                            0.0.0.0 or [::] for every interface)\n"
               "  --write-kubeconfig PATH   kubeconfig pointing at this server, with its CA and\n"
               "                            an admin client certificate (system:masters)\n"
               "                            (default DATA_DIR/kubeconfig)\n"
               "  --write-kubeconfig-mode MODE\n"
               "                            the kubeconfig's file mode (octal; default 0600)\n"
               "  --tls-cert-file PATH      serving certificate (PEM, then its chain); default:\n"
               "                            DATA_DIR/pki/serving.crt, made and renewed by the\n"
               "                            server, signed by its cluster CA (pki/ca.crt)\n"
               "  --tls-private-key-file PATH\n"
               "                            the serving certificate's key\n"
               "  --client-ca-file PATH     CAs whose client certificates authenticate, besides\n"
               "                            the cluster CA. The TLS files are reloaded when\n"
               "                            they change\n"
               "  --tls-san NAME            an extra DNS name or IP address for the made\n"
               "                            serving certificate (repeatable, or comma-separated)\n"
               "  --plain-http              serve plain HTTP without TLS (loopback only; for\n"
               "                            tests and benchmarks, never the default); its\n"
               "                            requests are system:unsecured in system:masters\n"
               "  --anonymous-auth=BOOL     requests without credentials are system:anonymous\n"
               "                            (default true, as kube-apiserver); false: 401\n"
               "  --audit-policy-file PATH  audit.k8s.io/v1 Policy: which requests are audited, at\n"
               "                            which level (none: no auditing)\n"
               "  --audit-log-path PATH     the audit log (JSON lines; \"-\" is stdout), rotated\n"
               "                            by --audit-log-maxsize MB (100), keeping\n"
               "                            --audit-log-maxbackup files (100) of at most\n"
               "                            --audit-log-maxage days (366); --audit-log-compress,\n"
               "                            --audit-log-format json|legacy, --audit-log-mode\n"
               "                            blocking|blocking-strict|batch\n"
               "  --token-auth-file PATH    static bearer tokens: CSV token,user,uid[,\"groups\"]\n"
               "  --service-account-issuer URL\n"
               "                            the iss of ServiceAccount tokens (default\n"
               "                            https://kubernetes.default.svc.cluster.local)\n"
               "  --api-audiences AUD,...   audiences the API accepts in ServiceAccount tokens\n"
               "                            (default: the issuer)\n"
               "  --storage sqlite|memory|etcd\n"
               "                            storage backend (default sqlite)\n"
               "  --etcd-servers URL,...    etcd members (with --storage etcd)\n"
               "  --etcd-prefix PREFIX      where the objects live in etcd (default /registry),\n"
               "                            laid out as kube-apiserver's\n"
               "  --token TOKEN, --token-file PATH\n"
               "                            on etcd: the token that seals the cluster identity\n"
               "                            (CA, ServiceAccount key) kept there for every\n"
               "                            server; the first server makes one in\n"
               "                            DATA_DIR/token, give it to the others\n"
               "  --etcd-cafile, --etcd-certfile, --etcd-keyfile PATH\n"
               "                            TLS to etcd\n"
               "  --etcd-compaction-interval D\n"
               "                            compact the storage's history every D (default\n"
               "                            5m; 0 = never), to the revision seen D before; on\n"
               "                            etcd one server per round, as kube-apiserver\n"
               "  --http-threads N          HTTP event loops (default: CPUs, at most 4)\n"
               "  --watch-cache-size N      recent events kept per resource (default 4096):\n"
               "                            how far back a watch resumes, a paginated list\n"
               "                            continues and an Exact list reads\n"
               "  --controller-manager=BOOL run the built-in controllers (default true): the\n"
               "                            ckube-controller-manager beside this binary, as a\n"
               "                            supervised child process on the same Lease, as\n"
               "                            system:kube-controller-manager (DATA_DIR/\n"
               "                            controller-manager.kubeconfig) with each controller\n"
               "                            on its own ServiceAccount's token\n"
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

/* The contents of `path` base64-encoded (malloc'd), or NULL. */
static char *file_base64(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *data = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            cap = cap ? cap * 2 : 4096;
            data = xrealloc(data, cap);
        }
        size_t n = fread(data + len, 1, cap - len, f);
        len += n;
        if (n == 0)
            break;
    }
    bool ok = !ferror(f);
    fclose(f);
    char *out = NULL;
    if (ok && len <= (1u << 20)) {
        out = xmalloc(4 * ((len + 2) / 3) + 1);
        EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)data, (int)len);
    }
    free(data);
    return out;
}

/* What a written kubeconfig says: where the server is and, over TLS,
 * the CA to trust and a client certificate and key (the admin's, or the
 * controller-manager's). */
typedef struct kubeconfig_spec {
    const char *path;
    mode_t mode;
    const char *url;
    const char *ca_file, *cert_file, *key_file; /* NULL: plain HTTP */
    const char *user;                           /* the users entry's name */
} kubeconfig_spec;

/* Writes the kubeconfig through a temporary file renamed into place,
 * with its mode set whatever the umask. The certificates and key are
 * embedded (*-data): the file works wherever it is copied, as k3s's. */
static int write_kubeconfig(const kubeconfig_spec *k)
{
    char tmp[4200];
    if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp", k->path) >= sizeof tmp)
        return -1;
    char *ca = NULL, *cert = NULL, *key = NULL;
    if (k->ca_file && (!(ca = file_base64(k->ca_file)) || !(cert = file_base64(k->cert_file)) ||
                       !(key = file_base64(k->key_file)))) {
        free(ca);
        free(cert);
        return -1;
    }
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, k->mode);
    FILE *f = fd >= 0 ? fdopen(fd, "w") : NULL;
    if (!f) {
        if (fd >= 0)
            close(fd);
        free(ca);
        free(cert);
        free(key);
        return -1;
    }
    fchmod(fd, k->mode);
    fprintf(f,
            "apiVersion: v1\n"
            "kind: Config\n"
            "clusters:\n"
            "- name: ckube\n"
            "  cluster:\n"
            "    server: %s\n",
            k->url);
    if (ca)
        fprintf(f, "    certificate-authority-data: %s\n", ca);
    else /* plain HTTP has no TLS to verify; @kubernetes/client-node
          * refuses an http:// server unless this is set */
        fprintf(f, "    insecure-skip-tls-verify: true\n");
    fprintf(f,
            "contexts:\n"
            "- name: ckube\n"
            "  context:\n"
            "    cluster: ckube\n"
            "    user: %s\n"
            "    namespace: default\n"
            "current-context: ckube\n"
            "users:\n"
            "- name: %s\n",
            k->user, k->user);
    if (cert)
        fprintf(f,
                "  user:\n"
                "    client-certificate-data: %s\n"
                "    client-key-data: %s\n",
                cert, key);
    else
        fprintf(f, "  user: {}\n");
    fprintf(f, "preferences: {}\n");
    free(ca);
    free(cert);
    free(key);
    if (fflush(f) != 0 || fsync(fd) != 0) {
        fclose(f);
        unlink(tmp);
        return -1;
    }
    if (fclose(f) != 0 || rename(tmp, k->path) != 0) {
        unlink(tmp);
        return -1;
    }
    return 0;
}

/* The serving certificate's SANs: the loopback names, this host's name,
 * the listen address (unless a wildcard) and --tls-san's. */
static size_t serving_sans(const char *host, char *const *extra, size_t nextra, const char **out,
                           size_t cap, char *hostname, size_t hn)
{
    size_t n = 0;
    out[n++] = "localhost";
    out[n++] = "127.0.0.1";
    out[n++] = "::1";
    if (gethostname(hostname, hn) == 0 && hostname[0]) {
        hostname[hn - 1] = 0;
        out[n++] = hostname;
    }
    if (strcmp(host, "0.0.0.0") && strcmp(host, "::"))
        out[n++] = host;
    for (size_t i = 0; i < nextra && n < cap; i++)
        out[n++] = extra[i];
    return n;
}

/* The last certificate in a PEM file, as a new file's path under dir
 * (for a kubeconfig to trust a user's serving chain by its top). The
 * caller frees. NULL: not readable. */
static char *chain_top(const char *cert_file, const char *dir)
{
    FILE *f = fopen(cert_file, "r");
    if (!f)
        return NULL;
    X509 *last = NULL, *x;
    while ((x = PEM_read_X509(f, NULL, NULL, NULL))) {
        X509_free(last);
        last = x;
    }
    fclose(f);
    ERR_clear_error();
    if (!last)
        return NULL;
    char *path = xasprintf("%s/serving-ca.crt", dir);
    FILE *o = fopen(path, "w");
    bool ok = o && PEM_write_X509(o, last) == 1;
    if (o && fclose(o) != 0)
        ok = false;
    X509_free(last);
    if (!ok) {
        free(path);
        return NULL;
    }
    return path;
}

/* The built-in controllers: ckube-controller-manager as a child process,
 * with the same controllers and Lease as `ckube controller-manager`,
 * talking to this server over loopback like any client, without metrics
 * or health listeners of its own. NULL when it cannot run (logged); the
 * API is served either way. */
static cm_child *start_controller_manager(const char *url, const char *kubeconfig,
                                          const char *root_ca, bool sa_credentials)
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
    /* No endpoints of its own (--secure-port 0): several servers on one
     * machine would fight over 10257, and the server's own /metrics and
     * /readyz cover the process pair. */
    const char *args[28] = {"--master", url, "--secure-port", "0", "--kube-api-qps", "-1"};
    size_t n = 6;
    for (const char *const *f = ckube_log_flag_args(); *f && n < 20; f++)
        args[n++] = *f;
    /* kubeadm's setting: each controller as its own ServiceAccount, the
     * controller-manager itself as system:kube-controller-manager (its
     * kubeconfig), none of them in system:masters. */
    if (sa_credentials)
        args[n++] = "--use-service-account-credentials=true";
    if (kubeconfig) { /* NULL when the kubeconfig could not be written */
        args[n++] = "--kubeconfig";
        args[n++] = kubeconfig;
    }
    if (root_ca) { /* the cluster CA, for kube-root-ca.crt; NULL with --plain-http */
        args[n++] = "--root-ca-file";
        args[n++] = root_ca;
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

/* The --audit-* flags' getopt codes (long options only). */
enum {
    OPT_AUDIT_POLICY_ = 256,
    OPT_AUDIT_PATH_,
    OPT_AUDIT_MAXSIZE_,
    OPT_AUDIT_MAXBACKUP_,
    OPT_AUDIT_MAXAGE_,
    OPT_AUDIT_FORMAT_,
    OPT_AUDIT_COMPRESS_,
    OPT_AUDIT_MODE_,
    OPT_AUDIT_BATCH_BUFFER_,
    OPT_AUDIT_BATCH_MAX_,
    OPT_AUDIT_VERSION_,
    OPT_ETCD_SERVERS_,
    OPT_ETCD_CAFILE_,
    OPT_ETCD_CERTFILE_,
    OPT_ETCD_KEYFILE_,
    OPT_ETCD_COMPACTION_,
    OPT_ETCD_PREFIX_,
    OPT_TOKEN_,
    OPT_TOKEN_FILE_,
};

/* A non-negative int flag value, or -1 (said on stderr). */
static int int_flag(const char *name, const char *v)
{
    char *end;
    long n = strtol(v, &end, 10);
    if (!*v || *end || n < 0 || n > 1000000000L) {
        fprintf(stderr, "ckube server: --%s wants a non-negative number, got \"%s\"\n", name, v);
        return -1;
    }
    return (int)n;
}

/* The --audit-* flags (kube-apiserver's names; audit/log.h): 1 taken, 0
 * not an audit flag, -1 a bad value (said on stderr). */
static int audit_flag(int c, const char *v, const char **policy, audit_log_opts *o)
{
    char *err = NULL;
    int n = 0;
    switch (c) {
    case OPT_AUDIT_POLICY_:
        *policy = v;
        return 1;
    case OPT_AUDIT_PATH_:
        o->path = v;
        return 1;
    case OPT_AUDIT_MAXSIZE_:
        return (n = int_flag("audit-log-maxsize", v)) < 0 ? -1 : (o->max_size_mb = n, 1);
    case OPT_AUDIT_MAXBACKUP_:
        return (n = int_flag("audit-log-maxbackup", v)) < 0 ? -1 : (o->max_backups = n, 1);
    case OPT_AUDIT_MAXAGE_:
        return (n = int_flag("audit-log-maxage", v)) < 0 ? -1 : (o->max_age_days = n, 1);
    case OPT_AUDIT_BATCH_BUFFER_:
        return (n = int_flag("audit-log-batch-buffer-size", v)) < 0
                   ? -1
                   : (o->batch_buffer_size = n, 1);
    case OPT_AUDIT_BATCH_MAX_:
        return (n = int_flag("audit-log-batch-max-size", v)) < 0 ? -1
                                                                  : (o->batch_max_size = n, 1);
    case OPT_AUDIT_VERSION_:
        o->group_version = v;
        return 1;
    case OPT_AUDIT_COMPRESS_:
        if (!v || !strcmp(v, "true")) {
            o->compress = true;
        } else if (!strcmp(v, "false")) {
            o->compress = false;
        } else {
            fprintf(stderr, "ckube server: --audit-log-compress wants true or false\n");
            return -1;
        }
        return 1;
    case OPT_AUDIT_FORMAT_:
        if (audit_log_parse_format(v, &o->format, &err) == 0)
            return 1;
        break;
    case OPT_AUDIT_MODE_:
        if (audit_log_parse_mode(v, &o->mode, &err) == 0)
            return 1;
        break;
    default:
        return 0;
    }
    fprintf(stderr, "ckube server: %s\n", err ? err : "bad audit flag");
    free(err);
    return -1;
}

int cmd_server(int argc, char **argv)
{
    /* The server's out-of-memory policy (common/xalloc.h): allocation
     * failure aborts, in jansson and libevent as in our own code. Before
     * either allocates anything. */
    json_set_alloc_funcs(xalloc_malloc, free);
    event_set_mem_functions(xalloc_malloc, xalloc_realloc, free);
    cmd_allocator_init();
    const char *data_dir = "./.ckube";
    const char *listen = "127.0.0.1:6443";
    const char *kubeconfig = NULL;
    const char *backend = "sqlite";
    int threads = 0;
    long ring = 0;
    bool run_cm = true;
    int64_t delay_ns = 0;
    const char *tls_cert = NULL, *tls_key = NULL, *client_ca = NULL;
    bool plain_http = false, anonymous = true;
    const char *token_file = NULL, *sa_issuer = NULL;
    char *audiences[16];
    size_t naudiences = 0;
    mode_t kc_mode = 0600;
    char *sans[32];
    size_t nsans = 0;
    const char *audit_policy_file = NULL;
    const char *etcd_servers = NULL;
    const char *etcd_prefix = "/registry"; /* upstream's default */
    cluster_token_opts ctoken = {0};
    int64_t compaction_ns = 300 * 1000000000ll; /* upstream's 5m */
    etcd_tls etcd_files = {0};
    audit_log_opts audit_opts;
    audit_log_opts_init(&audit_opts);
    static const struct option opts[] = {
        {"audit-policy-file", required_argument, NULL, OPT_AUDIT_POLICY_},
        {"audit-log-path", required_argument, NULL, OPT_AUDIT_PATH_},
        {"audit-log-maxsize", required_argument, NULL, OPT_AUDIT_MAXSIZE_},
        {"audit-log-maxbackup", required_argument, NULL, OPT_AUDIT_MAXBACKUP_},
        {"audit-log-maxage", required_argument, NULL, OPT_AUDIT_MAXAGE_},
        {"audit-log-format", required_argument, NULL, OPT_AUDIT_FORMAT_},
        {"audit-log-compress", optional_argument, NULL, OPT_AUDIT_COMPRESS_},
        {"audit-log-mode", required_argument, NULL, OPT_AUDIT_MODE_},
        {"audit-log-batch-buffer-size", required_argument, NULL, OPT_AUDIT_BATCH_BUFFER_},
        {"audit-log-batch-max-size", required_argument, NULL, OPT_AUDIT_BATCH_MAX_},
        {"audit-log-version", required_argument, NULL, OPT_AUDIT_VERSION_},
        {"etcd-servers", required_argument, NULL, OPT_ETCD_SERVERS_},
        {"etcd-cafile", required_argument, NULL, OPT_ETCD_CAFILE_},
        {"etcd-certfile", required_argument, NULL, OPT_ETCD_CERTFILE_},
        {"etcd-keyfile", required_argument, NULL, OPT_ETCD_KEYFILE_},
        {"etcd-compaction-interval", required_argument, NULL, OPT_ETCD_COMPACTION_},
        {"etcd-prefix", required_argument, NULL, OPT_ETCD_PREFIX_},
        {"token", required_argument, NULL, OPT_TOKEN_},
        {"token-file", required_argument, NULL, OPT_TOKEN_FILE_},

        {"tls-cert-file", required_argument, NULL, 'T'},
        {"tls-private-key-file", required_argument, NULL, 'K'},
        {"client-ca-file", required_argument, NULL, 'A'},
        {"tls-san", required_argument, NULL, 'S'},
        {"plain-http", no_argument, NULL, 'P'},
        {"anonymous-auth", optional_argument, NULL, 'N'},
        {"token-auth-file", required_argument, NULL, 'F'},
        {"service-account-issuer", required_argument, NULL, 'I'},
        {"api-audiences", required_argument, NULL, 'U'},
        {"write-kubeconfig-mode", required_argument, NULL, 'M'},
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
        int audit_rc = audit_flag(c, optarg, &audit_policy_file, &audit_opts);
        if (audit_rc < 0)
            return 2;
        if (audit_rc > 0)
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
        case 'T':
            tls_cert = optarg;
            break;
        case 'K':
            tls_key = optarg;
            break;
        case 'A':
            client_ca = optarg;
            break;
        case 'P':
            plain_http = true;
            break;
        case 'N':
            if (!optarg || !strcmp(optarg, "true")) {
                anonymous = true;
            } else if (!strcmp(optarg, "false")) {
                anonymous = false;
            } else {
                fprintf(stderr, "ckube server: --anonymous-auth wants true or false\n");
                return 2;
            }
            break;
        case 'F':
            token_file = optarg;
            break;
        case 'I':
            sa_issuer = optarg;
            break;
        case 'U': {
            char *copy = xstrdup(optarg), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (naudiences == sizeof audiences / sizeof *audiences) {
                    fprintf(stderr, "ckube server: at most %zu --api-audiences\n", naudiences);
                    free(copy);
                    return 2;
                }
                audiences[naudiences++] = xstrdup(t);
            }
            free(copy);
            break;
        }
        case 'S': {
            char *copy = xstrdup(optarg), *save = NULL;
            for (char *t = strtok_r(copy, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
                if (nsans == sizeof sans / sizeof *sans) {
                    fprintf(stderr, "ckube server: at most %zu --tls-san values\n", nsans);
                    free(copy);
                    return 2;
                }
                sans[nsans++] = xstrdup(t);
            }
            free(copy);
            break;
        }
        case 'M': {
            char *end;
            long m = strtol(optarg, &end, 8);
            if (!*optarg || *end || m < 0 || m > 0777) {
                fprintf(stderr,
                        "ckube server: --write-kubeconfig-mode wants an octal file mode such as "
                        "0600 or 0644, got \"%s\"\n",
                        optarg);
                return 2;
            }
            kc_mode = (mode_t)m;
            break;
        }
        case 's':
            backend = optarg;
            break;
        case OPT_ETCD_SERVERS_:
            etcd_servers = optarg;
            break;
        case OPT_ETCD_PREFIX_:
            etcd_prefix = optarg;
            break;
        case OPT_TOKEN_:
            ctoken.token = optarg;
            break;
        case OPT_TOKEN_FILE_:
            ctoken.token_file = optarg;
            break;
        case OPT_ETCD_CAFILE_:
            etcd_files.ca_file = optarg;
            break;
        case OPT_ETCD_CERTFILE_:
            etcd_files.cert_file = optarg;
            break;
        case OPT_ETCD_KEYFILE_:
            etcd_files.key_file = optarg;
            break;
        case OPT_ETCD_COMPACTION_:
            compaction_ns = parse_delay(optarg);
            if (compaction_ns < 0 || (compaction_ns && compaction_ns < 1000000000ll)) {
                fprintf(stderr,
                        "ckube server: --etcd-compaction-interval wants 0 (off) or a duration "
                        "from 1s to 1h (\"5m\"), got \"%s\"\n",
                        optarg);
                return 2;
            }
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
    /* TLS, authentication and RBAC guard every request, so any address
     * may be served; plain HTTP only where nobody else can reach it. */
    if (plain_http && !is_loopback(host)) {
        fprintf(stderr,
                "ckube server: refusing to serve plain HTTP on %s: --plain-http is for loopback "
                "addresses only (127.0.0.0/8, ::1); serve TLS (the default) elsewhere\n",
                host);
        return 2;
    }
    if (!tls_cert != !tls_key) {
        fprintf(stderr, "ckube server: --tls-cert-file and --tls-private-key-file go together\n");
        return 2;
    }
    if (plain_http && (tls_cert || client_ca || nsans)) {
        fprintf(stderr, "ckube server: --plain-http serves no TLS; it takes no TLS flags\n");
        return 2;
    }
    if (strcmp(backend, "sqlite") && strcmp(backend, "memory") && strcmp(backend, "etcd")) {
        fprintf(stderr, "ckube server: --storage must be sqlite, memory or etcd\n");
        return 2;
    }
    bool etcd = !strcmp(backend, "etcd");
    if (etcd != (etcd_servers != NULL)) {
        fprintf(stderr, etcd ? "ckube server: --storage etcd needs --etcd-servers\n"
                             : "ckube server: --etcd-servers goes with --storage etcd\n");
        return 2;
    }
    if (!etcd && (ctoken.token || ctoken.token_file)) {
        fprintf(stderr, "ckube server: --token and --token-file go with --storage etcd\n");
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

    /* etcd first: servers on one etcd share the cluster identity kept there. */
    storage *st = NULL;
    if (etcd) {
        char *why = NULL;
        if (!(st = cmd_storage_open_etcd(etcd_servers, etcd_prefix, &etcd_files, &why))) {
            fprintf(stderr, "ckube server: %s\n", why ? why : "cannot open the etcd storage");
            free(why);
            return 1;
        }
    }
    /* The cluster's CA, serving and admin certificates (made on first
     * start, renewed when due), unless serving plain HTTP. */
    pki_files pki;
    char *serving_ca = NULL; /* what the kubeconfig trusts, for a user's chain */
    if (!plain_http) {
        char pkidir[4096 + 8], hostname[256];
        snprintf(pkidir, sizeof pkidir, "%s/pki", data_dir);
        const char *san_list[40];
        pki_options po = {.dir = pkidir, .sans = san_list};
        po.nsans = serving_sans(host, sans, nsans, san_list, sizeof san_list / sizeof *san_list,
                                hostname, sizeof hostname);
        char *perr = NULL;
        bool replaced = false;
        if (pki_ensure(&po, &pki, &perr) != 0 ||
            cluster_identity_join(st, data_dir, &po, &pki, &ctoken, &replaced, &perr) != 0 ||
            (replaced && pki_ensure(&po, &pki, &perr) != 0)) {
            /* replaced: the datastore's CA took the place of the one just
             * made, so the leaf certificates are made again from it */
            fprintf(stderr, "ckube server: %s\n", perr ? perr : "cannot make certificates");
            free(perr);
            storage_close(st);
            return 1;
        }
        if (pki.made_ca)
            CKUBE_INFO("made the cluster CA %s", pki.ca_crt);
        if (pki.made_serving && !tls_cert)
            CKUBE_INFO("made the serving certificate %s", pki.serving_crt);
        if (tls_cert && !(serving_ca = chain_top(tls_cert, pkidir))) {
            fprintf(stderr, "ckube server: cannot read a certificate from %s\n", tls_cert);
            storage_close(st);
            return 1;
        }
    }
    for (size_t i = 0; i < nsans; i++)
        free(sans[i]);

    /* Auditing: no policy file, no auditing (upstream builds no backend
     * then); a bad file or bad log flags fail the start. */
    audit_policy *apolicy = NULL;
    audit_log *alog = NULL;
    char *aerr = NULL;
    if (audit_policy_from_flag(audit_policy_file, &apolicy, &aerr) != 0 ||
        (audit_opts.path && *audit_opts.path && apolicy &&
         !(alog = audit_log_open(&audit_opts, &aerr)))) {
        fprintf(stderr, "ckube server: %s\n", aerr ? aerr : "audit: out of memory");
        free(aerr);
        audit_policy_free(apolicy);
        storage_close(st);
        return 1;
    }
    if (!apolicy)
        CKUBE_V(2, "No audit policy file provided, no events will be recorded for log backend");
    apiserver_config cfg = {
        .audit_policy = apolicy,
        .audit_log = alog,
        .storage = st,
        .compact_interval = (unsigned)(compaction_ns / 1000000000ll),
        .no_compaction = compaction_ns == 0,
        .data_dir = !strcmp(backend, "sqlite") ? data_dir : NULL,
        .listen_host = host,
        .port = port,
        .kubeconfig_path = kubeconfig,
        .nloops = threads,
        .watch_ring = (size_t)ring,
        .tls_cert_file = plain_http ? NULL
                         : tls_cert ? tls_cert
                                    : pki.serving_crt,
        .tls_key_file = plain_http ? NULL
                        : tls_key  ? tls_key
                                   : pki.serving_key,
        .client_ca_file = client_ca,
        .cluster_ca_file = plain_http ? NULL : pki.ca_crt,
        .front_proxy_ca_file = plain_http ? NULL : pki.fp_ca_crt,
        .proxy_client_cert_file = plain_http ? NULL : pki.fp_client_crt,
        .proxy_client_key_file = plain_http ? NULL : pki.fp_client_key,
        .anonymous_auth = anonymous,
        .token_auth_file = token_file,
        .sa_key_file = plain_http ? NULL : pki.sa_key,
        .sa_pub_file = plain_http ? NULL : pki.sa_pub,
        .sa_issuer = sa_issuer,
        .api_audiences = (const char *const *)audiences,
        .napi_audiences = naudiences,
    };
    char *err = NULL;
    apiserver *s = apiserver_new(&cfg, &err);
    if (!s || apiserver_start(s, &err) != 0) {
        fprintf(stderr, "ckube server: %s\n", err ? err : "cannot start");
        free(err);
        if (s) {
            apiserver_stop(s);
            apiserver_free(s);
        }
        audit_log_close(alog);
        audit_policy_free(apolicy);
        return 1;
    }
    /* A wildcard address is reached on loopback. */
    const char *reach = !strcmp(host, "0.0.0.0") ? "127.0.0.1" : !strcmp(host, "::") ? "::1" : host;
    char url[300];
    snprintf(url, sizeof url, "%s://%s%s%s:%d", plain_http ? "http" : "https",
             strchr(reach, ':') ? "[" : "", reach, strchr(reach, ':') ? "]" : "", s->port);
    kubeconfig_spec ks = {.path = kubeconfig, .mode = kc_mode, .url = url, .user = "ckube-admin"};
    if (!plain_http) {
        ks.ca_file = serving_ca ? serving_ca : pki.ca_crt;
        ks.cert_file = pki.admin_crt;
        ks.key_file = pki.admin_key;
    }
    bool kc_written = write_kubeconfig(&ks) == 0;
    if (!kc_written)
        CKUBE_WARN("could not write kubeconfig %s: %s", kubeconfig, strerror(errno));
    /* The controller-manager's own kubeconfig, beside the admin's as
     * kubeadm writes controller-manager.conf beside admin.conf: always
     * 0600 (whatever --write-kubeconfig-mode says: it is no user's), the
     * server's URL, the CA, its certificate. With --plain-http there is no
     * identity to give it: the child keeps the admin kubeconfig, as
     * before. */
    const char *cm_kubeconfig = kc_written ? kubeconfig : NULL;
    char cmkc[4096 + 32];
    if (!plain_http) {
        snprintf(cmkc, sizeof cmkc, "%s/controller-manager.kubeconfig", data_dir);
        kubeconfig_spec cs = {.path = cmkc,
                              .mode = 0600,
                              .url = url,
                              .ca_file = ks.ca_file,
                              .cert_file = pki.cm_crt,
                              .key_file = pki.cm_key,
                              .user = "system:kube-controller-manager"};
        cm_kubeconfig = write_kubeconfig(&cs) == 0 ? cmkc : NULL;
        if (!cm_kubeconfig && run_cm) {
            /* Not without it: the child would look for a kubeconfig of
             * its own ($KUBECONFIG, ~/.kube/config) and act as whoever
             * that names. */
            CKUBE_ERROR("could not write %s: %s; serving without the built-in controllers", cmkc,
                        strerror(errno));
            run_cm = false;
        }
    }
    free(serving_ca);
    char alloc[64];
    cmd_allocator_name(alloc, sizeof alloc);
    CKUBE_V(1, "allocator: %s", alloc);
    CKUBE_INFO("ckube server ready: serving %s, %s storage in %s, kubeconfig %s", url, backend,
               data_dir, kubeconfig);

    cm_child *ctl = run_cm ? start_controller_manager(url, cm_kubeconfig,
                                                      plain_http ? NULL : pki.ca_crt, !plain_http)
                           : NULL;
    /* Start-up builds large transient trees (schemas, the first list of
     * every resource); give their freed pages back so an idle server's
     * RSS is its real working set. */
    cmd_allocator_release();

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
    audit_log_close(alog); /* after the loops: every event written */
    audit_policy_free(apolicy);
    for (size_t i = 0; i < naudiences; i++)
        free(audiences[i]);
    CKUBE_INFO("stopped");
    return rc;
}
