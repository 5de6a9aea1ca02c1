/* SPDX-License-Identifier: MIT */
/*
 * Tables that grow by segments, each a mapping of its own made when the table first needs
 * it: the heap map's slots, the stack table's records and frames. Mapping a capacity up front
 * (hundreds of MiB of tables) would be address space (RLIMIT_AS), private writable memory
 * (RLIMIT_DATA) and, under vm.overcommit_memory=2, commit charge from the start, in the
 * program and in every forked child, whether touched or not; segments keep all three within
 * about twice what the table holds. Nothing is ever unmapped while hooks run, and nothing
 * moves.
 *
 * Geometry: segment 0 and segment 1 hold 2^b elements each, segment k >= 1 holds 2^(b+k-1)
 * elements starting at element 2^(b+k-1), so segments 0..k hold 2^(b+k) elements.
 *
 * Publication: a segment's pointer goes from NULL to its mapping once, by a release
 * compare-and-swap; a thread that loses the race unmaps its own mapping, which nobody else
 * has seen. A writer maps the segment of an index before it publishes anything that refers
 * to the index, and readers load the pointer with acquire, so whoever reaches an index
 * through a published reference finds its segment mapped.
 */
#ifndef MEMPROF_CORE_SEGMENTS_H
#define MEMPROF_CORE_SEGMENTS_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "core/platform.h"

/* Segment pointers of a table: enough for 2^b << 40 elements. */
#define MEMPROF_SEG_MAX 40

/* The segment of element i. */
MEMPROF_INLINE unsigned memprof__seg_of(uint64_t i, unsigned b)
{
    uint64_t q = i >> b;
    return q == 0 ? 0 : 64u - (unsigned)__builtin_clzll(q);
}

/* The first element of segment k. */
MEMPROF_INLINE uint64_t memprof__seg_start(unsigned k, unsigned b)
{
    return k == 0 ? 0 : (uint64_t)1 << (b + k - 1);
}

/* The elements of segment k. */
MEMPROF_INLINE uint64_t memprof__seg_len(unsigned k, unsigned b)
{
    return (uint64_t)1 << (b + (k ? k - 1 : 0));
}

/* Maps segment *seg of `bytes` unless another thread has, and adds what it mapped to
 * *mapped. Returns the segment, or NULL if the mapping failed (a limit: the table is full
 * for now). Cold paths only: a system call. */
static inline void *memprof__seg_open(_Atomic(void *) *seg, size_t bytes, _Atomic uint64_t *mapped)
{
    void *p = memprof_atomic_load_acquire(seg);
    if (p)
        return p;
    void *mine = memprof__pf_map(bytes);
    if (!mine)
        return NULL;
    if (memprof_atomic_cas_acqrel(seg, &p, mine)) {
        memprof_atomic_add_relaxed(mapped, bytes);
        return mine;
    }
    memprof__pf_unmap(mine, bytes); /* another thread's came first */
    return p;
}

#endif
