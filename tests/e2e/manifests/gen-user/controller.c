/* The seed's Network controller shape on code ckube-gen wrote from the
 * seed's own CRD (examples/network/crd.yaml: v1beta1, no schema), built
 * against the installed libckube by tests/e2e/test_ckube_gen.sh:
 *
 *   seed-controller KUBECONFIG SECONDS
 *
 * The generated informer and lister views give the Network typed
 * metadata; the schema-less spec comes as JSON (the struct's unknown
 * members). It logs what the seed's controller logs, and exits after
 * SECONDS (or on SIGTERM). */
#include <ckube/config.h>
#include <ckube/controller.h>
#include <ckube/json.h>
#include <ckube/log.h>
#include <signal.h>
#include <stdlib.h>

#include "samplecrd.h"

static ckube_lister networks;

static ckube_result sync_network(void *ctx, ckube_reconcile_ctx *rc, const char *ns,
                                 const char *name)
{
    (void)ctx;
    (void)rc;
    ckube_object *o = ckube_lister_get_object(&networks, ns, name);
    if (!o) {
        CKUBE_INFO("[Neutron] Deleting network: %s/%s", ns, name);
        return ckube_result_ok();
    }
    ckube_status *err = NULL;
    const samplecrd_v1_network *n = samplecrd_v1_network_of(o, &err);
    if (!n) {
        CKUBE_ERROR("%s/%s: %s", ns, name, err && err->message ? err->message : "?");
        ckube_status_free(err);
        ckube_object_unref(o);
        return ckube_result_terminal();
    }
    const char *cidr = json_string_value(ckube_json_get_path(n->unknown, "spec.cidr"));
    const char *gw = json_string_value(ckube_json_get_path(n->unknown, "spec.gateway"));
    CKUBE_INFO("[Neutron] Try to process network: %s/%s resourceVersion %s cidr %s gateway %s",
               n->metadata.namespace_, n->metadata.name, n->metadata.resource_version,
               cidr ? cidr : "-", gw ? gw : "-");
    ckube_object_unref(o);
    return ckube_result_ok();
}

int main(int argc, char **argv)
{
    if (argc < 3)
        return 2;
    ckube_config_overrides ov = {.kubeconfig = argv[1]};
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    if (ckube_config_load(&ov, &cfg, &err))
        return 1;
    ckube_client *c = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    if (!c)
        return 1;
    ckube_informer_factory *f = ckube_informer_factory_new(c, NULL);
    ckube_shared_informer *inf = samplecrd_v1_networks_informer(f);
    networks = ckube_shared_informer_lister(inf);
    ckube_controller_options co = {.name = "network", .max_concurrent_reconciles = 2};
    ckube_controller *ctl = ckube_controller_new(&co, sync_network, NULL);
    ckube_watch_spec ws = {.map = CKUBE_MAP_SELF};
    ckube_controller_watch(ctl, inf, &ws);
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGTERM);
    sigaddset(&stop, SIGINT);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);
    ckube_informer_factory_start(f);
    int rc = 0;
    if (!ckube_informer_factory_wait_for_cache_sync(f, CKUBE_SEC(30)) ||
        ckube_controller_start(ctl, CKUBE_SEC(30)) != 0) {
        rc = 1;
    } else {
        struct timespec ts = {.tv_sec = atoi(argv[2])};
        sigtimedwait(&stop, NULL, &ts);
    }
    ckube_controller_free(ctl);
    ckube_informer_factory_free(f);
    ckube_client_free(c);
    return rc;
}
