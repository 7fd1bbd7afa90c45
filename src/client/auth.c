/* Request credentials: static bearer token, token file (re-read every
 * minute as client-go's cachedFileTokenSource does), and exec credential
 * plugins (client.authentication.k8s.io/v1 and v1beta1).
 *
 * Exec plugins run with the process environment plus the configured env
 * and KUBERNETES_EXEC_INFO (an ExecCredential with spec.interactive=false
 * and, with provideClusterInfo, spec.cluster), stdin from /dev/null and
 * stderr inherited. The result is cached until status.expirationTimestamp
 * (forever without one) and re-run when it expired or a request got 401.
 * One mutex makes concurrent callers wait for a single plugin run instead
 * of each starting its own.
 *
 * Precedence when several are configured: exec credentials, then the
 * token file's last good content, then the static token. Basic auth is
 * applied by http.c from the config directly. A token source (the
 * program's callback) is never configured with any of these
 * (ckube_client_new refuses it) and is asked for every request, outside
 * the mutex: it keeps and refreshes its token itself. */
#include "client/client_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ckube/json.h"
#include "ckube/log.h"

extern char **environ;

_Atomic uint64_t ckube__token_file_period_ns = 60ull * 1000000000ull;

struct ckube__auth {
    pthread_mutex_t mu;
    char *static_token;
    /* token file */
    char *token_file;
    char *file_token; /* last successfully read content, trimmed */
    uint64_t file_read_ns;
    /* exec plugin */
    ckube_exec_config *exec;
    char *exec_info; /* KUBERNETES_EXEC_INFO=... */
    bool have_exec_creds;
    char *ex_token, *ex_cert, *ex_key;
    size_t ex_cert_len, ex_key_len;
    int64_t ex_expiry_us; /* wall clock; 0 = never expires */
    uint64_t generation;  /* bumped whenever the credentials change */
    /* the program's token source (config.h); its context is borrowed */
    ckube_token_source_fn source;
    void *source_ctx;
};

/* KUBERNETES_EXEC_INFO: what the plugin learns about the request. */
static char *build_exec_info(const ckube_config *cfg)
{
    json_t *cred = json_object();
    json_object_set_new(cred, "kind", json_string("ExecCredential"));
    json_object_set_new(cred, "apiVersion", json_string(cfg->exec->api_version));
    json_t *spec = json_object();
    json_object_set_new(spec, "interactive", json_false());
    if (cfg->exec->provide_cluster_info) {
        json_t *cl = json_object();
        json_object_set_new(cl, "server", json_string(cfg->host ? cfg->host : ""));
        if (cfg->tls_server_name)
            json_object_set_new(cl, "tls-server-name", json_string(cfg->tls_server_name));
        if (cfg->insecure_skip_tls_verify)
            json_object_set_new(cl, "insecure-skip-tls-verify", json_true());
        size_t calen = cfg->ca_data_len;
        char *ca =
            cfg->ca_data ? NULL : (cfg->ca_file ? ckube__read_file(cfg->ca_file, &calen) : NULL);
        const char *cadata = cfg->ca_data ? cfg->ca_data : ca;
        if (cadata) {
            char *b64 = ckube__b64_encode(cadata, calen);
            if (b64)
                json_object_set_new(cl, "certificate-authority-data", json_string(b64));
            free(b64);
        }
        free(ca);
        if (cfg->proxy_url)
            json_object_set_new(cl, "proxy-url", json_string(cfg->proxy_url));
        json_object_set_new(spec, "cluster", cl);
    }
    json_object_set_new(cred, "spec", spec);
    char *s = ckube_json_dumps(cred, NULL);
    json_decref(cred);
    char *env = NULL;
    if (s && asprintf(&env, "KUBERNETES_EXEC_INFO=%s", s) < 0)
        env = NULL;
    free(s);
    return env;
}

