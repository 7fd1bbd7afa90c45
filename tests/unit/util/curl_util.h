/* curl_util.h - a response body collected by libcurl, for the tests that
 * call their servers with it: CURLOPT_WRITEFUNCTION tu_collect,
 * CURLOPT_WRITEDATA a tu_body. Static inline, for tests that include
 * <cmocka.h> first: each test is its own program. */
#ifndef CKUBE_TEST_CURL_UTIL_H
#define CKUBE_TEST_CURL_UTIL_H

#include <stddef.h>
#include <string.h>

/* The body's first bytes (what does not fit is counted, not kept),
 * always NUL-terminated; zero it before the transfer. */
typedef struct tu_body {
    char text[4096];
    size_t len;
} tu_body;

static inline size_t tu_collect(char *p, size_t size, size_t n, void *ud)
{
    tu_body *b = ud;
    size_t len = size * n, room = sizeof b->text - 1 - b->len;
    size_t take = len < room ? len : room;
    memcpy(b->text + b->len, p, take);
    b->len += take;
    b->text[b->len] = '\0';
    return len;
}

#endif
