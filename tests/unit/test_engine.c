/* SPDX-License-Identifier: MIT */
/*
 * Engine tests through the hot-path entry points a backend calls (src/core/engine.h):
 * memprof__on_alloc() / memprof__on_free() with fake pointers (distinct aligned addresses in
 * an address range this test reserves and never touches), memprof__record() with explicit
 * stacks, and memprof__take() / memprof__restore(). They check live and freed samples, the
 * per-stack counters, the unbiased estimates in stats and snapshots, that frees are tracked
 * after stop and ignored after shutdown, the not-sampled cache of reused addresses (and
 * that it never hides a new sample), drops and overflows being counted, re-entrancy,
 * Bloom-filter rebuilds under churn, seeded reproducibility, and a forked child. One engine per
 * process: meson.build runs each case as its own test.
 */
#include <errno.h>
#include <math.h>
#include <sys/mman.h>

#include "config.h"
#include "core/engine.h"
#include "common/estimate.h"
#include "core/snapshot.h"
#include "export/interval.h"
#include "memprof/memprof.h"
#include "engine_fixture.h"
#include "test.h"

/* ---- helpers ---------------------------------------------------------------------------- */

/* `n` distinct fake block addresses, `stride` bytes apart, in a reserved (PROT_NONE) range:
 * owned by this test, never dereferenced by the engine, never handed out by malloc. */
static char *fake_blocks(size_t n, size_t stride)
{
    void *p = mmap(NULL, n * stride, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static struct memprof_snapshot *snapshot(void)
{
    memprof_snapshot *s = NULL;
    EXPECT_EQ(memprof_get_snapshot(&s), 0);
    return s;
}

/* The rounded per-sample weight the engine adds to its live estimate (estimate.h). */
static uint64_t weight(uint64_t size, uint64_t rate)
{
    return memprof__est_round((double)size / memprof__est_prob(size, rate));
}

static struct memprof_stack *stack_of(const uintptr_t *frames, unsigned depth)
{
    /* Interning a known stack returns its id; the engine interned it with the calling
     * thread's index (threads.h). */
    uint32_t id = memprof__st_intern_mixed(&memprof__engine.st, frames, depth, depth, 0,
                                           memprof__threads_self(&memprof__engine.threads), false);
    return memprof__st_get(&memprof__engine.st, id);
}

/* Distinct, real code addresses (so symbolisation has something to say). */
static void frame_a(void) {}
static void frame_b(void) {}
static void frame_c(void) {}

/* ---- cases -------------------------------------------------------------------------------- */

static void test_rate_one_samples_every_allocation(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 42), 0);
    char *blocks = fake_blocks(1000, 64);
    CHECK(blocks != NULL);
    for (int i = 0; i < 1000; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.total_samples, 1000);
    EXPECT_EQ_U(s.live_samples, 1000);
    EXPECT_EQ_U(s.freed_samples, 0);
    /* At rate 1 a 64-byte block is sampled with probability 1 - e^-64 = 1: weight 64. */
    EXPECT_EQ_U(s.estimated_live_bytes, 64000);
    EXPECT(s.unique_stacks >= 1);
    EXPECT(s.heap_map_used >= 1000);
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    EXPECT_EQ_U(memprof_snapshot_live_samples(snap), 1000);
    EXPECT_EQ_U(memprof_snapshot_estimated_bytes(snap), 64000);
    memprof_estimate e = {.size = sizeof e};
    EXPECT_EQ(memprof_snapshot_estimate(snap, &e), 0);
    EXPECT_EQ_U(e.count, 1000);
    EXPECT_EQ_U(e.live_samples, 1000);
    EXPECT_EQ_U(e.sampling_rate, 1);
    EXPECT_EQ(e.low_confidence, 0);
    memprof_free_snapshot(snap);
}

