/* ckube_config: copy, free, and the kubectl-style loading order
 * (explicit file, $KUBECONFIG list, ~/.kube/config, in-cluster). */
#include "client/client_internal.h"
#include "client/kubeconfig.h"

#include <errno.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ckube/log.h"

static char *dup_bytes(const char *p, size_t n)
{
    if (!p)
        return NULL;
    char *d = malloc(n + 1);
    if (!d)
        return NULL;
    memcpy(d, p, n);
    d[n] = 0;
    return d;
}

void ckube__exec_config_free(ckube_exec_config *e)
{
    if (!e)
        return;
    free(e->command);
    ckube__strv_free(e->args, e->nargs);
    ckube__strv_free(e->env, e->nenv);
    free(e->api_version);
    free(e->install_hint);
    free(e->interactive_mode);
    free(e);
}

ckube_exec_config *ckube__exec_config_dup(const ckube_exec_config *e, bool *oom)
{
    if (!e)
        return NULL;
    ckube_exec_config *d = calloc(1, sizeof *d);
    if (!d) {
        *oom = true;
        return NULL;
    }
    d->command = ckube__strdup0(e->command);
    d->args = ckube__strv_dup(e->args, e->nargs);
    d->nargs = d->args ? e->nargs : 0;
    d->env = ckube__strv_dup(e->env, e->nenv);
    d->nenv = d->env ? e->nenv : 0;
    d->api_version = ckube__strdup0(e->api_version);
    d->install_hint = ckube__strdup0(e->install_hint);
    d->interactive_mode = ckube__strdup0(e->interactive_mode);
    d->provide_cluster_info = e->provide_cluster_info;
    if ((e->command && !d->command) || (e->nargs && !d->args) || (e->nenv && !d->env) ||
        (e->api_version && !d->api_version))
        *oom = true;
    return d;
}

