#ifndef CKUBE_CMD_ALLOCATOR_H
#define CKUBE_CMD_ALLOCATOR_H

#include <stddef.h>

/* The `ckube` executable's malloc. A release build links mimalloc
 * (CMake's CKUBE_MALLOC, default "auto": mimalloc unless the build is
 * sanitized), which replaces malloc and free for the whole process: the
 * server's own code, jansson, SQLite, gRPC in the etcd module and libc's
 * internal allocations alike. Why: malloc and free were a quarter of the
 * server's instructions per create, and mimalloc's thread-local pages
 * take 13-18 % of the server's CPU off every write (docs/performance.md,
 * "The server on mimalloc"). The cache's long-lived objects stay with
 * glibc's malloc (cmd_allocator_init). Sanitized builds keep libc's
 * malloc, which the sanitizers replace with their own.
 *
 * libckube does not link it: a library leaves the choice of allocator to
 * the program that links it. */

/* Gives each allocator its part: under mimalloc, the cache's object
 * blocks come from glibc's malloc (cacher_set_object_allocator says why;
 * the server's RSS per cached object is then glibc's), and freed pages go
 * back to the system at once until cmd_allocator_release. Call first
 * thing, before any thread or cacher exists. */
void cmd_allocator_init(void);

/* Writes "mimalloc 2.0.9" (the library's run-time version) or "glibc
 * malloc" into buf (n bytes, NUL-terminated, truncated to fit), for the
 * start-up log line. */
void cmd_allocator_name(char *buf, size_t n);

/* Gives memory freed since the last call back to the system, where the
 * allocator keeps it: after start-up's large transient trees, so that an
 * idle server's RSS is its working set. Ends start-up's setting of the
 * allocator (cmd_allocator_init): call once, when the server is ready. */
void cmd_allocator_release(void);

#endif
