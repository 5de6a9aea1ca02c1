/* SPDX-License-Identifier: MIT */
/*
 * Statistical tests of the estimator (src/common/estimate.h) driven by the real sampler
 * (src/core/sampler.h): allocation streams with a known truth are sampled with the engine's
 * countdown logic and draws, the samples are weighted with memprof__est_add(), and over many
 * fixed seeds (so every run is identical) the mean estimate must be within 1 % of the truth
 * for small fixed-size blocks, blocks of 32x the rate and more, blocks near the rate, and a
 * mixed, heavy-tailed size distribution; about 95 % of the per-seed 95 % intervals must
 * cover the truth. Each test computes its standard error and checks that 1 % is at least
 * five of them wide (so it cannot be flaky), and shows that the seed spec's "each sample
 * weighs R" estimator would fail it where that estimator is biased (so it can fail).
 */
#include <math.h>

#include "common/estimate.h"
#include "core/sampler.h"
#include "test.h"

#define KIB ((uint64_t)1024)
#define MIB (KIB * KIB)
#define TOLERANCE 0.01 /* the required accuracy of the mean estimate */

/* ---- sampling a stream --------------------------------------------------------------------- */

/* A fixed-size stream of n allocations, sampled as sampler.h documents: the countdown C
 * starts with a draw, each allocation subtracts its size, the allocation that takes C to
 * zero or below is sampled and a fresh C is drawn. With one size s the sampled allocation is
 * the ceil(C/s)-th, so the stream is walked sample by sample (identical results to the
 * allocation loop, which test_closed_form_matches_the_allocation_loop checks). Adds the
 * samples to `est` (and the seed spec's weight-R estimate to `naive`, if not NULL). */
static void sample_fixed(uint64_t seed, uint64_t rate, uint64_t size, uint64_t n,
                         struct memprof_est *est, double *naive)
{
    struct memprof_rng rng;
    memprof__rng_seed(&rng, seed);
    uint64_t left = n;
    for (;;) {
        uint64_t c = (uint64_t)memprof__sampler_draw(&rng, rate);
        uint64_t k = (c + size - 1) / size; /* allocations up to and including the sample */
        if (k > left)
            break;
        left -= k;
        memprof__est_add(est, size, rate);
        if (naive)
            *naive += (double)rate;
    }
}

/* The same, one allocation at a time through the real fast path; returns the samples. */
static uint64_t sample_fixed_by_allocation(uint64_t seed, uint64_t rate, uint64_t size,
                                           uint64_t n)
{
    struct memprof_rng rng;
    memprof__rng_seed(&rng, seed);
    memprof__tls.countdown = memprof__sampler_draw(&rng, rate);
    uint64_t k = 0;
    for (uint64_t i = 0; i < n; i++)
        if (memprof__sampler_charge(size)) {
            k++;
            memprof__tls.countdown = memprof__sampler_draw(&rng, rate);
        }
    memprof__tls.countdown = 0;
    return k;
}

/* ---- summarising many seeds ---------------------------------------------------------------- */

struct summary {
    uint64_t seeds;
    double sum, sum2;   /* of estimate / truth */
    double naive_sum;   /* of the weight-R estimate / truth */
    uint64_t covered;   /* seeds whose 95 % interval holds the truth */
    uint64_t samples;
};

static void summary_add(struct summary *s, const struct memprof_est *e, double truth,
                        double naive)
{
    double r = e->bytes / truth;
    s->seeds++;
    s->sum += r;
    s->sum2 += r * r;
    s->naive_sum += naive / truth;
    s->samples += e->samples;
    uint64_t lo, hi;
    memprof__est_interval(e->bytes, e->bytes_var, &lo, &hi);
    s->covered += (double)lo <= truth && truth <= (double)hi;
}

static double summary_mean(const struct summary *s)
{
    return s->sum / (double)s->seeds;
}

/* Standard error of the mean ratio, from the spread between seeds. */
static double summary_se(const struct summary *s)
{
    double m = summary_mean(s);
    double var = (s->sum2 - (double)s->seeds * m * m) / (double)(s->seeds - 1);
    return sqrt(var > 0 ? var : 0) / sqrt((double)s->seeds);
}

