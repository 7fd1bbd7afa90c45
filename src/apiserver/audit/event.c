/* event.c - encoding audit events (see event.h). The JSON writer here is
 * Go's encoding/json, not jansson's: HTML-safe escapes, float64 printed
 * as Go prints it, map keys sorted. It writes straight into one growing
 * buffer from the caller's borrowed pieces, so an event costs one
 * allocation (plus its growth) and no tree. */
#include "apiserver/audit/event.h"

#include <arpa/inet.h>
#include <inttypes.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/utf8.h"
#include "common/xalloc.h"

/* ---- a growing buffer ------------------------------------------------------ */

typedef struct obuf {
    char *p;
    size_t len, cap;
} obuf;

static void ob_grow(obuf *b, size_t need)
{
    if (b->cap - b->len > need)
        return;
    size_t cap = b->cap ? b->cap : 1024;
    while (cap - b->len <= need)
        cap *= 2;
    b->p = xrealloc(b->p, cap);
    b->cap = cap;
}

static void ob_put(obuf *b, const char *s, size_t n)
{
    ob_grow(b, n);
    memcpy(b->p + b->len, s, n);
    b->len += n;
}

static void ob_puts(obuf *b, const char *s)
{
    ob_put(b, s, strlen(s));
}

static void ob_putc(obuf *b, char c)
{
    ob_grow(b, 1);
    b->p[b->len++] = c;
}

static char *ob_take(obuf *b, size_t *len)
{
    ob_grow(b, 1);
    b->p[b->len] = '\0';
    if (len)
        *len = b->len;
    return b->p;
}

/* ---- encoding/json ----------------------------------------------------------- */

/* A string as encoding/json writes it with HTML escaping on (the
 * default, and what the json serializer of the log backend uses). */
static void js_string_n(obuf *b, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    const unsigned char *p = (const unsigned char *)s, *end = p + n;
    ob_putc(b, '"');
    while (p < end) {
        const unsigned char *run = p;
        while (p < end && *p >= 0x20 && *p < 0x80 && *p != '"' && *p != '\\' && *p != '<' &&
               *p != '>' && *p != '&')
            p++;
        if (p > run)
            ob_put(b, (const char *)run, (size_t)(p - run));
        if (p >= end)
            break;
        unsigned char c = *p;
        if (c < 0x80) {
            switch (c) {
            case '"':
                ob_put(b, "\\\"", 2);
                break;
            case '\\':
                ob_put(b, "\\\\", 2);
                break;
            case '\b':
                ob_put(b, "\\b", 2);
                break;
            case '\f':
                ob_put(b, "\\f", 2);
                break;
            case '\n':
                ob_put(b, "\\n", 2);
                break;
            case '\r':
                ob_put(b, "\\r", 2);
                break;
            case '\t':
                ob_put(b, "\\t", 2);
                break;
            default: {
                char u[6] = {'\\', 'u', '0', '0', hex[c >> 4], hex[c & 15]};
                ob_put(b, u, 6);
            }
            }
            p++;
            continue;
        }
        uint32_t r;
        size_t l = ckube__utf8_decode(p, (size_t)(end - p), &r);
        if (l == 0) {
            ob_put(b, "\\ufffd", 6);
            p++;
        } else if (r == 0x2028 || r == 0x2029) {
            ob_puts(b, r == 0x2028 ? "\\u2028" : "\\u2029");
            p += l;
        } else {
            ob_put(b, (const char *)p, l);
            p += l;
        }
    }
    ob_putc(b, '"');
}

static void js_string(obuf *b, const char *s)
{
    js_string_n(b, s ? s : "", s ? strlen(s) : 0);
}

/* A float64 as encoding/json prints it: the shortest digits that read
 * back as the same value, in %e form below 1e-6 and from 1e21 on
 * ("1e-7", "1e+21"), else plain ("0.000001", "100000000000000000000"). */
