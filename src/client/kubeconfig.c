/* kubeconfig parsing, merging and resolution, following clientcmd:
 *  - each file is checked on load (types, base64 data, duplicate names)
 *    and its relative paths are resolved against its own directory;
 *  - files merge map entry by map entry, the first file to define a name
 *    (or a current-context) winning;
 *  - the context is --context, else current-context; cluster and user
 *    come from --cluster/--user, else from the context; --server replaces
 *    the cluster's server; --namespace the context's namespace;
 *  - the selected cluster and user are validated as ConfirmUsable does,
 *    all problems reported at once ("invalid configuration: [a, b]");
 *  - credentials and TLS settings are applied only for https servers
 *    (clientcmd's IsConfigTransportTLS): never send a token in clear.
 * Differences, on purpose: a context naming a cluster or user that does
 * not exist is an error naming both (clientcmd silently goes on with an
 * empty one and fails later with a vaguer message or sends anonymous
 * requests), and auth-provider users are refused with a clear message. */
#include "client/kubeconfig.h"

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "ckube/log.h"
#include "ckube/yaml.h"
#include "client/client_internal.h"

void ckube__kubeconfig_init(ckube__kubeconfig *kc)
{
    kc->clusters = json_object();
    kc->users = json_object();
    kc->contexts = json_object();
    kc->current_context = NULL;
}

void ckube__kubeconfig_clear(ckube__kubeconfig *kc)
{
    json_decref(kc->clusters);
    json_decref(kc->users);
    json_decref(kc->contexts);
    free(kc->current_context);
    memset(kc, 0, sizeof *kc);
}

/* ---- parse-time checks ---- */

/* Joins dir and a relative path, folding "." and ".." as filepath.Join. */
static char *path_join(const char *dir, const char *rel)
{
    char *joined = NULL;
    if (asprintf(&joined, "%s/%s", dir, rel) < 0)
        return NULL;
    bool abs = joined[0] == '/';
    char **segs = calloc(strlen(joined) / 2 + 2, sizeof *segs);
    if (!segs)
        return joined;
    size_t n = 0;
    char *save = NULL;
    for (char *s = strtok_r(joined, "/", &save); s; s = strtok_r(NULL, "/", &save)) {
        if (!strcmp(s, "."))
            continue;
        if (!strcmp(s, "..") && n > 0 && strcmp(segs[n - 1], "..")) {
            n--;
            continue;
        }
        if (!strcmp(s, "..") && abs)
            continue;
        segs[n++] = s;
    }
    ckube__strbuf b = {0};
    if (abs)
        ckube__sb_addc(&b, '/');
    for (size_t i = 0; i < n; i++) {
        if (i)
            ckube__sb_addc(&b, '/');
        ckube__sb_add(&b, segs[i]);
    }
    if (!b.len)
        ckube__sb_addc(&b, '.');
    free(segs);
    free(joined);
    return ckube__sb_take(&b);
}

typedef struct checker {
    const char *dir;
    char *msg; /* first problem */
} checker;

static void problem(checker *ck, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void problem(checker *ck, const char *fmt, ...)
{
    if (ck->msg)
        return;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&ck->msg, fmt, ap) < 0)
        ck->msg = NULL;
    va_end(ap);
}

/* Checks o[key] has type t; a null is removed (same as absent). */
static json_t *want(checker *ck, json_t *o, const char *key, json_type t, const char *where)
{
    json_t *v = json_object_get(o, key);
    if (!v)
        return NULL;
    if (json_is_null(v)) {
        json_object_del(o, key);
        return NULL;
    }
    if (json_typeof(v) != t && !(t == JSON_TRUE && json_is_boolean(v))) {
        static const char *names[] = {"a mapping", "a list",    "a string",  "a number",
                                      "a number",  "a boolean", "a boolean", "null"};
        problem(ck, "%s.%s: expected %s", where, key, names[t]);
        return NULL;
    }
    return v;
}

static void want_path(checker *ck, json_t *o, const char *key, const char *where)
{
    json_t *v = want(ck, o, key, JSON_STRING, where);
    const char *s = json_string_value(v);
    if (!s || !*s || s[0] == '/' || !ck->dir)
        return;
    char *abs = path_join(ck->dir, s);
    if (abs)
        json_object_set_new(o, key, json_string(abs));
    free(abs);
}

