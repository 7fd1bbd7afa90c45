/* admissionregistration.k8s.io/v1: mutatingwebhookconfigurations and
 * validatingwebhookconfigurations, with upstream's v1 defaulting, its
 * validation (the webhook names, client configs, rules, policies,
 * selectors, review versions and match conditions, in its words and at its
 * field paths, including the looser checks an update gets when the stored
 * object was already past them), the WEBHOOKS printer column, and
 * admissionregistration_install, which serves them. Calling the webhooks
 * is the admission chain's, not this room's.
 *
 * Upstream parses a webhook's URL with Go's net/url; url_parse below
 * follows that parser where its verdict shows in a message (the scheme,
 * host, user information, query and fragment it finds, and its errors). */
#include "apiserver/registry/admissionregistration/admissionregistration.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/registry/builtin/builtin.h"
#include "apiserver/registry/definitions/builtin_patchmeta.h"
#include "ckube/json.h"
#include "ckube/validation.h"
#include "common/text.h"
#include "common/xalloc.h"

/* A field path into buf (cut at n bytes: paths are short, and a cut one
 * still names the field). A function, not snprintf, because GCC's
 * truncation check cannot know how deep paths nest. */
static void fpath(char *buf, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void fpath(char *buf, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, n, fmt, ap);
    va_end(ap);
}

#define GROUP "admissionregistration.k8s.io"
#define URL_FORM "; desired format: https://host[/path]"
#define MAX_MATCH_CONDITIONS 64

/* What an update may keep that a create may not (upstream's validation
 * options, from the stored object). */
typedef struct opts {
    bool mutating;
    bool require_no_side_effects;    /* only None and NoneOnDryRun */
    bool require_known_review;       /* admissionReviewVersions must name v1 or v1beta1 */
    bool require_unique_names;       /* no two webhooks of one name */
    bool allow_invalid_label_values; /* in selectors' matchExpressions values */
    bool ignore_match_conditions;    /* unchanged from the stored object */
} opts;

/* ---- small helpers ---------------------------------------------------- */

static const char *str_or_empty(const json_t *v)
{
    const char *s = json_string_value(v);
    return s ? s : "";
}

/* A member Go decodes into a nil pointer: missing or null. */
static const json_t *member(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_null(v) ? NULL : v;
}

static bool is_alpha(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z');
}

static bool is_digit(char c)
{
    return c >= '0' && c <= '9';
}

static bool is_alnum(char c)
{
    return is_alpha(c) || is_digit(c);
}

static bool is_hex(char c)
{
    return is_digit(c) || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

static int unhex(char c)
{
    return is_digit(c) ? c - '0' : c >= 'a' ? c - 'a' + 10 : c - 'A' + 10;
}

static bool in_list(const char *s, const char *const *list)
{
    for (; *list; list++)
        if (!strcmp(s, *list))
            return true;
    return false;
}

/* Go's %#v of a string slice of type `type`, e.g. []string{"a", "b"}. */
static char *go_slice(const char *type, const json_t *list)
{
    ckube__strbuf b = {0};
    ckube__sb_printf(&b, "[]%s{", type);
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        char *q = ckube_go_quote(str_or_empty(v));
        ckube__sb_printf(&b, "%s%s", i ? ", " : "", q ? q : "\"\"");
        free(q);
    }
    ckube__sb_add(&b, "}");
    char *s = ckube__sb_take(&b);
    return s ? s : xstrdup("[]");
}

/* FieldValueInvalid of a string slice. */
static void invalid_slice(ckube_status *st, const char *field, const char *type, const json_t *list,
                          const char *detail)
{
    char *v = go_slice(type, list);
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_INVALID, field, "Invalid value: %s: %s", v,
                           detail);
    free(v);
}

/* FieldValueNotSupported as field.NotSupported words it (the supported
 * values sorted, as upstream's sets list them). */
static void not_supported(ckube_status *st, const char *field, const char *value,
                          const char *const *supported)
{
    ckube__strbuf b = {0};
    for (size_t i = 0; supported[i]; i++) {
        char *q = ckube_go_quote(supported[i]);
        ckube__sb_printf(&b, "%s%s", i ? ", " : "", q ? q : "\"\"");
        free(q);
    }
    char *list = ckube__sb_take(&b);
    char *q = ckube_go_quote(value);
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_NOT_SUPPORTED, field,
                           "Unsupported value: %s: supported values: %s", q ? q : "\"\"",
                           list ? list : "");
    free(q);
    free(list);
}

static void duplicate(ckube_status *st, const char *field, const char *value)
{
    char *q = ckube_go_quote(value);
    ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_DUPLICATE, field, "Duplicate value: %s",
                           q ? q : "\"\"");
    free(q);
}

/* One Invalid cause per message of `msgs` (the "; "-joined list the
 * ckube_is_* checks return; taken), each after `prefix`. */