static void js_float(obuf *b, double d)
{
    if (!isfinite(d)) {
        ob_puts(b, "null"); /* jansson holds no such value; never reached */
        return;
    }
    char tmp[64];
    int prec = 0;
    for (prec = 0; prec < 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec, d);
        if (strtod(tmp, NULL) == d)
            break;
    }
    /* tmp is [-]D[.DDD]e[+-]XX: split it into digits and exponent. */
    char digits[32];
    size_t nd = 0;
    const char *q = tmp;
    bool neg = *q == '-';
    if (neg)
        q++;
    for (; *q && *q != 'e'; q++)
        if (*q >= '0' && *q <= '9')
            digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    if (neg)
        ob_putc(b, '-');
    double a = fabs(d);
    if (a != 0 && (a < 1e-6 || a >= 1e21)) {
        ob_putc(b, digits[0]);
        if (nd > 1) {
            ob_putc(b, '.');
            ob_put(b, digits + 1, nd - 1);
        }
        snprintf(tmp, sizeof tmp, "e%c%d", exp10 < 0 ? '-' : '+', abs(exp10));
        ob_puts(b, tmp);
        return;
    }
    if (a == 0) {
        ob_putc(b, '0');
        return;
    }
    if (exp10 < 0) {
        ob_put(b, "0.", 2);
        for (int i = -1; i > exp10; i--)
            ob_putc(b, '0');
        ob_put(b, digits, nd);
        return;
    }
    size_t ip = (size_t)exp10 + 1; /* digits before the point */
    if (nd <= ip) {
        ob_put(b, digits, nd);
        for (size_t i = nd; i < ip; i++)
            ob_putc(b, '0');
    } else {
        ob_put(b, digits, ip);
        ob_putc(b, '.');
        ob_put(b, digits + ip, nd - ip);
    }
}

/* Where the managedFields of an object being written sit: what
 * copyWithoutManagedFields clears. */
enum mf_at {
    MF_NONE = 0,   /* write as is */
    MF_OBJECT = 1, /* an object: its metadata's managedFields go */
    MF_META = 2,   /* a metadata object: its managedFields go */
    MF_TOP = 3,    /* the logged object: MF_OBJECT, plus list items and table rows */
    MF_ROWS = 4,   /* a Table's rows: each row's object is an MF_OBJECT */
    MF_ROW = 5,    /* one row */
};

static bool is_table(const json_t *v)
{
    const char *kind = json_string_value(json_object_get(v, "kind"));
    const char *av = json_string_value(json_object_get(v, "apiVersion"));
    return kind && av && !strcmp(kind, "Table") && !strncmp(av, "meta.k8s.io/", 12);
}

static void js_value(obuf *b, const json_t *v, enum mf_at at, int depth)
{
    if (depth > 10000)
        xalloc_die(); /* a cyclic tree: a programming error */
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        bool table = at == MF_TOP && is_table(v);
        ob_putc(b, '{');
        bool first = true;
        const char *key;
        json_t *val;
        void *it;
        for (it = json_object_iter((json_t *)v); it; it = json_object_iter_next((json_t *)v, it)) {
            key = json_object_iter_key(it);
            val = json_object_iter_value(it);
            size_t klen = json_object_iter_key_len(it);
            enum mf_at sub = MF_NONE;
            if (at == MF_META && !strcmp(key, "managedFields"))
                continue;
            if ((at == MF_OBJECT || at == MF_TOP) && !strcmp(key, "metadata") &&
                json_is_object(val))
                sub = MF_META;
            else if (at == MF_TOP && !strcmp(key, "items") && json_is_array(val))
                sub = MF_OBJECT; /* each item */
            else if (table && !strcmp(key, "rows") && json_is_array(val))
                sub = MF_ROWS;
            else if (at == MF_ROW && !strcmp(key, "object"))
                sub = MF_OBJECT;
            if (!first)
                ob_putc(b, ',');
            first = false;
            js_string_n(b, key, klen);
            ob_putc(b, ':');
            js_value(b, val, sub, depth + 1);
        }
        ob_putc(b, '}');
        break;
    }
    case JSON_ARRAY: {
        /* An array keeps what its elements are: the items of a list
         * (MF_OBJECT), the rows of a table (MF_ROW). */
        enum mf_at elem = at == MF_OBJECT ? MF_OBJECT : at == MF_ROWS ? MF_ROW : MF_NONE;
        ob_putc(b, '[');
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                ob_putc(b, ',');
            js_value(b, json_array_get(v, i), elem, depth + 1);
        }
        ob_putc(b, ']');
        break;
    }
    case JSON_STRING:
        js_string_n(b, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER: {
        char tmp[24];
        snprintf(tmp, sizeof tmp, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        ob_puts(b, tmp);
        break;
    }
    case JSON_REAL:
        js_float(b, json_real_value(v));
        break;
    case JSON_TRUE:
        ob_puts(b, "true");
        break;
    case JSON_FALSE:
        ob_puts(b, "false");
        break;
    default:
        ob_puts(b, "null");
        break;
    }
}

