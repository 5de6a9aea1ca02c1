/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the free-path Bloom filter (src/core/bloom.h): no false negatives ever, a
 * false-positive rate close to the theory for a blocked filter (and dense pages that only
 * raise it for their own lines), a fill level that only grows
 * between rebuilds, rebuilds that keep every live key (also keys added while the rebuild
 * scans, and keys whose heap-map claim the scan missed, per the inserter protocol) while
 * dropping the stale bits of freed keys, readers that never miss a live key while rebuilds
 * clear filters, the rebuild heuristics and counter, the try-lock, shutdown's "disabled"
 * state, and destroying a filter after rebuilds.
 */
#include <errno.h>
#include <math.h>
#include <pthread.h>

#include "core/bloom.h"
#include "test.h"

/* Keys that look like sampled heap addresses: 16-byte aligned, about one per page (samples
 * are sparse at any but tiny rates), clustered in a few regions. */
static uint64_t key_of(uint64_t i)
{
    return 0x55d0c0000000ull + (i % 1000000) * 4112 + (i / 1000000) * 0x100000000ull;
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
    for (size_t i = 0; i <= ks->n; i++) {
        if (i == ks->n / 2 && ks->during) {
            ks->during(ks->during_ctx);
            ks->during = NULL;
        }
        if (i < ks->n)
            fn(ctx, ks->keys[i]);
    }
}

/* The filter the free path reads now. */
static struct memprof_bloom_filter *active(struct memprof_bloom *b)
{
    return &b->filters[(memprof_atomic_load_relaxed(&b->gen) >> 1) & 1];
}

static uint64_t missing(struct memprof_bloom *b, const uint64_t *keys, size_t n)
{
    uint64_t m = 0;
    for (size_t i = 0; i < n; i++)
        m += !memprof__bloom_maybe(b, keys[i]);
    return m;
}

static void test_empty_filter_says_no(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    /* Before the first sample the filter is off: frees return at once. */
    EXPECT_EQ_U(b.gen, 0);
    for (uint64_t i = 0; i < 1000; i++)
        EXPECT(!memprof__bloom_maybe(&b, key_of(i)));
    EXPECT_EQ(memprof__bloom_fill_permille(&b), 0);
    memprof__bloom_destroy(&b);
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
        misses += missing(&b, keys, counts[c]);
        EXPECT_EQ_U(misses, 0);
        free(keys);
        memprof__bloom_destroy(&b);
    }
}

/* A sampled block: 16-byte aligned, anywhere in a 1 GiB heap (sampling picks blocks at
 * random, so live samples rarely share a page unless the rate is tiny). */
static uint64_t sparse_key(uint64_t *rng)
{
    *rng ^= *rng << 13;
    *rng ^= *rng >> 7;
    *rng ^= *rng << 17;
    return 0x7f0000000000ull + (*rng % (1ull << 26)) * 16;
}

static void test_false_positive_rate_is_low(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    double m = (double)b.nwords * 64;
    uint64_t n = 4096; /* capacity: two bits per key */
    uint64_t rng = 88172645463325252ull;
    for (uint64_t i = 0; i < n; i++)
        memprof__bloom_add(&b, sparse_key(&rng));
    /* Probes are further random keys: a hit on one of the n keys (about 4096 in 2^26) would
     * count as a false positive too, which is negligible. */
    uint64_t fp = 0, probes = 200000;
    for (uint64_t i = 0; i < probes; i++)
        fp += memprof__bloom_maybe(&b, sparse_key(&rng));
    /* Unblocked filter, k = 4: (1 - e^(-kn/m))^k. Blocking to one word costs about twice
     * that here (uneven word loads: 4 keys per word on average); allow three times. */
    double theory = pow(1 - exp(-4.0 * (double)n / m), 4);
    double rate = (double)fp / (double)probes;
    printf("  %" PRIu64 " keys in %.0f bits: false positives %.5f (unblocked theory %.5f), "
           "fill %u permille\n",
           n, m, rate, theory, memprof__bloom_fill_permille(&b));
    EXPECT(rate < 3 * theory);
    EXPECT(rate < 0.01);
    memprof__bloom_destroy(&b);
}

