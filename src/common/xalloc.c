/* Allocation that cannot fail (xalloc.h). */
#include "common/xalloc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ckube/log.h"

_Noreturn void xalloc_die(void)
{
    /* klog's writer formats into a stack buffer: no allocation. */
    CKUBE_ERROR("out of memory");
    abort();
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        xalloc_die();
    return p;
}

void *xalloc_malloc(size_t n)
{
    return xmalloc(n);
}

void *xcalloc(size_t n, size_t size)
{
    void *p = calloc(n ? n : 1, size ? size : 1);
    if (!p)
        xalloc_die();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        xalloc_die();
    return q;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        xalloc_die();
    return p;
}

char *xstrndup(const char *s, size_t n)
{
    char *p = strndup(s, n);
    if (!p)
        xalloc_die();
    return p;
}

char *xasprintf(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    char *s = NULL;
    int rc = vasprintf(&s, fmt, ap);
    va_end(ap);
    if (rc < 0)
        xalloc_die();
    return s;
}
