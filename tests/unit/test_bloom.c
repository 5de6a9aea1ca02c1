/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the free-path Bloom filter (src/core/bloom.h): no false negatives ever, a
 * false-positive rate close to the theory for a blocked filter, a fill level that only grows
 * between rebuilds, rebuilds that keep every live key (also keys added while the rebuild
 * scans, per the inserter protocol), drop the stale bits of freed keys and bring the fill
 * down, readers that never miss a live key while a rebuild clears a filter, the rebuild
 * counter, the try-lock, and shutdown's "disabled" state.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>
#include <stdatomic.h>

#include "core/bloom.h"
#include "test.h"

/* Keys that look like heap addresses: 16-byte aligned, clustered in a few regions. */
static uint64_t key_of(uint64_t i)
{
    return 0x55d0c0000000ull + (i % 1000000) * 16 + (i / 1000000) * 0x100000000ull;
}

/* A set of live keys the rebuild scans (stands in for the heap map). */
struct keyset {
    const uint64_t *keys;
    size_t n;
    /* Optional hook run once, in the middle of the scan. */
    void (*during)(void *ctx);
    void *during_ctx;
};

static void keyset_for_each(void *src, void (*fn)(void *ctx, uint64_t key), void *ctx)
{
    struct keyset *ks = src;
    for (size_t i = 0; i < ks->n; i++) {
        if (i == ks->n / 2 && ks->during) {
            ks->during(ks->during_ctx);
            ks->during = NULL;
        }
        fn(ctx, ks->keys[i]);
    }
}

static void release(struct memprof_bloom *b)
{
    memprof__bloom_destroy(b);
}

static const struct memprof_bloom_filter *active(struct memprof_bloom *b)
{
    uint64_t g = memprof_atomic_load_relaxed(&b->gen);
    return g ? &b->filters[(g >> 1) & 1] : NULL;
}

static void test_empty_filter_says_no(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    /* Before the first sample the filter is disabled: frees return at once. */
    EXPECT(memprof_atomic_load_relaxed(&b.gen) == 0);
    for (uint64_t i = 0; i < 1000; i++)
        EXPECT(!memprof__bloom_maybe(&b, key_of(i)));
    EXPECT_EQ(memprof__bloom_fill_permille(&b), 0);
    release(&b);
}

static void test_no_false_negatives(void)
{
    const uint64_t caps[] = {4096, 1 << 20};
    const uint64_t counts[] = {50000, 600000}; /* well past the design load */
    for (int c = 0; c < 2; c++) {
        struct memprof_bloom b;
        CHECK_EQ(memprof__bloom_init(&b, caps[c]), 0);
        uint64_t data = 7 + (uint64_t)c, misses = 0;
        uint64_t *keys = malloc(counts[c] * sizeof *keys);
        CHECK(keys != NULL);
        for (uint64_t i = 0; i < counts[c]; i++) {
            /* Random keys, some aligned like pointers, some not. */
            keys[i] = (i & 1) ? test_rand(&data) : test_rand(&data) & ~(uint64_t)15;
            memprof__bloom_add(&b, keys[i]);
            /* A key is findable right after it was added, and stays so. */
            misses += !memprof__bloom_maybe(&b, keys[i]);
        }
        for (uint64_t i = 0; i < counts[c]; i++)
            misses += !memprof__bloom_maybe(&b, keys[i]);
        EXPECT_EQ_U(misses, 0);
        free(keys);
        release(&b);
    }
}

static void test_false_positive_rate_is_low(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    size_t m = b.nblocks * 512;
    uint64_t n = 4096; /* capacity: two bits per key */
    for (uint64_t i = 0; i < n; i++)
        memprof__bloom_add(&b, key_of(i));
    uint64_t fp = 0, probes = 200000;
    for (uint64_t i = 0; i < probes; i++)
        fp += memprof__bloom_maybe(&b, key_of(n + 10 + i));
    /* Unblocked filter, k = 4: (1 - e^(-kn/m))^k; blocking costs a little (uneven block
     * loads), so allow three times that. */
    double theory = pow(1 - exp(-4.0 * (double)n / (double)m), 4);
    double rate = (double)fp / (double)probes;
    printf("  %" PRIu64 " keys in %zu bits: false positives %.5f (unblocked theory %.5f), "
           "fill %u permille\n",
           n, m, rate, theory, memprof__bloom_fill_permille(&b));
    EXPECT(rate < 3 * theory);
    EXPECT(rate < 0.01);
    release(&b);
}

static void test_fill_is_monotone_between_rebuilds(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    unsigned last = 0;
    for (uint64_t i = 0; i < 40000; i++) {
        memprof__bloom_add(&b, key_of(i));
        unsigned f = memprof__bloom_fill_permille(&b);
        if (f < last) {
            EXPECT(f >= last);
            break;
        }
        last = f;
    }
    /* 40000 keys x 4 bits in 65536 bits: about 1 - e^(-2.44) = 91 % set. */
    printf("  fill after 40000 keys: %u permille\n", last);
    EXPECT(last > 850 && last < 960);
    /* The exact count of set bits matches the words. */
    const struct memprof_bloom_filter *f = active(&b);
    uint64_t ones = 0;
    for (size_t w = 0; w < b.nblocks * 8; w++)
        ones += (uint64_t)__builtin_popcountll(memprof_atomic_load_relaxed(&f->words[w]));
    EXPECT_EQ_U(ones, f->ones);
    release(&b);
}

