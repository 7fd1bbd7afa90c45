/* xalloc.h - allocation that cannot fail: the server's out-of-memory
 * policy (docs/design.md, "Errors and out of memory").
 *
 * kube-apiserver does not survive running out of memory (Go's runtime
 * ends the process), and neither does `ckube server`: each function here
 * logs "out of memory" and aborts when the allocation fails, so callers
 * never see NULL and never leave a write half done. What a request may
 * allocate is bounded beforehand (413s; "Bounded memory per request"),
 * so this is the last line, not the way requests are refused. The server
 * also gives jansson xalloc_malloc (ckube_server_main), so a json_*
 * constructor never returns NULL there either.
 *
 * For the server's modules (apiserver/, storage/) and the binaries only:
 * libckube returns errors instead, as a library must, and
 * scripts/check-layers.py refuses this header in client/, informer/,
 * workqueue/, runtime/ and controllers/.
 */
#ifndef CKUBE_COMMON_XALLOC_H
#define CKUBE_COMMON_XALLOC_H

#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

/* Logs and aborts. Out of line and cold: the inline functions below
 * cost a test and a branch over the plain call. */
_Noreturn void xalloc_die(void) __attribute__((cold));

/* As malloc, calloc, realloc, strdup, strndup and asprintf, never NULL
 * (a zero size still gives a unique pointer). Free with free(). Inline:
 * allocation is on every request's path, a call per allocation shows. */
static inline void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (__builtin_expect(!p, 0))
        xalloc_die();
    return p;
}

static inline void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (__builtin_expect(!p, 0))
        xalloc_die();
    return p;
}

static inline void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (__builtin_expect(!q, 0))
        xalloc_die();
    return q;
}

static inline char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (__builtin_expect(!p, 0))
        xalloc_die();
    return p;
}

static inline char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (__builtin_expect(!p, 0))
        xalloc_die();
    return p;
}

char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* malloc and realloc for the allocators of jansson (json_set_alloc_funcs)
 * and libevent (event_set_mem_functions), which need functions. */
void *xalloc_malloc(size_t n);
void *xalloc_realloc(void *p, size_t n);

#endif
