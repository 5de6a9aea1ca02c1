/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the per-thread Poisson sampler (src/core/sampler.h): the countdown draws
 * are >= 1, have the exact mean and tail of floor(Exp(R)) + 1, are reproducible for a seed
 * and differ between seeds; and the countdown logic documented in sampler.h, driven through
 * the real inline fast path memprof__sampler_charge(), samples an allocation of s bytes with
 * probability 1 - exp(-s/R), independently of the sizes around it. Statistical checks use
 * fixed seeds and 5-sigma bounds computed from the exact distributions.
 */
#include <math.h>

#include "core/sampler.h"
#include "test.h"

/* floor(Exp(R)) is geometric on {0, 1, ...} with ratio q = exp(-1/R): mean q/(1-q),
 * variance q/(1-q)^2. A draw adds 1. */
static double draw_mean(uint64_t rate)
{
    double q = exp(-1.0 / (double)rate), p = -expm1(-1.0 / (double)rate);
    return q / p + 1.0;
}

static double draw_sd(uint64_t rate)
{
    double q = exp(-1.0 / (double)rate), p = -expm1(-1.0 / (double)rate);
    return sqrt(q) / p;
}

static void test_draw_mean_matches_rate(void)
{
    const uint64_t rates[] = {1, 7, 4096, 524288, (uint64_t)1 << 40};
    const int n = 1000000;
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        struct memprof_rng rng;
        memprof__rng_seed(&rng, 1000 + r);
        double sum = 0;
        for (int i = 0; i < n; i++)
            sum += (double)memprof__sampler_draw(&rng, rates[r]);
        double mean = sum / n, bound = 5.0 * draw_sd(rates[r]) / sqrt((double)n);
        printf("  rate %" PRIu64 ": mean %.3f, expected %.3f +/- %.3f\n", rates[r], mean,
               draw_mean(rates[r]), bound);
        EXPECT(fabs(mean - draw_mean(rates[r])) <= bound);
        /* The exact mean is R + 1/2 + O(1/R): "about the rate". */
        if (rates[r] >= 4096)
            EXPECT(fabs(mean - (double)rates[r]) <= bound + 1.0);
    }
}

static void test_draws_are_at_least_one(void)
{
    const uint64_t rates[] = {0, 1, 2, 3, 1000, (uint64_t)1 << 40};
    for (size_t r = 0; r < sizeof rates / sizeof rates[0]; r++) {
        struct memprof_rng rng;
        memprof__rng_seed(&rng, 77 + r);
        int64_t min = INT64_MAX;
        for (int i = 0; i < 200000; i++) {
            int64_t d = memprof__sampler_draw(&rng, rates[r]);
            if (d < min)
                min = d;
        }
        EXPECT(min >= 1);
        /* Small rates reach the minimum: P(draw == 1) = 1 - exp(-1/R). */
        if (rates[r] <= 3)
            EXPECT_EQ(min, 1);
    }
}

static void test_draw_tail_is_exponential(void)
{
    const uint64_t rate = 1000;
    const int n = 1000000;
    const uint64_t ks[] = {rate / 2, rate, 2 * rate, 4 * rate};
    uint64_t above[4] = {0};
    struct memprof_rng rng;
    memprof__rng_seed(&rng, 4242);
    for (int i = 0; i < n; i++) {
        int64_t d = memprof__sampler_draw(&rng, rate);
        for (int j = 0; j < 4; j++)
            above[j] += (uint64_t)d > ks[j];
    }
    for (int j = 0; j < 4; j++) {
        /* P(floor(X) + 1 > k) = P(X >= k) = exp(-k/R). */
        double p = exp(-(double)ks[j] / (double)rate);
        double sd = sqrt(n * p * (1 - p));
        printf("  P(draw > %" PRIu64 "): %.5f, expected %.5f\n", ks[j], (double)above[j] / n, p);
        EXPECT(fabs((double)above[j] - n * p) <= 5 * sd);
    }
}

