/* hello-controller - a small controller written against the installed
 * libckube only (see the Makefile: `pkg-config --cflags --libs ckube`).
 *
 * For every ConfigMap labelled hello.ckube.io/enabled=true it keeps the
 * annotation hello.ckube.io/keys equal to the number of keys in the
 * ConfigMap's data. It has the shape of the sample controller in the
 * articles: a client from --kubeconfig/--master (else in-cluster), an
 * informer from a shared informer factory, a controller whose workers
 * take keys from a rate-limited workqueue, and a sync handler that reads
 * the lister and writes only when actual state differs from desired.
 *
 * ConfigMaps are read as the struct ckube-gen generates for them (k8s.h,
 * made by the Makefile from configmap.openapi.json, the ConfigMap part of
 * the server's /openapi/v3/api/v1), as a Go controller reads a
 * *corev1.ConfigMap from its lister.
 *
 *   hello-controller --kubeconfig ~/.kube/config [--workers 2] [-v 2]
 */
#include <ckube/client.h>
#include <ckube/config.h>
#include <ckube/controller.h>
#include <ckube/informer.h>
#include <ckube/json.h>
#include <ckube/log.h>

#include "k8s.h"

#include <getopt.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LABEL "hello.ckube.io/enabled=true"
#define ANNOTATION "hello.ckube.io/keys"

static const ckube_gvr CONFIGMAPS = {"", "v1", "configmaps"};

struct app {
    ckube_client *client;
    ckube_shared_informer *informer;
    ckube_lister lister;
};

/* The sync handler: desired state is "the annotation equals the number
 * of data keys"; the lister is the actual state as last seen. */
static ckube_result sync_handler(void *ctx, ckube_reconcile_ctx *rc, const char *ns,
                                 const char *name)
{
    struct app *app = ctx;
    ckube_object *obj = ckube_lister_get_object(&app->lister, ns, name);
    if (!obj) {
        /* Deleted (or no longer labelled): nothing of ours to clean up. */
        CKUBE_V(2, "configmap %s/%s is gone; nothing to do", ns, name);
        return ckube_result_ok();
    }
    /* The cached ConfigMap as a struct: decoded once per version, shared
     * with every other reader, read-only. */
    ckube_status *err = NULL;
    const k8s_v1_config_map *cm = k8s_v1_config_map_of(obj, &err);
    if (!cm) {
        CKUBE_ERROR("configmap %s/%s: %s", ns, name,
                    err && err->message ? err->message : "unknown error");
        ckube_status_free(err);
        ckube_object_unref(obj);
        return ckube_result_terminal();
    }
    char want[32];
    snprintf(want, sizeof(want), "%zu", cm->n_data);
    const char *have = ckube_string_map_get(cm->metadata.annotations_keys,
                                            cm->metadata.annotations,
                                            cm->metadata.n_annotations, ANNOTATION);
    if (have && strcmp(have, want) == 0) {
        ckube_object_unref(obj);
        return ckube_result_ok();
    }

    /* The resourceVersion inside the patch makes it conditional: if the
     * ConfigMap changed since the cache saw it, the server answers 409
     * and we retry with the fresh state. */
    char patch[256];
    snprintf(patch, sizeof(patch),
             "{\"metadata\":{\"resourceVersion\":\"%s\",\"annotations\":{\"%s\":\"%s\"}}}",
             cm->metadata.resource_version ? cm->metadata.resource_version : "", ANNOTATION, want);
    ckube_object_unref(obj);
    json_t *out = NULL;
    ckube_write_opts wo = {.field_manager = "hello-controller"};
    if (ckube_patch(app->client, &CONFIGMAPS, ns, name, CKUBE_PATCH_MERGE, patch, strlen(patch),
                    &wo, &out, &err) != 0) {
        CKUBE_ERROR("error syncing '%s/%s': %s, requeuing", ns, name,
                    err && err->message ? err->message : "unknown error");
        ckube_status_free(err);
        return ckube_result_error();
    }
    /* Read-your-writes: the next sync of this key waits for the cache to
     * have this version, so it never acts on its own stale state. */
    ckube_reconcile_wrote(rc, app->informer, out);
    json_decref(out);
    CKUBE_INFO("Successfully synced '%s/%s': %s=%s (%s)", ns, name, ANNOTATION, want,
               ckube_reconcile_reason(rc));
    return ckube_result_ok();
}

static void usage(void)
{
    fprintf(stderr, "usage: hello-controller [--kubeconfig PATH] [--master URL] "
                    "[--context NAME] [--workers N] [-v LEVEL]\n");
}

int main(int argc, char **argv)
{
    ckube_config_overrides ov = {0};
    int workers = 2;
    static const struct option opts[] = {{"kubeconfig", required_argument, NULL, 'k'},
                                         {"master", required_argument, NULL, 'm'},
                                         {"context", required_argument, NULL, 'c'},
                                         {"workers", required_argument, NULL, 'w'},
                                         {"v", required_argument, NULL, 'v'},
                                         {"help", no_argument, NULL, 'h'},
                                         {0, 0, 0, 0}};
    int ch;
    while ((ch = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        switch (ch) {
        case 'k':
            ov.kubeconfig = optarg;
            break;
        case 'm':
            ov.master = optarg;
            break;
        case 'c':
            ov.context = optarg;
            break;
        case 'w':
            workers = atoi(optarg);
            break;
        case 'v':
            ckube_log_set_verbosity(atoi(optarg));
            break;
        default:
            usage();
            return 2;
        }
    }

    /* Block the stop signals in every thread; main waits for them below. */
    sigset_t stop;
    sigemptyset(&stop);
    sigaddset(&stop, SIGINT);
    sigaddset(&stop, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &stop, NULL);

    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    if (ckube_config_load(&ov, &cfg, &err) != 0) {
        CKUBE_ERROR("Error building kubeconfig: %s", err->message);
        ckube_status_free(err);
        return 1;
    }
    struct app app = {0};
    app.client = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    if (!app.client) {
        CKUBE_ERROR("Error building client: %s", err->message);
        ckube_status_free(err);
        return 1;
    }

    /* Only labelled ConfigMaps are listed and watched (server-side). */
    ckube_informer_factory_opts fo = {.default_resync_ns = CKUBE_SEC(30), .label_selector = LABEL};
    ckube_informer_factory *factory = ckube_informer_factory_new(app.client, &fo);
    app.informer = ckube_informer_factory_for(factory, &CONFIGMAPS);
    app.lister = ckube_shared_informer_lister(app.informer);

    ckube_controller_options co = {.name = "hello", .max_concurrent_reconciles = workers};
    ckube_controller *ctl = ckube_controller_new(&co, sync_handler, &app);
    ckube_watch_spec watch = {.map = CKUBE_MAP_SELF, .skip_resync = true, .label = "configmaps"};
    ckube_controller_watch(ctl, app.informer, &watch);

    CKUBE_INFO("Setting up event handlers");
    ckube_informer_factory_start(factory);
    CKUBE_INFO("Starting hello controller");
    int rc = 0;
    if (ckube_controller_start(ctl, CKUBE_SEC(120)) != 0) {
        CKUBE_ERROR("failed to wait for caches to sync");
        rc = 1;
    } else {
        CKUBE_INFO("Started workers");
        int sig = 0;
        sigwait(&stop, &sig);
        CKUBE_INFO("Received signal %d, shutting down workers", sig);
    }
    ckube_controller_free(ctl);
    ckube_informer_factory_free(factory);
    ckube_client_free(app.client);
    return rc;
}
