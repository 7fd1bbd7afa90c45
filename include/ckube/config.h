/* ckube/config.h - how to reach an API server: kubeconfig and in-cluster.
 *
 * Loading follows kubectl (client-go's clientcmd) exactly:
 *   - an explicit kubeconfig path wins; else $KUBECONFIG, a ':'-separated
 *     list whose files are merged (the first file to set a map entry or
 *     current-context wins); else ~/.kube/config;
 *   - the context is the override, else current-context;
 *   - an explicit master URL overrides the cluster's server;
 *   - with no kubeconfig file found and no master, the in-cluster
 *     configuration is used (KUBERNETES_SERVICE_HOST/PORT and the service
 *     account files), as client-go's BuildConfigFromFlags("", "") does.
 * Relative file paths inside a kubeconfig are resolved against the
 * directory of the file that named them.
 */
#ifndef CKUBE_CONFIG_H
#define CKUBE_CONFIG_H

#include <ckube/status.h>
#include <stdbool.h>
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* An exec credential plugin (client.authentication.k8s.io). */
typedef struct ckube_exec_config {
    char *command; /* owned */
    char **args;   /* owned, nargs entries */
    size_t nargs;
    char **env; /* owned "NAME=VALUE" entries */
    size_t nenv;
    char *api_version;         /* owned, e.g. "client.authentication.k8s.io/v1" */
    char *install_hint;        /* owned; appended to "executable not found" */
    char *interactive_mode;    /* owned: "Never" | "IfAvailable" | "Always";
                                  library clients are never interactive, so
                                  "Always" is refused */
    bool provide_cluster_info; /* pass spec.cluster in KUBERNETES_EXEC_INFO */
} ckube_exec_config;

/* A source of bearer tokens the program keeps in memory (client-go's
 * oauth2.TokenSource, which kube-controller-manager wraps around each
 * controller's transport for its ServiceAccount token; see
 * ckube_config.token_source). Called before every request, watches
 * included, on the thread making it, with no lock of the client held, so
 * it may block (to fetch a token) and must be thread-safe. Returns a
 * malloc'd token the client frees, or NULL with *err set to a new
 * ckube_status (or left NULL), and the request fails with that error.
 * After the server answered 401 it is called once more with `rejected`,
 * the token it refused (borrowed for the call; NULL otherwise), so that
 * it can drop that token and get another: when what it returns differs,
 * the request is tried once more. */
typedef char *(*ckube_token_source_fn)(void *ctx, const char *rejected, ckube_status **err);

/* Everything a client needs; the analogue of client-go's rest.Config.
 * Every pointer is owned by the struct (ckube_config_free frees them) and
 * may be NULL. *_data fields hold PEM bytes (already base64-decoded). */
typedef struct ckube_config {
    char *host; /* "https://10.0.0.1:443"; required */
    char *tls_server_name;
    bool insecure_skip_tls_verify;
    char *ca_file;
    char *ca_data;
    size_t ca_data_len;
    char *cert_file;
    char *cert_data;
    size_t cert_data_len;
    char *key_file;
    char *key_data;
    size_t key_data_len;
    char *bearer_token;
    char *bearer_token_file; /* re-read every minute, as client-go does */
    char *username;
    char *password;
    ckube_exec_config *exec; /* owned; NULL = none */
    char *namespace_;        /* the context's namespace; NULL = "default" */
    char *user_agent;        /* NULL = "ckube/<version> (<os>/<arch>)" */
    char *proxy_url;
    double qps;      /* client-side rate limit; 0 = 5 (client-go's default);
                        < 0 = no client-side limit */
    int burst;       /* 0 = 10 */
    int timeout_ms;  /* per request (not watches); 0 = none */
    int max_retries; /* 429/Retry-After retries; 0 = 10; < 0 = none */
    /* Bearer tokens from the program (see ckube_token_source_fn); NULL =
     * none. Not with bearer_token, bearer_token_file, an exec plugin or a
     * username (ckube_client_new refuses the mix). The context is
     * borrowed, never freed: it must outlive every client made from this
     * config, and copies (ckube_config_dup) share it. (Last in the struct
     * so that the fields above keep their offsets.) */
    ckube_token_source_fn token_source;
    void *token_source_ctx;
} ckube_config;

/* Explicit overrides, each NULL when not given (like kubectl's flags). */
typedef struct ckube_config_overrides {
    const char *kubeconfig; /* --kubeconfig */
    const char *master;     /* --master / --server */
    const char *context;    /* --context */
    const char *cluster;    /* --cluster */
    const char *user;       /* --user */
    const char *namespace_; /* --namespace */
} ckube_config_overrides;

/* Loads as described above. `o` may be NULL. On success *out is a new
 * config (free with ckube_config_free). On failure returns -1 with *err
 * (code 0) naming the file or setting at fault. */
int ckube_config_load(const ckube_config_overrides *o, ckube_config **out, ckube_status **err);
/* The in-cluster configuration only. */
int ckube_config_in_cluster(ckube_config **out, ckube_status **err);
/* Parses one kubeconfig document from memory (YAML or JSON) with the
 * given overrides; `dir` resolves relative paths (may be NULL). */
int ckube_config_from_kubeconfig_data(const char *data, size_t len, const char *dir,
                                      const ckube_config_overrides *o, ckube_config **out,
                                      ckube_status **err);
/* Deep copy; NULL on allocation failure. */
ckube_config *ckube_config_dup(const ckube_config *cfg);
void ckube_config_free(ckube_config *cfg);

#ifdef __cplusplus
}
#endif
#endif
