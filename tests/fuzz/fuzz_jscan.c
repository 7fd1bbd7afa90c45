/* Fuzzes the canonical-JSON scanner (src/apiserver/jscan.c) against
 * jansson, which is the reference for everything it claims.
 *
 * Invariants checked:
 *  - jscan_canonical(b) implies json_dumps(json_loadb(b), JSON_COMPACT) == b;
 *  - conversely, a value that round-trips like that is canonical unless it
 *    holds a real or nests deeper than JSCAN_MAX_DEPTH (both refused on
 *    purpose);
 *  - on canonical objects, the recorded metadata / resourceVersion / labels
 *    positions are those of jansson's values, jscan_set_rv gives exactly
 *    what setting metadata.resourceVersion on the tree and dumping gives,
 *    label iteration and unescaping match jansson's keys and strings, and
 *    jscan_path / jscan_scalar_dup match ckube_json_get_path and the
 *    cacher's field text;
 *  - jscan_dump of any tree jansson decodes writes jansson's compact bytes
 *    and knows, without scanning them, what jscan_canonical says of them
 *    (canonical or not, and every recorded position);
 *  - on any input, the navigation functions stay inside the buffer (ASan). */
#include <jansson.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "apiserver/codec/jscan.h"
#include "ckube/json.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(int cond, const char *what)
{
    if (!cond) {
        fprintf(stderr, "fuzz_jscan: invariant failed: %s\n", what);
        abort();
    }
}

/* Nesting depth (a scalar is 0) and whether a real occurs. */
static size_t depth_of(const json_t *v, int *real)
{
    size_t d = 0;
    if (json_is_real(v))
        *real = 1;
    if (json_is_object(v)) {
        const char *k;
        json_t *x;
        json_object_foreach((json_t *)v, k, x)
        {
            size_t c = depth_of(x, real);
            d = c > d ? c : d;
        }
        return d + 1;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *x;
        json_array_foreach(v, i, x)
        {
            size_t c = depth_of(x, real);
            d = c > d ? c : d;
        }
        return d + 1;
    }
    return 0;
}

/* The span's bytes equal the compact dump of v. */
static int span_is(const char *buf, jspan s, const json_t *v)
{
    char *d = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    int eq = d && strlen(d) == s.len && !memcmp(d, buf + s.off, s.len);
    free(d);
    return eq;
}