static void invalid_each(ckube_status *st, const char *field, const char *value, char *msgs,
                         const char *prefix)
{
    for (char *m = msgs; m && *m;) {
        char *end = strstr(m, "; ");
        if (end)
            *end = 0;
        char *detail = xasprintf("%s%s", prefix, m);
        ckube_field_invalid(st, field, value, detail);
        free(detail);
        m = end ? end + 2 : NULL;
    }
    free(msgs);
}

/* Go's strings.TrimSpace, for ASCII white space: whether anything is left. */
static bool blank(const char *s)
{
    for (; *s; s++)
        if (!strchr(" \t\n\v\f\r", *s))
            return false;
    return true;
}

/* ---- defaulting ------------------------------------------------------- */

static void set_default(json_t *obj, const char *key, json_t *value)
{
    if (member(obj, key))
        json_decref(value);
    else
        json_object_set_new(obj, key, value);
}

/* SetObjectDefaults of the v1 configurations: each webhook's policies,
 * selectors and timeout, a Service's port, each rule's scope. */
static void default_webhooks(json_t *obj, bool mutating)
{
    size_t i, j;
    json_t *hook, *rule;
    json_array_foreach(json_object_get(obj, "webhooks"), i, hook)
    {
        if (!json_is_object(hook))
            continue;
        set_default(hook, "failurePolicy", json_string("Fail"));
        set_default(hook, "matchPolicy", json_string("Equivalent"));
        set_default(hook, "namespaceSelector", json_object());
        set_default(hook, "objectSelector", json_object());
        set_default(hook, "timeoutSeconds", json_integer(10));
        if (mutating)
            set_default(hook, "reinvocationPolicy", json_string("Never"));
        json_t *svc = json_object_get(json_object_get(hook, "clientConfig"), "service");
        if (json_is_object(svc))
            set_default(svc, "port", json_integer(443));
        json_array_foreach(json_object_get(hook, "rules"), j, rule)
        {
            if (json_is_object(rule))
                set_default(rule, "scope", json_string("*"));
        }
    }
}

static void mutating_prepare_create(const resource_type *t, json_t *obj)
{
    (void)t;
    default_webhooks(obj, true);
}

static void mutating_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    (void)t;
    (void)old;
    default_webhooks(obj, true);
}

static void validating_prepare_create(const resource_type *t, json_t *obj)
{
    (void)t;
    default_webhooks(obj, false);
}

static void validating_prepare_update(const resource_type *t, json_t *obj, const json_t *old)
{
    (void)t;
    (void)old;
    default_webhooks(obj, false);
}

/* ---- URLs, as Go's net/url parses them -------------------------------- */

typedef struct go_url {
    char *scheme;   /* lower case; "" when none */
    char *host;     /* unescaped */
    char *user;     /* Userinfo.String(); NULL when there is none */
    char *fragment; /* unescaped */
    char *query;    /* RawQuery */
} go_url;

enum { ESC_PATH, ESC_HOST, ESC_USER, ESC_FRAGMENT };

static void url_free(go_url *u)
{
    free(u->scheme);
    free(u->host);
    free(u->user);
    free(u->fragment);
    free(u->query);
}

/* What net/url lets stand in a host without escaping. */
static bool host_char(char c)
{
    return is_alnum(c) || (c && strchr("-_.~!$&'()*+,;=:[]<>\"", c));
}

static char *quoted_error(const char *fmt, const char *s, size_t n)
{
    char *raw = xstrndup(s, n);
    char *q = ckube_go_quote(raw);
    char *msg = xasprintf(fmt, q ? q : "\"\"");
    free(q);
    free(raw);
    return msg;
}

/* net/url's unescape: the decoded text, or NULL with *err set. */
static char *url_unescape(const char *s, size_t n, int mode, char **err)
{
    ckube__strbuf b = {0};
    for (size_t i = 0; i < n;) {
        char c = s[i];
        if (c == '%') {
            if (i + 2 >= n || !is_hex(s[i + 1]) || !is_hex(s[i + 2])) {
                *err = quoted_error("invalid URL escape %s", s + i, n - i > 3 ? 3 : n - i);
                free(ckube__sb_take(&b));
                return NULL;
            }
            /* In a host, escapes are for non-ASCII bytes (and a zone's %25). */
            if (mode == ESC_HOST && unhex(s[i + 1]) < 8 && strncmp(s + i, "%25", 3)) {
                *err = quoted_error("invalid URL escape %s", s + i, 3);
                free(ckube__sb_take(&b));
                return NULL;
            }
            ckube__sb_addc(&b, (char)(unhex(s[i + 1]) << 4 | unhex(s[i + 2])));
            i += 3;
            continue;
        }
        if (mode == ESC_HOST && !((unsigned char)c & 0x80) && !host_char(c)) {
            *err = quoted_error("invalid character %s in host name", s + i, 1);
            free(ckube__sb_take(&b));
            return NULL;
        }
        ckube__sb_addc(&b, c);
        i++;
    }
    char *out = ckube__sb_take(&b);
    return out ? out : xstrdup("");
}

