/* memory.h - the in-memory storage backend (memory.c): the storage
 * interface's semantics without durability, for tests and benchmarks. */
#ifndef CKUBE_STORAGE_MEMORY_MEMORY_H
#define CKUBE_STORAGE_MEMORY_MEMORY_H

#include "storage/storage.h"

/* An in-memory backend with the same semantics (no durability). */
storage *storage_memory_open(void);

#endif
