/* The webhook operator's handlers (webhooks.h), on the Network types
 * ckube-gen made from the CRD (samplecrd.h) and the controller's address
 * checks (netaddr.h). */
#include "webhooks.h"

#include "netaddr.h"
#include "samplecrd.h"

#include <arpa/inet.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- defaulting ---------------------------------------------------------------- */

/* A missing gateway becomes the CIDR's first host address. */
static int network_default(void *ctx, const ckube_admission_request *req, ckube_typed *obj,
                           char **msg)
{
    (void)ctx;
    (void)req;
    (void)msg;
    samplecrd_v1_network *n = (samplecrd_v1_network *)obj;
    if (!n->spec || !n->spec->cidr || (n->spec->gateway && *n->spec->gateway))
        return 0;
    netaddr_prefix p;
    if (netaddr_parse_prefix(n->spec->cidr, &p, NULL) != 0)
        return 0; /* the validator says what is wrong with it */
    netaddr gw = p.net;
    int last = p.net.family == AF_INET ? 3 : 15;
    gw.addr[last] |= 1;
    char buf[NETADDR_STRLEN];
    free(n->spec->gateway);
    n->spec->gateway = strdup(netaddr_format(&gw, buf, sizeof buf));
    return 0;
}

/* ---- validation ---------------------------------------------------------------- */

static int network_validate(void *ctx, const ckube_admission_request *req, const ckube_typed *obj,
                            const ckube_typed *old, ckube_admission_response *resp, char **msg)
{
    (void)old;
    network_webhooks *w = ctx;
    const samplecrd_v1_network *n = (const samplecrd_v1_network *)obj;
    if (!n) /* a delete: nothing to judge */
        return 0;
    const char *cidr = n->spec ? n->spec->cidr : NULL;
    const char *gateway = n->spec ? n->spec->gateway : NULL;
    netaddr_prefix p;
    netaddr gw;
    char *why = NULL;
    if (netaddr_check_spec(cidr ? cidr : "", gateway ? gateway : "", &p, &gw, &why) != 0) {
        if (asprintf(msg, "spec: %s", why ? why : "invalid") < 0)
            *msg = NULL;
        free(why);
        return -1;
    }
    if (p.net.family == AF_INET && p.len < 16)
        ckube_admission_warn(resp, "spec.cidr: a /%d network holds %s addresses", p.len,
                             p.len < 8 ? "over 16 million" : "over 65 thousand");
    /* another Network of the namespace over the same addresses */
    ckube_object **all = NULL;
    size_t count = 0;
    int rc = 0;
    if (ckube_lister_list_objects(&w->networks, req->namespace_, NULL, &all, &count) != 0)
        return 0;
    for (size_t i = 0; i < count && !rc; i++) {
        const samplecrd_v1_network *o = samplecrd_v1_network_of(all[i], NULL);
        const char *oname = o ? o->metadata.name : NULL;
        if (!o || !o->spec || !o->spec->cidr || !oname || !strcmp(oname, req->name))
            continue;
        netaddr_prefix q;
        if (netaddr_parse_prefix(o->spec->cidr, &q, NULL) == 0 && netaddr_prefix_overlaps(&p, &q)) {
            if (asprintf(msg, "spec.cidr: %s overlaps Network %s/%s (%s)", cidr, req->namespace_,
                         oname, o->spec->cidr) < 0)
                *msg = NULL;
            rc = -1;
        }
    }
    ckube_object_list_free(all, count);
    return rc;
}

/* ---- conversion ---------------------------------------------------------------- */

static void rename_member(json_t *spec, const char *from, const char *to)
{
    json_t *v = json_object_get(spec, from);
    if (!v)
        return;
    json_object_set(spec, to, v);
    json_object_del(spec, from);
}

/* v1alpha1's spec.subnet and spec.gw are v1's spec.cidr and spec.gateway. */
static json_t *network_convert(void *ctx, const json_t *obj, const char *want, char **msg)
{
    (void)ctx;
    const char *have = json_string_value(json_object_get(obj, "apiVersion"));
    bool to_v1 = !strcmp(want, "samplecrd.k8s.io/v1");
    bool to_alpha = !strcmp(want, "samplecrd.k8s.io/v1alpha1");
    if ((!to_v1 && !to_alpha) || !have ||
        (strcmp(have, "samplecrd.k8s.io/v1") && strcmp(have, "samplecrd.k8s.io/v1alpha1"))) {
        if (asprintf(msg, "unexpected conversion from %s to %s", have ? have : "?", want) < 0)
            *msg = NULL;
        return NULL;
    }
    json_t *out = json_deep_copy(obj);
    json_t *spec = json_object_get(out, "spec");
    if (to_v1) {
        rename_member(spec, "subnet", "cidr");
        rename_member(spec, "gw", "gateway");
    } else {
        rename_member(spec, "cidr", "subnet");
        rename_member(spec, "gateway", "gw");
    }
    return out;
}

int network_webhooks_register(network_webhooks *w, ckube_webhook_server *s, ckube_lister networks)
{
    w->scheme = ckube_scheme_new();
    w->networks = networks;
    if (!w->scheme || samplecrd_add_to_scheme(w->scheme) != 0)
        return -1;
    if (ckube_webhook_server_defaulter(s, NETWORK_MUTATE_PATH, w->scheme, network_default, w) ||
        ckube_webhook_server_validator(s, NETWORK_VALIDATE_PATH, w->scheme, network_validate, w) ||
        ckube_webhook_server_conversion(s, NETWORK_CONVERT_PATH, network_convert, w))
        return -1;
    return 0;
}

void network_webhooks_clear(network_webhooks *w)
{
    ckube_scheme_free(w->scheme);
    w->scheme = NULL;
}