/* Userinfo.String()'s escaping of a user name or password. */
static void user_escape(ckube__strbuf *b, const char *s)
{
    for (; *s; s++) {
        if (is_alnum(*s) || strchr("-_.~$&+,;=", *s))
            ckube__sb_addc(b, *s);
        else
            ckube__sb_printf(b, "%%%02X", (unsigned char)*s);
    }
}

static bool valid_userinfo(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (!is_alnum(s[i]) && !strchr("-._:~!$&'()*+,;=%@", s[i]))
            return false;
    return true;
}

/* ":digits", or nothing. */
static bool valid_optional_port(const char *s, size_t n)
{
    if (!n)
        return true;
    if (s[0] != ':')
        return false;
    for (size_t i = 1; i < n; i++)
        if (!is_digit(s[i]))
            return false;
    return true;
}

static char *parse_host(const char *h, size_t n, go_url *u)
{
    const char *port = NULL;
    if (n && h[0] == '[') {
        const char *close = NULL;
        for (size_t i = 0; i < n; i++)
            if (h[i] == ']')
                close = h + i;
        if (!close)
            return xstrdup("missing ']' in host");
        port = close + 1;
    } else {
        for (size_t i = 0; i < n; i++)
            if (h[i] == ':')
                port = h + i;
    }
    if (port && !valid_optional_port(port, (size_t)(h + n - port)))
        return quoted_error("invalid port %s after host", port, (size_t)(h + n - port));
    char *err = NULL;
    u->host = url_unescape(h, n, ESC_HOST, &err);
    return err;
}

static char *parse_authority(const char *a, size_t n, go_url *u)
{
    const char *at = NULL;
    for (size_t i = 0; i < n; i++)
        if (a[i] == '@')
            at = a + i;
    const char *h = at ? at + 1 : a;
    char *err = parse_host(h, (size_t)(a + n - h), u);
    if (err || !at)
        return err;
    size_t ulen = (size_t)(at - a);
    if (!valid_userinfo(a, ulen))
        return xstrdup("net/url: invalid userinfo");
    const char *colon = memchr(a, ':', ulen);
    char *name = url_unescape(a, colon ? (size_t)(colon - a) : ulen, ESC_USER, &err);
    if (!name)
        return err;
    char *pass = NULL;
    if (colon && !(pass = url_unescape(colon + 1, (size_t)(at - colon - 1), ESC_USER, &err))) {
        free(name);
        return err;
    }
    ckube__strbuf b = {0};
    user_escape(&b, name);
    if (pass) {
        ckube__sb_addc(&b, ':');
        user_escape(&b, pass);
    }
    u->user = ckube__sb_take(&b);
    if (!u->user)
        u->user = xstrdup("");
    free(name);
    free(pass);
    return NULL;
}

/* net/url's parse of a URL without its fragment. NULL, or the error. */
static char *parse_main(const char *s, size_t n, go_url *u)
{
    for (size_t i = 0; i < n; i++)
        if ((unsigned char)s[i] < 0x20 || s[i] == 0x7f)
            return xstrdup("net/url: invalid control character in URL");
    if (!n || (n == 1 && s[0] == '*'))
        return NULL;
    const char *rest = s;
    size_t rlen = n;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (is_alpha(c))
            continue;
        if (is_digit(c) || c == '+' || c == '-' || c == '.') {
            if (i == 0)
                break;
            continue;
        }
        if (c == ':') {
            if (i == 0)
                return xstrdup("missing protocol scheme");
            free(u->scheme);
            u->scheme = xstrndup(s, i);
            for (char *p = u->scheme; *p; p++)
                if (*p >= 'A' && *p <= 'Z')
                    *p = (char)(*p + 32);
            rest = s + i + 1;
            rlen = n - i - 1;
        }
        break;
    }
    size_t nq = 0;
    for (size_t i = 0; i < rlen; i++)
        nq += rest[i] == '?';
    if (rlen && rest[rlen - 1] == '?' && nq == 1) {
        rlen--; /* ForceQuery: an empty query */
    } else if (nq) {
        const char *q = memchr(rest, '?', rlen);
        u->query = xstrndup(q + 1, (size_t)(rest + rlen - q - 1));
        rlen = (size_t)(q - rest);
    }
    if (!rlen || rest[0] != '/') {
        if (*u->scheme)
            return NULL; /* opaque: no host */
        const char *slash = memchr(rest, '/', rlen);
        if (memchr(rest, ':', slash ? (size_t)(slash - rest) : rlen))
            return xstrdup("first path segment in URL cannot contain colon");
    }
    bool triple = rlen >= 3 && !strncmp(rest, "///", 3);
    if ((*u->scheme || !triple) && rlen >= 2 && !strncmp(rest, "//", 2)) {
        const char *a = rest + 2;
        size_t alen = rlen - 2;
        const char *slash = memchr(a, '/', alen);
        size_t auth = slash ? (size_t)(slash - a) : alen;
        char *err = parse_authority(a, auth, u);
        if (err)
            return err;
        rest = a + auth;
        rlen = alen - auth;
    }
    char *err = NULL;
    char *path = url_unescape(rest, rlen, ESC_PATH, &err);
    free(path);
    return err;
}

