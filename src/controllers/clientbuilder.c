/* clientbuilder.c - a client per controller with its ServiceAccount's
 * token (see clientbuilder.h). */
#include "controllers/clientbuilder.h"

#include <ckube/json.h>
#include <ckube/log.h>

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static const ckube_gvr SERVICEACCOUNTS = {"", "v1", "serviceaccounts"};

/* How long after a failed fetch the next may be tried while the old token
 * is still in use. */
#define RETRY_NS CKUBE_SEC(1)

/* One ServiceAccount's client and its token. */
typedef struct sa_source {
    clientbuilder *b; /* the builder that owns this */
    char *name;
    ckube_client *client; /* owned; its token source is this struct */
    /* Guards what follows. Held across a fetch, so that the requests of a
     * client that find the token due wait for one fetch instead of each
     * making its own (client-go's cachingTokenSource slow path). */
    pthread_mutex_t mu;
    char *token;       /* NULL until the first fetch, and after a 401 */
    uint64_t due_ns;   /* when the next fetch is due (b->clock) */
    uint64_t retry_ns; /* no fetch before this after one failed */
    uint64_t fetches;
} sa_source;

struct clientbuilder {
    ckube_client *root; /* borrowed */
    ckube_config *base; /* owned; without credentials */
    char *ns;
    int64_t lifetime;
    int leeway;
    ckube_clock *clock;
    sa_source **v;
    size_t n;
};

/* ---- the pure parts ---------------------------------------------------------- */

int64_t clientbuilder_expiration_seconds(int64_t lifetime_seconds)
{
    int64_t s = lifetime_seconds > 0 ? lifetime_seconds : CLIENTBUILDER_DEFAULT_LIFETIME_SECONDS;
    return s < CLIENTBUILDER_MIN_EXPIRATION_SECONDS ? CLIENTBUILDER_MIN_EXPIRATION_SECONDS : s;
}

int64_t clientbuilder_use_seconds(int64_t now, int64_t expires, int64_t lifetime_seconds,
                                  int leeway_percent)
{
    int64_t life = expires - now;
    /* upstream: "possible clock skew issue, pin to minimum token lifetime" */
    if (life < CLIENTBUILDER_MIN_EXPIRATION_SECONDS)
        life = CLIENTBUILDER_MIN_EXPIRATION_SECONDS;
    if (lifetime_seconds > 0 && life > lifetime_seconds)
        life = lifetime_seconds;
    int leeway = leeway_percent > 0 && leeway_percent < 100 ? leeway_percent
                                                            : CLIENTBUILDER_DEFAULT_LEEWAY_PERCENT;
    int64_t use = life - life * leeway / 100;
    return use > 0 ? use : 1;
}

bool clientbuilder_fetch_due(bool have, uint64_t now, uint64_t due, uint64_t retry)
{
    return !have || (now >= due && now >= retry);
}

int clientbuilder_parse_token(const json_t *tr, char **token, int64_t *expires, const char **why)
{
    const json_t *st = json_object_get(tr, "status");
    const char *t = json_string_value(json_object_get(st, "token"));
    const char *exp = json_string_value(json_object_get(st, "expirationTimestamp"));
    *token = NULL;
    if (!t || !*t) {
        *why = "the TokenRequest answer has no status.token";
        return -1;
    }
    int64_t e = exp ? ckube_parse_rfc3339(exp) : -1;
    if (e < 0) {
        *why = "the TokenRequest answer has no valid status.expirationTimestamp";
        return -1;
    }
    if (!(*token = strdup(t))) {
        *why = "out of memory";
        return -1;
    }
    *expires = e;
    return 0;
}

/* ---- fetching a token ------------------------------------------------------------ */

/* Upstream's getOrCreateServiceAccount (without its attempt to create a
 * missing namespace: the controller-manager may not create namespaces,
 * and kube-system is the API server's). 0, or -1 with *err. */
static int ensure_service_account(clientbuilder *b, const char *name, ckube_status **err)
{
    json_t *sa = NULL;
    if (ckube_get(b->root, &SERVICEACCOUNTS, b->ns, name, &sa, err) == 0) {
        json_decref(sa);
        return 0;
    }
    if (!ckube_is_not_found(*err))
        return -1;
    ckube_status_free(*err);
    *err = NULL;
    json_t *obj = json_pack("{s:s,s:s,s:{s:s,s:s}}", "apiVersion", "v1", "kind", "ServiceAccount",
                            "metadata", "name", name, "namespace", b->ns);
    if (!obj)
        return -1;
    int rc = ckube_create(b->root, &SERVICEACCOUNTS, b->ns, obj, NULL, NULL, err);
    json_decref(obj);
    if (rc != 0 && ckube_status_is(*err, 409)) { /* made meanwhile: ours too */
        ckube_status_free(*err);
        *err = NULL;
        rc = 0;
    }
    if (rc == 0)
        CKUBE_INFO("created ServiceAccount %s/%s for its controller's credentials", b->ns, name);
    return rc;
}

