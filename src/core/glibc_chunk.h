/* SPDX-License-Identifier: MIT */
/*
 * glibc's chunk header, as far as the sample heap writes and reads it: the two words before
 * a block of glibc's malloc, prev_size (for a chunk glibc mapped with mmap(), the block's
 * chunk's offset in its mapping) and size (the chunk's size with its flag bits, IS_MMAPPED
 * among them). A framed block of the sample heap (sampleheap.h) carries such a header with
 * IS_MMAPPED set, so that glibc's own free() and realloc(), which the GOT start cannot
 * intercept, take it for one of its mmap()ed chunks and unmap exactly the slot's pages. The
 * format is glibc's (malloc/malloc.c, "chunk details"), stable across its releases.
 */
#ifndef MEMPROF_CORE_GLIBC_CHUNK_H
#define MEMPROF_CORE_GLIBC_CHUNK_H

#include <stddef.h>
#include <stdint.h>

#include "common/atomic.h"

/* IS_MMAPPED, in the size word. */
#define MEMPROF_CHUNK_MMAPPED ((uint64_t)2)
/* The header's bytes: prev_size and size. */
#define MEMPROF_CHUNK_HEADER (2 * sizeof(uint64_t))

/* Writes the header of an mmap()ed chunk whose block is at `block`, `offset` bytes after the
 * start of its mapping, the chunk (header included) ending `extent` bytes after that start.
 * prev_size may be a word another thread still reads (a free list's link): stored
 * atomically. */
static inline void memprof__chunk_write(void *block, uint64_t offset, uint64_t extent)
{
    uint64_t *w = block;
    memprof_atomic_store_relaxed((_Atomic uint64_t *)&w[-2], offset);
    w[-1] = (extent - offset) | MEMPROF_CHUNK_MMAPPED;
}

/* Rewrites only the size word, for the chunk `offset` bytes into a mapping that now ends
 * `extent` bytes after its start (a resize in place). */
static inline void memprof__chunk_resize(void *block, uint64_t offset, uint64_t extent)
{
    ((uint64_t *)block)[-1] = (extent - offset) | MEMPROF_CHUNK_MMAPPED;
}

/* The prev_size word before `block` (it must be readable). */
static inline uint64_t memprof__chunk_offset(const void *block)
{
    return ((const uint64_t *)block)[-2];
}

/* Whether the header before `block` is that of an mmap()ed chunk `offset` bytes into a
 * mapping of `extent` bytes (the header words must be readable). */
static inline int memprof__chunk_is(const void *block, uint64_t offset, uint64_t extent)
{
    const uint64_t *w = block;
    return w[-2] == offset && w[-1] == ((extent - offset) | MEMPROF_CHUNK_MMAPPED);
}

#endif