/* ---- the event ------------------------------------------------------------ */

static bool set(const char *s)
{
    return s && *s;
}

/* ,"key":"value" when value is not empty (omitempty). */
static void field_opt(obuf *b, bool *first, const char *key, const char *value)
{
    if (!set(value))
        return;
    if (!*first)
        ob_putc(b, ',');
    *first = false;
    ob_putc(b, '"');
    ob_puts(b, key);
    ob_put(b, "\":", 2);
    js_string(b, value);
}

static void key(obuf *b, const char *k)
{
    ob_put(b, ",\"", 2);
    ob_puts(b, k);
    ob_put(b, "\":", 2);
}

static void string_array(obuf *b, const char *const *v, size_t n)
{
    ob_putc(b, '[');
    for (size_t i = 0; i < n; i++) {
        if (i)
            ob_putc(b, ',');
        js_string(b, v[i]);
    }
    ob_putc(b, ']');
}

/* Sorts indices by key (bytewise, as Go sorts map keys); equal keys keep
 * their order, so the first given is seen first. */
typedef struct keyed {
    const char *key;
    size_t idx;
} keyed;

static int by_key(const void *a, const void *b)
{
    const keyed *x = a, *y = b;
    int c = strcmp(x->key, y->key);
    return c ? c : (x->idx > y->idx) - (x->idx < y->idx);
}

static keyed *sorted_keys(size_t n, const char *(*get)(const void *, size_t), const void *arr)
{
    keyed *k = xcalloc(n, sizeof *k);
    for (size_t i = 0; i < n; i++) {
        const char *s = get(arr, i);
        k[i] = (keyed){s ? s : "", i};
    }
    qsort(k, n, sizeof *k, by_key);
    return k;
}

static const char *extra_key(const void *arr, size_t i)
{
    return ((const audit_user_extra *)arr)[i].key;
}

static const char *annotation_key(const void *arr, size_t i)
{
    return ((const audit_annotation *)arr)[i].key;
}

static void user_info(obuf *b, const audit_user_info *u)
{
    bool first = true;
    ob_putc(b, '{');
    field_opt(b, &first, "username", u->username);
    field_opt(b, &first, "uid", u->uid);
    if (u->ngroups) {
        ob_puts(b, first ? "\"groups\":" : ",\"groups\":");
        first = false;
        string_array(b, u->groups, u->ngroups);
    }
    if (u->nextra) {
        ob_puts(b, first ? "\"extra\":{" : ",\"extra\":{");
        keyed *k = sorted_keys(u->nextra, extra_key, u->extra);
        for (size_t i = 0; i < u->nextra; i++) {
            if (i && !strcmp(k[i].key, k[i - 1].key))
                continue; /* a map holds a key once */
            const audit_user_extra *x = &u->extra[k[i].idx];
            if (i)
                ob_putc(b, ',');
            js_string(b, k[i].key);
            ob_putc(b, ':');
            if (x->values)
                string_array(b, x->values, x->nvalues);
            else
                ob_puts(b, "null");
        }
        free(k);
        ob_putc(b, '}');
    }
    ob_putc(b, '}');
}

