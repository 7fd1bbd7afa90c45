/* Tests for ckube/client.h against a scripted HTTP server (libevent's
 * evhttp on a thread of this process) and, for TLS, `openssl s_server`:
 * error bodies (Status and not), retries with Retry-After, the QPS
 * limiter, every auth source (static token, token file rotation, basic,
 * exec plugins with expiry and 401 refresh), Warning headers, request
 * encoding of every dynamic verb, paging, watch streaming (split events,
 * several per chunk, clean close, stop from another thread, bad streams)
 * and transport errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <event2/buffer.h>
#include <event2/event.h>
#include <event2/http.h>
#include <event2/keyvalq_struct.h>
#include <event2/thread.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>

#include "ckube/client.h"
#include "ckube/discovery.h"
#include "ckube/json.h"
#include "ckube/log.h"
#include "client/client_internal.h" /* test hooks: token file period, warning parser */
#include "util/client_test_util.h"

/* ------------------------------------------------------------------ */
/* The scripted server                                                 */
/* ------------------------------------------------------------------ */

typedef struct tsrv {
    struct event_base *base;
    struct evhttp *http;
    pthread_t th;
    int port;
    pthread_mutex_t mu;
    /* recorded (under mu) */
    int hits;
    char last_auth[512];
    char last_uri[2048];
    char bodies_ok; /* every retried POST carried the same body */
    /* scripted (under mu) */
    char expect_auth[512]; /* /auth: the one accepted Authorization */
    int fail_first;        /* /retry/...: how many failing answers before 200 */
    bool expire_continue;  /* paging: a continue token answers 410 */
    int hanging;           /* "hang" watches not yet ended */
    uint16_t ports[64];    /* client ports of the requests: distinct connections */
    int nports;
} tsrv;

static tsrv g_srv;

static const char *hdr(struct evhttp_request *req, const char *name)
{
    const char *v = evhttp_find_header(evhttp_request_get_input_headers(req), name);
    return v ? v : "";
}

static char *req_body(struct evhttp_request *req)
{
    struct evbuffer *in = evhttp_request_get_input_buffer(req);
    size_t n = evbuffer_get_length(in);
    char *b = calloc(1, n + 1);
    evbuffer_copyout(in, b, n);
    return b;
}

static void reply(struct evhttp_request *req, int code, const char *ctype, const char *body)
{
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (ctype)
        evhttp_add_header(h, "Content-Type", ctype);
    struct evbuffer *b = evbuffer_new();
    evbuffer_add(b, body, strlen(body));
    evhttp_send_reply(req, code, ckube__http_reason(code), b);
    evbuffer_free(b);
}

static const char *method_name(struct evhttp_request *req)
{
    switch (evhttp_request_get_command(req)) {
    case EVHTTP_REQ_GET:
        return "GET";
    case EVHTTP_REQ_POST:
        return "POST";
    case EVHTTP_REQ_PUT:
        return "PUT";
    case EVHTTP_REQ_DELETE:
        return "DELETE";
    case EVHTTP_REQ_PATCH:
        return "PATCH";
    default:
        return "OTHER";
    }
}

/* Echoes the request as JSON: how the client encoded it. */
static void echo(struct evhttp_request *req)
{
    char *body = req_body(req);
    json_t *j =
        json_pack("{s:s,s:s,s:s,s:s,s:s,s:s}", "method", method_name(req), "uri",
                  evhttp_request_get_uri(req), "contentType", hdr(req, "Content-Type"), "body",
                  body, "userAgent", hdr(req, "User-Agent"), "accept", hdr(req, "Accept"));
    char *s = ckube_json_dumps(j, NULL);
    reply(req, 200, "application/json", s);
    free(s);
    json_decref(j);
    free(body);
}

static const char *STATUS_422 =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"ConfigMap \\\"Bad\\\" is invalid: metadata.name: Invalid value: \\\"Bad\\\": "
    "a lowercase RFC 1123 subdomain\",\"reason\":\"Invalid\",\"details\":{\"name\":\"Bad\","
    "\"kind\":\"ConfigMap\",\"causes\":[{\"reason\":\"FieldValueInvalid\",\"message\":"
    "\"Invalid value: \\\"Bad\\\"\",\"field\":\"metadata.name\"},{\"reason\":"
    "\"FieldValueRequired\",\"message\":\"Required value\",\"field\":\"data\"}]},\"code\":422}";

static const char *STATUS_429 =
    "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
    "\"message\":\"too many requests\",\"reason\":\"TooManyRequests\",\"code\":429}";

static void handle_retry(tsrv *s, struct evhttp_request *req, const char *path)
{
    pthread_mutex_lock(&s->mu);
    int hit = s->hits; /* already counted */
    bool fail = hit <= s->fail_first;
    if (evhttp_request_get_command(req) == EVHTTP_REQ_POST) {
        char *b = req_body(req);
        if (strcmp(b, "{\"payload\":1}"))
            s->bodies_ok = 0;
        free(b);
    }
    pthread_mutex_unlock(&s->mu);
    struct evkeyvalq *h = evhttp_request_get_output_headers(req);
    if (!strcmp(path, "/retry/429")) {
        if (fail) {
            evhttp_add_header(h, "Retry-After", "1");
            reply(req, 429, "application/json", STATUS_429);
            return;
        }
    } else if (!strcmp(path, "/retry/503")) {
        if (fail) {
            evhttp_add_header(h, "Retry-After", "0");
            reply(req, 503, "text/plain", "overloaded");
            return;
        }
    } else if (!strcmp(path, "/retry/500")) {
        reply(req, 500, "text/plain", "no retry-after here");
        return;
    }
    reply(req, 200, "application/json", "{\"ok\":true}");
}

/* /auth: 200 when the Authorization header is the expected one. */
static void handle_auth(tsrv *s, struct evhttp_request *req)
{
    pthread_mutex_lock(&s->mu);
    bool ok = !s->expect_auth[0] || !strcmp(s->expect_auth, hdr(req, "Authorization"));
    pthread_mutex_unlock(&s->mu);
    if (ok)
        reply(req, 200, "application/json", "{\"ok\":true}");
    else
        reply(req, 401, "application/json",
              "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
              "\"message\":\"Unauthorized\",\"reason\":\"Unauthorized\",\"code\":401}");
}

/* Paging over 5 configmaps, 2 per page, continue tokens p1 and p2. */
static void handle_paging(tsrv *s, struct evhttp_request *req)
{
    struct evkeyvalq q;
    evhttp_parse_query_str(evhttp_uri_get_query(evhttp_request_get_evhttp_uri(req)), &q);
    const char *cont = evhttp_find_header(&q, "continue");
    const char *limit = evhttp_find_header(&q, "limit");
    pthread_mutex_lock(&s->mu);
    bool expire = s->expire_continue;
    pthread_mutex_unlock(&s->mu);
    if (cont && expire) {
        reply(req, 410, "application/json",
              "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
              "\"message\":\"The provided continue parameter is too old\",\"reason\":\"Expired\","
              "\"code\":410}");
        evhttp_clear_headers(&q);
        return;
    }
    int start = !cont ? 0 : !strcmp(cont, "p1") ? 2 : 4;
    int n = limit ? atoi(limit) : 100;
    json_t *items = json_array();
    for (int i = start; i < 5 && i < start + n; i++) {
        char name[16];
        snprintf(name, sizeof name, "cm-%d", i);
        json_array_append_new(items, json_pack("{s:{s:s}}", "metadata", "name", name));
    }
    json_t *md = json_pack("{s:s}", "resourceVersion", cont ? "999" : "100");
    if (start + n < 5)
        json_object_set_new(md, "continue", json_string(start == 0 ? "p1" : "p2"));
    json_t *list = json_pack("{s:s,s:s,s:o,s:o}", "kind", "ConfigMapList", "apiVersion", "v1",
                             "metadata", md, "items", items);
    char *body = ckube_json_dumps(list, NULL);
    reply(req, 200, "application/json", body);
    free(body);
    json_decref(list);
    evhttp_clear_headers(&q);
}

static void reply_late(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    reply(arg, 200, "application/json", "{\"late\":true}");
}

/* ---- watch scripts ---- */

typedef struct chunk_step {
    struct evhttp_request *req;
    const char *const *chunks; /* NULL-terminated; "" entries are pauses */
    int i;
    bool end;
} chunk_step;

static void send_next_chunk(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    chunk_step *st = arg;
    const char *c = st->chunks[st->i];
    if (!c) {
        if (st->end)
            evhttp_send_reply_end(st->req);
        free(st);
        return;
    }
    st->i++;
    if (*c) {
        struct evbuffer *b = evbuffer_new();
        evbuffer_add(b, c, strlen(c));
        evhttp_send_reply_chunk(st->req, b);
        evbuffer_free(b);
    }
    struct timeval tv = {0, 30000};
    event_base_once(g_srv.base, -1, EV_TIMEOUT, send_next_chunk, st, &tv);
}

/* A "hang" watch sends nothing for 2 s, then ends its reply: by then the
 * client has stopped and closed it, and ending the reply is what lets
 * libevent free the request (it does not read, so it never notices the
 * client left on its own). */
static void end_hang(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evhttp_send_reply_end(arg);
    pthread_mutex_lock(&g_srv.mu);
    g_srv.hanging--;
    pthread_mutex_unlock(&g_srv.mu);
}

static const char *const SPLIT_CHUNKS[] = {
    /* one event cut in the middle of a string holding braces and quotes */
    "{\"type\":\"ADDED\",\"object\":{\"kind\":\"ConfigMap\",\"metadata\":{\"name\":\"a\"},"
    "\"data\":{\"k\":\"}{\\\"",
    "", "]\\\\\"}}}\n",
    /* several events in one chunk, the last one incomplete */
    "{\"type\":\"MODIFIED\",\"object\":{\"metadata\":{\"name\":\"b\"}}}\n"
    "{\"type\":\"BOOKMARK\",\"object\":{\"metadata\":{\"resourceVersion\":\"42\"}}}\n{\"type\":"
    "\"DELE",
    "TED\",\"object\":{\"metadata\":{\"name\":\"c\"}}}"
    "{\"type\":\"ERROR\",\"object\":{\"kind\":\"Status\",\"code\":410,\"reason\":\"Expired\"}}\n",
    NULL};