static void test_frees_remove_samples(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 42), 0);
    char *blocks = fake_blocks(1000, 64);
    CHECK(blocks != NULL);
    for (int i = 0; i < 1000; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    for (int i = 0; i < 1000; i += 2)
        memprof__on_free(blocks + i * 64);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 500);
    EXPECT_EQ_U(s.freed_samples, 500);
    EXPECT_EQ_U(s.estimated_live_bytes, 32000);
    /* Double frees, unknown pointers and NULL change nothing. */
    for (int i = 0; i < 1000; i += 2)
        memprof__on_free(blocks + i * 64);
    memprof__on_free(blocks + 8);
    memprof__on_free(NULL);
    s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 500);
    EXPECT_EQ_U(s.freed_samples, 500);
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    EXPECT_EQ_U(memprof_snapshot_live_samples(snap), 500);
    EXPECT_EQ_U(memprof_snapshot_estimated_bytes(snap), 32000);
    memprof_free_snapshot(snap);
    for (int i = 1; i < 1000; i += 2)
        memprof__on_free(blocks + i * 64);
    s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 0);
    EXPECT_EQ_U(s.freed_samples, 1000);
    EXPECT_EQ_U(s.estimated_live_bytes, 0);
}

/* Starts the engine at rate 1 with two samples, one live (so frees keep probing the Bloom
 * filter) and one freed at blocks + 64, the address then handed out again. */
static char *live_and_freed_sample(void)
{
    char *blocks = fake_blocks(2, 64);
    if (!EXPECT_EQ(fixture_start_engine(1, 0, 0, 42), 0) || !EXPECT(blocks != NULL))
        return NULL;
    memprof__on_alloc(blocks, 64);
    memprof__on_alloc(blocks + 64, 64);
    memprof__on_free(blocks + 64);
    EXPECT_EQ_U(fixture_stats().freed_samples, 1);
    return blocks;
}

static void test_reused_address_of_a_freed_sample_searches_the_heap_map_once(void)
{
    /* A freed sample's Bloom bits stay set, and allocators hand the same address out again
     * at once: its later (unsampled) frees are answered by the not-sampled cache after the
     * first search of the heap map. */
    char *blocks = live_and_freed_sample();
    CHECK(blocks != NULL);
    for (int i = 0; i < 100; i++)
        memprof__on_free(blocks + 64);
    EXPECT_EQ_U(memprof__engine.free_misses, 1);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 1);
    EXPECT_EQ_U(s.freed_samples, 1);
}

static void test_address_sampled_again_after_a_miss_is_found_by_its_free(void)
{
    char *blocks = live_and_freed_sample();
    CHECK(blocks != NULL);
    memprof__on_free(blocks + 64); /* a miss: now cached as not sampled */
    EXPECT_EQ_U(memprof__engine.free_misses, 1);
    /* Sampled again at the same address: the cache entry must not hide it. */
    memprof__on_alloc(blocks + 64, 64);
    EXPECT_EQ_U(fixture_stats().live_samples, 2);
    memprof__on_free(blocks + 64);
    EXPECT_EQ_U(fixture_stats().freed_samples, 2);
    /* The same through realloc's take: a miss, then a sample at that address, taken. */
    struct memprof_hm_entry e;
    EXPECT(!memprof__take(blocks + 64, &e));
    memprof__on_alloc(blocks + 64, 64);
    EXPECT(memprof__take(blocks + 64, &e));
    EXPECT_EQ_U(e.key, (uint64_t)(uintptr_t)(blocks + 64));
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 1);
    EXPECT_EQ_U(s.freed_samples, 3);
}

