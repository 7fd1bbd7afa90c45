/* ckube-metrics-api - a small aggregated API server built on libckube's
 * extension server (ckube/apiext.h), as metrics-server is one behind
 * kube-apiserver: it serves metrics.ckube.io/v1alpha1 ObjectCounts, read
 * only, counted from the main API server when asked. Each namespace has
 * one ObjectCount per counted resource (configmaps, secrets,
 * serviceaccounts), named after it, with `count`.
 *
 * Register it with an APIService (manifests/apiservice.yaml) and
 * `kubectl get objectcounts -n default` reaches it through the API
 * server, which proxies the request with the user in its headers; the
 * server asks the API server whether that user may list objectcounts
 * (SubjectAccessReview) before it counts. */
#include <ckube/apiext.h>
#include <ckube/config.h>
#include <ckube/json.h>
#include <ckube/log.h>
#include <ckube/manager.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const ckube_gvr COUNTED[] = {
    {"", "v1", "configmaps"}, {"", "v1", "secrets"}, {"", "v1", "serviceaccounts"}};

/* ObjectCounts of namespace ns ("" all namespaces): one list of each
 * counted resource, tallied by namespace. */
static json_t *list_counts(void *ctx, const char *ns, char **message)
{
    ckube_client *c = ctx;
    json_t *counts = json_object(); /* "ns/resource" -> count */
    char now[32];
    time_t t = time(NULL);
    strftime(now, sizeof now, "%Y-%m-%dT%H:%M:%SZ", gmtime(&t));
    for (size_t i = 0; i < sizeof COUNTED / sizeof *COUNTED; i++) {
        json_t *list = NULL;
        ckube_status *st = NULL;
        if (ckube_list_all(c, &COUNTED[i], *ns ? ns : NULL, NULL, &list, &st) != 0) {
            if (asprintf(message, "counting %s: %s", COUNTED[i].resource,
                         st && st->message ? st->message : "failed") < 0)
                *message = NULL;
            ckube_status_free(st);
            json_decref(counts);
            return NULL;
        }
        size_t k;
        json_t *o;
        json_array_foreach(json_object_get(list, "items"), k, o)
        {
            const char *ons = json_string_value(ckube_json_get_path(o, "metadata.namespace"));
            char key[600];
            snprintf(key, sizeof key, "%s/%s", ons ? ons : "", COUNTED[i].resource);
            json_object_set_new(counts, key,
                                json_integer(json_integer_value(json_object_get(counts, key)) + 1));
        }
        /* a namespace asked for has its three counts, zeros included */
        if (*ns) {
            char key[600];
            snprintf(key, sizeof key, "%s/%s", ns, COUNTED[i].resource);
            if (!json_object_get(counts, key))
                json_object_set_new(counts, key, json_integer(0));
        }
        json_decref(list);
    }
    json_t *items = json_array();
    const char *key;
    json_t *n;
    json_object_foreach(counts, key, n)
    {
        const char *slash = strchr(key, '/');
        char nsname[300];
        snprintf(nsname, sizeof nsname, "%.*s", (int)(slash - key), key);
        json_array_append_new(items,
                              json_pack("{s:{s:s,s:s,s:s},s:s,s:I}", "metadata", "name", slash + 1,
                                        "namespace", nsname, "creationTimestamp", now, "resource",
                                        slash + 1, "count", json_integer_value(n)));
    }
    json_decref(counts);
    return items;
}

static void usage(FILE *f)
{
    fprintf(f, "Usage: ckube-metrics-api [FLAGS]\n\n"
               "Serves metrics.ckube.io/v1alpha1 ObjectCounts as an aggregated API server.\n\n"
               "Flags:\n"
               "  --kubeconfig PATH             kubeconfig (default: $KUBECONFIG, in-cluster, "
               "~/.kube/config)\n"
               "  --bind-address ADDR           (default 0.0.0.0)\n"
               "  --secure-port PORT            (default 6443; 0: any free port)\n"
               "  --tls-cert-file PATH          serving certificate (default: self-signed)\n"
               "  --tls-private-key-file PATH   its key\n"
               "  -v, --v N                     log verbosity\n");
}

int main(int argc, char **argv)
{
    enum { F_KUBECONFIG = 256, F_BIND, F_PORT, F_CERT, F_KEY };
    static const struct option opts[] = {{"kubeconfig", required_argument, NULL, F_KUBECONFIG},
                                         {"bind-address", required_argument, NULL, F_BIND},
                                         {"secure-port", required_argument, NULL, F_PORT},
                                         {"tls-cert-file", required_argument, NULL, F_CERT},
                                         {"tls-private-key-file", required_argument, NULL, F_KEY},
                                         CKUBE_LOG_GETOPT_OPTIONS,
                                         {"help", no_argument, NULL, 'h'},
                                         {0, 0, 0, 0}};
    ckube_config_overrides ov = {0};
    /* four requests at once: counting is three lists from the API server,
     * and list_counts uses nothing but the (thread-safe) client */
    ckube_apiext_options ao = {
        .group = "metrics.ckube.io", .version = "v1alpha1", .port = 6443, .workers = 4};
    int ch;
    while ((ch = getopt_long(argc, argv, "v:h", opts, NULL)) != -1) {
        char *lerr = NULL;
        int logflag = ckube_log_getopt(ch, optarg, &lerr);
        if (logflag < 0) {
            fprintf(stderr, "ckube-metrics-api: %s\n", lerr ? lerr : "out of memory");
            free(lerr);
            return 2;
        }
        if (logflag > 0)
            continue;
        switch (ch) {
        case F_KUBECONFIG:
            ov.kubeconfig = optarg;
            break;
        case F_BIND:
            ao.bind_address = optarg;
            break;
        case F_PORT:
            ao.port = atoi(optarg);
            break;
        case F_CERT:
            ao.cert_file = optarg;
            break;
        case F_KEY:
            ao.key_file = optarg;
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
    ckube_manager_options mo = {.config = cfg, .handle_signals = true};
    char *err = NULL;
    ckube_manager *m = ckube_manager_new(&mo, &err);
    ckube_config_free(cfg);
    if (!m) {
        CKUBE_ERROR("Error building the manager: %s", err ? err : "?");
        free(err);
        return 1;
    }
    ao.client = ckube_manager_client(m);
    ckube_apiext_server *s = ckube_apiext_server_new(&ao, &err);
    static const char *const shorts[] = {"oc", NULL};
    ckube_apiext_resource r = {.plural = "objectcounts",
                               .kind = "ObjectCount",
                               .namespaced = true,
                               .short_names = shorts,
                               .list = list_counts,
                               .ctx = ao.client};
    /* what `kubectl explain objectcounts` shows */
    json_t *schema = json_pack(
        "{s:s,s:s,s:{s:{s:s,s:s,s:s}}}", "description",
        "How many objects of one resource a namespace holds, counted when asked.", "type", "object",
        "properties", "count", "description",
        "The number of objects of the resource the object is named after, in its namespace.",
        "type", "integer", "format", "int64");
    r.schema = schema;
    int added = s ? ckube_apiext_server_add_resource(s, &r) : -1;
    json_decref(schema); /* the server keeps a copy */
    if (added != 0) {
        CKUBE_ERROR("Error building the server: %s", err ? err : "?");
        free(err);
        ckube_apiext_server_free(s);
        ckube_manager_free(m);
        return 1;
    }
    ckube_manager_add(m, ckube_apiext_server_runnable(s));
    int code = ckube_manager_run(m);
    ckube_manager_stop(m);
    ckube_manager_wait(m);
    ckube_apiext_server_free(s);
    ckube_manager_free(m);
    return code;
}
