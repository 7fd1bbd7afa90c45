/* The dynamic client: paths, query strings and the verbs on any resource. */
#include "client/client_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/json.h"

static void add_segment(ckube__strbuf *b, const char *s)
{
    ckube__sb_addc(b, '/');
    ckube__sb_add_escaped(b, s);
}

char *ckube_resource_path(const ckube_gvr *r, const char *ns, const char *name, const char *sub)
{
    if (!r || !r->version || !r->resource)
        return NULL;
    ckube__strbuf b = {0};
    if (r->group && *r->group) {
        ckube__sb_add(&b, "/apis");
        add_segment(&b, r->group);
    } else {
        ckube__sb_add(&b, "/api");
    }
    add_segment(&b, r->version);
    if (ns && *ns) {
        ckube__sb_add(&b, "/namespaces");
        add_segment(&b, ns);
    }
    add_segment(&b, r->resource);
    if (name && *name) {
        add_segment(&b, name);
        if (sub && *sub)
            add_segment(&b, sub);
    }
    return ckube__sb_take(&b);
}

/* Appends "?k=v" or "&k=v" with v percent-encoded. */
static void q_add(ckube__strbuf *b, const char *k, const char *v)
{
    ckube__sb_addc(b, b->s && strchr(b->s, '?') ? '&' : '?');
    ckube__sb_add(b, k);
    ckube__sb_addc(b, '=');
    ckube__sb_add_escaped(b, v);
}

static void q_add_list_opts(ckube__strbuf *b, const ckube_list_opts *o)
{
    if (!o)
        return;
    char num[32];
    if (o->label_selector && *o->label_selector)
        q_add(b, "labelSelector", o->label_selector);
    if (o->field_selector && *o->field_selector)
        q_add(b, "fieldSelector", o->field_selector);
    if (o->resource_version && *o->resource_version)
        q_add(b, "resourceVersion", o->resource_version);
    if (o->resource_version_match && *o->resource_version_match)
        q_add(b, "resourceVersionMatch", o->resource_version_match);
    if (o->limit > 0) {
        snprintf(num, sizeof num, "%lld", (long long)o->limit);
        q_add(b, "limit", num);
    }
    if (o->continue_token && *o->continue_token)
        q_add(b, "continue", o->continue_token);
    if (o->timeout_seconds.set) {
        snprintf(num, sizeof num, "%lld", (long long)o->timeout_seconds.value);
        q_add(b, "timeoutSeconds", num);
    }
    if (o->allow_watch_bookmarks)
        q_add(b, "allowWatchBookmarks", "true");
    if (o->send_initial_events)
        q_add(b, "sendInitialEvents", "true");
}

static void q_add_write_opts(ckube__strbuf *b, const ckube_write_opts *wo, bool apply)
{
    if (!wo)
        return;
    if (wo->dry_run)
        q_add(b, "dryRun", "All");
    if (wo->field_manager && *wo->field_manager)
        q_add(b, "fieldManager", wo->field_manager);
    if (wo->field_validation && *wo->field_validation)
        q_add(b, "fieldValidation", wo->field_validation);
    if (apply && wo->force)
        q_add(b, "force", "true");
}

/* Path of (r, ns, name, sub) as a strbuf to append a query to. */
static int start_path(ckube__strbuf *b, const ckube_gvr *r, const char *ns, const char *name,
                      const char *sub, ckube_status **err)
{
    char *p = ckube_resource_path(r, ns, name, sub);
    if (!p) {
        if (err)
            *err = ckube__local_error("resource needs a version and a resource name");
        return -1;
    }
    ckube__sb_add(b, p);
    free(p);
    return 0;
}

static int take_path(ckube__strbuf *b, char **out, ckube_status **err)
{
    *out = ckube__sb_take(b);
    if (!*out) {
        if (err)
            *err = ckube__local_error("out of memory");
        return -1;
    }
    return 0;
}

/* Sends rq; on success decodes the body into *out when out is non-NULL. */
static int call(ckube_client *c, ckube__req *rq, json_t **out, ckube_status **err)
{
    if (out)
        *out = NULL;
    ckube_response resp;
    int rc = ckube__do(c, rq, &resp, err);
    if (rc == 0 && out) {
        char *jerr = NULL;
        *out = ckube_json_loads(resp.body, resp.body_len, &jerr);
        if (!*out) {
            if (err)
                *err = ckube__local_error("decoding the answer to %s %s%s: %s", rq->method,
                                          c->base_url, rq->path, jerr ? jerr : "invalid JSON");
            rc = -1;
        }
        free(jerr);
    }
    ckube_response_free(&resp);
    return rc;
}