static const char *const BAD_CHUNKS[] = {"{\"type\":\"ADDED\",\"object\":{}}\nnot json\n", NULL};
static const char *const PARTIAL_CHUNKS[] = {"{\"type\":\"ADDED\",\"obj", NULL};
static const char *const UNKNOWN_CHUNKS[] = {"{\"type\":\"RENAMED\",\"object\":{}}\n", NULL};

static void handle_watch(struct evhttp_request *req, const char *ns)
{
    const char *const *chunks = NULL;
    if (!strcmp(ns, "split"))
        chunks = SPLIT_CHUNKS;
    else if (!strcmp(ns, "bad"))
        chunks = BAD_CHUNKS;
    else if (!strcmp(ns, "partial"))
        chunks = PARTIAL_CHUNKS;
    else if (!strcmp(ns, "unknown"))
        chunks = UNKNOWN_CHUNKS;
    else if (!strcmp(ns, "hang")) {
        evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                          "application/json");
        evhttp_send_reply_start(req, 200, "OK");
        pthread_mutex_lock(&g_srv.mu);
        g_srv.hanging++;
        pthread_mutex_unlock(&g_srv.mu);
        struct timeval tv = {2, 0};
        event_base_once(g_srv.base, -1, EV_TIMEOUT, end_hang, req, &tv);
        return;
    } else if (!strcmp(ns, "slowheaders")) {
        struct timeval tv = {1, 0};
        event_base_once(g_srv.base, -1, EV_TIMEOUT, reply_late, req, &tv);
        return;
    } else if (!strcmp(ns, "gone")) {
        reply(req, 410, "application/json",
              "{\"kind\":\"Status\",\"apiVersion\":\"v1\",\"metadata\":{},\"status\":\"Failure\","
              "\"message\":\"too old resource version: 1 (50)\",\"reason\":\"Expired\","
              "\"code\":410}");
        return;
    } else {
        echo(req);
        return;
    }
    evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type", "application/json");
    evhttp_add_header(evhttp_request_get_output_headers(req), "Warning", "299 - \"watch warning\"");
    evhttp_send_reply_start(req, 200, "OK");
    chunk_step *st = calloc(1, sizeof *st);
    st->req = req;
    st->chunks = chunks;
    st->end = true;
    send_next_chunk(-1, 0, st);
}

static void drop_connection(evutil_socket_t fd, short what, void *arg)
{
    (void)fd;
    (void)what;
    evhttp_connection_free(arg); /* frees its request unanswered */
}

/* Discovery, three servers under three path prefixes:
 *  /legacy: APIVersions, APIGroupList and one APIResourceList per
 *           group-version, whatever the Accept header says;
 *  /agg:    aggregated (apidiscovery.k8s.io/v2) when asked first for it,
 *           with a resource lacking responseKind whose subresource has one;
 *  /stale:  aggregated, one version of it Stale. */
static const char LEGACY_API[] = "{\"kind\":\"APIVersions\",\"versions\":[\"v1\"]}";
static const char LEGACY_CORE[] =
    "{\"kind\":\"APIResourceList\",\"groupVersion\":\"v1\",\"resources\":["
    "{\"name\":\"configmaps\",\"singularName\":\"configmap\",\"namespaced\":true,"
    "\"kind\":\"ConfigMap\",\"verbs\":[\"get\",\"list\"],\"shortNames\":[\"cm\"]},"
    "{\"name\":\"pods/status\",\"singularName\":\"\",\"namespaced\":true,\"kind\":\"Pod\","
    "\"verbs\":[\"get\"]}]}";
static const char LEGACY_APIS[] =
    "{\"kind\":\"APIGroupList\",\"groups\":[{\"name\":\"example.com\",\"versions\":["
    "{\"groupVersion\":\"example.com/v1beta1\",\"version\":\"v1beta1\"},"
    "{\"groupVersion\":\"example.com/v1\",\"version\":\"v1\"}],"
    "\"preferredVersion\":{\"groupVersion\":\"example.com/v1\",\"version\":\"v1\"}}]}";
static const char LEGACY_WIDGETS[] =
    "{\"kind\":\"APIResourceList\",\"resources\":[{\"name\":\"widgets\",\"singularName\":"
    "\"widget\",\"namespaced\":false,\"kind\":\"Widget\",\"verbs\":[\"get\"]}]}";
static const char AGG_API[] =
    "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":\"apidiscovery.k8s.io/v2\","
    "\"items\":[{\"metadata\":{},\"versions\":[{\"version\":\"v1\",\"freshness\":\"Current\","
    "\"resources\":[{\"resource\":\"configmaps\",\"responseKind\":{\"group\":\"\",\"version\":"
    "\"v1\",\"kind\":\"ConfigMap\"},\"scope\":\"Namespaced\",\"singularResource\":"
    "\"configmap\",\"verbs\":[\"get\",\"list\"],\"shortNames\":[\"cm\"]},"
    "{\"resource\":\"pods\",\"scope\":\"Namespaced\",\"singularResource\":\"pod\","
    "\"verbs\":[],\"subresources\":[{\"subresource\":\"status\",\"responseKind\":"
    "{\"group\":\"\",\"version\":\"v1\",\"kind\":\"Pod\"},\"verbs\":[\"get\"]}]}]}]}]}";
static const char AGG_APIS[] =
    "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":\"apidiscovery.k8s.io/v2\","
    "\"items\":[{\"metadata\":{\"name\":\"example.com\"},\"versions\":["
    "{\"version\":\"v1\",\"resources\":[{\"resource\":\"widgets\",\"responseKind\":"
    "{\"group\":\"example.com\",\"version\":\"v1\",\"kind\":\"Widget\"},\"scope\":\"Cluster\","
    "\"singularResource\":\"widget\",\"verbs\":[\"get\"]}]},"
    "{\"version\":\"v1beta1\",\"resources\":[{\"resource\":\"widgets\",\"responseKind\":"
    "{\"group\":\"example.com\",\"version\":\"v1beta1\",\"kind\":\"Widget\"},\"scope\":"
    "\"Cluster\",\"singularResource\":\"widget\",\"verbs\":[\"get\"]}]}]}]}";
static const char STALE_APIS[] =
    "{\"kind\":\"APIGroupDiscoveryList\",\"apiVersion\":\"apidiscovery.k8s.io/v2\","
    "\"items\":[{\"metadata\":{\"name\":\"metrics.example.com\"},\"versions\":["
    "{\"version\":\"v1\",\"freshness\":\"Stale\"}]}]}";

static void handle_discovery(struct evhttp_request *req, const char *path)
{
    static const char agg_type[] =
        "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList";
    /* Only a client that asks for the aggregated form first gets it. */
    bool agg = !strncmp(hdr(req, "Accept"), agg_type, strlen(agg_type));
    const char *body = NULL, *ctype = "application/json";
    if (!strncmp(path, "/legacy/", 8)) {
        path += 7;
        body = !strcmp(path, "/api")                      ? LEGACY_API
               : !strcmp(path, "/api/v1")                 ? LEGACY_CORE
               : !strcmp(path, "/apis")                   ? LEGACY_APIS
               : !strncmp(path, "/apis/example.com/", 18) ? LEGACY_WIDGETS
                                                          : NULL;
    } else if (agg) {
        const char *rest = strchr(path + 1, '/');
        bool stale = !strncmp(path, "/stale/", 7);
        body = !strcmp(rest, "/api")    ? AGG_API
               : !strcmp(rest, "/apis") ? (stale ? STALE_APIS : AGG_APIS)
                                        : NULL;
        ctype = agg_type;
    }
    if (body)
        reply(req, 200, ctype, body);
    else
        reply(req, 404, "text/plain; charset=utf-8", "404 page not found");
}

static void handler(struct evhttp_request *req, void *arg)
{
    tsrv *s = arg;
    const struct evhttp_uri *u = evhttp_request_get_evhttp_uri(req);
    const char *path = evhttp_uri_get_path(u);
    const char *query = evhttp_uri_get_query(u);
    pthread_mutex_lock(&s->mu);
    s->hits++;
    snprintf(s->last_auth, sizeof s->last_auth, "%s", hdr(req, "Authorization"));
    snprintf(s->last_uri, sizeof s->last_uri, "%s", evhttp_request_get_uri(req));
    char *peer = NULL;
    ev_uint16_t peer_port = 0;
    evhttp_connection_get_peer(evhttp_request_get_connection(req), &peer, &peer_port);
    bool known = false;
    for (int i = 0; i < s->nports; i++)
        known = known || s->ports[i] == peer_port;
    if (!known && s->nports < 64)
        s->ports[s->nports++] = peer_port;
    pthread_mutex_unlock(&s->mu);

    if (!strncmp(path, "/legacy/", 8) || !strncmp(path, "/agg/", 5) ||
        !strncmp(path, "/stale/", 7)) {
        handle_discovery(req, path);
    } else if (!strncmp(path, "/retry/", 7)) {
        handle_retry(s, req, path);
    } else if (!strcmp(path, "/auth")) {
        handle_auth(s, req);
    } else if (!strcmp(path, "/drop-first")) {
        pthread_mutex_lock(&s->mu);
        bool drop = s->hits <= s->fail_first;
        pthread_mutex_unlock(&s->mu);
        if (drop) {
            struct timeval now = {0, 0};
            event_base_once(s->base, -1, EV_TIMEOUT, drop_connection,
                            evhttp_request_get_connection(req), &now);
        } else {
            reply(req, 200, "application/json", "{}");
        }
    } else if (!strcmp(path, "/slow")) {
        struct timeval tv = {1, 0};
        event_base_once(s->base, -1, EV_TIMEOUT, reply_late, req, &tv);
    } else if (!strcmp(path, "/status/422")) {
        reply(req, 422, "application/json", STATUS_422);
    } else if (!strcmp(path, "/text/500")) {
        reply(req, 500, "text/plain; charset=utf-8", "boom\n");
    } else if (!strcmp(path, "/binary/400")) {
        reply(req, 400, "application/octet-stream", "\x01\x02");
    } else if (!strcmp(path, "/text/409")) {
        reply(req, 409, "text/plain", "conflict!");
    } else if (!strcmp(path, "/warn")) {
        struct evkeyvalq *h = evhttp_request_get_output_headers(req);
        evhttp_add_header(h, "Warning", "299 - \"first warning\"");
        evhttp_add_header(h, "Warning",
                          "299 ckube \"second, with \\\"quotes\\\"\" \"Sat, 01 Jan 2000 00:00:00 "
                          "GMT\", 199 - \"not an API warning\"");
        reply(req, 200, "application/json", "{}");
    } else if (!strcmp(path, "/api/v1/namespaces/page/configmaps")) {
        handle_paging(s, req);
    } else if (strstr(path, "/missing")) {
        reply(req, 404, "text/plain; charset=utf-8", "404 page not found");
    } else if (query && strstr(query, "watch=true") && !strncmp(path, "/api/v1/namespaces/", 19)) {
        char ns[64] = "";
        sscanf(path + 19, "%63[^/]", ns);
        handle_watch(req, ns);
    } else {
        echo(req);
    }
}

