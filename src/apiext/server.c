/* A small extension API server (ckube/apiext.h): HTTPS on an http_serve
 * of its own (runtime/http_serve.h: evhttp on a thread), as the webhook
 * server and the manager's secure port, its serving certificate read
 * again when its files change (runtime's serving_cert); authentication and
 * authorization as k8s.io/apiserver's delegated options (the front
 * proxy's request headers here, the rest runtime/delegated_auth.c's);
 * discovery and read-only resources from provider callbacks. */
#include <ckube/apiext.h>
#include <ckube/json.h>
#include <ckube/log.h>

#include <event2/buffer.h>
#include <event2/bufferevent.h>
#include <event2/bufferevent_ssl.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "apiext/internal.h"
#include "common/text.h"
#include "runtime/delegated_auth.h"
#include "runtime/http_serve.h"
#include "runtime/secure_serving.h"

/* the public limit is one http_serve honours */
_Static_assert(CKUBE_APIEXT_MAX_WORKERS <= HTTP_SERVE_MAX_WORKERS,
               "workers beyond http_serve's limit");

typedef struct resource {
    char *plural, *singular, *kind;
    bool namespaced;
    char **short_names;
    ckube_apiext_list_fn list;
    void *ctx;
    json_t *schema; /* or NULL */
} resource;

struct ckube_apiext_server {
    ckube_client *client;
    char *group, *version, *gv;
    char *host;
    int port, bound_port;
    char *cert_file, *key_file;
    resource *res;
    size_t nres;
    serving_cert *tls;
    apiext_front_proxy *fp;
    delegated_auth *auth;
    unsigned workers; /* options'; 0: requests served on the loop */
    /* The OpenAPI v3 document, encoded, and its URL (with its hash), made
     * at start (the resources are fixed by then); read-only while serving,
     * so the workers share bytes, never a json_t (whose counts jansson
     * does not change atomically). */
    char *openapi;
    size_t openapi_len;
    char *openapi_url;
    http_serve *serve; /* once started; NULL when stopped */
    ckube_runnable runnable;
};

/* One request on its way: what the TLS layer knows is read on the loop,
 * the rest (authentication, authorization, the provider) runs on a
 * worker (or the loop, without workers), which reads the request's
 * method, URI and headers (the loop leaves a request alone until it is
 * answered) and writes the answer here; the loop sends it. */
typedef struct ax_call {
    ckube_apiext_server *s;
    struct evhttp_request *req;
    X509 *peer;      /* the client certificate (a reference), or NULL */
    bool verified;   /* the TLS layer verified it */
    bool from_proxy; /* it is the front proxy's */
    int code;        /* the answer */
    const char *ctype;
    char *body; /* malloc'd */
    size_t len;
} ax_call;

/* ---- answers -------------------------------------------------------------- */

/* The answer: `body` (taken, malloc'd; NULL: "{}"). */
static void answer_taken(ax_call *c, int code, const char *ctype, char *body, size_t len)
{
    c->code = code;
    c->ctype = ctype;
    c->body = body;
    c->len = body ? len : 0;
}

/* A copy of len bytes as the answer (a 500 when out of memory). */
static void answer_copy(ax_call *c, int code, const char *ctype, const char *bytes, size_t len)
{
    char *b = malloc(len ? len : 1);
    if (!b) {
        answer_taken(c, 500, "application/json", NULL, 0);
        return;
    }
    memcpy(b, bytes, len);
    answer_taken(c, code, ctype, b, len);
}

static void answer_text(ax_call *c, int code, const char *text)
{
    answer_copy(c, code, "text/plain; charset=utf-8", text, strlen(text));
}

/* j (taken) as JSON. */
static void answer_json(ax_call *c, int code, json_t *j)
{
    size_t len = 0;
    char *s = j ? ckube_json_dumps(j, &len) : NULL;
    json_decref(j);
    answer_taken(c, code, "application/json", s, len);
}

