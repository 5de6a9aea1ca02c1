/* SPDX-License-Identifier: MIT */
/*
 * The bootstrap heap used while the real allocator is being resolved (bootstrap.h).
 * Each block is preceded by a 16-byte header holding its size, for realloc and
 * malloc_usable_size. Memory is zero-initialised (static storage), so calloc needs nothing.
 */
#include "interpose/bootstrap.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>

#include "common/atomic.h"

#define BOOTSTRAP_BYTES MEMPROF_BOOTSTRAP_BYTES
#define HEADER          16
#define heap            memprof__bootstrap_heap

/* Aligned as a block header; blocks are aligned by address below. (A larger alignment here
 * would align the whole .bss, whose first page would then be one more page fault in every
 * process, where now it shares the page the loader has written already.) */
_Alignas(HEADER) unsigned char memprof__bootstrap_heap[MEMPROF_BOOTSTRAP_BYTES];
static _Atomic size_t used;

void *memprof__bootstrap_alloc(size_t n, size_t align)
{
    if (align < HEADER)
        align = HEADER;
    if (n > BOOTSTRAP_BYTES || align > BOOTSTRAP_BYTES / 4) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = (n + HEADER - 1) / HEADER * HEADER;
    /* Relaxed: the read-modify-write alone makes the ranges disjoint; the memory is static and
     * zeroed, so there is nothing else to publish. */
    size_t cur = memprof_atomic_load_relaxed(&used), start, end;
    uintptr_t base = (uintptr_t)heap;
    do {
        /* The block's offset, its address aligned, its header before it. */
        start = ((base + cur + HEADER + align - 1) & ~(uintptr_t)(align - 1)) - base;
        end = start + need;
        if (end > BOOTSTRAP_BYTES) {
            errno = ENOMEM;
            return NULL;
        }
    } while (!memprof_atomic_cas_weak_relaxed(&used, &cur, end));
    *(size_t *)(heap + start - HEADER) = n;
    return heap + start;
}

size_t memprof__bootstrap_size(const void *p)
{
    return *(const size_t *)((const unsigned char *)p - HEADER);
}
