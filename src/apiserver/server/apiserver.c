/* The HTTP front: listening sockets, loop threads, request dispatch and
 * life cycle. See server.h; the threading model is in
 * endpoints/request/context.h. */
#include "apiserver/server/apiserver.h"

#include "apiserver/authentication/authenticator.h"
#include "apiserver/authentication/serviceaccount/token.h"
#include "apiserver/authorization/authorizer.h"
#include "apiserver/endpoints/filters/audit.h"
#include "apiserver/endpoints/filters/impersonation.h"
#include "apiserver/httpd/tls.h"
#include <openssl/ssl.h>
#include "apiserver/endpoints/discovery/discovery.h"
#include "apiserver/endpoints/handlers/handlers.h"
#include "apiserver/endpoints/metrics/metrics.h"
#include "apiserver/endpoints/openapi/openapi_http.h"
#include "apiserver/registry/authorization/reviews.h"
#include "apiserver/registry/apps/apps.h"
#include "apiserver/registry/coordination/coordination.h"
#include "apiserver/admission/admission.h"
#include "apiserver/aggregator/aggregator.h"
#include "apiserver/registry/admissionregistration/admissionregistration.h"
#include "apiserver/registry/apiregistration/apiregistration.h"
#include "apiserver/registry/core/core.h"
#include "apiserver/registry/events/events.h"
#include "apiserver/registry/rbac/rbac.h"
#include "common/text.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <event2/buffer.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <fcntl.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "storage/compactor.h"
#include "apiserver/apiextensions/crd.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "ckube/validation.h"
#include "common/xalloc.h"
#include "storage/sqlite/sqlite.h"
#include "storage/memory/memory.h"

/* The pause between two slices of a flush round (watch_loop_flush):
 * none, unless CKUBE_TEST_FLUSH_PAUSE_MS asks for one. A test hook, not a
 * setting: an e2e test stretches a round over many milliseconds so that
 * an event lands in the middle of it, which a zero pause makes a race. */
static struct timeval flush_pause(void)
{
    const char *v = getenv("CKUBE_TEST_FLUSH_PAUSE_MS");
    long ms = v ? strtol(v, NULL, 10) : 0;
    if (ms <= 0 || ms > 10000)
        return (struct timeval){0, 0};
    CKUBE_WARN("CKUBE_TEST_FLUSH_PAUSE_MS=%ld: watch flushes pause between slices (a test hook)",
               ms);
    return (struct timeval){ms / 1000, ms % 1000 * 1000};
}

static void on_wake(evutil_socket_t fd, short what, void *arg)
{
    loop *lp = arg;
    pthread_mutex_lock(&lp->mu);
    loop_task *t = lp->tasks;
    lp->tasks = lp->tasks_tail = NULL;
    pthread_mutex_unlock(&lp->mu);
    while (t) {
        loop_task *next = t->next;
        t->fn(t->arg);
        free(t);
        t = next;
    }
    watch_loop_flush(lp);
    if (atomic_load(&lp->srv->stopping) && !lp->exiting) {
        /* Watches end with their last chunk, and the loop runs a little
         * longer so that it and the replies still queued reach their
         * clients (a clean end of stream, not a reset). */
        lp->exiting = true;
        if (lp->index == 0)
            aggregator_stop(lp->srv->aggregator); /* its timer is loop 0's */
        watch_loop_close_all(lp);
        list_stream_close_all(lp);
        struct timeval flush = {0, 100 * 1000};
        event_base_loopexit(lp->base, &flush);
    }
}

/* Called by the cacher (storage thread) after each applied batch: the
 * loops with watches flush them. A loop without any is not woken (a wake
 * from another thread is a write to its eventfd and a context switch,
 * per batch). */
static void wake_loops(void *arg)
{
    apiserver *s = arg;
    for (int i = 0; i < s->nloops; i++)
        if (atomic_load(&s->loops[i].nwatches) > 0)
            event_active(s->loops[i].wake, 0, 0);
}

/* Parses a query string (q[0..len)) as Go's url.ParseQuery does:
 * '&'-separated, a key without '=' has the value "", '+' is a space.
 * Returns -1 on a bad percent escape. */
static int parse_query(const char *q, size_t len, struct evkeyvalq *out)
{
    char *dup = xstrndup(q, len);
    int rc = 0;
    for (char *save = NULL, *p = strtok_r(dup, "&", &save); p; p = strtok_r(NULL, "&", &save)) {
        char *eq = strchr(p, '=');
        if (eq)
            *eq = 0;
        char *k = evhttp_uridecode(p, 1, NULL);
        char *v = evhttp_uridecode(eq ? eq + 1 : "", 1, NULL);
        if (!k || !v || strlen(k) == 0) {
            free(k);
            free(v);
            if (!k || !v) {
                rc = -1;
                break;
            }
            continue;
        }
        evhttp_add_header(out, k, v);
        free(k);
        free(v);
    }
    free(dup);
    return rc;
}

/* ---- dispatch ---------------------------------------------------------- */

/* The value of media-type parameter `name` in `params` (the part of an
 * Accept entry after its type: ";k=v;k=v"), copied into buf; "" when
 * absent. */
static const char *media_param(const char *params, const char *name, char *buf, size_t n)
{
    size_t nl = strlen(name);
    buf[0] = '\0';
    for (const char *p = params; p && *p;) {
        while (*p == ';' || *p == ' ')
            p++;
        const char *end = strchr(p, ';');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        if (len > nl && !strncmp(p, name, nl) && p[nl] == '=') {
            size_t vl = len - nl - 1;
            while (vl && p[nl + 1 + vl - 1] == ' ')
                vl--;
            snprintf(buf, n, "%.*s", (int)vl, p + nl + 1);
            return buf;
        }
        p = end;
    }
    return buf;
}