static char *encode(const json_t *obj, size_t *len, ckube_status **err)
{
    char *s = obj ? ckube_json_dumps(obj, len) : NULL;
    if (!s && err)
        *err = ckube__local_error(obj ? "cannot encode the object" : "no object given");
    return s;
}

int ckube_get(ckube_client *c, const ckube_gvr *r, const char *ns, const char *name, json_t **out,
              ckube_status **err)
{
    ckube__strbuf b = {0};
    char *path;
    if (out)
        *out = NULL;
    if (!name || !*name) {
        if (err)
            *err = ckube__local_error("resource name may not be empty");
        return -1;
    }
    if (start_path(&b, r, ns, name, NULL, err) || take_path(&b, &path, err))
        return -1;
    ckube__req rq = {
        .method = "GET", .path = path, .group = r->group, .resource = r->resource, .name = name};
    int rc = call(c, &rq, out, err);
    free(path);
    return rc;
}

int ckube_list(ckube_client *c, const ckube_gvr *r, const char *ns, const ckube_list_opts *opts,
               json_t **out, ckube_status **err)
{
    ckube__strbuf b = {0};
    char *path;
    if (out)
        *out = NULL;
    if (start_path(&b, r, ns, NULL, NULL, err))
        return -1;
    q_add_list_opts(&b, opts);
    if (take_path(&b, &path, err))
        return -1;
    ckube__req rq = {.method = "GET",
                     .path = path,
                     .group = r->group,
                     .resource = r->resource,
                     .accept = opts && opts->partial_metadata ? CKUBE__ACCEPT_PARTIAL_LIST : NULL};
    int rc = call(c, &rq, out, err);
    free(path);
    return rc;
}

/* The informer's list (see client_internal.h): ckube_list's request,
 * its body streamed into the sink. */
int ckube__list_stream(ckube_client *c, const ckube_gvr *r, const char *ns,
                       const ckube_list_opts *opts, const ckube__body_sink *sink, char **what,
                       ckube_status **err)
{
    ckube__strbuf b = {0};
    char *path;
    *what = NULL;
    if (start_path(&b, r, ns, NULL, NULL, err))
        return -1;
    q_add_list_opts(&b, opts);
    if (take_path(&b, &path, err))
        return -1;
    ckube__req rq = {.method = "GET",
                     .path = path,
                     .group = r->group,
                     .resource = r->resource,
                     .accept = opts && opts->partial_metadata ? CKUBE__ACCEPT_PARTIAL_LIST : NULL};
    int rc = ckube__do_stream(c, &rq, sink, err);
    if (rc != -1 && asprintf(what, "GET %s%s", c->base_url, path) < 0)
        *what = NULL;
    free(path);
    return rc;
}

int ckube_list_all(ckube_client *c, const ckube_gvr *r, const char *ns, const ckube_list_opts *opts,
                   json_t **out, ckube_status **err)
{
    ckube_list_opts o = opts ? *opts : (ckube_list_opts){0};
    if (o.limit <= 0)
        o.limit = 500;
    json_t *result = NULL;
    char *cont = NULL;
    *out = NULL;
    for (;;) {
        json_t *page = NULL;
        ckube_status *e = NULL;
        if (ckube_list(c, r, ns, &o, &page, &e) != 0) {
            /* An expired continue token: fall back to one full list, as
             * client-go's pager does (FullListIfExpired). */
            if (cont && ckube_is_gone(e)) {
                ckube_status_free(e);
                json_decref(result);
                free(cont);
                ckube_list_opts full = opts ? *opts : (ckube_list_opts){0};
                full.limit = 0;
                full.continue_token = NULL;
                return ckube_list(c, r, ns, &full, out, err);
            }
            json_decref(result);
            free(cont);
            if (err)
                *err = e;
            else
                ckube_status_free(e);
            return -1;
        }
        const char *next = json_string_value(ckube_json_get_path(page, "metadata.continue"));
        char *next_copy = next && *next ? strdup(next) : NULL;
        if (!result) {
            result = page;
            if (!json_is_array(json_object_get(result, "items")))
                json_object_set_new(result, "items", json_array());
        } else {
            json_array_extend(json_object_get(result, "items"), json_object_get(page, "items"));
            json_decref(page);
        }
        free(cont);
        cont = next_copy;
        if (!cont)
            break;
        o.continue_token = cont;
        /* The token carries the snapshot: a resourceVersion next to it
         * is refused by servers. */
        o.resource_version = NULL;
        o.resource_version_match = NULL;
    }
    json_t *md = json_object_get(result, "metadata");
    if (json_is_object(md)) {
        json_object_del(md, "continue");
        json_object_del(md, "remainingItemCount");
    }
    *out = result;
    return 0;
}

