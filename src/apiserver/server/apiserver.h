/* apiserver.h - the API server's life cycle: configuration, listening
 * sockets and loop threads, request dispatch, graceful termination.
 * What requests run in is endpoints/request/context.h. */
#ifndef CKUBE_APISERVER_SERVER_APISERVER_H
#define CKUBE_APISERVER_SERVER_APISERVER_H

#include "apiserver/endpoints/request/context.h"

/* Life cycle. apiserver_start binds and starts the loops; apiserver_stop
 * may be called from any thread (it only signals); apiserver_wait blocks
 * until stopped; apiserver_free joins and frees. On failure apiserver_new
 * returns NULL and apiserver_start -1, each setting *err (when err is
 * given) to a message the caller frees. */
apiserver *apiserver_new(const apiserver_config *cfg, char **err);
int apiserver_start(apiserver *s, char **err);
void apiserver_stop(apiserver *s);
void apiserver_wait(apiserver *s);

/* Graceful shutdown, in kube-apiserver's order. apiserver_shutdown_begin
 * makes /readyz fail at once (its "shutdown" check) while every request
 * is still served, so load balancers move away during the delay that
 * follows (--shutdown-delay-duration). apiserver_drain_begin then closes
 * the listeners (new connections are refused) and answers what comes in
 * on open connections with "Connection: close"; the caller waits, as long
 * as it allows, for apiserver_inflight (the requests in flight that are
 * not long-running: a write waiting for its commit, a list being
 * streamed) to reach 0. apiserver_stop then ends the watches. Callable
 * from any thread but the loops', in this order, before apiserver_stop. */
void apiserver_shutdown_begin(apiserver *s);
void apiserver_drain_begin(apiserver *s);
long apiserver_inflight(apiserver *s);

void apiserver_free(apiserver *s);

/* Bootstrap objects (default namespaces) created at first start
 * (bootstrap.c). */
int apiserver_bootstrap(apiserver *s);

/* /healthz, /livez, /readyz and their checks (health.c); false: not one. */
bool handle_health(req_ctx *rc, const char *path);
/* The health checks' prober of a shared store (health.c): started with the
 * loops, stopped before the storage closes. Nothing on an unshared store. */
void health_prober_start(apiserver *s);
void health_prober_stop(apiserver *s);

#endif