/* Accept-header negotiation: JSON, plain or as a meta.k8s.io conversion
 * (Table; PartialObjectMetadata, and PartialObjectMetadataList for reads),
 * or, at /api and /apis, aggregated discovery (apidiscovery.k8s.io v2 or
 * v2beta1). The first acceptable entry wins. Protobuf alone is not
 * acceptable; YAML is not served. */
static bool negotiate(req_ctx *rc)
{
    const char *accept = httpd_req_header(rc->req, "Accept");
    if (!accept || !*accept)
        return true;
    /* The list form answers reads and deletecollection (a DELETE). */
    httpd_method cmd = httpd_req_method(rc->req);
    bool lists = cmd == HTTPD_GET || cmd == HTTPD_DELETE;
    bool json_ok = false;
    char *dup = xstrdup(accept);
    for (char *save = NULL, *t = strtok_r(dup, ",", &save); t && !json_ok;
         t = strtok_r(NULL, ",", &save)) {
        while (*t == ' ')
            t++;
        if (strncmp(t, "application/json", 16) && strncmp(t, "*/*", 3) &&
            strncmp(t, "application/*", 13))
            continue;
        const char *params = strchr(t, ';');
        char as[64], g[64], v[16];
        media_param(params, "as", as, sizeof as);
        if (!*as) {
            json_ok = true;
            break;
        }
        media_param(params, "g", g, sizeof g);
        media_param(params, "v", v, sizeof v);
        if (!strcmp(as, "APIGroupDiscoveryList")) {
            /* Only where it is served, and only the whole document: the
             * "nopeer" profile is the same on a server without peers. */
            char profile[16];
            media_param(params, "profile", profile, sizeof profile);
            if (cmd == HTTPD_GET && discovery_aggregated_path(&rc->ri) &&
                !strcmp(g, "apidiscovery.k8s.io") && (!strcmp(v, "v2") || !strcmp(v, "v2beta1")) &&
                (!*profile || !strcmp(profile, "nopeer"))) {
                rc->want_discovery = !strcmp(v, "v2") ? "v2" : "v2beta1";
                json_ok = true;
            }
            continue;
        }
        /* Conversions are meta.k8s.io's (v1, and v1beta1 for old clients);
         * others are not offered: a later entry may match. */
        bool meta_gv = !strcmp(g, "meta.k8s.io") && (!strcmp(v, "v1") || !strcmp(v, "v1beta1"));
        if (!strcmp(as, "Table") && (!*g || meta_gv)) {
            rc->want_table = true;
            json_ok = true;
        } else if (meta_gv && (!strcmp(as, "PartialObjectMetadata") ||
                               (lists && !strcmp(as, "PartialObjectMetadataList")))) {
            rc->want_partial = !strcmp(as, "PartialObjectMetadata") ? PARTIAL_OBJECT : PARTIAL_LIST;
            rc->partial_api_version = !strcmp(v, "v1") ? "meta.k8s.io/v1" : "meta.k8s.io/v1beta1";
            json_ok = true;
        }
    }
    free(dup);
    return json_ok;
}

/* A connection's client-certificate user, kept in its httpd slot: the
 * certificate cannot change on a connection (no renegotiation), so it is
 * judged once. */
typedef struct conn_identity {
    int rc;          /* authenticator_x509's answer */
    auth_user *user; /* rc 1 */
    char *err;       /* rc -1 */
} conn_identity;

static void conn_identity_free(void *p)
{
    conn_identity *ci = p;
    auth_user_unref(ci->user);
    free(ci->err);
    free(ci);
}

/* Whether `resource` ns/name exists with `uid`; 0, or -1 with *err in
 * upstream's words. */
static int still_there(apiserver *s, const char *resource, const char *what, const char *ns,
                       const char *name, const char *uid, char **err)
{
    json_t *o = handlers_cached_core(s, resource, ns, name);
    if (!o) {
        ckube__set_err(err, "%s \"%s\" not found", resource, name);
        return -1;
    }
    const char *have = json_string_value(json_object_get(json_object_get(o, "metadata"), "uid"));
    int rc = 0;
    if (uid && *uid && (!have || strcmp(have, uid))) {
        ckube__set_err(err, "%s UID (%s) does not match claim (%s)", what, have ? have : "", uid);
        rc = -1;
    }
    json_decref(o);
    return rc;
}

/* The ServiceAccount token authenticator (authenticator.h's hook): the
 * token's signature and claims (token.h), then that the ServiceAccount
 * and the object the token is bound to still exist with the UIDs it
 * names, as upstream's validator. */
static int sa_authenticate(void *arg, const char *token, const json_t *audiences, auth_user **out,
                           json_t **matched, char **err)
{
    apiserver *s = arg;
    sa_token_info ti;
    int rc = sa_tokens_validate(s->sa, token, audiences, (int64_t)time(NULL), &ti, err);
    if (rc != 1)
        return rc;
    if (still_there(s, "serviceaccounts", "service account", ti.ns, ti.name, ti.uid, err) ||
        (ti.pod_name && still_there(s, "pods", "pod", ti.ns, ti.pod_name, ti.pod_uid, err)) ||
        (ti.secret_name &&
         still_there(s, "secrets", "secret", ti.ns, ti.secret_name, ti.secret_uid, err))) {
        sa_token_info_clear(&ti);
        return -1;
    }
    char *name = xasprintf("system:serviceaccount:%s:%s", ti.ns, ti.name);
    char *nsgroup = xasprintf("system:serviceaccounts:%s", ti.ns);
    const char *groups[] = {"system:serviceaccounts", nsgroup};
    json_t *extra = json_object();
    if (ti.pod_name) {
        json_object_set_new(extra, "authentication.kubernetes.io/pod-name",
                            json_pack("[s]", ti.pod_name));
        json_object_set_new(extra, "authentication.kubernetes.io/pod-uid",
                            json_pack("[s]", ti.pod_uid ? ti.pod_uid : ""));
    }
    if (ti.jti) {
        char *cid = xasprintf("JTI=%s", ti.jti);
        json_object_set_new(extra, "authentication.kubernetes.io/credential-id",
                            json_pack("[s]", cid));
        free(cid);
    }
    *out = auth_user_new(name, ti.uid, groups, 2, json_object_size(extra) ? extra : NULL);
    json_decref(extra);
    free(name);
    free(nsgroup);
    if (matched)
        *matched = json_incref(ti.audiences);
    sa_token_info_clear(&ti);
    return 1;
}