static void want_b64(checker *ck, json_t *o, const char *key, const char *where)
{
    json_t *v = want(ck, o, key, JSON_STRING, where);
    if (!v)
        return;
    size_t n, bad = 0;
    char *d = ckube__b64_decode(json_string_value(v), json_string_length(v), &n, &bad);
    if (!d)
        problem(ck, "%s.%s: illegal base64 data at input byte %zu", where, key, bad);
    free(d);
}

static void check_cluster(checker *ck, json_t *o, const char *where)
{
    want(ck, o, "server", JSON_STRING, where);
    want_path(ck, o, "certificate-authority", where);
    want_b64(ck, o, "certificate-authority-data", where);
    want(ck, o, "insecure-skip-tls-verify", JSON_TRUE, where);
    want(ck, o, "tls-server-name", JSON_STRING, where);
    want(ck, o, "proxy-url", JSON_STRING, where);
    want(ck, o, "disable-compression", JSON_TRUE, where);
}

static void check_exec(checker *ck, json_t *x, const char *where)
{
    char w[512];
    snprintf(w, sizeof w, "%s.exec", where);
    json_t *cmd = want(ck, x, "command", JSON_STRING, w);
    /* A command with a path separator is a file relative to the
     * kubeconfig; a bare name is looked up in $PATH. */
    if (cmd && strchr(json_string_value(cmd), '/'))
        want_path(ck, x, "command", w);
    want(ck, x, "apiVersion", JSON_STRING, w);
    want(ck, x, "installHint", JSON_STRING, w);
    want(ck, x, "interactiveMode", JSON_STRING, w);
    want(ck, x, "provideClusterInfo", JSON_TRUE, w);
    json_t *args = want(ck, x, "args", JSON_ARRAY, w);
    size_t i;
    json_t *v;
    json_array_foreach(args, i, v)
    {
        if (!json_is_string(v))
            problem(ck, "%s.args[%zu]: expected a string", w, i);
    }
    json_t *env = want(ck, x, "env", JSON_ARRAY, w);
    json_array_foreach(env, i, v)
    {
        char we[600];
        snprintf(we, sizeof we, "%s.env[%zu]", w, i);
        if (!json_is_object(v)) {
            problem(ck, "%s: expected a mapping with name and value", we);
            continue;
        }
        want(ck, v, "name", JSON_STRING, we);
        want(ck, v, "value", JSON_STRING, we);
    }
}

static void check_user(checker *ck, json_t *o, const char *where)
{
    want_path(ck, o, "client-certificate", where);
    want_b64(ck, o, "client-certificate-data", where);
    want_path(ck, o, "client-key", where);
    want_b64(ck, o, "client-key-data", where);
    want(ck, o, "token", JSON_STRING, where);
    want_path(ck, o, "tokenFile", where);
    want(ck, o, "username", JSON_STRING, where);
    want(ck, o, "password", JSON_STRING, where);
    json_t *x = want(ck, o, "exec", JSON_OBJECT, where);
    if (x)
        check_exec(ck, x, where);
    want(ck, o, "auth-provider", JSON_OBJECT, where);
}

static void check_context(checker *ck, json_t *o, const char *where)
{
    want(ck, o, "cluster", JSON_STRING, where);
    want(ck, o, "user", JSON_STRING, where);
    want(ck, o, "namespace", JSON_STRING, where);
}

/* Reads doc[list] = [{name, inner: {...}}] into `out` (name -> checked
 * copy of inner). */
static void parse_list(checker *ck, const json_t *doc, const char *list, const char *inner,
                       json_t *out, void (*check)(checker *, json_t *, const char *))
{
    json_t *arr = json_object_get(doc, list);
    if (!arr || json_is_null(arr))
        return;
    if (!json_is_array(arr)) {
        problem(ck, "%s: expected a list", list);
        return;
    }
    size_t i;
    json_t *e;
    json_array_foreach(arr, i, e)
    {
        char where[256];
        if (!json_is_object(e)) {
            problem(ck, "%s[%zu]: expected a mapping with name and %s", list, i, inner);
            return;
        }
        const char *name = json_string_value(json_object_get(e, "name"));
        if (!name) {
            problem(ck, "%s[%zu]: name is required", list, i);
            return;
        }
        if (json_object_get(out, name)) {
            problem(ck, "%s: duplicate name \"%s\"", list, name);
            return;
        }
        json_t *in = json_object_get(e, inner);
        if (in && !json_is_null(in) && !json_is_object(in)) {
            problem(ck, "%s[%zu].%s: expected a mapping", list, i, inner);
            return;
        }
        json_t *copy = in && json_is_object(in) ? json_deep_copy(in) : json_object();
        snprintf(where, sizeof where, "%s[\"%s\"].%s", list, name, inner);
        check(ck, copy, where);
        json_object_set_new(out, name, copy);
        if (ck->msg)
            return;
    }
}