static void test_per_stack_counters(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 1), 0);
    const uintptr_t a[] = {(uintptr_t)frame_a, (uintptr_t)frame_c};
    const uintptr_t b[] = {(uintptr_t)frame_b, (uintptr_t)frame_c};
    char *blocks = fake_blocks(8, 4096);
    CHECK(blocks != NULL);
    for (int i = 0; i < 3; i++)
        memprof__record((uint64_t)(uintptr_t)(blocks + i * 4096), 100, a, 2, false);
    memprof__record((uint64_t)(uintptr_t)(blocks + 3 * 4096), 5000, b, 2, false);
    memprof__on_free(blocks + 4096);
    struct memprof_stack *sa = stack_of(a, 2), *sb = stack_of(b, 2);
    CHECK(sa && sb && sa != sb);
    EXPECT_EQ_U(sa->alloc_samples, 3);
    EXPECT_EQ_U(sa->alloc_bytes, 300);
    EXPECT_EQ_U(sa->live_samples, 2);
    EXPECT_EQ_U(sa->live_bytes, 200);
    EXPECT_EQ_U(sa->alloc_est_bytes, 300); /* rate 1: weight = size */
    EXPECT_EQ_U(sa->alloc_est_count_fp16, 3 * 65536);
    EXPECT_EQ_U(sb->alloc_samples, 1);
    EXPECT_EQ_U(sb->alloc_bytes, 5000);
    EXPECT_EQ_U(sb->live_samples, 1);
    EXPECT_EQ_U(sb->live_bytes, 5000);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.unique_stacks, 2);
    EXPECT_EQ_U(s.total_samples, 4);
    EXPECT_EQ_U(s.live_samples, 3);
    EXPECT_EQ_U(s.estimated_live_bytes, 5200);

    /* The snapshot has one site per stack, largest live bytes first. */
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    CHECK_EQ_U(snap->nsites, 2);
    const struct memprof_snap_site *s0 = &snap->sites[0], *s1 = &snap->sites[1];
    EXPECT_EQ_U(s0->live.samples, 1);
    EXPECT(fabs(s0->live.bytes - 5000) < 1e-6);
    EXPECT_EQ_U(s1->live.samples, 2);
    EXPECT(fabs(s1->live.bytes - 200) < 1e-6);
    EXPECT(fabs(s1->live.count - 2) < 1e-9);
    EXPECT_EQ_U(s1->alloc_samples, 3);
    EXPECT_EQ_U(s1->alloc_est_bytes, 300);
    EXPECT_EQ_U(s1->alloc_est_count, 3);
    unsigned depth;
    const uintptr_t *f = memprof__snapshot_site_frames(snap, s1, &depth);
    CHECK(f != NULL);
    EXPECT_EQ(depth, 2);
    EXPECT(memcmp(f, a, sizeof a) == 0);
    memprof_free_snapshot(snap);
}

static void test_freed_stack_keeps_a_site_with_cumulative_counts(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 1), 0);
    const uintptr_t a[] = {(uintptr_t)frame_a};
    char *blocks = fake_blocks(4, 4096);
    CHECK(blocks != NULL);
    memprof__record((uint64_t)(uintptr_t)blocks, 1000, a, 1, false);
    memprof__on_free(blocks);
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    EXPECT_EQ_U(snap->nsamples, 0);
    CHECK_EQ_U(snap->nsites, 1);
    EXPECT_EQ_U(snap->sites[0].live.samples, 0);
    EXPECT_EQ_U(snap->sites[0].alloc_samples, 1);
    EXPECT_EQ_U(snap->sites[0].alloc_est_bytes, 1000);
    memprof_free_snapshot(snap);
}

static void test_estimates_use_unbiased_weights(void)
{
    const uint64_t rate = 4096;
    CHECK_EQ(fixture_start_engine(rate, 0, 0, 1), 0);
    const uintptr_t a[] = {(uintptr_t)frame_a};
    char *blocks = fake_blocks(300, 4096);
    CHECK(blocks != NULL);
    /* 200 samples of 1000 B: each stands for 1000 / (1 - e^(-1000/4096)) = 4616.4 bytes. */
    for (int i = 0; i < 200; i++)
        memprof__record((uint64_t)(uintptr_t)(blocks + i * 4096), 1000, a, 1, false);
    double p = -expm1(-1000.0 / rate);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.estimated_live_bytes, 200 * weight(1000, rate));
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    memprof_estimate e = {.size = sizeof e};
    CHECK_EQ(memprof_snapshot_estimate(snap, &e), 0);
    EXPECT_EQ_U(e.bytes, memprof__est_round(200 * 1000 / p));
    EXPECT_EQ_U(e.count, memprof__est_round(200 / p));
    EXPECT(e.bytes_low < e.bytes && e.bytes < e.bytes_high);
    EXPECT(e.count_low < e.count && e.count < e.count_high);
    /* The interval is the site interval of export/interval.h at this rate, from the
     * estimate and var = sum s^2 (1-p)/p^2. */
    struct memprof_interval iv;
    memprof__interval_at_rate(200 * 1000 / p, 200 * 1000.0 * 1000.0 * (1 - p) / (p * p), 200,
                              rate, &iv);
    EXPECT_EQ_U(e.bytes_low, iv.lo);
    EXPECT_EQ_U(e.bytes_high, iv.hi);
    EXPECT_EQ(e.low_confidence, 0);
    EXPECT_EQ_U(e.sampling_rate, rate);
    memprof_free_snapshot(snap);
}