static void *srv_thread(void *arg)
{
    tsrv *s = arg;
    event_base_dispatch(s->base);
    return NULL;
}

static int srv_start(void **state)
{
    (void)state;
    signal(SIGPIPE, SIG_IGN);
    evthread_use_pthreads();
    memset(&g_srv, 0, sizeof g_srv);
    pthread_mutex_init(&g_srv.mu, NULL);
    g_srv.base = event_base_new();
    g_srv.http = evhttp_new(g_srv.base);
    evhttp_set_allowed_methods(g_srv.http, EVHTTP_REQ_GET | EVHTTP_REQ_POST | EVHTTP_REQ_PUT |
                                               EVHTTP_REQ_DELETE | EVHTTP_REQ_PATCH);
    evhttp_set_gencb(g_srv.http, handler, &g_srv);
    struct evhttp_bound_socket *bs = evhttp_bind_socket_with_handle(g_srv.http, "127.0.0.1", 0);
    if (!bs)
        return -1;
    struct sockaddr_in sin;
    socklen_t sl = sizeof sin;
    getsockname(evhttp_bound_socket_get_fd(bs), (struct sockaddr *)&sin, &sl);
    g_srv.port = ntohs(sin.sin_port);
    pthread_create(&g_srv.th, NULL, srv_thread, &g_srv);
    return 0;
}

static int srv_stop(void **state)
{
    (void)state;
    for (int i = 0; i < 100; i++) { /* let "hang" replies end (see end_hang) */
        pthread_mutex_lock(&g_srv.mu);
        int h = g_srv.hanging;
        pthread_mutex_unlock(&g_srv.mu);
        if (!h)
            break;
        ctu_sleep_ms(50);
    }
    ctu_sleep_ms(50);
    event_base_loopbreak(g_srv.base);
    pthread_join(g_srv.th, NULL);
    evhttp_free(g_srv.http);
    event_base_free(g_srv.base);
    pthread_mutex_destroy(&g_srv.mu);
    return 0;
}

/* Resets the script between tests. */
static int reset(void **state)
{
    (void)state;
    pthread_mutex_lock(&g_srv.mu);
    g_srv.hits = 0;
    g_srv.last_auth[0] = g_srv.last_uri[0] = g_srv.expect_auth[0] = 0;
    g_srv.fail_first = 0;
    g_srv.expire_continue = false;
    g_srv.bodies_ok = 1;
    g_srv.nports = 0;
    pthread_mutex_unlock(&g_srv.mu);
    return 0;
}

static int hits(void)
{
    pthread_mutex_lock(&g_srv.mu);
    int h = g_srv.hits;
    pthread_mutex_unlock(&g_srv.mu);
    return h;
}

static void expect_auth(const char *a)
{
    pthread_mutex_lock(&g_srv.mu);
    snprintf(g_srv.expect_auth, sizeof g_srv.expect_auth, "%s", a);
    pthread_mutex_unlock(&g_srv.mu);
}

static char *last_auth(void)
{
    pthread_mutex_lock(&g_srv.mu);
    char *a = strdup(g_srv.last_auth);
    pthread_mutex_unlock(&g_srv.mu);
    return a;
}

/* A client for the scripted server; `tweak` may adjust the config. */
static ckube_client *new_client(void (*tweak)(ckube_config *))
{
    ckube_config cfg = {.qps = -1, .max_retries = 3};
    char host[64];
    snprintf(host, sizeof host, "http://127.0.0.1:%d", g_srv.port);
    cfg.host = host;
    if (tweak)
        tweak(&cfg);
    ckube_status *err = NULL;
    ckube_client *c = ckube_client_new(&cfg, &err);
    if (!c)
        fail_msg("ckube_client_new: %s", err && err->message ? err->message : "?");
    return c;
}

static int do_get(ckube_client *c, const char *path, ckube_response *resp, ckube_status **err)
{
    ckube_request rq = {.method = "GET", .path = path};
    return ckube_client_do(c, &rq, resp, err);
}

/* ------------------------------------------------------------------ */
/* Errors                                                              */
/* ------------------------------------------------------------------ */

static void test_status_body_with_causes(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    ckube_response resp;
    ckube_status *err = NULL;
    assert_int_equal(do_get(c, "/status/422", &resp, &err), -1);
    assert_int_equal(resp.code, 422); /* resp filled for server answers */
    assert_non_null(strstr(resp.body, "FieldValueInvalid"));
    ckube_response_free(&resp);
    assert_non_null(err);
    assert_int_equal(err->code, 422);
    assert_string_equal(err->reason, "Invalid");
    assert_string_equal(err->message, "ConfigMap \"Bad\" is invalid: metadata.name: Invalid "
                                      "value: \"Bad\": a lowercase RFC 1123 subdomain");
    assert_string_equal(err->name, "Bad");
    assert_string_equal(err->kind, "ConfigMap");
    assert_int_equal(err->ncauses, 2);
    assert_string_equal(err->causes[0].type, "FieldValueInvalid");
    assert_string_equal(err->causes[0].field, "metadata.name");
    assert_string_equal(err->causes[0].message, "Invalid value: \"Bad\"");
    assert_string_equal(err->causes[1].type, "FieldValueRequired");
    assert_false(ckube_is_not_found(err));
    assert_true(ckube_status_is(err, 422));
    ckube_status_free(err);
    ckube_client_free(c);
}

