/* health.c - /healthz, /livez and /readyz as kube-apiserver answers them:
 *
 *   GET /readyz                 "ok", or 500 listing every check when one fails
 *   GET /readyz?verbose         "[+]ping ok" ... "readyz check passed"
 *   GET /readyz?exclude=NAME    leaves a check out (repeatable)
 *   GET /readyz/NAME            one check: "ok" or 500; unknown NAME: 404
 *
 * Checks: ping (the server answers), log (logging works), storage (the
 * store answers, ckube's counterpart of upstream's etcd check) and, for
 * /readyz only, shutdown (fails from the moment a shutdown begins, through
 * --shutdown-delay-duration and the drain, so a load balancer stops
 * sending the server requests while it still answers them). */
#include <stdlib.h>
#include <string.h>

#include "apiserver/server/apiserver.h"
#include "common/text.h"

typedef struct check {
    const char *name;
    bool ready_only; /* /readyz only */
    /* NULL when healthy, else why not (static) */
    const char *(*run)(apiserver *srv);
} check;

static const char *check_ping(apiserver *srv)
{
    (void)srv;
    return NULL;
}

static const char *check_storage(apiserver *srv)
{
    return storage_current_rev(srv->st) < 0 ? "the store does not answer" : NULL;
}

static const char *check_shutdown(apiserver *srv)
{
    return atomic_load(&srv->shutting_down) || atomic_load(&srv->stopping)
               ? "process is shutting down"
               : NULL;
}

static const check checks[] = {
    {"ping", false, check_ping},
    {"log", false, check_ping},
    {"storage", false, check_storage},
    {"shutdown", true, check_shutdown},
};

static bool excluded(req_ctx *rc, const char *name)
{
    struct evkeyval *kv;
    TAILQ_FOREACH(kv, &rc->query, next)
    {
        if (!strcmp(kv->key, "exclude") && !strcmp(kv->value, name))
            return true;
    }
    return false;
}

bool handle_health(req_ctx *rc, const char *path)
{
    const char *endpoints[] = {"healthz", "livez", "readyz"};
    const char *endpoint = NULL, *one = NULL;
    for (size_t i = 0; i < 3 && !endpoint; i++) {
        size_t n = strlen(endpoints[i]);
        if (path[0] == '/' && !strncmp(path + 1, endpoints[i], n) &&
            (!path[n + 1] || path[n + 1] == '/')) {
            endpoint = endpoints[i];
            one = path[n + 1] == '/' ? path + n + 2 : NULL;
        }
    }
    if (!endpoint)
        return false;
    bool ready = !strcmp(endpoint, "readyz");
    /* The verbose form, built whole; terse answers are "ok". */
    ckube__strbuf list = {0};
    bool ok = true, found = false;
    for (size_t i = 0; i < sizeof checks / sizeof *checks; i++) {
        const check *c = &checks[i];
        if ((c->ready_only && !ready) || (one && strcmp(one, c->name)) ||
            (!one && excluded(rc, c->name)))
            continue;
        found = true;
        bool passed = !c->run(rc->srv);
        ok &= passed;
        ckube__sb_printf(&list, passed ? "[+]%s ok\n" : "[-]%s failed: reason withheld\n", c->name);
    }
    if (one && !found) {
        free(ckube__sb_take(&list));
        reply_status(rc, ckube_status_new(404, CKUBE_REASON_NOT_FOUND,
                                          "the server could not find the requested resource"));
        return true;
    }
    if (!one)
        ckube__sb_printf(&list, "%s check %s\n", endpoint, ok ? "passed" : "failed");
    char *text = ckube__sb_take(&list);
    /* Terse unless asked (not for one check), or failing: then the list
     * says what failed. */
    bool verbose = !ok || (!one && req_query(rc, "verbose"));
    const char *body = verbose && text ? text : ok ? "ok" : "internal server error";
    httpd_add_header(rc->req, "X-Content-Type-Options", "nosniff");
    reply_raw(rc, ok ? 200 : 500, "text/plain; charset=utf-8", body, strlen(body));
    free(text);
    return true;
}
