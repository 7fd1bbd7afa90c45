/* Decoding of Kubernetes protobuf request bodies into JSON.
 *
 * kubectl 1.32+ and client-go programs send built-in types as
 * `Content-Type: application/vnd.kubernetes.protobuf`: the four bytes
 * "k8s\0", then a runtime.Unknown envelope carrying apiVersion, kind and the
 * object's own message. ckube stores and serves JSON, so such bodies are
 * turned into the JSON object a JSON client would have sent for the same Go
 * struct (modulo noise: zero values of non-pointer Go fields and empty
 * non-pointer structs are left out, as is a zero creationTimestamp).
 *
 * The message layouts are our own descriptions in proto/k8s_*.proto; fields
 * not described there are skipped (lossy but never wrong). Supported kinds:
 * see k8s_protobuf_supports(). */
#ifndef CKUBE_APISERVER_K8S_PROTOBUF_H
#define CKUBE_APISERVER_K8S_PROTOBUF_H

#include <stdbool.h>
#include <stddef.h>

#include <jansson.h>

#define K8S_PROTOBUF_CONTENT_TYPE "application/vnd.kubernetes.protobuf"

/* Decodes one protobuf-encoded object (magic + envelope + message) of `len`
 * bytes at `buf` (borrowed) into a new JSON object that starts with
 * "apiVersion" and "kind". Returns NULL on failure and sets *err (when err
 * is non-NULL) to a malloc'd message the caller frees, e.g.
 * "unsupported protobuf type apps/v1 Foo" or "invalid protobuf: ...".
 * The caller owns the returned reference.
 *
 * What the decode builds is bounded by `max_memory` (0: no bound): every
 * struct protobuf-c unpacks (through a counting allocator) and every JSON
 * value (priced as common/json_cost.h prices them) is charged, and past
 * the bound the decode stops with *too_large (when non-NULL) set and *err
 * "decoding it needs more than N bytes of memory". A few bytes on the wire
 * can unpack into hundreds (an empty container of a Pod is a 2-byte
 * field and a struct of several hundred bytes), which is what this
 * bounds; declared lengths are checked against the input by protobuf-c. */
json_t *k8s_protobuf_decode(const void *buf, size_t len, size_t max_memory, bool *too_large,
                            char **err);

/* True when a Content-Type header value (parameters allowed, case-insensitive)
 * names the Kubernetes protobuf encoding. NULL is false. */
bool k8s_protobuf_is_content_type(const char *content_type);

/* True when (apiVersion, kind) is a type k8s_protobuf_decode() knows. */
bool k8s_protobuf_supports(const char *api_version, const char *kind);

#endif