ckube_config *ckube_config_dup(const ckube_config *cfg)
{
    if (!cfg)
        return NULL;
    ckube_config *d = calloc(1, sizeof *d);
    if (!d)
        return NULL;
    *d = *cfg; /* scalars; every pointer is replaced below */
    bool oom = false;
#define DUPS(f)                                                                                    \
    do {                                                                                           \
        d->f = ckube__strdup0(cfg->f);                                                             \
        if (cfg->f && !d->f)                                                                       \
            oom = true;                                                                            \
    } while (0)
#define DUPB(f)                                                                                    \
    do {                                                                                           \
        d->f = dup_bytes(cfg->f, cfg->f##_len);                                                    \
        if (cfg->f && !d->f)                                                                       \
            oom = true;                                                                            \
    } while (0)
    DUPS(host);
    DUPS(tls_server_name);
    DUPS(ca_file);
    DUPB(ca_data);
    DUPS(cert_file);
    DUPB(cert_data);
    DUPS(key_file);
    DUPB(key_data);
    DUPS(bearer_token);
    DUPS(bearer_token_file);
    DUPS(username);
    DUPS(password);
    DUPS(namespace_);
    DUPS(user_agent);
    DUPS(proxy_url);
#undef DUPS
#undef DUPB
    d->exec = ckube__exec_config_dup(cfg->exec, &oom);
    if (oom) {
        ckube_config_free(d);
        return NULL;
    }
    return d;
}

void ckube_config_free(ckube_config *cfg)
{
    if (!cfg)
        return;
    free(cfg->host);
    free(cfg->tls_server_name);
    free(cfg->ca_file);
    free(cfg->ca_data);
    free(cfg->cert_file);
    free(cfg->cert_data);
    free(cfg->key_file);
    free(cfg->key_data);
    free(cfg->bearer_token);
    free(cfg->bearer_token_file);
    free(cfg->username);
    free(cfg->password);
    ckube__exec_config_free(cfg->exec);
    free(cfg->namespace_);
    free(cfg->user_agent);
    free(cfg->proxy_url);
    free(cfg);
}

static char *home_config(void)
{
    const char *home = getenv("HOME");
    if (!home || !*home) {
        struct passwd *pw = getpwuid(getuid());
        home = pw ? pw->pw_dir : NULL;
    }
    char *p = NULL;
    if (home && asprintf(&p, "%s/.kube/config", home) < 0)
        p = NULL;
    return p;
}

/* Loads one file into kc. A missing file is an error only when `must`. */
static int load_file(ckube__kubeconfig *kc, const char *path, bool must, ckube_status **err)
{
    size_t n = 0;
    char *data = ckube__read_file(path, &n);
    if (!data) {
        if (errno == ENOENT && !must)
            return 0;
        *err = ckube__local_error(must && errno == ENOENT ? "stat %s: %s"
                                                          : "error loading config file \"%s\": %s",
                                  path, strerror(errno));
        return -1;
    }
    char *slash = strrchr(path, '/');
    char *dir = slash ? strndup(path, slash == path ? 1 : (size_t)(slash - path)) : strdup(".");
    int rc = ckube__kubeconfig_merge(kc, data, n, dir, path, err);
    free(dir);
    free(data);
    return rc;
}

int ckube_config_load(const ckube_config_overrides *o, ckube_config **out, ckube_status **err)
{
    static const ckube_config_overrides none = {0};
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    *out = NULL;
    if (!o)
        o = &none;
    ckube__kubeconfig kc;
    ckube__kubeconfig_init(&kc);
    int rc = 0;
    if (o->kubeconfig && *o->kubeconfig) {
        rc = load_file(&kc, o->kubeconfig, true, err);
    } else if (getenv("KUBECONFIG") && *getenv("KUBECONFIG")) {
        char *list = strdup(getenv("KUBECONFIG"));
        char **seen = NULL;
        size_t nseen = 0;
        char *save = NULL;
        for (char *p = list ? strtok_r(list, ":", &save) : NULL; p && rc == 0;
             p = strtok_r(NULL, ":", &save)) {
            bool dup = false;
            for (size_t i = 0; i < nseen && !dup; i++)
                dup = !strcmp(seen[i], p);
            if (dup)
                continue;
            char **ns = realloc(seen, (nseen + 1) * sizeof *ns);
            if (!ns)
                break;
            seen = ns;
            seen[nseen++] = p;
            rc = load_file(&kc, p, false, err);
        }
        free(seen);
        free(list);
    } else {
        char *home = home_config();
        if (home)
            rc = load_file(&kc, home, false, err);
        free(home);
    }
    if (rc == 0) {
        rc = ckube__kubeconfig_build(&kc, o, out, err);
        if (rc == CKUBE__KC_EMPTY) {
            /* Nothing configured: like kubectl's deferred loader, use the
             * in-cluster configuration when this runs in a pod. */
            ckube_status *icerr = NULL;
            if (!(o->master && *o->master) && ckube__in_cluster_possible() &&
                ckube__in_cluster(o, out, &icerr) == 0) {
                CKUBE_V(4, "Using in-cluster configuration");
                ckube_status_free(*err);
                *err = NULL;
                rc = 0;
            } else {
                if (icerr) {
                    ckube_status_free(*err);
                    *err = icerr;
                }
                rc = -1;
            }
        }
    }
    ckube__kubeconfig_clear(&kc);
    ckube_status_free(dummy);
    return rc == 0 ? 0 : -1;
}

int ckube_config_from_kubeconfig_data(const char *data, size_t len, const char *dir,
                                      const ckube_config_overrides *o, ckube_config **out,
                                      ckube_status **err)
{
    static const ckube_config_overrides none = {0};
    ckube_status *dummy = NULL;
    if (!err)
        err = &dummy;
    *err = NULL;
    *out = NULL;
    ckube__kubeconfig kc;
    ckube__kubeconfig_init(&kc);
    int rc = ckube__kubeconfig_merge(&kc, data, len, dir, NULL, err);
    if (rc == 0)
        rc = ckube__kubeconfig_build(&kc, o ? o : &none, out, err);
    ckube__kubeconfig_clear(&kc);
    ckube_status_free(dummy);
    return rc == 0 ? 0 : -1;
}
