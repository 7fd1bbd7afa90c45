/* compactor.h - a thread that compacts storage history periodically. */
#ifndef CKUBE_STORAGE_COMPACTOR_H
#define CKUBE_STORAGE_COMPACTOR_H

#include "storage/storage.h"

typedef struct compactor compactor;

/* Starts compacting `st` (borrowed; must outlive the compactor) every
 * interval_sec seconds (0: 300). NULL on failure. */
compactor *compactor_start(storage *st, unsigned interval_sec);
/* Stops and joins the thread; waits for a compaction in progress. */
void compactor_stop(compactor *c);

#endif
