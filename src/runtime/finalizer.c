/* finalizer.c - add and remove finalizers safely (see ckube/controller.h).
 *
 * Both helpers send a merge patch carrying the resourceVersion `obj` was
 * read at (controller-runtime's MergeFromWithOptimisticLock), so a
 * finalizer list changed by someone else since then makes the server
 * answer 409 instead of silently dropping their finalizer. The caller
 * requeues on conflict, as with any optimistic write.
 */
#include <ckube/controller.h>
#include <ckube/json.h>

#include <stdlib.h>
#include <string.h>

bool ckube_has_finalizer(const json_t *obj, const char *finalizer)
{
    json_t *list = ckube_json_get_path(obj, "metadata.finalizers");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (json_is_string(v) && strcmp(json_string_value(v), finalizer) == 0)
            return true;
    }
    return false;
}

/* Sends {"metadata":{"resourceVersion":RV,"finalizers":list}} as a merge
 * patch: the resourceVersion inside the patch is a precondition (409 when
 * the object changed since it was read), and replacing the whole list is
 * then exact. `list` is stolen. */
static int send_finalizers(ckube_client *c, const ckube_gvr *r, const json_t *obj, json_t *list,
                           json_t **out, ckube_status **err)
{
    const char *rv = ckube_obj_resource_version(obj);
    json_t *patch = json_pack("{s:{s:s, s:o}}", "metadata", "resourceVersion", rv ? rv : "",
                              "finalizers", list);
    size_t len = 0;
    char *body = patch ? ckube_json_dumps(patch, &len) : NULL;
    json_decref(patch);
    if (!body) {
        if (err)
            *err = ckube_status_internal("out of memory encoding a finalizer patch");
        return -1;
    }
    int rc = ckube_patch(c, r, ckube_obj_namespace(obj), ckube_obj_name(obj), CKUBE_PATCH_MERGE,
                         body, len, NULL, out, err);
    free(body);
    return rc;
}

/* A copy of obj's finalizers without `drop` (NULL keeps all). */
static json_t *finalizers_except(const json_t *obj, const char *drop)
{
    json_t *keep = json_array();
    json_t *list = ckube_json_get_path(obj, "metadata.finalizers");
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (!json_is_string(v) || !drop || strcmp(json_string_value(v), drop) != 0)
            json_array_append_new(keep, json_deep_copy(v)); /* obj may be a shared cache object */
    }
    return keep;
}

int ckube_finalizer_add(ckube_client *c, const ckube_gvr *r, const json_t *obj,
                        const char *finalizer, json_t **out, ckube_status **err)
{
    if (out)
        *out = NULL;
    if (ckube_has_finalizer(obj, finalizer))
        return 0;
    json_t *list = finalizers_except(obj, NULL);
    json_array_append_new(list, json_string(finalizer));
    return send_finalizers(c, r, obj, list, out, err);
}

int ckube_finalizer_remove(ckube_client *c, const ckube_gvr *r, const json_t *obj,
                           const char *finalizer, json_t **out, ckube_status **err)
{
    if (out)
        *out = NULL;
    if (!ckube_has_finalizer(obj, finalizer))
        return 0;
    return send_finalizers(c, r, obj, finalizers_except(obj, finalizer), out, err);
}

int ckube_finalizer_handle(ckube_client *c, const ckube_gvr *r, const json_t *obj,
                           const char *finalizer, ckube_finalizer_cleanup_fn cleanup, void *ctx,
                           json_t **updated, ckube_status **err)
{
    if (updated)
        *updated = NULL;
    bool deleting = ckube_json_get_path(obj, "metadata.deletionTimestamp") != NULL;
    if (!deleting) {
        if (ckube_finalizer_add(c, r, obj, finalizer, updated, err) != 0)
            return -1;
        return 1;
    }
    if (!ckube_has_finalizer(obj, finalizer))
        return 0;
    if (cleanup && cleanup(ctx, obj) != 0) {
        if (err)
            *err = ckube_status_new(0, NULL, "cleanup for finalizer %s of %s failed; will retry",
                                    finalizer, ckube_obj_name(obj) ? ckube_obj_name(obj) : "?");
        return -1;
    }
    return ckube_finalizer_remove(c, r, obj, finalizer, updated, err) == 0 ? 0 : -1;
}