/* The mean estimate is within 1 % of the truth; the test is well designed (1 % is at least
 * five standard errors); the weight-R estimator would fail it when `naive_must_fail`. */
static void expect_unbiased(const char *what, const struct summary *s, bool naive_must_fail)
{
    double mean = summary_mean(s), se = summary_se(s);
    double naive = s->naive_sum / (double)s->seeds;
    printf("  %s: %" PRIu64 " seeds, %.0f samples/seed: mean estimate/truth %.5f, "
           "SE %.5f (%.1f SE off; 1%% = %.1f SE); weight-R estimator %.4f\n",
           what, s->seeds, (double)s->samples / (double)s->seeds, mean, se,
           se > 0 ? fabs(mean - 1) / se : 0.0, se > 0 ? TOLERANCE / se : INFINITY, naive);
    EXPECT(fabs(mean - 1) <= TOLERANCE);
    EXPECT(5 * se <= TOLERANCE);
    /* Also within 5 SE where that is tighter: a bias smaller than 1 % is still a bias. */
    EXPECT(fabs(mean - 1) <= 5 * se + 1e-9);
    if (naive_must_fail)
        EXPECT(fabs(naive - 1) > TOLERANCE);
}

/* About 95 % of the intervals cover the truth. With 1000 seeds the binomial sd is 0.7 %, so
 * [88 %, 99 %] is -10 to +5.8 sd: loose, yet an interval that is much too narrow or too wide
 * fails. */
static void expect_coverage(const char *what, const struct summary *s)
{
    double cov = (double)s->covered / (double)s->seeds;
    printf("  %s: %" PRIu64 " of %" PRIu64 " intervals cover the truth (%.1f %%)\n", what,
           s->covered, s->seeds, 100 * cov);
    EXPECT(s->seeds >= 1000);
    EXPECT(cov >= 0.88 && cov <= 0.99);
}

static uint64_t seed_of(uint64_t test, uint64_t i)
{
    return test * 1000003 + i * 7919 + 1;
}

/* ---- fixed-size streams --------------------------------------------------------------------- */

static void test_closed_form_matches_the_allocation_loop(void)
{
    const uint64_t rate = 512 * KIB;
    const uint64_t sizes[] = {64, 1000, 512 * KIB, 40 * 512 * KIB};
    for (int i = 0; i < 4; i++)
        for (uint64_t seed = 1; seed <= 3; seed++) {
            uint64_t n = sizes[i] < KIB ? 4000000 : 20000;
            struct memprof_est e = {0};
            sample_fixed(seed, rate, sizes[i], n, &e, NULL);
            EXPECT_EQ_U(sample_fixed_by_allocation(seed, rate, sizes[i], n), e.samples);
        }
}

static void test_small_blocks_are_estimated_without_bias(void)
{
    /* 64 B blocks at 512 KiB: p = 1.22e-4; 2^27 blocks (8 GiB) give ~16400 samples per seed,
     * a relative sd of 0.78 % per seed and 0.055 % over 200 seeds. */
    const uint64_t rate = 512 * KIB, size = 64, n = (uint64_t)1 << 27;
    struct summary s = {0};
    for (uint64_t i = 0; i < 200; i++) {
        struct memprof_est e = {0};
        double naive = 0;
        sample_fixed(seed_of(1, i), rate, size, n, &e, &naive);
        summary_add(&s, &e, (double)(n * size), naive);
    }
    /* For blocks this small s/p(s) = R + s/2 + ..., so weight R is nearly right as well. */
    expect_unbiased("64 B at 512 KiB", &s, false);
}

