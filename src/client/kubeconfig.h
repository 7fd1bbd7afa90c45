/* kubeconfig.h - kubeconfig merging and in-cluster config (internal). */
#ifndef CKUBE_CLIENT_KUBECONFIG_H
#define CKUBE_CLIENT_KUBECONFIG_H

#include <jansson.h>
#include <stdbool.h>

#include "ckube/config.h"

/* Merged kubeconfig files: name -> entry maps (the inner "cluster",
 * "user", "context" objects, relative paths already made absolute) and
 * the current context. The first file to set a name or the current
 * context wins, as clientcmd's loader merges. */
typedef struct ckube__kubeconfig {
    json_t *clusters;
    json_t *users;
    json_t *contexts;
    char *current_context;
} ckube__kubeconfig;

/* ckube__kubeconfig_build's result when nothing is configured (clientcmd's
 * ErrEmptyConfig): *err is set too, and the caller may try in-cluster. */
#define CKUBE__KC_EMPTY 1

void ckube__kubeconfig_init(ckube__kubeconfig *kc);
void ckube__kubeconfig_clear(ckube__kubeconfig *kc);
/* Merges one document (YAML or JSON). `dir` resolves relative paths (NULL
 * = leave them); `origin` names the file in errors (may be NULL). */
int ckube__kubeconfig_merge(ckube__kubeconfig *kc, const char *data, size_t len, const char *dir,
                            const char *origin, ckube_status **err);
/* Applies the overrides and builds the client config: 0, -1 with *err,
 * or CKUBE__KC_EMPTY with *err. */
int ckube__kubeconfig_build(const ckube__kubeconfig *kc, const ckube_config_overrides *o,
                            ckube_config **out, ckube_status **err);

/* KUBERNETES_SERVICE_HOST/PORT set and the token file present. */
bool ckube__in_cluster_possible(void);
/* The in-cluster config with kubectl's overrides (master, namespace). */
int ckube__in_cluster(const ckube_config_overrides *o, ckube_config **out, ckube_status **err);

#endif