static void test_huge_blocks_are_estimated_exactly(void)
{
    /* 64 GiB at the default rate: p = 1 - e^-131072 = 1, so it counts as 64 GiB, not as one
     * rate's worth (the seed spec's weight) and not clamped to 16 MiB. */
    CHECK_EQ(fixture_start_engine(0, 0, 0, 1), 0);
    const uintptr_t a[] = {(uintptr_t)frame_a};
    char *blocks = fake_blocks(4, 4096);
    CHECK(blocks != NULL);
    const uint64_t big = (uint64_t)64 << 30, bigger = ((uint64_t)1 << 40) + 4096;
    memprof__record((uint64_t)(uintptr_t)blocks, big, a, 1, false);
    memprof__record((uint64_t)(uintptr_t)(blocks + 4096), bigger, a, 1, false);
    EXPECT_EQ_U(fixture_stats().estimated_live_bytes, big + bigger);
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    EXPECT_EQ_U(memprof_snapshot_estimated_bytes(snap), big + bigger);
    memprof_estimate e = {.size = sizeof e};
    CHECK_EQ(memprof_snapshot_estimate(snap, &e), 0);
    EXPECT_EQ_U(e.count, 2);
    /* Two samples, but exact ones (no variance): the flag follows the estimate's
     * information, not the sample count. */
    EXPECT_EQ(e.low_confidence, 0);
    memprof_free_snapshot(snap);
    memprof__on_free(blocks);
    EXPECT_EQ_U(fixture_stats().estimated_live_bytes, bigger);
}

static void test_small_rate_estimate_is_close_and_returns_to_zero(void)
{
    const uint64_t rate = 4096, size = 64, n = 200000;
    CHECK_EQ(fixture_start_engine(rate, 0, 0, 7), 0);
    char *blocks = fake_blocks(n, 16);
    CHECK(blocks != NULL);
    for (uint64_t i = 0; i < n; i++)
        memprof__on_alloc(blocks + i * 16, size);
    memprof_stats s = fixture_stats();
    double p = -expm1(-(double)size / rate), truth = (double)(n * size);
    /* K ~ Binomial(n, p): the estimate K * size / p has sd truth * sqrt((1-p) / (n p)). */
    double sd = truth * sqrt((1 - p) / ((double)n * p));
    printf("  %" PRIu64 " samples (expected %.0f); estimate %" PRIu64 ", truth %.0f +/- %.0f\n",
           s.total_samples, n * p, s.estimated_live_bytes, truth, 5 * sd);
    EXPECT(fabs((double)s.estimated_live_bytes - truth) <= 5 * sd);
    EXPECT_EQ_U(s.estimated_live_bytes, s.live_samples * weight(size, rate));
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    /* Stats round per sample, the snapshot rounds the sum. */
    EXPECT(fabs((double)memprof_snapshot_estimated_bytes(snap) - (double)s.estimated_live_bytes) <=
           (double)s.live_samples);
    memprof_free_snapshot(snap);
    for (uint64_t i = 0; i < n; i++)
        memprof__on_free(blocks + i * 16);
    s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 0);
    EXPECT_EQ_U(s.freed_samples, s.total_samples);
    EXPECT_EQ_U(s.estimated_live_bytes, 0);
}