static void answer_status(ax_call *c, ckube_status *st)
{
    int code = st && st->code ? st->code : 500;
    answer_json(c, code, st ? ckube_status_to_json(st) : NULL);
    ckube_status_free(st);
}

/* On the loop: sends the answer (req NULL: the server stopped first) and
 * frees the call. */
static void call_done(struct evhttp_request *req, void *arg)
{
    ax_call *c = arg;
    if (req) {
        struct evkeyvalq *out = evhttp_request_get_output_headers(req);
        evhttp_add_header(out, "Content-Type", c->ctype ? c->ctype : "application/json");
        evhttp_add_header(out, "Cache-Control", "no-cache, private");
        struct evbuffer *b = evbuffer_new();
        if (b)
            evbuffer_add(b, c->body ? c->body : "{}", c->body ? c->len : 2);
        int code = c->code ? c->code : 500;
        evhttp_send_reply(req, code, ckube__http_reason(code), b);
        if (b)
            evbuffer_free(b);
    }
    X509_free(c->peer);
    free(c->body);
    free(c);
}

/* ---- discovery ------------------------------------------------------------- */

static json_t *group_json(const ckube_apiext_server *s)
{
    json_t *v = json_pack("{s:s,s:s}", "groupVersion", s->gv, "version", s->version);
    return json_pack("{s:s,s:[O],s:o}", "name", s->group, "versions", v, "preferredVersion", v);
}

static json_t *resource_list(const ckube_apiext_server *s)
{
    json_t *rs = json_array();
    for (size_t i = 0; i < s->nres; i++) {
        const resource *r = &s->res[i];
        json_t *o =
            json_pack("{s:s,s:s,s:b,s:s,s:[s,s]}", "name", r->plural, "singularName", r->singular,
                      "namespaced", r->namespaced, "kind", r->kind, "verbs", "get", "list");
        if (r->short_names) {
            json_t *sn = json_array();
            for (size_t k = 0; r->short_names[k]; k++)
                json_array_append_new(sn, json_string(r->short_names[k]));
            json_object_set_new(o, "shortNames", sn);
        }
        json_array_append_new(rs, o);
    }
    return json_pack("{s:s,s:s,s:s,s:o}", "kind", "APIResourceList", "apiVersion", "v1",
                     "groupVersion", s->gv, "resources", rs);
}

/* ---- resources ------------------------------------------------------------- */

/* What a resource path names: /apis/G/V[/namespaces/NS]/PLURAL[/NAME]. */
typedef struct target {
    const resource *r;
    char ns[254], name[254];
} target;

static const resource *find_resource(const ckube_apiext_server *s, const char *plural, size_t n)
{
    for (size_t i = 0; i < s->nres; i++)
        if (strlen(s->res[i].plural) == n && !strncmp(s->res[i].plural, plural, n))
            return &s->res[i];
    return NULL;
}

/* Splits `rest` (after "/apis/G/V/") into segments; 0 when it names a
 * served resource (t filled), -1 when not. */
static int parse_target(const ckube_apiext_server *s, const char *rest, target *t)
{
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", rest);
    char *seg[6];
    int n = 0;
    for (char *save = NULL, *p = strtok_r(buf, "/", &save); p && n < 6;
         p = strtok_r(NULL, "/", &save))
        seg[n++] = p;
    memset(t, 0, sizeof *t);
    int i = 0;
    if (n >= 3 && !strcmp(seg[0], "namespaces")) {
        snprintf(t->ns, sizeof t->ns, "%s", seg[1]);
        i = 2;
    }
    if (n - i < 1 || n - i > 2)
        return -1;
    t->r = find_resource(s, seg[i], strlen(seg[i]));
    if (!t->r || (*t->ns && !t->r->namespaced))
        return -1;
    if (n - i == 2)
        snprintf(t->name, sizeof t->name, "%s", seg[i + 1]);
    return 0;
}

static void stamp(const ckube_apiext_server *s, const resource *r, json_t *o)
{
    json_object_set_new(o, "kind", json_string(r->kind));
    json_object_set_new(o, "apiVersion", json_string(s->gv));
}

