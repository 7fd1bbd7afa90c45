/* ckube-controller-manager (run as `ckube controller-manager`, and by
 * `ckube server` as its child): the built-in controllers (namespace
 * lifecycle, garbage collector, pod counter, service accounts, the root
 * CA publisher) against any API server, with kube-controller-manager's
 * flags where they apply. */
#include <ckube/clock.h>
#include <ckube/config.h>
#include <ckube/log.h>

#include <errno.h>
#include <getopt.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "controllers/controller_manager.h"

static void cm_usage(FILE *f)
{
    fprintf(
        f,
        "Usage: ckube controller-manager [flags]\n\n"
        "Runs the built-in controllers (" CM_CONTROLLERS ") against an API server.\n\n"
        "  --kubeconfig PATH                      kubeconfig (default: $KUBECONFIG, "
        "~/.kube/config,\n"
        "                                         then in-cluster)\n"
        "  --master URL                           API server address (overrides the kubeconfig)\n"
        "  --controllers LIST                     '*' (default), names, '-name' to disable\n"
        "  --root-ca-file PATH                    the CA bundle (PEM) root-ca-cert-publisher puts\n"
        "                                         in every namespace's kube-root-ca.crt (default:\n"
        "                                         the kubeconfig's certificate authority)\n"
        "  --leader-elect[=BOOL]                  elect a leader through a Lease (default true)\n"
        "  --leader-elect-lease-duration D        default 15s\n"
        "  --leader-elect-renew-deadline D        default 10s\n"
        "  --leader-elect-retry-period D          default 2s\n"
        "  --leader-elect-resource-namespace NS   default kube-system\n"
        "  --leader-elect-resource-name NAME      default kube-controller-manager\n"
        "  --use-service-account-credentials[=BOOL]\n"
        "                                         each controller uses a token of its own\n"
        "                                         ServiceAccount in kube-system (default false)\n"
        "  --secure-port PORT                     /metrics, /healthz, /readyz over HTTPS, each\n"
        "                                         request authenticated (TokenReview, client\n"
        "                                         certificates) and authorized\n"
        "                                         (SubjectAccessReview) by the API server\n"
        "                                         (default 10257; 0 = off)\n"
        "  --bind-address HOST                    for --secure-port (default 0.0.0.0)\n"
        "  --tls-cert-file PATH, --tls-private-key-file PATH\n"
        "                                         serving certificate and key (PEM); default a\n"
        "                                         self-signed one made in memory\n"
        "  --client-ca-file PATH                  CAs of client certificates (default: the\n"
        "                                         client-ca-file of configmap kube-system/\n"
        "                                         extension-apiserver-authentication)\n"
        "  --authentication-skip-lookup[=BOOL]    do not read that configmap\n"
        "  --authorization-always-allow-paths LIST\n"
        "                                         authorized without a review (default\n"
        "                                         /healthz,/readyz,/livez)\n"
        "  --port PORT                            ckube's plain-HTTP /metrics on 127.0.0.1\n"
        "                                         (default 0 = off)\n"
        "  --healthz-port PORT                    ckube's plain-HTTP /healthz, /readyz on\n"
        "                                         127.0.0.1 (default 0 = off)\n"
        "  -v, --v N                              log verbosity (-v=N, --v=N, -v N)\n"
        "  --vmodule PATTERN=N,...                verbosity per source file\n"
        "  --log-file PATH                        log to PATH (with --logtostderr=false)\n"
        "  --logtostderr=BOOL, --alsologtostderr=BOOL   as klog's (defaults true, false)\n");
}

static bool parse_bool(const char *s, bool *out)
{
    if (!s || !strcmp(s, "true") || !strcmp(s, "1")) {
        *out = true;
        return true;
    }
    if (!strcmp(s, "false") || !strcmp(s, "0")) {
        *out = false;
        return true;
    }
    return false;
}

/* The --root-ca-file: its bytes (malloc'd, *len) when it holds at least
 * one certificate and every CERTIFICATE block parses (upstream's
 * certutil.ParseCertsPEM), else NULL with the reason printed. */
