/* wq_table.c - string-keyed open-addressing hash table (see wq_table.h). */
#include "wq_table.h"

#include <stdlib.h>
#include <string.h>

uint64_t wq_hash(const char *key, size_t len)
{
    /* 8 bytes at a time with multiply/xor-shift mixing: keys are short
     * ("namespace/name"), so this beats byte-wise hashes by a wide margin
     * and spreads well enough for linear probing. */
    const unsigned char *p = (const unsigned char *)key;
    uint64_t h = 0x243f6a8885a308d3ull ^ (len * 0x9e3779b97f4a7c15ull);
    while (len >= 8) {
        uint64_t w;
        memcpy(&w, p, 8);
        h = (h ^ w) * 0xbf58476d1ce4e5b9ull;
        h ^= h >> 31;
        p += 8;
        len -= 8;
    }
    /* The 0..7 byte tail without a variable-length copy: two overlapping
     * 4-byte loads, or three single bytes. */
    uint64_t w = 0;
    if (len >= 4) {
        uint32_t lo, hi;
        memcpy(&lo, p, 4);
        memcpy(&hi, p + len - 4, 4);
        w = (uint64_t)lo | ((uint64_t)hi << 32);
    } else if (len > 0) {
        w = (uint64_t)p[0] | ((uint64_t)p[len / 2] << 8) | ((uint64_t)p[len - 1] << 16);
    }
    h = (h ^ w) * 0x94d049bb133111ebull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    h ^= h >> 32;
    return h;
}

static int slot_matches(const wq_slot *s, const char *key, uint64_t h)
{
    return s->hash == h && (s->key == key || strcmp(s->key, key) == 0);
}

void *wq_table_get(const wq_table *t, const char *key, uint64_t h)
{
    if (t->cap == 0)
        return NULL;
    size_t mask = t->cap - 1;
    for (size_t i = h & mask;; i = (i + 1) & mask) {
        const wq_slot *s = &t->slots[i];
        if (!s->key)
            return NULL;
        if (slot_matches(s, key, h))
            return s->val;
    }
}

static void place(wq_slot *slots, size_t mask, wq_slot e)
{
    size_t i = e.hash & mask;
    while (slots[i].key)
        i = (i + 1) & mask;
    slots[i] = e;
}

static int grow(wq_table *t)
{
    size_t cap = t->cap ? t->cap * 2 : 16;
    wq_slot *slots = calloc(cap, sizeof(*slots));
    if (!slots)
        return -1;
    for (size_t i = 0; i < t->cap; i++)
        if (t->slots[i].key)
            place(slots, cap - 1, t->slots[i]);
    free(t->slots);
    t->slots = slots;
    t->cap = cap;
    return 0;
}

int wq_table_insert(wq_table *t, const char *key, uint64_t h, void *val)
{
    if ((t->len + 1) * 2 > t->cap && grow(t) != 0)
        return -1;
    place(t->slots, t->cap - 1, (wq_slot){.hash = h, .key = key, .val = val});
    t->len++;
    return 0;
}

void *wq_table_remove(wq_table *t, const char *key, uint64_t h)
{
    if (t->cap == 0)
        return NULL;
    size_t mask = t->cap - 1;
    size_t i = h & mask;
    while (t->slots[i].key && !slot_matches(&t->slots[i], key, h))
        i = (i + 1) & mask;
    if (!t->slots[i].key)
        return NULL;
    void *val = t->slots[i].val;
    /* Backward-shift: pull later members of the probe run into the hole
     * when the hole lies between their home slot and where they sit. */
    size_t hole = i;
    for (size_t j = (i + 1) & mask; t->slots[j].key; j = (j + 1) & mask) {
        size_t home = t->slots[j].hash & mask;
        size_t dist_j = (j - home) & mask;
        size_t dist_hole = (hole - home) & mask;
        if (dist_hole <= dist_j) {
            t->slots[hole] = t->slots[j];
            hole = j;
        }
    }
    t->slots[hole] = (wq_slot){0};
    t->len--;
    return val;
}

void wq_table_destroy(wq_table *t)
{
    free(t->slots);
    t->slots = NULL;
    t->cap = t->len = 0;
}