static void test_fixed_seed_is_reproducible(void)
{
    struct memprof_rng a, b;
    memprof__rng_seed(&a, 12345);
    memprof__rng_seed(&b, 12345);
    for (int i = 0; i < 10000; i++) {
        CHECK_EQ(memprof__sampler_draw(&a, 524288), memprof__sampler_draw(&b, 524288));
        CHECK_EQ_U(memprof__rng_next(&a), memprof__rng_next(&b));
    }
}

static void test_different_seeds_differ(void)
{
    const uint64_t seeds[][2] = {{1, 2}, {0, 1}, {12345, 12346}, {0, UINT64_MAX}};
    for (size_t s = 0; s < sizeof seeds / sizeof seeds[0]; s++) {
        struct memprof_rng a, b;
        memprof__rng_seed(&a, seeds[s][0]);
        memprof__rng_seed(&b, seeds[s][1]);
        int equal_words = 0, equal_draws = 0;
        for (int i = 0; i < 1000; i++) {
            equal_words += memprof__rng_next(&a) == memprof__rng_next(&b);
            equal_draws += memprof__sampler_draw(&a, (uint64_t)1 << 30) ==
                           memprof__sampler_draw(&b, (uint64_t)1 << 30);
        }
        EXPECT_EQ(equal_words, 0);
        EXPECT(equal_draws <= 1);
    }
}

static void test_zero_seed_is_not_degenerate(void)
{
    struct memprof_rng rng;
    memprof__rng_seed(&rng, 0);
    uint64_t first = memprof__rng_next(&rng), ones = 0;
    bool changed = false;
    for (int i = 0; i < 1000; i++) {
        uint64_t v = memprof__rng_next(&rng);
        changed |= v != first;
        ones += (uint64_t)__builtin_popcountll(v);
    }
    EXPECT(changed);
    /* 64000 fair bits: mean 32000, sd 126. */
    EXPECT(ones > 32000 - 5 * 127 && ones < 32000 + 5 * 127);
}

static void test_charge_samples_when_the_sample_point_falls_in_the_allocation(void)
{
    memprof__tls.countdown = 100;
    EXPECT(!memprof__sampler_charge(99));
    EXPECT_EQ(memprof__tls.countdown, 1);
    EXPECT(!memprof__sampler_charge(0));
    EXPECT_EQ(memprof__tls.countdown, 1);
    EXPECT(memprof__sampler_charge(1));
    memprof__tls.countdown = 5;
    EXPECT(memprof__sampler_charge(6));
    memprof__tls.countdown = 0;
}

static void test_charge_leaves_the_countdown_to_the_cold_path_when_sampling(void)
{
    /* The cold path draws a fresh countdown; charging the sampled size first would only
     * be overwritten (and could go negative, which the fast path does not allow). */
    memprof__tls.countdown = 5;
    EXPECT(memprof__sampler_charge(6));
    EXPECT_EQ(memprof__tls.countdown, 5);
    memprof__tls.countdown = 0;
}

static void test_charge_sends_an_undrawn_countdown_to_the_cold_path(void)
{
    memprof__tls.countdown = 0;
    EXPECT(memprof__sampler_charge(0));
    EXPECT(memprof__sampler_charge(1));
}

static void test_charge_samples_huge_sizes(void)
{
    const size_t sizes[] = {SIZE_MAX, (size_t)INT64_MAX, (size_t)INT64_MAX + 1};
    for (size_t i = 0; i < 3; i++) {
        memprof__tls.countdown = 1000;
        EXPECT(memprof__sampler_charge(sizes[i]));
    }
    /* The largest countdown still lets a smaller huge size through unsampled. */
    memprof__tls.countdown = INT64_MAX;
    EXPECT(!memprof__sampler_charge((size_t)INT64_MAX - 1));
    EXPECT_EQ(memprof__tls.countdown, 1);
    memprof__tls.countdown = 0;
}

/* The sampler.h countdown logic: the thread's countdown starts with a draw, each allocation
 * is charged through the real fast path, and a sampled allocation draws a new countdown. */
struct sim {
    struct memprof_rng rng;
    uint64_t rate;
};

static void sim_start(struct sim *s, uint64_t seed, uint64_t rate)
{
    memprof__rng_seed(&s->rng, seed);
    s->rate = rate;
    memprof__tls.countdown = memprof__sampler_draw(&s->rng, rate);
}