static void test_stop_keeps_tracking_frees(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 3), 0);
    char *blocks = fake_blocks(300, 64);
    CHECK(blocks != NULL);
    for (int i = 0; i < 100; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    CHECK_EQ(memprof_stop(), 0);
    for (int i = 0; i < 50; i++)
        memprof__on_free(blocks + i * 64);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 50);
    EXPECT_EQ_U(s.freed_samples, 50);
    EXPECT_EQ_U(s.estimated_live_bytes, 50 * 64);
    /* Allocations while stopped are not sampled. */
    for (int i = 100; i < 200; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    EXPECT_EQ_U(fixture_stats().total_samples, 100);
    /* Started again, they are. */
    CHECK_EQ(memprof_start(), 0);
    for (int i = 200; i < 210; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    s = fixture_stats();
    EXPECT_EQ_U(s.total_samples, 110);
    EXPECT_EQ_U(s.live_samples, 60);
}

static void test_allocations_before_start_are_not_sampled(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = 1;
    CHECK_EQ(memprof_init_config(&c), 0);
    memprof__backend_register();
    char *blocks = fake_blocks(1000, 64);
    CHECK(blocks != NULL);
    for (int i = 0; i < 1000; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    EXPECT_EQ_U(fixture_stats().total_samples, 0);
    EXPECT_EQ_U(fixture_stats().live_samples, 0);
    CHECK_EQ(memprof_start(), 0);
    memprof__on_alloc(blocks, 64);
    EXPECT_EQ_U(fixture_stats().total_samples, 1);
}

static void test_take_and_restore_round_trip(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 5), 0);
    const uintptr_t a[] = {(uintptr_t)frame_a, (uintptr_t)frame_b};
    char *blocks = fake_blocks(4, 4096);
    CHECK(blocks != NULL);
    memprof__record((uint64_t)(uintptr_t)blocks, 4096, a, 2, false);
    struct memprof_stack *sa = stack_of(a, 2);
    CHECK(sa != NULL);
    struct memprof_hm_entry e = {0};
    /* realloc: the sample is taken out before the real realloc... */
    CHECK(memprof__take(blocks, &e));
    EXPECT_EQ_U(e.key, (uint64_t)(uintptr_t)blocks);
    EXPECT_EQ_U(e.size, 4096);
    EXPECT_EQ_U(memprof__st_get(&memprof__engine.st, e.stack_id), sa);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 0);
    EXPECT_EQ_U(s.estimated_live_bytes, 0);
    EXPECT_EQ_U(sa->live_samples, 0);
    struct memprof_hm_entry again;
    EXPECT(!memprof__take(blocks, &again));
    /* ...and put back when it failed. */
    memprof__restore(&e);
    s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 1);
    EXPECT_EQ_U(s.estimated_live_bytes, 4096);
    EXPECT_EQ_U(sa->live_samples, 1);
    EXPECT_EQ_U(sa->live_bytes, 4096);
    EXPECT_EQ_U(sa->alloc_samples, 1); /* not counted as a new allocation */
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    CHECK_EQ_U(snap->nsamples, 1);
    EXPECT_EQ_U(snap->samples[0].size, 4096);
    EXPECT_EQ_U(snap->samples[0].stack_id, e.stack_id);
    EXPECT_EQ_U(snap->samples[0].ts, e.ts);
    memprof_free_snapshot(snap);
    /* The restored sample is freed normally. */
    memprof__on_free(blocks);
    EXPECT_EQ_U(fixture_stats().live_samples, 0);
    EXPECT_EQ_U(fixture_stats().freed_samples, 1);
    EXPECT(!memprof__take(NULL, &again));
    EXPECT(!memprof__take(blocks + 4096, &again));
}

