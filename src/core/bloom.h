/* SPDX-License-Identifier: MIT */
/*
 * The Bloom filter in front of the free path: "is this address possibly sampled?".
 *
 * Register-blocked (Lang et al., "Performance-Optimal Filtering: Bloom Overtakes Cuckoo at
 * High Throughput", VLDB 2019; the cache-line blocking of Putze, Sanders and Singler, 2007,
 * taken down to one word): the k = 4 bits of a key all lie in one 64-bit word, so every
 * answer is one load and a mask compare. At the filter's two bits per potential sample
 * this costs about twice the false positives of an unblocked filter, which at typical loads
 * (a few thousand samples) stay far below 0.1 %. No false negatives, ever; false positives
 * only send a free to the heap-map lookup.
 *
 * Bits cannot be cleared one key at a time, and allocators reuse the same addresses, so a
 * filter fills with the bits of long-freed samples. It is therefore rebuilt from the heap
 * map's keys once many more keys were added than are live. Two filters alternate, guarded by
 * a generation counter used as a seqlock (`gen`: 0 = disabled, the active filter is
 * (gen >> 1) & 1, odd = a rebuild of the other filter is in progress):
 *
 *   reader (free path): g1 := gen (acquire); if g1 == 0: not sampled. Probe filter(g1).
 *             A hit means "maybe". A miss counts only if gen is still g1 afterwards
 *             (acquire fence, relaxed re-load); otherwise answer "maybe" (the heap map
 *             decides). A filter is only cleared after gen moved past every generation in
 *             which it was active, so a reader that saw no change read a filter nobody was
 *             clearing.
 *   rebuilder (cold path, try-lock): gen := g + 1; clear the inactive filter; fence; add
 *             every key claimed in the heap map; gen := g + 2 (it becomes the active one).
 *   inserter (cold path): g := gen; add the key to filter(g), and to the other filter if g
 *             is odd; claim the heap-map slot; then if gen is odd or no longer g, add the key
 *             to the filter(s) of the new generation.
 * All gen accesses and additions in the cold paths are seq_cst. If a rebuild's scan missed
 * the inserter's slot, the claim came after the fence that follows the clear, so the
 * inserter's re-read sees an odd or newer gen and adds the key to the new filter after it
 * was cleared. The memory is never unmapped while hooks can run; clearing a large
 * filter returns its pages to the kernel (MADV_DONTNEED), so RSS follows the keys actually
 * present; a small one (the default size) is zeroed in place.
 */
#ifndef MEMPROF_CORE_BLOOM_H
#define MEMPROF_CORE_BLOOM_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/compiler.h"
#include "common/hash.h"

struct memprof_bloom_filter {
    _Atomic uint64_t *words;
    _Atomic uint64_t ones; /* bits set (counted on 0 -> 1 transitions) */
};

struct memprof_bloom {
    _Atomic uint64_t gen; /* seqlock generation, see above; 0 = disabled */
    size_t nwords;        /* 64-bit words per filter */
    unsigned line_shift;  /* 64 - log2(nwords / 8): line index from the top hash bits */
    struct memprof_bloom_filter filters[2];
    _Atomic int disabled;   /* set by shutdown; never cleared */
    _Atomic int rebuilding; /* try-lock; a busy rebuild is skipped */
    _Atomic uint64_t keys_since_rebuild;
    _Atomic uint64_t rebuilds;
};

/* m with bit (bit mod 64) set. x86's bts takes the bit number modulo 64 by itself: one
 * instruction where 1 << bit | m costs three, which is six fewer per free-path probe. */
MEMPROF_INLINE uint64_t memprof__set_bit(uint64_t m, uint64_t bit)
{
#if defined(__x86_64__)
    __asm__("btsq %1, %0" : "+r"(m) : "r"(bit) : "cc");
    return m;
#else
    return m | (uint64_t)1 << (bit & 63);
#endif
}

