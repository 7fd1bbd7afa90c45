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

void *xalloc_malloc(size_t n)
{
    return xmalloc(n);
}

void *xalloc_realloc(void *p, size_t n)
{
    return xrealloc(p, n);
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