/* The cacher's text for a selectable field read from a tree. */
static char *tree_scalar(const json_t *v)
{
    char b[64];
    if (json_is_string(v))
        return strdup(json_string_value(v));
    if (json_is_integer(v)) {
        snprintf(b, sizeof b, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        return strdup(b);
    }
    if (json_is_boolean(v))
        return strdup(json_is_true(v) ? "true" : "false");
    return strdup("");
}

static const char *const paths[] = {
    "metadata.name", "metadata.resourceVersion", "spec.nodeName", "a",     "a.b",  "a[0]", "a[1].b",
    ".x.y",          "metadata.labels",          "b[-1]",         "b[99]", "b[ 1]"};

static void check_paths(const char *buf, size_t len, const json_t *v)
{
    for (size_t i = 0; i < sizeof paths / sizeof *paths; i++) {
        jspan s;
        int found = jscan_path(buf, len, 0, paths[i], &s);
        json_t *want = ckube_json_get_path(v, paths[i]);
        check(found == (want != NULL), "jscan_path finds what ckube_json_get_path finds");
        if (!found)
            continue;
        check(span_is(buf, s, want), "jscan_path's span is the value");
        char *a = jscan_scalar_dup(buf, s), *b = tree_scalar(want);
        check(a && b && !strcmp(a, b), "field text matches");
        free(a);
        free(b);
    }
}

static void check_labels(const char *buf, size_t len, const jscan_meta *m, const json_t *labels)
{
    check(span_is(buf, (jspan){m->labels, jscan_skip(buf, len, m->labels) - m->labels}, labels),
          "labels position");
    if (!json_is_object(labels))
        return;
    size_t pos = m->labels;
    jspan k, v;
    void *it = json_object_iter((json_t *)labels);
    while (jscan_next_member(buf, len, &pos, &k, &v)) {
        check(it != NULL, "no more members than jansson");
        char *key = jscan_str_dup(buf, k);
        check(key && !strcmp(key, json_object_iter_key(it)), "member keys in order");
        check(jscan_str_eq(buf, k, json_object_iter_key(it)), "jscan_str_eq");
        json_t *val = json_object_iter_value(it);
        check(span_is(buf, v, val), "member value span");
        if (json_is_string(val)) {
            check(jscan_kind(buf, v) == '"', "string kind");
            char *s = jscan_str_dup(buf, (jspan){v.off + 1, v.len - 2});
            check(s && !strcmp(s, json_string_value(val)), "string unescaping");
            free(s);
        }
        free(key);
        it = json_object_iter_next((json_t *)labels, it);
    }
    check(it == NULL, "as many members as jansson");
}

static void check_object(const char *buf, size_t len, const jscan_meta *m, json_t *v)
{
    json_t *meta = json_object_get(v, "metadata");
    if (!json_is_object(meta)) {
        check(m->metadata == 0, "no metadata recorded");
        return;
    }
    check(m->metadata && m->metadata_end > m->metadata, "metadata recorded");
    check(span_is(buf, (jspan){m->metadata, m->metadata_end + 1 - m->metadata}, meta),
          "metadata span");
    json_t *rv = json_object_get(meta, "resourceVersion");
    check(rv ? m->rv.off != 0 && span_is(buf, m->rv, rv) : m->rv.off == 0, "resourceVersion");
    json_t *labels = json_object_get(meta, "labels");
    check(labels ? m->labels != 0 : m->labels == 0, "labels recorded");
    if (labels)
        check_labels(buf, len, m, labels);

    /* The splice against jansson's set + dump. */
    size_t n = jscan_set_rv(buf, len, m, "1234", NULL);
    char *out = malloc(n + 1);
    check(out != NULL, "malloc");
    check(jscan_set_rv(buf, len, m, "1234", out) == n && strlen(out) == n, "splice size");
    json_object_set_new(meta, "resourceVersion", json_string("1234"));
    char *want = json_dumps(v, JSON_COMPACT);
    check(want && !strcmp(out, want), "splice equals set + dump");
    free(want);
    /* The result is canonical again, with the new value recorded. */
    jscan_meta m2;
    check(jscan_canonical(out, n, &m2) && m2.rv.len == 6 && !memcmp(out + m2.rv.off, "\"1234\"", 6),
          "splice result is canonical");
    free(out);
}

/* jscan_dump of a tree: the writer's bytes, and what jscan_canonical says
 * of them (the flag and, when canonical, every position). */
static void check_dump(const json_t *v)
{
    jscan_meta dm, sm;
    bool canon;
    size_t n;
    char *out = jscan_dump(v, &n, &dm, &canon);
    char *want = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
    check(out && want && strlen(want) == n && !memcmp(out, want, n), "jscan_dump's bytes");
    bool scanned = jscan_canonical(out, n, &sm);
    check(canon == scanned, "jscan_dump knows whether its output is canonical");
    if (canon)
        check(dm.metadata == sm.metadata && dm.metadata_end == sm.metadata_end &&
                  dm.rv.off == sm.rv.off && dm.rv.len == sm.rv.len && dm.labels == sm.labels,
              "jscan_dump's positions are jscan_canonical's");
    else
        check(dm.metadata == 0 && dm.rv.off == 0 && dm.labels == 0, "no positions when not");
    free(out);
    free(want);
}

/* Navigation on arbitrary bytes: must not crash or read out of bounds. */
static void poke(const char *buf, size_t len)
{
    size_t e = jscan_skip(buf, len, 0);
    check(e <= len, "skip stays inside");
    size_t pos = 0;
    jspan k, v;
    for (int i = 0; i < 64 && jscan_next_member(buf, len, &pos, &k, &v); i++) {
        check(k.off + k.len <= len && v.off + v.len <= len, "member spans inside");
        free(jscan_str_dup(buf, k));
        free(jscan_scalar_dup(buf, v));
        (void)jscan_kind(buf, v);
        (void)jscan_str_eq(buf, k, "a");
    }
    jspan s;
    if (jscan_path(buf, len, 0, "a.b[1]", &s))
        free(jscan_scalar_dup(buf, s));
    (void)jscan_member(buf, len, 0, "metadata", &s);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    /* A private copy, exactly `size` bytes, so ASan sees any overread. */
    char *buf = malloc(size ? size : 1);
    if (!buf)
        return 0;
    memcpy(buf, data, size);
    jscan_meta m;
    int canon = jscan_canonical(buf, size, &m);
    json_t *v = json_loadb(buf, size, 0, NULL);
    char *dump = v ? json_dumps(v, JSON_COMPACT) : NULL;
    int roundtrip = dump && strlen(dump) == size && !memcmp(dump, buf, size);
    free(dump);
    if (canon)
        check(roundtrip, "canonical bytes round-trip through jansson");
    if (roundtrip && !canon) {
        int real = 0;
        size_t d = depth_of(v, &real);
        check(real || d > JSCAN_MAX_DEPTH, "round-tripping bytes are canonical");
    }
    if (!canon)
        check(m.metadata == 0 && m.rv.off == 0 && m.labels == 0, "no positions when refused");
    if (v)
        check_dump(v);
    if (canon) {
        check_paths(buf, size, v);
        if (json_is_object(v))
            check_object(buf, size, &m, v);
    }
    poke(buf, size);
    json_decref(v);
    free(buf);
    return 0;
}
