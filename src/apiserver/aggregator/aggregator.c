/* API aggregation (aggregator.h): the proxy to extension API servers and
 * the APIServices' Available condition, after kube-aggregator's
 * handler_proxy.go and remote_available_controller.go. */
#include "apiserver/aggregator/aggregator.h"

#include <ctype.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <time.h>

#include "apiserver/outbound/outbound.h"
#include "apiserver/registry/generic/store.h"
#include "apiserver/resolver/resolver.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "common/text.h"
#include "common/xalloc.h"

#define PREFIX "/registry/apiregistration.k8s.io/apiservices/"
#define CHECK_EVERY_S 30      /* upstream resyncs every 30 s */
#define CHECK_TIMEOUT_MS 5000 /* upstream's discovery check timeout */
#define PAUSE_AT (4u << 20)   /* bytes queued for a client before the backend waits */

struct route;
static void route_free(struct route *r);

struct aggregator {
    apiserver *srv;
    char *cert_pem, *key_pem; /* the front-proxy client identity, or NULL */
    atomic_bool dirty;        /* an APIService, Service or Endpoints changed */
    loop *lp;                 /* where checks run */
    struct event *tick;
    time_t last_full;
    json_t *checking; /* names of APIServices being checked (lp's thread) */
    pthread_mutex_t mu;
    json_t *disc;          /* name -> discovery entry; guarded by mu */
    json_t *services;      /* "ns/name" of the Services APIServices name; guarded by mu */
    struct route **routes; /* the proxy's cache (see route_get); guarded by mu */
    size_t nroutes;
};

static char *slurp(const char *path)
{
    if (!path)
        return NULL;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    ckube__strbuf b = {0};
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        ckube__sb_addn(&b, buf, n);
    fclose(f);
    return ckube__sb_take(&b);
}

static void on_change(void *arg, cevent_type type, const cobj *obj)
{
    (void)type;
    (void)obj;
    aggregator *a = arg;
    atomic_store(&a->dirty, true);
}

/* A Service or Endpoints changed: worth a check only when an APIService
 * names it (a busy cluster changes Endpoints all the time). */
static void on_service_change(void *arg, cevent_type type, const cobj *obj)
{
    (void)type;
    aggregator *a = arg;
    char key[600];
    snprintf(key, sizeof key, "%s/%s", obj->ns ? obj->ns : "", obj->name ? obj->name : "");
    pthread_mutex_lock(&a->mu);
    bool named = json_object_get(a->services, key) != NULL;
    pthread_mutex_unlock(&a->mu);
    if (named)
        atomic_store(&a->dirty, true);
}

aggregator *aggregator_new(apiserver *s)
{
    aggregator *a = xcalloc(1, sizeof *a);
    a->srv = s;
    a->cert_pem = slurp(s->cfg.proxy_client_cert_file);
    a->key_pem = slurp(s->cfg.proxy_client_key_file);
    if (s->cfg.proxy_client_cert_file && (!a->cert_pem || !a->key_pem))
        CKUBE_WARN("cannot read the front proxy's client certificate %s or key %s: proxied "
                   "requests carry none",
                   s->cfg.proxy_client_cert_file, s->cfg.proxy_client_key_file);
    a->checking = json_object();
    a->disc = json_object();
    a->services = json_object();
    pthread_mutex_init(&a->mu, NULL);
    atomic_init(&a->dirty, true);
    cacher_add_listener(s->cache, PREFIX, on_change, a);
    cacher_add_listener(s->cache, "/registry/core/services/", on_service_change, a);
    cacher_add_listener(s->cache, "/registry/core/endpoints/", on_service_change, a);
    return a;
}

void aggregator_free(aggregator *a)
{
    if (!a)
        return;
    aggregator_stop(a);
    free(a->cert_pem);
    free(a->key_pem);
    json_decref(a->checking);
    json_decref(a->disc);
    json_decref(a->services);
    for (size_t i = 0; i < a->nroutes; i++)
        route_free(a->routes[i]);
    free(a->routes);
    pthread_mutex_destroy(&a->mu);
    free(a);
}

/* ---- APIServices ------------------------------------------------------------ */

static json_t *available_condition(const json_t *svc)
{
    size_t i;
    json_t *c;
    json_array_foreach(ckube_json_get_path(svc, "status.conditions"), i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !strcmp(t, "Available"))
            return c;
    }
    return NULL;
}

static bool is_available(const json_t *svc)
{
    const char *st = json_string_value(json_object_get(available_condition(svc), "status"));
    return st && !strcmp(st, "True");
}

