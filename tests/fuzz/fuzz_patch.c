/* Fuzzes the three patch formats (ckube/patch.h).
 *
 * Input: one selector byte, then the document JSON, a NUL byte, and the
 * patch JSON. selector % 3 picks the format (0 JSON patch, 1 merge patch,
 * 2 strategic merge patch); (selector / 3) % 4 picks the strategic
 * metadata (none, Pod, Deployment, metadata only).
 *
 * Besides "no crash, no leak, no UB" it checks invariants and aborts when
 * one breaks: inputs are never modified; a result comes with no error and
 * a failure with one; merge patch is idempotent; a strategic merge patch
 * without metadata or directives equals the merge patch.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/patch.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const ckube_patch_meta_entry *const metas[4] = {NULL, patchmeta_pod, patchmeta_deployment,
                                                       patchmeta_metadata_only};

static void check(int cond)
{
    if (!cond)
        abort();
}

/* True if any object key anywhere in `v` starts with '$'. */
static int has_dollar_key(const json_t *v)
{
    const char *key;
    json_t *c;
    size_t i;
    if (json_is_object(v)) {
        json_object_foreach((json_t *)v, key, c)
        {
            if (key[0] == '$' || has_dollar_key(c))
                return 1;
        }
    } else if (json_is_array(v)) {
        json_array_foreach(v, i, c)
        {
            if (has_dollar_key(c))
                return 1;
        }
    }
    return 0;
}

/* Runs one format; returns the result (or NULL) after checking the
 * error contract. */
static json_t *run(int fmt, const ckube_patch_meta_entry *meta, const json_t *doc,
                   const json_t *patch)
{
    char *err = NULL;
    json_t *out;
    if (fmt == 0)
        out = ckube_json_patch_apply(doc, patch, &err);
    else if (fmt == 1)
        out = ckube_merge_patch_apply(doc, patch, &err);
    else
        out = ckube_strategic_merge_patch_apply(doc, patch, meta ? ckube_patch_meta_table : NULL,
                                                (void *)meta, &err);
    check((out == NULL) == (err != NULL));
    free(err);
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    int fmt = data[0] % 3;
    const ckube_patch_meta_entry *meta = metas[(data[0] / 3) % 4];
    const char *body = (const char *)data + 1;
    size_t blen = size - 1;
    const char *nul = memchr(body, '\0', blen);
    if (!nul)
        return 0;
    size_t dlen = (size_t)(nul - body);
    json_t *doc = json_loadb(body, dlen, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    json_t *patch = json_loadb(nul + 1, blen - dlen - 1, JSON_DECODE_ANY | JSON_ALLOW_NUL, NULL);
    if (!doc || !patch)
        goto out;
    json_t *doc0 = json_deep_copy(doc), *patch0 = json_deep_copy(patch);

    json_t *out = run(fmt, meta, doc, patch);
    if (fmt == 1 && out) {
        json_t *again = run(1, NULL, out, patch);
        check(again && json_equal(again, out));
        json_decref(again);
    }
    if (fmt == 2 && out && !meta && !has_dollar_key(patch)) {
        json_t *mp = run(1, NULL, doc, patch);
        check(mp && json_equal(mp, out));
        json_decref(mp);
    }
    json_decref(out);

    check(json_equal(doc, doc0) && json_equal(patch, patch0));
    json_decref(doc0);
    json_decref(patch0);
out:
    json_decref(doc);
    json_decref(patch);
    return 0;
}