static void test_hooks_after_shutdown_are_ignored(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 9), 0);
    char *blocks = fake_blocks(100, 64);
    CHECK(blocks != NULL);
    for (int i = 0; i < 10; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    memprof_shutdown();
    for (int i = 10; i < 100; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    for (int i = 0; i < 100; i++)
        memprof__on_free(blocks + i * 64);
    memprof_stats s = fixture_stats();
    EXPECT_EQ(s.state, MEMPROF_STATE_SHUTDOWN);
    EXPECT_EQ_U(s.total_samples, 10);
    EXPECT_EQ_U(s.freed_samples, 0);
}

static void test_reentrant_allocations_are_skipped(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 11), 0);
    char *blocks = fake_blocks(4, 64);
    CHECK(blocks != NULL);
    uint8_t g = memprof__guard_enter();
    memprof__on_alloc(blocks, 64);
    memprof__guard_leave(g);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.reentrant_skips, 1);
    EXPECT_EQ_U(s.total_samples, 0);
    /* The next allocation outside the guard is decided normally. */
    memprof__on_alloc(blocks + 64, 64);
    EXPECT_EQ_U(fixture_stats().total_samples, 1);
}

static void test_full_heap_map_drops_are_counted(void)
{
    CHECK_EQ(fixture_start_engine(1, 4096, 0, 13), 0);
    char *blocks = fake_blocks(5000, 64);
    CHECK(blocks != NULL);
    for (int i = 0; i < 5000; i++)
        memprof__on_alloc(blocks + i * 64, 64);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.heap_map_capacity, 4096);
    EXPECT_EQ_U(s.total_samples, 5000);
    EXPECT_EQ_U(s.live_samples, 4096);
    EXPECT_EQ_U(s.heap_map_full_drops, 904);
    EXPECT_EQ_U(s.estimated_live_bytes, 4096 * 64);
    for (int i = 0; i < 5000; i++)
        memprof__on_free(blocks + i * 64);
    s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 0);
    EXPECT_EQ_U(s.freed_samples, 4096);
    EXPECT_EQ_U(s.estimated_live_bytes, 0);
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    EXPECT_EQ_U(snap->heap_map_full_drops, 904);
    memprof_free_snapshot(snap);
}

static void test_stack_table_overflow_is_counted(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 16, 17), 0);
    char *blocks = fake_blocks(20, 4096);
    CHECK(blocks != NULL);
    for (int i = 0; i < 20; i++) {
        uintptr_t frames[2] = {(uintptr_t)frame_a + (uintptr_t)i, (uintptr_t)frame_c};
        memprof__record((uint64_t)(uintptr_t)(blocks + i * 4096), 100, frames, 2, false);
    }
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.stack_table_capacity, 16);
    EXPECT_EQ_U(s.unique_stacks, 15);
    EXPECT_EQ_U(s.stack_table_overflows, 5);
    /* Samples on the overflow stack are still live and estimated. */
    EXPECT_EQ_U(s.live_samples, 20);
    EXPECT_EQ_U(s.estimated_live_bytes, 2000);
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    EXPECT_EQ_U(snap->stack_table_overflows, 5);
    bool found = false;
    for (size_t i = 0; i < snap->nsites; i++)
        if (snap->sites[i].stack_id == MEMPROF_STACK_OVERFLOW_ID) {
            found = true;
            EXPECT_EQ_U(snap->sites[i].live.samples, 5);
        }
    EXPECT(found);
    memprof_free_snapshot(snap);
}

static void test_truncated_stacks_are_counted(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 19), 0);
    char *blocks = fake_blocks(4, 4096);
    CHECK(blocks != NULL);
    const uintptr_t a[] = {(uintptr_t)frame_a}, b[] = {(uintptr_t)frame_b};
    memprof__record((uint64_t)(uintptr_t)blocks, 100, a, 1, true);
    memprof__record((uint64_t)(uintptr_t)(blocks + 4096), 100, a, 1, true);
    memprof__record((uint64_t)(uintptr_t)(blocks + 8192), 100, b, 1, false);
    EXPECT_EQ_U(fixture_stats().truncated_stacks, 2);
    struct memprof_snapshot *snap = snapshot();
    CHECK(snap != NULL);
    EXPECT_EQ_U(snap->truncated_stacks, 2);
    memprof_free_snapshot(snap);
}