static const char *obj_meta(const json_t *o, const char *k)
{
    return json_string_value(json_object_get(json_object_get(o, "metadata"), k));
}

/* kubectl's Table (as=Table;v=v1;g=meta.k8s.io): Name and Age, each row
 * with its object's metadata as PartialObjectMetadata. */
static json_t *table_of(const ckube_apiext_server *s, json_t *items)
{
    json_t *cols = json_pack(
        "[{s:s,s:s,s:s,s:s,s:i},{s:s,s:s,s:s,s:s,s:i}]", "name", "Name", "type", "string", "format",
        "name", "description", "Name must be unique within a namespace.", "priority", 0, "name",
        "Age", "type", "string", "format", "", "description",
        "CreationTimestamp is a timestamp representing the server time when this object was "
        "created.",
        "priority", 0);
    json_t *rows = json_array();
    time_t now = time(NULL);
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o)
    {
        const char *ts = obj_meta(o, "creationTimestamp");
        char age[32] = "<unknown>";
        struct tm tm = {0};
        if (ts && strptime(ts, "%Y-%m-%dT%H:%M:%SZ", &tm))
            ckube__human_duration((int64_t)(now - timegm(&tm)), age, sizeof age);
        json_t *meta = json_pack("{s:s,s:s,s:O}", "kind", "PartialObjectMetadata", "apiVersion",
                                 "meta.k8s.io/v1", "metadata", json_object_get(o, "metadata"));
        json_array_append_new(rows, json_pack("{s:[s,s],s:o}", "cells", obj_meta(o, "name") ?: "",
                                              age, "object", meta));
    }
    (void)s;
    return json_pack("{s:s,s:s,s:{s:s},s:o,s:o}", "kind", "Table", "apiVersion", "meta.k8s.io/v1",
                     "metadata", "resourceVersion", "", "columnDefinitions", cols, "rows", rows);
}

static bool wants_table(struct evhttp_request *req)
{
    const char *a = evhttp_find_header(evhttp_request_get_input_headers(req), "Accept");
    return a && strstr(a, "as=Table") && strstr(a, "g=meta.k8s.io");
}

static void serve_resource(ax_call *c, const target *t)
{
    ckube_apiext_server *s = c->s;
    const resource *r = t->r;
    char *message = NULL;
    json_t *items = r->list(r->ctx, t->ns, &message);
    if (!json_is_array(items)) {
        json_decref(items);
        answer_status(c, ckube_status_internal("%s", message ? message : "the provider failed"));
        free(message);
        return;
    }
    free(message);
    size_t i;
    json_t *o;
    json_array_foreach(items, i, o) stamp(s, r, o);
    if (*t->name) {
        json_t *found = NULL;
        json_array_foreach(items, i, o)
        {
            const char *ns = obj_meta(o, "namespace");
            if (!strcmp(obj_meta(o, "name") ?: "", t->name) &&
                (!r->namespaced || !strcmp(ns ? ns : "", t->ns))) {
                found = json_incref(o);
                break;
            }
        }
        json_decref(items);
        if (!found) {
            ckube_status *st = ckube_status_new(404, "NotFound", "%s.%s \"%s\" not found",
                                                r->plural, s->group, t->name);
            ckube_status_set_details(st, t->name, s->group, r->plural);
            answer_status(c, st);
            return;
        }
        if (wants_table(c->req)) {
            json_t *one = json_pack("[o]", found);
            answer_json(c, 200, table_of(s, one));
            json_decref(one);
            return;
        }
        answer_json(c, 200, found);
        return;
    }
    if (wants_table(c->req)) {
        answer_json(c, 200, table_of(s, items));
        json_decref(items);
        return;
    }
    char list_kind[300];
    snprintf(list_kind, sizeof list_kind, "%sList", r->kind);
    answer_json(c, 200,
                json_pack("{s:s,s:s,s:{s:s},s:o}", "kind", list_kind, "apiVersion", s->gv,
                          "metadata", "resourceVersion", "", "items", items));
}

/* ---- requests ---------------------------------------------------------------- */

