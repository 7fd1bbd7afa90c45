/* Serving /openapi/v2 and /openapi/v3: documents are built from the
 * registry (openapi.c) and cached until the registry changes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/apiserver.h"
#include "apiserver/openapi.h"

/* Rebuilds the cached documents if the registry changed. Caller holds
 * openapi_mu. */
static void refresh(apiserver *s)
{
    unsigned long gen = registry_generation();
    if (s->openapi_v3_index && gen == s->openapi_gen)
        return;
    size_t n;
    resource_type **types = registry_list(&n);
    json_decref(s->openapi_v3_index);
    json_decref(s->openapi_v3_docs);
    json_decref(s->openapi_v2);
    s->openapi_v3_index = openapi_v3_index(types, n);
    s->openapi_v3_docs = json_object();
    s->openapi_v2 = NULL; /* built on demand: large and rarely used */
    s->openapi_gen = gen;
    registry_list_free(types, n);
}

bool handle_openapi(req_ctx *rc, const char *path)
{
    apiserver *s = rc->srv;
    json_t *doc = NULL;
    pthread_mutex_lock(&s->openapi_mu);
    refresh(s);
    if (!strcmp(path, "/openapi/v3") || !strcmp(path, "/openapi/v3/")) {
        doc = json_incref(s->openapi_v3_index);
    } else if (!strcmp(path, "/openapi/v2") || !strcmp(path, "/openapi/v2/")) {
        if (!s->openapi_v2) {
            size_t n;
            resource_type **types = registry_list(&n);
            s->openapi_v2 = openapi_v2(types, n);
            registry_list_free(types, n);
        }
        doc = json_incref(s->openapi_v2);
    } else if (!strncmp(path, "/openapi/v3/", 12)) {
        const char *gvpath = path + 12; /* "api/v1" or "apis/G/V" */
        doc = json_incref(json_object_get(s->openapi_v3_docs, gvpath));
        if (!doc) {
            char group[128] = "", version[64] = "";
            if (!strncmp(gvpath, "api/", 4)) {
                snprintf(version, sizeof version, "%s", gvpath + 4);
            } else if (!strncmp(gvpath, "apis/", 5)) {
                const char *g = gvpath + 5, *slash = strchr(g, '/');
                if (slash && (size_t)(slash - g) < sizeof group) {
                    memcpy(group, g, (size_t)(slash - g));
                    group[slash - g] = 0;
                    snprintf(version, sizeof version, "%s", slash + 1);
                }
            }
            if (*version && !strchr(version, '/')) {
                size_t n;
                resource_type **types = registry_list(&n);
                doc = openapi_v3_group_version(types, n, group, version);
                registry_list_free(types, n);
                if (doc)
                    json_object_set(s->openapi_v3_docs, gvpath, doc);
            }
        }
    }
    pthread_mutex_unlock(&s->openapi_mu);
    if (!doc)
        return false;
    reply_json(rc, 200, doc);
    return true;
}