/* Where an APIService's requests go: its Service's endpoint, the name
 * its certificate must carry, how to verify it. Returns false with err
 * when the Service does not resolve. The strings live in *hold (free
 * them with target_clear). */
typedef struct target_hold {
    char *ip, *server_name, *ca;
    size_t ca_len;
} target_hold;

static void target_clear(target_hold *h)
{
    free(h->ip);
    free(h->server_name);
    free(h->ca);
}

static bool target_of(aggregator *a, const json_t *svc, outbound_target *t, target_hold *h,
                      char *err, size_t n)
{
    const json_t *spec = json_object_get(svc, "spec");
    const json_t *service = json_object_get(spec, "service");
    const char *ns = json_string_value(json_object_get(service, "namespace"));
    const char *name = json_string_value(json_object_get(service, "name"));
    json_t *port = json_object_get(service, "port");
    int svc_port = json_is_integer(port) ? (int)json_integer_value(port) : 443;
    memset(h, 0, sizeof *h);
    int ep_port = 0;
    h->ip =
        service_resolve(a->srv->cache, ns ? ns : "", name ? name : "", svc_port, &ep_port, err, n);
    if (!h->ip)
        return false;
    h->server_name = xasprintf("%s.%s.svc", name ? name : "", ns ? ns : "");
    const char *ca = json_string_value(json_object_get(spec, "caBundle"));
    if (ca && *ca)
        h->ca = ckube__base64_decode(ca, strlen(ca), &h->ca_len);
    *t = (outbound_target){.host = h->ip,
                           .port = ep_port,
                           .server_name = h->server_name,
                           .url_port = ep_port,
                           .ca_pem = h->ca,
                           .ca_len = h->ca_len,
                           .insecure = json_is_true(json_object_get(spec, "insecureSkipTLSVerify")),
                           .client_cert_pem = a->cert_pem,
                           .client_key_pem = a->key_pem};
    return true;
}

/* ---- the proxy ----------------------------------------------------------------- */

typedef struct proxied {
    req_ctx *rc;
    outbound_call *call;
    bool started; /* the answer's head went out */
    bool paused;
    bool client_gone;
} proxied;

static void reply_unavailable(req_ctx *rc, const char *msg)
{
    char *body = xasprintf("%s\n", msg);
    httpd_add_header(rc->req, "X-Content-Type-Options", "nosniff");
    reply_raw(rc, 503, "text/plain; charset=utf-8", body, strlen(body));
    free(body);
}

static bool hop_by_hop(const char *name)
{
    static const char *const h[] = {"Connection",
                                    "Keep-Alive",
                                    "Transfer-Encoding",
                                    "TE",
                                    "Trailer",
                                    "Upgrade",
                                    "Proxy-Authorization",
                                    "Proxy-Authenticate",
                                    "Proxy-Connection",
                                    "Content-Length",
                                    "Host"};
    for (size_t i = 0; i < sizeof h / sizeof *h; i++)
        if (!strcasecmp(name, h[i]))
            return true;
    return false;
}

/* The client's headers the backend may see: not its credentials (the
 * proxy vouches for the user instead), not hop-by-hop ones. */
static bool forwarded(const char *name)
{
    return !hop_by_hop(name) && strcasecmp(name, "Authorization") &&
           strncasecmp(name, "Impersonate-", 12) && strncasecmp(name, "X-Remote-", 9) &&
           strcasecmp(name, "Expect");
}

/* A header key as upstream escapes an extra's key: bytes outside the
 * token characters, and '%', percent-encoded. */
static char *header_key_escape(const char *key)
{
    ckube__strbuf b = {0};
    for (const unsigned char *p = (const unsigned char *)key; *p; p++) {
        if (isalnum(*p) || strchr("-!#$&'*+.^_`|~", *p))
            ckube__sb_addc(&b, (char)*p);
        else {
            char esc[4];
            snprintf(esc, sizeof esc, "%%%02X", *p);
            ckube__sb_add(&b, esc);
        }
    }
    return ckube__sb_take(&b);
}

static void p_closed(httpd_req *req, void *arg);
static void p_drained(httpd_req *req, void *arg);

/* The answer's head: its status and headers (hop-by-hop ones aside) go
 * out, and the reply streams from here on. */