/* Bodies that are not a Status get client-go's generic errors. */
static void test_non_status_bodies(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    ckube_status *err = NULL;
    json_t *obj = (json_t *)1;
    ckube_gvr cm = {"", "v1", "configmaps"};
    assert_int_equal(ckube_get(c, &cm, "default", "missing", &obj, &err), -1);
    assert_null(obj);
    assert_int_equal(err->code, 404);
    assert_string_equal(err->reason, "NotFound");
    assert_string_equal(
        err->message, "the server could not find the requested resource (get configmaps missing)");
    assert_string_equal(err->name, "missing");
    assert_string_equal(err->kind, "configmaps");
    assert_int_equal(err->ncauses, 1);
    assert_string_equal(err->causes[0].type, "UnexpectedServerResponse");
    assert_string_equal(err->causes[0].message, "404 page not found");
    assert_true(ckube_is_not_found(err));
    ckube_status_free(err);

    ckube_gvr dep = {"apps", "v1", "deployments"};
    assert_int_equal(ckube_list(c, &dep, "missing", NULL, &obj, &err), -1);
    assert_string_equal(err->message,
                        "the server could not find the requested resource (get deployments.apps)");
    ckube_status_free(err);

    ckube_response resp;
    assert_int_equal(do_get(c, "/text/500", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_int_equal(err->code, 500);
    assert_string_equal(err->reason, "InternalError");
    assert_string_equal(
        err->message,
        "an error on the server (\"boom\") has prevented the request from succeeding");
    ckube_status_free(err);

    assert_int_equal(do_get(c, "/binary/400", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_string_equal(err->reason, "BadRequest");
    assert_string_equal(err->message, "the server rejected our request for an unknown reason");
    assert_string_equal(err->causes[0].message, "unknown");
    ckube_status_free(err);

    ckube_request post = {.method = "POST", .path = "/text/409", .body = "{}", .body_len = 2};
    assert_int_equal(ckube_client_do(c, &post, &resp, &err), -1);
    ckube_response_free(&resp);
    assert_string_equal(err->reason, "AlreadyExists");
    assert_string_equal(err->message, "the server reported a conflict");
    ckube_status_free(err);
    ckube_request put = {.method = "PUT", .path = "/text/409", .body = "{}", .body_len = 2};
    assert_int_equal(ckube_client_do(c, &put, &resp, &err), -1);
    ckube_response_free(&resp);
    assert_string_equal(err->reason, "Conflict");
    assert_true(ckube_is_conflict(err));
    ckube_status_free(err);

    /* a bad path never leaves the client */
    assert_int_equal(do_get(c, "api/v1", &resp, &err), -1);
    assert_int_equal(err->code, 0);
    ckube_status_free(err);
    /* NULL err is allowed */
    assert_int_equal(do_get(c, "/text/500", &resp, NULL), -1);
    ckube_response_free(&resp);
    ckube_client_free(c);
}

static int closed_port(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sin = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    bind(fd, (struct sockaddr *)&sin, sizeof sin);
    socklen_t sl = sizeof sin;
    getsockname(fd, (struct sockaddr *)&sin, &sl);
    close(fd);
    return ntohs(sin.sin_port);
}

static void test_transport_error(void **state)
{
    (void)state;
    char host[64];
    int port = closed_port();
    snprintf(host, sizeof host, "http://127.0.0.1:%d", port);
    ckube_config cfg = {.host = host, .qps = -1};
    ckube_client *c = ckube_client_new(&cfg, NULL);
    assert_non_null(c);
    ckube_gvr cm = {"", "v1", "configmaps"};
    json_t *obj = NULL;
    ckube_status *err = NULL;
    double t0 = ctu_now();
    assert_int_equal(ckube_get(c, &cm, "default", "x", &obj, &err), -1);
    assert_true(ctu_now() - t0 < 1.0); /* connection refused is not retried */
    assert_int_equal(err->code, 0);
    assert_null(err->reason);
    char *want =
        ctu_fmt("Get \"http://127.0.0.1:%d/api/v1/namespaces/default/configmaps/x\": ", port);
    if (strncmp(err->message, want, strlen(want)))
        fail_msg("message \"%s\" does not start with \"%s\"", err->message, want);
    free(want);
    ckube_status_free(err);

    ckube_watch *w = NULL;
    assert_int_equal(ckube_watch_open(c, &cm, NULL, NULL, &w, &err), -1);
    assert_null(w);
    assert_int_equal(err->code, 0);
    assert_non_null(strstr(err->message, "/api/v1/configmaps?watch=true"));
    ckube_status_free(err);
    ckube_client_free(c);
}

static void short_timeout(ckube_config *cfg)
{
    cfg->timeout_ms = 200;
}

static void test_request_timeout(void **state)
{
    (void)state;
    ckube_client *c = new_client(short_timeout);
    ckube_response resp;
    ckube_status *err = NULL;
    double t0 = ctu_now();
    assert_int_equal(do_get(c, "/slow", &resp, &err), -1);
    double dt = ctu_now() - t0;
    assert_true(dt >= 0.15 && dt < 0.9);
    assert_int_equal(err->code, 0);
    char *want = ctu_fmt("Get \"http://127.0.0.1:%d/slow\": ", g_srv.port);
    assert_memory_equal(err->message, want, strlen(want));
    assert_non_null(strstr(err->message, "imed out"));
    free(want);
    ckube_status_free(err);
    ckube_client_free(c);
    /* without a timeout the slow answer arrives */
    c = new_client(NULL);
    assert_int_equal(do_get(c, "/slow", &resp, NULL), 0);
    assert_string_equal(resp.body, "{\"late\":true}");
    ckube_response_free(&resp);
    ckube_client_free(c);
    ctu_sleep_ms(1000); /* let the abandoned request's late reply happen */
}

/* ------------------------------------------------------------------ */
/* Retries and rate limiting                                           */
/* ------------------------------------------------------------------ */

static void set_fail_first(int n)
{
    pthread_mutex_lock(&g_srv.mu);
    g_srv.fail_first = n;
    pthread_mutex_unlock(&g_srv.mu);
}

static void test_retry_after(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL); /* max_retries 3 */
    ckube_response resp;
    ckube_status *err = NULL;

    /* two 429s with Retry-After: 1, then 200; the POST body is resent */
    set_fail_first(2);
    double t0 = ctu_now();
    ckube_request post = {
        .method = "POST", .path = "/retry/429", .body = "{\"payload\":1}", .body_len = 13};
    assert_int_equal(ckube_client_do(c, &post, &resp, &err), 0);
    double dt = ctu_now() - t0;
    assert_null(err);
    assert_int_equal(resp.code, 200);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 3);
    assert_true(dt >= 1.9 && dt < 4.0);
    assert_int_equal(g_srv.bodies_ok, 1);

    /* more 429s than retries: the last 429 is the error */
    reset(NULL);
    set_fail_first(100);
    ckube_client_free(c);
    c = new_client(NULL);
    assert_int_equal(do_get(c, "/retry/503", &resp, &err), -1); /* Retry-After: 0 */
    ckube_response_free(&resp);
    assert_int_equal(hits(), 4); /* 1 + max_retries */
    assert_int_equal(err->code, 503);
    assert_string_equal(err->reason, "ServiceUnavailable");
    ckube_status_free(err);

    /* 5xx without Retry-After: no retry */
    reset(NULL);
    assert_int_equal(do_get(c, "/retry/500", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 1);
    ckube_status_free(err);
    ckube_client_free(c);
}

/* A connection closed with no answer: GETs are retried (after 1 s, as
 * client-go does), other verbs are not (the server may have acted). */
static void test_dropped_connection(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    ckube_response resp;
    ckube_status *err = NULL;
    set_fail_first(1);
    double t0 = ctu_now();
    assert_int_equal(do_get(c, "/drop-first", &resp, &err), 0);
    assert_true(ctu_now() - t0 >= 0.9);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 2);

    /* (On a *reused* connection libcurl itself resends any request that
     * got no byte back, since the server may have closed the idle
     * connection before reading it; a fresh client's first connection
     * shows our own policy.) */
    ckube_client_free(c);
    c = new_client(NULL);
    reset(NULL);
    set_fail_first(1);
    ckube_request post = {.method = "POST", .path = "/drop-first", .body = "{}", .body_len = 2};
    assert_int_equal(ckube_client_do(c, &post, &resp, &err), -1);
    assert_int_equal(hits(), 1);
    assert_int_equal(err->code, 0);
    assert_non_null(strstr(err->message, "Post \"http://127.0.0.1:"));
    ckube_status_free(err);
    ckube_client_free(c);
}

static void one_retry(ckube_config *cfg)
{
    cfg->max_retries = 1;
}

static void no_retry(ckube_config *cfg)
{
    cfg->max_retries = -1;
}

static void test_retry_exhausted(void **state)
{
    (void)state;
    ckube_client *c = new_client(one_retry);
    ckube_response resp;
    ckube_status *err = NULL;
    set_fail_first(100);
    assert_int_equal(do_get(c, "/retry/429", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 2);
    assert_int_equal(err->code, 429);
    assert_string_equal(err->reason, "TooManyRequests");
    assert_string_equal(err->message, "too many requests");
    assert_int_equal(err->retry_after_seconds, 1); /* from the header */
    ckube_status_free(err);
    ckube_client_free(c);

    reset(NULL);
    set_fail_first(100);
    c = new_client(no_retry);
    assert_int_equal(do_get(c, "/retry/429", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 1);
    ckube_status_free(err);
    ckube_client_free(c);
}

static void qps10_burst2(ckube_config *cfg)
{
    cfg->qps = 10;
    cfg->burst = 2;
}

static void qps20_burst1(ckube_config *cfg)
{
    cfg->qps = 20;
    cfg->burst = 1;
}

static void *qps_worker(void *arg)
{
    ckube_client *c = arg;
    for (int i = 0; i < 5; i++) {
        ckube_response resp;
        if (do_get(c, "/echo", &resp, NULL) == 0)
            ckube_response_free(&resp);
    }
    return NULL;
}

static void test_qps_limiter(void **state)
{
    (void)state;
    /* burst 2 then 10/s: 7 requests take ~0.5 s */
    ckube_client *c = new_client(qps10_burst2);
    double t0 = ctu_now();
    for (int i = 0; i < 7; i++) {
        ckube_response resp;
        assert_int_equal(do_get(c, "/echo", &resp, NULL), 0);
        ckube_response_free(&resp);
    }
    double dt = ctu_now() - t0;
    if (dt < 0.45 || dt > 1.5)
        fail_msg("7 requests at 10 qps burst 2 took %.3f s", dt);
    ckube_client_free(c);

    /* shared by 4 threads: 20 requests at 20/s, burst 1 take ~0.95 s */
    c = new_client(qps20_burst1);
    pthread_t th[4];
    t0 = ctu_now();
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, qps_worker, c);
    for (int i = 0; i < 4; i++)
        pthread_join(th[i], NULL);
    dt = ctu_now() - t0;
    if (dt < 0.9 || dt > 2.5)
        fail_msg("20 requests at 20 qps from 4 threads took %.3f s", dt);
    assert_int_equal(hits(), 7 + 20);
    ckube_client_free(c);

    /* qps < 0: no limit */
    c = new_client(NULL);
    t0 = ctu_now();
    for (int i = 0; i < 30; i++) {
        ckube_response resp;
        assert_int_equal(do_get(c, "/echo", &resp, NULL), 0);
        ckube_response_free(&resp);
    }
    assert_true(ctu_now() - t0 < 1.0);
    ckube_client_free(c);
}

/* ------------------------------------------------------------------ */
/* Authentication                                                      */
/* ------------------------------------------------------------------ */

static void static_token(ckube_config *cfg)
{
    cfg->bearer_token = "static-token";
    cfg->user_agent = "test-agent/1.0";
}

static void basic(ckube_config *cfg)
{
    cfg->username = "admin";
    cfg->password = "s3cret";
}

static void *reuse_worker(void *arg)
{
    for (int i = 0; i < 10; i++) {
        ckube_response resp;
        if (do_get(arg, "/echo", &resp, NULL) == 0)
            ckube_response_free(&resp);
    }
    return NULL;
}

/* Requests reuse connections: one thread, one connection; several
 * threads, at most one connection each. */
static void test_connection_reuse(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    reuse_worker(c);
    pthread_mutex_lock(&g_srv.mu);
    assert_int_equal(g_srv.nports, 1);
    g_srv.nports = 0;
    pthread_mutex_unlock(&g_srv.mu);
    pthread_t th[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&th[i], NULL, reuse_worker, c);
    for (int i = 0; i < 3; i++)
        pthread_join(th[i], NULL);
    pthread_mutex_lock(&g_srv.mu);
    assert_true(g_srv.nports >= 1 && g_srv.nports <= 3);
    pthread_mutex_unlock(&g_srv.mu);
    assert_int_equal(hits(), 40);
    ckube_client_free(c);
}

static void test_static_and_basic_auth(void **state)
{
    (void)state;
    ckube_client *c = new_client(static_token);
    ckube_response resp;
    assert_int_equal(do_get(c, "/echo", &resp, NULL), 0);
    json_t *j = json_loads(resp.body, 0, NULL);
    assert_string_equal(json_string_value(json_object_get(j, "userAgent")), "test-agent/1.0");
    assert_string_equal(json_string_value(json_object_get(j, "accept")), "application/json");
    json_decref(j);
    ckube_response_free(&resp);
    char *a = last_auth();
    assert_string_equal(a, "Bearer static-token");
    free(a);
    ckube_client_free(c);

    c = new_client(basic);
    assert_int_equal(do_get(c, "/echo", &resp, NULL), 0);
    ckube_response_free(&resp);
    a = last_auth();
    assert_string_equal(a, "Basic YWRtaW46czNjcmV0"); /* admin:s3cret */
    free(a);
    ckube_client_free(c);

    /* the default User-Agent */
    c = new_client(NULL);
    assert_int_equal(do_get(c, "/echo", &resp, NULL), 0);
    assert_non_null(strstr(resp.body, "\"userAgent\":\"ckube/"));
    ckube_response_free(&resp);
    a = last_auth();
    assert_string_equal(a, "");
    free(a);
    ckube_client_free(c);
}

static char *g_token_file;

static void token_file(ckube_config *cfg)
{
    cfg->bearer_token_file = g_token_file;
}

static void test_token_file_rotation(void **state)
{
    (void)state;
    char *dir = ctu_tmpdir("tokenfile");
    g_token_file = ctu_write(dir, "token", "tok-a\n");
    ckube_client *c = new_client(token_file);
    ckube_response resp;
    ckube_status *err = NULL;
    expect_auth("Bearer tok-a");
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 1);

    /* rotated: the cached token gets a 401, the file is re-read at once
     * and the request retried once */
    free(ctu_write(dir, "token", "tok-b"));
    expect_auth("Bearer tok-b");
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 3);

    /* a 401 that a re-read does not fix is returned, without a loop */
    expect_auth("Bearer something-else");
    assert_int_equal(do_get(c, "/auth", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_int_equal(err->code, 401);
    assert_string_equal(err->reason, "Unauthorized");
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(hits(), 4); /* the same token again: not retried */

    /* the periodic re-read (60 s in production, shortened here) */
    atomic_store(&ckube__token_file_period_ns, 200000000u);
    expect_auth("");
    free(ctu_write(dir, "token", "tok-c"));
    ctu_sleep_ms(250);
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    char *a = last_auth();
    assert_string_equal(a, "Bearer tok-c");
    free(a);
    /* an unreadable file keeps the last good token */
    char *p = ctu_fmt("%s/token", dir);
    unlink(p);
    free(p);
    ctu_sleep_ms(250);
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    a = last_auth();
    assert_string_equal(a, "Bearer tok-c");
    free(a);
    atomic_store(&ckube__token_file_period_ns, 60ull * 1000000000u);
    ckube_client_free(c);
    free(g_token_file);
    free(dir);
}

/* A token source: hands out "src-N", moves to the next N when told its
 * token was refused, or fails while `fail` is set. */
static struct {
    pthread_mutex_t mu;
    int n, calls, rejections, fail;
} g_src = {.mu = PTHREAD_MUTEX_INITIALIZER, .n = 1};

static char *src_token(void *ctx, const char *rejected, ckube_status **err)
{
    assert_ptr_equal(ctx, &g_src);
    pthread_mutex_lock(&g_src.mu);
    g_src.calls++;
    char cur[32];
    snprintf(cur, sizeof cur, "src-%d", g_src.n);
    if (rejected) {
        g_src.rejections++;
        if (!strcmp(rejected, cur))
            snprintf(cur, sizeof cur, "src-%d", ++g_src.n);
    }
    bool fail = g_src.fail;
    pthread_mutex_unlock(&g_src.mu);
    if (fail) {
        *err = ckube_status_new(0, NULL, "getting credentials: no token for you");
        return NULL;
    }
    return strdup(cur);
}

static void token_source(ckube_config *cfg)
{
    cfg->token_source = src_token;
    cfg->token_source_ctx = &g_src;
}

static void test_token_source(void **state)
{
    (void)state;
    ckube_client *c = new_client(token_source);
    ckube_response resp;
    ckube_status *err = NULL;
    /* asked for every request, its token sent */
    expect_auth("Bearer src-1");
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 2);
    assert_int_equal(g_src.calls, 2);
    assert_int_equal(g_src.rejections, 0);

    /* the server no longer takes it: 401, the source is told which token
     * was refused and gives another, the request is retried once */
    expect_auth("Bearer src-2");
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(hits(), 4);
    assert_int_equal(g_src.rejections, 1);
    char *a = last_auth();
    assert_string_equal(a, "Bearer src-2");
    free(a);

    /* a 401 the new token does not fix either is returned, no loop */
    expect_auth("Bearer never");
    assert_int_equal(do_get(c, "/auth", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_int_equal(err->code, 401);
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(hits(), 6);
    assert_int_equal(g_src.rejections, 2);

    /* a source without a token fails the request with its error, and
     * nothing is sent */
    g_src.fail = 1;
    assert_int_equal(do_get(c, "/auth", &resp, &err), -1);
    ckube_response_free(&resp);
    assert_non_null(err);
    assert_int_equal(err->code, 0);
    assert_string_equal(err->message, "getting credentials: no token for you");
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(hits(), 6);
    g_src.fail = 0;
    ckube_client_free(c);

    /* not with another way to a token */
    ckube_config cfg = {.host = "http://127.0.0.1:1",
                        .bearer_token = "static",
                        .token_source = src_token,
                        .token_source_ctx = &g_src};
    assert_null(ckube_client_new(&cfg, &err));
    assert_non_null(strstr(err->message, "a token source may not be set with a bearer token"));
    ckube_status_free(err);
    /* copies share the source */
    cfg.bearer_token = NULL;
    ckube_config *dup = ckube_config_dup(&cfg);
    assert_ptr_equal(dup->token_source, src_token);
    assert_ptr_equal(dup->token_source_ctx, &g_src);
    ckube_config_free(dup);
}

static const char *PLUGIN =
    "#!/bin/sh\n"
    "d=$(dirname \"$0\")\n"
    "n=$(cat \"$d/count\" 2>/dev/null || echo 0)\n"
    "n=$((n+1))\n"
    "echo $n > \"$d/count\"\n"
    "printf '%s' \"$KUBERNETES_EXEC_INFO\" > \"$d/info\"\n"
    "echo \"$1 $PLUGIN_ENV\" > \"$d/args\"\n"
    "exp=$(date -u -d \"@$(( $(date +%s) + 2 ))\" +%Y-%m-%dT%H:%M:%SZ)\n"
    "printf '{\"kind\":\"ExecCredential\",\"apiVersion\":\"client.authentication.k8s.io/v1\","
    "\"status\":{\"token\":\"exec-%s\",\"expirationTimestamp\":\"%s\"}}\\n' \"$n\" \"$exp\"\n";

static ckube_exec_config g_exec;

static void exec_auth(ckube_config *cfg)
{
    cfg->exec = &g_exec;
}

static int plugin_runs(const char *dir)
{
    char *p = ctu_fmt("%s/count", dir);
    FILE *f = fopen(p, "r");
    free(p);
    int n = 0;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        fclose(f);
    }
    return n;
}

static char *slurp(const char *dir, const char *name)
{
    char *p = ctu_fmt("%s/%s", dir, name);
    size_t n;
    char *d = ckube__read_file(p, &n);
    free(p);
    return d;
}

static void test_exec_plugin(void **state)
{
    (void)state;
    char *dir = ctu_tmpdir("exec");
    char *plugin = ctu_write(dir, "plugin.sh", PLUGIN);
    chmod(plugin, 0755);
    char *args[] = {"first-arg"};
    char *env[] = {"PLUGIN_ENV=from-config"};
    g_exec = (ckube_exec_config){.command = plugin,
                                 .args = args,
                                 .nargs = 1,
                                 .env = env,
                                 .nenv = 1,
                                 .api_version = "client.authentication.k8s.io/v1",
                                 .provide_cluster_info = true};
    ckube_client *c = new_client(exec_auth);
    assert_int_equal(plugin_runs(dir), 0); /* lazily, at the first request */
    ckube_response resp;
    ckube_status *err = NULL;
    expect_auth("Bearer exec-1");
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(plugin_runs(dir), 1);
    char *info = slurp(dir, "info");
    json_t *ij = json_loads(info, 0, NULL);
    assert_non_null(ij);
    assert_string_equal(ckube_obj_kind(ij), "ExecCredential");
    assert_string_equal(ckube_obj_api_version(ij), "client.authentication.k8s.io/v1");
    assert_true(json_is_false(ckube_json_get_path(ij, "spec.interactive")));
    char *host = ctu_fmt("http://127.0.0.1:%d", g_srv.port);
    assert_string_equal(json_string_value(ckube_json_get_path(ij, "spec.cluster.server")), host);
    free(host);
    json_decref(ij);
    free(info);
    char *a = slurp(dir, "args");
    assert_string_equal(a, "first-arg from-config\n");
    free(a);

    /* cached until it expires */
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(plugin_runs(dir), 1);

    /* expired (the plugin says 2 s): run again */
    ctu_sleep_ms(2100);
    expect_auth("Bearer exec-2");
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(plugin_runs(dir), 2);

    /* revoked before expiry: 401 -> plugin again -> one retry succeeds */
    expect_auth("Bearer exec-3");
    int h0 = hits();
    assert_int_equal(do_get(c, "/auth", &resp, &err), 0);
    ckube_response_free(&resp);
    assert_int_equal(plugin_runs(dir), 3);
    assert_int_equal(hits() - h0, 2);
    ckube_client_free(c);

    /* a failing plugin: the error says so; nothing is sent */
    char *failing = ctu_write(dir, "fail.sh", "#!/bin/sh\necho oops >&2\nexit 3\n");
    chmod(failing, 0755);
    g_exec.command = failing;
    c = new_client(exec_auth);
    h0 = hits();
    assert_int_equal(do_get(c, "/auth", &resp, &err), -1);
    assert_int_equal(hits(), h0);
    assert_int_equal(err->code, 0);
    char *want =
        ctu_fmt("getting credentials: exec: executable %s failed with exit code 3", failing);
    assert_string_equal(err->message, want);
    free(want);
    ckube_status_free(err);
    ckube_client_free(c);

    /* wrong output */
    char *bad =
        ctu_write(dir, "bad.sh",
                  "#!/bin/sh\necho '{\"kind\":\"ExecCredential\",\"apiVersion\":"
                  "\"client.authentication.k8s.io/v1beta1\",\"status\":{\"token\":\"x\"}}'\n");
    chmod(bad, 0755);
    g_exec.command = bad;
    c = new_client(exec_auth);
    assert_int_equal(do_get(c, "/auth", &resp, &err), -1);
    assert_non_null(strstr(err->message, "exec plugin is configured to use API version "
                                         "client.authentication.k8s.io/v1, plugin returned "
                                         "version client.authentication.k8s.io/v1beta1"));
    ckube_status_free(err);
    ckube_client_free(c);

    char *nostatus = ctu_write(dir, "nostatus.sh",
                               "#!/bin/sh\necho '{\"kind\":\"ExecCredential\",\"apiVersion\":"
                               "\"client.authentication.k8s.io/v1\",\"status\":{}}'\n");
    chmod(nostatus, 0755);
    g_exec.command = nostatus;
    c = new_client(exec_auth);
    assert_int_equal(do_get(c, "/auth", &resp, &err), -1);
    assert_non_null(strstr(err->message, "exec plugin didn't return a token or cert/key pair"));
    ckube_status_free(err);
    ckube_client_free(c);

    g_exec.command = "/nonexistent/kubelogin";
    g_exec.install_hint = "install kubelogin";
    c = new_client(exec_auth);
    assert_int_equal(do_get(c, "/auth", &resp, &err), -1);
    assert_string_equal(err->message, "getting credentials: exec: executable "
                                      "/nonexistent/kubelogin not found\n\ninstall kubelogin");
    ckube_status_free(err);
    ckube_client_free(c);
    free(plugin);
    free(failing);
    free(bad);
    free(nostatus);
    free(dir);
}

/* ------------------------------------------------------------------ */
/* Warnings                                                            */
/* ------------------------------------------------------------------ */

typedef struct warn_rec {
    int n;
    char texts[4][128];
} warn_rec;

static void on_warning(void *ud, const char *text)
{
    warn_rec *r = ud;
    if (r->n < 4)
        snprintf(r->texts[r->n], sizeof r->texts[0], "%s", text);
    r->n++;
}

static void test_warning_headers(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    warn_rec rec = {0};
    ckube_client_set_warning_handler(c, on_warning, &rec);
    ckube_response resp;
    assert_int_equal(do_get(c, "/warn", &resp, NULL), 0);
    assert_int_equal(resp.nwarnings, 2);
    assert_string_equal(resp.warnings[0], "first warning");
    assert_string_equal(resp.warnings[1], "second, with \"quotes\"");
    ckube_response_free(&resp);
    assert_int_equal(rec.n, 2);
    assert_string_equal(rec.texts[1], "second, with \"quotes\"");
    ckube_client_free(c);

    /* the parser alone */
    char **w = NULL;
    size_t n = 0;
    const char *v = "299 - \"a\\\\b\", 110 x \"stale\", 299 agent \"c\" \"date\",garbage";
    ckube__parse_warning_header(v, strlen(v), &w, &n);
    assert_int_equal(n, 2);
    assert_string_equal(w[0], "a\\b");
    assert_string_equal(w[1], "c");
    for (size_t i = 0; i < n; i++)
        free(w[i]);
    free(w);
    w = NULL;
    n = 0;
    ckube__parse_warning_header("299 - \"unterminated", 18, &w, &n);
    assert_int_equal(n, 0);
    free(w);
}

/* ------------------------------------------------------------------ */
/* Dynamic verbs: what goes on the wire                                */
/* ------------------------------------------------------------------ */

static json_t *echoed(json_t *out, const char *field)
{
    return json_object_get(out, field);
}

#define ECHO_STR(out, f) json_string_value(echoed((out), (f)))

static void test_dynamic_requests(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    ckube_status *err = NULL;
    json_t *out = NULL;
    ckube_gvr cm = {"", "v1", "configmaps"};
    ckube_gvr widgets = {"example.com", "v1", "widgets"};

    assert_int_equal(ckube_get(c, &widgets, "team a", "w/1", &out, &err), 0);
    assert_string_equal(ECHO_STR(out, "uri"),
                        "/apis/example.com/v1/namespaces/team%20a/widgets/w%2F1");
    json_decref(out);

    /* list options: selectors encoded, explicit 0 sent, "" RV absent */
    ckube_list_opts lo = {.label_selector = "app in (a,b),tier!=x",
                          .field_selector = "metadata.name=x",
                          .resource_version = "",
                          .limit = 5,
                          .continue_token = "abc==",
                          .timeout_seconds = {.set = true, .value = 0},
                          .allow_watch_bookmarks = true};
    assert_int_equal(ckube_list(c, &cm, NULL, &lo, &out, &err), 0);
    assert_string_equal(ECHO_STR(out, "uri"),
                        "/api/v1/configmaps?labelSelector=app%20in%20%28a%2Cb%29%2Ctier%21%3Dx"
                        "&fieldSelector=metadata.name%3Dx&limit=5&continue=abc%3D%3D"
                        "&timeoutSeconds=0&allowWatchBookmarks=true");
    json_decref(out);

    json_t *obj = json_pack("{s:s,s:s,s:{s:s},s:{s:i,s:b}}", "apiVersion", "v1", "kind",
                            "ConfigMap", "metadata", "name", "x", "data", "zero", 0, "off", 0);
    ckube_write_opts wo = {
        .field_manager = "tester", .dry_run = true, .field_validation = "Strict"};
    assert_int_equal(ckube_create(c, &cm, "ns", obj, &wo, &out, &err), 0);
    assert_string_equal(ECHO_STR(out, "method"), "POST");
    assert_string_equal(ECHO_STR(out, "uri"),
                        "/api/v1/namespaces/ns/configmaps?dryRun=All&fieldManager=tester"
                        "&fieldValidation=Strict");
    assert_string_equal(ECHO_STR(out, "contentType"), "application/json");
    json_t *sent = json_loads(ECHO_STR(out, "body"), 0, NULL);
    assert_true(json_equal(sent, obj)); /* 0 and false survive */
    json_decref(sent);
    json_decref(out);

    assert_int_equal(ckube_create(c, &cm, "ns", obj, NULL, NULL, &err), 0); /* out NULL */

    assert_int_equal(ckube_update(c, &cm, "ns", obj, NULL, &out, &err), 0);
    assert_string_equal(ECHO_STR(out, "method"), "PUT");
    assert_string_equal(ECHO_STR(out, "uri"), "/api/v1/namespaces/ns/configmaps/x");
    json_decref(out);
    assert_int_equal(ckube_update_status(c, &cm, "ns", obj, NULL, &out, &err), 0);
    assert_string_equal(ECHO_STR(out, "uri"), "/api/v1/namespaces/ns/configmaps/x/status");
    json_decref(out);

    struct {
        ckube_patch_type t;
        const char *ct;
    } patches[] = {
        {CKUBE_PATCH_JSON, "application/json-patch+json"},
        {CKUBE_PATCH_MERGE, "application/merge-patch+json"},
        {CKUBE_PATCH_STRATEGIC, "application/strategic-merge-patch+json"},
        {CKUBE_PATCH_APPLY, "application/apply-patch+yaml"},
    };
    ckube_write_opts apply = {.field_manager = "mgr", .force = true, .subresource = "status"};
    for (size_t i = 0; i < 4; i++) {
        assert_int_equal(
            ckube_patch(c, &cm, "ns", "x", patches[i].t, "{\"a\":1}", 7, &apply, &out, &err), 0);
        assert_string_equal(ECHO_STR(out, "method"), "PATCH");
        assert_string_equal(ECHO_STR(out, "contentType"), patches[i].ct);
        assert_string_equal(ECHO_STR(out, "body"), "{\"a\":1}");
        assert_string_equal(ECHO_STR(out, "uri"),
                            patches[i].t == CKUBE_PATCH_APPLY
                                ? "/api/v1/namespaces/ns/configmaps/x/status?fieldManager=mgr"
                                  "&force=true"
                                : "/api/v1/namespaces/ns/configmaps/x/status?fieldManager=mgr");
        json_decref(out);
    }
    assert_int_equal(ckube_patch(c, &cm, "ns", "x", 99, "{}", 2, NULL, &out, &err), -1);
    assert_int_equal(err->code, 0);
    ckube_status_free(err);
    err = NULL;

    ckube_delete_opts dopts = {.propagation_policy = "Foreground",
                               .grace_period_seconds = {.set = true, .value = 0},
                               .precondition_uid = "u-1",
                               .dry_run = true};
    assert_int_equal(ckube_delete(c, &cm, "ns", "x", &dopts, &out, &err), 0);
    assert_string_equal(ECHO_STR(out, "method"), "DELETE");
    json_t *body = json_loads(ECHO_STR(out, "body"), 0, NULL);
    json_t *want = json_pack("{s:s,s:s,s:i,s:{s:s},s:s,s:[s]}", "kind", "DeleteOptions",
                             "apiVersion", "v1", "gracePeriodSeconds", 0, "preconditions", "uid",
                             "u-1", "propagationPolicy", "Foreground", "dryRun", "All");
    assert_true(json_equal(body, want));
    json_decref(body);
    json_decref(want);
    json_decref(out);

    ckube_list_opts sel = {.label_selector = "app=x"};
    assert_int_equal(ckube_delete_collection(c, &cm, "ns", &sel, NULL, &err), 0);
    char *uri = NULL;
    pthread_mutex_lock(&g_srv.mu);
    uri = strdup(g_srv.last_uri);
    pthread_mutex_unlock(&g_srv.mu);
    assert_string_equal(uri, "/api/v1/namespaces/ns/configmaps?labelSelector=app%3Dx");
    free(uri);

    /* client-side argument errors */
    json_t *noname = json_pack("{s:{}}", "metadata");
    assert_int_equal(ckube_update(c, &cm, "ns", noname, NULL, &out, &err), -1);
    assert_null(out);
    assert_int_equal(err->code, 0);
    ckube_status_free(err);
    assert_int_equal(ckube_get(c, &cm, "ns", "", &out, &err), -1);
    ckube_status_free(err);
    json_decref(noname);
    json_decref(obj);

    char *p = ckube_resource_path(&cm, NULL, NULL, NULL);
    assert_string_equal(p, "/api/v1/configmaps");
    free(p);
    ckube_gvr ns = {NULL, "v1", "namespaces"};
    p = ckube_resource_path(&ns, NULL, "kube-system", "finalize");
    assert_string_equal(p, "/api/v1/namespaces/kube-system/finalize");
    free(p);
    ckube_client_free(c);
}

static ckube_client *prefixed_client(const char *prefix)
{
    char host[96];
    snprintf(host, sizeof host, "http://127.0.0.1:%d%s", g_srv.port, prefix);
    ckube_config cfg = {.qps = -1, .max_retries = 0, .host = host};
    ckube_status *err = NULL;
    ckube_client *c = ckube_client_new(&cfg, &err);
    if (!c)
        fail_msg("ckube_client_new: %s", err && err->message ? err->message : "?");
    return c;
}

/* "group/version resource kind singular ns|cluster pref|-" per item. */
static char *describe(const ckube_api_resource_list *l)
{
    char *out = strdup("");
    for (size_t i = 0; i < l->n; i++) {
        const ckube_api_resource *r = &l->items[i];
        char *next =
            ctu_fmt("%s%s/%s %s %s %s %s %s\n", out, r->group, r->version, r->resource, r->kind,
                    r->singular, r->namespaced ? "ns" : "cluster", r->preferred ? "pref" : "-");
        free(out);
        out = next;
    }
    return out;
}

/* Legacy and aggregated discovery give the same list; aggregated takes
 * two requests where legacy takes one per group-version more. */
static void test_discovery_forms(void **state)
{
    (void)state;
    const char *want = "/v1 configmaps ConfigMap configmap ns pref\n"
                       "/v1 pods/status Pod pod ns pref\n"
                       "example.com/v1 widgets Widget widget cluster pref\n"
                       "example.com/v1beta1 widgets Widget widget cluster -\n";
    const char *want_nosub = "/v1 configmaps ConfigMap configmap ns pref\n"
                             "example.com/v1 widgets Widget widget cluster pref\n"
                             "example.com/v1beta1 widgets Widget widget cluster -\n";
    const char *prefixes[] = {"/legacy", "/agg"};
    const int requests[] = {5, 2};
    for (int k = 0; k < 2; k++) {
        ckube_client *c = prefixed_client(prefixes[k]);
        ckube_api_resource_list *l = NULL;
        ckube_status *err = NULL;
        reset(NULL);
        assert_int_equal(ckube_discovery_resources(c, true, &l, &err), 0);
        assert_null(err);
        assert_int_equal(hits(), requests[k]);
        char *got = describe(l);
        /* legacy names no singular for a subresource: the kind's, lowercased */
        assert_string_equal(got, want);
        free(got);
        assert_int_equal(l->items[0].nshort_names, 1);
        assert_string_equal(l->items[0].short_names[0], "cm");
        assert_true(ckube_api_resource_has_verb(&l->items[1], "get"));
        ckube_api_resource_list_free(l);
        assert_int_equal(ckube_discovery_resources(c, false, &l, &err), 0);
        got = describe(l);
        assert_string_equal(got, want_nosub);
        free(got);
        ckube_api_resource_list_free(l);
        ckube_client_free(c);
    }
    /* a Stale group-version fails the whole call (all or nothing) */
    ckube_client *c = prefixed_client("/stale");
    ckube_api_resource_list *l = NULL;
    ckube_status *err = NULL;
    assert_int_equal(ckube_discovery_resources(c, false, &l, &err), -1);
    assert_null(l);
    assert_non_null(err);
    assert_non_null(strstr(err->message, "stale GroupVersion discovery: metrics.example.com/v1"));
    ckube_status_free(err);
    ckube_client_free(c);
}

static void test_list_all_paging(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    ckube_gvr cm = {"", "v1", "configmaps"};
    json_t *out = NULL;
    ckube_status *err = NULL;
    ckube_list_opts lo = {.limit = 2, .resource_version = "0"};
    assert_int_equal(ckube_list_all(c, &cm, "page", &lo, &out, &err), 0);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 5);
    assert_string_equal(json_string_value(ckube_json_get_path(out, "items[4].metadata.name")),
                        "cm-4");
    assert_null(ckube_json_get_path(out, "metadata.continue"));
    assert_string_equal(json_string_value(ckube_json_get_path(out, "metadata.resourceVersion")),
                        "100");
    assert_int_equal(hits(), 3);
    json_decref(out);

    /* continue token expired mid-way: one full list instead */
    reset(NULL);
    pthread_mutex_lock(&g_srv.mu);
    g_srv.expire_continue = true;
    pthread_mutex_unlock(&g_srv.mu);
    assert_int_equal(ckube_list_all(c, &cm, "page", &lo, &out, &err), 0);
    assert_int_equal(json_array_size(json_object_get(out, "items")), 5);
    assert_int_equal(hits(), 3);
    json_decref(out);
    ckube_client_free(c);
}

/* ------------------------------------------------------------------ */
/* Watch                                                               */
/* ------------------------------------------------------------------ */

static ckube_watch *open_watch(ckube_client *c, const char *ns)
{
    ckube_gvr cm = {"", "v1", "configmaps"};
    ckube_watch *w = NULL;
    ckube_status *err = NULL;
    if (ckube_watch_open(c, &cm, ns, NULL, &w, &err) != 0)
        fail_msg("watch_open(%s): %s", ns, err && err->message ? err->message : "?");
    return w;
}

static void test_watch_stream(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    warn_rec rec = {0};
    ckube_client_set_warning_handler(c, on_warning, &rec);
    ckube_watch *w = open_watch(c, "split");
    assert_int_equal(rec.n, 1); /* headers are in when open returns */
    ckube_watch_event_type t;
    json_t *o = NULL;
    ckube_status *err = NULL;

    assert_int_equal(ckube_watch_next(w, &t, &o, &err), 1);
    assert_int_equal(t, CKUBE_WATCH_ADDED);
    assert_string_equal(ckube_obj_name(o), "a");
    assert_string_equal(json_string_value(ckube_json_get_path(o, "data.k")), "}{\"]\\");
    json_decref(o);

    static const ckube_watch_event_type want[] = {CKUBE_WATCH_MODIFIED, CKUBE_WATCH_BOOKMARK,
                                                  CKUBE_WATCH_DELETED, CKUBE_WATCH_ERROR};
    for (int i = 0; i < 4; i++) {
        assert_int_equal(ckube_watch_next(w, &t, &o, &err), 1);
        assert_int_equal(t, want[i]);
        if (t == CKUBE_WATCH_ERROR) {
            ckube_status *st = ckube_status_from_json(o, 0);
            assert_int_equal(st->code, 410);
            ckube_status_free(st);
        }
        if (t == CKUBE_WATCH_BOOKMARK)
            assert_string_equal(ckube_obj_resource_version(o), "42");
        json_decref(o);
    }
    /* clean end of stream, then 0 forever */
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), 0);
    assert_null(o);
    assert_null(err);
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), 0);
    ckube_watch_close(w);

    assert_string_equal(ckube_watch_event_type_name(CKUBE_WATCH_BOOKMARK), "BOOKMARK");
    assert_int_equal(ckube_watch_event_type_parse("DELETED"), CKUBE_WATCH_DELETED);
    assert_int_equal(ckube_watch_event_type_parse("nope"), 0);

    /* the request: watch=true plus options */
    ckube_gvr cm = {"", "v1", "configmaps"};
    ckube_list_opts lo = {
        .resource_version = "7", .timeout_seconds = {true, 300}, .allow_watch_bookmarks = true};
    assert_int_equal(ckube_watch_open(c, &cm, "echo", &lo, &w, &err), 0);
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), -1); /* the echo is not an event */
    assert_non_null(err);
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), 0);
    ckube_watch_close(w);
    pthread_mutex_lock(&g_srv.mu);
    assert_string_equal(g_srv.last_uri, "/api/v1/namespaces/echo/configmaps?watch=true"
                                        "&resourceVersion=7&timeoutSeconds=300"
                                        "&allowWatchBookmarks=true");
    pthread_mutex_unlock(&g_srv.mu);
    ckube_client_free(c);
}