/* url.Parse: fills *u (free with url_free) and returns NULL, or returns
 * its error, `parse "URL": reason`. */
static char *url_parse(const char *raw, go_url *u)
{
    memset(u, 0, sizeof *u);
    u->scheme = xstrdup("");
    const char *hash = strchr(raw, '#');
    size_t n = hash ? (size_t)(hash - raw) : strlen(raw);
    char *err = parse_main(raw, n, u);
    if (!err && hash) {
        u->fragment = url_unescape(hash + 1, strlen(hash + 1), ESC_FRAGMENT, &err);
        if (err)
            n = strlen(raw); /* the error quotes the whole URL then */
    }
    if (!err)
        return NULL;
    char *what = quoted_error("%s", raw, n);
    char *msg = xasprintf("parse %s: %s", what, err);
    free(what);
    free(err);
    return msg;
}

/* ---- client configs --------------------------------------------------- */

/* ValidateWebhookURL, https required. */
static void validate_url(const char *url, const char *field, ckube_status *st)
{
    go_url u;
    char *err = url_parse(url, &u);
    if (err) {
        char *detail = xasprintf("url must be a valid URL: %s" URL_FORM, err);
        ckube_field_required(st, field, detail);
        free(detail);
        free(err);
        url_free(&u);
        return;
    }
    if (strcmp(u.scheme, "https"))
        ckube_field_invalid(st, field, u.scheme, "'https' is the only allowed URL scheme" URL_FORM);
    if (!u.host || !*u.host)
        ckube_field_invalid(st, field, "", "host must be provided" URL_FORM);
    if (u.user)
        ckube_field_invalid(st, field, u.user, "user information is not permitted in the URL");
    if (u.fragment && *u.fragment)
        ckube_field_invalid(st, field, u.fragment, "fragments are not permitted in the URL");
    if (u.query && *u.query)
        ckube_field_invalid(st, field, u.query, "query parameters are not permitted in the URL");
    url_free(&u);
}

/* ValidateWebhookService: the name, namespace, port and path. */
static void validate_service(const json_t *svc, const char *path, ckube_status *st)
{
    char field[256];
    if (!*str_or_empty(json_object_get(svc, "name"))) {
        fpath(field, sizeof field, "%s.name", path);
        ckube_field_required(st, field, "service name is required");
    }
    if (!*str_or_empty(json_object_get(svc, "namespace"))) {
        fpath(field, sizeof field, "%s.namespace", path);
        ckube_field_required(st, field, "service namespace is required");
    }
    json_int_t port = json_integer_value(json_object_get(svc, "port"));
    if (port < 1 || port > 65535) {
        fpath(field, sizeof field, "%s.port", path);
        ckube_field_invalid_int(st, field, port,
                                "port is not valid: must be between 1 and 65535, inclusive");
    }
    const json_t *p = member(svc, "path");
    if (!p)
        return;
    const char *up = str_or_empty(p);
    if (!*up || !strcmp(up, "/"))
        return;
    fpath(field, sizeof field, "%s.path", path);
    if (!strcmp(up, "//")) {
        ckube_field_invalid(st, field, up, "segment[0] may not be empty");
        return;
    }
    if (up[0] != '/')
        ckube_field_invalid(st, field, up, "must start with a '/'");
    /* The segments after the first character, less one trailing '/'. */
    char *steps = xstrdup(up + 1);
    size_t n = strlen(steps);
    if (n && steps[n - 1] == '/')
        steps[n - 1] = 0;
    int i = 0;
    for (char *seg = steps;; i++) {
        char *slash = strchr(seg, '/');
        if (slash)
            *slash = 0;
        char prefix[32];
        snprintf(prefix, sizeof prefix, "segment[%d]", i);
        if (!*seg) {
            char *detail = xasprintf("%s may not be empty", prefix);
            ckube_field_invalid(st, field, up, detail);
            free(detail);
        } else {
            char *msgs = ckube_is_dns1123_subdomain(seg);
            if (msgs) {
                strcat(prefix, ": ");
                invalid_each(st, field, up, msgs, prefix);
            }
        }
        if (!slash)
            break;
        seg = slash + 1;
    }
    free(steps);
}

void webhook_client_config_validate(const json_t *cc, const char *path, ckube_status *st)
{
    char field[256];
    const json_t *url = member(cc, "url");
    const json_t *svc = member(cc, "service");
    if (!url == !svc) {
        fpath(field, sizeof field, "%s", path);
        ckube_field_required(st, field, "exactly one of url or service is required");
    } else if (url) {
        fpath(field, sizeof field, "%s.url", path);
        validate_url(str_or_empty(url), field, st);
    } else {
        fpath(field, sizeof field, "%s.service", path);
        validate_service(svc, field, st);
    }
}

