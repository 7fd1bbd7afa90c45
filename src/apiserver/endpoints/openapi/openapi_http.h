/* openapi_http.h - /openapi/v2 and /openapi/v3 over HTTP: the documents
 * openapi.h builds, cached until the registry changes. */
#ifndef CKUBE_APISERVER_ENDPOINTS_OPENAPI_OPENAPI_HTTP_H
#define CKUBE_APISERVER_ENDPOINTS_OPENAPI_OPENAPI_HTTP_H

#include "apiserver/endpoints/request/context.h"

/* Answers an /openapi/ path; false (nothing sent) when it names no
 * document. */
bool handle_openapi(req_ctx *rc, const char *path);

#endif