/* Who the request is from (authentication/authenticator.h), the
 * connection's certificate judged once. false: the caller answers 401
 * (after the audit has seen the request). */
static bool authenticate(req_ctx *rc)
{
    httpd_req *req = rc->req;
    const char *authz = httpd_req_header(req, "Authorization");
    SSL *ssl = httpd_req_ssl(req);
    X509 *cert = ssl ? SSL_get0_peer_certificate(ssl) : NULL;
    void **slot = cert ? httpd_req_conn_slot(req) : NULL;
    conn_identity *ci = slot ? *slot : NULL;
    if (cert && !ci) {
        ci = xcalloc(1, sizeof *ci);
        ci->rc = authenticator_x509(cert, SSL_get_verify_result(ssl), &ci->user, &ci->err);
        if (slot)
            *slot = ci;
    }
    char *why = NULL;
    if (ci && ci->rc == 1) {
        rc->user = auth_user_ref(ci->user);
    } else {
        /* The rest of the order: a certificate that names nobody or does
         * not verify goes to the token authenticators with its verdict. */
        auth_request ar = {.cert = ci && ci->rc < 0 ? cert : NULL,
                           .verify = ssl ? SSL_get_verify_result(ssl) : 0,
                           .authorization = authz};
        if (!authenticator_authenticate(rc->srv->authn, &ar, &rc->user, &why))
            rc->user = NULL;
    }
    if (ci && (!slot || *slot != ci))
        conn_identity_free(ci);
    if (rc->user)
        return true;
    /* As kube-apiserver: the reason goes to the log, the client gets a
     * bare 401 (no reason, no line: no credentials, anonymous off). */
    if (why) { /* klog's structured value: quoted as Go's %q */
        char *q = ckube_go_quote(why);
        CKUBE_ERROR("\"Unable to authenticate the request\" err=%s", q);
        free(q);
    }
    free(why);
    return false;
}

/* ---- authorization ------------------------------------------------------- */

/* RBAC's objects reach its index as the watch cache applies them
 * (storage thread; the initial objects as ADDED at start). */
static void on_rbac_event(void *arg, cevent_type type, const cobj *o)
{
    static const struct {
        const char *prefix;
        rbac_kind kind;
    } kinds[] = {
        {"/registry/rbac.authorization.k8s.io/roles/", RBAC_ROLE},
        {"/registry/rbac.authorization.k8s.io/clusterroles/", RBAC_CLUSTER_ROLE},
        {"/registry/rbac.authorization.k8s.io/rolebindings/", RBAC_ROLE_BINDING},
        {"/registry/rbac.authorization.k8s.io/clusterrolebindings/", RBAC_CLUSTER_ROLE_BINDING},
    };
    apiserver *s = arg;
    for (size_t i = 0; i < sizeof kinds / sizeof *kinds; i++) {
        if (strncmp(o->key, kinds[i].prefix, strlen(kinds[i].prefix)))
            continue;
        json_t *obj = cobj_decode(o);
        if (obj)
            rbac_index_apply(s->rbac, kinds[i].kind, obj, type == CEV_DELETED);
        json_decref(obj);
        return;
    }
}

/* What the request asks, as upstream's RequestInfo gives the authorizer:
 * a resource request's verb and object, or the lowercased method and the
 * path. ri is NULL for a path that is not an API path. */
/* The name a field selector requires exactly (metadata.name=X or ==X
 * among its terms; RequiresExactMatch), copied into buf, or "". */
static const char *field_selector_name(const char *fs, char *buf, size_t n)
{
    buf[0] = '\0';
    for (const char *p = fs; p && *p;) {
        const char *end = strchr(p, ',');
        size_t len = end ? (size_t)(end - p) : strlen(p);
        static const char key[] = "metadata.name";
        size_t kl = sizeof key - 1;
        if (len > kl && !strncmp(p, key, kl) && p[kl] == '=') {
            size_t skip = kl + (p[kl + 1] == '=' ? 2 : 1);
            if (len - skip < n && !memchr(p + skip, '/', len - skip)) /* a path segment name */
                snprintf(buf, n, "%.*s", (int)(len - skip), p + skip);
        }
        p = end ? end + 1 : NULL;
    }
    return buf;
}

static void request_attributes(req_ctx *rc, const request_info *ri, const char *path, char *verb,
                               size_t verb_len, char *name_buf, size_t name_len,
                               authz_attributes *at)
{
    *at = (authz_attributes){.path = path};
    if (ri && ri->is_resource && !ri->is_discovery) {
        at->resource_request = true;
        at->verb = ri->verb;
        at->api_group = ri->group;
        at->api_version = ri->version;
        at->resource = ri->resource;
        at->subresource = ri->subresource;
        at->name = ri->name;
        at->namespace_ = ri->ns;
        /* A list or watch of one object by its name (kubectl get x -w)
         * is asked about that name, as upstream, so a rule with
         * resourceNames can allow it. */
        const char *fs = !*ri->name && (!strcmp(ri->verb, "list") || !strcmp(ri->verb, "watch"))
                             ? req_query(rc, "fieldSelector")
                             : NULL;
        if (fs)
            at->name = field_selector_name(fs, name_buf, name_len);
        return;
    }
    size_t i = 0;
    for (; rc->method[i] && i + 1 < verb_len; i++)
        verb[i] = (char)tolower((unsigned char)rc->method[i]);
    verb[i] = '\0';
    at->verb = verb;
}

