/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the small-sample intervals (src/export/interval.h): the incomplete gamma
 * function against closed forms in both of its expansions; the intervals of n samples that
 * each weigh R against published exact Poisson (Garwood) limits for n = 0, 1, 3, 10, 100 and
 * against Poisson tail sums computed here independently of the gamma code; exactness when the
 * variance is 0; estimates without samples; monotonicity in the count, the estimate and the
 * variance; agreement with the normal interval at large counts and continuity where the
 * quantile switches to its asymptotic form; the low-information threshold; and the
 * rate-aware split of big blocks from small ones. The coverage of the intervals is measured in
 * tests/statistics/test_interval_coverage.c.
 */
#include <math.h>

#include "export/interval.h"
#include "test.h"

#define R    ((uint64_t)1 << 20) /* large, so whole-byte rounding is far below the tolerances */
#define Z    1.959963984540054
#define LN40 3.6888794541139363

/* The interval of n samples that each weigh R exactly (blocks far below R): est = n R,
 * var = n R^2, returned in units of R. */
static void poisson_interval(double n, uint64_t rate, double *lo, double *hi, int *low)
{
    struct memprof_interval iv;
    double r = (double)R;
    if (rate)
        memprof__interval_at_rate(n * r, n * r * r, (uint64_t)ceil(n), rate, &iv);
    else
        memprof__interval(n * r, n * r * r, (uint64_t)ceil(n), &iv);
    *lo = (double)iv.lo / r;
    *hi = (double)iv.hi / r;
    if (low)
        *low = iv.low_information;
}

static bool close_to(double a, double b, double rel, double abs_tol)
{
    return fabs(a - b) <= abs_tol + rel * fabs(b);
}

static void test_gamma_p_matches_closed_forms(void)
{
    /* Shape 1 is the exponential, shape 1/2 the square of a normal (erf), integer shapes the
     * Poisson tail; x on both sides of a + 1 exercises the series and the continued fraction. */
    const double xs[] = {1e-8, 0.01, 0.3, 1.0, 1.9, 2.1, 5.0, 20.0, 80.0};
    for (size_t i = 0; i < sizeof xs / sizeof xs[0]; i++) {
        double x = xs[i];
        EXPECT(close_to(memprof__gamma_p(1.0, x), -expm1(-x), 1e-13, 1e-300));
        EXPECT(close_to(memprof__gamma_p(0.5, x), erf(sqrt(x)), 1e-13, 1e-300));
        for (int a = 2; a <= 30; a += 7) {
            /* P(a, x) = P(Poisson(x) >= a) = 1 - sum_{k < a} e^-x x^k / k! */
            double term = exp(-x), sum = 0;
            for (int k = 0; k < a; k++) {
                sum += term;
                term *= x / (k + 1);
            }
            EXPECT(close_to(memprof__gamma_p(a, x), 1.0 - sum, 1e-11, 1e-15));
        }
    }
    EXPECT(memprof__gamma_p(3.0, 0.0) == 0.0);
    EXPECT(memprof__gamma_p(0.0, 1.0) == 1.0);
    EXPECT(memprof__gamma_p(3.0, INFINITY) == 1.0);
}

static void test_gamma_quantile_inverts_gamma_p(void)
{
    const double shapes[] = {1e-3, 0.05, 0.5, 1.0, 1.5, 3.0, 10.0, 77.7, 500.0, 1999.0};
    const double ps[] = {1e-6, 0.025, 0.2, 0.5, 0.8, 0.975, 1 - 1e-6};
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        for (size_t j = 0; j < sizeof ps / sizeof ps[0]; j++) {
            double x = memprof__gamma_quantile(shapes[i], ps[j]);
            if (x < 1e-300)
                continue; /* below what a double holds: P is then tested at its bound */
            double p = memprof__gamma_p(shapes[i], x);
            if (!EXPECT(close_to(p, ps[j], 1e-10, 1e-13)))
                fprintf(stderr, "  shape %g, p %g: x %g, P(x) %.15g\n", shapes[i], ps[j], x, p);
        }
    EXPECT(memprof__gamma_quantile(0.0, 0.975) == 0.0);
    /* Tiny shapes put (almost) all mass at 0; the quantile underflows instead of looping. */
    EXPECT(memprof__gamma_quantile(1e-300, 0.975) == 0.0);
    EXPECT(memprof__gamma_quantile(1e-12, 0.025) == 0.0);
}

/* Published exact Poisson 95 % limits (Garwood 1936; the same values in e.g. Ulm, Am. J.
 * Epidemiol. 131 (1990) 373, and every table of chi-square quantiles): lower
 * 1/2 chi2(0.025; 2n), upper 1/2 chi2(0.975; 2n + 2), to the digits published. */
