/* informer_test_util.h - helpers shared by the informer tests (each
 * test_*.c is its own executable, so everything here is static inline). */
#ifndef CKUBE_INFORMER_TEST_UTIL_H
#define CKUBE_INFORMER_TEST_UTIL_H

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <jansson.h>

static inline void tu_sleep_ms(int ms)
{
    struct timespec ts = {.tv_sec = ms / 1000, .tv_nsec = (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

/* Polls `cond` every millisecond for up to `ms` real milliseconds; yields
 * whether it became true. */
#define TU_WAIT(cond, ms)                                                                          \
    ({                                                                                             \
        bool tu_ok_ = false;                                                                       \
        for (int tu_i_ = 0; tu_i_ <= (ms); tu_i_++) {                                              \
            if (cond) {                                                                            \
                tu_ok_ = true;                                                                     \
                break;                                                                             \
            }                                                                                      \
            tu_sleep_ms(1);                                                                        \
        }                                                                                          \
        tu_ok_;                                                                                    \
    })

/* A test object: apiVersion v1, kind Fake, metadata {name, namespace (NULL
 * = cluster-scoped), labels {lk: lv} when lk}, spec {value}. New
 * reference. */
static inline json_t *tu_obj(const char *ns, const char *name, const char *lk, const char *lv,
                             int value)
{
    json_t *meta = json_pack("{s:s}", "name", name);
    if (ns)
        json_object_set_new(meta, "namespace", json_string(ns));
    if (lk)
        json_object_set_new(meta, "labels", json_pack("{s:s}", lk, lv));
    return json_pack("{s:s, s:s, s:o, s:{s:i}}", "apiVersion", "v1", "kind", "Fake", "metadata",
                     meta, "spec", "value", value);
}

/* Redirects stderr (fd 2) into a temporary file until tu_capture_end,
 * which returns what was written (malloc'd) and restores stderr. */
typedef struct tu_capture {
    int saved_fd;
    FILE *tmp;
} tu_capture;

static inline void tu_capture_begin(tu_capture *c)
{
    fflush(stderr);
    c->tmp = tmpfile();
    c->saved_fd = dup(2);
    dup2(fileno(c->tmp), 2);
}

static inline char *tu_capture_end(tu_capture *c)
{
    fflush(stderr);
    dup2(c->saved_fd, 2);
    close(c->saved_fd);
    long n = ftell(c->tmp);
    if (n < 0)
        n = 0;
    char *buf = calloc(1, (size_t)n + 1);
    rewind(c->tmp);
    size_t got = fread(buf, 1, (size_t)n, c->tmp);
    buf[got] = '\0';
    fclose(c->tmp);
    /* Echo it, so the output still shows in the test log. */
    fputs(buf, stderr);
    return buf;
}

#endif
