/* backend.h - where Networks become real: the "actual state" side of the
 * controller (the seed article's Neutron, left as pseudo-code there).
 *
 * A backend keeps one network per Network key ("namespace/name"). The
 * controller only ever asks three things, and every call is idempotent,
 * so a sync can be repeated at any time:
 *
 *   observe(key)        what exists now (read back from the real system,
 *                       never from a memory of what was asked);
 *   apply(key, want)    make it exist and match `want` (create or fix);
 *   remove(key)         make it not exist.
 *
 * plus list(), the keys that exist, for clean-up of networks whose
 * Network object vanished while nobody watched.
 *
 * Implementations:
 *   - linux-bridge (backend_bridge.c): a Linux bridge per Network in a
 *     network namespace of its own, carrying gateway/prefix-length,
 *     driven and read back over rtnetlink (libmnl). Needs CAP_NET_ADMIN.
 *   - memory (backend_memory.c): a table in the process, optionally kept
 *     in a JSON state file so it outlives a restart like a real system.
 *
 * Thread-safety: every function may be called from any thread; a
 * backend serialises what it must. Errors come back as *err, a malloc'd
 * message the caller frees, worded for a user reading an Event.
 */
#ifndef NETCTL_BACKEND_H
#define NETCTL_BACKEND_H
#include "netaddr.h"

#include <stdbool.h>
#include <stddef.h>

/* What a Network asks for: an interface carrying gateway/cidr.len. */
typedef struct netctl_want {
    netaddr_prefix cidr;
    netaddr gateway;
} netctl_want;

#define NETCTL_MAX_ADDRS 16

/* What exists for a key. */
typedef struct netctl_actual {
    bool exists;
    char device[32]; /* the interface's name, e.g. "ckn-1a2b3c4d" */
    bool up;         /* administratively up */
    size_t naddrs;   /* global addresses on it (link-local ones are not listed) */
    struct {
        netaddr addr;
        int len;
    } addrs[NETCTL_MAX_ADDRS];
} netctl_actual;

typedef struct netctl_backend netctl_backend;

typedef struct netctl_backend_ops {
    const char *name;
    int (*observe)(netctl_backend *b, const char *key, netctl_actual *out, char **err);
    int (*apply)(netctl_backend *b, const char *key, const netctl_want *want, char **err);
    int (*remove)(netctl_backend *b, const char *key, char **err);
    /* *keys: malloc'd array of malloc'd strings (caller frees both). */
    int (*list)(netctl_backend *b, char ***keys, size_t *n, char **err);
    void (*free)(netctl_backend *b);
} netctl_backend_ops;

/* Every backend embeds this first. */
struct netctl_backend {
    const netctl_backend_ops *ops;
};

/* The linux-bridge backend in network namespace `netns` (created when
 * missing, under /run/netns like `ip netns add`). NULL with *err when the
 * namespace cannot be created or entered (no CAP_NET_ADMIN, ...). */
netctl_backend *netctl_backend_bridge_new(const char *netns, char **err);

/* The memory backend. `state_file` may be NULL (state dies with the
 * process); otherwise it is loaded at start (a missing file is empty) and
 * rewritten atomically after every change. NULL with *err when the file
 * exists and cannot be read. */
netctl_backend *netctl_backend_memory_new(const char *state_file, char **err);

/* Convenience wrappers. */
static inline int netctl_backend_observe(netctl_backend *b, const char *key, netctl_actual *out,
                                         char **err)
{
    return b->ops->observe(b, key, out, err);
}
static inline int netctl_backend_apply(netctl_backend *b, const char *key, const netctl_want *want,
                                       char **err)
{
    return b->ops->apply(b, key, want, err);
}
static inline int netctl_backend_remove(netctl_backend *b, const char *key, char **err)
{
    return b->ops->remove(b, key, err);
}
static inline int netctl_backend_list(netctl_backend *b, char ***keys, size_t *n, char **err)
{
    return b->ops->list(b, keys, n, err);
}
static inline const char *netctl_backend_name(const netctl_backend *b)
{
    return b->ops->name;
}
void netctl_backend_free(netctl_backend *b);

/* True when `actual` is exactly what `want` asks for: the interface
 * exists, is up, and carries gateway/len as its only global address. */
bool netctl_actual_matches(const netctl_actual *actual, const netctl_want *want);

/* The interface name for a key: "ckn-" + 8 hex digits of a hash of the
 * key (names are limited to 15 bytes; the key itself is kept in the
 * interface's alias). */
void netctl_device_name(const char *key, char out[16]);

void netctl_free_keys(char **keys, size_t n);

#endif
