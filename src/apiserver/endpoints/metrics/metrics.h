/* metrics.h - the server's Prometheus metrics, served at /metrics, with
 * kube-apiserver's names and labels. */
#ifndef CKUBE_APISERVER_ENDPOINTS_METRICS_METRICS_H
#define CKUBE_APISERVER_ENDPOINTS_METRICS_METRICS_H

#include "apiserver/endpoints/request/context.h"
#include "ckube/metrics.h"

/* apimetrics_request_done counts a finished request (the server hooks it
 * to req_ctx_free; nothing when no reply started); apimetrics_watch_started
 * holds the long-running gauge up until then (hooked to req_long_running).
 * The per-loop cache is the loop's own (no lock). */
apimetrics *apimetrics_new(apiserver *srv);
void apimetrics_free(apimetrics *m);
/* The registry /metrics serves: lower rooms register their own families
 * there (admission_set_metrics). Borrowed; lives as long as m. */
ckube_metrics_registry *apimetrics_registry(apimetrics *m);
apimetrics_cache *apimetrics_cache_new(void);
void apimetrics_cache_free(apimetrics_cache *c);
void apimetrics_request_done(req_ctx *rc);
void apimetrics_watch_started(req_ctx *rc);
void handle_metrics(req_ctx *rc);

#endif