static void p_head(void *arg, int status, const outbound_header *h, size_t n)
{
    proxied *p = arg;
    req_ctx *rc = p->rc;
    for (size_t i = 0; i < n; i++)
        if (!hop_by_hop(h[i].name))
            httpd_add_header(rc->req, h[i].name, h[i].value);
    req_close_if_draining(rc);
    rc->code = status;
    p->started = true;
    httpd_send_start(rc->req, status, p_closed, p_drained, p);
}

static void p_data(void *arg, const char *bytes, size_t len)
{
    proxied *p = arg;
    if (p->client_gone)
        return;
    req_ctx *rc = p->rc;
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, bytes, len);
    httpd_send_chunk(rc->req, b);
    evbuffer_free(b);
    struct evbuffer *out = httpd_req_output(rc->req);
    if (out && evbuffer_get_length(out) > PAUSE_AT && !p->paused) {
        p->paused = true;
        outbound_pause(p->call, true);
        httpd_notify_drained(rc->req);
    }
}

static void p_end(void *arg, const char *error)
{
    proxied *p = arg;
    req_ctx *rc = p->rc;
    p->call = NULL;
    if (!p->started) {
        /* No answer: upstream's responder writes the error, 503. */
        CKUBE_WARN("proxying %s: %s", httpd_req_target(rc->req), error ? error : "no answer");
        reply_unavailable(rc, error ? error : "service unavailable");
        free(p);
        return;
    }
    if (p->client_gone) {
        free(p);
        return;
    }
    if (error)
        httpd_abort(rc->req); /* the backend broke off: so does the answer */
    else
        httpd_send_end(rc->req);
    rc->req = NULL;
    req_ctx_free(rc);
    free(p);
}

static const outbound_stream_callbacks proxy_stream = {p_head, p_data, p_end};

static void p_closed(httpd_req *req, void *arg)
{
    (void)req;
    proxied *p = arg;
    req_ctx *rc = p->rc;
    p->client_gone = true;
    if (p->call) {
        outbound_cancel(p->call);
        p->call = NULL;
    }
    rc->req = NULL;
    req_ctx_free(rc);
    free(p);
}

static void p_drained(httpd_req *req, void *arg)
{
    (void)req;
    proxied *p = arg;
    if (p->paused && p->call) {
        p->paused = false;
        outbound_pause(p->call, false);
    }
}

static bool is_watch(req_ctx *rc)
{
    return !strcmp(rc->ri.verb, "watch");
}

/* ---- routes: what the proxy needs of an APIService, cached ---------------------
 *
 * Decoding the APIService, its Service and its Endpoints on every
 * proxied request was a third of the proxy's CPU (bench --only
 * aggregation). A route keeps what they said, valid while the three
 * objects keep their revisions: a request then costs three cache
 * lookups. */

typedef struct route {
    char name[300];
    int64_t apiservice_rev, service_rev, endpoints_rev; /* -1: absent */
    char service_ns[256], service_name[256];
    bool remote;    /* spec.service set */
    bool available; /* the Available condition is True */
    bool resolved;  /* target_hold below is set */
    char err[512];  /* why it is not */
    target_hold hold;
    outbound_target t;
} route;

static int64_t rev_of(aggregator *a, const char *kind, const char *ns, const char *name)
{
    char key[700];
    snprintf(key, sizeof key, "/registry/core/%s/%s/%s", kind, ns, name);
    cobj *o = cacher_get(a->srv->cache, key);
    int64_t rev = o ? o->rev : -1;
    cobj_unref(o);
    return rev;
}

static void route_free(struct route *r)
{
    target_clear(&r->hold);
    free(r);
}

/* A route built from the objects as they are now. */
static route *route_build(aggregator *a, const json_t *svc, int64_t rev)
{
    route *r = xcalloc(1, sizeof *r);
    snprintf(r->name, sizeof r->name, "%s", ckube_obj_name(svc) ?: "");
    r->apiservice_rev = rev;
    const json_t *service = ckube_json_get_path(svc, "spec.service");
    r->remote = json_is_object(service);
    if (!r->remote)
        return r;
    r->available = is_available(svc);
    snprintf(r->service_ns, sizeof r->service_ns, "%s",
             json_string_value(json_object_get(service, "namespace")) ?: "");
    snprintf(r->service_name, sizeof r->service_name, "%s",
             json_string_value(json_object_get(service, "name")) ?: "");
    /* revisions first: a change after them makes the route stale, never
     * a stale route look fresh */
    r->service_rev = rev_of(a, "services", r->service_ns, r->service_name);
    r->endpoints_rev = rev_of(a, "endpoints", r->service_ns, r->service_name);
    r->resolved = target_of(a, svc, &r->t, &r->hold, r->err, sizeof r->err);
    return r;
}

