/* discovery.h - API discovery: legacy (/api, /apis, /api/v1, /apis/G/V)
 * and aggregated (apidiscovery.k8s.io v2 and v2beta1). */
#ifndef CKUBE_APISERVER_ENDPOINTS_DISCOVERY_DISCOVERY_H
#define CKUBE_APISERVER_ENDPOINTS_DISCOVERY_DISCOVERY_H

#include "apiserver/endpoints/request/context.h"

/* Answers a discovery path; false (nothing sent) when it is not one. */
bool handle_discovery(req_ctx *rc);
/* /api or /apis: where aggregated discovery (APIGroupDiscoveryList) is
 * served. */
bool discovery_aggregated_path(const request_info *ri);

#endif
