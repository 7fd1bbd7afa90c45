/* request_info.h - what a request path means, as upstream's
 * RequestInfoFactory derives it:
 *   /api/v1/namespaces/NS/RESOURCE/NAME/SUBRESOURCE
 *   /apis/GROUP/VERSION/RESOURCE/NAME ...
 *   /api/v1/watch/... (deprecated watch prefix)
 * Anything else (/version, /openapi/v3, /healthz) is a non-resource path.
 */
#ifndef CKUBE_APISERVER_REQUEST_INFO_H
#define CKUBE_APISERVER_REQUEST_INFO_H

#include <stdbool.h>

typedef struct request_info {
    bool is_resource;   /* a resource URL (has at least a resource) */
    bool is_discovery;  /* /api, /api/v1, /apis, /apis/G, /apis/G/V */
    bool watch_prefix;  /* had /watch/ */
    char verb[24];      /* get, list, watch, create, update, patch, delete, deletecollection */
    const char *prefix; /* "api" or "apis" */
    char group[128];
    char version[64];
    char ns[256];
    char resource[128];
    char name[256];
    char subresource[64];
    int nparts; /* number of path parts after /api(s)/[G/]V */
} request_info;

/* Parses a (percent-decoded) path and method. Returns 0 on success, -1 if
 * the path is malformed (too long a segment, too many parts). */
int request_info_parse(const char *path, const char *method, bool watch_param, request_info *ri);

#endif