/* The route of group/version into *out (a copy the caller clears with
 * target_clear(&out->hold)); false when no APIService names it. */
static bool route_get(aggregator *a, const char *group, const char *version, route *out)
{
    char key[600];
    snprintf(key, sizeof key, PREFIX "%s.%s", version, group);
    cobj *o = cacher_get(a->srv->cache, key);
    if (!o)
        return false;
    int64_t rev = o->rev;
    char name[300];
    snprintf(name, sizeof name, "%s.%s", version, group);
    pthread_mutex_lock(&a->mu);
    route *r = NULL;
    for (size_t i = 0; i < a->nroutes && !r; i++)
        if (!strcmp(a->routes[i]->name, name))
            r = a->routes[i];
    bool up_to_date = r && r->apiservice_rev == rev;
    char sns[256] = "", sname[256] = "";
    if (up_to_date && r->remote) {
        memcpy(sns, r->service_ns, sizeof sns);
        memcpy(sname, r->service_name, sizeof sname);
    }
    int64_t want_s = up_to_date ? r->service_rev : 0, want_e = up_to_date ? r->endpoints_rev : 0;
    pthread_mutex_unlock(&a->mu);
    if (up_to_date && *sname)
        up_to_date = rev_of(a, "services", sns, sname) == want_s &&
                     rev_of(a, "endpoints", sns, sname) == want_e;
    if (!up_to_date) {
        json_t *svc = cobj_decode(o);
        route *nr = svc ? route_build(a, svc, rev) : NULL;
        json_decref(svc);
        if (!nr) {
            cobj_unref(o);
            return false;
        }
        pthread_mutex_lock(&a->mu);
        size_t i = 0;
        while (i < a->nroutes && strcmp(a->routes[i]->name, name))
            i++;
        if (i == a->nroutes) {
            a->routes = xrealloc(a->routes, (a->nroutes + 1) * sizeof *a->routes);
            a->nroutes++;
        } else {
            route_free(a->routes[i]);
        }
        a->routes[i] = nr;
        pthread_mutex_unlock(&a->mu);
    }
    cobj_unref(o);
    /* the copy, under the lock (another loop may replace the route) */
    pthread_mutex_lock(&a->mu);
    for (size_t i = 0; i < a->nroutes; i++) {
        route *c = a->routes[i];
        if (strcmp(c->name, name))
            continue;
        *out = *c;
        out->hold.ip = c->hold.ip ? xstrdup(c->hold.ip) : NULL;
        out->hold.server_name = c->hold.server_name ? xstrdup(c->hold.server_name) : NULL;
        out->hold.ca = NULL;
        if (c->hold.ca) {
            out->hold.ca = xmalloc(c->hold.ca_len + 1);
            memcpy(out->hold.ca, c->hold.ca, c->hold.ca_len + 1);
        }
        out->t.host = out->hold.ip;
        out->t.server_name = out->hold.server_name;
        out->t.ca_pem = out->hold.ca;
        break;
    }
    pthread_mutex_unlock(&a->mu);
    return true;
}