static void test_large_blocks_are_estimated_without_bias(void)
{
    /* Blocks of 32x the rate and more are sampled with probability 1 - e^-32 or higher and
     * must count at their size; weight R would make them 32x or more too small. */
    const uint64_t rate = 512 * KIB;
    const uint64_t sizes[] = {32 * rate, 32 * rate + 1, 100 * rate, 1024 * MIB};
    for (int c = 0; c < 4; c++) {
        struct summary s = {0};
        for (uint64_t i = 0; i < 100; i++) {
            struct memprof_est e = {0};
            double naive = 0;
            sample_fixed(seed_of(2, i), rate, sizes[c], 1000, &e, &naive);
            summary_add(&s, &e, (double)(1000 * sizes[c]), naive);
            EXPECT_EQ_U(e.samples, 1000); /* every one sampled */
        }
        char what[64];
        snprintf(what, sizeof what, "%.1fx the rate", (double)sizes[c] / (double)rate);
        /* No spread between seeds: the estimate is exact up to rounding. */
        EXPECT(fabs(summary_mean(&s) - 1) < 1e-9);
        EXPECT(fabs(s.naive_sum / (double)s.seeds - 1) > TOLERANCE);
        printf("  %s: mean estimate/truth %.12f, weight-R estimator %.4f\n", what,
               summary_mean(&s), s.naive_sum / (double)s.seeds);
    }
}

static void test_blocks_near_the_rate_are_estimated_without_bias(void)
{
    /* Where p(s) is far from both s/R and 1, the weights matter most. */
    const uint64_t rate = 64 * KIB;
    const uint64_t sizes[] = {rate / 2, rate, 2 * rate, 4 * rate};
    for (int c = 0; c < 4; c++) {
        struct summary s = {0};
        for (uint64_t i = 0; i < 200; i++) {
            struct memprof_est e = {0};
            double naive = 0;
            sample_fixed(seed_of(3, i) + (uint64_t)c, rate, sizes[c], 20000, &e, &naive);
            summary_add(&s, &e, (double)(20000 * sizes[c]), naive);
        }
        char what[64];
        snprintf(what, sizeof what, "%.1fx the rate", (double)sizes[c] / (double)rate);
        expect_unbiased(what, &s, true);
    }
}

static void test_small_block_intervals_cover_the_truth(void)
{
    /* ~2000 samples per seed: the normal approximation holds. */
    const uint64_t rate = 512 * KIB, size = 64;
    const uint64_t n = (uint64_t)(2000.0 / memprof__est_prob(size, rate));
    struct summary s = {0};
    for (uint64_t i = 0; i < 1000; i++) {
        struct memprof_est e = {0};
        sample_fixed(seed_of(4, i), rate, size, n, &e, NULL);
        summary_add(&s, &e, (double)(n * size), 0);
    }
    expect_coverage("64 B at 512 KiB", &s);
}

static void test_near_rate_intervals_cover_the_truth(void)
{
    const uint64_t rate = 64 * KIB, size = rate;
    struct summary s = {0};
    for (uint64_t i = 0; i < 1000; i++) {
        struct memprof_est e = {0};
        sample_fixed(seed_of(5, i), rate, size, 3000, &e, NULL);
        summary_add(&s, &e, (double)(3000 * size), 0);
    }
    expect_coverage("64 KiB at 64 KiB", &s);
}

/* ---- a mixed, heavy-tailed stream ------------------------------------------------------------ */

enum { CLASSES = 4 };
static const char *const class_names[CLASSES] = {"8-256 B", "256 B-64 KiB", "64 KiB-4 MiB",
                                                 "Pareto tail >= 4 MiB"};

/* 60 % small (uniform 8..256 B), 30 % medium and 9 % large (log-uniform 256 B..64 KiB and
 * 64 KiB..4 MiB), 1 % a Pareto tail (alpha 1.5 from 4 MiB, infinite variance, capped at
 * 1 GiB). The tail holds most of the bytes, the small blocks most of the allocations. */
static uint64_t mixed_size(uint64_t *data, int *cls)
{
    double u = test_rand_unit(data);
    if (u < 0.60) {
        *cls = 0;
        return 8 + test_rand_below(data, 249);
    }
    if (u < 0.90) {
        *cls = 1;
        return (uint64_t)(256.0 * exp2(8.0 * test_rand_unit(data)));
    }
    if (u < 0.99) {
        *cls = 2;
        return (uint64_t)(65536.0 * exp2(6.0 * test_rand_unit(data)));
    }
    *cls = 3;
    double x = 4.0 * (double)MIB * pow(1.0 - test_rand_unit(data), -1.0 / 1.5);
    return x >= (double)(1024 * MIB) ? 1024 * MIB : (uint64_t)x;
}

