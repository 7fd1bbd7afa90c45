/* ckube-network-controller - the seed articles' Network controller, made
 * real: every samplecrd.k8s.io/v1 Network becomes a Linux bridge carrying
 * its gateway address (or an entry of the memory backend).
 *
 *   ckube-network-controller --kubeconfig ~/.kube/config [--backend linux-bridge|memory]
 *
 * Like the seed's main.go: a client from --master/--kubeconfig (else
 * in-cluster), a shared informer factory (the manager's cache) with the
 * Network (and Deployment) informers, the controller, and Run with its
 * workers once the caches synced. On top, what a production controller
 * needs: leader election (two replicas never both act), /metrics,
 * /healthz and /readyz, Events, and a clean stop on SIGTERM.
 */
#include "controller.h"

#include <ckube/config.h>
#include <ckube/log.h>
#include <ckube/manager.h>

#include <getopt.h>
#include <linux/capability.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define DEFAULT_NETNS "ckube-networks"

static void usage(FILE *f)
{
    fprintf(f,
            "Usage: ckube-network-controller [FLAGS]\n\n"
            "Reconciles samplecrd.k8s.io/v1 Networks into real networks.\n\n"
            "Flags:\n"
            "  --kubeconfig PATH                   kubeconfig (default: $KUBECONFIG, in-cluster, "
            "~/.kube/config)\n"
            "  --master URL                        API server address (overrides the "
            "kubeconfig's)\n"
            "  --backend auto|linux-bridge|memory  where networks live (default auto: "
            "linux-bridge\n"
            "                                      with CAP_NET_ADMIN, else memory)\n"
            "  --netns NAME                        linux-bridge: the network namespace "
            "(default " DEFAULT_NETNS ")\n"
            "  --memory-state-file PATH            memory: keep the state in this file\n"
            "  --threadiness N                     Network workers (default 2)\n"
            "  --resync-period DURATION            re-check of actual state (default 30s)\n"
            "  --deployment-networks=BOOL          create Networks named by "
            "Deployments' " NETCTL_DEPLOYMENT_LABEL " label (default true)\n"
            "  --auto-cidr-pool CIDR               where those get a /24 (default 10.200.0.0/16)\n"
            "  --leader-elect=BOOL                 (default true)\n"
            "  --leader-elect-namespace NS         the Lease's namespace (default kube-system)\n"
            "  --leader-elect-id NAME              the Lease's name (default network-controller)\n"
            "  --leader-elect-lease-duration D     (default 15s)\n"
            "  --leader-elect-renew-deadline D     (default 10s)\n"
            "  --leader-elect-retry-period D       (default 2s)\n"
            "  --metrics-bind-address ADDR         /metrics (default 127.0.0.1:8080; 0 = off)\n"
            "  --health-probe-bind-address ADDR    /healthz, /readyz (default 127.0.0.1:8081; 0 = "
            "off)\n"
            "  -v, --v N                           log verbosity (-v=N, --v=N, -v N)\n"
            "  --vmodule PATTERN=N,...             verbosity per source file\n"
            "  --log-file PATH                     log to PATH (with --logtostderr=false)\n"
            "  --logtostderr=BOOL                  log to stderr only (default true)\n"
            "  --alsologtostderr=BOOL              with --logtostderr=false, stderr too\n");
}

static int parse_bool(const char *s, bool *out)
{
    if (!s || !strcmp(s, "true") || !strcmp(s, "1"))
        *out = true;
    else if (!strcmp(s, "false") || !strcmp(s, "0"))
        *out = false;
    else
        return -1;
    return 0;
}

/* True when this thread's effective capabilities include CAP_NET_ADMIN. */
static bool have_net_admin(void)
{
    struct __user_cap_header_struct hdr = {.version = _LINUX_CAPABILITY_VERSION_3, .pid = 0};
    struct __user_cap_data_struct data[2] = {{0}};
    if (syscall(SYS_capget, &hdr, data) != 0)
        return false;
    return (data[CAP_NET_ADMIN / 32].effective & (1u << (CAP_NET_ADMIN % 32))) != 0;
}

struct flags {
    ckube_config_overrides ov;
    const char *backend, *netns, *state_file, *pool, *le_ns, *le_id, *metrics, *health;
    int threadiness;
    uint64_t resync, lease, renew, retry;
    bool deployments, leader_elect;
};