/* The request's attributes as upstream's GetAuthorizerAttributes gives
 * them, built at most once per request, on first use: the audit filter
 * and the authorizer both read them (a request by system:masters that
 * is not audited never builds them). The strings point into the request
 * info, the path and the buffers here; the user is the request's current
 * one, read at each use because impersonation changes it between the
 * two. Lives on handle_request's stack. */
typedef struct req_attrs {
    const request_info *ri; /* NULL: not an API path */
    const char *path;
    bool built;
    authz_attributes at;
    char verb[16], name[256];
} req_attrs;

static const authz_attributes *attrs_of(req_ctx *rc, req_attrs *ra)
{
    if (!ra->built) {
        request_attributes(rc, ra->ri, ra->path, ra->verb, sizeof ra->verb, ra->name,
                           sizeof ra->name, &ra->at);
        ra->built = true;
    }
    ra->at.user = rc->user;
    return &ra->at;
}

/* Whether the request may go on (the authorizer allows it); false:
 * answered 403. */
static bool authorize(req_ctx *rc, req_attrs *ra)
{
    if (auth_user_in_group(rc->user, AUTH_GROUP_MASTERS)) {
        if (rc->audit) /* upstream's privileged-group authorizer gives no reason */
            audit_req_authorized(rc->audit, true, NULL);
        return true; /* the common case, without building anything */
    }
    const authz_attributes *at = attrs_of(rc, ra);
    /* An allow's reason is built only for whom reads it (-v=5): it
     * costs more than the decision. A denial's always is. */
    char *reason = NULL;
    bool ok = authz_allowed(rc->srv->rbac, at, &reason,
                            rc->audit || ckube_log_v(5, __FILE__) ? &reason : NULL);
    if (rc->audit)
        audit_req_authorized(rc->audit, ok, reason);
    if (ok) {
        CKUBE_V(5, "\"Authorized\" user=\"%s\" verb=\"%s\" reason=\"%s\"", rc->user->name, at->verb,
                reason ? reason : "");
    } else {
        CKUBE_V(4, "\"Forbidden\" URI=\"%s\" reason=\"%s\"", ra->path, reason ? reason : "");
        reply_status(rc, authz_forbidden(at, reason));
    }
    free(reason);
    return ok;
}

/* Impersonate-* headers (endpoints/filters/impersonation.h): the
 * request goes on as the user asked for, once the requester may act as
 * them. false: answered (403, or upstream's plain 500 for a malformed
 * ask). */
static bool impersonation(req_ctx *rc, const char *target)
{
    auth_user *as = NULL;
    ckube_status *denied = NULL;
    char *text = NULL;
    switch (impersonate(rc->srv->rbac, rc->user, rc->req, target, &as, &denied, &text)) {
    case IMPERSONATE_NONE:
        return true;
    case IMPERSONATE_AS:
        CKUBE_V(4, "\"Impersonating\" user=\"%s\" as=\"%s\"", rc->user->name, as->name);
        auth_user_unref(rc->user);
        rc->user = as;
        if (rc->audit)
            audit_req_impersonated(rc->audit, as);
        return true;
    case IMPERSONATE_DENIED:
        CKUBE_V(4, "\"Forbidden\" URI=\"%s\" reason=\"%s\"", target, denied->message);
        reply_status(rc, denied);
        return false;
    case IMPERSONATE_INVALID:
        httpd_add_header(rc->req, "X-Content-Type-Options", "nosniff"); /* http.Error's */
        reply_raw(rc, 500, "text/plain; charset=utf-8", text, strlen(text));
        free(text);
        return false;
    }
    return false;
}

/* ---- audit -------------------------------------------------------------- */

/* WithAuditInit, kube-apiserver's outermost filter: the request's audit
 * ID (the client's Audit-ID when not empty, else a new one, into buf)
 * goes out in every reply's Audit-ID header, audited or not, with
 * auditing on or off, a 401 and a 400 included. Returns the ID: the
 * header's value (borrowed from the request) or buf. */
static const char *audit_init(req_ctx *rc, char *buf, size_t n)
{
    const char *id = audit_id_for_request(httpd_req_header(rc->req, AUDIT_HEADER_AUDIT_ID), buf, n);
    httpd_add_header(rc->req, AUDIT_HEADER_AUDIT_ID, id);
    return id;
}

/* What the audit filter is told of a request (endpoints/filters/
 * audit.h), in the buffers of one audit_src; strings borrowed from rc,
 * the attributes and the caller. */
typedef struct audit_src {
    audit_req_info in;
    char peer[64];
} audit_src;

/* Fills src for the filters; false when auditing is off (no policy or
 * no log), and then nothing is built. */
static bool audit_src_fill(req_ctx *rc, req_attrs *ra, const char *audit_id,
                           const struct timespec *received, audit_src *src)
{
    apiserver *s = rc->srv;
    if (!s->cfg.audit_policy || !s->cfg.audit_log)
        return false;
    const authz_attributes *at = attrs_of(rc, ra);
    httpd_req_peer(rc->req, src->peer, sizeof src->peer);
    src->in = (audit_req_info){.audit_id = audit_id,
                               .uri = httpd_req_target(rc->req),
                               .verb = at->verb,
                               .user = rc->user,
                               .user_agent = httpd_req_header(rc->req, "User-Agent"),
                               .x_forwarded_for = httpd_req_header(rc->req, "X-Forwarded-For"),
                               .x_real_ip = httpd_req_header(rc->req, "X-Real-Ip"),
                               .peer = src->peer,
                               .resource_request = at->resource_request,
                               .api_group = at->api_group,
                               .api_version = at->api_version,
                               .resource = at->resource,
                               .subresource = at->subresource,
                               .namespace_ = at->namespace_,
                               .name = at->resource_request ? rc->ri.name : NULL,
                               .path = ra->path,
                               .received = *received};
    return true;
}