enum { MIXED_SEEDS = 1000, MIXED_ALLOCS = 50000 };

struct mixed_results {
    bool done;
    struct summary total;
    struct summary cls[CLASSES];   /* bytes per size class (a stand-in for call sites) */
    struct summary count;          /* number of allocations (e.bytes holds the count) */
};

/* One pass over all seeds, shared by the mixed-stream tests. */
static const struct mixed_results *mixed(void)
{
    static struct mixed_results r;
    if (r.done)
        return &r;
    const uint64_t rate = 512 * KIB;
    for (uint64_t i = 0; i < MIXED_SEEDS; i++) {
        struct memprof_rng rng;
        memprof__rng_seed(&rng, seed_of(6, i));
        uint64_t data = seed_of(7, i);
        struct memprof_est total = {0}, cls[CLASSES] = {{0}};
        double truth = 0, cls_truth[CLASSES] = {0}, naive = 0;
        memprof__tls.countdown = memprof__sampler_draw(&rng, rate);
        for (int a = 0; a < MIXED_ALLOCS; a++) {
            int c;
            uint64_t size = mixed_size(&data, &c);
            truth += (double)size;
            cls_truth[c] += (double)size;
            if (memprof__sampler_charge(size)) {
                memprof__tls.countdown = memprof__sampler_draw(&rng, rate);
                memprof__est_add(&total, size, rate);
                memprof__est_add(&cls[c], size, rate);
                naive += (double)rate;
            }
        }
        summary_add(&r.total, &total, truth, naive);
        for (int c = 0; c < CLASSES; c++)
            summary_add(&r.cls[c], &cls[c], cls_truth[c], 0);
        struct memprof_est count = total;
        count.bytes = total.count;
        count.bytes_var = total.count_var;
        summary_add(&r.count, &count, MIXED_ALLOCS, 0);
    }
    memprof__tls.countdown = 0;
    r.done = true;
    return &r;
}

static void test_mixed_heavy_tailed_stream_is_estimated_without_bias(void)
{
    expect_unbiased("mixed stream, total bytes", &mixed()->total, true);
}

static void test_mixed_stream_size_classes_are_estimated_without_bias(void)
{
    /* Per class the small blocks carry few samples, so the bound there is 5 SE rather than
     * 1 %; still a check that no part of the distribution is weighted wrongly. */
    const struct mixed_results *r = mixed();
    for (int c = 0; c < CLASSES; c++) {
        const struct summary *s = &r->cls[c];
        double mean = summary_mean(s), se = summary_se(s);
        printf("  %s: mean estimate/truth %.5f, SE %.5f\n", class_names[c], mean, se);
        EXPECT(fabs(mean - 1) <= 5 * se + 1e-9);
        EXPECT(se < 0.02);
    }
    double mean = summary_mean(&r->count), se = summary_se(&r->count);
    printf("  allocation count: mean estimate/truth %.5f, SE %.5f\n", mean, se);
    EXPECT(fabs(mean - 1) <= 5 * se);
    EXPECT(se < 0.01);
}

static void test_mixed_stream_intervals_cover_the_truth(void)
{
    expect_coverage("mixed stream, total bytes", &mixed()->total);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_closed_form_matches_the_allocation_loop),
        TEST_CASE(test_small_blocks_are_estimated_without_bias),
        TEST_CASE(test_large_blocks_are_estimated_without_bias),
        TEST_CASE(test_blocks_near_the_rate_are_estimated_without_bias),
        TEST_CASE(test_small_block_intervals_cover_the_truth),
        TEST_CASE(test_near_rate_intervals_cover_the_truth),
        TEST_CASE(test_mixed_heavy_tailed_stream_is_estimated_without_bias),
        TEST_CASE(test_mixed_stream_size_classes_are_estimated_without_bias),
        TEST_CASE(test_mixed_stream_intervals_cover_the_truth),
    };
    return TEST_MAIN(cases, false);
}
