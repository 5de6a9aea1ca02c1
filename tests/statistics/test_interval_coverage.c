/* SPDX-License-Identifier: MIT */
/*
 * Coverage of the per-site 95 % intervals (src/export/interval.h) at small sample counts,
 * by direct simulation: no engine, just what the engine does to a site. A site is a set of
 * live allocations with a known total (the truth); each allocation of s bytes is sampled
 * independently with probability p(s) = 1 - exp(-s/R) (the sampler's exact law: its
 * countdown is memoryless), and the samples are summed with memprof__est_add() as the
 * snapshot does. Sites have 1, 3, 5, 10, 20 or 50 expected samples, in five size mixes: all
 * far below R; the same plus a few blocks far above R; sizes around R; a wide log-uniform
 * spread from 16 B to 64 R; all far above R. Each group runs REPS seeded repetitions (a new
 * site each time, so coverage is averaged over the mix's sites as well as over sampling).
 *
 * Checked: the interval the API reports (memprof__interval_at_rate) covers the truth in at
 * least 93 % of the sites that have a sample (the ones a profile shows), and of all sites,
 * where a site without samples gets [0, ln(40) R]; never "low information" for blocks far
 * above R. A correct 95 % interval falls under 93 % by chance with probability ~1e-5 per
 * group at REPS = 4000 (binomial sd 0.34 %). The plain normal interval est +/- 1.96 sd, and
 * the rate-free n_eff interval (memprof__interval), are measured alongside; the normal one
 * must fail the same bar for sites of 3 and 5 expected small-block samples (it covers
 * 84.7 % and 89.1 % of them), so this test can fail. Prints the table of
 * doc/statistics.md, "Intervals".
 */
#include <math.h>

#include "common/estimate.h"
#include "export/interval.h"
#include "test.h"

#define RATE     ((uint64_t)4096)
#define REPS     4000
#define REQUIRED 0.93

enum mix { SMALL, SMALL_LARGE, NEAR_RATE, WIDE, LARGE, NMIX };
static const char *const mix_name[NMIX] = {
    "small (16 B-R/8)", "small + large (+ 32-256 R)", "near R (R/4-4 R)", "wide (16 B-64 R)",
    "large (8-128 R)",
};
static const double expected_counts[] = {1, 3, 5, 10, 20, 50};
#define NGROUPS (sizeof expected_counts / sizeof expected_counts[0])

enum method { OURS, RATE_FREE, NORMAL, NMETHOD };

struct tally {
    uint64_t sites, reported, low_info;
    uint64_t covered[NMETHOD];          /* of all sites */
    uint64_t covered_reported[NMETHOD]; /* of the sites with a sample */
    double width[NMETHOD];              /* sum of (hi - lo) / truth over reported sites */
};

static double log_uniform(uint64_t *rng, double lo, double hi)
{
    return lo * exp(log(hi / lo) * test_rand_unit(rng));
}

static double prob(uint64_t size)
{
    return memprof__est_prob(size, RATE);
}

/* Draws blocks of the mix's small-or-only component until their expected samples reach k. */
static void draw_until(uint64_t *rng, double lo, double hi, double k, uint64_t *sizes, size_t *n,
                       double *expected)
{
    while (*expected < k) {
        uint64_t s = (uint64_t)log_uniform(rng, lo, hi);
        sizes[(*n)++] = s;
        *expected += prob(s);
    }
}

/* One site of the mix with about k expected samples (k to k + the last block's p). In the
 * small + large mix, k counts the small blocks' samples, which carry all the uncertainty;
 * 1 + k/5 blocks of 32-256 R come on top (each sampled, exactly). */
static size_t make_site(enum mix m, double k, uint64_t *rng, uint64_t *sizes)
{
    const double r = (double)RATE;
    size_t n = 0;
    double expected = 0;
    switch (m) {
    case SMALL:
        draw_until(rng, 16, r / 8, k, sizes, &n, &expected);
        break;
    case SMALL_LARGE:
        draw_until(rng, 16, r / 8, k, sizes, &n, &expected);
        for (int i = 0; i < 1 + (int)k / 5; i++)
            sizes[n++] = (uint64_t)log_uniform(rng, 32 * r, 256 * r);
        break;
    case NEAR_RATE:
        draw_until(rng, r / 4, 4 * r, k, sizes, &n, &expected);
        break;
    case WIDE:
        draw_until(rng, 16, 64 * r, k, sizes, &n, &expected);
        break;
    case LARGE:
        draw_until(rng, 8 * r, 128 * r, k, sizes, &n, &expected);
        break;
    default:
        break;
    }
    return n;
}