/* WithFailedAuthenticationAudit: the 401's one event, without a user. */
static void audit_failed_authentication(req_ctx *rc, req_attrs *ra, const char *audit_id,
                                        const struct timespec *received)
{
    audit_src src;
    if (audit_src_fill(rc, ra, audit_id, received, &src))
        audit_unauthenticated(rc->srv->cfg.audit_policy, rc->srv->cfg.audit_log, &src.in);
}

/* WithAudit: decides the request's audit with the authenticated user and
 * writes RequestReceived. */
static void audit_begin(req_ctx *rc, req_attrs *ra, const char *audit_id,
                        const struct timespec *received)
{
    audit_src src;
    if (!audit_src_fill(rc, ra, audit_id, received, &src))
        return;
    rc->audit = audit_req_begin(rc->srv->cfg.audit_policy, rc->srv->cfg.audit_log, &src.in);
    if (rc->audit)
        rc->audit_keep_reply = audit_req_level(rc->audit) >= AUDIT_LEVEL_REQUEST_RESPONSE;
}

/* The request body as its handler will decode it, for the audit, at the
 * point upstream's handlers log it (LogRequestObject, LogRequestPatch):
 * once the request is authorized and its resource is served; a create's,
 * an update's and a delete's body (objectRef and, at the Request levels,
 * requestObject), a patch's (requestObject). The handler decodes it again:
 * the second decode is paid only by audited writes. */
static void audit_request_body(req_ctx *rc)
{
    if (!rc->audit)
        return;
    const char *verb = rc->ri.verb;
    bool patch = !strcmp(verb, "patch");
    if (!patch && strcmp(verb, "create") && strcmp(verb, "update") && strcmp(verb, "delete") &&
        strcmp(verb, "deletecollection"))
        return;
    if (patch && audit_req_level(rc->audit) < AUDIT_LEVEL_REQUEST)
        return; /* nothing of a patch is recorded below Request */
    struct evbuffer *body = httpd_req_body(rc->req);
    size_t len = body ? evbuffer_get_length(body) : 0;
    if (!len || len > APISERVER_MAX_BODY || httpd_req_body_too_large(rc->req))
        return;
    resource_type *t =
        registry_lookup(rc->srv->registry, rc->ri.group, rc->ri.version, rc->ri.resource);
    if (!t)
        return; /* a 404: no handler logs it */
    resource_type_unref(t);
    json_t *obj = audit_decode_request_body(httpd_req_header(rc->req, "Content-Type"),
                                            evbuffer_pullup(body, -1), len);
    if (!obj)
        return;
    if (patch)
        audit_req_log_request_patch(rc->audit, obj);
    else
        audit_req_log_request_object(rc->audit, obj);
    json_decref(obj);
}

/* The request-done hook: ResponseComplete, then the metrics. */
static void request_done(req_ctx *rc)
{
    if (rc->audit) {
        audit_req_complete(rc->audit, rc->code ? rc->code : 200, rc->audit_reply);
        audit_req_free(rc->audit);
        rc->audit = NULL;
    }
    apimetrics_request_done(rc);
}

/* A watch's stream began: ResponseStarted, then the metrics. */
static void watch_started(req_ctx *rc)
{
    if (rc->audit)
        audit_req_started(rc->audit, 200);
    apimetrics_watch_started(rc);
}

