/* quoted_json.h - JSON written inside C strings with ' for " (so a test
 * reads "{'kind':'Role'}"), parsed, compared and sent to the in-process
 * server (util/inproc_server.h). Static inline, for tests that include
 * <cmocka.h> and inproc_server.h first: each test is its own program.
 *
 *   tu_quote   a malloc'd copy of text with ' turned into "
 *   tu_json    text parsed (a new reference); the test fails on bad JSON
 *   tu_assert_json  got equals the JSON of want_text, both shown if not
 *   tu_post, tu_put  the request with the quoted body (http_call's reply) */
#ifndef CKUBE_TEST_QUOTED_JSON_H
#define CKUBE_TEST_QUOTED_JSON_H

#include <jansson.h>
#include <stdlib.h>
#include <string.h>

static inline char *tu_quote(const char *text)
{
    char *s = strdup(text);
    assert_non_null(s);
    for (char *p = s; *p; p++)
        if (*p == '\'')
            *p = '"';
    return s;
}

static inline json_t *tu_json(const char *text)
{
    char *s = tu_quote(text);
    json_error_t err;
    json_t *j = json_loads(s, 0, &err);
    if (!j)
        fail_msg("bad test JSON (%s): %s", err.text, s);
    free(s);
    return j;
}

static inline void tu_assert_json(const json_t *got, const char *want_text)
{
    json_t *want = tu_json(want_text);
    if (!json_equal(got, want)) {
        char *g = got ? json_dumps(got, JSON_COMPACT | JSON_SORT_KEYS) : strdup("(null)");
        char *w = json_dumps(want, JSON_COMPACT | JSON_SORT_KEYS);
        print_message("got:  %s\nwant: %s\n", g, w);
        free(g);
        free(w);
        json_decref(want);
        fail_msg("JSON differs");
    }
    json_decref(want);
}

static inline http_resp *tu_post(ips *s, const char *path, const char *body)
{
    char *b = tu_quote(body);
    http_resp *r = HPOST(s, b, "%s", path);
    free(b);
    return r;
}

static inline http_resp *tu_put(ips *s, const char *path, const char *body)
{
    char *b = tu_quote(body);
    http_resp *r = HPUT(s, b, "%s", path);
    free(b);
    return r;
}

#endif
