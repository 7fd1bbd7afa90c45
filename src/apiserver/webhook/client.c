/* A webhook's clientConfig and the call to it (client.h). */
#include "apiserver/webhook/client.h"

#include <ctype.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/resolver/resolver.h"
#include "common/text.h"
#include "common/xalloc.h"

/* https://HOST[:PORT][/PATH]: the parts a call needs. */
static void parse_url(hook_client *c, const char *url)
{
    const char *p = url + (strncmp(url, "https://", 8) ? 0 : 8);
    const char *slash = strchr(p, '/');
    size_t alen = slash ? (size_t)(slash - p) : strlen(p);
    c->url_authority = xstrndup(p, alen);
    c->url_path = xstrdup(slash ? slash : "");
    c->url_port = 443;
    const char *host = c->url_authority;
    size_t hlen = alen;
    if (*host == '[') { /* [v6]:port */
        const char *end = strchr(host, ']');
        if (end) {
            if (end[1] == ':')
                c->url_port = atoi(end + 2);
            host++;
            hlen = (size_t)(end - host);
        }
    } else {
        const char *colon = memchr(host, ':', alen);
        if (colon) {
            c->url_port = atoi(colon + 1);
            hlen = (size_t)(colon - host);
        }
    }
    c->url_host = xstrndup(host, hlen);
}

static bool all_blank(const char *p, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!isspace((unsigned char)p[i]))
            return false;
    return true;
}

void hook_client_init(hook_client *c, const json_t *cc)
{
    memset(c, 0, sizeof *c);
    const char *url = json_string_value(json_object_get(cc, "url"));
    const json_t *svc = json_object_get(cc, "service");
    if (url) {
        parse_url(c, url);
    } else if (json_is_object(svc)) {
        const char *ns = json_string_value(json_object_get(svc, "namespace"));
        const char *sn = json_string_value(json_object_get(svc, "name"));
        const char *path = json_string_value(json_object_get(svc, "path"));
        json_t *port = json_object_get(svc, "port");
        c->svc_ns = xstrdup(ns ? ns : "");
        c->svc_name = xstrdup(sn ? sn : "");
        c->svc_path = xstrdup(path ? path : "");
        c->svc_port = json_is_integer(port) ? (int)json_integer_value(port) : 443;
    }
    /* caBundle is []byte upstream: base64 on the wire; all-blank is none. */
    const char *ca = json_string_value(json_object_get(cc, "caBundle"));
    if (ca && *ca)
        c->ca = ckube__base64_decode(ca, strlen(ca), &c->ca_len);
    if (c->ca && all_blank(c->ca, c->ca_len)) {
        free(c->ca);
        c->ca = NULL;
        c->ca_len = 0;
    }
}

void hook_client_free(hook_client *c)
{
    free(c->url_host);
    free(c->url_authority);
    free(c->url_path);
    free(c->svc_ns);
    free(c->svc_name);
    free(c->svc_path);
    free(c->ca);
    memset(c, 0, sizeof *c);
}

outbound_call *hook_client_post(const hook_client *c, outbound *o, cacher *cache,
                                unsigned timeout_s, const char *body, size_t len, outbound_cb cb,
                                void *arg, char *err, size_t n)
{
    char path[2048];
    outbound_target t = {.ca_pem = c->ca, .ca_len = c->ca_len};
    if (!c->svc_name) {
        snprintf(path, sizeof path, "%s?timeout=%us", *c->url_path ? c->url_path : "/", timeout_s);
        t.host = c->url_host;
        t.port = c->url_port;
        t.server_name = c->url_host;
        return outbound_post(o, &t, path, "application/json", body, len, timeout_s * 1000, cb, arg);
    }
    snprintf(path, sizeof path, "%s?timeout=%us", *c->svc_path ? c->svc_path : "/", timeout_s);
    char server[600], why[512];
    snprintf(server, sizeof server, "%s.%s.svc", c->svc_name, c->svc_ns);
    int port = 0;
    char *ip = service_resolve(cache, c->svc_ns, c->svc_name, c->svc_port, &port, why, sizeof why);
    if (!ip) {
        snprintf(err, n, "Post \"https://%s:%d%s\": %s", server, c->svc_port, path, why);
        return NULL;
    }
    t.host = ip;
    t.port = port;
    t.url_port = c->svc_port;
    t.server_name = server;
    outbound_call *call =
        outbound_post(o, &t, path, "application/json", body, len, timeout_s * 1000, cb, arg);
    free(ip);
    return call;
}