/* Proxies rc to the server of group/version (see aggregator_proxy). */
static bool proxy_gv(aggregator *a, req_ctx *rc, const char *group, const char *version)
{
    route r;
    if (!route_get(a, group, version, &r))
        return false; /* nobody's */
    if (!r.remote) {
        target_clear(&r.hold);
        return false; /* this server's own (Local) */
    }
    if (!r.available) {
        target_clear(&r.hold);
        reply_unavailable(rc, "service unavailable");
        return true;
    }
    if (!r.resolved) {
        CKUBE_ERROR("error resolving %s/%s for APIService %s: %s", r.service_ns, r.service_name,
                    r.name, r.err);
        target_clear(&r.hold);
        reply_unavailable(rc, "service unavailable");
        return true;
    }
    outbound_target t = r.t;
    target_hold hold = r.hold;
    /* the request as the backend sees it */
    httpd_req *req = rc->req;
    size_t nh = httpd_req_header_count(req);
    const auth_user *u = rc->user;
    size_t nextra = 0;
    const char *k;
    json_t *vals;
    json_object_foreach(u ? u->extra : NULL, k, vals) nextra += json_array_size(vals);
    outbound_header *h = xcalloc(nh + 3 + (u ? u->ngroups : 0) + nextra, sizeof *h);
    char **owned = xcalloc(nextra + 1, sizeof *owned);
    size_t n = 0, nowned = 0;
    for (size_t i = 0; i < nh; i++) {
        const char *name, *value;
        httpd_req_header_at(req, i, &name, &value);
        if (forwarded(name))
            h[n++] = (outbound_header){name, value};
    }
    if (u) {
        h[n++] = (outbound_header){"X-Remote-User", u->name};
        if (u->uid && *u->uid)
            h[n++] = (outbound_header){"X-Remote-Uid", u->uid};
        for (size_t i = 0; i < u->ngroups; i++)
            h[n++] = (outbound_header){"X-Remote-Group", u->groups[i]};
        json_object_foreach(u->extra, k, vals)
        {
            char *esc = header_key_escape(k);
            char *name = xasprintf("X-Remote-Extra-%s", esc);
            free(esc);
            owned[nowned++] = name;
            size_t j;
            json_t *v;
            json_array_foreach(vals, j, v) h[n++] = (outbound_header){name, json_string_value(v)};
        }
    }
    struct evbuffer *body = httpd_req_body(req);
    size_t blen = body ? evbuffer_get_length(body) : 0;
    outbound_request rq = {.method = httpd_req_method_name(req),
                           .path = httpd_req_target(req),
                           .headers = h,
                           .nheaders = n,
                           .body = blen ? evbuffer_pullup(body, -1) : NULL,
                           .len = blen,
                           .timeout_ms = is_watch(rc) ? 0 : 60000};
    proxied *p = xcalloc(1, sizeof *p);
    p->rc = rc;
    if (is_watch(rc))
        req_long_running(rc);
    p->call = outbound_stream(rc->lp->out, &t, &rq, &proxy_stream, p);
    for (size_t i = 0; i < nowned; i++)
        free(owned[i]);
    free(owned);
    free(h);
    target_clear(&hold);
    return true;
}

bool aggregator_proxy(aggregator *a, req_ctx *rc)
{
    const request_info *ri = &rc->ri;
    if (!*ri->group || !*ri->version)
        return false;
    return proxy_gv(a, rc, ri->group, ri->version);
}

bool aggregator_proxy_openapi(aggregator *a, req_ctx *rc, const char *group, const char *version)
{
    return proxy_gv(a, rc, group, version);
}

/* ---- availability --------------------------------------------------------------- */

typedef struct check {
    aggregator *a;
    json_t *svc; /* the APIService checked (a copy) */
    char *name, *group, *version;
    int gpm, vp;
    char url[700];
    outbound_call *call;
} check;

typedef struct status_write {
    store_write sw; /* first */
    char *name;
    json_t *cond;
} status_write;

static json_t *status_transform(store_write *sw, const json_t *old, ckube_status **st)
{
    (void)st;
    status_write *w = (status_write *)sw;
    json_t *obj = json_deep_copy(old);
    json_t *status = ckube_json_object_ensure(obj, "status");
    json_t *conds = json_object_get(status, "conditions");
    if (!json_is_array(conds))
        json_object_set_new(status, "conditions", conds = json_array());
    size_t i;
    json_t *c;
    json_array_foreach(conds, i, c)
    {
        const char *t = json_string_value(json_object_get(c, "type"));
        if (t && !strcmp(t, "Available")) {
            /* lastTransitionTime moves only when the status does */
            if (json_equal(json_object_get(c, "status"), json_object_get(w->cond, "status")))
                json_object_set(w->cond, "lastTransitionTime",
                                json_object_get(c, "lastTransitionTime"));
            json_array_set(conds, i, w->cond);
            return obj;
        }
    }
    json_array_append(conds, w->cond);
    return obj;
}

static void status_done(store_write *sw, store_result *r)
{
    status_write *w = (status_write *)sw;
    if (r->st && r->st->code != 404 && r->st->code != 409)
        CKUBE_WARN("updating APIService %s status: %s", w->name,
                   r->st->message ? r->st->message : "");
    ckube_status_free(r->st);
    json_decref(r->obj);
    free(r->value);
    resource_type_unref((resource_type *)sw->type);
    json_decref(w->cond);
    free(w->name);
    free(w);
}

static const store_hooks status_hooks = {.transform = status_transform, .done = status_done};

static void post_to(void *ctx, void (*fn)(void *), void *arg)
{
    loop_post(ctx, fn, arg);
}