static void count(struct tally *t, enum method m, uint64_t lo, uint64_t hi, double truth,
                  bool reported)
{
    bool in = (double)lo <= truth && truth <= (double)hi;
    t->covered[m] += in;
    if (reported) {
        t->covered_reported[m] += in;
        t->width[m] += ((double)hi - (double)lo) / truth;
    }
}

static void run_group(enum mix m, double k, struct tally *t)
{
    /* Enough room for the largest site: 50 samples of 16 B blocks at p = 0.0039 each. */
    static uint64_t sizes[20000];
    uint64_t rng = 0x1e7a1 + 1000 * (uint64_t)m + (uint64_t)k; /* fixed: reproducible */
    for (int rep = 0; rep < REPS; rep++) {
        size_t n = make_site(m, k, &rng, sizes);
        struct memprof_est e = {0};
        double truth = 0;
        for (size_t i = 0; i < n; i++) {
            truth += (double)sizes[i];
            if (test_rand_unit(&rng) < prob(sizes[i]))
                memprof__est_add(&e, sizes[i], RATE);
        }
        bool reported = e.samples > 0;
        t->sites++;
        t->reported += reported;
        struct memprof_interval iv;
        memprof__interval_at_rate(e.bytes, e.bytes_var, e.samples, RATE, &iv);
        count(t, OURS, iv.lo, iv.hi, truth, reported);
        t->low_info += reported && iv.low_information;
        memprof__interval(e.bytes, e.bytes_var, e.samples, &iv);
        count(t, RATE_FREE, iv.lo, iv.hi, truth, reported);
        uint64_t lo, hi;
        memprof__est_interval(e.bytes, e.bytes_var, &lo, &hi);
        count(t, NORMAL, lo, hi, truth, reported);
    }
}

static double pct(uint64_t a, uint64_t b)
{
    return b ? 100.0 * (double)a / (double)b : 100.0;
}

static struct tally results[NMIX][NGROUPS];

static void run_mix(enum mix m)
{
    printf("  %-26s | k  | sites w/ sample | API interval: w/ sample, all sites | rate-free "
           "| normal | mean width/truth (API, normal) | low information\n",
           mix_name[m]);
    for (size_t g = 0; g < NGROUPS; g++) {
        struct tally *t = &results[m][g];
        *t = (struct tally){0};
        run_group(m, expected_counts[g], t);
        printf("  %-26s | %2.0f | %5.1f %% | %5.2f %%, %5.2f %% | %5.2f %% | %5.2f %% | %.2f, %.2f "
               "| %5.1f %%\n",
               "", expected_counts[g], pct(t->reported, t->sites),
               pct(t->covered_reported[OURS], t->reported), pct(t->covered[OURS], t->sites),
               pct(t->covered_reported[RATE_FREE], t->reported),
               pct(t->covered_reported[NORMAL], t->reported),
               t->width[OURS] / (double)(t->reported ? t->reported : 1),
               t->width[NORMAL] / (double)(t->reported ? t->reported : 1),
               pct(t->low_info, t->reported));
        EXPECT(t->covered_reported[OURS] >= REQUIRED * (double)t->reported);
        EXPECT(t->covered[OURS] >= REQUIRED * (double)t->sites);
        if (m == LARGE)
            EXPECT_EQ_U(t->low_info, 0);
    }
}

static void test_small_blocks(void)
{
    run_mix(SMALL);
    /* The bar can be failed: the normal interval covers 84.7 % of the sites of 3 expected
     * samples and 89.1 % of those of 5 (measured with these seeds; binomial sd 0.5-0.6 %). */
    EXPECT(results[SMALL][1].covered_reported[NORMAL] <
           REQUIRED * (double)results[SMALL][1].reported);
    EXPECT(results[SMALL][2].covered_reported[NORMAL] <
           REQUIRED * (double)results[SMALL][2].reported);
}

static void test_small_and_large_blocks(void)
{
    run_mix(SMALL_LARGE);
    /* What the rate buys: without it, n_eff = est^2 / var sees a precise estimate (the big
     * blocks) and gives the normal interval's width, which misses the few small samples'
     * Poisson spread (80.8 % of the sites of 3 expected small samples covered). */
    EXPECT(results[SMALL_LARGE][1].covered_reported[RATE_FREE] <
           REQUIRED * (double)results[SMALL_LARGE][1].reported);
}

static void test_blocks_near_the_rate(void)
{
    run_mix(NEAR_RATE);
}

static void test_wide_mix(void)
{
    run_mix(WIDE);
}

static void test_large_blocks(void)
{
    run_mix(LARGE);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_small_blocks),         TEST_CASE(test_small_and_large_blocks),
        TEST_CASE(test_blocks_near_the_rate), TEST_CASE(test_wide_mix),
        TEST_CASE(test_large_blocks),
    };
    return TEST_MAIN(cases, false);
}