static void test_dense_pages_only_fill_their_own_lines(void)
{
    /* Every 16-byte block of 8 pages sampled (a tiny rate): their lines saturate, which
     * costs heap-map lookups for frees in those pages only. */
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 1 << 20), 0);
    const uint64_t base = 0x7f0000000000ull;
    for (uint64_t k = base; k < base + 8 * 4096; k += 16)
        memprof__bloom_add(&b, k);
    uint64_t rng = 88172645463325252ull, fp = 0, probes = 200000;
    for (uint64_t i = 0; i < probes; i++) {
        uint64_t k = sparse_key(&rng);
        if (k >= base && k < base + 8 * 4096)
            continue;
        fp += memprof__bloom_maybe(&b, k);
    }
    double rate = (double)fp / (double)probes;
    double lines = (double)b.nwords / 8;
    printf("  8 dense pages in %.0f lines: false positives elsewhere %.5f\n", lines, rate);
    /* A probe shares a line with the dense pages with probability at most 8 / lines. */
    EXPECT(rate <= 8 / lines + 0.001);
    memprof__bloom_destroy(&b);
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
    /* The count of set bits is exact. */
    struct memprof_bloom_filter *f = active(&b);
    uint64_t ones = 0;
    for (size_t w = 0; w < b.nwords; w++)
        ones += (uint64_t)__builtin_popcountll(memprof_atomic_load_relaxed(&f->words[w]));
    EXPECT_EQ_U(ones, f->ones);
    memprof__bloom_destroy(&b);
}

static void test_rebuild_keeps_live_keys_and_drops_stale_bits(void)
{
    enum { ADDED = 20000, LIVE = 1000 };
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    static uint64_t live[LIVE], dead[ADDED - LIVE];
    size_t ndead = 0;
    for (uint64_t i = 0; i < ADDED; i++) {
        memprof__bloom_add(&b, key_of(i));
        if (i % (ADDED / LIVE) == 0)
            live[i / (ADDED / LIVE)] = key_of(i);
        else
            dead[ndead++] = key_of(i);
    }
    unsigned before = memprof__bloom_fill_permille(&b);
    uint64_t gen = b.gen;
    /* 19000 of the 20000 were freed: the filter is saturated with stale bits. */
    EXPECT(memprof__bloom_should_rebuild(&b, LIVE));
    struct keyset ks = {.keys = live, .n = LIVE};
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, LIVE), 0);
    unsigned after = memprof__bloom_fill_permille(&b);
    uint64_t stale = ndead - missing(&b, dead, ndead);
    printf("  fill %u -> %u permille; %" PRIu64 " of %zu freed keys still answer maybe\n", before,
           after, stale, ndead);
    EXPECT(before > 600);
    EXPECT(after < 100);
    EXPECT_EQ_U(b.gen, gen + 2); /* the other filter is active now */
    EXPECT(active(&b) != &b.filters[(gen >> 1) & 1]);
    EXPECT_EQ_U(b.rebuilds, 1);
    EXPECT_EQ_U(b.keys_since_rebuild, LIVE);
    EXPECT_EQ_U(missing(&b, live, LIVE), 0);
    /* The stale bits are gone: freed keys are now mostly "certainly not sampled". */
    EXPECT(stale < ndead / 100);
    /* A fresh filter with few keys does not ask for another rebuild. */
    EXPECT(!memprof__bloom_should_rebuild(&b, LIVE));
    memprof__bloom_destroy(&b);
}

static void test_repeated_rebuilds_keep_live_keys(void)
{
    /* Rebuilds alternate between the two filters; each one is cleared before reuse. */
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    static uint64_t live[500];
    for (int round = 0; round < 6; round++) {
        for (int i = 0; i < 500; i++) {
            live[i] = key_of((uint64_t)round * 100000 + (uint64_t)i);
            memprof__bloom_add(&b, live[i]);
        }
        struct keyset ks = {.keys = live, .n = 500};
        CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 500), 0);
        EXPECT_EQ_U(missing(&b, live, 500), 0);
        /* Only this round's keys are set: about 1 - e^(-2000/65536) = 3 %. */
        EXPECT(memprof__bloom_fill_permille(&b) < 40);
    }
    EXPECT_EQ_U(b.rebuilds, 6);
    memprof__bloom_destroy(&b);
}

