/* SPDX-License-Identifier: MIT */
/*
 * Native stack capture for the sampling cold path.
 *
 * This version walks frame pointers. The walk never faults: every frame address is checked
 * against [the walker's own frame, the top of the thread's stack) before it is read, must be
 * aligned, and must strictly increase. Frames inside the profiler's own code (registered
 * text ranges) at the leaf end are skipped, so a stack starts at the caller of malloc.
 */
#ifndef MEMPROF_CORE_CAPTURE_H
#define MEMPROF_CORE_CAPTURE_H

#include <stdbool.h>
#include <stdint.h>

/* Registers [lo, hi) as profiler code to skip at the leaf end of stacks (up to 8 ranges).
 * Not thread-safe against itself; call during initialisation. */
void memprof__capture_add_own_range(uintptr_t lo, uintptr_t hi);
/* Registers the text of the loaded object containing `addr` as profiler code. */
void memprof__capture_add_own_object(const void *addr);

/* Captures up to `max` return addresses (leaf first) into `frames`, walking no higher than
 * `stack_top` (exclusive; 0 = unknown, then nothing is walked). Sets *truncated when the
 * stack had more frames than `max`. Returns the number of frames stored. */
unsigned memprof__capture_fp(uintptr_t *frames, unsigned max, uintptr_t stack_top,
                             bool *truncated);

#endif
