/* The Status error model; see ckube/status.h. */
#include "ckube/status.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *xstrdup(const char *s)
{
    return s ? strdup(s) : NULL;
}

static char *vfmt(const char *fmt, va_list ap)
{
    char *out = NULL;
    if (vasprintf(&out, fmt, ap) < 0)
        return NULL;
    return out;
}

ckube_status *ckube_status_new(int code, const char *reason, const char *fmt, ...)
{
    ckube_status *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    st->code = code;
    st->status = strdup(code >= 200 && code < 300 ? "Success" : "Failure");
    st->reason = xstrdup(reason);
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        st->message = vfmt(fmt, ap);
        va_end(ap);
    }
    return st;
}

ckube_status *ckube_status_success(void)
{
    return ckube_status_new(200, NULL, NULL);
}

void ckube_status_free(ckube_status *st)
{
    if (!st)
        return;
    free(st->status);
    free(st->reason);
    free(st->message);
    free(st->name);
    free(st->group);
    free(st->kind);
    free(st->uid);
    free(st->list_continue);
    for (size_t i = 0; i < st->ncauses; i++) {
        free(st->causes[i].type);
        free(st->causes[i].message);
        free(st->causes[i].field);
    }
    free(st->causes);
    free(st);
}

static void replace(char **dst, const char *src)
{
    if (!src)
        return;
    free(*dst);
    *dst = strdup(src);
}

void ckube_status_set_details(ckube_status *st, const char *name, const char *group,
                              const char *kind)
{
    replace(&st->name, name);
    replace(&st->group, group);
    replace(&st->kind, kind);
    st->has_details = 1;
}

void ckube_status_add_cause(ckube_status *st, const char *type, const char *field, const char *fmt,
                            ...)
{
    st->has_details = 1;
    if (st->ncauses >= CKUBE_STATUS_MAX_CAUSES) {
        st->ncauses_dropped++;
        return;
    }
    /* Room doubles at powers of two: no capacity field, no quadratic
     * copying for many causes. */
    size_t n = st->ncauses;
    if ((n & (n - 1)) == 0) {
        ckube_status_cause *grown = realloc(st->causes, (n ? 2 * n : 1) * sizeof *grown);
        if (!grown)
            return;
        st->causes = grown;
    }
    ckube_status_cause *c = &st->causes[st->ncauses++];
    c->type = xstrdup(type);
    c->field = xstrdup(field);
    c->message = NULL;
    if (fmt) {
        va_list ap;
        va_start(ap, fmt);
        c->message = vfmt(fmt, ap);
        va_end(ap);
    }
    st->has_details = 1;
}

static void set_str(json_t *o, const char *k, const char *v)
{
    if (v)
        json_object_set_new(o, k, json_string(v));
}

json_t *ckube_status_to_json(const ckube_status *st)
{
    json_t *j = json_object();
    json_object_set_new(j, "kind", json_string("Status"));
    json_object_set_new(j, "apiVersion", json_string("v1"));
    json_t *meta = json_object();
    set_str(meta, "continue", st->list_continue);
    json_object_set_new(j, "metadata", meta);
    set_str(j, "status", st->status ? st->status : "Failure");
    set_str(j, "message", st->message);
    set_str(j, "reason", st->reason);
    if (st->has_details || st->name || st->group || st->kind || st->uid || st->ncauses ||
        st->retry_after_seconds) {
        json_t *d = json_object();
        set_str(d, "name", st->name);
        set_str(d, "group", st->group);
        set_str(d, "kind", st->kind);
        set_str(d, "uid", st->uid);
        if (st->ncauses) {
            json_t *causes = json_array();
            for (size_t i = 0; i < st->ncauses; i++) {
                json_t *c = json_object();
                set_str(c, "reason", st->causes[i].type);
                set_str(c, "message", st->causes[i].message);
                set_str(c, "field", st->causes[i].field);
                json_array_append_new(causes, c);
            }
            json_object_set_new(d, "causes", causes);
        }
        if (st->retry_after_seconds)
            json_object_set_new(d, "retryAfterSeconds", json_integer(st->retry_after_seconds));
        json_object_set_new(j, "details", d);
    }
    json_object_set_new(j, "code", json_integer(st->code));
    return j;
}

static char *get_str(const json_t *o, const char *k)
{
    const char *v = json_string_value(json_object_get(o, k));
    return v ? strdup(v) : NULL;
}

ckube_status *ckube_status_from_json(const json_t *j, int http_code)
{
    const char *kind = json_string_value(json_object_get(j, "kind"));
    if (!kind || strcmp(kind, "Status") != 0)
        return NULL;
    ckube_status *st = calloc(1, sizeof *st);
    if (!st)
        return NULL;
    json_t *code = json_object_get(j, "code");
    st->code = json_is_integer(code) ? (int)json_integer_value(code) : http_code;
    st->status = get_str(j, "status");
    st->reason = get_str(j, "reason");
    st->message = get_str(j, "message");
    st->list_continue = get_str(json_object_get(j, "metadata"), "continue");
    json_t *d = json_object_get(j, "details");
    if (json_is_object(d)) {
        st->has_details = 1;
        st->name = get_str(d, "name");
        st->group = get_str(d, "group");
        st->kind = get_str(d, "kind");
        st->uid = get_str(d, "uid");
        json_t *ra = json_object_get(d, "retryAfterSeconds");
        if (json_is_integer(ra))
            st->retry_after_seconds = (int)json_integer_value(ra);
        json_t *causes = json_object_get(d, "causes");
        size_t i;
        json_t *c;
        json_array_foreach(causes, i, c)
        {
            ckube_status_add_cause(st, json_string_value(json_object_get(c, "reason")),
                                   json_string_value(json_object_get(c, "field")), "%s",
                                   json_string_value(json_object_get(c, "message"))
                                       ? json_string_value(json_object_get(c, "message"))
                                       : "");
        }
    }
    return st;
}

