/* ckube/scheme.h - a scheme: the kinds a program knows as typed structs,
 * by apiVersion and kind (client-go's runtime.Scheme).
 *
 * Every package ckube-gen writes has `int NAME_add_to_scheme(ckube_scheme *)`,
 * which adds its kinds. ckube_scheme_decode then turns any JSON object of
 * a known kind into its struct, found from the object's apiVersion and
 * kind, so that generic code (tests, tools, admission webhooks) handles
 * typed objects without knowing their packages.
 *
 * Threads: add kinds before sharing the scheme; after that any number of
 * threads may decode with it at once.
 */
#ifndef CKUBE_SCHEME_H
#define CKUBE_SCHEME_H

#include <jansson.h>
#include <stddef.h>

#include "ckube/status.h"
#include "ckube/typed.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ckube_scheme ckube_scheme;

/* An empty scheme; NULL when out of memory. */
ckube_scheme *ckube_scheme_new(void);
void ckube_scheme_free(ckube_scheme *s);

/* Adds a kind (borrowed: the generated tables are static). Adding the same
 * type again is a no-op. 0; -1 when out of memory or when another type
 * already has its apiVersion and kind. */
int ckube_scheme_add(ckube_scheme *s, const ckube_type_info *type);

/* The type of apiVersion ("v1", "samplecrd.k8s.io/v1") and kind, or NULL. */
const ckube_type_info *ckube_scheme_lookup(const ckube_scheme *s, const char *api_version,
                                           const char *kind);

/* Decodes the JSON object in [json, json+len) into the struct of its kind.
 * 0 with *out (free with ckube_typed_free); -1 with *err (may be NULL):
 * 400 BadRequest for text that is not JSON, an object without apiVersion
 * or kind ("Object 'Kind' is missing in '...'"), or a kind the scheme does
 * not know ("no kind \"Foo\" is registered for version \"example.com/v1\"
 * in scheme \"ckube\""); 422 Invalid for a field of the wrong type (see
 * ckube/typed.h). -1 with *err NULL: out of memory. */
int ckube_scheme_decode(const ckube_scheme *s, const char *json, size_t len, ckube_typed **out,
                        ckube_status **err);

/* The same from a decoded JSON object (borrowed). */
int ckube_scheme_from_json(const ckube_scheme *s, const json_t *obj, ckube_typed **out,
                           ckube_status **err);

/* The compact JSON of a typed object: malloc'd, or NULL when out of memory. */
char *ckube_typed_encode(const ckube_typed *obj);

/* The JSON of a typed object: a new reference, or NULL when out of memory. */
json_t *ckube_typed_to_json(const ckube_typed *obj);

/* A deep copy (NULL when out of memory), as the generated T_copy. */
ckube_typed *ckube_typed_copy(const ckube_typed *obj);

/* Frees a typed object of any kind; NULL is fine. */
void ckube_typed_free(ckube_typed *obj);

#ifdef __cplusplus
}
#endif

#endif
