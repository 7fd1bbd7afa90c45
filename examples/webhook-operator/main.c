/* ckube-webhook-operator - an operator whose work is its webhooks (seed
 * 001's manager with a webhook server, as kubebuilder scaffolds one):
 * it defaults and validates samplecrd.k8s.io Networks and converts them
 * between v1alpha1 and v1 (webhooks.h), serving HTTPS with the
 * certificate in --cert-dir (tls.crt, tls.key; rotated files are picked
 * up), beside the manager's /metrics, /healthz and /readyz (ready once
 * the webhook server serves).
 *
 *   ckube-webhook-operator --kubeconfig ~/.kube/config --cert-dir DIR [--webhook-port 9443]
 *
 * The handlers read only the informer's cache and their arguments, so
 * they run on --webhook-workers threads at once (default 4): a slow
 * review does not hold up the others.
 *
 * manifests/ holds the configurations that send the API server's reviews
 * here (fill in caBundle and the address).
 */
#include "samplecrd.h"
#include "webhooks.h"

#include <ckube/config.h>
#include <ckube/log.h>
#include <ckube/manager.h>
#include <ckube/webhook.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void usage(FILE *f)
{
    fprintf(f, "Usage: ckube-webhook-operator [FLAGS]\n\n"
               "Defaults, validates and converts samplecrd.k8s.io Networks as webhooks.\n\n"
               "Flags:\n"
               "  --kubeconfig PATH                 kubeconfig (default: $KUBECONFIG, "
               "in-cluster, ~/.kube/config)\n"
               "  --cert-dir DIR                    tls.crt and tls.key (default "
               "$TMPDIR/k8s-webhook-server/serving-certs)\n"
               "  --webhook-host ADDR               address to serve webhooks on (default all)\n"
               "  --webhook-port PORT               (default 9443)\n"
               "  --webhook-workers N               handler threads (default 4; 0: none)\n"
               "  --metrics-bind-address ADDR       (default 127.0.0.1:8080; 0 = off)\n"
               "  --health-probe-bind-address ADDR  (default 127.0.0.1:8081; 0 = off)\n"
               "  -v, --v N                         log verbosity\n");
}

int main(int argc, char **argv)
{
    enum { F_KUBECONFIG = 256, F_CERTS, F_HOST, F_PORT, F_WORKERS, F_METRICS, F_HEALTH };
    static const struct option opts[] = {
        {"kubeconfig", required_argument, NULL, F_KUBECONFIG},
        {"cert-dir", required_argument, NULL, F_CERTS},
        {"webhook-host", required_argument, NULL, F_HOST},
        {"webhook-port", required_argument, NULL, F_PORT},
        {"webhook-workers", required_argument, NULL, F_WORKERS},
        {"metrics-bind-address", required_argument, NULL, F_METRICS},
        {"health-probe-bind-address", required_argument, NULL, F_HEALTH},
        CKUBE_LOG_GETOPT_OPTIONS,
        {"help", no_argument, NULL, 'h'},
        {0, 0, 0, 0}};
    ckube_config_overrides ov = {0};
    ckube_webhook_server_options wo = {.workers = 4};
    const char *metrics = NULL, *health = NULL;
    int ch;
    while ((ch = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        char *lerr = NULL;
        int logflag = ckube_log_getopt(ch, optarg, &lerr);
        if (logflag < 0) {
            fprintf(stderr, "ckube-webhook-operator: %s\n", lerr ? lerr : "out of memory");
            free(lerr);
            return 2;
        }
        if (logflag > 0)
            continue;
        switch (ch) {
        case F_KUBECONFIG:
            ov.kubeconfig = optarg;
            break;
        case F_CERTS:
            wo.cert_dir = optarg;
            break;
        case F_HOST:
            wo.host = optarg;
            break;
        case F_PORT:
            wo.port = atoi(optarg);
            break;
        case F_WORKERS: {
            char *end = NULL;
            long n = strtol(optarg, &end, 10);
            if (!*optarg || *end || n < 0 || n > CKUBE_WEBHOOK_MAX_WORKERS) {
                fprintf(stderr, "ckube-webhook-operator: invalid --webhook-workers %s: 0 to %d\n",
                        optarg, CKUBE_WEBHOOK_MAX_WORKERS);
                return 2;
            }
            wo.workers = (unsigned)n;
            break;
        }
        case F_METRICS:
            metrics = optarg;
            break;
        case F_HEALTH:
            health = optarg;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            usage(stderr);
            return 2;
        }
    }
    ckube_config *cfg = NULL;
    ckube_status *st = NULL;
    if (ckube_config_load(&ov, &cfg, &st) != 0) {
        CKUBE_ERROR("Error building kubeconfig: %s", st && st->message ? st->message : "?");
        ckube_status_free(st);
        return 1;
    }
    ckube_manager_options mo = {.config = cfg,
                                .metrics_bind_address = metrics,
                                .health_probe_bind_address = health,
                                .cache_sync_timeout_ns = CKUBE_SEC(100ull * 365 * 24 * 3600),
                                .handle_signals = true};
    char *err = NULL;
    ckube_manager *m = ckube_manager_new(&mo, &err);
    ckube_config_free(cfg);
    if (!m) {
        CKUBE_ERROR("Error building the manager: %s", err ? err : "?");
        free(err);
        return 1;
    }
    ckube_webhook_server *ws = ckube_webhook_server_new(&wo, &err);
    network_webhooks w = {0};
    ckube_shared_informer *nets = samplecrd_v1_networks_informer(ckube_manager_cache(m));
    if (!ws || !nets || network_webhooks_register(&w, ws, ckube_shared_informer_lister(nets))) {
        CKUBE_ERROR("Error building the webhook server: %s", err ? err : "?");
        free(err);
        ckube_webhook_server_free(ws);
        ckube_manager_free(m);
        return 1;
    }
    ckube_manager_add(m, ckube_webhook_server_runnable(ws));
    ckube_manager_add_readyz_check(m, "webhook", ckube_webhook_server_started_check, ws);
    int code = ckube_manager_run(m);
    ckube_manager_stop(m);
    ckube_manager_wait(m);
    ckube_manager_free(m);
    ckube_webhook_server_free(ws);
    network_webhooks_clear(&w);
    return code;
}
