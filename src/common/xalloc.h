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

/* Logs and aborts. */
_Noreturn void xalloc_die(void);

/* As malloc, calloc, realloc, strdup, strndup and asprintf, never NULL
 * (a zero size still gives a unique pointer). Free with free(). */
void *xmalloc(size_t n);
void *xcalloc(size_t n, size_t size);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);
char *xstrndup(const char *s, size_t n);
char *xasprintf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* malloc for json_set_alloc_funcs. */
void *xalloc_malloc(size_t n);

#endif