static void handle_request(httpd_req *req, void *arg)
{
    loop *lp = arg;
    /* Not calloc: glibc's calloc skips the thread cache, and a block this
     * size (1 KiB) then takes _int_malloc's large-request path, which
     * consolidates the fast bins first (2-3% of a GET). Zeroed in two
     * parts because GCC turns malloc + one memset of the whole block back
     * into calloc. */
    req_ctx *rc = xmalloc(sizeof *rc);
    if (rc) {
        memset(rc, 0, offsetof(req_ctx, query));
        memset(&rc->query, 0, sizeof *rc - offsetof(req_ctx, query));
    }
    if (!rc) {
        httpd_send_reply(req, 500, NULL);
        return;
    }
    rc->srv = lp->srv;
    atomic_fetch_add(&rc->srv->inflight, 1); /* until req_ctx_free */
    rc->lp = lp;
    rc->req = req;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    rc->start_ns = (uint64_t)now.tv_sec * 1000000000u + (uint64_t)now.tv_nsec;
    TAILQ_INIT(&rc->query);
    rc->include_object = 1;

    const char *method = httpd_req_method_name(req);
    rc->method = method;
    const char *target = httpd_req_target(req);
    CKUBE_V(5, "%s %s", method, target);
    char audit_id_buf[AUDIT_ID_SIZE];
    const char *audit_id = audit_init(rc, audit_id_buf, sizeof audit_id_buf);
    struct timespec received; /* the audit's requestReceivedTimestamp */
    clock_gettime(CLOCK_REALTIME, &received);
    /* What the request asks (upstream's RequestInfo, outermost of its
     * filters): origin-form "/path?query"; an absolute-form target (a
     * proxy's "http://host/path") is reduced to its path. */
    const char *origin = target;
    if (!strncasecmp(origin, "http://", 7) || !strncasecmp(origin, "https://", 8)) {
        const char *p = strchr(strstr(origin, "//") + 2, '/');
        origin = p ? p : "/";
    }
    const char *qmark = strchr(origin, '?');
    size_t plen = qmark ? (size_t)(qmark - origin) : strcspn(origin, "#");
    if (qmark && parse_query(qmark + 1, strcspn(qmark + 1, "#"), &rc->query) != 0) {
        reply_status(rc, ckube_status_bad_request("invalid query string"));
        return;
    }
    char *rawpath = xstrndup(origin, plen);
    char *path = rawpath ? evhttp_uridecode(*rawpath ? rawpath : "/", 0, NULL) : NULL;
    free(rawpath);
    if (!path) {
        reply_status(rc, ckube_status_new(500, CKUBE_REASON_INTERNAL, "out of memory"));
        return;
    }
    bool watch_param = req_query_bool(rc, "watch");
    bool api_path = request_info_parse(path, method, watch_param, &rc->ri) == 0;
    req_attrs attrs = {.ri = api_path ? &rc->ri : NULL, .path = path};

    /* Then, in kube-apiserver's filter order: authentication, audit,
     * impersonation, authorization. The authorizer sees every request
     * (health, metrics and discovery too). */
    if (!authenticate(rc)) {
        audit_failed_authentication(rc, &attrs, audit_id, &received);
        free(path);
        reply_status(rc, ckube_status_new(401, CKUBE_REASON_UNAUTHORIZED, "Unauthorized"));
        return;
    }
    audit_begin(rc, &attrs, audit_id, &received);
    if (!impersonation(rc, target)) {
        free(path);
        return;
    }
    if (httpd_req_body_too_large(req)) {
        free(path);
        reply_status(rc,
                     ckube_status_new(413, CKUBE_REASON_TOO_LARGE,
                                      "Request entity too large: limit is %u", APISERVER_MAX_BODY));
        return;
    }
    if (!authorize(rc, &attrs)) {
        free(path);
        return;
    }
    if (handle_health(rc, path)) {
        free(path);
        return;
    }
    if (!strcmp(path, "/metrics")) {
        free(path);
        handle_metrics(rc);
        return;
    }
    /* The ServiceAccount issuer's discovery documents, as kube-apiserver
     * serves them (to anyone system:service-account-issuer-discovery
     * allows: everyone, once RBAC is wired). */
    if (rc->srv->sa &&
        (!strcmp(path, "/.well-known/openid-configuration") || !strcmp(path, "/openid/v1/jwks"))) {
        bool jwks = path[1] == 'o';
        free(path);
        json_t *doc =
            jwks ? sa_tokens_jwks(rc->srv->sa) : sa_tokens_openid_configuration(rc->srv->sa);
        char *text = json_dumps(doc, JSON_COMPACT);
        json_decref(doc);
        rc->cache_control = "public, max-age=3600"; /* as upstream: public documents */
        reply_raw(rc, 200, jwks ? "application/jwk-set+json" : "application/json", text,
                  strlen(text));
        free(text);
        return;
    }
    if (!strcmp(path, "/version") || !strcmp(path, "/version/")) {
        free(path);
        json_t *v =
            json_pack("{s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s,s:s}", "major", "1", "minor", "31",
                      "gitVersion", "v1.31.0-ckube." CKUBE_VERSION, "gitCommit", "ckube",
                      "gitTreeState", "clean", "buildDate", "2026-11-21T00:00:00Z", "goVersion",
                      "go1.22 (ckube is C17)", "compiler", "gc", "platform", "linux/amd64");
        reply_json(rc, 200, v);
        return;
    }
    if (!strncmp(path, "/openapi/", 9)) {
        bool ok = handle_openapi(rc, path);
        free(path);
        if (!ok)
            reply_status(rc, ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                              "the server could not find the requested resource"));
        return;
    }
    if (!api_path) {
        free(path);
        reply_status(rc, ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                          "the server could not find the requested resource"));
        return;
    }
    free(path);
    /* A group/version another server serves (an APIService with a
     * service): proxied, after authentication and authorization, before
     * this server's own content negotiation (the backend does its own). */
    if (rc->ri.prefix && !strcmp(rc->ri.prefix, "apis") &&
        aggregator_proxy(rc->srv->aggregator, rc))
        return;
    if (!negotiate(rc)) {
        reply_status(rc, ckube_status_new(406, CKUBE_REASON_NOT_ACCEPTABLE,
                                          "only the following media types are accepted: "
                                          "application/json"));
        return;
    }
    const char *inc = req_query(rc, "includeObject");
    if (inc)
        rc->include_object = !strcmp(inc, "None") ? 0 : !strcmp(inc, "Object") ? 2 : 1;
    if (rc->ri.is_discovery || !rc->ri.is_resource) {
        if (rc->ri.is_discovery && handle_discovery(rc))
            return;
        reply_status(rc, ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                          "the server could not find the requested resource"));
        return;
    }
    audit_request_body(rc);
    handle_resource(rc);
}

/* ---- sockets and loops ----------------------------------------------- */

static int listen_socket(const char *host, int port, char **err)
{
    struct sockaddr_storage ss;
    socklen_t sl;
    memset(&ss, 0, sizeof ss);
    struct sockaddr_in *in4 = (struct sockaddr_in *)&ss;
    struct sockaddr_in6 *in6 = (struct sockaddr_in6 *)&ss;
    if (inet_pton(AF_INET, host, &in4->sin_addr) == 1) {
        in4->sin_family = AF_INET;
        in4->sin_port = htons((uint16_t)port);
        sl = sizeof *in4;
    } else if (inet_pton(AF_INET6, host, &in6->sin6_addr) == 1) {
        in6->sin6_family = AF_INET6;
        in6->sin6_port = htons((uint16_t)port);
        sl = sizeof *in6;
    } else {
        ckube__set_err(err, "invalid listen address %s", host);
        return -1;
    }
    int fd = socket(ss.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        ckube__set_err(err, "socket: %s", strerror(errno));
        return -1;
    }
    /* No SO_REUSEPORT: a second server on the same address must fail to
     * start rather than silently share the port. The loops share this one
     * socket (dup'd), each accepting from the same queue. */
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    /* No Nagle: a response written in pieces (headers, then a body
     * assembled from cached objects) must not wait for the client's
     * delayed ACK (~40 ms). Accepted sockets inherit it on Linux. */
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (bind(fd, (struct sockaddr *)&ss, sl) < 0 || listen(fd, 1024) < 0) {
        ckube__set_err(err, "listen on %s:%d: %s", host, port, strerror(errno));
        close(fd);
        return -1;
    }
    return fd;
}

