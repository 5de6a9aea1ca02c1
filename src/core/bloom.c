/* SPDX-License-Identifier: MIT */
/*
 * The free-path Bloom filter: sizing, insertion under the generation protocol, saturation
 * monitoring and rebuilds (see bloom.h for the protocol and its argument).
 */
#include "core/bloom.h"

#include <errno.h>
#include <sys/mman.h>

#include "core/platform.h"

/* Rebuilding clears stale bits; below this many added keys it is not worth the scan. */
#define MIN_KEYS_FOR_REBUILD 256
/* Filters up to this size are cleared with memset rather than by dropping their pages. */
#define CLEAR_IN_PLACE_BYTES (256 * 1024)

static size_t filter_bytes(const struct memprof_bloom *b)
{
    return b->nwords * 8;
}

int memprof__bloom_init(struct memprof_bloom *b, uint64_t capacity)
{
    /* Two bits per potential live sample, at least 64 Ki bits (8 KiB): at capacity a filter
     * is ~86 % full, while a typical heap of a few thousand samples sees a false-positive
     * rate far below 0.1 %. */
    size_t nbits = 1 << 16;
    while (nbits < capacity * 2 && nbits < ((size_t)1 << 36))
        nbits <<= 1;
    *b = (struct memprof_bloom){.nwords = nbits / 64};
    unsigned lg = 0;
    while (((size_t)1 << lg) < b->nwords / 8)
        lg++;
    b->line_shift = 64 - lg;
    for (int i = 0; i < 2; i++) {
        b->filters[i].words = memprof__pf_map(filter_bytes(b));
        if (!b->filters[i].words) {
            memprof__bloom_destroy(b);
            return -ENOMEM;
        }
    }
    return 0;
}

void memprof__bloom_destroy(struct memprof_bloom *b)
{
    for (int i = 0; i < 2; i++)
        memprof__pf_unmap((void *)b->filters[i].words, filter_bytes(b));
    *b = (struct memprof_bloom){0};
}

static void filter_add(struct memprof_bloom *b, struct memprof_bloom_filter *f, uint64_t key)
{
    uint64_t h;
    size_t w = memprof__bloom_word(b, key, &h);
    uint64_t mask = memprof__bloom_mask(h);
    /* seq_cst: an inserter's add must land after a rebuild's clear that its gen read follows
     * (the rebuild's fence, below). */
    uint64_t old = memprof_atomic_or_seqcst(&f->words[w], mask);
    uint64_t fresh = mask & ~old;
    if (fresh)
        memprof_atomic_add_relaxed(&f->ones, (uint64_t)__builtin_popcountll(fresh));
}

/* Adds the key to the filter(s) that generation g makes readers and rebuilds look at. */
static void add_for_gen(struct memprof_bloom *b, uint64_t key, uint64_t g)
{
    if (g == 0)
        return;
    filter_add(b, &b->filters[(g >> 1) & 1], key);
    if (g & 1)
        filter_add(b, &b->filters[((g >> 1) + 1) & 1], key);
}

uint64_t memprof__bloom_add_begin(struct memprof_bloom *b, uint64_t key)
{
    uint64_t g = memprof_atomic_load_seqcst(&b->gen);
    if (g == 0 && !memprof_atomic_load_seqcst(&b->disabled)) {
        /* First sample: enable the filter (generation 2, filter 1 active). Losing the CAS
         * means another thread did it. */
        uint64_t expected = 0;
        memprof_atomic_cas_seqcst(&b->gen, &expected, 2);
        g = memprof_atomic_load_seqcst(&b->gen);
    }
    add_for_gen(b, key, g);
    memprof_atomic_add_relaxed(&b->keys_since_rebuild, 1);
    return g;
}

void memprof__bloom_add_end(struct memprof_bloom *b, uint64_t key, uint64_t token)
{
    uint64_t g = memprof_atomic_load_seqcst(&b->gen);
    if (g != token || (g & 1))
        add_for_gen(b, key, g);
}

