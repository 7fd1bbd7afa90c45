/* informer_internal.h - functions shared between the informer's own
 * source files; not part of the public API. */
#ifndef CKUBE_INFORMER_INTERNAL_H
#define CKUBE_INFORMER_INTERNAL_H

#include "ckube/informer.h"

/* Makes the current (or next) ckube_delta_fifo_pop return 0 at once, so
 * its caller can recompute its deadline (e.g. a handler with a resync
 * period was added). Thread-safe. */
void ckube_delta_fifo_kick(ckube_delta_fifo *f);

#endif