static void test_rebuild_keeps_live_keys_and_reduces_fill(void)
{
    enum { ADDED = 20000, LIVE = 1000 };
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    static uint64_t live[LIVE];
    for (uint64_t i = 0; i < ADDED; i++) {
        memprof__bloom_add(&b, key_of(i));
        if (i % (ADDED / LIVE) == 0)
            live[i / (ADDED / LIVE)] = key_of(i);
    }
    unsigned before = memprof__bloom_fill_permille(&b);
    /* 19000 of the 20000 were freed: the filter is saturated with dead keys. */
    EXPECT(memprof__bloom_should_rebuild(&b, LIVE));
    const struct memprof_bloom_filter *old = active(&b);
    struct keyset ks = {.keys = live, .n = LIVE};
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, LIVE), 0);
    unsigned after = memprof__bloom_fill_permille(&b);
    printf("  fill %u -> %u permille\n", before, after);
    EXPECT(before > 600);
    EXPECT(after < 100);
    EXPECT(active(&b) != old);
    EXPECT((memprof_atomic_load_relaxed(&b.gen) & 1) == 0); /* no rebuild left in progress */
    EXPECT_EQ_U(b.rebuilds, 1);
    EXPECT_EQ_U(b.keys_since_rebuild, LIVE);
    uint64_t misses = 0;
    for (int i = 0; i < LIVE; i++)
        misses += !memprof__bloom_maybe(&b, live[i]);
    EXPECT_EQ_U(misses, 0);
    /* A fresh filter with few keys does not ask for another rebuild. */
    EXPECT(!memprof__bloom_should_rebuild(&b, LIVE));
    /* The stale bits of freed keys are gone: most of them now answer "not sampled". */
    uint64_t stale_hits = 0;
    for (uint64_t i = 0; i < ADDED; i++)
        if (i % (ADDED / LIVE) != 0)
            stale_hits += memprof__bloom_maybe(&b, key_of(i));
    printf("  %" PRIu64 " of %d freed keys still hit after the rebuild\n", stale_hits,
           ADDED - LIVE);
    EXPECT(stale_hits < (ADDED - LIVE) / 100);
    release(&b);
}

static void test_should_rebuild_needs_mostly_dead_keys(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    for (uint64_t i = 0; i < 100; i++)
        memprof__bloom_add(&b, key_of(i));
    /* All dead, but too few keys to be worth a scan. */
    EXPECT(!memprof__bloom_should_rebuild(&b, 0));
    for (uint64_t i = 100; i < 30000; i++)
        memprof__bloom_add(&b, key_of(i));
    /* Most keys are still live: a rebuild would not help. */
    EXPECT(!memprof__bloom_should_rebuild(&b, 20000));
    /* Mostly stale bits, even in a filter that is far from full. */
    EXPECT(memprof__bloom_should_rebuild(&b, 100));
    release(&b);
}

static void test_rebuild_counter_increments(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    struct keyset none = {0};
    /* Nothing sampled yet (filter disabled): nothing to rebuild, nothing counted. */
    EXPECT(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0) != 0);
    EXPECT_EQ_U(b.rebuilds, 0);
    memprof__bloom_add(&b, key_of(1));
    for (int r = 1; r <= 5; r++) {
        CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), 0);
        EXPECT_EQ_U(b.rebuilds, (uint64_t)r);
    }
    release(&b);
}

/* Rebuild-protocol checks: things done while the rebuild scans the key source. */
struct during_ctx {
    struct memprof_bloom *b;
    uint64_t key;
    int nested_rc;
};

static void add_during_scan(void *p)
{
    struct during_ctx *d = p;
    memprof__bloom_add(d->b, d->key);
}

static void test_key_added_during_rebuild_survives(void)
{
    /* An inserter that runs entirely while the rebuild scans (its heap-map claim is not in
     * the scanned set) adds to the filter being built too. */
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    uint64_t keys[100];
    for (int i = 0; i < 100; i++) {
        keys[i] = key_of((uint64_t)i);
        memprof__bloom_add(&b, keys[i]);
    }
    struct during_ctx d = {.b = &b, .key = key_of(777777)};
    struct keyset ks = {.keys = keys, .n = 100, .during = add_during_scan, .during_ctx = &d};
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 100), 0);
    EXPECT(memprof__bloom_maybe(&b, d.key));
    for (int i = 0; i < 100; i++)
        EXPECT(memprof__bloom_maybe(&b, keys[i]));
    release(&b);
}