static void test_garwood_published_values(void)
{
    static const struct {
        double n, lo, hi;
    } table[] = {
        {1, 0.0253, 5.5716}, {3, 0.6187, 8.7673}, {10, 4.7954, 18.3904}, {100, 81.3640, 121.6268}};
    for (size_t i = 0; i < sizeof table / sizeof table[0]; i++) {
        double lo, hi;
        poisson_interval(table[i].n, 0, &lo, &hi, NULL);
        printf("  n = %3.0f: [%.4f, %.4f] (published [%.4f, %.4f])\n", table[i].n, lo, hi,
               table[i].lo, table[i].hi);
        EXPECT(fabs(lo - table[i].lo) <= 0.00006);
        EXPECT(fabs(hi - table[i].hi) <= 0.00006);
        /* With the rate (every sample weighs R: nothing certain) the same interval. */
        double lo_r, hi_r;
        poisson_interval(table[i].n, R, &lo_r, &hi_r, NULL);
        EXPECT(fabs(lo_r - lo) <= 2.0 / (double)R && fabs(hi_r - hi) <= 2.0 / (double)R);
    }
    /* n = 0: published [0, 3.6889] = [0, ln 40]. Without samples, the rate gives the bound. */
    struct memprof_interval iv;
    memprof__interval_at_rate(0, 0, 0, R, &iv);
    EXPECT_EQ_U(iv.lo, 0);
    EXPECT(fabs((double)iv.hi / (double)R - 3.6889) <= 0.00006);
    EXPECT(fabs(memprof__gamma_quantile(1.0, 0.975) - LN40) <= 1e-12);
}

/* For integer n, the Garwood limits are the means at which n is exactly on the 2.5 % tail:
 * P(N >= n | lo) = 0.025 and P(N <= n | hi) = 0.025. The tails are summed here from the
 * Poisson probabilities, not through the gamma function the code uses. */
static double poisson_cdf(int n, double mu)
{
    double term = exp(-mu), sum = 0;
    for (int k = 0; k <= n; k++) {
        sum += term;
        term *= mu / (k + 1);
    }
    return sum;
}

static void test_garwood_limits_are_poisson_tails(void)
{
    for (int n = 1; n <= 200; n += (n < 20 ? 1 : 17)) {
        double lo = memprof__gamma_quantile(n, 0.025), hi = memprof__gamma_quantile(n + 1, 0.975);
        double upper_tail = 1.0 - poisson_cdf(n - 1, lo); /* P(N >= n | mu = lo) */
        double lower_tail = poisson_cdf(n, hi);           /* P(N <= n | mu = hi) */
        if (!EXPECT(fabs(upper_tail - 0.025) < 1e-9 && fabs(lower_tail - 0.025) < 1e-9))
            fprintf(stderr, "  n %d: tails %.12f %.12f\n", n, upper_tail, lower_tail);
    }
}

static void test_zero_variance_is_exact(void)
{
    /* A block of 64 R: p = 1 - e^-64 rounds to 1, so the estimate's variance is 0. */
    double s = 64.0 * (double)R, p = -expm1(-64.0), var = s * s * (1 - p) / (p * p);
    CHECK(var == 0.0);
    struct memprof_interval iv;
    memprof__interval(s / p, var, 1, &iv);
    EXPECT_EQ_U(iv.lo, 64 * R);
    EXPECT_EQ_U(iv.hi, 64 * R);
    EXPECT_EQ(iv.low_information, 0);
    EXPECT(isinf(iv.effective_samples));
    /* With the rate the lower end stays exact; the upper one allows ln(40) R bytes of this
     * site that no sample saw (small blocks next to the big one could hide there). */
    memprof__interval_at_rate(s / p, var, 1, R, &iv);
    EXPECT_EQ_U(iv.lo, 64 * R);
    EXPECT_EQ_U(iv.hi, 64 * R + (uint64_t)(LN40 * (double)R + 0.5));
    EXPECT_EQ(iv.low_information, 0);
    EXPECT(isinf(iv.effective_samples));
    /* A negative or NaN variance (never produced, but a file could say so) counts as 0. */
    memprof__interval(1000, -1, 1, &iv);
    EXPECT(iv.lo == 1000 && iv.hi == 1000 && !iv.low_information);
    memprof__interval(1000, NAN, 1, &iv);
    EXPECT(iv.lo == 1000 && iv.hi == 1000 && !iv.low_information);
    /* An infinite variance says nothing; an infinite estimate saturates. */
    memprof__interval_at_rate(1000, INFINITY, 1, R, &iv);
    EXPECT(iv.lo == 0 && iv.hi == UINT64_MAX && iv.low_information);
    memprof__interval_at_rate(INFINITY, 1e6, 1, R, &iv);
    EXPECT(iv.lo == UINT64_MAX && iv.hi == UINT64_MAX);
    memprof__interval(INFINITY, 1e6, 1, &iv);
    EXPECT(iv.lo == UINT64_MAX && iv.hi == UINT64_MAX);
}