static int bound_port(int fd)
{
    struct sockaddr_storage ss;
    socklen_t sl = sizeof ss;
    if (getsockname(fd, (struct sockaddr *)&ss, &sl) < 0)
        return -1;
    if (ss.ss_family == AF_INET)
        return ntohs(((struct sockaddr_in *)&ss)->sin_port);
    return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
}

static void *loop_main(void *arg)
{
    pthread_setname_np(pthread_self(), "ckube-http"); /* top -H, perf, gdb */
    loop *lp = arg;
    event_base_dispatch(lp->base);
    return NULL;
}

apiserver *apiserver_new(const apiserver_config *cfg, char **err)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, (void (*)(void))evthread_use_pthreads);
    apiserver *s = xcalloc(1, sizeof *s);
    s->cfg = *cfg;
    pthread_mutex_init(&s->stop_mu, NULL);
    pthread_cond_init(&s->stop_cv, NULL);
    pthread_mutex_init(&s->openapi_mu, NULL);
    /* The registry, then each API group's install function. */
    s->registry = registry_new();
    if (!s->registry || core_install(s->registry) != 0 || apps_install(s->registry) != 0 ||
        coordination_install(s->registry) != 0 || admissionregistration_install(s->registry) != 0 ||
        apiregistration_install(s->registry) != 0 || events_install(s->registry) != 0 ||
        authorization_install(s->registry) != 0 || rbac_install(s->registry) != 0 ||
        apiextensions_install(s->registry) != 0) {
        ckube__set_err(err, "registering built-in types failed");
        registry_free(s->registry);
        free(s);
        return NULL;
    }
    s->st = cfg->storage    ? cfg->storage
            : cfg->data_dir ? storage_sqlite_open(cfg->data_dir, err)
                            : storage_memory_open();
    if (!s->st) {
        registry_free(s->registry);
        free(s);
        return NULL;
    }
    s->cache = cacher_new(s->st, cfg->watch_ring);
    s->store = store_new(s->st, s->cache);
    size_t n;
    resource_type **types = registry_list(s->registry, &n);
    for (size_t i = 0; i < n; i++) {
        char prefix[256];
        resource_type_key_prefix(types[i], prefix, sizeof prefix);
        /* (Built-in types only: a custom type's fields die with it. A type
         * kept in another's storage adds its fields to that bucket.) */
        if (!types[i]->owned_selectable_fields)
            cacher_configure_bucket(s->cache, prefix, types[i]->selectable_fields);
    }
    registry_list_free(types, n);
    cacher_set_notify(s->cache, wake_loops, s);
    s->rbac = rbac_index_new();
    authorization_set_authorizer(s->registry, s->rbac);
    cacher_add_listener(s->cache, "/registry/rbac.authorization.k8s.io/", on_rbac_event, s);
    /* the metrics first: admission and the CRDs' conversions count in
     * their registry */
    if (!(s->metrics = apimetrics_new(s)))
        CKUBE_WARN("server metrics unavailable (out of memory); /metrics answers 500");
    ckube_metrics_registry *mreg = s->metrics ? apimetrics_registry(s->metrics) : NULL;
    s->admission = admission_new(s->cache);
    if (mreg)
        admission_set_metrics(s->admission, mreg);
    s->aggregator = aggregator_new(s);
    s->crds = crd_attach(s->registry, s->store, mreg);
    s->on_request_done = request_done;
    s->on_watch_started = watch_started;
    return s;
}

