/* ckube/typed_client.h - the REST client on typed objects.
 *
 * What ckube-gen's per-kind clients call (PKG_VERSION_PLURAL_get(),
 * _list(), _create()... are one-line wrappers of these, as client-go's
 * typed clientsets wrap its REST client): the same requests as
 * ckube/client.h's dynamic calls, with the objects as the structs of
 * ckube/typed.h. A kind is named by its ckube_type_info (group, version,
 * plural, scope).
 *
 * Errors: -1 with *err, the server's Status when it answered; an answer
 * that does not decode into the kind's struct is a Status with code 0
 * ("decoding the server's answer: ..."), as any error with no server
 * answer. Objects given are borrowed; objects returned are the caller's
 * (ckube_typed_free, ckube_typed_list_free).
 *
 * Threads: as ckube/client.h (a client is safe to share). */
#ifndef CKUBE_TYPED_CLIENT_H
#define CKUBE_TYPED_CLIENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "ckube/client.h"
#include "ckube/scheme.h"
#include "ckube/status.h"
#include "ckube/typed.h"

#ifdef __cplusplus
extern "C" {
#endif

/* metav1.ListMeta. */
typedef struct ckube_list_meta {
    char *resource_version;
    char *continue_;
    int64_t remaining_item_count;
    bool has_remaining_item_count;
} ckube_list_meta;

/* A list of objects of one kind (items are of the kind's struct: cast, or
 * use the generated PKG_..._list_at()). */
typedef struct ckube_typed_list {
    ckube_list_meta metadata;
    ckube_typed **items;
    size_t n_items;
} ckube_typed_list;

void ckube_typed_list_free(ckube_typed_list *l);

/* The object's metadata (borrowed; NULL only for a struct with none, which
 * ckube-gen never makes for a kind). */
ckube_object_meta *ckube_typed_meta(const ckube_typed *obj);

/* GET one object. */
int ckube_typed_get(ckube_client *c, const ckube_type_info *t, const char *ns, const char *name,
                    ckube_typed **out, ckube_status **err);

/* One page of a list (opts may be NULL); ns NULL on a namespaced kind
 * lists every namespace. */
int ckube_typed_list_page(ckube_client *c, const ckube_type_info *t, const char *ns,
                          const ckube_list_opts *opts, ckube_typed_list **out, ckube_status **err);

/* POST, PUT, PUT of /status. The namespace is `ns`, or the object's own
 * when ns is NULL (a namespaced kind). `out` (may be NULL) receives what
 * the server stored. */
int ckube_typed_create(ckube_client *c, const char *ns, const ckube_typed *obj,
                       const ckube_write_opts *wo, ckube_typed **out, ckube_status **err);
int ckube_typed_update(ckube_client *c, const char *ns, const ckube_typed *obj,
                       const ckube_write_opts *wo, ckube_typed **out, ckube_status **err);
int ckube_typed_update_status(ckube_client *c, const char *ns, const ckube_typed *obj,
                              const ckube_write_opts *wo, ckube_typed **out, ckube_status **err);

/* PATCH with `len` bytes of `patch` in the format `type` names. */
int ckube_typed_patch(ckube_client *c, const ckube_type_info *t, const char *ns, const char *name,
                      ckube_patch_type type, const char *patch, size_t len,
                      const ckube_write_opts *wo, ckube_typed **out, ckube_status **err);

int ckube_typed_delete(ckube_client *c, const ckube_type_info *t, const char *ns, const char *name,
                       const ckube_delete_opts *o, ckube_status **err);
int ckube_typed_delete_collection(ckube_client *c, const ckube_type_info *t, const char *ns,
                                  const ckube_list_opts *sel, const ckube_delete_opts *o,
                                  ckube_status **err);

/* Opens a watch (see ckube_watch_open); read it with ckube_typed_watch_next. */
int ckube_typed_watch(ckube_client *c, const ckube_type_info *t, const char *ns,
                      const ckube_list_opts *opts, ckube_watch **out, ckube_status **err);

/* The next event, as ckube_watch_next, with the object decoded as kind t:
 * 1 with *type and *obj (the caller's). An ERROR event (a 410 Expired,
 * say) returns 1 with *type CKUBE_WATCH_ERROR, *obj NULL and *err the
 * event's Status. 0 at the end of the stream; -1 with *err. */
int ckube_typed_watch_next(ckube_watch *w, const ckube_type_info *t, ckube_watch_event_type *type,
                           ckube_typed **obj, ckube_status **err);

/* ---- the scale subresource (autoscaling/v1 Scale) ---- */

typedef struct ckube_scale_spec {
    int64_t replicas;
    bool has_replicas;
    json_t *unknown;
} ckube_scale_spec;

typedef struct ckube_scale_status {
    int64_t replicas;
    bool has_replicas;
    char *selector;
    json_t *unknown;
} ckube_scale_status;

typedef struct ckube_scale {
    ckube_typed base;
    char *api_version;
    char *kind;
    ckube_object_meta metadata;
    bool has_metadata;
    ckube_scale_spec *spec;
    ckube_scale_status *status;
    json_t *unknown;
} ckube_scale;

extern const ckube_type_info ckube_scale_type;
extern const ckube_struct_info ckube_scale_info;

/* GET and PUT of NAME/scale of kind t. */
int ckube_typed_get_scale(ckube_client *c, const ckube_type_info *t, const char *ns,
                          const char *name, ckube_scale **out, ckube_status **err);
int ckube_typed_update_scale(ckube_client *c, const ckube_type_info *t, const char *ns,
                             const ckube_scale *scale, const ckube_write_opts *wo,
                             ckube_scale **out, ckube_status **err);

#ifdef __cplusplus
}
#endif

#endif
