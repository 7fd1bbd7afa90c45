/* In-cluster configuration (client-go's rest.InClusterConfig plus
 * clientcmd's in-cluster namespace): the API server from
 * KUBERNETES_SERVICE_HOST/PORT, the service account token (re-read every
 * minute through bearer_token_file), its CA and namespace.
 *
 * The service account directory is /var/run/secrets/kubernetes.io/
 * serviceaccount unless $CKUBE_SERVICEACCOUNT_DIR names another (tests,
 * and running outside a pod with copied files). */
#include "client/kubeconfig.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ckube/log.h"
#include "client/client_internal.h"

static const char *sa_dir(void)
{
    const char *d = getenv("CKUBE_SERVICEACCOUNT_DIR");
    return d && *d ? d : "/var/run/secrets/kubernetes.io/serviceaccount";
}

static char *sa_file(const char *name)
{
    char *p = NULL;
    if (asprintf(&p, "%s/%s", sa_dir(), name) < 0)
        return NULL;
    return p;
}

bool ckube__in_cluster_possible(void)
{
    const char *h = getenv("KUBERNETES_SERVICE_HOST"), *p = getenv("KUBERNETES_SERVICE_PORT");
    if (!h || !*h || !p || !*p)
        return false;
    char *tf = sa_file("token");
    struct stat st;
    bool ok = tf && stat(tf, &st) == 0 && !S_ISDIR(st.st_mode);
    free(tf);
    return ok;
}

int ckube__in_cluster(const ckube_config_overrides *o, ckube_config **out, ckube_status **err)
{
    *out = NULL;
    const char *h = getenv("KUBERNETES_SERVICE_HOST"), *p = getenv("KUBERNETES_SERVICE_PORT");
    if (!h || !*h || !p || !*p) {
        *err = ckube__local_error("unable to load in-cluster configuration, "
                                  "KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be "
                                  "defined");
        return -1;
    }
    ckube_config *c = calloc(1, sizeof *c);
    if (!c) {
        *err = ckube__local_error("out of memory");
        return -1;
    }
    char *token_path = sa_file("token");
    size_t n = 0;
    char *tok = token_path ? ckube__read_file(token_path, &n) : NULL;
    if (!tok) {
        *err =
            ckube__local_error("open %s: %s", token_path ? token_path : "token", strerror(errno));
        free(token_path);
        free(c);
        return -1;
    }
    c->bearer_token = ckube__strndup_trim(tok, n);
    free(tok);
    c->bearer_token_file = token_path;
    /* net.JoinHostPort: an IPv6 address gets brackets. */
    bool v6 = strchr(h, ':') != NULL && h[0] != '[';
    if (asprintf(&c->host, "https://%s%s%s:%s", v6 ? "[" : "", h, v6 ? "]" : "", p) < 0)
        c->host = NULL;
    char *ca = sa_file("ca.crt");
    size_t calen = 0;
    char *cad = ca ? ckube__read_file(ca, &calen) : NULL;
    if (cad && calen > 0) {
        c->ca_file = ca;
        ca = NULL;
    } else {
        CKUBE_ERROR("Expected to load root CA config from %s, but got err: %s", ca ? ca : "ca.crt",
                    cad ? "empty file" : strerror(errno));
    }
    free(cad);
    free(ca);
    /* Namespace: --namespace, else $POD_NAMESPACE, else the service
     * account's namespace file, else "default". */
    const char *ns = o && o->namespace_ && *o->namespace_ ? o->namespace_ : getenv("POD_NAMESPACE");
    if (ns && *ns) {
        c->namespace_ = strdup(ns);
    } else {
        char *nsf = sa_file("namespace");
        char *d = nsf ? ckube__read_file(nsf, &n) : NULL;
        if (d) {
            c->namespace_ = ckube__strndup_trim(d, n);
            if (c->namespace_ && !*c->namespace_) {
                free(c->namespace_);
                c->namespace_ = NULL;
            }
        }
        free(d);
        free(nsf);
    }
    if (o && o->master && *o->master) {
        free(c->host);
        c->host = strdup(o->master);
    }
    if (!c->host || !c->bearer_token) {
        ckube_config_free(c);
        *err = ckube__local_error("out of memory");
        return -1;
    }
    *out = c;
    return 0;
}

int ckube_config_in_cluster(ckube_config **out, ckube_status **err)
{
    ckube_status *dummy = NULL;
    int rc = ckube__in_cluster(NULL, out, err ? err : &dummy);
    ckube_status_free(dummy);
    return rc;
}