int apiserver_start(apiserver *s, char **err)
{
    int rc = cacher_start(s->cache);
    if (rc) {
        ckube__set_err(err, "starting the watch cache: %s", storage_strerror(rc));
        return -1;
    }
    if (apiserver_bootstrap(s) != 0) {
        ckube__set_err(err, "creating the default namespaces failed");
        return -1;
    }
    int nloops = s->cfg.nloops;
    if (nloops <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        nloops = cpus < 1 ? 1 : cpus > 4 ? 4 : (int)cpus;
    }
    if (nloops > 16)
        nloops = 16;
    if (s->cfg.tls_cert_file) {
        httpd_tls_files tf = {s->cfg.tls_cert_file,
                              s->cfg.tls_key_file,
                              {s->cfg.client_ca_file, s->cfg.cluster_ca_file}};
        if (!(s->tls = httpd_tls_new(&tf, err)))
            return -1;
    }
    if (s->cfg.sa_key_file &&
        !(s->sa = sa_tokens_new(s->cfg.sa_key_file, s->cfg.sa_pub_file, s->cfg.sa_issuer,
                                s->cfg.api_audiences, s->cfg.napi_audiences, err)))
        return -1;
    s->api_audiences = s->sa ? sa_tokens_api_audiences(s->sa) : json_array();
    auth_config ac = {.anonymous = s->cfg.anonymous_auth,
                      .plain_http = !s->tls,
                      .token_file = s->cfg.token_auth_file,
                      .token_fn = s->sa ? sa_authenticate : NULL,
                      .token_arg = s,
                      .api_audiences = s->api_audiences};
    if (!(s->authn = authenticator_new(&ac, err)))
        return -1;
    /* TokenReview asks the authenticator (reviews.c). */
    resource_type *tr = registry_lookup(s->registry, "authentication.k8s.io", "v1", "tokenreviews");
    if (tr) {
        tr->review_arg = s->authn;
        resource_type_unref(tr);
    }
    s->loops = xcalloc((size_t)nloops, sizeof *s->loops);
    int lfd = listen_socket(s->cfg.listen_host, s->cfg.port, err);
    if (lfd < 0)
        return -1;
    s->port = bound_port(lfd);
    struct timeval pause = flush_pause();
    for (int i = 0; i < nloops; i++) {
        int fd = i == 0 ? lfd : fcntl(lfd, F_DUPFD_CLOEXEC, 0);
        if (fd < 0) {
            ckube__set_err(err, "dup: %s", strerror(errno));
            return -1;
        }
        s->listen_fds[i] = fd;
        loop *lp = &s->loops[i];
        lp->srv = s;
        lp->index = i;
        pthread_mutex_init(&lp->mu, NULL);
        LIST_INIT(&lp->watches);
        LIST_INIT(&lp->lists);
        lp->mcache = apimetrics_cache_new(); /* NULL: metrics without the cache */
        lp->base = event_base_new();
        lp->wake = lp->base ? event_new(lp->base, -1, 0, on_wake, lp) : NULL;
        lp->more = lp->base ? evtimer_new(lp->base, on_wake, lp) : NULL;
        lp->flush_pause = pause;
        lp->out = lp->base ? outbound_new(lp->base) : NULL;
        /* A body over the limit is answered with a Status 413 as soon as
         * its length is known, and not read. */
        httpd_config hc = {.max_body = APISERVER_MAX_BODY,
                           .idle_timeout = 3600,
                           .tls = s->tls,
                           .slot_free = conn_identity_free};
        lp->http = lp->wake && lp->more && lp->out
                       ? httpd_new(lp->base, fd, &hc, handle_request, lp)
                       : NULL;
        if (!lp->http) {
            ckube__set_err(err, "starting the HTTP loop: out of memory");
            return -1;
        }
        s->nloops = i + 1;
    }
    health_prober_start(s); /* before the loops: their health checks read s->prober */
    aggregator_start(s->aggregator, &s->loops[0]); /* its timer, before the loop runs */
    for (int i = 0; i < s->nloops; i++)
        pthread_create(&s->loops[i].thread, NULL, loop_main, &s->loops[i]);
    s->compactor = s->cfg.no_compaction ? NULL : compactor_start(s->st, s->cfg.compact_interval);
    return 0;
}

void apiserver_shutdown_begin(apiserver *s)
{
    atomic_store(&s->shutting_down, true);
}

/* On the loop's thread: closes its listener (its dup of the socket; the
 * port refuses connections once every loop has closed its own). */
static void stop_accepting(void *arg)
{
    loop *lp = arg;
    httpd_stop_accepting(lp->http);
}

void apiserver_drain_begin(apiserver *s)
{
    atomic_store(&s->shutting_down, true);
    atomic_store(&s->draining, true);
    for (int i = 0; i < s->nloops; i++)
        loop_post(&s->loops[i], stop_accepting, &s->loops[i]);
}

long apiserver_inflight(apiserver *s)
{
    return atomic_load(&s->inflight);
}

void apiserver_stop(apiserver *s)
{
    atomic_store(&s->stopping, true);
    for (int i = 0; i < s->nloops; i++)
        event_active(s->loops[i].wake, 0, 0);
    pthread_mutex_lock(&s->stop_mu);
    s->stopped = true;
    pthread_cond_broadcast(&s->stop_cv);
    pthread_mutex_unlock(&s->stop_mu);
}

void apiserver_wait(apiserver *s)
{
    pthread_mutex_lock(&s->stop_mu);
    while (!s->stopped)
        pthread_cond_wait(&s->stop_cv, &s->stop_mu);
    pthread_mutex_unlock(&s->stop_mu);
}

void apiserver_free(apiserver *s)
{
    if (!s)
        return;
    for (int i = 0; i < s->nloops; i++)
        pthread_join(s->loops[i].thread, NULL);
    compactor_stop(s->compactor);
    health_prober_stop(s);
    /* Writes still in flight complete into loops that no longer run: close
     * the storage first (it runs their callbacks, which only post tasks),
     * then drop those tasks with their requests. */
    storage_close(s->st);
    for (int i = 0; i < s->nloops; i++) {
        loop *lp = &s->loops[i];
        /* Run what was posted so requests are answered and freed. */
        pthread_mutex_lock(&lp->mu);
        loop_task *t = lp->tasks;
        lp->tasks = lp->tasks_tail = NULL;
        pthread_mutex_unlock(&lp->mu);
        while (t) {
            loop_task *next = t->next;
            t->fn(t->arg);
            free(t);
            t = next;
        }
        if (i == 0)
            aggregator_stop(s->aggregator); /* its timer is loop 0's */
        watch_loop_close_all(lp);
        list_stream_close_all(lp);
        event_base_loop(lp->base, EVLOOP_NONBLOCK);
        outbound_free(lp->out);
        httpd_free(lp->http);
        event_free(lp->wake);
        if (lp->more)
            event_free(lp->more);
        event_base_free(lp->base);
        pthread_mutex_destroy(&lp->mu);
        apimetrics_cache_free(lp->mcache);
    }
    free(s->loops);
    httpd_tls_free(s->tls); /* after the connections made from it */
    authenticator_free(s->authn);
    sa_tokens_free(s->sa);
    json_decref(s->api_audiences);
    apimetrics_free(s->metrics);
    store_free(s->store);
    cacher_free(s->cache); /* before the CRD state its listeners use */
    crd_detach(s->crds);
    rbac_index_free(s->rbac); /* the same */
    admission_free(s->admission);
    aggregator_free(s->aggregator);
    registry_free(s->registry);
    json_decref(s->openapi_v3_index);
    json_decref(s->openapi_v3_docs);
    json_decref(s->openapi_v2);
    pthread_mutex_destroy(&s->openapi_mu);
    pthread_mutex_destroy(&s->stop_mu);
    pthread_cond_destroy(&s->stop_cv);
    free(s);
}
