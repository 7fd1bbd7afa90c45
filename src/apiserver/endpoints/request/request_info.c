/* Request path parsing; see request_info.h. */
#include "apiserver/endpoints/request/request_info.h"

#include <stdio.h>
#include <string.h>

#include "common/text.h"

#define MAX_PARTS 12

static int copy(char *dst, size_t n, const char *src)
{
    size_t l = strlen(src);
    if (l >= n)
        return -1;
    memcpy(dst, src, l + 1);
    return 0;
}

int request_info_parse(const char *path, const char *method, bool watch_param, request_info *ri)
{
    memset(ri, 0, sizeof *ri);
    char buf[2048];
    if (copy(buf, sizeof buf, path))
        return -1;
    char *parts[MAX_PARTS + 1];
    int n = 0;
    for (char *save = NULL, *t = strtok_r(buf, "/", &save); t; t = strtok_r(NULL, "/", &save)) {
        if (n == MAX_PARTS)
            return -1;
        parts[n++] = t;
    }
    if (n == 0 || (strcmp(parts[0], "api") && strcmp(parts[0], "apis")))
        return 0; /* non-resource */
    ri->prefix = !strcmp(parts[0], "api") ? "api" : "apis";
    int i = 1;
    if (!strcmp(ri->prefix, "apis")) {
        if (n < 2) {
            ri->is_discovery = true;
            return 0;
        }
        if (copy(ri->group, sizeof ri->group, parts[i++]))
            return -1;
    }
    if (i >= n) {
        ri->is_discovery = true;
        return 0;
    }
    if (copy(ri->version, sizeof ri->version, parts[i++]))
        return -1;
    if (i >= n) {
        ri->is_discovery = true;
        return 0;
    }
    char **p = parts + i;
    int np = n - i;
    if (!strcmp(p[0], "watch")) {
        ri->watch_prefix = true;
        p++;
        np--;
        if (np == 0)
            return -1;
    }
    if (!strcmp(p[0], "namespaces") && np > 1) {
        if (copy(ri->ns, sizeof ri->ns, p[1]))
            return -1;
        /* namespaces/NS/RESOURCE...: unless the third part is one of the
         * namespace's own subresources. */
        if (np > 2 && strcmp(p[2], "status") && strcmp(p[2], "finalize")) {
            p += 2;
            np -= 2;
        }
    }
    if (np > 3)
        return -1;
    ri->is_resource = true;
    ri->nparts = np;
    if (copy(ri->resource, sizeof ri->resource, p[0]))
        return -1;
    if (np > 1 && copy(ri->name, sizeof ri->name, p[1]))
        return -1;
    if (np > 2 && copy(ri->subresource, sizeof ri->subresource, p[2]))
        return -1;

    const char *verb = "";
    if (!strcmp(method, "GET") || !strcmp(method, "HEAD")) {
        if (ri->watch_prefix || watch_param)
            verb = "watch";
        else
            verb = *ri->name ? "get" : "list";
    } else if (!strcmp(method, "POST")) {
        verb = "create";
    } else if (!strcmp(method, "PUT")) {
        verb = "update";
    } else if (!strcmp(method, "PATCH")) {
        verb = "patch";
    } else if (!strcmp(method, "DELETE")) {
        verb = *ri->name ? "delete" : "deletecollection";
    }
    ckube__concat(ri->verb, sizeof ri->verb, verb, NULL);
    return 0;
}