/* Where a key's bits are: the index of its word in a filter, and (memprof__bloom_mask) the
 * four bits within it, both from *h. The word's 64-byte line comes from the key's 4 KiB page
 * (Fibonacci hashing of the page number), so the frees of one page probe one cache line and
 * a program's working set of pages costs as many lines, not one per block; the word within
 * the line and the bits come from a multiplicative hash of the whole key (its top bits
 * depend on every key bit). */
MEMPROF_INLINE size_t memprof__bloom_word(const struct memprof_bloom *b, uint64_t key, uint64_t *h)
{
    uint64_t line = ((key >> 12) * 0x9E3779B97F4A7C15ull) >> b->line_shift;
    *h = key * 0xD6E8FEB86659FD93ull;
    return (size_t)(line << 3 | ((*h >> 37) & 7));
}

MEMPROF_INLINE uint64_t memprof__bloom_mask(uint64_t h)
{
    uint64_t m = memprof__set_bit(0, h >> 40);
    m = memprof__set_bit(m, h >> 46);
    m = memprof__set_bit(m, h >> 52);
    return memprof__set_bit(m, h >> 58);
}

/* A word without any key answers "no" before the mask is built: the filter holds two bits
 * per potential sample and a program a few thousand live ones at most, so nearly every word
 * a free probes is zero, and the mask's dependent chain of four bit sets (a third of the
 * probe's instructions) runs only for the rest. */
MEMPROF_INLINE bool memprof__bloom_filter_maybe(const struct memprof_bloom *b,
                                                const struct memprof_bloom_filter *f, uint64_t key)
{
    uint64_t h;
    uint64_t word = memprof_atomic_load_relaxed(&f->words[memprof__bloom_word(b, key, &h)]);
    if (MEMPROF_LIKELY(word == 0))
        return false;
    uint64_t mask = memprof__bloom_mask(h);
    return (word & mask) == mask;
}

/* The free-path check: false means "certainly not sampled". */
MEMPROF_INLINE bool memprof__bloom_maybe(struct memprof_bloom *b, uint64_t key)
{
    uint64_t g = memprof_atomic_load_acquire(&b->gen);
    if (g == 0)
        return false;
    if (memprof__bloom_filter_maybe(b, &b->filters[(g >> 1) & 1], key))
        return true;
    memprof_atomic_fence_acquire();
    return memprof_atomic_load_relaxed(&b->gen) != g;
}

/* Sizes the filters for `capacity` live samples. Returns 0 or -ENOMEM. */
int memprof__bloom_init(struct memprof_bloom *b, uint64_t capacity);
/* Unmaps the filters. Only when no thread can use them any more (tests). */
void memprof__bloom_destroy(struct memprof_bloom *b);
/* Inserter protocol, part 1 (before the heap-map claim): enables the filter at the first
 * sample and adds the key. Returns the generation token for part 2. */
uint64_t memprof__bloom_add_begin(struct memprof_bloom *b, uint64_t key);
/* Inserter protocol, part 2 (after the heap-map claim). */
void memprof__bloom_add_end(struct memprof_bloom *b, uint64_t key, uint64_t token);
/* Both parts at once, for callers that claim nothing in between (tests). */
void memprof__bloom_add(struct memprof_bloom *b, uint64_t key);
/* Fill of the active filter in per mille (0 if disabled). */
unsigned memprof__bloom_fill_permille(struct memprof_bloom *b);
/* Whether a rebuild would pay off: many more keys were added since the last rebuild than
 * are live now (the rest are stale bits of freed samples). */
bool memprof__bloom_should_rebuild(struct memprof_bloom *b, uint64_t live_keys);
/* Rebuilds from the keys `for_each_key` reports. Returns 0, -EBUSY if another rebuild runs,
 * or -ESHUTDOWN if the filter is not enabled (nothing sampled yet, or shut down). */
int memprof__bloom_rebuild(struct memprof_bloom *b,
                           void (*for_each_key)(void *src, void (*fn)(void *ctx, uint64_t key),
                                                void *ctx),
                           void *src, uint64_t live_keys);
/* Stops the free path from consulting the filter (shutdown). */
void memprof__bloom_disable(struct memprof_bloom *b);

#endif
