/* SPDX-License-Identifier: MIT */
/*
 * Accuracy end to end through real malloc interposition: a program linked with -lmemprof
 * calls memprof_start() (the GOT backend patches its own and libc's allocator slots), then,
 * once per seed on a fresh thread (one engine with a fixed seed: each thread samples its
 * own deterministic stream), allocates from three sites with a known truth -- 64 B blocks
 * from malloc, blocks of 32x-128x the rate, and realloc()ed blocks of log-uniform sizes
 * from 16 B to 256 KiB -- takes a snapshot, and frees everything. Sites are found by the
 * leaf function of their stacks. Per seed: the large blocks are estimated exactly, the other
 * sites lie within 4.5 reported standard deviations of the truth (a correct engine misses
 * with probability < 1e-5 per check), the sites add up to the whole-heap estimate up to a
 * little foreign memory; over the seeds, each site's mean estimate of bytes and allocations
 * is within 5 exact standard errors. Self-checking (exit 0/1); `--long` runs more seeds.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include "../keep_frame.h"
#include "../check.h"

#define RATE    ((uint64_t)16384)
#define SMALL_N 150000 /* 64 B: p = 0.0039, ~590 samples */
#define LARGE_N 40     /* 512 KiB to 2 MiB: p >= 1 - e^-32 */
#define MIXED_N 3000   /* log-uniform 16 B to 256 KiB, through realloc: ~1000 samples */

enum { SMALL, LARGE, MIXED, NSITES };
static const char *const site_fn[NSITES] = {"small_site", "large_site", "mixed_site"};

struct truth {
    double bytes, count, var_bytes, var_count; /* var: the estimator's exact variance */
};

struct seed_result {
    int seed;
    struct truth truth[NSITES];
    double bytes[NSITES], count[NSITES], lo[NSITES], hi[NSITES];
    uint64_t samples[NSITES];
    double whole, whole_lo, whole_hi;
};

