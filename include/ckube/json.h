/* ckube/json.h - small helpers over jansson for Kubernetes objects.
 *
 * Objects are plain jansson values. These helpers read and write the
 * metadata fields everyone needs, and dot-separated paths.
 */
#ifndef CKUBE_JSON_H
#define CKUBE_JSON_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Borrowed string values of common fields; NULL when absent or not a
 * string. Valid while `obj` is unchanged. */
const char *ckube_obj_name(const json_t *obj);
const char *ckube_obj_namespace(const json_t *obj);
const char *ckube_obj_resource_version(const json_t *obj);
const char *ckube_obj_uid(const json_t *obj);
const char *ckube_obj_kind(const json_t *obj);
const char *ckube_obj_api_version(const json_t *obj);

/* Follows a path of object keys. Leading '.' is optional:
 * ".spec.replicas" and "spec.replicas" are the same. Array elements are
 * addressed as "[N]". Returns a borrowed value or NULL. */
json_t *ckube_json_get_path(const json_t *obj, const char *path);

/* Returns obj[key], creating an empty object there if absent or not an
 * object. Borrowed. */
json_t *ckube_json_object_ensure(json_t *obj, const char *key);

/* Serializes compactly (no spaces) with keys in insertion order: the
 * bytes of json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY), several times
 * faster. Caller frees. Sets *len if non-NULL. NULL on failure (OOM, a
 * string with invalid UTF-8, a cycle). */
char *ckube_json_dumps(const json_t *v, size_t *len);

/* Parses `len` bytes. Returns a new reference, or NULL with *err (malloc'd,
 * caller frees) describing the problem like "line 1, column 5: ...". */
json_t *ckube_json_loads(const char *buf, size_t len, char **err);

/* Current time as RFC 3339 UTC with seconds ("2026-11-21T18:34:11Z").
 * buf must hold at least 21 bytes. */
void ckube_now_rfc3339(char *buf, size_t n);
/* Same with microseconds ("...T18:34:11.123456Z"), buf >= 28 bytes. */
void ckube_now_rfc3339_micro(char *buf, size_t n);
/* Parses RFC 3339 (with or without fractional seconds, Z or offset) to
 * Unix seconds. Returns -1 on error. */
int64_t ckube_parse_rfc3339(const char *s);

/* Random RFC 4122 version-4 UUID, buf >= 37 bytes. */
void ckube_uuid4(char *buf, size_t n);
/* n random characters from upstream generateName's alphabet
 * "bcdfghjklmnpqrstvwxz2456789". buf >= n+1. */
void ckube_random_suffix(char *buf, size_t n);

/* Monotonic clock in nanoseconds. */
uint64_t ckube_monotonic_ns(void);

#ifdef __cplusplus
}
#endif
#endif