static void test_should_rebuild_needs_many_dead_keys(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    for (uint64_t i = 0; i < 10; i++)
        memprof__bloom_add(&b, key_of(i));
    /* All dead, but so few keys that a rebuild would buy nothing. */
    EXPECT(!memprof__bloom_should_rebuild(&b, 0));
    for (uint64_t i = 10; i < 20000; i++)
        memprof__bloom_add(&b, key_of(i));
    /* Many keys, but most are still live: a rebuild would not clear much. */
    EXPECT(!memprof__bloom_should_rebuild(&b, 19000));
    EXPECT(memprof__bloom_should_rebuild(&b, 100));
    memprof__bloom_destroy(&b);
}

static void test_rebuild_counter_increments(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    struct keyset none = {0};
    /* Nothing sampled yet: a rebuild does nothing (the filter stays off). */
    memprof__bloom_rebuild(&b, keyset_for_each, &none, 0);
    EXPECT_EQ_U(b.rebuilds, 0);
    EXPECT_EQ_U(b.gen, 0);
    memprof__bloom_add(&b, key_of(1));
    for (int r = 1; r <= 5; r++) {
        CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), 0);
        EXPECT_EQ_U(b.rebuilds, (uint64_t)r);
    }
    memprof__bloom_destroy(&b);
}

/* Rebuild-protocol checks: things done while the rebuild scans the key source. */
struct during_ctx {
    struct memprof_bloom *b;
    uint64_t key, token;
    int nested_rc;
    bool miss_during_scan; /* an unrelated, never-added key was answered "not sampled" */
};

static void add_during_scan(void *p)
{
    struct during_ctx *d = p;
    memprof__bloom_add(d->b, d->key);
}

static void test_key_added_during_rebuild_survives(void)
{
    /* An inserter that runs entirely while the rebuild scans (its heap-map claim is not in
     * the scanned set) must still be in the new filter. */
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
    EXPECT_EQ_U(missing(&b, keys, 100), 0);
    memprof__bloom_destroy(&b);
}

static void begin_during_scan(void *p)
{
    struct during_ctx *d = p;
    d->token = memprof__bloom_add_begin(d->b, d->key);
    /* Frees during the scan read the old, complete filter. */
    d->miss_during_scan = !memprof__bloom_maybe(d->b, key_of(999999));
}

static void test_insert_spanning_the_rebuild_end_survives(void)
{
    /* add_begin while the scan runs, the heap-map claim after it (not scanned), add_end
     * after the rebuild finished. */
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    uint64_t keys[100];
    for (int i = 0; i < 100; i++) {
        keys[i] = key_of((uint64_t)i);
        memprof__bloom_add(&b, keys[i]);
    }
    struct during_ctx d = {.b = &b, .key = key_of(888888)};
    struct keyset ks = {.keys = keys, .n = 100, .during = begin_during_scan, .during_ctx = &d};
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 100), 0);
    memprof__bloom_add_end(&b, d.key, d.token);
    EXPECT(memprof__bloom_maybe(&b, d.key));
    EXPECT(d.miss_during_scan);
    memprof__bloom_destroy(&b);
}

static void test_key_claimed_after_scan_survives(void)
{
    /* An inserter that began before the rebuild and claims its heap-map slot after the scan:
     * add_end must put the key in the new filter. */
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    memprof__bloom_add(&b, key_of(1));
    uint64_t key = key_of(424242);
    uint64_t token = memprof__bloom_add_begin(&b, key);
    uint64_t live[1] = {key_of(1)};
    struct keyset ks = {.keys = live, .n = 1}; /* the scan does not see `key` */
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 1), 0);
    memprof__bloom_add_end(&b, key, token);
    EXPECT(memprof__bloom_maybe(&b, key));
    EXPECT(memprof__bloom_maybe(&b, key_of(1)));
    memprof__bloom_destroy(&b);
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
    EXPECT_EQ_U(missing(&b, keys, 10), 0);
    /* The try-lock is released afterwards. */
    ks.during = NULL;
    EXPECT_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, 10), 0);
    EXPECT_EQ_U(b.rebuilds, 2);
    memprof__bloom_destroy(&b);
}