static uint64_t splitmix(uint64_t *x)
{
    uint64_t z = (*x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

static double unit(uint64_t *x)
{
    return (double)(splitmix(x) >> 11) * 0x1.0p-53;
}

static void add_truth(struct truth *t, uint64_t size)
{
    double p = -expm1(-(double)size / (double)RATE), q = (1 - p) / p;
    t->bytes += (double)size;
    t->count += 1;
    t->var_bytes += (double)size * (double)size * q;
    t->var_count += q;
}

/* Each site is its own function, so its blocks have their own stack (leaf frame). */
TEST_KEEP_FRAME static void small_site(void **blocks, struct truth *t)
{
    for (int i = 0; i < SMALL_N; i++) {
        blocks[i] = malloc(64);
        add_truth(t, 64);
    }
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void large_site(void **blocks, struct truth *t, uint64_t *data)
{
    for (int i = 0; i < LARGE_N; i++) {
        uint64_t size = 32 * RATE + splitmix(data) % (96 * RATE);
        blocks[i] = malloc(size); /* mmap()ed by glibc and never touched */
        add_truth(t, size);
    }
    __asm__ volatile("" ::: "memory");
}

/* A block is allocated small, then realloc()ed to its final size: the truth is the final
 * block, and the first one's sample (if any) must leave the live set. */
TEST_KEEP_FRAME static void mixed_site(void **blocks, struct truth *t, uint64_t *data)
{
    for (int i = 0; i < MIXED_N; i++) {
        uint64_t size = (uint64_t)(16.0 * exp(log(16384.0) * unit(data)));
        void *p = malloc(8);
        blocks[i] = realloc(p, size);
        if (!blocks[i])
            blocks[i] = p;
        else
            add_truth(t, size);
    }
    __asm__ volatile("" ::: "memory");
}

static int site_of(const memprof_snapshot *s, uint32_t stack_id)
{
    memprof_frame f = {.size = sizeof f};
    if (memprof_snapshot_frame(s, stack_id, 0, &f) != 0 || !f.function)
        return -1;
    for (int k = 0; k < NSITES; k++)
        if (strcmp(f.function, site_fn[k]) == 0)
            return k;
    return -1;
}

static void *run_seed(void *arg)
{
    struct seed_result *r = arg;
    static void *small[SMALL_N], *large[LARGE_N], *mixed[MIXED_N];
    uint64_t data = 0x5eed + (uint64_t)r->seed; /* the test data of this seed */
    small_site(small, &r->truth[SMALL]);
    large_site(large, &r->truth[LARGE], &data);
    mixed_site(mixed, &r->truth[MIXED], &data);

    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0);
    if (s) {
        memprof_estimate e = {.size = sizeof e};
        CHECK(memprof_snapshot_estimate(s, &e) == 0);
        r->whole = (double)e.bytes;
        r->whole_lo = (double)e.bytes_low;
        r->whole_hi = (double)e.bytes_high;
        for (size_t i = 0; i < memprof_snapshot_site_count(s); i++) {
            memprof_site_info si = {.size = sizeof si};
            if (memprof_snapshot_site(s, i, &si) != 0 || si.live_samples == 0)
                continue;
            int k = site_of(s, si.stack_id);
            if (k < 0)
                continue;
            CHECK(r->samples[k] == 0); /* one stack per site */
            r->bytes[k] = (double)si.live_bytes;
            r->count[k] = (double)si.live_count;
            r->lo[k] = (double)si.live_bytes_low;
            r->hi[k] = (double)si.live_bytes_high;
            r->samples[k] = si.live_samples;
        }
        memprof_free_snapshot(s);
    }
    for (int i = 0; i < SMALL_N; i++)
        free(small[i]);
    for (int i = 0; i < LARGE_N; i++)
        free(large[i]);
    for (int i = 0; i < MIXED_N; i++)
        free(mixed[i]);
    return NULL;
}

int main(int argc, char **argv)
{
    if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "memprof")) {
        fprintf(stderr, "this test must run without the preload plugin\n");
        return 77;
    }
    int seeds = argc > 1 && strcmp(argv[1], "--long") == 0 ? 60 : 6;
    printf("GOT backend, rate %" PRIu64 ", %d seeds\n", RATE, seeds);
    fflush(stdout);

    memprof_config cfg;
    memprof_config_init(&cfg);
    cfg.sampling_rate = RATE;
    cfg.seed = 4242;
    CHECK(memprof_init_config(&cfg) == 0);
    CHECK(memprof_start() == 0);

    double sum[NSITES] = {0}, sum_c[NSITES] = {0}, var[NSITES] = {0}, var_c[NSITES] = {0};
    double rounding[NSITES] = {0}; /* of 0.5 / truth: estimates are whole numbers */
    int covered[NSITES] = {0};
    for (int seed = 0; seed < seeds; seed++) {
        struct seed_result r = {.seed = seed};
        pthread_t th;
        CHECK(pthread_create(&th, NULL, run_seed, &r) == 0);
        pthread_join(th, NULL);
        double sites = 0, truth = 0, sd_whole = (r.whole_hi - r.whole_lo) / (2 * 1.959964);
        for (int k = 0; k < NSITES; k++) {
            const struct truth *t = &r.truth[k];
            double sd = (r.hi[k] - r.lo[k]) / (2 * 1.959964);
            printf("seed %d %-10s %5" PRIu64 " samples: bytes %.4f of the truth "
                   "(interval %.4f-%.4f), allocations %.4f\n",
                   seed, site_fn[k], r.samples[k], r.bytes[k] / t->bytes, r.lo[k] / t->bytes,
                   r.hi[k] / t->bytes, r.count[k] / t->count);
            if (k == LARGE) {
                CHECK(r.bytes[k] == t->bytes && r.count[k] == t->count);
            } else {
                CHECK(r.samples[k] >= 300);
                CHECK(fabs(r.bytes[k] - t->bytes) <= 4.5 * sd);
            }
            covered[k] += r.lo[k] <= t->bytes && t->bytes <= r.hi[k];
            sum[k] += r.bytes[k] / t->bytes;
            sum_c[k] += r.count[k] / t->count;
            var[k] += t->var_bytes / (t->bytes * t->bytes);
            var_c[k] += t->var_count / (t->count * t->count);
            rounding[k] += 0.5 / t->count;
            sites += r.bytes[k];
            truth += t->bytes;
        }
        /* The whole heap holds the sites plus whatever else the process had live and
         * sampled (little: a few library buffers). */
        printf("seed %d whole heap: %.4f of the sites' truth, sites' estimates %.4f\n", seed,
               r.whole / truth, sites / truth);
        CHECK(r.whole >= sites - NSITES && r.whole - sites <= 0.002 * truth); /* rounding */
        CHECK(fabs(r.whole - truth) <= 4.5 * sd_whole + 0.002 * truth);
    }
    for (int k = 0; k < NSITES; k++) {
        double m = sum[k] / seeds, se = sqrt(var[k]) / seeds;
        double mc = sum_c[k] / seeds, sec = sqrt(var_c[k]) / seeds;
        printf("%-10s over %d seeds: bytes %.4f (exact SE %.4f), allocations %.4f (SE %.4f), "
               "%d of %d intervals cover the truth\n",
               site_fn[k], seeds, m, se, mc, sec, covered[k], seeds);
        /* Rounding to whole bytes and allocations: half a unit over the truth at most. */
        CHECK(fabs(m - 1) <= 5 * se + 1e-6);
        CHECK(fabs(mc - 1) <= 5 * sec + rounding[k] / seeds);
    }
    memprof_stats st = {.size = sizeof st};
    CHECK(memprof_get_stats(&st) == 0);
    printf("after all seeds: %" PRIu64 " live samples, %" PRIu64 " samples in all\n",
           st.live_samples, st.total_samples);
    CHECK(st.live_samples < 10);
    CHECK(st.heap_map_full_drops == 0);
    return failures ? 1 : 0;
}
