/* resolver.h - where a Service is served: an address of its Endpoints
 * for one of its ports, from the watch cache, as kube-apiserver's
 * endpoint service resolver answers for admission webhooks and
 * aggregated API servers (--enable-aggregator-routing): ckube runs no
 * kube-proxy, so a ClusterIP would lead nowhere. */
#ifndef CKUBE_APISERVER_RESOLVER_RESOLVER_H
#define CKUBE_APISERVER_RESOLVER_RESOLVER_H

#include <stddef.h>

#include "apiserver/cacher/cacher.h"

/* The first ready address of Service ns/name's Endpoints for the
 * service port `svc_port` (matched by the port's name, as upstream):
 * the IP (malloc'd) and the endpoint's port in *port. NULL with err
 * (n bytes) in upstream's words: `service "NAME" not found`, `no service
 * port 443 found for service "NAME"`, `endpoints "NAME" not found`, `no
 * endpoints available for service "NAME"`. */
char *service_resolve(cacher *c, const char *ns, const char *name, int svc_port, int *port,
                      char *err, size_t n);

#endif
