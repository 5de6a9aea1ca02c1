/* SPDX-License-Identifier: MIT */
/*
 * The free-path Bloom filter: allocation, insertion under the rebuild protocol, saturation
 * monitoring and rebuilds (see bloom.h for the protocol and why old filters are kept).
 */
#include "core/bloom.h"

#include <errno.h>

#include "core/platform.h"

static struct memprof_bloom_filter *filter_new(size_t nbits)
{
    size_t nblocks = nbits / 512;
    /* The header lives in its own page-aligned mapping so filters never touch malloc. */
    size_t bytes = nblocks * 64 + 4096;
    unsigned char *mem = memprof__pf_map(bytes);
    if (!mem)
        return NULL;
    struct memprof_bloom_filter *f = (struct memprof_bloom_filter *)(mem + nblocks * 64);
    f->words = (_Atomic uint64_t *)mem;
    f->nblocks = nblocks;
    unsigned lg = 0;
    while (((size_t)1 << lg) < nblocks)
        lg++;
    /* With one block the shift would be 64 (undefined); 63 maps every hash to block 0 or 1,
     * so keep at least two blocks. */
    f->block_shift = 64 - lg;
    return f;
}

static void filter_free(struct memprof_bloom_filter *f)
{
    if (f)
        memprof__pf_unmap((void *)f->words, f->nblocks * 64 + 4096);
}

int memprof__bloom_init(struct memprof_bloom *b, uint64_t capacity)
{
    /* Two bits per potential live sample, at least 64 Ki bits (8 KiB): at capacity the
     * filter is then ~86 % full, while a typical few-thousand-sample heap sees a false
     * positive rate well under 0.1 %. */
    size_t nbits = 1 << 16;
    while (nbits < capacity * 2 && nbits < ((size_t)1 << 36))
        nbits <<= 1;
    *b = (struct memprof_bloom){.nbits = nbits};
    b->initial = filter_new(nbits);
    return b->initial ? 0 : -ENOMEM;
}

void memprof__bloom_destroy(struct memprof_bloom *b)
{
    struct memprof_bloom_filter *cur = memprof_atomic_load_relaxed(&b->current);
    if (cur != b->initial)
        filter_free(cur);
    filter_free(b->initial);
    for (struct memprof_bloom_filter *f = b->retired, *next; f; f = next) {
        next = f->retired_next;
        if (f != b->initial)
            filter_free(f);
    }
    *b = (struct memprof_bloom){0};
}

static void filter_add(struct memprof_bloom_filter *f, uint64_t key)
{
    uint64_t h = memprof__mix64(key);
    _Atomic uint64_t *blk = f->words + ((h >> f->block_shift) << 3);
    for (int i = 0; i < 4; i++) {
        unsigned bit = (unsigned)(h >> (9 * i)) & 511;
        uint64_t mask = (uint64_t)1 << (bit & 63);
        if (!(memprof_atomic_or_relaxed(&blk[bit >> 6], mask) & mask))
            memprof_atomic_add_relaxed(&f->ones, 1);
    }
}

void memprof__bloom_add_begin(struct memprof_bloom *b, uint64_t key,
                              struct memprof_bloom_filter *seen[2])
{
    struct memprof_bloom_filter *cur = memprof_atomic_load_seqcst(&b->current);
    if (!cur && !memprof_atomic_load_seqcst(&b->disabled)) {
        /* First sample: publish the initial filter. Losing the CAS means another thread
         * did it (or shutdown disabled the filter), both fine. */
        struct memprof_bloom_filter *expected = NULL;
        memprof_atomic_cas_seqcst(&b->current, &expected, b->initial);
        cur = memprof_atomic_load_seqcst(&b->current);
    }
    seen[0] = cur;
    seen[1] = memprof_atomic_load_seqcst(&b->pending);
    for (int i = 0; i < 2; i++)
        if (seen[i])
            filter_add(seen[i], key);
    memprof_atomic_add_relaxed(&b->keys_since_rebuild, 1);
}

void memprof__bloom_add_end(struct memprof_bloom *b, uint64_t key,
                            struct memprof_bloom_filter *seen[2])
{
    struct memprof_bloom_filter *now[2] = {memprof_atomic_load_seqcst(&b->current),
                                           memprof_atomic_load_seqcst(&b->pending)};
    for (int i = 0; i < 2; i++)
        if (now[i] && now[i] != seen[0] && now[i] != seen[1])
            filter_add(now[i], key);
}

void memprof__bloom_add(struct memprof_bloom *b, uint64_t key)
{
    struct memprof_bloom_filter *seen[2];
    memprof__bloom_add_begin(b, key, seen);
    memprof__bloom_add_end(b, key, seen);
}

unsigned memprof__bloom_fill_permille(struct memprof_bloom *b)
{
    struct memprof_bloom_filter *f = memprof_atomic_load_acquire(&b->current);
    if (!f)
        return 0;
    return (unsigned)(memprof_atomic_load_relaxed(&f->ones) * 1000 / (f->nblocks * 512));
}

bool memprof__bloom_should_rebuild(struct memprof_bloom *b, uint64_t live_keys)
{
    return memprof__bloom_fill_permille(b) > 500 &&
           live_keys * 2 < memprof_atomic_load_relaxed(&b->keys_since_rebuild);
}

struct rebuild_ctx {
    struct memprof_bloom_filter *f;
    uint64_t keys;
};

static void rebuild_add(void *ctx, uint64_t key)
{
    struct rebuild_ctx *rc = ctx;
    filter_add(rc->f, key);
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
    int rc = 0;
    struct memprof_bloom_filter *old = memprof_atomic_load_seqcst(&b->current);
    struct memprof_bloom_filter *fresh = old ? filter_new(b->nbits) : NULL;
    if (!old) {
        rc = 0; /* nothing sampled yet (or disabled): nothing to rebuild */
    } else if (!fresh) {
        rc = -ENOMEM;
    } else {
        memprof_atomic_store_seqcst(&b->pending, fresh);
        struct rebuild_ctx ctx = {.f = fresh};
        for_each_key(src, rebuild_add, &ctx);
        memprof_atomic_store_relaxed(&b->keys_since_rebuild, ctx.keys > live_keys ? ctx.keys
                                                                                   : live_keys);
        struct memprof_bloom_filter *expect_old = old;
        if (!memprof_atomic_cas_seqcst(&b->current, &expect_old, fresh)) {
            /* Disabled (shutdown) meanwhile: keep it disabled, retire the fresh filter. */
            old = fresh;
        }
        memprof_atomic_store_seqcst(&b->pending, NULL);
        old->retired_next = b->retired;
        b->retired = old;
        memprof_atomic_add_relaxed(&b->rebuilds, 1);
    }
    memprof_atomic_store_seqcst(&b->rebuilding, 0);
    return rc;
}

void memprof__bloom_disable(struct memprof_bloom *b)
{
    memprof_atomic_store_seqcst(&b->disabled, 1);
    memprof_atomic_store_seqcst(&b->current, NULL);
}