static char *read_root_ca(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "ckube controller-manager: --root-ca-file %s: %s\n", path, strerror(errno));
        return NULL;
    }
    char *buf = NULL;
    size_t n = 0, cap = 0;
    bool ok = true;
    for (;;) {
        if (n == cap) {
            char *nb = cap < (16u << 20) ? realloc(buf, cap = cap ? cap * 2 : 8192) : NULL;
            if (!nb) {
                ok = false;
                break;
            }
            buf = nb;
        }
        size_t got = fread(buf + n, 1, cap - n, f);
        n += got;
        if (got == 0)
            break;
    }
    int rerr = ferror(f) ? (errno ? errno : EIO) : 0;
    fclose(f);
    if (!ok || rerr) {
        fprintf(stderr, "ckube controller-manager: --root-ca-file %s: %s\n", path,
                rerr ? strerror(rerr) : "too large");
        free(buf);
        return NULL;
    }
    int certs = 0;
    bool bad = false;
    BIO *bio = n < (size_t)INT32_MAX ? BIO_new_mem_buf(buf, (int)n) : NULL;
    ERR_clear_error();
    for (X509 *x; bio && (x = PEM_read_bio_X509(bio, NULL, NULL, NULL)) != NULL; certs++)
        X509_free(x);
    unsigned long e = ERR_peek_last_error();
    /* the end of the data is "no start line"; anything else is a block
     * that does not parse */
    if (!bio || (e && !(ERR_GET_LIB(e) == ERR_LIB_PEM && ERR_GET_REASON(e) == PEM_R_NO_START_LINE)))
        bad = true;
    ERR_clear_error();
    BIO_free(bio);
    if (bad || certs == 0) {
        fprintf(stderr, "ckube controller-manager: --root-ca-file %s: %s\n", path,
                bad ? "a certificate in it does not parse" : "no PEM certificate in it");
        free(buf);
        return NULL;
    }
    *len = n;
    return buf;
}

/* "a,b,,c" as a NULL-terminated list of its non-empty items (an empty
 * string: an empty list, as pflag's StringSlice reads it). */
static char **split_list(const char *s)
{
    size_t n = 1;
    for (const char *p = s; *p; p++)
        n += *p == ',';
    char **v = calloc(n + 1, sizeof *v);
    size_t k = 0;
    for (const char *p = s; v && *p;) {
        size_t len = strcspn(p, ",");
        if (len && !(v[k++] = strndup(p, len)))
            return NULL; /* exiting: the list is not freed */
        p += len + (p[len] == ',');
    }
    return v;
}

