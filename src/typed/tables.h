/* tables.h - the table rows of libckube's hand-written structs (ObjectMeta,
 * OwnerReference, Scale), as ckube-gen writes them for generated ones:
 * one initializer per member kind, naming the member's companions
 * (has_x, n_x, x_keys) by the same rules (ckube/typed.h). Private to the
 * typed room. */
#ifndef CKUBE_TYPED_TABLES_H
#define CKUBE_TYPED_TABLES_H

#include <stddef.h>

#include "ckube/typed.h"

#define NO CKUBE_NO_MEMBER
#define SCALAR(json, T, m, k)                                                                      \
    {                                                                                              \
        .json_name = json, .value = {.kind = k}, .offset = offsetof(T, m), .has_offset = NO,       \
        .n_offset = NO, .keys_offset = NO, .null_offset = NO                                       \
    }
#define FLAGGED(json, T, m, k)                                                                     \
    {                                                                                              \
        .json_name = json, .value = {.kind = k}, .offset = offsetof(T, m),                         \
        .has_offset = offsetof(T, has_##m), .n_offset = NO, .keys_offset = NO, .null_offset = NO   \
    }
#define ARRAY(json, T, m, elem)                                                                    \
    {                                                                                              \
        .json_name = json, .value = {.kind = CKUBE_VALUE_ARRAY, .items = elem},                    \
        .offset = offsetof(T, m), .has_offset = offsetof(T, has_##m),                              \
        .n_offset = offsetof(T, n_##m), .keys_offset = NO, .null_offset = NO                       \
    }
#define MAP(json, T, m, elem)                                                                      \
    {                                                                                              \
        .json_name = json, .value = {.kind = CKUBE_VALUE_MAP, .items = elem},                      \
        .offset = offsetof(T, m), .has_offset = offsetof(T, has_##m),                              \
        .n_offset = offsetof(T, n_##m), .keys_offset = offsetof(T, m##_keys), .null_offset = NO    \
    }
/* An object held by pointer (T *m). */
#define OBJECT(json, T, m, info)                                                                   \
    {                                                                                              \
        .json_name = json, .value = {.kind = CKUBE_VALUE_OBJECT, .object = info},                  \
        .offset = offsetof(T, m), .has_offset = NO, .n_offset = NO, .keys_offset = NO,             \
        .null_offset = NO                                                                          \
    }
/* A kind's metadata, held in place, with has_metadata. */
#define METADATA(T)                                                                                \
    {                                                                                              \
        .json_name = "metadata",                                                                   \
        .value = {.kind = CKUBE_VALUE_OBJECT, .object = &ckube_object_meta_info},                  \
        .inline_object = true, .offset = offsetof(T, metadata),                                    \
        .has_offset = offsetof(T, has_metadata), .n_offset = NO, .keys_offset = NO,                \
        .null_offset = NO                                                                          \
    }

#endif
