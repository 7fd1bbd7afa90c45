/* partial.h - PartialObjectMetadata answers (client-go's metadata
 * client): cut from the stored bytes, or from a write's answer. */
#ifndef CKUBE_APISERVER_ENDPOINTS_REQUEST_PARTIAL_H
#define CKUBE_APISERVER_ENDPOINTS_REQUEST_PARTIAL_H

#include "apiserver/endpoints/request/context.h"

/* partial_append writes the object's PartialObjectMetadata form, from its
 * stored bytes, to out; partial_refused is the 406 for a list asked for as
 * one object, or an object asked for as a list (NULL when the request is
 * consistent; handle_resource asks it once per request). */
void partial_append(struct evbuffer *out, const req_ctx *rc, const cobj *o);
ckube_status *partial_refused(const req_ctx *rc, bool is_list);
/* A write's answer in PartialObjectMetadata form: takes body, returns
 * the new body (body itself when it is a Status or has no metadata). */
json_t *partial_of(const req_ctx *rc, json_t *body);
/* The kind and apiVersion the request is answered in, for a list or one
 * object: PartialObjectMetadata[List] when asked, else the type's own.
 * Static strings or the type's; not owned. */
void served_kind(const req_ctx *rc, bool list, const char **kind, const char **api_version);

#endif
