#include "cmd/allocator.h"

#include <malloc.h>
#include <stdio.h>

#ifdef CKUBE_MIMALLOC
#include <dlfcn.h>
#include <mimalloc.h>
#endif

#include "apiserver/cacher/cacher.h"
#include "ckube/log.h"

#ifdef CKUBE_MIMALLOC
static long decommit_delay;
#endif

void cmd_allocator_init(void)
{
#ifdef CKUBE_MIMALLOC
    /* Start-up frees large transient trees on threads that then sit
     * idle (the loops wait for requests): mimalloc returns a freed page
     * to the system only after decommit_delay (25 ms), and only when the
     * thread that freed it next allocates, so an idle server would keep
     * them (2 MiB at start). At 0 they go at once; cmd_allocator_release
     * restores the delay, without which every write pays for madvise
     * calls (measured: the whole gain of mimalloc). */
    decommit_delay = mi_option_get(mi_option_decommit_delay);
    mi_option_set(mi_option_decommit_delay, 0);
    /* mimalloc replaces malloc and also glibc's __libc_malloc aliases in
     * the global scope; looked up in libc's own scope (the handle of
     * libc.so.6, already loaded), the names find glibc's allocator, which
     * serves alongside mimalloc on its own arenas. */
    void *libc = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    void *(*alloc)(size_t) = libc ? (void *(*)(size_t))dlsym(libc, "__libc_malloc") : NULL;
    void (*release)(void *) = libc ? (void (*)(void *))dlsym(libc, "__libc_free") : NULL;
    if (alloc && release)
        cacher_set_object_allocator(alloc, release);
    else
        CKUBE_WARN("glibc's __libc_malloc not found: cached objects come from mimalloc "
                   "(about 12 %% more memory per object)");
    if (libc)
        dlclose(libc); /* NOLOAD took a reference; libc stays mapped */
#endif
}

void cmd_allocator_name(char *buf, size_t n)
{
#ifdef CKUBE_MIMALLOC
    /* mi_version() is MAJOR*100 + MINOR*10 + PATCH: 209 for 2.0.9 */
    int v = mi_version();
    snprintf(buf, n, "mimalloc %d.%d.%d", v / 100, v / 10 % 10, v % 10);
#else
    snprintf(buf, n, "glibc malloc");
#endif
}

void cmd_allocator_release(void)
{
#ifdef CKUBE_MIMALLOC
    /* force: also the pages other threads freed into this one's heaps
     * and the segments held in the cache; then the hot path's delay */
    mi_collect(true);
    mi_option_set(mi_option_decommit_delay, decommit_delay);
#endif
    /* glibc's heap: all of it, or (under mimalloc) the cached objects',
     * where the objects a start-up replaced leave holes */
    malloc_trim(0);
}