ckube__auth *ckube__auth_new(const ckube_config *cfg, ckube_status **err)
{
    ckube__auth *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    pthread_mutex_init(&a->mu, NULL);
    a->source = cfg->token_source;
    a->source_ctx = cfg->token_source_ctx;
    a->static_token =
        ckube__strdup0(cfg->bearer_token && *cfg->bearer_token ? cfg->bearer_token : NULL);
    if (cfg->bearer_token_file && *cfg->bearer_token_file) {
        a->token_file = strdup(cfg->bearer_token_file);
        size_t n = 0;
        char *raw = ckube__read_file(a->token_file, &n);
        if (raw) {
            a->file_token = ckube__strndup_trim(raw, n);
            free(raw);
            a->file_read_ns = ckube_monotonic_ns();
        } else if (!a->static_token) {
            if (err)
                *err = ckube__local_error("reading bearer token file \"%s\": %s", a->token_file,
                                          strerror(errno));
            ckube__auth_free(a);
            return NULL;
        }
    }
    if (cfg->exec) {
        if (!cfg->exec->command || !*cfg->exec->command || !cfg->exec->api_version) {
            if (err)
                *err = ckube__local_error("exec plugin: command and apiVersion are required");
            ckube__auth_free(a);
            return NULL;
        }
        if (strcmp(cfg->exec->api_version, "client.authentication.k8s.io/v1") &&
            strcmp(cfg->exec->api_version, "client.authentication.k8s.io/v1beta1")) {
            if (err)
                *err = ckube__local_error("exec plugin: invalid apiVersion \"%s\"",
                                          cfg->exec->api_version);
            ckube__auth_free(a);
            return NULL;
        }
        if (cfg->exec->interactive_mode && !strcmp(cfg->exec->interactive_mode, "Always")) {
            if (err)
                *err = ckube__local_error(
                    "exec plugin cannot support interactive mode: interactiveMode is Always and "
                    "a library client has no terminal");
            ckube__auth_free(a);
            return NULL;
        }
        bool oom = false;
        a->exec = ckube__exec_config_dup(cfg->exec, &oom);
        a->exec_info = build_exec_info(cfg);
    }
    return a;
}

void ckube__auth_free(ckube__auth *a)
{
    if (!a)
        return;
    pthread_mutex_destroy(&a->mu);
    free(a->static_token);
    free(a->token_file);
    free(a->file_token);
    ckube__exec_config_free(a->exec);
    free(a->exec_info);
    free(a->ex_token);
    free(a->ex_cert);
    free(a->ex_key);
    free(a);
}

void ckube__creds_clear(ckube__creds *c)
{
    free(c->token);
    free(c->cert);
    free(c->key);
    memset(c, 0, sizeof *c);
}

static int64_t now_us(void)
{
    struct timeval tv;
    gettimeofday(&tv, NULL);
    return (int64_t)tv.tv_sec * 1000000 + tv.tv_usec;
}

/* Environment of the plugin: ours, minus names the exec config sets, plus
 * those, plus KUBERNETES_EXEC_INFO (last one wins, as Go's os/exec does). */
static char **exec_envp(const ckube__auth *a)
{
    size_t n = 0;
    while (environ && environ[n])
        n++;
    char **envp = calloc(n + a->exec->nenv + 2, sizeof *envp);
    if (!envp)
        return NULL;
    size_t k = 0;
    for (size_t i = 0; i < n; i++) {
        const char *eq = strchr(environ[i], '=');
        size_t nl = eq ? (size_t)(eq - environ[i]) : strlen(environ[i]);
        bool overridden = nl == strlen("KUBERNETES_EXEC_INFO") &&
                          !strncmp(environ[i], "KUBERNETES_EXEC_INFO", nl);
        for (size_t j = 0; j < a->exec->nenv && !overridden; j++)
            overridden = !strncmp(a->exec->env[j], environ[i], nl) && a->exec->env[j][nl] == '=';
        if (!overridden)
            envp[k++] = environ[i];
    }
    for (size_t j = 0; j < a->exec->nenv; j++)
        envp[k++] = a->exec->env[j];
    if (a->exec_info)
        envp[k++] = a->exec_info;
    envp[k] = NULL;
    return envp;
}

