/* SPDX-License-Identifier: MIT */
/*
 * The registry of runtime frame sources (include/memprof/runtime.h): up to
 * MEMPROF_MAX_FRAME_SOURCES slots, written under a mutex by (un)registration and read
 * lock-free by the sampling cold path. A slot's callbacks are published with a release store
 * of its `active` flag and never change while it is active.
 */
#ifndef MEMPROF_CORE_SOURCES_H
#define MEMPROF_CORE_SOURCES_H

#include <stdint.h>

#include "memprof/runtime.h"

/* Registers a source (a struct of the current size); returns its id (its tag - 1), or -EINVAL,
 * or -ENOSPC when every slot is taken or all 255 tags were given out. */
int memprof__sources_register(const memprof_frame_source *src);
int memprof__sources_unregister(int id);
/* Cold path: asks the active sources, in order, for the thread's interpreter frames.
 * Returns the number of ids stored and sets *source to the tag of the source that gave them
 * (0 if none). */
unsigned memprof__sources_capture(uint64_t *ids, unsigned max, unsigned *source);
/* The callbacks of the source tagged `source`, or NULL if it is not active. The returned
 * pointer stays valid (slots are never freed) but may be deactivated concurrently. */
const memprof_frame_source *memprof__sources_get(unsigned source);

#endif