/* Adds the entries of `from` whose names `into` does not have yet. */
static void merge_first_wins(json_t *into, json_t *from)
{
    const char *k;
    json_t *v;
    json_object_foreach(from, k, v)
    {
        if (!json_object_get(into, k))
            json_object_set(into, k, v);
    }
}

int ckube__kubeconfig_merge(ckube__kubeconfig *kc, const char *data, size_t len, const char *dir,
                            const char *origin, ckube_status **err)
{
    char *yerr = NULL;
    json_t *doc = ckube_yaml_load(data ? data : "", data ? len : 0, &yerr);
    checker ck = {.dir = dir};
    json_t *cl = json_object(), *us = json_object(), *cx = json_object();
    const char *cc = NULL;
    if (!doc)
        problem(&ck, "%s", yerr ? yerr : "invalid YAML");
    else if (!json_is_null(doc) && !json_is_object(doc))
        problem(&ck, "expected a mapping at the top level of a kubeconfig");
    if (!ck.msg && json_is_object(doc)) {
        parse_list(&ck, doc, "clusters", "cluster", cl, check_cluster);
        parse_list(&ck, doc, "users", "user", us, check_user);
        parse_list(&ck, doc, "contexts", "context", cx, check_context);
        json_t *c = json_object_get(doc, "current-context");
        if (c && !json_is_null(c) && !json_is_string(c))
            problem(&ck, "current-context: expected a string");
        cc = json_string_value(c);
    }
    free(yerr);
    int rc = 0;
    if (ck.msg) {
        if (origin)
            *err = ckube__local_error("error loading config file \"%s\": %s", origin, ck.msg);
        else
            *err = ckube__local_error("error loading kubeconfig: %s", ck.msg);
        rc = -1;
    } else {
        merge_first_wins(kc->clusters, cl);
        merge_first_wins(kc->users, us);
        merge_first_wins(kc->contexts, cx);
        if (!kc->current_context && cc && *cc)
            kc->current_context = strdup(cc);
    }
    free(ck.msg);
    json_decref(cl);
    json_decref(us);
    json_decref(cx);
    json_decref(doc);
    return rc;
}

/* ---- building the client config ---- */

static const char *str(const json_t *o, const char *k)
{
    const char *s = json_string_value(json_object_get(o, k));
    return s && *s ? s : NULL;
}

static bool nonempty(const char *s)
{
    return s && *s;
}

typedef struct errlist {
    ckube__strbuf b;
    int n;
} errlist;

static void add_err(errlist *l, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_err(errlist *l, const char *fmt, ...)
{
    char *m = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&m, fmt, ap) < 0)
        m = NULL;
    va_end(ap);
    if (!m)
        return;
    if (l->n++)
        ckube__sb_add(&l->b, ", ");
    ckube__sb_add(&l->b, m);
    free(m);
}

static void check_file(errlist *l, const char *path, const char *what, const char *owner)
{
    size_t n;
    char *d = ckube__read_file(path, &n);
    if (!d)
        add_err(l, "unable to read %s %s for %s due to %s", what, path, owner, strerror(errno));
    free(d);
}

/* clientcmd's validateClusterInfo for the selected cluster. */
static void validate_cluster(errlist *l, const char *name, const json_t *cl)
{
    const char *ca = str(cl, "certificate-authority");
    if (ca)
        check_file(l, ca, "certificate-authority", name);
    if (ca && str(cl, "certificate-authority-data"))
        add_err(l,
                "certificate-authority-data and certificate-authority are both specified for %s. "
                "certificate-authority-data will override.",
                name);
    const char *proxy = str(cl, "proxy-url");
    if (proxy && !strstr(proxy, "://"))
        add_err(l, "proxy URL %s for %s: scheme is required (http, https or socks5)", proxy, name);
}