static const char *method_verb(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
        return "get";
    case EVHTTP_REQ_HEAD:
        return "head";
    case EVHTTP_REQ_POST:
        return "post";
    case EVHTTP_REQ_PUT:
        return "put";
    case EVHTTP_REQ_DELETE:
        return "delete";
    case EVHTTP_REQ_PATCH:
        return "patch";
    default:
        return "options";
    }
}

/* upstream's RequestInfo verb of a resource request. */
static const char *resource_verb(struct evhttp_request *req, const target *t, bool watch)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
    case EVHTTP_REQ_HEAD:
        return watch ? "watch" : *t->name ? "get" : "list";
    case EVHTTP_REQ_POST:
        return "create";
    case EVHTTP_REQ_PUT:
        return "update";
    case EVHTTP_REQ_PATCH:
        return "patch";
    case EVHTTP_REQ_DELETE:
        return *t->name ? "delete" : "deletecollection";
    default:
        return "options";
    }
}

/* On the loop: what the TLS layer knows of the client (its certificate
 * and whether it is the front proxy's). */
static void read_peer(ax_call *c)
{
    struct evhttp_connection *conn = evhttp_request_get_connection(c->req);
    struct bufferevent *bev = conn ? evhttp_connection_get_bufferevent(conn) : NULL;
    SSL *ssl = bev ? bufferevent_openssl_get_ssl(bev) : NULL;
    X509 *peer = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    if (!peer)
        return;
    X509_up_ref(peer);
    c->peer = peer;
    c->verified = SSL_get_verify_result(ssl) == X509_V_OK;
    c->from_proxy = c->verified && apiext_front_proxy_trusts(c->s->fp, peer, ssl);
}

/* Who sent the request: the front proxy's user, or what delegated
 * authentication says (a TokenReview may be made). 0, or -1 with the
 * 401 answer. */
static int authenticate(ax_call *c, delegated_user *u)
{
    ckube_apiext_server *s = c->s;
    struct evkeyvalq *in = evhttp_request_get_input_headers(c->req);
    bool verified = c->verified;
    if (c->from_proxy) {
        if (apiext_front_proxy_user(s->fp, in, u) == 0)
            return 0;
        /* a front-proxy certificate without a user: not a client certificate */
        verified = false;
    }
    if (delegated_authenticate(s->auth, c->peer, verified, evhttp_find_header(in, "Authorization"),
                               u) == 0)
        return 0;
    answer_status(c, ckube_status_new(401, "Unauthorized", "Unauthorized"));
    return -1;
}

/* Answers an authorizer's refusal or failure; true when allowed. */
static bool allowed(ax_call *c, int rc, ckube_status *forbidden, ckube_status *err)
{
    if (rc == 1) {
        ckube_status_free(forbidden);
        return true;
    }
    if (rc == 0) {
        answer_status(c, forbidden);
        ckube_status_free(err);
        return false;
    }
    ckube_status_free(forbidden);
    answer_status(c, err ? err : ckube_status_internal("authorization failed"));
    return false;
}

/* ---- OpenAPI ------------------------------------------------------------------ */

/* The document of the group/version and its URL (openapi.c). 0, or -1
 * when out of memory. */
static int make_openapi(ckube_apiext_server *s)
{
    apiext_openapi_kind *kinds = calloc(s->nres ? s->nres : 1, sizeof *kinds);
    if (!kinds)
        return -1;
    for (size_t i = 0; i < s->nres; i++)
        kinds[i] = (apiext_openapi_kind){.kind = s->res[i].kind,
                                         .plural = s->res[i].plural,
                                         .namespaced = s->res[i].namespaced,
                                         .schema = s->res[i].schema};
    json_t *doc = apiext_openapi_v3(s->group, s->version, kinds, s->nres);
    free(kinds);
    char *hash = doc ? apiext_openapi_hash(doc) : NULL;
    if (!hash || asprintf(&s->openapi_url, "/openapi/v3/apis/%s?hash=%s", s->gv, hash) < 0)
        s->openapi_url = NULL;
    free(hash);
    s->openapi = doc ? ckube_json_dumps(doc, &s->openapi_len) : NULL;
    json_decref(doc);
    return s->openapi && s->openapi_url ? 0 : -1;
}