static bool sim_alloc(struct sim *s, size_t size)
{
    if (!memprof__sampler_charge(size))
        return false;
    memprof__tls.countdown = memprof__sampler_draw(&s->rng, s->rate);
    return true;
}

static bool within_binomial(uint64_t k, uint64_t n, double p, const char *what, uint64_t size)
{
    double mean = (double)n * p, sd = sqrt((double)n * p * (1 - p));
    printf("  %s size %" PRIu64 ": %" PRIu64 "/%" PRIu64 " sampled, expected %.1f +/- %.1f\n", what,
           size, k, n, mean, 5 * sd);
    return fabs((double)k - mean) <= 5 * sd + 1.0;
}

static void test_sampling_probability_of_fixed_size(void)
{
    const uint64_t rate = 4096;
    const uint64_t sizes[] = {1, 16, 64, 1000, 4096, 10000, 32 * 4096};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        double p = -expm1(-(double)sizes[i] / (double)rate);
        /* Enough allocations for about 4000 expected samples (at least 100000). */
        uint64_t n = (uint64_t)(4000.0 / p);
        if (n < 100000)
            n = 100000;
        struct sim s;
        sim_start(&s, 500 + i, rate);
        uint64_t k = 0;
        for (uint64_t j = 0; j < n; j++)
            k += sim_alloc(&s, sizes[i]);
        EXPECT(within_binomial(k, n, p, "fixed", sizes[i]));
    }
    memprof__tls.countdown = 0;
}

static void test_sampling_probability_with_interleaved_sizes(void)
{
    /* Memorylessness: the probability for one allocation does not depend on its
     * neighbours' sizes. */
    const uint64_t rate = 65536;
    const uint64_t sizes[] = {8, 200, 3000, 40000, 300000};
    uint64_t n[5] = {0}, k[5] = {0};
    uint64_t data = 99;
    struct sim s;
    sim_start(&s, 31337, rate);
    for (int j = 0; j < 4000000; j++) {
        unsigned c = (unsigned)test_rand_below(&data, 5);
        n[c]++;
        k[c] += sim_alloc(&s, sizes[c]);
    }
    for (int c = 0; c < 5; c++)
        EXPECT(within_binomial(k[c], n[c], -expm1(-(double)sizes[c] / (double)rate), "mixed",
                               sizes[c]));
    memprof__tls.countdown = 0;
}

static void test_samples_are_independent(void)
{
    /* P(sampled | the previous allocation was sampled) = p: a fresh countdown is drawn after
     * each sample. */
    const uint64_t rate = 4096, size = 2048;
    double p = -expm1(-(double)size / (double)rate);
    struct sim s;
    sim_start(&s, 2718, rate);
    uint64_t after_sample = 0, both = 0;
    bool prev = false;
    for (int j = 0; j < 1000000; j++) {
        bool cur = sim_alloc(&s, size);
        if (prev) {
            after_sample++;
            both += cur;
        }
        prev = cur;
    }
    EXPECT(within_binomial(both, after_sample, p, "after a sample", size));
    memprof__tls.countdown = 0;
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_draw_mean_matches_rate),
        TEST_CASE(test_draws_are_at_least_one),
        TEST_CASE(test_draw_tail_is_exponential),
        TEST_CASE(test_fixed_seed_is_reproducible),
        TEST_CASE(test_different_seeds_differ),
        TEST_CASE(test_zero_seed_is_not_degenerate),
        TEST_CASE(test_charge_samples_when_the_sample_point_falls_in_the_allocation),
        TEST_CASE(test_charge_leaves_the_countdown_to_the_cold_path_when_sampling),
        TEST_CASE(test_charge_sends_an_undrawn_countdown_to_the_cold_path),
        TEST_CASE(test_charge_samples_huge_sizes),
        TEST_CASE(test_sampling_probability_of_fixed_size),
        TEST_CASE(test_sampling_probability_with_interleaved_sizes),
        TEST_CASE(test_samples_are_independent),
    };
    return TEST_MAIN(cases, false);
}