static void test_disabled_filter_stays_off(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    memprof__bloom_add(&b, key_of(1));
    EXPECT(memprof__bloom_maybe(&b, key_of(1)));
    memprof__bloom_disable(&b);
    EXPECT(!memprof__bloom_maybe(&b, key_of(1)));
    EXPECT_EQ(memprof__bloom_fill_permille(&b), 0);
    /* A sample racing with shutdown must not switch the filter back on. */
    memprof__bloom_add(&b, key_of(2));
    EXPECT_EQ_U(b.gen, 0);
    EXPECT(!memprof__bloom_maybe(&b, key_of(2)));
    struct keyset none = {0};
    EXPECT_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), -ESHUTDOWN);
    EXPECT_EQ_U(b.gen, 0);
    memprof__bloom_destroy(&b);
}

static void disable_during_scan(void *p)
{
    struct during_ctx *d = p;
    memprof__bloom_disable(d->b);
}

static void test_shutdown_during_rebuild_keeps_the_filter_off(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    uint64_t keys[10];
    for (int i = 0; i < 10; i++) {
        keys[i] = key_of((uint64_t)i);
        memprof__bloom_add(&b, keys[i]);
    }
    struct during_ctx d = {.b = &b};
    struct keyset ks = {.keys = keys, .n = 10, .during = disable_during_scan, .during_ctx = &d};
    memprof__bloom_rebuild(&b, keyset_for_each, &ks, 10);
    EXPECT_EQ_U(b.gen, 0);
    EXPECT(!memprof__bloom_maybe(&b, keys[0]));
    memprof__bloom_destroy(&b);
}

static void test_destroy_after_rebuilds_releases_everything(void)
{
    struct memprof_bloom b;
    CHECK_EQ(memprof__bloom_init(&b, 4096), 0);
    memprof__bloom_add(&b, key_of(1));
    struct keyset none = {0};
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), 0);
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), 0);
    CHECK_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &none, 0), 0);
    memprof__bloom_destroy(&b);
    EXPECT_EQ_U(b.gen, 0);
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

static void *race_reader(void *p)
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
    CHECK_EQ(pthread_create(&t, NULL, race_reader, &r), 0);
    struct keyset ks = {.keys = live, .n = LIVE};
    int failed = 0;
    for (int i = 0; i < 2000 && !failed; i++) {
        /* Stale keys between rebuilds, so each rebuild really clears bits. */
        for (uint64_t k = 0; k < 50; k++)
            memprof__bloom_add(&b, key_of(1000000 + (uint64_t)i * 50 + k));
        failed = !EXPECT_EQ(memprof__bloom_rebuild(&b, keyset_for_each, &ks, LIVE), 0);
    }
    atomic_store(&r.stop, 1);
    pthread_join(t, NULL);
    printf("  %" PRIu64 " reads during 2000 rebuilds, %" PRIu64 " misses\n", r.checks, r.misses);
    EXPECT_EQ_U(r.misses, 0);
    memprof__bloom_destroy(&b);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_empty_filter_says_no),
        TEST_CASE(test_no_false_negatives),
        TEST_CASE(test_false_positive_rate_is_low),
        TEST_CASE(test_dense_pages_only_fill_their_own_lines),
        TEST_CASE(test_fill_is_monotone_between_rebuilds),
        TEST_CASE(test_rebuild_keeps_live_keys_and_drops_stale_bits),
        TEST_CASE(test_repeated_rebuilds_keep_live_keys),
        TEST_CASE(test_should_rebuild_needs_many_dead_keys),
        TEST_CASE(test_rebuild_counter_increments),
        TEST_CASE(test_key_added_during_rebuild_survives),
        TEST_CASE(test_insert_spanning_the_rebuild_end_survives),
        TEST_CASE(test_key_claimed_after_scan_survives),
        TEST_CASE(test_concurrent_rebuild_is_refused),
        TEST_CASE(test_disabled_filter_stays_off),
        TEST_CASE(test_shutdown_during_rebuild_keeps_the_filter_off),
        TEST_CASE(test_readers_never_miss_during_rebuilds),
        TEST_CASE(test_destroy_after_rebuilds_releases_everything),
    };
    return TEST_MAIN(cases, false);
}
