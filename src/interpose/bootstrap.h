/* SPDX-License-Identifier: MIT */
/*
 * A tiny static heap for the allocations that happen while the preload backend looks up
 * the real allocator with dlsym() (which may call calloc/malloc itself). Blocks are never
 * reused; frees of them are ignored; the heap is a fixed 64 KiB.
 */
#ifndef MEMPROF_INTERPOSE_BOOTSTRAP_H
#define MEMPROF_INTERPOSE_BOOTSTRAP_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Returns a 16-byte aligned (or `align`-aligned, align a power of two) block, or NULL with
 * errno = ENOMEM when the bootstrap heap is exhausted or n overflows. Thread-safe. */
void *memprof__bootstrap_alloc(size_t n, size_t align);
#define MEMPROF_BOOTSTRAP_BYTES (64 * 1024)
extern unsigned char memprof__bootstrap_heap[MEMPROF_BOOTSTRAP_BYTES];

/* Whether p points into the bootstrap heap (inline: every free asks). */
static inline bool memprof__bootstrap_owns(const void *p)
{
    return (uintptr_t)p - (uintptr_t)memprof__bootstrap_heap < MEMPROF_BOOTSTRAP_BYTES;
}
/* The usable size of a bootstrap block. */
size_t memprof__bootstrap_size(const void *p);

#endif