static void test_no_samples(void)
{
    struct memprof_interval iv = {.lo = 1, .hi = 1};
    memprof__interval(0, 0, 0, &iv);
    EXPECT(iv.lo == 0 && iv.hi == 0 && iv.low_information && iv.effective_samples == 0);
    memprof__interval(0, 5, 3, &iv); /* est 0 with samples: nothing to scale */
    EXPECT(iv.lo == 0 && iv.hi == 0 && iv.low_information);
    memprof__interval(100, 5, 0, &iv);
    EXPECT(iv.lo == 0 && iv.hi == 0 && iv.low_information);
    memprof__interval_at_rate(0, 0, 0, 4096, &iv);
    EXPECT(iv.lo == 0 && iv.hi == 15110 && iv.low_information); /* ln(40) * 4096 = 15109.6 */
    memprof__interval_at_rate(0, 0, 0, 0, &iv);                 /* rate 0: unknown */
    EXPECT(iv.lo == 0 && iv.hi == 0);
}

static void test_monotone(void)
{
    /* In the count (fractional counts too: n_eff is rarely whole). */
    double prev_lo = -1, prev_hi = -1;
    for (double n = 0.05; n < 3000; n *= 1.013) {
        for (int rated = 0; rated < 2; rated++) {
            double lo, hi;
            poisson_interval(n, rated ? R : 0, &lo, &hi, NULL);
            EXPECT(lo <= n && n <= hi);
            if (!rated) {
                if (!EXPECT(lo >= prev_lo && hi >= prev_hi))
                    fprintf(stderr, "  n %g: [%g, %g] after [%g, %g]\n", n, lo, hi, prev_lo,
                            prev_hi);
                prev_lo = lo;
                prev_hi = hi;
            }
        }
    }
    /* In the estimate at a fixed variance, from n_eff = 4 on. Below about 3 the rate-free
     * upper end falls slightly as the estimate grows (5.57 sd at n_eff = 1, 5.06 sd at 2.9):
     * at the same variance a larger estimate means smaller weights, a less skewed Poisson.
     * Consistent samples have n_eff >= 1, and with the rate (c = R fixed, the certain part
     * growing) the interval is monotone from there, which is where the loop starts
     * (var = 4 R^2: est >= 4 R). In the variance at a fixed estimate, throughout: more
     * variance, a wider interval on both sides. */
    for (int rated = 0; rated < 2; rated++) {
        uint64_t rate = rated ? 4096 : 0;
        struct memprof_interval iv, before = {0};
        for (double est = 4 * 4096.0; est < 1e8; est *= 1.07) {
            memprof__interval_at_rate(est, 4096.0 * 4096.0 * 4, 4, rate, &iv);
            EXPECT(iv.lo >= before.lo && iv.hi >= before.hi);
            before = iv;
        }
        before = (struct memprof_interval){.lo = UINT64_MAX};
        for (double var = 1; var < 4096.0 * 1e6; var *= 1.3) {
            memprof__interval_at_rate(1e6, var, 300, rate, &iv);
            EXPECT(iv.lo <= before.lo && iv.hi >= before.hi);
            EXPECT(iv.lo <= 1000000 && 1000000 <= iv.hi);
            before = iv;
        }
    }
}

static void test_normal_at_large_counts(void)
{
    /* Garwood's limits are n -/+ z sqrt(n) plus a skew term of about (z^2 - 1) / 3 and
     * (z^2 + 2) / 3, so relative to the normal half-width they differ by O(1 / sqrt(n)). */
    const double ns[] = {1e4, 1e6, 1e8, 1e12};
    for (size_t i = 0; i < sizeof ns / sizeof ns[0]; i++) {
        double n = ns[i], sd = sqrt(n), est = n * 4096.0, var = n * 4096.0 * 4096.0;
        struct memprof_interval iv;
        memprof__interval(est, var, (uint64_t)n, &iv);
        double dlo = ((double)iv.lo - (est - Z * sqrt(var))) / 4096.0;
        double dhi = ((double)iv.hi - (est + Z * sqrt(var))) / 4096.0;
        printf("  n = %.0e: lower end %+.3f, upper end %+.3f samples from the normal's "
               "(half-width %.1f)\n",
               n, dlo, dhi, Z * sd);
        EXPECT(fabs(dlo - (Z * Z - 1) / 3) <= 0.05 && fabs(dhi - (Z * Z + 2) / 3) <= 0.05);
        EXPECT(fabs(dlo) <= 0.02 * Z * sd && fabs(dhi) <= 0.02 * Z * sd);
        EXPECT(!iv.low_information);
        EXPECT(close_to(iv.effective_samples, n, 1e-12, 0));
    }
    /* No jump where the quantile turns asymptotic (shape 2000). */
    for (int k = 0; k < 2; k++) {
        double p = k ? 0.975 : 0.025;
        double below = memprof__gamma_quantile(2000.0, p);
        double above = memprof__gamma_quantile(2000.0 * (1 + 1e-12), p);
        EXPECT(fabs(above - below) <= 2e-7 * below);
    }
}