/* /openapi/v3: the one group/version's document, by its URL. */
static json_t *openapi_index(const ckube_apiext_server *s)
{
    char key[300];
    snprintf(key, sizeof key, "apis/%s", s->gv);
    return json_pack("{s:{s:{s:s}}}", "paths", key, "serverRelativeURL", s->openapi_url);
}

static void serve_nonresource(ax_call *c, const char *path, const delegated_user *u)
{
    ckube_apiext_server *s = c->s;
    const char *verb = method_verb(c->req);
    char *reason = NULL;
    ckube_status *err = NULL;
    int rc = delegated_authorize(s->auth, u, verb, path, &reason, &err);
    ckube_status *no = rc == 0 ? delegated_forbidden(u, verb, path, reason) : NULL;
    free(reason);
    if (!allowed(c, rc, no, err))
        return;
    if (!strcmp(path, "/healthz") || !strcmp(path, "/livez") || !strcmp(path, "/readyz")) {
        answer_text(c, 200, "ok");
        return;
    }
    char gpath[300], gvpath[600];
    snprintf(gpath, sizeof gpath, "/apis/%s", s->group);
    snprintf(gvpath, sizeof gvpath, "/apis/%s", s->gv);
    if (!strcmp(path, "/apis"))
        answer_json(c, 200,
                    json_pack("{s:s,s:s,s:[o]}", "kind", "APIGroupList", "apiVersion", "v1",
                              "groups", group_json(s)));
    else if (!strcmp(path, gpath)) {
        json_t *g = group_json(s);
        json_object_set_new(g, "kind", json_string("APIGroup"));
        json_object_set_new(g, "apiVersion", json_string("v1"));
        answer_json(c, 200, g);
    } else if (!strcmp(path, gvpath))
        answer_json(c, 200, resource_list(s));
    else if (!strcmp(path, "/openapi/v3") || !strcmp(path, "/openapi/v3/"))
        answer_json(c, 200, openapi_index(s));
    else if (!strncmp(path, "/openapi/v3/", 12) && !strcmp(path + 11, gvpath))
        answer_copy(c, 200, "application/json", s->openapi, s->openapi_len);
    else
        answer_text(c, 404, "404 page not found\n");
}

/* The request's answer, on a worker (or the loop, without workers). */
static void serve(void *arg)
{
    ax_call *c = arg;
    ckube_apiext_server *s = c->s;
    struct evhttp_request *req = c->req;
    struct evhttp_uri *uri = evhttp_uri_parse(evhttp_request_get_uri(req));
    const char *path = uri ? evhttp_uri_get_path(uri) : NULL;
    if (!path || !*path)
        path = "/";
    delegated_user u;
    if (authenticate(c, &u) != 0) {
        evhttp_uri_free(uri);
        return;
    }
    char prefix[600];
    int plen = snprintf(prefix, sizeof prefix, "/apis/%s/", s->gv);
    target t;
    if (!strncmp(path, prefix, (size_t)plen) && parse_target(s, path + plen, &t) == 0) {
        struct evkeyvalq q;
        const char *query = uri ? evhttp_uri_get_query(uri) : NULL;
        bool watch = false;
        if (query && evhttp_parse_query_str(query, &q) == 0) {
            const char *w = evhttp_find_header(&q, "watch");
            watch = w && strcmp(w, "0") && strcasecmp(w, "false");
            evhttp_clear_headers(&q);
        }
        delegated_resource dr = {.verb = resource_verb(req, &t, watch),
                                 .group = s->group,
                                 .version = s->version,
                                 .resource = t.r->plural,
                                 .namespace_ = t.ns,
                                 .name = t.name};
        char *reason = NULL;
        ckube_status *err = NULL;
        int rc = delegated_authorize_resource(s->auth, &u, &dr, &reason, &err);
        ckube_status *no = rc == 0 ? delegated_forbidden_resource(&u, &dr, reason) : NULL;
        free(reason);
        if (allowed(c, rc, no, err)) {
            if (strcmp(dr.verb, "get") && strcmp(dr.verb, "list")) {
                ckube_status *st = ckube_status_new(
                    405, "MethodNotAllowed",
                    "the server does not allow this method on the requested resource");
                ckube_status_set_details(st, NULL, s->group, t.r->plural);
                answer_status(c, st);
            } else {
                serve_resource(c, &t);
            }
        }
    } else {
        serve_nonresource(c, path, &u);
    }
    delegated_user_clear(&u);
    evhttp_uri_free(uri);
}