static int parse_flags(int argc, char **argv, struct flags *f)
{
    enum {
        F_KUBECONFIG = 256,
        F_MASTER,
        F_BACKEND,
        F_NETNS,
        F_STATE,
        F_THREADS,
        F_RESYNC,
        F_DEPS,
        F_POOL,
        F_LE,
        F_LE_NS,
        F_LE_ID,
        F_LEASE,
        F_RENEW,
        F_RETRY,
        F_METRICS,
        F_HEALTH,
    };
    static const struct option opts[] = {
        {"kubeconfig", required_argument, NULL, F_KUBECONFIG},
        {"master", required_argument, NULL, F_MASTER},
        {"backend", required_argument, NULL, F_BACKEND},
        {"netns", required_argument, NULL, F_NETNS},
        {"memory-state-file", required_argument, NULL, F_STATE},
        {"threadiness", required_argument, NULL, F_THREADS},
        {"resync-period", required_argument, NULL, F_RESYNC},
        {"deployment-networks", optional_argument, NULL, F_DEPS},
        {"auto-cidr-pool", required_argument, NULL, F_POOL},
        {"leader-elect", optional_argument, NULL, F_LE},
        {"leader-elect-namespace", required_argument, NULL, F_LE_NS},
        {"leader-elect-id", required_argument, NULL, F_LE_ID},
        {"leader-elect-lease-duration", required_argument, NULL, F_LEASE},
        {"leader-elect-renew-deadline", required_argument, NULL, F_RENEW},
        {"leader-elect-retry-period", required_argument, NULL, F_RETRY},
        {"metrics-bind-address", required_argument, NULL, F_METRICS},
        {"health-probe-bind-address", required_argument, NULL, F_HEALTH},
        CKUBE_LOG_GETOPT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        char *lerr = NULL;
        int logflag = ckube_log_getopt(ch, optarg, &lerr);
        if (logflag < 0) {
            fprintf(stderr, "ckube-network-controller: %s\n", lerr ? lerr : "out of memory");
            free(lerr);
            return -1;
        }
        if (logflag > 0)
            continue;
        uint64_t *dur = NULL;
        switch (ch) {
        case F_KUBECONFIG:
            f->ov.kubeconfig = optarg;
            break;
        case F_MASTER:
            f->ov.master = optarg;
            break;
        case F_BACKEND:
            f->backend = optarg;
            break;
        case F_NETNS:
            f->netns = optarg;
            break;
        case F_STATE:
            f->state_file = optarg;
            break;
        case F_THREADS:
            f->threadiness = atoi(optarg);
            if (f->threadiness < 1 || f->threadiness > 64) {
                fprintf(stderr, "--threadiness must be 1 to 64\n");
                return -1;
            }
            break;
        case F_RESYNC:
            dur = &f->resync;
            break;
        case F_LEASE:
            dur = &f->lease;
            break;
        case F_RENEW:
            dur = &f->renew;
            break;
        case F_RETRY:
            dur = &f->retry;
            break;
        case F_DEPS:
        case F_LE:
            if (parse_bool(optarg, ch == F_DEPS ? &f->deployments : &f->leader_elect) != 0) {
                fprintf(stderr, "invalid boolean \"%s\"\n", optarg);
                return -1;
            }
            break;
        case F_POOL:
            f->pool = optarg;
            break;
        case F_LE_NS:
            f->le_ns = optarg;
            break;
        case F_LE_ID:
            f->le_id = optarg;
            break;
        case F_METRICS:
            f->metrics = optarg;
            break;
        case F_HEALTH:
            f->health = optarg;
            break;
        case 'h':
            usage(stdout);
            exit(0);
        default:
            usage(stderr);
            return -1;
        }
        if (dur && (*dur = ckube_parse_duration(optarg)) == 0) {
            fprintf(stderr, "invalid duration \"%s\" (e.g. 30s, 1m)\n", optarg);
            return -1;
        }
    }
    if (optind < argc) {
        fprintf(stderr, "unexpected argument \"%s\"\n", argv[optind]);
        return -1;
    }
    return 0;
}

static netctl_backend *make_backend(const struct flags *f)
{
    char *err = NULL;
    netctl_backend *b = NULL;
    const char *kind = f->backend;
    if (!strcmp(kind, "auto")) {
        kind = have_net_admin() ? "linux-bridge" : "memory";
        if (!strcmp(kind, "memory"))
            CKUBE_WARN("no CAP_NET_ADMIN: using the memory backend (networks are not real)");
    }
    if (!strcmp(kind, "linux-bridge"))
        b = netctl_backend_bridge_new(f->netns, &err);
    else if (!strcmp(kind, "memory"))
        b = netctl_backend_memory_new(f->state_file, &err);
    else
        err = strdup("--backend must be auto, linux-bridge or memory");
    if (!b) {
        CKUBE_ERROR("Error building the %s backend: %s", kind, err ? err : "?");
        free(err);
        return NULL;
    }
    if (!strcmp(kind, "linux-bridge"))
        CKUBE_INFO("using the linux-bridge backend in network namespace %s", f->netns);
    else
        CKUBE_INFO("using the memory backend%s%s", f->state_file ? " with state in " : "",
                   f->state_file ? f->state_file : "");
    return b;
}