static void test_watch_errors(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    ckube_gvr cm = {"", "v1", "configmaps"};
    ckube_watch *w = NULL;
    ckube_status *err = NULL;
    ckube_watch_event_type t;
    json_t *o = NULL;

    /* non-2xx at open: the server's Status */
    assert_int_equal(ckube_watch_open(c, &cm, "gone", NULL, &w, &err), -1);
    assert_null(w);
    assert_int_equal(err->code, 410);
    assert_string_equal(err->reason, "Expired");
    assert_string_equal(err->message, "too old resource version: 1 (50)");
    assert_true(ckube_is_gone(err));
    ckube_status_free(err);
    err = NULL;

    w = open_watch(c, "bad");
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), 1);
    json_decref(o);
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), -1);
    assert_non_null(strstr(err->message, "is not a sequence of JSON objects"));
    ckube_status_free(err);
    err = NULL;
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), 0);
    ckube_watch_close(w);

    w = open_watch(c, "partial");
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), -1);
    assert_non_null(strstr(err->message, "ended inside an event"));
    ckube_status_free(err);
    err = NULL;
    ckube_watch_close(w);

    w = open_watch(c, "unknown");
    assert_int_equal(ckube_watch_next(w, &t, &o, &err), -1);
    assert_string_equal(err->message, "got invalid watch event type: RENAMED");
    ckube_status_free(err);
    ckube_watch_close(w);

    /* closing an unread watch frees everything */
    w = open_watch(c, "split");
    ckube_watch_close(w);
    ckube_client_free(c);

    /* no response headers in time: open gives up */
    c = new_client(short_timeout);
    double t0 = ctu_now();
    assert_int_equal(ckube_watch_open(c, &cm, "slowheaders", NULL, &w, &err), -1);
    assert_true(ctu_now() - t0 < 0.9);
    assert_int_equal(err->code, 0);
    assert_non_null(strstr(err->message, "no answer within 200 ms"));
    ckube_status_free(err);
    ckube_client_free(c);
    ctu_sleep_ms(1000); /* let the late reply go out */
}