static void on_request(struct evhttp_request *req, void *arg)
{
    ax_call *c = calloc(1, sizeof *c);
    if (!c) {
        evhttp_send_error(req, 500, NULL);
        return;
    }
    c->s = arg;
    c->req = req;
    read_peer(c);
    http_serve_defer(c->s->serve, req, serve, call_done, c);
}

/* ---- life cycle ---------------------------------------------------------------- */

static char *dup_or_null(const char *s)
{
    return s ? strdup(s) : NULL;
}

static int runnable_start(void *ctx)
{
    char *err = NULL;
    int rc = ckube_apiext_server_start(ctx, &err);
    if (rc)
        CKUBE_ERROR("extension API server: %s", err ? err : "cannot start");
    free(err);
    return rc;
}

static void runnable_stop(void *ctx)
{
    ckube_apiext_server_stop(ctx);
}

ckube_apiext_server *ckube_apiext_server_new(const ckube_apiext_options *o, char **err)
{
    if (!o || !o->client || !o->group || !*o->group || !o->version || !*o->version) {
        if (err)
            *err = strdup("an extension API server needs a client, a group and a version");
        return NULL;
    }
    if (o->workers > CKUBE_APIEXT_MAX_WORKERS) {
        if (err && asprintf(err, "invalid workers %u: at most %d", o->workers,
                            CKUBE_APIEXT_MAX_WORKERS) < 0)
            *err = NULL;
        return NULL;
    }
    if (!o->cert_file != !o->key_file || o->port < 0 || o->port > 65535) {
        if (err)
            *err = strdup(o->port < 0 || o->port > 65535
                              ? "invalid port"
                              : "a serving certificate and its key go together: both or neither");
        return NULL;
    }
    ckube_apiext_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->client = o->client;
    s->group = strdup(o->group);
    s->version = strdup(o->version);
    if (asprintf(&s->gv, "%s/%s", o->group, o->version) < 0)
        s->gv = NULL;
    s->host = strdup(o->bind_address && *o->bind_address ? o->bind_address : "0.0.0.0");
    s->port = o->port;
    s->workers = o->workers;
    s->cert_file = dup_or_null(o->cert_file);
    s->key_file = dup_or_null(o->key_file);
    s->runnable = (ckube_runnable){.name = "extension-apiserver",
                                   .start = runnable_start,
                                   .stop = runnable_stop,
                                   .ctx = s,
                                   .needs_leader_election = false};
    if (!s->group || !s->version || !s->gv || !s->host) {
        ckube_apiext_server_free(s);
        return NULL;
    }
    return s;
}

static char *lower_dup(const char *k)
{
    char *l = strdup(k);
    for (char *p = l; p && *p; p++)
        *p = (char)tolower((unsigned char)*p);
    return l;
}