static void test_churn_rebuilds_the_bloom_filter_and_loses_nothing(void)
{
    /* A small table (Bloom filter of 64 Ki bits) and 300000 distinct addresses with at most
     * 256 live: the filter saturates with dead keys again and again. */
    CHECK_EQ(fixture_start_engine(1, 4096, 0, 23), 0);
    enum { N = 300000, LIVE = 256 };
    char *blocks = fake_blocks(N, 16);
    CHECK(blocks != NULL);
    unsigned max_fill = 0;
    for (int i = 0; i < N; i++) {
        if (i >= LIVE)
            memprof__on_free(blocks + (size_t)(i - LIVE) * 16);
        memprof__on_alloc(blocks + (size_t)i * 16, 64);
        if (i % 1000 == 0) {
            unsigned f = (unsigned)fixture_stats().bloom_fill_permille;
            max_fill = f > max_fill ? f : max_fill;
        }
    }
    memprof_stats s = fixture_stats();
    printf("  %" PRIu64 " samples, %" PRIu64 " Bloom rebuilds, fill at most %u permille, %" PRIu64
           " dropped (heap map full)\n",
           s.total_samples, s.bloom_rebuilds, max_fill, s.heap_map_full_drops);
    EXPECT(s.bloom_rebuilds >= 10);
    EXPECT(max_fill < 800);
    /* Every sample that entered the map was found again by its free. */
    EXPECT_EQ_U(s.live_samples + s.freed_samples + s.heap_map_full_drops, s.total_samples);
    for (int i = N - LIVE; i < N; i++)
        memprof__on_free(blocks + (size_t)i * 16);
    s = fixture_stats();
    EXPECT_EQ_U(s.live_samples, 0);
    EXPECT_EQ_U(s.freed_samples + s.heap_map_full_drops, s.total_samples);
    EXPECT_EQ_U(s.estimated_live_bytes, 0);
}

static void test_stats_report_the_configuration(void)
{
    CHECK_EQ(fixture_start_engine(12345, 100000, 5000, 1), 0);
    memprof_stats s = fixture_stats();
    EXPECT_EQ(s.state, MEMPROF_STATE_ACTIVE);
    EXPECT_EQ_U(s.sampling_rate, 12345);
    EXPECT_EQ_U(s.heap_map_capacity, 131072);
    EXPECT_EQ_U(s.stack_table_capacity, 5000);
    EXPECT(s.profiler_bytes > 0);
    EXPECT_EQ(s.reserved, 0);
}

/* Runs a seeded allocation sequence in a child process (a fresh engine) and returns a
 * fingerprint of which allocations were sampled (their sizes are distinct). */
static uint64_t sampled_fingerprint(uint64_t seed)
{
    int fds[2];
    if (pipe(fds) != 0)
        return 0;
    fflush(NULL);
    pid_t pid = fork();
    if (pid == 0) {
        uint64_t fp = 0;
        char *blocks = fake_blocks(20000, 16);
        if (blocks && fixture_start_engine(4096, 0, 0, seed) == 0) {
            for (uint64_t i = 0; i < 20000; i++)
                memprof__on_alloc(blocks + i * 16, 100 + i);
            memprof_snapshot *snap = NULL;
            if (memprof_get_snapshot(&snap) == 0) {
                for (size_t i = 0; i < snap->nsamples; i++) {
                    uint64_t x = snap->samples[i].size;
                    fp += test_rand(&x); /* order-independent */
                }
                fp ^= snap->nsamples;
                memprof_free_snapshot(snap);
            }
        }
        _exit(write(fds[1], &fp, sizeof fp) == sizeof fp ? 0 : 1);
    }
    close(fds[1]);
    uint64_t fp = 0;
    if (pid < 0 || read(fds[0], &fp, sizeof fp) != sizeof fp)
        fp = 0;
    close(fds[0]);
    if (pid > 0)
        waitpid(pid, NULL, 0);
    return fp;
}

static void test_fixed_seed_reproduces_the_samples(void)
{
    uint64_t a = sampled_fingerprint(1234), b = sampled_fingerprint(1234);
    uint64_t c = sampled_fingerprint(1235);
    EXPECT(a != 0);
    EXPECT_EQ_U(a, b);
    EXPECT(a != c);
}