/* POST or PUT of `obj` to r/ns[/path_name][/sub]; `name` names the
 * object in error messages. */
static int write_object(ckube_client *c, const char *method, const ckube_gvr *r, const char *ns,
                        const char *path_name, const char *name, const json_t *obj,
                        const ckube_write_opts *wo, json_t **out, ckube_status **err)
{
    size_t len;
    char *body = encode(obj, &len, err);
    if (!body)
        return -1;
    ckube__strbuf b = {0};
    char *path;
    if (start_path(&b, r, ns, path_name, wo ? wo->subresource : NULL, err)) {
        free(body);
        return -1;
    }
    q_add_write_opts(&b, wo, false);
    if (take_path(&b, &path, err)) {
        free(body);
        return -1;
    }
    ckube__req rq = {.method = method,
                     .path = path,
                     .body = body,
                     .body_len = len,
                     .group = r->group,
                     .resource = r->resource,
                     .name = name};
    int rc = call(c, &rq, out, err);
    free(path);
    free(body);
    return rc;
}

int ckube_create(ckube_client *c, const ckube_gvr *r, const char *ns, const json_t *obj,
                 const ckube_write_opts *wo, json_t **out, ckube_status **err)
{
    if (out)
        *out = NULL;
    const char *sub = wo ? wo->subresource : NULL;
    /* A create goes to the collection, except on a subresource. */
    const char *path_name = sub && *sub ? ckube_obj_name(obj) : NULL;
    if (sub && *sub && !path_name) {
        if (err)
            *err = ckube__local_error("creating subresource %s needs metadata.name", sub);
        return -1;
    }
    return write_object(c, "POST", r, ns, path_name, ckube_obj_name(obj), obj, wo, out, err);
}

int ckube_update(ckube_client *c, const ckube_gvr *r, const char *ns, const json_t *obj,
                 const ckube_write_opts *wo, json_t **out, ckube_status **err)
{
    if (out)
        *out = NULL;
    const char *name = ckube_obj_name(obj);
    if (!name || !*name) {
        if (err)
            *err = ckube__local_error("name is required (metadata.name) for an update");
        return -1;
    }
    return write_object(c, "PUT", r, ns, name, name, obj, wo, out, err);
}

int ckube_update_status(ckube_client *c, const ckube_gvr *r, const char *ns, const json_t *obj,
                        const ckube_write_opts *wo, json_t **out, ckube_status **err)
{
    ckube_write_opts o = wo ? *wo : (ckube_write_opts){0};
    o.subresource = "status";
    return ckube_update(c, r, ns, obj, &o, out, err);
}

static const char *patch_content_type(ckube_patch_type t)
{
    switch (t) {
    case CKUBE_PATCH_JSON:
        return "application/json-patch+json";
    case CKUBE_PATCH_MERGE:
        return "application/merge-patch+json";
    case CKUBE_PATCH_STRATEGIC:
        return "application/strategic-merge-patch+json";
    case CKUBE_PATCH_APPLY:
        return "application/apply-patch+yaml";
    }
    return NULL;
}