/* The orphan sweep runs once this replica leads and the controller runs:
 * a runnable whose start only enqueues. */
static int orphans_start(void *ctx)
{
    netctl_cleanup_orphans(ctx);
    return 0;
}

static void orphans_stop(void *ctx)
{
    (void)ctx;
}

int main(int argc, char **argv)
{
    struct flags f = {.backend = "auto",
                      .netns = DEFAULT_NETNS,
                      .threadiness = 2,
                      .resync = CKUBE_SEC(30),
                      .deployments = true,
                      .leader_elect = true,
                      .le_ns = "kube-system",
                      .le_id = "network-controller"};
    if (parse_flags(argc, argv, &f) != 0)
        return 2;

    ckube_config *cfg = NULL;
    ckube_status *st = NULL;
    if (ckube_config_load(&f.ov, &cfg, &st) != 0) {
        CKUBE_ERROR("Error building kubeconfig: %s", st && st->message ? st->message : "?");
        ckube_status_free(st);
        return 1;
    }
    netctl_backend *backend = make_backend(&f);
    if (!backend) {
        ckube_config_free(cfg);
        return 1;
    }

    /* The manager owns the client and the shared informer factory. The
     * cache sync wait is unbounded, like the seed's WaitForCacheSync: a
     * controller started before its CRD lists, fails, backs off and
     * retries until the CRD appears (or SIGTERM). */
    ckube_manager_options mo = {
        .config = cfg,
        .sync_period_ns = f.resync,
        .cache_sync_timeout_ns = CKUBE_SEC(100ull * 365 * 24 * 3600),
        .leader_election = f.leader_elect,
        .leader_election_namespace = f.le_ns,
        .leader_election_id = f.le_id,
        .lease_duration_ns = f.lease,
        .renew_deadline_ns = f.renew,
        .retry_period_ns = f.retry,
        .leader_election_release_on_cancel = true,
        .metrics_bind_address = f.metrics,
        .health_probe_bind_address = f.health,
        .handle_signals = true,
    };
    char *err = NULL;
    ckube_manager *m = ckube_manager_new(&mo, &err);
    ckube_config_free(cfg);
    if (!m) {
        CKUBE_ERROR("Error building the manager: %s", err ? err : "?");
        free(err);
        netctl_backend_free(backend);
        return 1;
    }
    ckube_client *client = ckube_manager_client(m);
    char host[256] = "";
    gethostname(host, sizeof(host) - 1);
    ckube_event_recorder_opts ro = {.component = NETCTL_COMPONENT, .host = host};
    ckube_event_recorder *rec = ckube_event_recorder_new(client, &ro, &st);
    if (!rec) {
        CKUBE_WARN("events are off: %s", st && st->message ? st->message : "?");
        ckube_status_free(st);
    }

    netctl_options no = {
        .client = client,
        .networks = ckube_manager_informer(m, &NETCTL_NETWORKS),
        .deployments = f.deployments ? ckube_manager_informer(m, &NETCTL_DEPLOYMENTS) : NULL,
        .backend = backend,
        .recorder = rec,
        .workers = f.threadiness,
        .resync_ns = f.resync,
        .auto_cidr_pool = f.pool,
    };
    netctl *nc = netctl_new(&no, &err);
    int code = 1;
    if (!nc) {
        CKUBE_ERROR("Error building the controller: %s", err ? err : "?");
        free(err);
        goto out;
    }
    CKUBE_INFO("Setting up event handlers");
    ckube_manager_add_controller(m, netctl_network_controller(nc));
    if (netctl_deployment_controller(nc))
        ckube_manager_add_controller(m, netctl_deployment_controller(nc));
    ckube_runnable orphans = {.name = "network-orphans",
                              .start = orphans_start,
                              .stop = orphans_stop,
                              .ctx = nc,
                              .needs_leader_election = true};
    ckube_manager_add(m, &orphans);

    CKUBE_INFO("Starting Network control loop (threadiness %d, resync %llus)", f.threadiness,
               (unsigned long long)(f.resync / CKUBE_SEC(1)));
    CKUBE_INFO("Waiting for informer caches to sync");
    code = ckube_manager_run(m);
    CKUBE_INFO("Shutting down (exit code %d)", code);
out:
    /* Stop order: the controllers before what their reconciles use; the
     * recorder flushes through the manager's client, so it goes after
     * the controllers stop but before the manager frees that client. */
    ckube_manager_stop(m);
    ckube_manager_wait(m);
    ckube_event_recorder_free(rec);
    ckube_manager_free(m);
    netctl_free(nc);
    netctl_backend_free(backend);
    return code;
}