/* clientcmd's validateAuthInfo for the selected user. */
static void validate_user(errlist *l, const char *name, const json_t *u)
{
    const char *cert = str(u, "client-certificate"), *certd = str(u, "client-certificate-data");
    const char *key = str(u, "client-key"), *keyd = str(u, "client-key-data");
    if (cert || certd) {
        if (cert)
            check_file(l, cert, "client-cert", name);
        if (key)
            check_file(l, key, "client-key", name);
        if (cert && certd)
            add_err(l,
                    "client-cert-data and client-cert are both specified for %s. "
                    "client-cert-data will override.",
                    name);
        if (key && keyd)
            add_err(l,
                    "client-key-data and client-key are both specified for %s; client-key-data "
                    "will override",
                    name);
        if (!key && !keyd)
            add_err(l,
                    "client-key-data or client-key must be specified for %s to use the "
                    "clientCert authentication method.",
                    name);
    } else if (key || keyd) {
        add_err(l,
                "client-cert-data or client-cert must be specified for %s to use the clientCert "
                "authentication method.",
                name);
    }
    json_t *x = json_object_get(u, "exec");
    if (json_is_object(x)) {
        if (!str(x, "command"))
            add_err(l, "command must be specified for %s to use exec authentication plugin", name);
        const char *av = str(x, "apiVersion");
        if (!av)
            add_err(l, "apiVersion must be specified for %s to use exec authentication plugin",
                    name);
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(x, "env"), i, e)
        {
            if (!str(e, "name"))
                add_err(l,
                        "env variable name must be specified for %s to use exec authentication "
                        "plugin",
                        name);
        }
        const char *im = str(x, "interactiveMode");
        if (!im && av && !strcmp(av, "client.authentication.k8s.io/v1"))
            add_err(l, "interactiveMode must be specified for %s to use exec authentication plugin",
                    name);
        if (im && strcmp(im, "Never") && strcmp(im, "IfAvailable") && strcmp(im, "Always"))
            add_err(l, "invalid interactiveMode for %s: \"%s\"", name, im);
    }
    json_t *ap = json_object_get(u, "auth-provider");
    if (json_is_object(ap))
        add_err(l,
                "user %s uses auth-provider \"%s\", which ckube does not support: use an exec "
                "credential plugin instead",
                name, str(ap, "name") ? str(ap, "name") : "");
    bool token = str(u, "token") || str(u, "tokenFile");
    bool basic = str(u, "username") || str(u, "password");
    if (token && basic)
        add_err(l,
                "more than one authentication method found for %s; found [token basicAuth], only "
                "one is allowed",
                name);
}

static char *b64(const json_t *o, const char *k, size_t *len)
{
    const char *s = str(o, k);
    if (!s)
        return NULL;
    return ckube__b64_decode(s, strlen(s), len, NULL);
}

static ckube_exec_config *build_exec(const json_t *x)
{
    ckube_exec_config *e = calloc(1, sizeof *e);
    if (!e)
        return NULL;
    e->command = ckube__strdup0(str(x, "command"));
    e->api_version = ckube__strdup0(str(x, "apiVersion"));
    e->install_hint = ckube__strdup0(str(x, "installHint"));
    const char *im = str(x, "interactiveMode");
    e->interactive_mode = strdup(im ? im : "IfAvailable");
    e->provide_cluster_info = json_is_true(json_object_get(x, "provideClusterInfo"));
    json_t *args = json_object_get(x, "args");
    if (json_array_size(args)) {
        e->args = calloc(json_array_size(args), sizeof *e->args);
        for (size_t i = 0; e->args && i < json_array_size(args); i++)
            e->args[e->nargs++] = strdup(json_string_value(json_array_get(args, i)));
    }
    json_t *env = json_object_get(x, "env");
    if (json_array_size(env)) {
        e->env = calloc(json_array_size(env), sizeof *e->env);
        for (size_t i = 0; e->env && i < json_array_size(env); i++) {
            json_t *v = json_array_get(env, i);
            const char *val = json_string_value(json_object_get(v, "value"));
            if (asprintf(&e->env[e->nenv], "%s=%s", str(v, "name"), val ? val : "") >= 0)
                e->nenv++;
        }
    }
    return e;
}