/* Writes the Available condition of APIService `name` when it differs. */
static void set_condition(aggregator *a, const char *name, const char *status, const char *reason,
                          const char *message)
{
    char key[600];
    snprintf(key, sizeof key, PREFIX "%s", name);
    cobj *o = cacher_get(a->srv->cache, key);
    json_t *svc = o ? cobj_decode(o) : NULL;
    cobj_unref(o);
    if (!svc)
        return;
    const json_t *have = available_condition(svc);
    bool same = have && !strcmp(json_string_value(json_object_get(have, "status")) ?: "", status) &&
                !strcmp(json_string_value(json_object_get(have, "reason")) ?: "", reason) &&
                !strcmp(json_string_value(json_object_get(have, "message")) ?: "", message);
    json_decref(svc);
    if (same)
        return;
    CKUBE_INFO("changing APIService availability name=%s status=%s reason=%s message=\"%s\"", name,
               status, reason, message);
    resource_type *t =
        registry_lookup(a->srv->registry, "apiregistration.k8s.io", "v1", "apiservices");
    if (!t)
        return;
    char now[32];
    ckube_now_rfc3339(now, sizeof now);
    status_write *w = xcalloc(1, sizeof *w);
    w->name = xstrdup(name);
    w->cond = json_pack("{s:s,s:s,s:s,s:s,s:s}", "type", "Available", "status", status,
                        "lastTransitionTime", now, "reason", reason, "message", message);
    w->sw = (store_write){.store = a->srv->store,
                          .type = t,
                          .verb = STORE_UPDATE,
                          .hooks = &status_hooks,
                          .name = w->name,
                          .status_only = true,
                          .post = post_to,
                          .post_ctx = a->lp};
    store_write_start(&w->sw);
}

static void check_free(check *c)
{
    json_object_del(c->a->checking, c->name);
    json_decref(c->svc);
    free(c->name);
    free(c->group);
    free(c->version);
    free(c);
}

static void forget_discovery(aggregator *a, const char *name)
{
    pthread_mutex_lock(&a->mu);
    json_object_del(a->disc, name);
    pthread_mutex_unlock(&a->mu);
}

/* The backend's /openapi/v3 answer: the URL it gives for the
 * APIService's group/version (which must be that group/version's
 * document, /openapi/v3/apis/G/V...) goes into its discovery entry, where
 * aggregator_openapi_v3_paths finds it; any failure takes it out (the
 * group/version then leaves the server's /openapi/v3, as upstream's
 * aggregator drops a spec it cannot download). */
static void openapi_answered(void *arg, const outbound_result *r)
{
    check *c = arg;
    aggregator *a = c->a;
    c->call = NULL;
    char key[600], prefix[700];
    snprintf(key, sizeof key, "apis/%s/%s", c->group, c->version);
    snprintf(prefix, sizeof prefix, "/openapi/v3/%s", key);
    const char *url = NULL;
    json_t *index = NULL;
    if (!r->error && r->status >= 200 && r->status <= 299) {
        size_t len = evbuffer_get_length(r->body);
        index = json_loadb((const char *)evbuffer_pullup(r->body, -1), len, 0, NULL);
        url = json_string_value(ckube_json_get_path(
            json_object_get(json_object_get(index, "paths"), key), "serverRelativeURL"));
        size_t pl = strlen(prefix);
        if (url && (strncmp(url, prefix, pl) || (url[pl] && url[pl] != '?')))
            url = NULL;
    }
    pthread_mutex_lock(&a->mu);
    json_t *entry = json_object_get(a->disc, c->name);
    if (entry && url)
        json_object_set_new(entry, "openapi", json_string(url));
    else if (entry)
        json_object_del(entry, "openapi");
    pthread_mutex_unlock(&a->mu);
    json_decref(index);
    check_free(c);
}

/* After a discovery check passed: GET /openapi/v3 from the same backend
 * (as the discovery check asks), then openapi_answered. */
static void fetch_openapi(check *c)
{
    aggregator *a = c->a;
    outbound_target t;
    target_hold hold;
    char err[512];
    if (!target_of(a, c->svc, &t, &hold, err, sizeof err)) {
        target_clear(&hold);
        check_free(c);
        return;
    }
    outbound_header h[] = {{"Accept", "application/json"},
                           {"X-Remote-User", "system:kube-aggregator"},
                           {"X-Remote-Group", "system:masters"}};
    outbound_request rq = {.method = "GET",
                           .path = "/openapi/v3",
                           .headers = h,
                           .nheaders = 3,
                           .timeout_ms = CHECK_TIMEOUT_MS};
    c->call = outbound_send(a->lp->out, &t, &rq, openapi_answered, c);
    target_clear(&hold);
}