static void test_key_claimed_after_scan_survives(void)
{
    /* An inserter that began before the rebuild (it added to the old filter only) and
     * claims its heap-map slot after the scan: add_end must put the key in the new filter. */
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    memprof__bloom_add(&b, key_of(1));
    uint64_t key = key_of(424242);
    uint64_t token = memprof__bloom_add_begin(&b, key);
    const struct memprof_bloom_filter *before = active(&b);
    uint64_t live[1] = {key_of(1)};
    struct keyset ks = {.keys = live, .n = 1}; /* the scan does not see `key` */
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 1), 0);
    EXPECT(active(&b) != before);
    memprof__bloom_add_end(&b, key, token);
    EXPECT(memprof__bloom_maybe(&b, key));
    EXPECT(memprof__bloom_maybe(&b, key_of(1)));
    release(&b);
}

static void nested_rebuild(void *p)
{
    struct during_ctx *d = p;
    struct keyset none = {0};
    d->nested_rc = memprof__bloom_rebuild(d->b, keyset_for_each, &none, 0);
}

static void test_concurrent_rebuild_is_refused(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    uint64_t keys[10];
    for (int i = 0; i < 10; i++) {
        keys[i] = key_of((uint64_t)i);
        memprof__bloom_add(&b, keys[i]);
    }
    struct during_ctx d = {.b = &b, .nested_rc = 1};
    struct keyset ks = {.keys = keys, .n = 10, .during = nested_rebuild, .during_ctx = &d};
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 10), 0);
    EXPECT_EQ(d.nested_rc, -EBUSY);
    EXPECT_EQ_U(b.rebuilds, 1);
    /* The try-lock is released afterwards. */
    ks.during = NULL;
    EXPECT_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 10), 0);
    EXPECT_EQ_U(b.rebuilds, 2);
    release(&b);
}

static void test_disabled_filter_stays_off(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    memprof__bloom_add(&b, key_of(1));
    EXPECT(memprof__bloom_maybe(&b, key_of(1)));
    memprof__bloom_disable(&b);
    EXPECT(!memprof__bloom_maybe(&b, key_of(1)));
    /* A sample racing with shutdown must not re-enable the filter. */
    memprof__bloom_add(&b, key_of(2));
    EXPECT(memprof_atomic_load_relaxed(&b.gen) == 0);
    EXPECT(!memprof__bloom_maybe(&b, key_of(2)));
    struct keyset none = {0};
    EXPECT(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0) != 0);
    EXPECT(memprof_atomic_load_relaxed(&b.gen) == 0);
    release(&b);
}

static void test_destroy_after_rebuild_releases_everything(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    memprof__bloom_add(&b, key_of(1));
    struct keyset none = {0};
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), 0);
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), 0);
    memprof__bloom_destroy(&b);
    EXPECT(b.filters[0].words == NULL && b.filters[1].words == NULL);
}

/* Readers racing with rebuilds: a reader thread checks live keys continuously while the
 * main thread rebuilds (clearing the inactive filter each time); no check may miss. */
struct race {
    struct memprof_bloom *b;
    const uint64_t *keys;
    size_t n;
    _Atomic int stop;
    uint64_t checks, misses;
};

static void *reader(void *p)
{
    struct race *r = p;
    while (!atomic_load(&r->stop))
        for (size_t i = 0; i < r->n; i++, r->checks++)
            r->misses += !memprof__bloom_maybe(r->b, r->keys[i]);
    return NULL;
}

static void test_readers_never_miss_during_rebuilds(void)
{
    enum { LIVE = 64 };
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    static uint64_t live[LIVE];
    for (uint64_t i = 0; i < LIVE; i++) {
        live[i] = key_of(i * 7);
        memprof__bloom_add(&b, live[i]);
    }
    struct race r = {.b = &b, .keys = live, .n = LIVE};
    pthread_t t;
    CHECK_EQ(pthread_create(&t, NULL, reader, &r), 0);
    struct keyset ks = {.keys = live, .n = LIVE};
    for (int i = 0; i < 2000; i++) {
        /* Stale keys between rebuilds, so each rebuild really clears bits. */
        for (uint64_t k = 0; k < 50; k++)
            memprof__bloom_add(&b, key_of(1000000 + (uint64_t)i * 50 + k));
        CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, LIVE), 0);
    }
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    printf("  %" PRIu64 " reads during 2000 rebuilds, %" PRIu64 " misses\n", r.checks, r.misses);
    EXPECT_EQ_U(r.misses, 0);
    release(&b);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_empty_filter_says_no),
        TEST_CASE(test_no_false_negatives),
        TEST_CASE(test_false_positive_rate_is_low),
        TEST_CASE(test_fill_is_monotone_between_rebuilds),
        TEST_CASE(test_rebuild_keeps_live_keys_and_reduces_fill),
        TEST_CASE(test_should_rebuild_needs_mostly_dead_keys),
        TEST_CASE(test_rebuild_counter_increments),
        TEST_CASE(test_key_added_during_rebuild_survives),
        TEST_CASE(test_key_claimed_after_scan_survives),
        TEST_CASE(test_concurrent_rebuild_is_refused),
        TEST_CASE(test_disabled_filter_stays_off),
        TEST_CASE(test_destroy_after_rebuild_releases_everything),
        TEST_CASE(test_readers_never_miss_during_rebuilds),
    };
    return TEST_MAIN(cases, false);
}
