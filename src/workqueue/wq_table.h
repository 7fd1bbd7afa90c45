/* wq_table.h - private to src/workqueue: an open-addressing hash table
 * keyed by NUL-terminated strings, used for the queue's interned items
 * and the per-item rate limiters' failure counts.
 *
 * The table stores (hash, key, value) triples. It never copies or frees
 * keys or values: a key pointer must stay valid while its entry is in the
 * table (callers point it into the value, which embeds the key). Linear
 * probing with backward-shift deletion (no tombstones), at most half
 * full. Not thread-safe: callers hold their own lock.
 */
#ifndef CKUBE_WQ_TABLE_H
#define CKUBE_WQ_TABLE_H

#include <stddef.h>
#include <stdint.h>

typedef struct wq_slot {
    uint64_t hash;
    const char *key; /* NULL = empty slot */
    void *val;
} wq_slot;

typedef struct wq_table {
    wq_slot *slots;
    size_t cap; /* 0 or a power of two */
    size_t len;
} wq_table;

/* Hash of the `len` bytes of `key`. */
uint64_t wq_hash(const char *key, size_t len);

/* The value stored under key (with hash h), or NULL. */
void *wq_table_get(const wq_table *t, const char *key, uint64_t h);
/* Inserts a key known to be absent. Returns 0, or -1 when out of memory
 * (the table is unchanged). */
int wq_table_insert(wq_table *t, const char *key, uint64_t h, void *val);
/* Removes key; returns its value, or NULL when absent. */
void *wq_table_remove(wq_table *t, const char *key, uint64_t h);
/* Frees the slot array (not keys or values); the table becomes empty. */
void wq_table_destroy(wq_table *t);

#endif