/* A fresh token of the ServiceAccount: *token (malloc'd) and its
 * expiration (Unix seconds). 0, or -1 with *err. */
static int request_token(clientbuilder *b, const char *name, char **token, int64_t *expires,
                         ckube_status **err)
{
    if (ensure_service_account(b, name, err) != 0)
        return -1;
    char *path = ckube_resource_path(&SERVICEACCOUNTS, b->ns, name, "token");
    json_t *tr = json_pack("{s:s,s:s,s:{s:I}}", "apiVersion", "authentication.k8s.io/v1", "kind",
                           "TokenRequest", "spec", "expirationSeconds",
                           (json_int_t)clientbuilder_expiration_seconds(b->lifetime));
    char *body = tr ? ckube_json_dumps(tr, NULL) : NULL;
    json_decref(tr);
    int rc = -1;
    if (path && body) {
        ckube_request rq = {.method = "POST", .path = path, .body = body, .body_len = strlen(body)};
        ckube_response resp = {0};
        rc = ckube_client_do(b->root, &rq, &resp, err);
        if (rc == 0) {
            char *jerr = NULL;
            json_t *answer = ckube_json_loads(resp.body, resp.body_len, &jerr);
            const char *why = jerr ? jerr : "out of memory";
            rc = answer ? clientbuilder_parse_token(answer, token, expires, &why) : -1;
            if (rc != 0)
                *err = ckube_status_new(0, NULL, "token for %s/%s: %s", b->ns, name, why);
            json_decref(answer);
            free(jerr);
        }
        ckube_response_free(&resp);
    }
    free(path);
    free(body);
    return rc;
}

/* Fetches the next token into s (s->mu held). On failure the old token,
 * if any, stays. 0, or -1 with *err. */
static int refresh(sa_source *s, ckube_status **err)
{
    clientbuilder *b = s->b;
    char *token = NULL;
    int64_t expires = 0;
    if (request_token(b, s->name, &token, &expires, err) != 0) {
        s->retry_ns = ckube_clock_now(b->clock) + RETRY_NS;
        return -1;
    }
    int64_t use = clientbuilder_use_seconds((int64_t)time(NULL), expires, b->lifetime, b->leeway);
    free(s->token);
    s->token = token;
    s->due_ns = ckube_clock_now(b->clock) + CKUBE_SEC(use);
    s->retry_ns = 0;
    s->fetches++;
    CKUBE_V(2, "ServiceAccount %s/%s: new token (%s), next in %llds", b->ns, s->name,
            s->fetches == 1 ? "first" : "refreshed", (long long)use);
    return 0;
}

/* The clients' token source (ckube/config.h). */
static char *source_token(void *ctx, const char *rejected, ckube_status **err)
{
    sa_source *s = ctx;
    pthread_mutex_lock(&s->mu);
    if (rejected && s->token && !strcmp(rejected, s->token)) {
        /* client-go's ResetTokenOlderThan: the server no longer takes it */
        CKUBE_V(2, "ServiceAccount %s/%s: token refused (401); fetching another", s->b->ns,
                s->name);
        free(s->token);
        s->token = NULL;
    }
    ckube_status *e = NULL;
    if (clientbuilder_fetch_due(s->token != NULL, ckube_clock_now(s->b->clock), s->due_ns,
                                s->retry_ns) &&
        refresh(s, &e) != 0) {
        if (s->token) {
            CKUBE_ERROR("Unable to rotate token of ServiceAccount %s/%s: %s", s->b->ns, s->name,
                        e && e->message ? e->message : "unknown error");
            ckube_status_free(e);
            e = NULL;
        }
    }
    char *t = s->token ? strdup(s->token) : NULL;
    bool oom = s->token && !t;
    pthread_mutex_unlock(&s->mu);
    if (oom)
        e = ckube_status_new(0, NULL, "getting credentials: out of memory");
    if (err)
        *err = e;
    else
        ckube_status_free(e);
    return t;
}

/* ---- the builder ------------------------------------------------------------------ */

/* upstream's restclient.AnonymousClientConfig: the server and TLS, no
 * credentials. */