/* Runs the plugin and returns its stdout (malloc'd) or NULL with *err. */
static char *exec_run(const ckube__auth *a, size_t *outlen, ckube_status **err)
{
    const ckube_exec_config *x = a->exec;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) {
        *err = ckube__local_error("getting credentials: exec: pipe: %s", strerror(errno));
        return NULL;
    }
    char **argv = calloc(x->nargs + 2, sizeof *argv);
    char **envp = exec_envp(a);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, fds[1], 1);
    pid_t pid = -1;
    int rc = ENOMEM;
    if (argv && envp) {
        argv[0] = x->command;
        for (size_t i = 0; i < x->nargs; i++)
            argv[i + 1] = x->args[i];
        rc = strchr(x->command, '/') ? posix_spawn(&pid, x->command, &fa, NULL, argv, envp)
                                     : posix_spawnp(&pid, x->command, &fa, NULL, argv, envp);
    }
    posix_spawn_file_actions_destroy(&fa);
    free(argv);
    free(envp);
    close(fds[1]);
    if (rc != 0) {
        close(fds[0]);
        if (rc == ENOENT)
            *err = ckube__local_error("getting credentials: exec: executable %s not found%s%s",
                                      x->command, x->install_hint ? "\n\n" : "",
                                      x->install_hint ? x->install_hint : "");
        else
            *err = ckube__local_error("getting credentials: exec: executable %s: %s", x->command,
                                      strerror(rc));
        return NULL;
    }
    ckube__strbuf out = {0};
    char buf[4096];
    for (;;) {
        ssize_t r = read(fds[0], buf, sizeof buf);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        if (out.len < (16u << 20)) /* keep draining, stop storing past 16 MiB */
            ckube__sb_addn(&out, buf, (size_t)r);
    }
    close(fds[0]);
    int status = 0;
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        free(out.s);
        *err =
            ckube__local_error("getting credentials: exec: executable %s failed with exit code %d",
                               x->command, WIFEXITED(status) ? WEXITSTATUS(status) : -1);
        return NULL;
    }
    *outlen = out.len;
    char *s = ckube__sb_take(&out);
    if (!s)
        *err = ckube__local_error("getting credentials: out of memory");
    return s;
}

/* Runs the plugin and stores its credentials. Called with a->mu held. */
static int exec_refresh(ckube__auth *a, ckube_status **err)
{
    size_t len = 0;
    char *out = exec_run(a, &len, err);
    if (!out)
        return -1;
    char *jerr = NULL;
    json_t *cred = ckube_json_loads(out, len, &jerr);
    free(out);
    const char *fail = NULL;
    char *msg = NULL;
    json_t *st = NULL;
    if (!cred) {
        if (asprintf(&msg, "decoding stdout: %s", jerr ? jerr : "invalid JSON") < 0)
            msg = NULL;
    } else if (!ckube_obj_kind(cred) || strcmp(ckube_obj_kind(cred), "ExecCredential")) {
        fail = "plugin did not return an ExecCredential";
    } else if (!ckube_obj_api_version(cred) ||
               strcmp(ckube_obj_api_version(cred), a->exec->api_version)) {
        if (asprintf(&msg,
                     "exec plugin is configured to use API version %s, plugin returned "
                     "version %s",
                     a->exec->api_version,
                     ckube_obj_api_version(cred) ? ckube_obj_api_version(cred) : "") < 0)
            msg = NULL;
    } else if (!json_is_object(st = json_object_get(cred, "status"))) {
        fail = "exec plugin didn't return a status field";
    }
    free(jerr);
    const char *tok = json_string_value(json_object_get(st, "token"));
    const char *cert = json_string_value(json_object_get(st, "clientCertificateData"));
    const char *key = json_string_value(json_object_get(st, "clientKeyData"));
    if (tok && !*tok)
        tok = NULL;
    if (cert && !*cert)
        cert = NULL;
    if (key && !*key)
        key = NULL;
    if (!fail && !msg && st) {
        if (!tok && !cert && !key)
            fail = "exec plugin didn't return a token or cert/key pair";
        else if (!cert != !key)
            fail = "exec plugin returned only certificate or key, not both";
    }
    int64_t exp = 0;
    const char *exps = json_string_value(json_object_get(st, "expirationTimestamp"));
    if (!fail && !msg && exps) {
        int64_t t = ckube_parse_rfc3339(exps);
        if (t < 0)
            fail = "exec plugin returned an invalid expirationTimestamp";
        else
            exp = t * 1000000;
    }
    if (fail || msg) {
        *err = ckube__local_error("getting credentials: %s", fail ? fail : msg ? msg : "error");
        free(msg);
        json_decref(cred);
        return -1;
    }
    free(a->ex_token);
    free(a->ex_cert);
    free(a->ex_key);
    a->ex_token = ckube__strdup0(tok);
    a->ex_cert = ckube__strdup0(cert);
    a->ex_key = ckube__strdup0(key);
    a->ex_cert_len = cert ? strlen(cert) : 0;
    a->ex_key_len = key ? strlen(key) : 0;
    a->ex_expiry_us = exp;
    a->have_exec_creds = true;
    a->generation++;
    json_decref(cred);
    CKUBE_V(4, "exec plugin %s returned new credentials%s%s", a->exec->command,
            exps ? " expiring at " : "", exps ? exps : "");
    return 0;
}