int ckube_apiext_server_add_resource(ckube_apiext_server *s, const ckube_apiext_resource *r)
{
    if (s->serve || !r || !r->plural || !*r->plural || !r->kind || !*r->kind || !r->list ||
        find_resource(s, r->plural, strlen(r->plural)))
        return -1;
    resource *v = realloc(s->res, (s->nres + 1) * sizeof *v);
    if (!v)
        return -1;
    s->res = v;
    resource *n = &s->res[s->nres];
    memset(n, 0, sizeof *n);
    n->plural = strdup(r->plural);
    n->singular = r->singular ? strdup(r->singular) : lower_dup(r->kind);
    n->kind = strdup(r->kind);
    n->namespaced = r->namespaced;
    n->list = r->list;
    n->ctx = r->ctx;
    n->schema = r->schema ? json_deep_copy(r->schema) : NULL;
    size_t k = 0;
    while (r->short_names && r->short_names[k])
        k++;
    if (k) {
        n->short_names = calloc(k + 1, sizeof *n->short_names);
        for (size_t i = 0; n->short_names && i < k; i++)
            n->short_names[i] = strdup(r->short_names[i]);
    }
    s->nres++;
    return n->plural && n->singular && n->kind ? 0 : -1;
}

int ckube_apiext_server_start(ckube_apiext_server *s, char **err)
{
    char *e = NULL;
    if (s->serve)
        return 0;
    char *client_ca = NULL;
    size_t ca_len = 0;
    s->fp = apiext_front_proxy_load(s->client, &client_ca, &ca_len, &e);
    if (!s->fp)
        goto fail;
    s->tls =
        serving_cert_new(s->cert_file, s->key_file, client_ca, ca_len, "extension API server", &e);
    free(client_ca);
    if (!s->tls)
        goto fail;
    if (make_openapi(s) != 0) {
        e = strdup("out of memory");
        goto fail;
    }
    delegated_auth_opts ao = {.client = s->client};
    s->auth = delegated_auth_new(&ao);
    s->serve = http_serve_new("ckube-apiext");
    if (!s->auth || !s->serve || http_serve_set_workers(s->serve, s->workers) != 0) {
        e = strdup("out of memory");
        goto fail;
    }
    http_listen_opts o = {.host = s->host,
                          .port = s->port,
                          .tls = s->tls,
                          .fn = on_request,
                          .arg = s,
                          .max_body = 3 * 1024 * 1024,
                          .methods = EVHTTP_REQ_GET | EVHTTP_REQ_HEAD | EVHTTP_REQ_POST |
                                     EVHTTP_REQ_PUT | EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH |
                                     EVHTTP_REQ_OPTIONS};
    s->bound_port = http_serve_listen(s->serve, &o, &e);
    if (s->bound_port < 0 || http_serve_start(s->serve, &e) != 0)
        goto fail;
    CKUBE_INFO("Serving %s on https://%s:%d", s->gv, s->host, s->bound_port);
    return 0;
fail:
    if (err)
        *err = e;
    else
        free(e);
    ckube_apiext_server_stop(s);
    return -1;
}

int ckube_apiext_server_port(const ckube_apiext_server *s)
{
    return s->bound_port;
}

void ckube_apiext_server_stop(ckube_apiext_server *s)
{
    http_serve_free(s->serve); /* joins the thread; the port is free after */
    s->serve = NULL;
    serving_cert_free(s->tls);
    s->tls = NULL;
    delegated_auth_free(s->auth);
    s->auth = NULL;
    apiext_front_proxy_free(s->fp);
    s->fp = NULL;
    free(s->openapi);
    s->openapi = NULL;
    free(s->openapi_url);
    s->openapi_url = NULL;
    s->bound_port = 0;
}

void ckube_apiext_server_free(ckube_apiext_server *s)
{
    if (!s)
        return;
    ckube_apiext_server_stop(s);
    for (size_t i = 0; i < s->nres; i++) {
        free(s->res[i].plural);
        free(s->res[i].singular);
        free(s->res[i].kind);
        for (size_t k = 0; s->res[i].short_names && s->res[i].short_names[k]; k++)
            free(s->res[i].short_names[k]);
        free(s->res[i].short_names);
        json_decref(s->res[i].schema);
    }
    free(s->res);
    free(s->group);
    free(s->version);
    free(s->gv);
    free(s->host);
    free(s->cert_file);
    free(s->key_file);
    free(s);
}

const ckube_runnable *ckube_apiext_server_runnable(ckube_apiext_server *s)
{
    return &s->runnable;
}