void ckube_qualified_resource(char *buf, size_t n, const char *group, const char *resource)
{
    if (group && *group)
        snprintf(buf, n, "%s.%s", resource, group);
    else
        snprintf(buf, n, "%s", resource);
}

ckube_status *ckube_status_not_found(const char *group, const char *resource, const char *name)
{
    char qr[256];
    ckube_qualified_resource(qr, sizeof qr, group, resource);
    ckube_status *st =
        name && *name
            ? ckube_status_new(404, CKUBE_REASON_NOT_FOUND, "%s \"%s\" not found", qr, name)
            : ckube_status_new(404, CKUBE_REASON_NOT_FOUND, "%s not found", qr);
    ckube_status_set_details(st, name, group && *group ? group : NULL, resource);
    return st;
}

ckube_status *ckube_status_already_exists(const char *group, const char *resource, const char *name)
{
    char qr[256];
    ckube_qualified_resource(qr, sizeof qr, group, resource);
    ckube_status *st =
        ckube_status_new(409, CKUBE_REASON_ALREADY_EXISTS, "%s \"%s\" already exists", qr, name);
    ckube_status_set_details(st, name, group && *group ? group : NULL, resource);
    return st;
}

ckube_status *ckube_status_conflict(const char *group, const char *resource, const char *name,
                                    const char *why)
{
    char qr[256];
    ckube_qualified_resource(qr, sizeof qr, group, resource);
    ckube_status *st =
        ckube_status_new(409, CKUBE_REASON_CONFLICT,
                         "Operation cannot be fulfilled on %s \"%s\": %s", qr, name, why);
    ckube_status_set_details(st, name, group && *group ? group : NULL, resource);
    return st;
}

ckube_status *ckube_status_bad_request(const char *fmt, ...)
{
    ckube_status *st = ckube_status_new(400, CKUBE_REASON_BAD_REQUEST, NULL);
    va_list ap;
    va_start(ap, fmt);
    st->message = vfmt(fmt, ap);
    va_end(ap);
    return st;
}

ckube_status *ckube_status_internal(const char *fmt, ...)
{
    ckube_status *st = ckube_status_new(500, CKUBE_REASON_INTERNAL, NULL);
    va_list ap;
    va_start(ap, fmt);
    st->message = vfmt(fmt, ap);
    va_end(ap);
    return st;
}

ckube_status *ckube_status_invalid_begin(const char *group, const char *kind, const char *name)
{
    ckube_status *st = ckube_status_new(422, CKUBE_REASON_INVALID, NULL);
    ckube_status_set_details(st, name, group && *group ? group : NULL, kind);
    return st;
}

/* Upstream: `Kind "name" is invalid: field: Invalid value: ...: detail`
 * with several causes joined as "[a, b]". */
void ckube_status_invalid_finish(ckube_status *st)
{
    size_t cap = 256, len = 0;
    char *causes = malloc(cap);
    if (!causes)
        return;
    causes[0] = 0;
    for (size_t i = 0; i < st->ncauses; i++) {
        const char *f = st->causes[i].field ? st->causes[i].field : "";
        const char *m = st->causes[i].message ? st->causes[i].message : "";
        size_t need = strlen(f) + strlen(m) + 8;
        if (len + need >= cap) {
            cap = (len + need) * 2;
            char *n = realloc(causes, cap);
            if (!n)
                break;
            causes = n;
        }
        len += (size_t)snprintf(causes + len, cap - len, "%s%s%s%s", i ? ", " : "", f,
                                *f ? ": " : "", m);
    }
    free(st->message);
    /* Upstream names the qualified kind: "Deployment.apps", "Foo.example.com". */
    char qkind[512];
    snprintf(qkind, sizeof qkind, "%s%s%s", st->kind ? st->kind : "Object",
             st->group && *st->group ? "." : "", st->group && *st->group ? st->group : "");
    const char *kind = qkind;
    const char *name = st->name ? st->name : "";
    if (st->ncauses_dropped) {
        if (asprintf(&st->message, "%s \"%s\" is invalid: [%s, and %zu more errors]", kind, name,
                     causes, st->ncauses_dropped) < 0)
            st->message = NULL;
    } else if (st->ncauses > 1) {
        if (asprintf(&st->message, "%s \"%s\" is invalid: [%s]", kind, name, causes) < 0)
            st->message = NULL;
    } else if (asprintf(&st->message, "%s \"%s\" is invalid: %s", kind, name, causes) < 0) {
        st->message = NULL;
    }
    free(causes);
}