typedef struct blocked {
    ckube_watch *w;
    int rc;
    double returned_at;
} blocked;

static void *next_thread(void *arg)
{
    blocked *b = arg;
    ckube_watch_event_type t;
    json_t *o = NULL;
    b->rc = ckube_watch_next(b->w, &t, &o, NULL);
    b->returned_at = ctu_now();
    json_decref(o);
    return NULL;
}

static void test_watch_stop(void **state)
{
    (void)state;
    ckube_client *c = new_client(NULL);
    /* stop from another thread while next() is blocked */
    blocked b = {.w = open_watch(c, "hang"), .rc = 99};
    pthread_t th;
    pthread_create(&th, NULL, next_thread, &b);
    ctu_sleep_ms(300);
    double stopped_at = ctu_now();
    ckube_watch_stop(b.w);
    ckube_watch_stop(b.w); /* any number of times */
    pthread_join(th, NULL);
    assert_int_equal(b.rc, 0);
    assert_true(b.returned_at - stopped_at < 0.5);
    ckube_watch_event_type t;
    json_t *o = NULL;
    assert_int_equal(ckube_watch_next(b.w, &t, &o, NULL), 0);
    ckube_watch_close(b.w);

    /* stop before next: next returns 0 at once */
    ckube_watch *w = open_watch(c, "hang");
    ckube_watch_stop(w);
    double t0 = ctu_now();
    assert_int_equal(ckube_watch_next(w, &t, &o, NULL), 0);
    assert_true(ctu_now() - t0 < 0.5);
    ckube_watch_close(w);

    /* close without stop on a live stream */
    w = open_watch(c, "hang");
    ckube_watch_close(w);
    ckube_client_free(c);
}