int main(int argc, char **argv)
{
    ckube_config_overrides ov = {0};
    cm_opts o = {.leader_elect = true, .handle_signals = true};
    const char *bind = "0.0.0.0", *port = "0", *hport = "0", *sport = "10257", *root_ca_file = NULL,
               *allow_paths = NULL;
    /* kube-controller-manager's client defaults (client-go's 5/10 would
     * make a starting garbage collector's lists queue for seconds). */
    double qps = 20;
    int burst = 30;
    static const struct option opts[] = {
        {"kubeconfig", required_argument, NULL, 'k'},
        {"master", required_argument, NULL, 'm'},
        {"controllers", required_argument, NULL, 'c'},
        {"root-ca-file", required_argument, NULL, 'r'},
        {"leader-elect", optional_argument, NULL, 'L'},
        {"leader-elect-lease-duration", required_argument, NULL, 'D'},
        {"leader-elect-renew-deadline", required_argument, NULL, 'R'},
        {"leader-elect-retry-period", required_argument, NULL, 'P'},
        {"leader-elect-resource-namespace", required_argument, NULL, 'N'},
        {"leader-elect-resource-name", required_argument, NULL, 'n'},
        {"bind-address", required_argument, NULL, 'b'},
        {"port", required_argument, NULL, 'p'},
        {"healthz-port", required_argument, NULL, 'H'},
        {"kube-api-qps", required_argument, NULL, 'q'},
        {"kube-api-burst", required_argument, NULL, 'B'},
        {"use-service-account-credentials", optional_argument, NULL, 'U'},
        {"secure-port", required_argument, NULL, 's'},
        {"tls-cert-file", required_argument, NULL, 'C'},
        {"tls-private-key-file", required_argument, NULL, 'K'},
        {"client-ca-file", required_argument, NULL, 'A'},
        {"authentication-skip-lookup", optional_argument, NULL, 'S'},
        {"authorization-always-allow-paths", required_argument, NULL, 'W'},
        CKUBE_LOG_GETOPT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        char *lerr = NULL;
        int logflag = ckube_log_getopt(ch, optarg, &lerr);
        if (logflag < 0) {
            fprintf(stderr, "ckube controller-manager: %s\n", lerr ? lerr : "out of memory");
            free(lerr);
            return 2;
        }
        if (logflag > 0)
            continue;
        uint64_t *dur = NULL;
        switch (ch) {
        case 'k':
            ov.kubeconfig = optarg;
            break;
        case 'm':
            ov.master = optarg;
            break;
        case 'c':
            o.controllers = optarg;
            break;
        case 'r':
            root_ca_file = optarg;
            break;
        case 'L':
            if (!parse_bool(optarg, &o.leader_elect)) {
                fprintf(stderr, "ckube controller-manager: --leader-elect wants true or false\n");
                return 2;
            }
            break;
        case 'D':
            dur = &o.lease_duration_ns;
            break;
        case 'R':
            dur = &o.renew_deadline_ns;
            break;
        case 'P':
            dur = &o.retry_period_ns;
            break;
        case 'N':
            o.lease_namespace = optarg;
            break;
        case 'n':
            o.lease_name = optarg;
            break;
        case 'b':
            bind = optarg;
            break;
        case 'p':
            port = optarg;
            break;
        case 'H':
            hport = optarg;
            break;
        case 'q':
            qps = atof(optarg);
            break;
        case 'B':
            burst = atoi(optarg);
            break;
        case 'U':
            if (!parse_bool(optarg, &o.use_service_account_credentials)) {
                fprintf(stderr, "ckube controller-manager: --use-service-account-credentials "
                                "wants true or false\n");
                return 2;
            }
            break;
        case 's':
            sport = optarg;
            break;
        case 'C':
            o.secure.cert_file = optarg;
            break;
        case 'K':
            o.secure.key_file = optarg;
            break;
        case 'A':
            o.secure.client_ca_file = optarg;
            break;
        case 'S':
            if (!parse_bool(optarg, &o.secure.skip_lookup)) {
                fprintf(stderr, "ckube controller-manager: --authentication-skip-lookup wants "
                                "true or false\n");
                return 2;
            }
            break;
        case 'W':
            allow_paths = optarg;
            break;
        case 'h':
            cm_usage(stdout);
            return 0;
        default:
            cm_usage(stderr);
            return 2;
        }
        if (dur && (*dur = ckube_parse_duration(optarg)) == 0) {
            fprintf(stderr, "ckube controller-manager: invalid duration \"%s\"\n", optarg);
            return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "ckube controller-manager: unexpected argument \"%s\"\n", argv[optind]);
        return 2;
    }
    /* The plain-HTTP endpoints are ckube's, for tests and old scripts:
     * loopback only, as `ckube server --plain-http`. */
    char maddr[300], haddr[300], saddr[300];
    snprintf(maddr, sizeof(maddr), "127.0.0.1:%s", port);
    snprintf(haddr, sizeof(haddr), "127.0.0.1:%s", hport);
    bool v6 = strchr(bind, ':') != NULL;
    snprintf(saddr, sizeof(saddr), "%s%s%s:%s", v6 ? "[" : "", bind, v6 ? "]" : "", sport);
    o.metrics_bind_address = strcmp(port, "0") ? maddr : "0";
    o.health_bind_address = strcmp(hport, "0") ? haddr : "0";
    o.secure.bind_address = strcmp(sport, "0") ? saddr : NULL;
    if ((o.secure.cert_file == NULL) != (o.secure.key_file == NULL)) {
        fprintf(stderr, "ckube controller-manager: --tls-cert-file and --tls-private-key-file "
                        "go together\n");
        return 2;
    }
    char **paths = NULL;
    if (allow_paths && !(paths = split_list(allow_paths))) {
        fprintf(stderr, "ckube controller-manager: out of memory\n");
        return 2;
    }
    o.secure.always_allow_paths = (const char *const *)paths;

    /* How long a controller uses its ServiceAccount token, for tests that
     * cannot wait the 48 minutes of upstream's hour (less its 20%); an
     * environment variable rather than a flag, as
     * CKUBE_CACHE_MUTATION_DETECTOR: `ckube server` passes its environment
     * to its child, and no user should need it. */
    const char *life = getenv("CKUBE_SA_TOKEN_LIFETIME");
    if (life && *life) {
        uint64_t ns = ckube_parse_duration(life);
        if (ns < CKUBE_SEC(1) || ns > CKUBE_SEC(86400)) {
            fprintf(stderr,
                    "ckube controller-manager: CKUBE_SA_TOKEN_LIFETIME wants a duration from 1s "
                    "to 24h, got \"%s\"\n",
                    life);
            return 2;
        }
        o.sa_token_lifetime_seconds = (int64_t)(ns / CKUBE_SEC(1));
    }

    char *root_ca = NULL;
    if (root_ca_file) {
        if (!(root_ca = read_root_ca(root_ca_file, &o.root_ca_len)))
            return 2;
        o.root_ca = root_ca;
    }

    ckube_config *cfg = NULL;
    ckube_status *st = NULL;
    if (ckube_config_load(&ov, &cfg, &st) != 0) {
        CKUBE_ERROR("error building kubeconfig: %s", st && st->message ? st->message : "?");
        ckube_status_free(st);
        free(root_ca);
        return 1;
    }
    cfg->qps = qps;
    cfg->burst = burst;
    o.config = cfg;
    char *err = NULL;
    cm *c = cm_new(&o, &err);
    ckube_config_free(cfg);
    free(root_ca);                             /* copied by the controller */
    for (size_t i = 0; paths && paths[i]; i++) /* copied by the manager */
        free(paths[i]);
    free(paths);
    if (!c) {
        fprintf(stderr, "ckube controller-manager: %s\n", err ? err : "cannot start");
        free(err);
        return 2;
    }
    int rc = cm_run(c);
    cm_free(c);
    CKUBE_INFO("controller-manager stopped (exit code %d)", rc);
    return rc;
}
