/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the library's own transcendental functions (src/common/mathfn.h), which
 * replace libm's: the sampling path's logarithm and exp(x) - 1, the intervals' exp, ln(1 + x)
 * and ln Gamma. Within a few units in the last place of libm's over the ranges the profiler
 * uses them on (the sampler's uniform draws in (0, 1], sizes over rates from 2^-60 to 2^64,
 * the intervals' shapes and probabilities) and beyond, exact at the points where the answer is
 * exact, and right at the edges (zero, tiny arguments, underflow, overflow, NaN).
 */
#include <math.h>

#include "common/mathfn.h"
#include "test.h"

/* |got - want| in units of want's last place. */
static double ulps(double got, double want)
{
    if (got == want)
        return 0.0;
    return fabs(got - want) / fabs(nextafter(want, INFINITY) - want);
}

static uint64_t rng_state = 0x853c49e6748fea9bull;

/* Uniform in [0, 1). */
static double uniform(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return (double)(rng_state >> 11) * 0x1p-53;
}

/* The largest error, in units in the last place, of `mine` against libm's `ref` over two
 * million arguments from `draw`; printed with the argument where it was. */
static double worst_ulps(const char *name, double (*mine)(double), double (*ref)(double),
                         double (*draw)(void))
{
    double worst = 0.0, at = 0.0;
    for (int i = 0; i < 2000000; i++) {
        double x = draw();
        double u = ulps(mine(x), ref(x));
        if (u > worst) {
            worst = u;
            at = x;
        }
    }
    printf("  %s: worst %.2f ulp at %a\n", name, worst, at);
    return worst;
}

/* Log-uniform over [2^-1074, 2^1000]: subnormals, the sampler's (0, 1], big values. */
static double ln_argument(void)
{
    return ldexp(1.0 + uniform(), (int)(uniform() * 2074.0) - 1074);
}

static void test_ln_is_within_an_ulp_of_libm(void)
{
    EXPECT(worst_ulps("ln", memprof__ln, log, ln_argument) <= 1.0);
}

static void test_ln_of_the_samplers_draws(void)
{
    /* The sampler's u: (k + 1) 2^-53 for a 53-bit k; the smallest and the largest. */
    EXPECT(ulps(memprof__ln(0x1p-53), log(0x1p-53)) <= 1.0);
    EXPECT(memprof__ln(1.0) == 0.0);
    EXPECT(ulps(memprof__ln(1.0 - 0x1p-53), log(1.0 - 0x1p-53)) <= 1.0);
    EXPECT(memprof__ln(2.0) == M_LN2);
    EXPECT(memprof__ln(0.0) == -INFINITY);
    EXPECT(isnan(memprof__ln(-1.0)));
    EXPECT(isnan(memprof__ln(NAN)));
}

/* Either sign, magnitudes 2^-70 to 2^9.47 (709): tiny sizes over rates, the reduced range, past
 * the -1 limit, up to overflow. */
static double expm1_argument(void)
{
    double x =
        (uniform() < 0.5 ? -1.0 : 1.0) * ldexp(1.0 + uniform(), (int)(uniform() * 79.0) - 70);
    return x > 709.0 ? 709.0 : x;
}

static void test_expm1_is_within_two_ulps_of_libm(void)
{
    EXPECT(worst_ulps("expm1", memprof__expm1, expm1, expm1_argument) <= 2.0);
}

static void test_expm1_edges(void)
{
    EXPECT(memprof__expm1(0.0) == 0.0);
    EXPECT(memprof__expm1(-0x1p-60) == -0x1p-60); /* exp(x) - 1 = x to rounding */
    EXPECT(memprof__expm1(-41.0) == -1.0);
    EXPECT(memprof__expm1(-1e300) == -1.0);
    EXPECT(memprof__expm1(710.0) == INFINITY);
    EXPECT(ulps(memprof__expm1(709.78), expm1(709.78)) <= 2.0);
    EXPECT(isnan(memprof__expm1(NAN)));
    /* A sample's probability at the default rate for 1 byte and for 64 GiB. */
    EXPECT(ulps(-memprof__expm1(-1.0 / 524288), -expm1(-1.0 / 524288)) <= 1.0);
    EXPECT(-memprof__expm1(-(double)(64ull << 30) / 524288) == 1.0);
}

/* Uniform over the whole range, down into the subnormal results below -708. */
static double exp_argument(void)
{
    return -745.0 + uniform() * (709.7 + 745.0);
}

static void test_exp_is_within_two_ulps_of_libm(void)
{
    EXPECT(worst_ulps("exp", memprof__exp, exp, exp_argument) <= 2.0);
}

static void test_exp_edges(void)
{
    EXPECT(memprof__exp(0.0) == 1.0);
    EXPECT(memprof__exp(1e-300) == 1.0);
    EXPECT(memprof__exp(710.0) == INFINITY);
    EXPECT(memprof__exp(INFINITY) == INFINITY);
    EXPECT(memprof__exp(-746.0) == 0.0);
    EXPECT(memprof__exp(-INFINITY) == 0.0);
    EXPECT(memprof__exp(-744.0) > 0.0); /* subnormal, not flushed to zero */
    EXPECT(ulps(memprof__exp(709.78), exp(709.78)) <= 2.0);
    EXPECT(isnan(memprof__exp(NAN)));
}

/* Either sign, magnitudes 2^-70 to 2^0 (above -1), and up to 2^60 when positive. */
static double log1p_argument(void)
{
    double m = ldexp(1.0 + uniform(), (int)(uniform() * 130.0) - 70);
    return uniform() < 0.5 ? (m < 1.0 ? -m : -uniform()) : m;
}

static void test_log1p_is_within_two_ulps_of_libm(void)
{
    EXPECT(worst_ulps("log1p", memprof__log1p, log1p, log1p_argument) <= 2.0);
}

static void test_log1p_edges(void)
{
    EXPECT(memprof__log1p(0.0) == 0.0);
    EXPECT(memprof__log1p(0x1p-60) == 0x1p-60);
    EXPECT(memprof__log1p(-1.0) == -INFINITY);
    EXPECT(memprof__log1p(INFINITY) == INFINITY);
    EXPECT(isnan(memprof__log1p(-1.5)));
    EXPECT(isnan(memprof__log1p(NAN)));
    /* The normal quantile's upper tail: ln(1 - p) for p = 0.975 and just below 1. */
    EXPECT(ulps(memprof__log1p(-0.975), log1p(-0.975)) <= 2.0);
    EXPECT(ulps(memprof__log1p(-(1.0 - 0x1p-53)), log1p(-(1.0 - 0x1p-53))) <= 2.0);
}

static void test_lgamma_matches_libm(void)
{
    /* Within 4 ulp plus 1e-14: where ln Gamma is near 0 (a near 1 and 2) its value is a
     * difference of terms near 10 and the absolute error counts, which the intervals see
     * through exp(-ln Gamma) as a relative error of 1e-14. */
    double worst = 0.0, at = 0.0;
    for (int i = 0; i < 2000000; i++) {
        double a = ldexp(1.0 + uniform(), (int)(uniform() * 1100.0) - 1060); /* 2^-1060..2^40 */
        int sign;
        double want = lgamma_r(a, &sign), got = memprof__lgamma(a);
        double allowed = 4.0 * fabs(nextafter(want, INFINITY) - want) + 1e-14;
        double err = fabs(got - want) / allowed;
        if (err > worst) {
            worst = err;
            at = a;
        }
    }
    printf("  lgamma: worst %.2f of the allowance (4 ulp + 1e-14) at %a\n", worst, at);
    EXPECT(worst <= 1.0);
}

static void test_lgamma_edges(void)
{
    EXPECT(fabs(memprof__lgamma(1.0)) <= 1e-14);
    EXPECT(fabs(memprof__lgamma(2.0)) <= 1e-14);
    EXPECT(fabs(memprof__lgamma(0.5) - 0.5 * log(M_PI)) <= 1e-14);
    EXPECT(ulps(memprof__lgamma(2000.0), lgamma(2000.0)) <= 4.0);
    EXPECT(memprof__lgamma(0.0) == INFINITY);
    EXPECT(memprof__lgamma(INFINITY) == INFINITY);
    EXPECT(memprof__lgamma(1e307) == INFINITY);
    EXPECT(isnan(memprof__lgamma(-1.0)));
    EXPECT(isnan(memprof__lgamma(NAN)));
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_ln_is_within_an_ulp_of_libm),
        TEST_CASE(test_ln_of_the_samplers_draws),
        TEST_CASE(test_expm1_is_within_two_ulps_of_libm),
        TEST_CASE(test_expm1_edges),
        TEST_CASE(test_exp_is_within_two_ulps_of_libm),
        TEST_CASE(test_exp_edges),
        TEST_CASE(test_log1p_is_within_two_ulps_of_libm),
        TEST_CASE(test_log1p_edges),
        TEST_CASE(test_lgamma_matches_libm),
        TEST_CASE(test_lgamma_edges),
    };
    return TEST_MAIN(cases, false);
}