/* ------------------------------------------------------------------ */
/* TLS against openssl s_server                                        */
/* ------------------------------------------------------------------ */

static char *g_tls_dir;
static pid_t g_tls_pid;
static int g_tls_port;

static int tls_setup(void **state)
{
    (void)state;
    if (system("command -v openssl >/dev/null 2>&1") != 0)
        return 0;
    g_tls_dir = ctu_tmpdir("tls");
    char *cmd =
        ctu_fmt("cd '%s' && K='-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes' && "
                "openssl req -x509 $K -keyout ca.key -out ca.crt -days 2 -subj /CN=test-ca && "
                "openssl req $K -keyout server.key -out server.csr -subj /CN=api.internal && "
                "printf 'subjectAltName=DNS:api.internal,DNS:localhost\\n' > san.ext && "
                "openssl x509 -req -in server.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
                "-out server.crt -days 2 -extfile san.ext && "
                "openssl req $K -keyout client.key -out client.csr -subj /CN=client && "
                "openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial "
                "-out client.crt -days 2",
                g_tls_dir);
    char *quiet = ctu_fmt("(%s) >/dev/null 2>&1", cmd);
    int rc = system(quiet);
    free(cmd);
    free(quiet);
    if (rc != 0)
        return -1;
    g_tls_port = closed_port();
    char *accept = ctu_fmt("127.0.0.1:%d", g_tls_port);
    char *cert = ctu_fmt("%s/server.crt", g_tls_dir), *key = ctu_fmt("%s/server.key", g_tls_dir),
         *ca = ctu_fmt("%s/ca.crt", g_tls_dir);
    char *argv[] = {"openssl", "s_server", "-quiet", "-accept", accept, "-cert", cert, "-key",
                    key,       "-CAfile",  ca,       "-Verify", "1",    "-www",  NULL};
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
    extern char **environ;
    rc = posix_spawnp(&g_tls_pid, "openssl", &fa, NULL, argv, environ);
    posix_spawn_file_actions_destroy(&fa);
    free(accept);
    free(cert);
    free(key);
    free(ca);
    if (rc != 0)
        return -1;
    /* wait until it listens */
    for (int i = 0; i < 100; i++) {
        int fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sin = {.sin_family = AF_INET,
                                  .sin_port = htons((uint16_t)g_tls_port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        int ok = connect(fd, (struct sockaddr *)&sin, sizeof sin);
        close(fd);
        if (ok == 0)
            return 0;
        ctu_sleep_ms(50);
    }
    return -1;
}

static int tls_teardown(void **state)
{
    (void)state;
    if (g_tls_pid > 0) {
        kill(g_tls_pid, SIGTERM);
        waitpid(g_tls_pid, NULL, 0);
    }
    free(g_tls_dir);
    return 0;
}

static char *tls_file(const char *name)
{
    return ctu_fmt("%s/%s", g_tls_dir, name);
}

/* GET / on the TLS server with cfg; returns 0/-1 and frees everything. */
static int tls_get(ckube_config *cfg, char **errmsg)
{
    ckube_status *err = NULL;
    ckube_client *c = ckube_client_new(cfg, &err);
    if (!c) {
        *errmsg = strdup(err->message);
        ckube_status_free(err);
        return -1;
    }
    ckube_response resp;
    ckube_request rq = {.method = "GET", .path = "/", .accept = "text/html"};
    int rc = ckube_client_do(c, &rq, &resp, &err);
    if (rc == 0 && (!resp.body || !strstr(resp.body, "s_server")))
        rc = -2;
    ckube_response_free(&resp);
    *errmsg = err && err->message ? strdup(err->message) : NULL;
    ckube_status_free(err);
    ckube_client_free(c);
    return rc;
}

static void test_tls(void **state)
{
    (void)state;
    if (!g_tls_pid)
        skip();
    char *host_ip = ctu_fmt("https://127.0.0.1:%d", g_tls_port);
    char *host_name = ctu_fmt("https://localhost:%d", g_tls_port);
    char *ca = tls_file("ca.crt"), *crt = tls_file("client.crt"), *key = tls_file("client.key");
    char *msg = NULL;

    /* files */
    ckube_config cfg = {
        .host = host_name, .ca_file = ca, .cert_file = crt, .key_file = key, .qps = -1};
    if (tls_get(&cfg, &msg) != 0)
        fail_msg("TLS with files: %s", msg ? msg : "?");
    free(msg);

    /* data (PEM bytes) */
    size_t calen, crtlen, keylen;
    char *cad = ckube__read_file(ca, &calen), *crtd = ckube__read_file(crt, &crtlen),
         *keyd = ckube__read_file(key, &keylen);
    cfg = (ckube_config){.host = host_name,
                         .ca_data = cad,
                         .ca_data_len = calen,
                         .cert_data = crtd,
                         .cert_data_len = crtlen,
                         .key_data = keyd,
                         .key_data_len = keylen,
                         .qps = -1};
    if (tls_get(&cfg, &msg) != 0)
        fail_msg("TLS with data: %s", msg ? msg : "?");
    free(msg);

    /* the certificate does not name 127.0.0.1 ... */
    cfg.host = host_ip;
    assert_int_equal(tls_get(&cfg, &msg), -1);
    assert_non_null(strstr(msg, host_ip));
    free(msg);
    /* ... but tls_server_name makes it verify as api.internal */
    cfg.tls_server_name = "api.internal";
    if (tls_get(&cfg, &msg) != 0)
        fail_msg("TLS with tls_server_name: %s", msg ? msg : "?");
    free(msg);

    /* no CA: the system roots do not know our CA */
    cfg = (ckube_config){.host = host_name, .cert_file = crt, .key_file = key, .qps = -1};
    assert_int_equal(tls_get(&cfg, &msg), -1);
    assert_non_null(strstr(msg, "Get \"https://localhost:"));
    free(msg);
    /* ... unless verification is off */
    cfg.insecure_skip_tls_verify = true;
    if (tls_get(&cfg, &msg) != 0)
        fail_msg("TLS insecure: %s", msg ? msg : "?");
    free(msg);

    /* the server requires a client certificate */
    cfg = (ckube_config){.host = host_name, .ca_file = ca, .qps = -1};
    assert_int_equal(tls_get(&cfg, &msg), -1);
    free(msg);

    free(cad);
    free(crtd);
    free(keyd);
    free(ca);
    free(crt);
    free(key);
    free(host_ip);
    free(host_name);
}

int main(void)
{
    if (getenv("CKUBE_TEST_V"))
        ckube_log_set_verbosity(atoi(getenv("CKUBE_TEST_V")));
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup(test_status_body_with_causes, reset),
        cmocka_unit_test_setup(test_non_status_bodies, reset),
        cmocka_unit_test_setup(test_transport_error, reset),
        cmocka_unit_test_setup(test_request_timeout, reset),
        cmocka_unit_test_setup(test_retry_after, reset),
        cmocka_unit_test_setup(test_retry_exhausted, reset),
        cmocka_unit_test_setup(test_dropped_connection, reset),
        cmocka_unit_test_setup(test_qps_limiter, reset),
        cmocka_unit_test_setup(test_connection_reuse, reset),
        cmocka_unit_test_setup(test_static_and_basic_auth, reset),
        cmocka_unit_test_setup(test_token_file_rotation, reset),
        cmocka_unit_test_setup(test_token_source, reset),
        cmocka_unit_test_setup(test_exec_plugin, reset),
        cmocka_unit_test_setup(test_warning_headers, reset),
        cmocka_unit_test_setup(test_dynamic_requests, reset),
        cmocka_unit_test_setup(test_discovery_forms, reset),
        cmocka_unit_test_setup(test_list_all_paging, reset),
        cmocka_unit_test_setup(test_watch_stream, reset),
        cmocka_unit_test_setup(test_watch_errors, reset),
        cmocka_unit_test_setup(test_watch_stop, reset),
        cmocka_unit_test_setup_teardown(test_tls, tls_setup, tls_teardown),
    };
    return cmocka_run_group_tests(tests, srv_start, srv_stop);
}