/* metav1.MicroTime: RFC 3339 in UTC with microseconds; null when zero. */
static void micro_time(obuf *b, const struct timespec *t)
{
    if (t->tv_sec == 0 && t->tv_nsec == 0) {
        ob_puts(b, "null");
        return;
    }
    struct tm tm;
    time_t s = t->tv_sec;
    gmtime_r(&s, &tm);
    char tmp[64];
    snprintf(tmp, sizeof tmp, "\"%04d-%02d-%02dT%02d:%02d:%02d.%06ldZ\"", tm.tm_year + 1900,
             tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
             (long)(t->tv_nsec / 1000));
    ob_puts(b, tmp);
}

char *audit_event_encode(const audit_event *e, size_t *len)
{
    obuf b = {0};
    ob_puts(&b, "{\"kind\":\"Event\",\"apiVersion\":\"audit.k8s.io/v1\",\"level\":");
    js_string(&b, audit_level_name(e->level));
    key(&b, "auditID");
    js_string(&b, e->audit_id);
    key(&b, "stage");
    js_string(&b, audit_stage_name(e->stage));
    key(&b, "requestURI");
    js_string(&b, e->request_uri);
    key(&b, "verb");
    js_string(&b, e->verb);
    key(&b, "user");
    user_info(&b, &e->user);
    if (e->impersonated_user) {
        key(&b, "impersonatedUser");
        user_info(&b, e->impersonated_user);
    }
    if (set(e->impersonation_constraint)) {
        key(&b, "authenticationMetadata");
        ob_puts(&b, "{\"impersonationConstraint\":");
        js_string(&b, e->impersonation_constraint);
        ob_putc(&b, '}');
    }
    if (e->nsource_ips) {
        key(&b, "sourceIPs");
        string_array(&b, e->source_ips, e->nsource_ips);
    }
    if (set(e->user_agent)) {
        key(&b, "userAgent");
        size_t n = strlen(e->user_agent);
        if (n > AUDIT_USER_AGENT_MAX) {
            /* Cut at the byte, as Go slices a string: a rune cut in two
             * shows as U+FFFD. */
            char *cut = xmalloc(AUDIT_USER_AGENT_MAX + sizeof AUDIT_USER_AGENT_TRUNCATED);
            memcpy(cut, e->user_agent, AUDIT_USER_AGENT_MAX);
            memcpy(cut + AUDIT_USER_AGENT_MAX, AUDIT_USER_AGENT_TRUNCATED,
                   sizeof AUDIT_USER_AGENT_TRUNCATED);
            js_string(&b, cut);
            free(cut);
        } else {
            js_string(&b, e->user_agent);
        }
    }
    if (e->object_ref) {
        const audit_object_ref *o = e->object_ref;
        bool first = true;
        key(&b, "objectRef");
        ob_putc(&b, '{');
        field_opt(&b, &first, "resource", o->resource);
        field_opt(&b, &first, "namespace", o->namespace_);
        field_opt(&b, &first, "name", o->name);
        field_opt(&b, &first, "uid", o->uid);
        field_opt(&b, &first, "apiGroup", o->api_group);
        field_opt(&b, &first, "apiVersion", o->api_version);
        field_opt(&b, &first, "resourceVersion", o->resource_version);
        field_opt(&b, &first, "subresource", o->subresource);
        ob_putc(&b, '}');
    }
    if (e->response_status) {
        const audit_response_status *s = e->response_status;
        bool first = false; /* "metadata" is always there */
        key(&b, "responseStatus");
        ob_puts(&b, "{\"metadata\":{}");
        field_opt(&b, &first, "status", s->status);
        field_opt(&b, &first, "message", s->message);
        field_opt(&b, &first, "reason", s->reason);
        if (s->details && !json_is_null(s->details)) {
            key(&b, "details");
            js_value(&b, s->details, MF_NONE, 0);
        }
        if (s->code) {
            char tmp[24];
            snprintf(tmp, sizeof tmp, ",\"code\":%d", s->code);
            ob_puts(&b, tmp);
        }
        ob_putc(&b, '}');
    }
    enum mf_at mf = e->omit_managed_fields ? MF_TOP : MF_NONE;
    if (e->request_object && e->level >= AUDIT_LEVEL_REQUEST) {
        key(&b, "requestObject");
        js_value(&b, e->request_object, mf, 0);
    }
    if (e->response_object && e->level >= AUDIT_LEVEL_REQUEST_RESPONSE) {
        key(&b, "responseObject");
        js_value(&b, e->response_object, mf, 0);
    }
    key(&b, "requestReceivedTimestamp");
    micro_time(&b, &e->request_received);
    key(&b, "stageTimestamp");
    micro_time(&b, &e->stage_timestamp);
    if (e->nannotations) {
        key(&b, "annotations");
        ob_putc(&b, '{');
        keyed *k = sorted_keys(e->nannotations, annotation_key, e->annotations);
        for (size_t i = 0; i < e->nannotations; i++) {
            if (i && !strcmp(k[i].key, k[i - 1].key))
                continue;
            if (i)
                ob_putc(&b, ',');
            js_string(&b, k[i].key);
            ob_putc(&b, ':');
            js_string(&b, e->annotations[k[i].idx].value);
        }
        free(k);
        ob_putc(&b, '}');
    }
    ob_put(&b, "}\n", 2);
    return ob_take(&b, len);
}