static void test_low_information(void)
{
    double lo, hi;
    int low;
    poisson_interval(9.99, 0, &lo, &hi, &low);
    EXPECT(low);
    poisson_interval(10.0, 0, &lo, &hi, &low);
    EXPECT(!low);
    /* What the threshold means: at 10 samples the interval runs from under half the estimate
     * to over 1.8 times it. */
    EXPECT(lo / 10.0 < 0.5 && hi / 10.0 > 1.8);
    /* One sample of a block of 8 R is far from "rough" (p = 0.99966), nor are 5 samples of
     * blocks of 64 R; 5 samples of small blocks are. */
    struct memprof_interval iv;
    double s = 8.0 * (double)R, p = -expm1(-8.0);
    memprof__interval_at_rate(s / p, s * s * (1 - p) / (p * p), 1, R, &iv);
    EXPECT(!iv.low_information && iv.effective_samples > 1000);
    memprof__interval(5 * 64.0 * (double)R, 0, 5, &iv);
    EXPECT(!iv.low_information);
    poisson_interval(5, R, &lo, &hi, &low);
    EXPECT(low);
}

static void test_rate_splits_certain_from_poisson_part(void)
{
    /* Ten blocks of 64 R (exact) plus 2 samples of small blocks (2 R, variance 2 R^2). The
     * rate-free interval treats it all as one precise estimate, normal in effect; with the
     * rate it is the blocks plus R times Garwood(2): [64 R * 10 + 0.24 R, + 7.22 R]. */
    double r = (double)R, big = 640.0 * r;
    struct memprof_interval free_iv, rated;
    memprof__interval(big + 2 * r, 2 * r * r, 12, &free_iv);
    memprof__interval_at_rate(big + 2 * r, 2 * r * r, 12, R, &rated);
    double lo = ((double)rated.lo - big) / r, hi = ((double)rated.hi - big) / r;
    printf("  10 x 64 R + 2 small samples: rated [%.3f, %.3f] R above the big blocks, "
           "rate-free [%.3f, %.3f]\n",
           lo, hi, ((double)free_iv.lo - big) / r, ((double)free_iv.hi - big) / r);
    EXPECT(fabs(lo - 0.2422) < 1e-3 && fabs(hi - 7.2247) < 1e-3);
    EXPECT(!rated.low_information);             /* relative to 642 R the estimate is precise */
    EXPECT((double)free_iv.hi - big < 5.0 * r); /* the rate-free one misses 3 R hiding there */
    /* A variance too big for the rate (not from samples at that rate) falls back to the
     * rate-free interval. */
    struct memprof_interval a, b;
    memprof__interval(1000, 1e6, 3, &a);
    memprof__interval_at_rate(1000, 1e6, 3, 16, &b);
    EXPECT(a.lo == b.lo && a.hi == b.hi);
}

static void test_estimate_inside_interval(void)
{
    uint64_t state = 42;
    for (int i = 0; i < 20000; i++) {
        double est = exp(40.0 * test_rand_unit(&state));
        double var = est * est * exp(-12.0 + 16.0 * test_rand_unit(&state));
        uint64_t rate = test_rand_below(&state, 3) ? (uint64_t)1 << test_rand_below(&state, 30) : 0;
        struct memprof_interval iv;
        memprof__interval_at_rate(est, var, 1 + test_rand_below(&state, 1000), rate, &iv);
        uint64_t e = (uint64_t)(est + 0.5);
        if (!EXPECT(iv.lo <= e && e <= iv.hi))
            fprintf(stderr, "  est %g var %g rate %" PRIu64 ": [%" PRIu64 ", %" PRIu64 "]\n", est,
                    var, rate, iv.lo, iv.hi);
    }
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_gamma_p_matches_closed_forms),
        TEST_CASE(test_gamma_quantile_inverts_gamma_p),
        TEST_CASE(test_garwood_published_values),
        TEST_CASE(test_garwood_limits_are_poisson_tails),
        TEST_CASE(test_zero_variance_is_exact),
        TEST_CASE(test_no_samples),
        TEST_CASE(test_monotone),
        TEST_CASE(test_normal_at_large_counts),
        TEST_CASE(test_low_information),
        TEST_CASE(test_rate_splits_certain_from_poisson_part),
        TEST_CASE(test_estimate_inside_interval),
    };
    return TEST_MAIN(cases, false);
}
