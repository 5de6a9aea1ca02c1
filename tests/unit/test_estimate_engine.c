/* SPDX-License-Identifier: MIT */
/*
 * Statistical tests of the whole engine path: allocations reported through
 * memprof__on_alloc() (fake block addresses, never touched) are sampled by the per-thread
 * sampler, recorded in the heap map and weighted at snapshot time. With a fixed engine seed
 * every thread gets its own deterministic stream, so running one workload per thread, one
 * thread after the other, gives many independent seeds in one process. The mean estimate
 * must be within 1 % of the truth (with 1 % at least five standard errors wide) and the
 * live estimate must return exactly to zero once everything is freed. These are the issue's
 * acceptance workloads (2000 x 50,000 B at 64 KiB; 16 MiB blocks at the default rate), run
 * over many seeds. One engine per process: each case is its own test in meson.build.
 */
#include <math.h>
#include <pthread.h>
#include <sys/mman.h>

#include "config.h"
#include "core/engine.h"
#include "memprof/memprof.h"
#include "engine_fixture.h"
#include "test.h"

struct workload {
    char *blocks; /* fake addresses, `stride` apart */
    size_t stride;
    uint64_t size, n; /* n blocks of `size` bytes */
    /* results */
    uint64_t stats_bytes; /* memprof_get_stats().estimated_live_bytes while live */
    memprof_estimate est; /* snapshot estimate while live */
    uint64_t bytes_after_free;
};

static void *run_workload(void *arg)
{
    struct workload *w = arg;
    for (uint64_t i = 0; i < w->n; i++)
        memprof__on_alloc(w->blocks + i * w->stride, w->size);
    memprof_stats s = {.size = sizeof s};
    memprof_get_stats(&s);
    w->stats_bytes = s.estimated_live_bytes;
    memprof_snapshot *snap = NULL;
    w->est.size = sizeof w->est;
    if (memprof_get_snapshot(&snap) == 0) {
        memprof_snapshot_estimate(snap, &w->est);
        memprof_free_snapshot(snap);
    }
    for (uint64_t i = 0; i < w->n; i++)
        memprof__on_free(w->blocks + i * w->stride);
    memprof_get_stats(&s);
    w->bytes_after_free = s.estimated_live_bytes;
    return NULL;
}

/* Runs the workload once per thread, `threads` times in sequence; returns the mean and
 * standard error of estimate/truth and checks the per-run invariants. */
static void run_seeds(uint64_t size, uint64_t n, int threads, double *mean, double *se,
                      double *coverage)
{
    *mean = *se = *coverage = NAN; /* what the checks see if the set-up fails */
    size_t stride = 64;
    char *blocks =
        mmap(NULL, n * stride, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!EXPECT(blocks != MAP_FAILED))
        return;
    double truth = (double)size * (double)n, sum = 0, sum2 = 0;
    int covered = 0, bad = 0;
    for (int t = 0; t < threads; t++) {
        struct workload w = {.blocks = blocks, .stride = stride, .size = size, .n = n};
        pthread_t th;
        if (!EXPECT_EQ(pthread_create(&th, NULL, run_workload, &w), 0))
            break;
        pthread_join(th, NULL);
        double r = (double)w.est.bytes / truth;
        sum += r;
        sum2 += r * r;
        covered += (double)w.est.bytes_low <= truth && truth <= (double)w.est.bytes_high;
        /* Stats round each sample's weight, the snapshot rounds the sum. */
        bad += fabs((double)w.stats_bytes - (double)w.est.bytes) > (double)w.est.live_samples;
        bad += w.bytes_after_free != 0;
    }
    EXPECT_EQ(bad, 0);
    *mean = sum / threads;
    *se = sqrt((sum2 - threads * *mean * *mean) / (threads - 1)) / sqrt((double)threads);
    *coverage = (double)covered / threads;
    munmap(blocks, n * stride);
}

static void test_50000_byte_blocks_at_64_kib(void)
{
    /* p = 1 - e^(-50000/65536) = 0.534: 5000 blocks give ~2670 samples, a relative sd of
     * 1.3 % per seed and 0.13 % over 100 seeds. */
    CHECK_EQ(fixture_start_engine(64 * 1024, 0, 0, 2024), 0);
    double mean, se, coverage;
    run_seeds(50000, 5000, 100, &mean, &se, &coverage);
    printf("  100 seeds: mean estimate/truth %.5f, SE %.5f (1%% = %.1f SE), %.0f %% of "
           "intervals cover the truth\n",
           mean, se, 0.01 / se, 100 * coverage);
    EXPECT(fabs(mean - 1) <= 0.01);
    EXPECT(5 * se <= 0.01);
    EXPECT(fabs(mean - 1) <= 5 * se);
    /* 100 seeds: the binomial sd of the coverage is 2.2 %. */
    EXPECT(coverage >= 0.85);
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    EXPECT_EQ_U(s.live_samples, 0);
    EXPECT_EQ_U(s.estimated_live_bytes, 0);
    EXPECT_EQ_U(s.freed_samples, s.total_samples);
    EXPECT_EQ_U(s.heap_map_full_drops, 0);
}

static void test_16_mib_blocks_at_the_default_rate(void)
{
    /* 32x the default rate: every block is sampled and counts at its size. */
    CHECK_EQ(fixture_start_engine(0, 0, 0, 77), 0);
    double mean, se, coverage;
    run_seeds(16 << 20, 20, 20, &mean, &se, &coverage);
    printf("  20 seeds: mean estimate/truth %.9f, SE %.9f\n", mean, se);
    EXPECT(fabs(mean - 1) <= 1e-6);
    EXPECT(se <= 1e-6);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_50000_byte_blocks_at_64_kib),
        TEST_CASE(test_16_mib_blocks_at_the_default_rate),
    };
    return TEST_MAIN(cases, true);
}
