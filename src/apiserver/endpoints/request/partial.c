/* partial.c - objects served as meta.k8s.io PartialObjectMetadata.
 *
 * A client that only needs metadata (client-go's metadata client, behind
 * controller-runtime's metadata-only watches and kube-controller-manager's
 * garbage collector) asks for it in the Accept header:
 *
 *   application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1        get, watch
 *   application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1    list
 *
 * and gets {"kind":"PartialObjectMetadata","apiVersion":"meta.k8s.io/v1",
 * "metadata":{...}} per object, in a PartialObjectMetadataList for lists.
 * The metadata is cut out of the stored bytes (jscan): nothing is
 * decoded, and a list of 100k objects streams as fast as a full one
 * while sending a fraction of the bytes. Asking for the list form of a
 * single object, or the object form of a list, is a 406 as upstream.
 * Writes answer in the object form too when asked (a Status stays one).
 */
#include <event2/buffer.h>
#include <string.h>

#include "apiserver/endpoints/request/partial.h"
#include "apiserver/codec/jscan.h"

void partial_append(struct evbuffer *out, const req_ctx *rc, const cobj *o)
{
    evbuffer_add_printf(out, "{\"kind\":\"PartialObjectMetadata\",\"apiVersion\":\"%s\",",
                        rc->partial_api_version);
    jspan meta;
    if (jscan_member(o->json, o->len, 0, "metadata", &meta) && jscan_kind(o->json, meta) == '{') {
        evbuffer_add(out, "\"metadata\":", 11);
        evbuffer_add(out, o->json + meta.off, meta.len);
        evbuffer_add(out, "}", 1);
    } else {
        evbuffer_add(out, "\"metadata\":{}}", 14);
    }
}

json_t *partial_of(const req_ctx *rc, json_t *body)
{
    json_t *meta = json_object_get(body, "metadata");
    const char *kind = json_string_value(json_object_get(body, "kind"));
    if (!json_is_object(meta) || (kind && !strcmp(kind, "Status")))
        return body;
    json_t *p = json_pack("{s:s,s:s,s:O}", "kind", "PartialObjectMetadata", "apiVersion",
                          rc->partial_api_version, "metadata", meta);
    if (!p)
        return body;
    json_decref(body);
    return p;
}

ckube_status *partial_refused(const req_ctx *rc, bool is_list)
{
    const resource_type *t = rc->type;
    if (is_list && rc->want_partial == PARTIAL_OBJECT)
        return ckube_status_new(406, CKUBE_REASON_NOT_ACCEPTABLE,
                                "you requested PartialObjectMetadata, but the requested object "
                                "is a list (%s)",
                                t->list_kind);
    if (!is_list && rc->want_partial == PARTIAL_LIST)
        return ckube_status_new(406, CKUBE_REASON_NOT_ACCEPTABLE,
                                "you requested PartialObjectMetadataList, but the requested "
                                "object is not a list (%s)",
                                t->kind);
    return NULL;
}

void served_kind(const req_ctx *rc, bool list, const char **kind, const char **api_version)
{
    if (rc->want_partial) {
        *kind = list ? "PartialObjectMetadataList" : "PartialObjectMetadata";
        *api_version = rc->partial_api_version;
    } else {
        *kind = list ? rc->type->list_kind : rc->type->kind;
        *api_version = rc->type->api_version;
    }
}