static void check_answered(void *arg, const outbound_result *r)
{
    check *c = arg;
    aggregator *a = c->a;
    c->call = NULL;
    if (r->error || r->status < 200 || r->status > 299) {
        char msg[1024];
        if (r->error)
            snprintf(msg, sizeof msg, "failing or missing response from %s: %s", c->url, r->error);
        else
            snprintf(msg, sizeof msg, "bad status from %s: %d", c->url, r->status);
        set_condition(a, c->name, "False", "FailedDiscoveryCheck", msg);
        forget_discovery(a, c->name);
        check_free(c);
        return;
    }
    size_t len = evbuffer_get_length(r->body);
    json_t *list = json_loadb((const char *)evbuffer_pullup(r->body, -1), len, 0, NULL);
    json_t *entry = json_pack("{s:s,s:s,s:i,s:i,s:O?}", "group", c->group, "version", c->version,
                              "groupPriorityMinimum", c->gpm, "versionPriority", c->vp, "resources",
                              json_object_get(list, "resources"));
    json_decref(list);
    pthread_mutex_lock(&a->mu);
    /* the OpenAPI document's URL stays until fetch_openapi says otherwise */
    json_t *prev = json_object_get(json_object_get(a->disc, c->name), "openapi");
    if (json_is_string(prev))
        json_object_set(entry, "openapi", prev);
    json_object_set_new(a->disc, c->name, entry);
    pthread_mutex_unlock(&a->mu);
    set_condition(a, c->name, "True", "Passed", "all checks passed");
    fetch_openapi(c);
}

/* Checks one APIService (a decoded object). */
static void check_one(aggregator *a, const json_t *svc)
{
    const char *name = ckube_obj_name(svc);
    const json_t *spec = json_object_get(svc, "spec");
    const json_t *service = json_object_get(spec, "service");
    if (!name || !json_is_object(service) || json_object_get(a->checking, name))
        return;
    const char *sns = json_string_value(json_object_get(service, "namespace")) ?: "";
    const char *sname = json_string_value(json_object_get(service, "name")) ?: "";
    json_t *pj = json_object_get(service, "port");
    int port = json_is_integer(pj) ? (int)json_integer_value(pj) : 443;
    outbound_target t;
    target_hold hold;
    char err[512];
    if (!target_of(a, svc, &t, &hold, err, sizeof err)) {
        char msg[1024];
        const char *reason;
        if (strstr(err, "service \"") == err) {
            reason = "ServiceNotFound";
            snprintf(msg, sizeof msg, "service/%s in \"%s\" is not present", sname, sns);
        } else if (strstr(err, "no service port")) {
            reason = "ServicePortError";
            snprintf(msg, sizeof msg, "service/%s in \"%s\" is not listening on port %d", sname,
                     sns, port);
        } else if (strstr(err, "endpoints \"") == err) {
            reason = "EndpointsNotFound";
            snprintf(msg, sizeof msg, "cannot find endpoints for service/%s in \"%s\"", sname, sns);
        } else {
            reason = "MissingEndpoints";
            snprintf(msg, sizeof msg,
                     "endpoints for service/%s in \"%s\" have no addresses with port name \"%s\"",
                     sname, sns, "");
        }
        target_clear(&hold);
        set_condition(a, name, "False", reason, msg);
        forget_discovery(a, name);
        return;
    }
    check *c = xcalloc(1, sizeof *c);
    c->a = a;
    c->svc = json_deep_copy(svc);
    c->name = xstrdup(name);
    c->group = xstrdup(json_string_value(json_object_get(spec, "group")) ?: "");
    c->version = xstrdup(json_string_value(json_object_get(spec, "version")) ?: "");
    json_t *g = json_object_get(spec, "groupPriorityMinimum"),
           *v = json_object_get(spec, "versionPriority");
    c->gpm = json_is_integer(g) ? (int)json_integer_value(g) : 0;
    c->vp = json_is_integer(v) ? (int)json_integer_value(v) : 0;
    char path[600];
    snprintf(path, sizeof path, "/apis/%s/%s", c->group, c->version);
    bool v6 = strchr(t.host, ':') != NULL;
    snprintf(c->url, sizeof c->url, "https://%s%s%s:%d%s", v6 ? "[" : "", t.host, v6 ? "]" : "",
             t.port, path);
    json_object_set_new(a->checking, name, json_true());
    /* as kube-aggregator asks: system:kube-aggregator in system:masters */
    outbound_header h[] = {{"Accept", "application/json"},
                           {"X-Remote-User", "system:kube-aggregator"},
                           {"X-Remote-Group", "system:masters"}};
    outbound_request rq = {
        .method = "GET", .path = path, .headers = h, .nheaders = 3, .timeout_ms = CHECK_TIMEOUT_MS};
    c->call = outbound_send(a->lp->out, &t, &rq, check_answered, c);
    target_clear(&hold);
}

