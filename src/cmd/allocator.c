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

/* glibc's top pad while the cache loads (an arena reservation's whole
 * size, HEAP_MAX_SIZE on 64-bit) and after it (glibc's default,
 * DEFAULT_TOP_PAD). See cmd_allocator_init. */
#define LOAD_TOP_PAD (64 << 20)
#define RUN_TOP_PAD (128 << 10)
/* glibc's DEFAULT_MMAP_THRESHOLD_MAX on 64-bit. */
#define MMAP_THRESHOLD (32 << 20)
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
    /* Under mimalloc glibc's heap holds only cached objects, and a
     * start-up at a million of them fills the builder threads' arenas
     * with 1.7 GB. A glibc arena other than the main one is a series of
     * 64 MiB reservations, each made writable by mprotect as the arena
     * grows into it: past its first top-pad bytes, one call per page it
     * grows by, so 160,000-220,000 calls per start (strace), each
     * splitting and merging the arena's mappings while both CPUs fault
     * pages in. With the pad at 64 MiB a new reservation is writable
     * whole at once: 86 calls, start-up 2.1-2.5 s -> 1.8-2.1 s on the
     * same data (alternating runs). Only address space is made writable;
     * pages come when touched (RSS unchanged), though under strict
     * overcommit (vm.overcommit_memory=2) each arena's 64 MiB is charged
     * at once. */
    mallopt(M_TOP_PAD, LOAD_TOP_PAD);
    /* Setting any of glibc's thresholds stops it from raising its mmap
     * threshold (128 KiB) as mapped chunks are freed. Left there, every
     * version of an object above 128 KiB (a large CRD or ConfigMap)
     * would get a new mapping and fault its pages in afresh; at the
     * ceiling the rising threshold has (32 MiB on 64-bit), objects of
     * any size the server accepts come from the heap, as they did once
     * the threshold had risen. */
    mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD);
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
    mallopt(M_TOP_PAD, RUN_TOP_PAD);
#endif
    /* glibc's heap: all of it, or (under mimalloc) the cached objects',
     * where the objects a start-up replaced leave holes */
    malloc_trim(0);
}