static void strip_credentials(ckube_config *c)
{
    free(c->cert_file);
    free(c->cert_data);
    free(c->key_file);
    free(c->key_data);
    free(c->bearer_token);
    free(c->bearer_token_file);
    free(c->username);
    free(c->password);
    c->cert_file = c->cert_data = c->key_file = c->key_data = NULL;
    c->cert_data_len = c->key_data_len = 0;
    c->bearer_token = c->bearer_token_file = c->username = c->password = NULL;
    if (c->exec) {
        /* ckube_config_free frees an exec config; free a copy holding only
         * it rather than reach into its members here. */
        ckube_config *holder = calloc(1, sizeof *holder);
        if (holder) {
            holder->exec = c->exec;
            ckube_config_free(holder);
            c->exec = NULL;
        }
    }
    c->token_source = NULL;
    c->token_source_ctx = NULL;
}

clientbuilder *clientbuilder_new(ckube_client *root, const ckube_config *base,
                                 const clientbuilder_opts *o)
{
    if (!root || !base)
        return NULL;
    clientbuilder *b = calloc(1, sizeof *b);
    if (!b)
        return NULL;
    b->root = root;
    b->base = ckube_config_dup(base);
    b->ns = strdup(o && o->namespace_ ? o->namespace_ : "kube-system");
    if (!b->base || !b->ns) {
        clientbuilder_free(b);
        return NULL;
    }
    strip_credentials(b->base);
    if (b->base->exec) { /* could not be freed: keep no credentials at all */
        clientbuilder_free(b);
        return NULL;
    }
    b->lifetime =
        o && o->lifetime_seconds > 0 ? o->lifetime_seconds : CLIENTBUILDER_DEFAULT_LIFETIME_SECONDS;
    b->leeway = o && o->leeway_percent > 0 && o->leeway_percent < 100
                    ? o->leeway_percent
                    : CLIENTBUILDER_DEFAULT_LEEWAY_PERCENT;
    b->clock = ckube_clock_or_real(o ? o->clock : NULL);
    return b;
}

static sa_source *find(clientbuilder *b, const char *name)
{
    for (size_t i = 0; i < b->n; i++)
        if (!strcmp(b->v[i]->name, name))
            return b->v[i];
    return NULL;
}

static void source_free(sa_source *s)
{
    if (!s)
        return;
    ckube_client_free(s->client);
    pthread_mutex_destroy(&s->mu);
    free(s->token);
    free(s->name);
    free(s);
}

ckube_client *clientbuilder_client(clientbuilder *b, const char *sa_name, ckube_status **err)
{
    if (err)
        *err = NULL;
    if (!b || !sa_name || !*sa_name)
        return NULL;
    sa_source *s = find(b, sa_name);
    if (s)
        return s->client;
    sa_source **v = realloc(b->v, (b->n + 1) * sizeof *v);
    if (!v)
        return NULL;
    b->v = v;
    s = calloc(1, sizeof *s);
    if (!s || !(s->name = strdup(sa_name))) {
        free(s);
        return NULL;
    }
    s->b = b;
    pthread_mutex_init(&s->mu, NULL);
    /* The base config with this source: a shallow copy is enough, the
     * client copies what it keeps. */
    ckube_config cfg = *b->base;
    cfg.token_source = source_token;
    cfg.token_source_ctx = s;
    s->client = ckube_client_new(&cfg, err);
    if (!s->client) {
        source_free(s);
        return NULL;
    }
    b->v[b->n++] = s;
    return s->client;
}

int clientbuilder_prepare(clientbuilder *b, const char *sa_name, ckube_status **err)
{
    if (err)
        *err = NULL;
    sa_source *s = b && sa_name ? find(b, sa_name) : NULL;
    if (!s)
        return -1;
    pthread_mutex_lock(&s->mu);
    ckube_status *e = NULL;
    int rc = s->token ? 0 : refresh(s, &e);
    pthread_mutex_unlock(&s->mu);
    if (err)
        *err = e;
    else
        ckube_status_free(e);
    return rc;
}

uint64_t clientbuilder_fetches(clientbuilder *b, const char *sa_name)
{
    sa_source *s = b && sa_name ? find(b, sa_name) : NULL;
    if (!s)
        return 0;
    pthread_mutex_lock(&s->mu);
    uint64_t n = s->fetches;
    pthread_mutex_unlock(&s->mu);
    return n;
}

void clientbuilder_free(clientbuilder *b)
{
    if (!b)
        return;
    for (size_t i = 0; i < b->n; i++)
        source_free(b->v[i]);
    free(b->v);
    ckube_config_free(b->base);
    free(b->ns);
    free(b);
}