static void tick(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    aggregator *a = arg;
    time_t now = time(NULL);
    bool dirty = atomic_exchange(&a->dirty, false);
    if (!dirty && now - a->last_full < CHECK_EVERY_S)
        return;
    a->last_full = now;
    size_t n = 0, more = 0;
    int64_t rev = 0;
    cobj **objs = cacher_list(a->srv->cache, PREFIX, NULL, NULL, 0, &n, &rev, &more);
    json_t *seen = json_object(), *services = json_object();
    for (size_t i = 0; i < n; i++) {
        json_t *svc = cobj_decode(objs[i]);
        const char *name = ckube_obj_name(svc);
        if (name)
            json_object_set_new(seen, name, json_true());
        const json_t *ref = ckube_json_get_path(svc, "spec.service");
        if (json_is_object(ref)) {
            char key[600];
            snprintf(key, sizeof key, "%s/%s",
                     json_string_value(json_object_get(ref, "namespace")) ?: "",
                     json_string_value(json_object_get(ref, "name")) ?: "");
            json_object_set_new(services, key, json_true());
        }
        if (svc && json_is_object(ckube_json_get_path(svc, "spec.service")))
            check_one(a, svc);
        else if (name)
            forget_discovery(a, name);
        json_decref(svc);
    }
    cacher_objs_free(objs, n);
    /* APIServices gone: out of discovery */
    pthread_mutex_lock(&a->mu);
    json_decref(a->services);
    a->services = services;
    const char *k;
    json_t *v;
    void *tmp;
    json_object_foreach_safe(a->disc, tmp, k, v)
    {
        if (!json_object_get(seen, k))
            json_object_del(a->disc, k);
    }
    pthread_mutex_unlock(&a->mu);
    json_decref(seen);
}

void aggregator_start(aggregator *a, loop *lp)
{
    a->lp = lp;
    a->tick = event_new(lp->base, -1, EV_PERSIST, tick, a);
    struct timeval tv = {1, 0};
    event_add(a->tick, &tv);
}

void aggregator_stop(aggregator *a)
{
    if (a->tick) {
        event_free(a->tick);
        a->tick = NULL;
    }
}

static int by_priority(const void *x, const void *y)
{
    const json_t *a = *(json_t *const *)x, *b = *(json_t *const *)y;
    json_int_t ga = json_integer_value(json_object_get(a, "groupPriorityMinimum"));
    json_int_t gb = json_integer_value(json_object_get(b, "groupPriorityMinimum"));
    if (ga != gb)
        return ga > gb ? -1 : 1;
    int g = strcmp(json_string_value(json_object_get(a, "group")),
                   json_string_value(json_object_get(b, "group")));
    if (g)
        return g;
    json_int_t va = json_integer_value(json_object_get(a, "versionPriority"));
    json_int_t vb = json_integer_value(json_object_get(b, "versionPriority"));
    return va > vb ? -1 : va < vb ? 1 : 0;
}

json_t *aggregator_openapi_v3_paths(aggregator *a)
{
    json_t *paths = json_object();
    pthread_mutex_lock(&a->mu);
    const char *k;
    json_t *e;
    json_object_foreach(a->disc, k, e)
    {
        const char *url = json_string_value(json_object_get(e, "openapi"));
        if (!url)
            continue;
        char key[600];
        snprintf(key, sizeof key, "apis/%s/%s", json_string_value(json_object_get(e, "group")),
                 json_string_value(json_object_get(e, "version")));
        json_object_set_new(paths, key, json_pack("{s:s}", "serverRelativeURL", url));
    }
    pthread_mutex_unlock(&a->mu);
    return paths;
}

json_t *aggregator_discovery(aggregator *a)
{
    pthread_mutex_lock(&a->mu);
    size_t n = json_object_size(a->disc), i = 0;
    json_t **v = xcalloc(n ? n : 1, sizeof *v);
    const char *k;
    json_t *e;
    json_object_foreach(a->disc, k, e) v[i++] = json_deep_copy(e);
    pthread_mutex_unlock(&a->mu);
    qsort(v, n, sizeof *v, by_priority);
    json_t *out = json_array();
    for (i = 0; i < n; i++)
        json_array_append_new(out, v[i]);
    free(v);
    return out;
}