void memprof__bloom_add(struct memprof_bloom *b, uint64_t key)
{
    memprof__bloom_add_end(b, key, memprof__bloom_add_begin(b, key));
}

unsigned memprof__bloom_fill_permille(struct memprof_bloom *b)
{
    uint64_t g = memprof_atomic_load_acquire(&b->gen);
    if (g == 0)
        return 0;
    uint64_t ones = memprof_atomic_load_relaxed(&b->filters[(g >> 1) & 1].ones);
    return (unsigned)(ones * 1000 / (b->nwords * 64));
}

bool memprof__bloom_should_rebuild(struct memprof_bloom *b, uint64_t live_keys)
{
    uint64_t added = memprof_atomic_load_relaxed(&b->keys_since_rebuild);
    return added >= MIN_KEYS_FOR_REBUILD && added > 4 * live_keys;
}

struct rebuild_ctx {
    struct memprof_bloom *b;
    struct memprof_bloom_filter *f;
    uint64_t keys;
};

static void rebuild_add(void *ctx, uint64_t key)
{
    struct rebuild_ctx *rc = ctx;
    filter_add(rc->b, rc->f, key);
    rc->keys++;
}

int memprof__bloom_rebuild(struct memprof_bloom *b,
                           void (*for_each_key)(void *src, void (*fn)(void *ctx, uint64_t key),
                                                void *ctx),
                           void *src, uint64_t live_keys)
{
    int expected = 0;
    if (!memprof_atomic_cas_seqcst(&b->rebuilding, &expected, 1))
        return -EBUSY;
    uint64_t g = memprof_atomic_load_seqcst(&b->gen);
    int rc = 0;
    if (g == 0 || (g & 1) || memprof_atomic_load_seqcst(&b->disabled)) {
        rc = g == 0 ? -ESHUTDOWN : -EBUSY;
    } else {
        struct memprof_bloom_filter *f = &b->filters[((g >> 1) + 1) & 1];
        memprof_atomic_store_seqcst(&b->gen, g + 1);
        /* The inactive filter was last active two generations ago; readers of that time
         * see gen changed and fall back to the heap map. A small filter is zeroed in place:
         * dropping its pages would fault them all back in (and flush TLBs) right after, and
         * programs that churn a small live set rebuild often. A large one gives its memory
         * back to the kernel instead, so RSS follows the keys actually present. */
        if (filter_bytes(b) <= CLEAR_IN_PLACE_BYTES) {
            /* Atomic stores: a late reader may still probe it (and then ignores what it saw). */
            for (size_t i = 0; i < b->nwords; i++)
                memprof_atomic_store_relaxed(&f->words[i], 0);
        } else
            madvise((void *)f->words, filter_bytes(b), MADV_DONTNEED);
        memprof_atomic_store_relaxed(&f->ones, 0);
        /* The clear must be complete before the scan reads the heap map: an inserter whose
         * claim the scan misses claimed after this fence, so it re-reads an odd or newer gen
         * and adds its key after the clear (otherwise a late store of the clear could wipe
         * that add while the scan had already passed the slot). */
        memprof_atomic_fence_seqcst();
        struct rebuild_ctx ctx = {.b = b, .f = f};
        for_each_key(src, rebuild_add, &ctx);
        uint64_t cur = g + 1;
        /* Shutdown may have disabled the filter meanwhile (gen == 0): keep it so. */
        memprof_atomic_cas_seqcst(&b->gen, &cur, g + 2);
        memprof_atomic_store_relaxed(&b->keys_since_rebuild,
                                     ctx.keys > live_keys ? ctx.keys : live_keys);
        memprof_atomic_add_relaxed(&b->rebuilds, 1);
    }
    memprof_atomic_store_seqcst(&b->rebuilding, 0);
    return rc;
}

void memprof__bloom_disable(struct memprof_bloom *b)
{
    memprof_atomic_store_seqcst(&b->disabled, 1);
    memprof_atomic_store_seqcst(&b->gen, 0);
}