static void validate_client_config(const json_t *hook, const char *path, ckube_status *st)
{
    char field[256];
    fpath(field, sizeof field, "%s.clientConfig", path);
    webhook_client_config_validate(json_object_get(hook, "clientConfig"), field, st);
}

/* ---- rules -------------------------------------------------------------- */

static bool has_wildcard(const json_t *list)
{
    size_t i;
    json_t *v;
    json_array_foreach(list, i, v)
    {
        if (!strcmp(str_or_empty(v), "*"))
            return true;
    }
    return false;
}

/* validateResources: subresource forms, and the wildcards that leave no
 * room for anything else. */
static void validate_resources(const json_t *resources, const char *field, ckube_status *st)
{
    char f[320];
    size_t n = json_array_size(resources);
    if (!n)
        ckube_field_required(st, field, NULL);
    /* The resources seen with every subresource ("pods/" then '*'), and
     * the subresources seen of every resource ('*' then "/status"). */
    const char **res_any_sub = xcalloc(n + 1, sizeof *res_any_sub);
    const char **sub_any_res = xcalloc(n + 1, sizeof *sub_any_res);
    size_t nres = 0, nsub = 0;
    bool double_wild = false, single_wild = false, plain = false;
    size_t i;
    json_t *v;
    json_array_foreach(resources, i, v)
    {
        const char *rs = str_or_empty(v);
        fpath(f, sizeof f, "%s[%zu]", field, i);
        if (!*rs) {
            ckube_field_required(st, f, NULL);
            continue;
        }
        if (!strcmp(rs, "*/*"))
            double_wild = true;
        if (!strcmp(rs, "*"))
            single_wild = true;
        const char *slash = strchr(rs, '/');
        if (!slash) {
            plain = strcmp(rs, "*") != 0; /* the last one without a subresource decides */
            continue;
        }
        size_t rlen = (size_t)(slash - rs);
        const char *sub = slash + 1;
        for (size_t k = 0; k < nres; k++) {
            if (strlen(res_any_sub[k]) == rlen && !strncmp(res_any_sub[k], rs, rlen)) {
                char *d =
                    xasprintf("if '%.*s/*' is present, must not specify %s", (int)rlen, rs, rs);
                ckube_field_invalid(st, f, rs, d);
                free(d);
                break;
            }
        }
        for (size_t k = 0; k < nsub; k++) {
            if (!strcmp(sub_any_res[k], sub)) {
                char *d = xasprintf("if '*/%s' is present, must not specify %s", sub, rs);
                ckube_field_invalid(st, f, rs, d);
                free(d);
                break;
            }
        }
        if (!strcmp(sub, "*")) {
            char *r = xstrndup(rs, rlen);
            bool known = false;
            for (size_t k = 0; k < nres && !known; k++)
                known = !strcmp(res_any_sub[k], r);
            if (known)
                free(r);
            else
                res_any_sub[nres++] = r;
        }
        if (rlen == 1 && rs[0] == '*') {
            bool known = false;
            for (size_t k = 0; k < nsub && !known; k++)
                known = !strcmp(sub_any_res[k], sub);
            if (!known)
                sub_any_res[nsub++] = sub;
        }
    }
    if (n > 1 && double_wild)
        invalid_slice(st, field, "string", resources,
                      "if '*/*' is present, must not specify other resources");
    if (single_wild && plain)
        invalid_slice(st, field, "string", resources,
                      "if '*' is present, must not specify other resources without subresources");
    for (size_t k = 0; k < nres; k++)
        free((char *)res_any_sub[k]);
    free(res_any_sub);
    free(sub_any_res); /* borrowed strings */
}

/* validateRuleWithOperations: operations, then the rule itself. */
static void validate_rule(const json_t *rule, const char *path, ckube_status *st)
{
    static const char *const operations[] = {"*", "CONNECT", "CREATE", "DELETE", "UPDATE", NULL};
    static const char *const scopes[] = {"*", "Cluster", "Namespaced", NULL};
    char field[320];
    const json_t *ops = json_object_get(rule, "operations");
    fpath(field, sizeof field, "%s.operations", path);
    if (!json_array_size(ops))
        ckube_field_required(st, field, NULL);
    if (json_array_size(ops) > 1 && has_wildcard(ops))
        invalid_slice(st, field, "admissionregistration.OperationType", ops,
                      "if '*' is present, must not specify other operations");
    size_t i;
    json_t *v;
    json_array_foreach(ops, i, v)
    {
        if (!in_list(str_or_empty(v), operations)) {
            fpath(field, sizeof field, "%s.operations[%zu]", path, i);
            not_supported(st, field, str_or_empty(v), operations);
        }
    }
    const json_t *groups = json_object_get(rule, "apiGroups");
    fpath(field, sizeof field, "%s.apiGroups", path);
    if (!json_array_size(groups))
        ckube_field_required(st, field, NULL);
    if (json_array_size(groups) > 1 && has_wildcard(groups))
        invalid_slice(st, field, "string", groups,
                      "if '*' is present, must not specify other API groups");
    const json_t *versions = json_object_get(rule, "apiVersions");
    fpath(field, sizeof field, "%s.apiVersions", path);
    if (!json_array_size(versions))
        ckube_field_required(st, field, NULL);
    if (json_array_size(versions) > 1 && has_wildcard(versions))
        invalid_slice(st, field, "string", versions,
                      "if '*' is present, must not specify other API versions");
    json_array_foreach(versions, i, v)
    {
        if (!*str_or_empty(v)) {
            fpath(field, sizeof field, "%s.apiVersions[%zu]", path, i);
            ckube_field_required(st, field, NULL);
        }
    }
    fpath(field, sizeof field, "%s.resources", path);
    validate_resources(json_object_get(rule, "resources"), field, st);
    const json_t *scope = member(rule, "scope");
    if (scope && !in_list(str_or_empty(scope), scopes)) {
        fpath(field, sizeof field, "%s.scope", path);
        not_supported(st, field, str_or_empty(scope), scopes);
    }
}

