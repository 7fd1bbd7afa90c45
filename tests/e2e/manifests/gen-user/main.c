/* A user's program on code ckube-gen generated from the Network CRD, built
 * against the installed libckube by tests/e2e/test_ckube_gen.sh, once with
 * the Makefile (pkg-config) and once with CMake (ckube_generate).
 *
 *   networks KUBECONFIG create NAME CIDR GATEWAY
 *   networks KUBECONFIG list
 *
 * create builds a typed Network and writes it with the generated client,
 * which hands back what the server stored as the struct; list reads the
 * namespace's Networks as structs. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ckube/client.h>
#include <ckube/config.h>

#include "samplecrd.h"

static int fail(const char *what, ckube_status *err)
{
    fprintf(stderr, "%s: %s\n", what, err && err->message ? err->message : "out of memory");
    ckube_status_free(err);
    return 1;
}

static int create(ckube_client *c, const char *name, const char *cidr, const char *gw)
{
    samplecrd_v1_network *n = samplecrd_v1_network_new();
    if (!n || ckube_set_string(&n->api_version, "samplecrd.k8s.io/v1") ||
        ckube_set_string(&n->kind, "Network") || ckube_set_string(&n->metadata.name, name) ||
        !(n->spec = samplecrd_v1_network_spec_new()) || ckube_set_string(&n->spec->cidr, cidr) ||
        ckube_set_string(&n->spec->gateway, gw))
        return fail("create", NULL);
    samplecrd_v1_network *got = NULL;
    ckube_status *err = NULL;
    int rc = samplecrd_v1_networks_create(c, ckube_client_namespace(c), n, NULL, &got, &err);
    samplecrd_v1_network_free(n);
    if (rc)
        return fail("create", err);
    printf("created %s uid=%s generation=%lld cidr=%s\n", got->metadata.name,
           got->metadata.uid ? "set" : "none", (long long)got->metadata.generation,
           got->spec->cidr);
    samplecrd_v1_network_free(got);
    return 0;
}

static int list(ckube_client *c)
{
    ckube_typed_list *l = NULL;
    ckube_status *err = NULL;
    if (samplecrd_v1_networks_list(c, ckube_client_namespace(c), NULL, &l, &err))
        return fail("list", err);
    for (size_t i = 0; i < l->n_items; i++) {
        const samplecrd_v1_network *n = samplecrd_v1_network_list_at(l, i);
        const char *phase = n->status && n->status->phase ? n->status->phase : "-";
        printf("%s %s %s %s\n", n->metadata.name, n->spec ? n->spec->cidr : "-",
               n->spec ? n->spec->gateway : "-", phase);
    }
    ckube_typed_list_free(l);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc < 3) {
        fprintf(stderr, "usage: networks KUBECONFIG create NAME CIDR GATEWAY | list\n");
        return 2;
    }
    ckube_config_overrides ov = {.kubeconfig = argv[1]};
    ckube_config *cfg = NULL;
    ckube_status *err = NULL;
    if (ckube_config_load(&ov, &cfg, &err))
        return fail("config", err);
    ckube_client *c = ckube_client_new(cfg, &err);
    ckube_config_free(cfg);
    if (!c)
        return fail("client", err);
    int rc = 2;
    if (!strcmp(argv[2], "create") && argc == 6)
        rc = create(c, argv[3], argv[4], argv[5]);
    else if (!strcmp(argv[2], "list"))
        rc = list(c);
    ckube_client_free(c);
    return rc;
}
