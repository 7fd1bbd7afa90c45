/* aggregator.h - API aggregation (issue #25 item 3; kube-aggregator in
 * kube-apiserver): requests for a group/version that an APIService hands
 * to another server are proxied there, and each such APIService's
 * Available condition is kept.
 *
 * The proxy (aggregator_proxy), for /apis/GROUP/VERSION/... of an
 * APIService with a service:
 *   - answers upstream's 503 "service unavailable" (plain text) while
 *     the APIService is not Available or its Service has no endpoint;
 *   - else sends the request to an endpoint of the Service over TLS
 *     (verified against caBundle for NAME.NAMESPACE.svc, or not at all
 *     with insecureSkipTLSVerify), presenting the front-proxy client
 *     certificate, with the authenticated user as X-Remote-User,
 *     X-Remote-Uid, X-Remote-Group (one per group) and
 *     X-Remote-Extra-KEY (the key percent-encoded) headers, and without
 *     the client's own credentials (Authorization, Impersonate-*);
 *   - streams the answer back as it comes (watches included), pausing
 *     the backend while the client is slow.
 *
 * Availability (upstream's remote AvailableConditionController): every
 * 30 s, and soon after an APIService, Service or Endpoints changes, each
 * APIService with a service is checked: the Service, its port, its
 * endpoints, then GET /apis/GROUP/VERSION on an endpoint within 5 s (as
 * system:kube-aggregator in system:masters). The condition (reasons
 * Passed, ServiceNotFound, ServicePortError, EndpointsNotFound,
 * MissingEndpoints, FailedDiscoveryCheck with upstream's messages) is
 * written to the APIService's status when it changes. The resource list
 * the check read is kept for discovery (aggregator_discovery).
 *
 * Threading: the proxy runs on the request's loop; the checks run on the
 * loop aggregator_start is given. The discovery snapshot is shared under
 * a mutex. */
#ifndef CKUBE_APISERVER_AGGREGATOR_AGGREGATOR_H
#define CKUBE_APISERVER_AGGREGATOR_AGGREGATOR_H

#include <jansson.h>
#include <stdbool.h>

#include "apiserver/endpoints/request/context.h"

typedef struct aggregator aggregator;

/* The server's aggregator. The proxy's client certificate and key come
 * from cfg (read now; NULL files: proxied requests carry no client
 * certificate, which extension servers refuse). */
aggregator *aggregator_new(apiserver *s);
void aggregator_free(aggregator *a);

/* Starts the availability checks on loop lp (its thread). */
void aggregator_start(aggregator *a, loop *lp);
/* Stops them (on lp's thread, or after it ended). */
void aggregator_stop(aggregator *a);

/* Proxies rc when its group/version belongs to another server: true when
 * it took the request (it replies and frees rc), false when it is this
 * server's. */
bool aggregator_proxy(aggregator *a, req_ctx *rc);

/* Proxies a request for /openapi/v3/apis/GROUP/VERSION (its path and
 * query as the client sent them) to the server an APIService names for
 * group/version, as aggregator_proxy: true when it took the request. */
bool aggregator_proxy_openapi(aggregator *a, req_ctx *rc, const char *group, const char *version);

/* The OpenAPI v3 documents of Available APIServices' servers, for the
 * server's /openapi/v3: "apis/GROUP/VERSION" -> {"serverRelativeURL":
 * the URL the server gives, /openapi/v3/apis/GROUP/VERSION?hash=...}
 * (a new object). Read from each server's /openapi/v3 after each
 * passed availability check (upstream's aggregator downloads them
 * likewise); a server that publishes none is left out. */
json_t *aggregator_openapi_v3_paths(aggregator *a);

/* What Available APIServices with a service serve, for discovery: an
 * array of {"group", "version", "groupPriorityMinimum",
 * "versionPriority", "resources": APIResourceList's resources or null}
 * (a new reference; the order is upstream's: group priority, then
 * version priority, both descending). */
json_t *aggregator_discovery(aggregator *a);

#endif