/* ---- match conditions --------------------------------------------------- */

/* validateMatchConditions, less the CEL compilation of the expressions
 * (ckube has no CEL yet): at most 64, each named (a qualified name,
 * unique) with an expression. */
static void validate_match_conditions(const json_t *list, const char *path, ckube_status *st)
{
    char field[320];
    size_t n = json_array_size(list);
    if (n > MAX_MATCH_CONDITIONS) {
        fpath(field, sizeof field, "%s.matchConditions", path);
        ckube_status_add_cause(st, CKUBE_CAUSE_FIELD_TOO_MANY, field,
                               "Too many: %zu: must have at most %d items", n,
                               MAX_MATCH_CONDITIONS);
    }
    size_t i;
    json_t *mc;
    json_array_foreach(list, i, mc)
    {
        if (blank(str_or_empty(json_object_get(mc, "expression")))) {
            fpath(field, sizeof field, "%s.matchConditions[%zu].expression", path, i);
            ckube_field_required(st, field, NULL);
        }
        const char *name = str_or_empty(json_object_get(mc, "name"));
        fpath(field, sizeof field, "%s.matchConditions[%zu].name", path, i);
        if (!*name) {
            ckube_field_required(st, field, NULL);
            continue;
        }
        invalid_each(st, field, name, ckube_is_qualified_name(name), "");
        for (size_t k = 0; k < i; k++) {
            if (!strcmp(str_or_empty(json_object_get(json_array_get(list, k), "name")), name)) {
                duplicate(st, field, name);
                break;
            }
        }
    }
}

/* ---- webhooks ------------------------------------------------------------ */

static const char *const no_side_effects[] = {"None", "NoneOnDryRun", NULL};
static const char *const any_side_effects[] = {"None", "NoneOnDryRun", "Some", "Unknown", NULL};
static const char *const review_versions[] = {"v1", "v1beta1", NULL};

/* IsFullyQualifiedName: a DNS subdomain of at least three labels. */
static void validate_hook_name(const char *name, const char *field, ckube_status *st)
{
    if (!*name) {
        ckube_field_required(st, field, NULL);
        return;
    }
    char *msgs = ckube_is_dns1123_subdomain(name);
    if (msgs) {
        /* upstream joins them with "," */
        char *w = msgs;
        for (char *r = msgs; *r; r++) {
            if (r[0] == ';' && r[1] == ' ') {
                *w++ = ',';
                r++;
            } else {
                *w++ = *r;
            }
        }
        *w = 0;
        ckube_field_invalid(st, field, name, msgs);
        free(msgs);
        return;
    }
    int dots = 0;
    for (const char *p = name; *p; p++)
        dots += *p == '.';
    if (dots < 2)
        ckube_field_invalid(st, field, name,
                            "should be a domain with at least three segments separated by dots");
}

