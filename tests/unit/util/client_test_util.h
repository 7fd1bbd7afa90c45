/* client_test_util.h - small helpers shared by the client tests (each
 * test file is its own executable, so everything here is static). */
#ifndef CKUBE_CLIENT_TEST_UTIL_H
#define CKUBE_CLIENT_TEST_UTIL_H

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* A fresh directory under $CKUBE_TEST_TMP (or /tmp). Caller frees the
 * path; the directory is left for inspection after failures. */
static inline char *ctu_tmpdir(const char *tag)
{
    const char *base = getenv("CKUBE_TEST_TMP");
    if (!base || !*base)
        base = "/tmp";
    mkdir(base, 0700);
    char *p = NULL;
    if (asprintf(&p, "%s/%s-XXXXXX", base, tag) < 0)
        return NULL;
    if (!mkdtemp(p)) {
        free(p);
        return NULL;
    }
    return p;
}

/* Writes dir/name (dir may be NULL: name is the path). Returns the full
 * path (caller frees) or NULL. */
static inline char *ctu_write(const char *dir, const char *name, const char *content)
{
    char *p = NULL;
    if (dir ? asprintf(&p, "%s/%s", dir, name) < 0 : (p = strdup(name)) == NULL)
        return NULL;
    char *tmp = NULL;
    if (asprintf(&tmp, "%s.tmp%d", p, (int)getpid()) < 0) {
        free(p);
        return NULL;
    }
    FILE *f = fopen(tmp, "w");
    if (!f) {
        free(tmp);
        free(p);
        return NULL;
    }
    fputs(content, f);
    fclose(f);
    rename(tmp, p); /* atomic: readers never see half a file */
    free(tmp);
    return p;
}

static inline char *ctu_fmt(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static inline char *ctu_fmt(const char *fmt, ...)
{
    char *s = NULL;
    va_list ap;
    va_start(ap, fmt);
    if (vasprintf(&s, fmt, ap) < 0)
        s = NULL;
    va_end(ap);
    return s;
}

static inline double ctu_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static inline void ctu_sleep_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

#endif
