/* SPDX-License-Identifier: MIT */
/*
 * The Bloom filter in front of the free path: "is this address possibly sampled?".
 *
 * Cache-line blocked (Putze, Sanders, Singler, "Cache-, hash- and space-efficient Bloom
 * filters", 2007): the k = 4 bits of a key all lie in one 64-byte block, so a negative
 * answer costs a single cache-line probe. No false negatives, ever; false positives only
 * send a free to the heap-map lookup.
 *
 * Bits are never cleared, so address reuse slowly saturates a filter. A rebuild builds a
 * fresh filter from the heap map's keys and swaps the `current` pointer. Readers may hold
 * the old filter for an unbounded time, so retired filters are never unmapped while hooks
 * can run (they stay readable and still contain every bit they ever had).
 *
 * Rebuild protocol (all pointer accesses seq_cst, cold paths only):
 *   rebuilder: pending := N; add every key claimed in the heap map to N;
 *              current := N; pending := NULL; retire the old filter.
 *   inserter:  F := current, P := pending; add key to F and P; claim the heap-map slot;
 *              then re-read current and pending and add the key to any filter not yet seen.
 * If the rebuilder's scan missed the slot, the slot was claimed after the scan read it,
 * hence after `pending := N`, so the inserter's re-read sees N (as pending or current). A
 * free of the key happens after its malloc returned, so it reads `current` no older than the
 * filter the inserter added to. Either way the key is in the filter the free path reads.
 */
#ifndef MEMPROF_CORE_BLOOM_H
#define MEMPROF_CORE_BLOOM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "core/hash.h"

/* One filter: nblocks 64-byte blocks of 8 words. */
struct memprof_bloom_filter {
    _Atomic uint64_t *words;
    size_t nblocks;
    unsigned block_shift; /* 64 - log2(nblocks): block index from the top hash bits */
    _Atomic uint64_t ones; /* bits set (exact: counted on 0 -> 1 transitions) */
    struct memprof_bloom_filter *retired_next;
};

struct memprof_bloom {
    /* The filter the free path reads. NULL until the first sample and after shutdown, which
     * lets the free path return before touching any filter memory. */
    _Atomic(struct memprof_bloom_filter *) current;
    _Atomic(struct memprof_bloom_filter *) pending; /* being rebuilt, see above */
    struct memprof_bloom_filter *initial;           /* installed at the first sample */
    struct memprof_bloom_filter *retired;           /* never unmapped while hooks run */
    size_t nbits;
    _Atomic int rebuilding;                        /* try-lock; a busy rebuild is skipped */
    _Atomic int disabled;                          /* set by shutdown; never cleared */
    _Atomic uint64_t keys_since_rebuild;
    _Atomic uint64_t rebuilds;
};

/* The key's block and its four bit positions (9 bits each) come from one 64-bit hash. */
MEMPROF_INLINE bool memprof__bloom_filter_maybe(const struct memprof_bloom_filter *f,
                                                uint64_t key)
{
    uint64_t h = memprof__mix64(key);
    _Atomic uint64_t *blk = f->words + ((h >> f->block_shift) << 3);
    for (int i = 0; i < 4; i++) {
        unsigned b = (unsigned)(h >> (9 * i)) & 511;
        if (!(memprof_atomic_load_relaxed(&blk[b >> 6]) & ((uint64_t)1 << (b & 63))))
            return false;
    }
    return true;
}

/* The free-path check: false means "certainly not sampled". */
MEMPROF_INLINE bool memprof__bloom_maybe(struct memprof_bloom *b, uint64_t key)
{
    struct memprof_bloom_filter *f = memprof_atomic_load_acquire(&b->current);
    return f && memprof__bloom_filter_maybe(f, key);
}

/* Sizes the filter for `capacity` live samples. Returns 0 or -ENOMEM. */
int memprof__bloom_init(struct memprof_bloom *b, uint64_t capacity);
/* Unmaps every filter. Only when no thread can use the filter any more (tests). */
void memprof__bloom_destroy(struct memprof_bloom *b);
/* Inserter protocol, part 1 (before the heap-map claim). Returns the filters written. */
void memprof__bloom_add_begin(struct memprof_bloom *b, uint64_t key,
                              struct memprof_bloom_filter *seen[2]);
/* Inserter protocol, part 2 (after the heap-map claim). */
void memprof__bloom_add_end(struct memprof_bloom *b, uint64_t key,
                            struct memprof_bloom_filter *seen[2]);
/* Convenience for single-threaded use and tests: both parts at once. */
void memprof__bloom_add(struct memprof_bloom *b, uint64_t key);
/* Fill of the current filter in per mille (0 if none). */
unsigned memprof__bloom_fill_permille(struct memprof_bloom *b);
/* Whether a rebuild would pay off: the filter is over half full and fewer than half of the
 * keys added since the last rebuild are still live. */
bool memprof__bloom_should_rebuild(struct memprof_bloom *b, uint64_t live_keys);
/* Rebuilds from the keys `for_each_key` reports. Returns 0, -EBUSY if another rebuild runs,
 * or -ENOMEM. */
int memprof__bloom_rebuild(struct memprof_bloom *b,
                           void (*for_each_key)(void *src, void (*fn)(void *ctx, uint64_t key),
                                                void *ctx),
                           void *src, uint64_t live_keys);
/* Stops the free path from consulting any filter (shutdown). */
void memprof__bloom_disable(struct memprof_bloom *b);

#endif