int ckube_patch(ckube_client *c, const ckube_gvr *r, const char *ns, const char *name,
                ckube_patch_type type, const char *patch, size_t len, const ckube_write_opts *wo,
                json_t **out, ckube_status **err)
{
    ckube__strbuf b = {0};
    char *path;
    if (out)
        *out = NULL;
    const char *ct = patch_content_type(type);
    if (!ct || !name || !*name || !patch) {
        if (err)
            *err = ckube__local_error(!ct ? "unknown patch type %d"
                                          : "a patch needs a resource name and a body (type %d)",
                                      (int)type);
        return -1;
    }
    if (start_path(&b, r, ns, name, wo ? wo->subresource : NULL, err))
        return -1;
    q_add_write_opts(&b, wo, type == CKUBE_PATCH_APPLY);
    if (take_path(&b, &path, err))
        return -1;
    ckube__req rq = {.method = "PATCH",
                     .path = path,
                     .body = patch,
                     .body_len = len,
                     .content_type = ct,
                     .group = r->group,
                     .resource = r->resource,
                     .name = name};
    int rc = call(c, &rq, out, err);
    free(path);
    return rc;
}

/* A DeleteOptions body; always sent (also when empty) as client-go does. */
static char *delete_body(const ckube_delete_opts *o, size_t *len)
{
    json_t *j = json_object();
    json_object_set_new(j, "kind", json_string("DeleteOptions"));
    json_object_set_new(j, "apiVersion", json_string("v1"));
    if (o) {
        if (o->grace_period_seconds.set)
            json_object_set_new(j, "gracePeriodSeconds",
                                json_integer(o->grace_period_seconds.value));
        if (o->precondition_uid || o->precondition_resource_version) {
            json_t *p = json_object();
            if (o->precondition_uid)
                json_object_set_new(p, "uid", json_string(o->precondition_uid));
            if (o->precondition_resource_version)
                json_object_set_new(p, "resourceVersion",
                                    json_string(o->precondition_resource_version));
            json_object_set_new(j, "preconditions", p);
        }
        if (o->propagation_policy && *o->propagation_policy)
            json_object_set_new(j, "propagationPolicy", json_string(o->propagation_policy));
        if (o->dry_run) {
            json_t *a = json_array();
            json_array_append_new(a, json_string("All"));
            json_object_set_new(j, "dryRun", a);
        }
    }
    char *s = ckube_json_dumps(j, len);
    json_decref(j);
    return s;
}

int ckube_delete(ckube_client *c, const ckube_gvr *r, const char *ns, const char *name,
                 const ckube_delete_opts *o, json_t **out, ckube_status **err)
{
    ckube__strbuf b = {0};
    char *path;
    if (out)
        *out = NULL;
    if (!name || !*name) {
        if (err)
            *err = ckube__local_error("resource name may not be empty");
        return -1;
    }
    size_t len;
    char *body = delete_body(o, &len);
    if (!body || start_path(&b, r, ns, name, NULL, err) || take_path(&b, &path, err)) {
        if (!body && err)
            *err = ckube__local_error("out of memory");
        free(body);
        return -1;
    }
    ckube__req rq = {.method = "DELETE",
                     .path = path,
                     .body = body,
                     .body_len = len,
                     .group = r->group,
                     .resource = r->resource,
                     .name = name};
    int rc = call(c, &rq, out, err);
    free(path);
    free(body);
    return rc;
}

int ckube_delete_collection(ckube_client *c, const ckube_gvr *r, const char *ns,
                            const ckube_list_opts *sel, const ckube_delete_opts *o,
                            ckube_status **err)
{
    ckube__strbuf b = {0};
    char *path;
    size_t len;
    char *body = delete_body(o, &len);
    if (!body || start_path(&b, r, ns, NULL, NULL, err)) {
        if (!body && err)
            *err = ckube__local_error("out of memory");
        free(body);
        return -1;
    }
    q_add_list_opts(&b, sel);
    if (take_path(&b, &path, err)) {
        free(body);
        return -1;
    }
    ckube__req rq = {.method = "DELETE",
                     .path = path,
                     .body = body,
                     .body_len = len,
                     .group = r->group,
                     .resource = r->resource};
    int rc = call(c, &rq, NULL, err);
    free(path);
    free(body);
    return rc;
}

char *ckube__watch_path(const ckube_gvr *r, const char *ns, const ckube_list_opts *opts)
{
    ckube__strbuf b = {0};
    if (start_path(&b, r, ns, NULL, NULL, NULL))
        return NULL;
    q_add(&b, "watch", "true");
    q_add_list_opts(&b, opts);
    return ckube__sb_take(&b);
}