/* validateMutatingWebhook / validateValidatingWebhook. */
static void validate_hook(const json_t *hook, const char *path, const opts *o, ckube_status *st)
{
    static const char *const failure[] = {"Fail", "Ignore", NULL};
    static const char *const match[] = {"Equivalent", "Exact", NULL};
    static const char *const reinvocation[] = {"IfNeeded", "Never", NULL};
    char field[320];
    fpath(field, sizeof field, "%s.name", path);
    validate_hook_name(str_or_empty(json_object_get(hook, "name")), field, st);
    size_t i;
    json_t *rule;
    json_array_foreach(json_object_get(hook, "rules"), i, rule)
    {
        fpath(field, sizeof field, "%s.rules[%zu]", path, i);
        validate_rule(rule, field, st);
    }
    const json_t *v = member(hook, "failurePolicy");
    if (v && !in_list(str_or_empty(v), failure)) {
        fpath(field, sizeof field, "%s.failurePolicy", path);
        not_supported(st, field, str_or_empty(v), failure);
    }
    v = member(hook, "matchPolicy");
    if (v && !in_list(str_or_empty(v), match)) {
        fpath(field, sizeof field, "%s.matchPolicy", path);
        not_supported(st, field, str_or_empty(v), match);
    }
    const char *const *side = o->require_no_side_effects ? no_side_effects : any_side_effects;
    v = member(hook, "sideEffects");
    fpath(field, sizeof field, "%s.sideEffects", path);
    if (!v)
        ckube_field_required(st, field,
                             o->require_no_side_effects
                                 ? "must specify one of None, NoneOnDryRun"
                                 : "must specify one of None, NoneOnDryRun, Some, Unknown");
    else if (!in_list(str_or_empty(v), side))
        not_supported(st, field, str_or_empty(v), side);
    v = member(hook, "timeoutSeconds");
    if (v && (json_integer_value(v) < 1 || json_integer_value(v) > 30)) {
        fpath(field, sizeof field, "%s.timeoutSeconds", path);
        ckube_field_invalid_int(st, field, json_integer_value(v),
                                "the timeout value must be between 1 and 30 seconds");
    }
    v = member(hook, "namespaceSelector");
    if (v) {
        fpath(field, sizeof field, "%s.namespaceSelector", path);
        ckube_validate_label_selector(v, field, o->allow_invalid_label_values, st);
    }
    v = member(hook, "objectSelector");
    if (v) {
        fpath(field, sizeof field, "%s.objectSelector", path);
        ckube_validate_label_selector(v, field, o->allow_invalid_label_values, st);
    }
    v = member(hook, "reinvocationPolicy");
    if (o->mutating && v && !in_list(str_or_empty(v), reinvocation)) {
        fpath(field, sizeof field, "%s.reinvocationPolicy", path);
        not_supported(st, field, str_or_empty(v), reinvocation);
    }
    validate_client_config(hook, path, st);
    if (!o->ignore_match_conditions)
        validate_match_conditions(json_object_get(hook, "matchConditions"), path, st);
}

/* validateAdmissionReviewVersions. */
static void validate_review_versions(const json_t *versions, const char *path, bool require_known,
                                     ckube_status *st)
{
    char field[320];
    fpath(field, sizeof field, "%s.admissionReviewVersions", path);
    if (!json_array_size(versions)) {
        ckube_field_required(st, field, "must specify one of v1, v1beta1");
        return;
    }
    bool known = false;
    size_t i;
    json_t *v;
    json_array_foreach(versions, i, v)
    {
        const char *s = str_or_empty(v);
        fpath(field, sizeof field, "%s.admissionReviewVersions[%zu]", path, i);
        bool seen = false;
        for (size_t k = 0; k < i && !seen; k++)
            seen = !strcmp(str_or_empty(json_array_get(versions, k)), s);
        if (seen) {
            ckube_field_invalid(st, field, s, "duplicate version");
            continue;
        }
        invalid_each(st, field, s, ckube_is_dns1035_label(s), "");
        known |= in_list(s, review_versions);
    }
    if (require_known && !known) {
        fpath(field, sizeof field, "%s.admissionReviewVersions", path);
        invalid_slice(st, field, "string", versions, "must include at least one of v1, v1beta1");
    }
}

static void validate_configuration(const json_t *obj, const opts *o, ckube_status *st)
{
    const json_t *hooks = json_object_get(obj, "webhooks");
    size_t i;
    json_t *hook;
    json_array_foreach(hooks, i, hook)
    {
        char path[64], field[96];
        fpath(path, sizeof path, "webhooks[%zu]", i);
        validate_hook(hook, path, o, st);
        validate_review_versions(json_object_get(hook, "admissionReviewVersions"), path,
                                 o->require_known_review, st);
        const char *name = str_or_empty(json_object_get(hook, "name"));
        if (!o->require_unique_names || !*name)
            continue;
        for (size_t k = 0; k < i; k++) {
            if (!strcmp(str_or_empty(json_object_get(json_array_get(hooks, k), "name")), name)) {
                fpath(field, sizeof field, "%s.name", path);
                duplicate(st, field, name);
                break;
            }
        }
    }
}

/* ---- what an update keeps from the stored object --------------------- */

static bool old_no_side_effects(const json_t *old)
{
    size_t i;
    json_t *hook;
    json_array_foreach(json_object_get(old, "webhooks"), i, hook)
    {
        const json_t *v = member(hook, "sideEffects");
        if (!v || !in_list(str_or_empty(v), no_side_effects))
            return false;
    }
    return true;
}

static bool old_known_review_versions(const json_t *old)
{
    size_t i, j;
    json_t *hook, *v;
    json_array_foreach(json_object_get(old, "webhooks"), i, hook)
    {
        const json_t *versions = json_object_get(hook, "admissionReviewVersions");
        bool known = false;
        json_array_foreach(versions, j, v) known |= in_list(str_or_empty(v), review_versions);
        if (!known && json_array_size(versions))
            return false;
    }
    return true;
}

