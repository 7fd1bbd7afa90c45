/* Service references resolved through the cache (resolver.h). */
#include "apiserver/resolver/resolver.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/json.h"
#include "common/xalloc.h"

char *service_resolve(cacher *cache, const char *ns, const char *name, int svc_port, int *port,
                      char *err, size_t n)
{
    char key[1024];
    snprintf(key, sizeof key, "/registry/core/services/%s/%s", ns, name);
    cobj *c = cacher_get(cache, key);
    if (!c) {
        snprintf(err, n, "service \"%s\" not found", name);
        return NULL;
    }
    json_t *svc = cobj_decode(c);
    cobj_unref(c);
    const char *port_name = NULL;
    bool found = false;
    size_t i;
    json_t *p;
    json_array_foreach(ckube_json_get_path(svc, "spec.ports"), i, p)
    {
        if (json_integer_value(json_object_get(p, "port")) == svc_port) {
            port_name = json_string_value(json_object_get(p, "name"));
            found = true;
            break;
        }
    }
    char *pname = xstrdup(port_name ? port_name : "");
    json_decref(svc);
    if (!found) {
        snprintf(err, n, "no service port %d found for service \"%s\"", svc_port, name);
        free(pname);
        return NULL;
    }
    snprintf(key, sizeof key, "/registry/core/endpoints/%s/%s", ns, name);
    c = cacher_get(cache, key);
    if (!c) {
        snprintf(err, n, "endpoints \"%s\" not found", name);
        free(pname);
        return NULL;
    }
    json_t *ep = cobj_decode(c);
    cobj_unref(c);
    char *ip = NULL;
    json_t *sub;
    json_array_foreach(json_object_get(ep, "subsets"), i, sub)
    {
        json_t *addrs = json_object_get(sub, "addresses");
        if (!json_array_size(addrs))
            continue;
        size_t k;
        json_t *ptj;
        json_array_foreach(json_object_get(sub, "ports"), k, ptj)
        {
            const char *nm = json_string_value(json_object_get(ptj, "name"));
            if (strcmp(nm ? nm : "", pname))
                continue;
            const char *addr = json_string_value(json_object_get(json_array_get(addrs, 0), "ip"));
            if (addr) {
                ip = xstrdup(addr);
                *port = (int)json_integer_value(json_object_get(ptj, "port"));
            }
            break;
        }
        if (ip)
            break;
    }
    json_decref(ep);
    free(pname);
    if (!ip)
        snprintf(err, n, "no endpoints available for service \"%s\"", name);
    return ip;
}