int ckube__kubeconfig_build(const ckube__kubeconfig *kc, const ckube_config_overrides *o,
                            ckube_config **out, ckube_status **err)
{
    *out = NULL;
    bool ctx_required = nonempty(o->context);
    const char *ctx_name = ctx_required ? o->context : kc->current_context;
    const json_t *ctx = ctx_name ? json_object_get(kc->contexts, ctx_name) : NULL;
    if (nonempty(ctx_name) && !ctx) {
        *err = ctx_required ? ckube__local_error("context \"%s\" does not exist", ctx_name)
                            : ckube__local_error("invalid configuration: context was not found "
                                                 "for specified context: %s",
                                                 ctx_name);
        return -1;
    }
    const char *cl_name = nonempty(o->cluster) ? o->cluster : str(ctx, "cluster");
    const char *us_name = nonempty(o->user) ? o->user : str(ctx, "user");
    const json_t *cl = cl_name ? json_object_get(kc->clusters, cl_name) : NULL;
    const json_t *us = us_name ? json_object_get(kc->users, us_name) : NULL;
    const char *master = nonempty(o->master) ? o->master : NULL;
    if (cl_name && !cl && !master) {
        *err = nonempty(o->cluster)
                   ? ckube__local_error("cluster \"%s\" does not exist", cl_name)
                   : ckube__local_error("invalid configuration: cluster \"%s\" named by context "
                                        "\"%s\" does not exist",
                                        cl_name, ctx_name);
        return -1;
    }
    if (us_name && !us) {
        *err = nonempty(o->user)
                   ? ckube__local_error("auth info \"%s\" does not exist", us_name)
                   : ckube__local_error("invalid configuration: user \"%s\" named by context "
                                        "\"%s\" does not exist",
                                        us_name, ctx_name);
        return -1;
    }
    const char *server = master ? master : str(cl, "server");
    if (!server) {
        if (!cl_name) {
            *err = ckube__local_error("invalid configuration: no configuration has been "
                                      "provided");
            return CKUBE__KC_EMPTY;
        }
        *err = ckube__local_error("invalid configuration: no server found for cluster \"%s\"",
                                  cl_name);
        return -1;
    }
    errlist l = {{0}, 0};
    if (cl)
        validate_cluster(&l, cl_name, cl);
    if (us)
        validate_user(&l, us_name, us);
    if (l.n) {
        char *m = ckube__sb_take(&l.b);
        *err = ckube__local_error(
            l.n > 1 ? "invalid configuration: [%s]" : "invalid configuration: %s", m ? m : "");
        free(m);
        return -1;
    }

    ckube_config *c = calloc(1, sizeof *c);
    if (!c) {
        *err = ckube__local_error("out of memory");
        return -1;
    }
    c->host = strdup(server);
    c->proxy_url = ckube__strdup0(str(cl, "proxy-url"));
    const char *ns = nonempty(o->namespace_) ? o->namespace_ : str(ctx, "namespace");
    c->namespace_ = ckube__strdup0(ns);
    bool tls = strncasecmp(server, "https://", 8) == 0;
    if (tls) {
        c->ca_file = ckube__strdup0(str(cl, "certificate-authority"));
        c->ca_data = b64(cl, "certificate-authority-data", &c->ca_data_len);
        if (c->ca_data) { /* data overrides the file */
            free(c->ca_file);
            c->ca_file = NULL;
        }
        c->insecure_skip_tls_verify = json_is_true(json_object_get(cl, "insecure-skip-tls-verify"));
        c->tls_server_name = ckube__strdup0(str(cl, "tls-server-name"));
        if (str(us, "token")) {
            c->bearer_token = strdup(str(us, "token"));
            c->bearer_token_file = ckube__strdup0(str(us, "tokenFile"));
        } else if (str(us, "tokenFile")) {
            size_t n;
            char *t = ckube__read_file(str(us, "tokenFile"), &n);
            if (!t) {
                *err = ckube__local_error("open %s: %s", str(us, "tokenFile"), strerror(errno));
                ckube_config_free(c);
                return -1;
            }
            c->bearer_token = ckube__strndup_trim(t, n);
            free(t);
            c->bearer_token_file = strdup(str(us, "tokenFile"));
        }
        if (str(us, "client-certificate") || str(us, "client-certificate-data")) {
            c->cert_data = b64(us, "client-certificate-data", &c->cert_data_len);
            c->cert_file = c->cert_data ? NULL : ckube__strdup0(str(us, "client-certificate"));
            c->key_data = b64(us, "client-key-data", &c->key_data_len);
            c->key_file = c->key_data ? NULL : ckube__strdup0(str(us, "client-key"));
        }
        c->username = ckube__strdup0(str(us, "username"));
        c->password = ckube__strdup0(str(us, "password"));
        json_t *x = json_object_get(us, "exec");
        if (json_is_object(x))
            c->exec = build_exec(x);
    } else if (us && json_object_size(us)) {
        CKUBE_V(1, "server %s is not https: credentials of user \"%s\" are not sent", server,
                us_name);
    }
    if (!c->host) {
        ckube_config_free(c);
        *err = ckube__local_error("out of memory");
        return -1;
    }
    *out = c;
    return 0;
}