static bool old_unique_names(const json_t *old)
{
    const json_t *hooks = json_object_get(old, "webhooks");
    for (size_t i = 0; i < json_array_size(hooks); i++)
        for (size_t k = 0; k < i; k++)
            if (!strcmp(str_or_empty(json_object_get(json_array_get(hooks, i), "name")),
                        str_or_empty(json_object_get(json_array_get(hooks, k), "name"))))
                return false;
    return true;
}

static bool old_invalid_label_values(const json_t *old)
{
    static const char *const sels[] = {"namespaceSelector", "objectSelector"};
    bool bad = false;
    size_t i;
    json_t *hook;
    json_array_foreach(json_object_get(old, "webhooks"), i, hook)
    {
        for (size_t k = 0; k < 2 && !bad; k++) {
            const json_t *sel = member(hook, sels[k]);
            if (!sel)
                continue;
            ckube_status *scratch = ckube_status_invalid_begin(GROUP, "x", "");
            bad = ckube_validate_label_selector(sel, sels[k], false, scratch) > 0;
            ckube_status_free(scratch);
        }
    }
    return bad;
}

/* Whether every webhook's matchConditions are the stored ones. */
static bool same_match_conditions(const json_t *obj, const json_t *old)
{
    const json_t *nh = json_object_get(obj, "webhooks"), *oh = json_object_get(old, "webhooks");
    if (json_array_size(nh) != json_array_size(oh))
        return false;
    for (size_t i = 0; i < json_array_size(nh); i++) {
        const json_t *a = member(json_array_get(nh, i), "matchConditions");
        const json_t *b = member(json_array_get(oh, i), "matchConditions");
        if (!a != !b || (a && !json_equal(a, b)))
            return false;
    }
    return true;
}

static void validate_kind(const json_t *obj, const json_t *old, bool mutating, ckube_status *st)
{
    opts o = {.mutating = mutating,
              .require_no_side_effects = true,
              .require_known_review = true,
              .require_unique_names = true};
    if (old) {
        o.require_no_side_effects = old_no_side_effects(old);
        o.require_known_review = old_known_review_versions(old);
        o.require_unique_names = old_unique_names(old);
        o.allow_invalid_label_values = old_invalid_label_values(old);
        o.ignore_match_conditions = same_match_conditions(obj, old);
    }
    validate_configuration(obj, &o, st);
}

static void mutating_validate(const resource_type *t, const json_t *obj, const json_t *old,
                              ckube_status *st)
{
    (void)t;
    validate_kind(obj, old, true, st);
}

static void validating_validate(const resource_type *t, const json_t *obj, const json_t *old,
                                ckube_status *st)
{
    (void)t;
    validate_kind(obj, old, false, st);
}

/* ---- printing and the table ---------------------------------------------- */

static json_t *cell_webhooks(const json_t *obj)
{
    return json_integer((json_int_t)json_array_size(json_object_get(obj, "webhooks")));
}

static const col_def cols_configuration[] = {NAME_COL,
                                             {"Webhooks", "integer", "", NULL, cell_webhooks, 0,
                                              "How many webhooks the configuration holds."},
                                             AGE_COL,
                                             END_COL};

/* Cluster-scoped, in the api-extensions category, generation tracked
 * (upstream bumps it when the webhooks change: nothing else is outside
 * metadata), no create on update, as upstream's strategies; their
 * AllowUnconditionalUpdate is false for both: a PUT names the
 * resourceVersion it replaces. */
static const builtin types[] = {
    {.group = GROUP,
     .version = "v1",
     .resource = "mutatingwebhookconfigurations",
     .kind = "MutatingWebhookConfiguration",
     .singular = "mutatingwebhookconfiguration",
     .categories = {"api-extensions"},
     .generation = true,
     .name_kind = CKUBE_NAME_DNS1123_SUBDOMAIN,
     .patch_meta = patchmeta_mutatingwebhookconfiguration,
     .cols = cols_configuration,
     .prepare_create = mutating_prepare_create,
     .prepare_update = mutating_prepare_update,
     .validate = mutating_validate,
     .conditional_update = true},
    {.group = GROUP,
     .version = "v1",
     .resource = "validatingwebhookconfigurations",
     .kind = "ValidatingWebhookConfiguration",
     .singular = "validatingwebhookconfiguration",
     .categories = {"api-extensions"},
     .generation = true,
     .name_kind = CKUBE_NAME_DNS1123_SUBDOMAIN,
     .patch_meta = patchmeta_validatingwebhookconfiguration,
     .cols = cols_configuration,
     .prepare_create = validating_prepare_create,
     .prepare_update = validating_prepare_update,
     .validate = validating_validate,
     .conditional_update = true},
};

int admissionregistration_install(registry *reg)
{
    return builtin_install(reg, types, sizeof types / sizeof *types);
}
