/* Serving /openapi/v2 and /openapi/v3: documents are built from the
 * registry (openapi.c) and cached until the registry changes. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/aggregator/aggregator.h"
#include "apiserver/endpoints/openapi/openapi_http.h"
#include "apiserver/endpoints/openapi/openapi.h"
#include "ckube/json.h"

/* Rebuilds the cached documents if the registry changed. Caller holds
 * openapi_mu. */
static void refresh(apiserver *s)
{
    unsigned long gen = registry_generation(s->registry);
    if (s->openapi_v3_index && gen == s->openapi_gen)
        return;
    size_t n;
    resource_type **types = registry_list(s->registry, &n);
    json_decref(s->openapi_v3_index);
    json_decref(s->openapi_v3_docs);
    json_decref(s->openapi_v2);
    s->openapi_v3_index = openapi_v3_index(types, n);
    s->openapi_v3_docs = json_object();
    s->openapi_v2 = NULL; /* built on demand: large and rarely used */
    s->openapi_gen = gen;
    registry_list_free(types, n);
}

/* OpenAPI is served as JSON only. A client asking for protobuf alone
 * (client-go's OpenAPISchema does) gets 406 and falls back to compiled-in
 * type information, rather than JSON it would fail to decode. */
static bool accepts_json(req_ctx *rc)
{
    const char *a = httpd_req_header(rc->req, "Accept");
    return !a || !*a || strstr(a, "json") || strstr(a, "*/*");
}

bool handle_openapi(req_ctx *rc, const char *path)
{
    apiserver *s = rc->srv;
    if (!strncmp(path, "/openapi/v2", 11) && !accepts_json(rc)) {
        /* client-go asks for OpenAPI v2 as protobuf only (kubectl 1.27-1.33
         * fetch it for client-side validation and patch metadata). We send
         * a valid gnostic Document with no definitions: {swagger: "2.0",
         * info: {title: "ckube", version: "v1.31.0"}}. Clients then find no
         * schema and skip client-side checks; the server validates every
         * write itself (fieldValidation), and kubectl falls back to its
         * compiled-in strategic-merge metadata. */
        static const char pb[] = "\x0a\x03"
                                 "2.0"
                                 "\x12\x10"
                                 "\x0a\x05"
                                 "ckube"
                                 "\x12\x07"
                                 "v1.31.0";
        reply_raw(rc, 200, "application/com.github.proto-openapi.spec.v2.v1.0+protobuf", pb,
                  sizeof pb - 1);
        return true;
    }
    if (!accepts_json(rc)) {
        reply_status(rc, ckube_status_new(406, CKUBE_REASON_NOT_ACCEPTABLE,
                                          "only the following media types are accepted: "
                                          "application/json"));
        return true;
    }
    json_t *doc = NULL;
    bool index = !strcmp(path, "/openapi/v3") || !strcmp(path, "/openapi/v3/");
    /* the documents extension servers publish, named beside this
     * server's own (aggregator.h) */
    json_t *remote = index && s->aggregator ? aggregator_openapi_v3_paths(s->aggregator) : NULL;
    char group[128] = "", version[64] = "";
    pthread_mutex_lock(&s->openapi_mu);
    refresh(s);
    if (index) {
        if (json_object_size(remote)) {
            json_t *paths = json_copy(json_object_get(s->openapi_v3_index, "paths"));
            json_object_update_missing(paths, remote);
            doc = json_pack("{s:o}", "paths", paths);
        } else {
            doc = json_incref(s->openapi_v3_index);
        }
    } else if (!strcmp(path, "/openapi/v2") || !strcmp(path, "/openapi/v2/")) {
        if (!s->openapi_v2) {
            size_t n;
            resource_type **types = registry_list(rc->srv->registry, &n);
            s->openapi_v2 = openapi_v2(types, n);
            registry_list_free(types, n);
        }
        doc = json_incref(s->openapi_v2);
    } else if (!strncmp(path, "/openapi/v3/", 12)) {
        const char *gvpath = path + 12; /* "api/v1" or "apis/G/V" */
        doc = json_incref(json_object_get(s->openapi_v3_docs, gvpath));
        if (!doc) {
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
                resource_type **types = registry_list(rc->srv->registry, &n);
                doc = openapi_v3_group_version(types, n, group, version);
                registry_list_free(types, n);
                if (doc)
                    json_object_set(s->openapi_v3_docs, gvpath, doc);
            }
        }
    }
    pthread_mutex_unlock(&s->openapi_mu);
    json_decref(remote);
    if (!doc) {
        /* a group/version of an extension server: its own document */
        return *group && *version && s->aggregator &&
               aggregator_proxy_openapi(s->aggregator, rc, group, version);
    }
    /* The cached documents are shared by every serving thread: encoding
     * only reads them, but their counts change under openapi_mu alone
     * (jansson reads a count without an atomic before changing it). */
    size_t len = 0;
    char *bytes = ckube_json_dumps(doc, &len);
    pthread_mutex_lock(&s->openapi_mu);
    json_decref(doc);
    pthread_mutex_unlock(&s->openapi_mu);
    reply_json_bytes(rc, 200, bytes, len);
    return true;
}
