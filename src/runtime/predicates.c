/* predicates.c - ready-made event filters for controller watches.
 *
 * Contract (ckube/controller.h): for creates and deletes old_obj is NULL
 * and every predicate lets the event through; for updates they compare
 * old and new. */
#include <ckube/controller.h>
#include <ckube/json.h>

#include <string.h>

static bool field_changed(const json_t *old_obj, const json_t *new_obj, const char *path)
{
    if (!old_obj || !new_obj)
        return true;
    json_t *a = ckube_json_get_path(old_obj, path);
    json_t *b = ckube_json_get_path(new_obj, path);
    if (!a && !b)
        return false;
    if (!a || !b)
        return true;
    return !json_equal(a, b);
}

bool ckube_predicate_generation_changed(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    (void)ctx;
    return field_changed(old_obj, new_obj, "metadata.generation");
}

bool ckube_predicate_labels_changed(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    (void)ctx;
    return field_changed(old_obj, new_obj, "metadata.labels");
}

bool ckube_predicate_annotations_changed(void *ctx, const json_t *old_obj, const json_t *new_obj)
{
    (void)ctx;
    return field_changed(old_obj, new_obj, "metadata.annotations");
}

bool ckube_predicate_resource_version_changed(void *ctx, const json_t *old_obj,
                                              const json_t *new_obj)
{
    (void)ctx;
    return field_changed(old_obj, new_obj, "metadata.resourceVersion");
}