/* Allocates blocks of distinct sizes at rate 4096 and returns a fingerprint of which were
 * sampled (from a snapshot), then frees them again. */
static uint64_t sample_run(char *blocks, uint64_t n)
{
    for (uint64_t i = 0; i < n; i++)
        memprof__on_alloc(blocks + i * 16, 100 + i);
    uint64_t fp = 0;
    memprof_snapshot *snap = NULL;
    if (memprof_get_snapshot(&snap) == 0) {
        for (size_t i = 0; i < snap->nsamples; i++) {
            uint64_t x = snap->samples[i].size;
            fp += test_rand(&x);
        }
        memprof_free_snapshot(snap);
    }
    for (uint64_t i = 0; i < n; i++)
        memprof__on_free(blocks + i * 16);
    return fp;
}

static void test_fork_child_keeps_working_and_samples_differently(void)
{
    /* The child is re-seeded (it must not repeat the parent's samples) and its engine state
     * is consistent: it samples, frees and snapshots; the parent is unaffected. */
    CHECK_EQ(fixture_start_engine(4096, 0, 0, 31), 0);
    char *blocks = fake_blocks(20000, 16);
    CHECK(blocks != NULL);
    memprof__on_alloc(blocks, 64); /* the parent thread is seeded before the fork */
    memprof__on_free(blocks);
    memprof_stats before = fixture_stats();
    int fds[2];
    CHECK_EQ(pipe(fds), 0);
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0);
    if (pid == 0) {
        uint64_t fp = sample_run(blocks, 20000);
        memprof_stats s = {.size = sizeof s};
        int bad = memprof_get_stats(&s) != 0 || s.live_samples != 0 ||
                  s.estimated_live_bytes != 0 || s.total_samples <= before.total_samples ||
                  s.freed_samples + s.heap_map_full_drops != s.total_samples;
        _exit(write(fds[1], &fp, sizeof fp) == sizeof fp && !bad ? 0 : 1);
    }
    close(fds[1]);
    uint64_t child_fp = 0;
    EXPECT(read(fds[0], &child_fp, sizeof child_fp) == sizeof child_fp);
    close(fds[0]);
    int status;
    CHECK_EQ(waitpid(pid, &status, 0), pid);
    EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    memprof_stats after = fixture_stats();
    EXPECT_EQ_U(after.total_samples, before.total_samples);
    uint64_t parent_fp = sample_run(blocks, 20000);
    EXPECT(parent_fp != 0 && child_fp != 0);
    EXPECT(parent_fp != child_fp);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_rate_one_samples_every_allocation),
        TEST_CASE(test_frees_remove_samples),
        TEST_CASE(test_reused_address_of_a_freed_sample_searches_the_heap_map_once),
        TEST_CASE(test_address_sampled_again_after_a_miss_is_found_by_its_free),
        TEST_CASE(test_per_stack_counters),
        TEST_CASE(test_freed_stack_keeps_a_site_with_cumulative_counts),
        TEST_CASE(test_estimates_use_unbiased_weights),
        TEST_CASE(test_huge_blocks_are_estimated_exactly),
        TEST_CASE(test_small_rate_estimate_is_close_and_returns_to_zero),
        TEST_CASE(test_stop_keeps_tracking_frees),
        TEST_CASE(test_allocations_before_start_are_not_sampled),
        TEST_CASE(test_take_and_restore_round_trip),
        TEST_CASE(test_hooks_after_shutdown_are_ignored),
        TEST_CASE(test_reentrant_allocations_are_skipped),
        TEST_CASE(test_full_heap_map_drops_are_counted),
        TEST_CASE(test_stack_table_overflow_is_counted),
        TEST_CASE(test_truncated_stacks_are_counted),
        TEST_CASE(test_churn_rebuilds_the_bloom_filter_and_loses_nothing),
        TEST_CASE(test_stats_report_the_configuration),
        TEST_CASE(test_fixed_seed_reproduces_the_samples),
        TEST_CASE(test_fork_child_keeps_working_and_samples_differently),
    };
    return TEST_MAIN(cases, true);
}