/* Re-reads the token file; keeps the old token when that fails. */
static void file_reload(ckube__auth *a)
{
    size_t n = 0;
    char *raw = ckube__read_file(a->token_file, &n);
    a->file_read_ns = ckube_monotonic_ns();
    if (!raw) {
        CKUBE_ERROR("reading bearer token file \"%s\": %s (keeping the previous token)",
                    a->token_file, strerror(errno));
        return;
    }
    char *t = ckube__strndup_trim(raw, n);
    free(raw);
    if (!t || !*t) {
        free(t);
        return;
    }
    if (!a->file_token || strcmp(a->file_token, t)) {
        free(a->file_token);
        a->file_token = t;
        a->generation++;
    } else {
        free(t);
    }
}

static int fill(const ckube__auth *a, ckube__creds *out)
{
    memset(out, 0, sizeof *out);
    out->generation = a->generation;
    const char *tok = a->static_token;
    if (a->file_token)
        tok = a->file_token;
    if (a->have_exec_creds) {
        if (a->ex_token)
            tok = a->ex_token;
        if (a->ex_cert) {
            out->cert = strdup(a->ex_cert);
            out->key = strdup(a->ex_key);
            out->cert_len = a->ex_cert_len;
            out->key_len = a->ex_key_len;
            if (!out->cert || !out->key)
                return -1;
        }
    }
    if (tok && !(out->token = strdup(tok)))
        return -1;
    return 0;
}

/* The token source's token for the next request (or, with `rejected`,
 * after a 401). -1 with *err when it has none. */
static int source_get(ckube__auth *a, const char *rejected, ckube__creds *out, ckube_status **err)
{
    memset(out, 0, sizeof *out);
    ckube_status *e = NULL;
    out->token = a->source(a->source_ctx, rejected, &e);
    if (out->token)
        return 0;
    if (!e)
        e = ckube__local_error("getting credentials: the token source has no token");
    if (err)
        *err = e;
    else
        ckube_status_free(e);
    return -1;
}

int ckube__auth_get(ckube__auth *a, ckube__creds *out, ckube_status **err)
{
    if (a->source)
        return source_get(a, NULL, out, err);
    pthread_mutex_lock(&a->mu);
    int rc = 0;
    if (a->exec && (!a->have_exec_creds || (a->ex_expiry_us && now_us() > a->ex_expiry_us)))
        rc = exec_refresh(a, err);
    if (rc == 0 && a->token_file &&
        ckube_monotonic_ns() - a->file_read_ns >= atomic_load(&ckube__token_file_period_ns))
        file_reload(a);
    if (rc == 0 && fill(a, out) != 0) {
        ckube__creds_clear(out);
        *err = ckube__local_error("getting credentials: out of memory");
        rc = -1;
    }
    pthread_mutex_unlock(&a->mu);
    return rc;
}

static bool same_str(const char *x, const char *y)
{
    return (!x && !y) || (x && y && !strcmp(x, y));
}

bool ckube__auth_unauthorized(ckube__auth *a, const ckube__creds *used)
{
    if (a->source) {
        ckube__creds now;
        ckube_status *err = NULL;
        bool differ =
            source_get(a, used->token, &now, &err) == 0 && !same_str(now.token, used->token);
        if (err)
            CKUBE_ERROR("refreshing credentials after 401 Unauthorized: %s",
                        err->message ? err->message : "error");
        ckube_status_free(err);
        ckube__creds_clear(&now);
        return differ;
    }
    if (!a->exec && !a->token_file)
        return false;
    pthread_mutex_lock(&a->mu);
    if (a->generation == used->generation) {
        if (a->exec) {
            ckube_status *err = NULL;
            if (exec_refresh(a, &err) != 0) {
                CKUBE_ERROR("refreshing credentials after 401 Unauthorized: %s",
                            err && err->message ? err->message : "error");
                ckube_status_free(err);
            }
        } else {
            file_reload(a);
        }
    }
    ckube__creds now;
    bool differ = false;
    if (fill(a, &now) == 0)
        differ = !same_str(now.token, used->token) || !same_str(now.cert, used->cert) ||
                 !same_str(now.key, used->key);
    ckube__creds_clear(&now);
    pthread_mutex_unlock(&a->mu);
    return differ;
}