/* ---- the legacy format ------------------------------------------------------ */

static void go_q(obuf *b, const char *s)
{
    char *q = ckube_go_quote(s ? s : "");
    if (!q)
        xalloc_die();
    ob_puts(b, q);
    free(q);
}

/* audit.auditStringSlice: each %q'd, joined with ",". */
static char *quoted_list(const char *const *v, size_t n)
{
    obuf b = {0};
    for (size_t i = 0; i < n; i++) {
        if (i)
            ob_putc(&b, ',');
        go_q(&b, v[i]);
    }
    return ob_take(&b, NULL);
}

/* time.RFC3339Nano in local time: fraction without trailing zeros. */
static void rfc3339_nano_local(obuf *b, const struct timespec *t)
{
    struct tm tm;
    time_t s = t->tv_sec;
    localtime_r(&s, &tm);
    char tmp[80];
    snprintf(tmp, sizeof tmp, "%04d-%02d-%02dT%02d:%02d:%02d", tm.tm_year + 1900, tm.tm_mon + 1,
             tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
    ob_puts(b, tmp);
    if (t->tv_nsec) {
        snprintf(tmp, sizeof tmp, ".%09ld", (long)t->tv_nsec);
        size_t n = strlen(tmp);
        while (tmp[n - 1] == '0')
            n--;
        ob_put(b, tmp, n);
    }
    long off = tm.tm_gmtoff;
    if (off == 0) {
        ob_putc(b, 'Z');
    } else {
        long a = off < 0 ? -off : off;
        snprintf(tmp, sizeof tmp, "%c%02ld:%02ld", off < 0 ? '-' : '+', a / 3600, a / 60 % 60);
        ob_puts(b, tmp);
    }
}

char *audit_event_encode_legacy(const audit_event *e, size_t *len)
{
    const char *username = "<none>", *asuser = "<self>", *asgroups = "<lookup>";
    const char *ns = "<none>", *ip = "<unknown>";
    char *groups = NULL, *asg = NULL;
    if (set(e->user.username)) {
        username = e->user.username;
        if (e->user.ngroups)
            groups = quoted_list(e->user.groups, e->user.ngroups);
    }
    if (e->impersonated_user) {
        asuser = e->impersonated_user->username ? e->impersonated_user->username : "";
        if (e->impersonated_user->groups)
            asgroups = asg =
                quoted_list(e->impersonated_user->groups, e->impersonated_user->ngroups);
    }
    if (e->object_ref && set(e->object_ref->namespace_))
        ns = e->object_ref->namespace_;
    if (e->nsource_ips)
        ip = e->source_ips[0];
    char response[24] = "<deferred>";
    if (e->response_status)
        snprintf(response, sizeof response, "%d", e->response_status->code);

    obuf b = {0};
    rfc3339_nano_local(&b, &e->request_received);
    ob_puts(&b, " AUDIT: id=");
    go_q(&b, e->audit_id);
    ob_puts(&b, " stage=");
    go_q(&b, audit_stage_name(e->stage));
    ob_puts(&b, " ip=");
    go_q(&b, ip);
    ob_puts(&b, " method=");
    go_q(&b, e->verb);
    ob_puts(&b, " user=");
    go_q(&b, username);
    ob_puts(&b, " groups=");
    go_q(&b, groups ? groups : "<none>");
    ob_puts(&b, " as=");
    go_q(&b, asuser);
    ob_puts(&b, " asgroups=");
    go_q(&b, asgroups);
    ob_puts(&b, " user-agent=");
    go_q(&b, e->user_agent);
    ob_puts(&b, " namespace=");
    go_q(&b, ns);
    ob_puts(&b, " uri=");
    go_q(&b, e->request_uri);
    ob_puts(&b, " response=\"");
    ob_puts(&b, response);
    ob_puts(&b, "\"\n");
    free(groups);
    free(asg);
    return ob_take(&b, len);
}

/* ---- managedFields ---------------------------------------------------------- */

/* `meta` without managedFields: a copy when it has them, else a new
 * reference to it. */
static json_t *meta_without(json_t *meta)
{
    if (!json_is_object(meta) || !json_object_get(meta, "managedFields"))
        return json_incref(meta);
    json_t *c = json_copy(meta);
    if (!c)
        xalloc_die();
    json_object_del(c, "managedFields");
    return c;
}

/* An object whose metadata loses managedFields (a new reference). */
static json_t *object_without(json_t *obj)
{
    json_t *meta = json_is_object(obj) ? json_object_get(obj, "metadata") : NULL;
    if (!json_is_object(meta) || !json_object_get(meta, "managedFields"))
        return json_incref(obj);
    json_t *c = json_copy(obj);
    if (!c)
        xalloc_die();
    json_object_set_new(c, "metadata", meta_without(meta));
    return c;
}

/* An array whose elements go through `f`; the same array when none
 * changed. */
static json_t *array_map(json_t *arr, json_t *(*f)(json_t *))
{
    size_t n = json_array_size(arr);
    json_t *out = NULL;
    for (size_t i = 0; i < n; i++) {
        json_t *el = json_array_get(arr, i);
        json_t *m = f(el);
        if (m != el && !out) {
            out = json_array();
            if (!out)
                xalloc_die();
            for (size_t j = 0; j < i; j++)
                json_array_append(out, json_array_get(arr, j));
        }
        if (out)
            json_array_append(out, m);
        json_decref(m);
    }
    return out ? out : json_incref(arr);
}

static json_t *row_without(json_t *row)
{
    json_t *o = json_is_object(row) ? json_object_get(row, "object") : NULL;
    if (!o)
        return json_incref(row);
    json_t *m = object_without(o);
    if (m == o) {
        json_decref(m);
        return json_incref(row);
    }
    json_t *c = json_copy(row);
    if (!c)
        xalloc_die();
    json_object_set_new(c, "object", m);
    return c;
}

json_t *audit_without_managed_fields(const json_t *cobj)
{
    json_t *obj = (json_t *)cobj; /* never changed: copies are made first */
    if (!obj)
        return NULL;
    json_t *out = object_without(obj);
    if (!json_is_object(obj))
        return out;
    json_t *items = json_object_get(obj, "items");
    if (json_is_array(items)) {
        json_t *m = array_map(items, object_without);
        if (m != items) {
            if (out == obj) {
                json_decref(out);
                out = json_copy(obj);
                if (!out)
                    xalloc_die();
            }
            json_object_set(out, "items", m);
        }
        json_decref(m);
    }
    json_t *rows = json_object_get(obj, "rows");
    if (is_table(obj) && json_is_array(rows)) {
        json_t *m = array_map(rows, row_without);
        if (m != rows) {
            if (out == obj) {
                json_decref(out);
                out = json_copy(obj);
                if (!out)
                    xalloc_die();
            }
            json_object_set(out, "rows", m);
        }
        json_decref(m);
    }
    return out;
}

/* ---- objectRef from an object -------------------------------------------- */

static void fill_unset(const char **field, const json_t *meta, const char *key)
{
    if (*field && **field)
        return;
    const char *v = json_string_value(json_object_get(meta, key));
    if (v && *v)
        *field = v;
}

void audit_object_ref_fill(audit_object_ref *ref, const json_t *obj)
{
    const json_t *meta = json_object_get(obj, "metadata");
    if (!json_is_object(meta))
        return;
    fill_unset(&ref->namespace_, meta, "namespace");
    fill_unset(&ref->name, meta, "name");
    fill_unset(&ref->uid, meta, "uid");
    fill_unset(&ref->resource_version, meta, "resourceVersion");
}

/* ---- audit IDs -------------------------------------------------------------- */

void audit_id_new(char *buf, size_t size)
{
    ckube_uuid4(buf, size);
}

const char *audit_id_for_request(const char *header, char *buf, size_t size)
{
    if (header && *header)
        return header;
    audit_id_new(buf, size);
    return buf;
}

/* ---- source IPs ------------------------------------------------------------- */

/* netutils.ParseIPSloppy: an IPv4 dotted quad (leading zeros read as
 * decimal) or an IPv6 address; into its 16-byte form (IPv4 mapped). */
static bool parse_ip(const char *s, size_t n, unsigned char out[16])
{
    char tmp[64];
    if (n == 0 || n >= sizeof tmp)
        return false;
    memcpy(tmp, s, n);
    tmp[n] = '\0';
    if (!strchr(tmp, ':')) {
        unsigned parts[4];
        int np = 0;
        const char *p = tmp;
        while (np < 4) {
            unsigned v = 0;
            int digits = 0;
            while (*p >= '0' && *p <= '9') {
                v = v * 10 + (unsigned)(*p++ - '0');
                digits++;
                if (v > 255)
                    return false;
            }
            if (!digits)
                return false;
            parts[np++] = v;
            if (np < 4) {
                if (*p != '.')
                    return false;
                p++;
            }
        }
        if (*p)
            return false;
        memset(out, 0, 10);
        out[10] = out[11] = 0xff;
        for (int i = 0; i < 4; i++)
            out[12 + i] = (unsigned char)parts[i];
        return true;
    }
    return inet_pton(AF_INET6, tmp, out) == 1;
}

/* net.IP.String(). */
static void format_ip(const unsigned char ip[16], char out[64])
{
    static const unsigned char mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
    if (!memcmp(ip, mapped, 12)) {
        snprintf(out, 64, "%u.%u.%u.%u", ip[12], ip[13], ip[14], ip[15]);
        return;
    }
    /* The longest run of two or more zero groups becomes "::" (the
     * first of equal runs). */
    int best = -1, bestlen = 0;
    for (int i = 0; i < 8;) {
        if (ip[2 * i] || ip[2 * i + 1]) {
            i++;
            continue;
        }
        int j = i;
        while (j < 8 && !ip[2 * j] && !ip[2 * j + 1])
            j++;
        if (j - i > bestlen && j - i >= 2) {
            best = i;
            bestlen = j - i;
        }
        i = j;
    }
    char *p = out;
    for (int i = 0; i < 8; i++) {
        if (i == best) {
            *p++ = ':';
            *p++ = ':';
            i += bestlen - 1;
            continue;
        }
        if (i && i != best + bestlen)
            *p++ = ':';
        p += sprintf(p, "%x", (unsigned)(ip[2 * i] << 8 | ip[2 * i + 1]));
    }
    *p = '\0';
}

/* net.SplitHostPort's host, or NULL when `s` is not host:port. */
static bool split_host(const char *s, const char **host, size_t *n)
{
    if (*s == '[') {
        const char *end = strchr(s, ']');
        if (!end || end[1] != ':')
            return false;
        *host = s + 1;
        *n = (size_t)(end - s - 1);
        return true;
    }
    const char *colon = strrchr(s, ':');
    if (!colon || memchr(s, ':', (size_t)(colon - s)))
        return false; /* missing port, or too many colons */
    *host = s;
    *n = (size_t)(colon - s);
    return true;
}

char **audit_source_ips(const char *xff, const char *x_real_ip, const char *remote, size_t *n)
{
    unsigned char(*ips)[16] = NULL;
    size_t count = 0, cap = 0;
#define ADD_IP(ip)                                                                                 \
    do {                                                                                           \
        if (count == cap) {                                                                        \
            cap = cap ? cap * 2 : 4;                                                               \
            ips = xrealloc(ips, cap * sizeof *ips);                                                \
        }                                                                                          \
        memcpy(ips[count++], (ip), 16);                                                            \
    } while (0)
    unsigned char ip[16];
    for (const char *p = xff; p && *p;) {
        const char *comma = strchr(p, ',');
        const char *end = comma ? comma : p + strlen(p);
        const char *s = p;
        /* strings.TrimSpace */
        while (s < end &&
               (*s == ' ' || *s == '\t' || *s == '\n' || *s == '\r' || *s == '\v' || *s == '\f'))
            s++;
        const char *t = end;
        while (t > s && (t[-1] == ' ' || t[-1] == '\t' || t[-1] == '\n' || t[-1] == '\r' ||
                         t[-1] == '\v' || t[-1] == '\f'))
            t--;
        if (parse_ip(s, (size_t)(t - s), ip))
            ADD_IP(ip);
        if (!comma)
            break;
        p = comma + 1;
    }
    if (x_real_ip && *x_real_ip && parse_ip(x_real_ip, strlen(x_real_ip), ip)) {
        bool seen = false;
        for (size_t i = 0; i < count && !seen; i++)
            seen = !memcmp(ips[i], ip, 16);
        if (!seen)
            ADD_IP(ip);
    }
    if (remote && *remote) {
        const char *host;
        size_t hn;
        bool ok = split_host(remote, &host, &hn) && parse_ip(host, hn, ip);
        if (!ok)
            ok = parse_ip(remote, strlen(remote), ip);
        if (ok && (count == 0 || memcmp(ips[count - 1], ip, 16)))
            ADD_IP(ip);
    }
#undef ADD_IP
    /* One block: the pointers, then the strings. */
    char **out = xmalloc((count + 1) * sizeof *out + count * 64);
    char *text = (char *)(out + count + 1);
    for (size_t i = 0; i < count; i++) {
        out[i] = text + i * 64;
        format_ip(ips[i], out[i]);
    }
    out[count] = NULL;
    free(ips);
    if (n)
        *n = count;
    return out;
}
