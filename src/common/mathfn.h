/* SPDX-License-Identifier: MIT */
/*
 * The transcendental functions the library computes itself instead of calling libm: the
 * natural logarithm (the sampler's exponential draws), exp(x) - 1 (a sample's probability and
 * weights), and for the writers' intervals (export/interval.c) exp, ln(1 + x) and ln Gamma.
 * Linking libm made every process the preload plugin starts in map and relocate it before main
 * (~0.2 ms of CPU per process, doc/performance.md, Start-up), a hook may not load anything, and
 * loading libm later with dlopen() from the writer thread left a child forked during that
 * dlopen() with the loader's half-changed state (doc/guarantees.md, fork). Accurate to a few
 * units in the last place (tests/unit/test_mathfn.c compares them with libm); not
 * bit-identical to libm, which nothing needs: the engine computes a sample's weights with the
 * same function on insert and free, so its sums still cancel exactly.
 *
 * Each reduces the argument by powers of two (ln Gamma: by its recurrence) and evaluates a
 * series whose terms are fixed by the mathematics (1/(2k+1), 1/k!, Bernoulli numbers), kept
 * short by the reduction.
 */
#ifndef MEMPROF_COMMON_MATHFN_H
#define MEMPROF_COMMON_MATHFN_H

#include <stdint.h>
#include <string.h>

/* ln 2 split so that k * MEMPROF_LN2_HI is exact for |k| < 2^21 (its low 21 bits are zero). */
#define MEMPROF_LN2_HI 0x1.62e42fee00000p-1
#define MEMPROF_LN2_LO 0x1.a39ef35793c76p-33

static inline uint64_t memprof__dbits(double x)
{
    uint64_t b;
    memcpy(&b, &x, sizeof b);
    return b;
}

static inline double memprof__dfrom(uint64_t b)
{
    double x;
    memcpy(&x, &b, sizeof x);
    return x;
}

/* 2^k for -1022 <= k <= 1023. */
static inline double memprof__pow2(int k)
{
    return memprof__dfrom((uint64_t)(k + 1023) << 52);
}

/* ln(1 + f) for f in [sqrt(1/2) - 1, sqrt(2) - 1]: with s = f / (2 + f), ln(1 + f) =
 * 2 atanh(s) = 2s + sum 2 s^(2k+1) / (2k+1), and 2s = f - s f = f - (f^2/2 - s f^2/2), which
 * keeps the large terms exact. |s| <= 0.1716, so eleven terms leave less than 2^-62. */
static inline double memprof__log1p_reduced(double f)
{
    double s = f / (2.0 + f), z = s * s;
    double r = 2.0 / 23;
    static const double inv_odd[] = {2.0 / 21, 2.0 / 19, 2.0 / 17, 2.0 / 15, 2.0 / 13,
                                     2.0 / 11, 2.0 / 9,  2.0 / 7,  2.0 / 5,  2.0 / 3};
    for (unsigned i = 0; i < sizeof inv_odd / sizeof inv_odd[0]; i++)
        r = inv_odd[i] + z * r;
    r *= z;
    double hfsq = 0.5 * f * f;
    return f - (hfsq - s * (hfsq + r));
}

/* The natural logarithm of a positive finite x (0 gives -inf, anything else out of range NaN). */
static inline double memprof__ln(double x)
{
    if (!(x > 0.0) || x > 0x1.fffffffffffffp+1023)
        return x == 0.0 ? -__builtin_inf() : __builtin_nan("");
    int k = 0;
    if (x < 0x1p-1022) { /* subnormal: make it normal first */
        x *= 0x1p54;
        k = -54;
    }
    uint64_t b = memprof__dbits(x);
    k += (int)(b >> 52) - 1023;
    double m = memprof__dfrom((b & 0x000fffffffffffffull) | 0x3ff0000000000000ull); /* [1, 2) */
    if (m > 0x1.6a09e667f3bcdp+0) { /* sqrt(2): bring m into [sqrt(1/2), sqrt(2)] */
        m *= 0.5;
        k++;
    }
    double dk = (double)k;
    return dk * MEMPROF_LN2_HI + (memprof__log1p_reduced(m - 1.0) + dk * MEMPROF_LN2_LO);
}

/* exp(r) - 1 for |r| <= 0.36: r + r^2 (1/2! + r/3! + ... + r^14/16!), whose first omitted term is
 * below 2^-60 of r. */
static inline double memprof__expm1_reduced(double r)
{
    static const double inv_fact[] = {1.0 / 2,
                                      1.0 / 6,
                                      1.0 / 24,
                                      1.0 / 120,
                                      1.0 / 720,
                                      1.0 / 5040,
                                      1.0 / 40320,
                                      1.0 / 362880,
                                      1.0 / 3628800,
                                      1.0 / 39916800,
                                      1.0 / 479001600,
                                      1.0 / 6227020800,
                                      1.0 / 87178291200,
                                      1.0 / 1307674368000,
                                      1.0 / 20922789888000};
    unsigned n = sizeof inv_fact / sizeof inv_fact[0];
    double p = inv_fact[n - 1];
    for (unsigned i = n - 1; i-- > 0;)
        p = inv_fact[i] + r * p;
    return r + r * r * p;
}

/* exp(x) - 1, precise also where x is tiny (where 1 - exp(-x) would cancel). */
static inline double memprof__expm1(double x)
{
    if (x != x)
        return x;
    if (x < -40.0) /* exp(x) < 2^-57: -1 to rounding */
        return -1.0;
    if (x > 709.782712893384) /* exp(x) overflows */
        return __builtin_inf();
    if (x > -0.34657359 && x < 0.34657359) /* |x| < ln(2) / 2 */
        return memprof__expm1_reduced(x);
    /* x = k ln 2 + r, |r| <= ln(2) / 2 (plus rounding); exp(x) - 1 = 2^k (e^r - 1) + (2^k - 1). */
    /* Rounded to nearest by hand: round() would be libm's on a baseline x86_64. */
    int k = (int)(x * 0x1.71547652b82fep+0 + (x > 0.0 ? 0.5 : -0.5));
    double kd = (double)k;
    double r = (x - kd * MEMPROF_LN2_HI) - kd * MEMPROF_LN2_LO;
    double em1 = memprof__expm1_reduced(r);
    if (k > 1023) /* only just below overflow: 2^k in two halves */
        return (1.0 + em1) * memprof__pow2(k - 512) * memprof__pow2(512);
    double two_k = memprof__pow2(k);
    if (k > 53) /* 2^k - 1 is not exact, and -1 is below its last place */
        return two_k * (1.0 + em1);
    return two_k * em1 + (two_k - 1.0); /* 2^k - 1 is exact for -53 <= k <= 53 */
}

/* exp(x), down to the subnormal results. */
static inline double memprof__exp(double x)
{
    if (x != x)
        return x;
    if (x > 709.782712893384) /* overflows */
        return __builtin_inf();
    if (x < -745.2) /* below half the smallest subnormal */
        return 0.0;
    /* Reduced as memprof__expm1() does (not through a shared helper: one changed the code
     * generated for the sampled path, which bench/ measured). */
    int k = (int)(x * 0x1.71547652b82fep+0 + (x > 0.0 ? 0.5 : -0.5));
    double kd = (double)k;
    double e = 1.0 + memprof__expm1_reduced((x - kd * MEMPROF_LN2_HI) - kd * MEMPROF_LN2_LO);
    if (k > 1023)
        return e * memprof__pow2(k - 512) * memprof__pow2(512);
    if (k < -1022) /* subnormal result: scale in two steps (2^k itself is not normal) */
        return e * memprof__pow2(k + 600) * memprof__pow2(-600);
    return e * memprof__pow2(k);
}

/* ln(1 + x) for x >= -1, precise where x is tiny: with u = 1 + x rounded, ln(u) * x / (u - 1)
 * corrects ln(u) for the rounding of u (u - 1 is exact). */
static inline double memprof__log1p(double x)
{
    if (!(x >= -1.0)) /* also NaN */
        return __builtin_nan("");
    if (x == __builtin_inf())
        return x;
    double u = 1.0 + x;
    if (u == 1.0)
        return x;
    return memprof__ln(u) * (x / (u - 1.0));
}

/* ln Gamma(a) for a > 0 (0 gives +inf, a negative or NaN argument NaN). Below 10 the
 * recurrence Gamma(a) = Gamma(a + n) / (a (a + 1) ... (a + n - 1)) moves the argument up;
 * from 10 Stirling's series, ln Gamma(a) = (a - 1/2) ln a - a + ln(2 pi) / 2 +
 * sum B_2k / (2k (2k - 1) a^(2k - 1)), of which eight terms leave less than 2^-60 of the
 * result. Error within 4 units in the last place plus 1e-14 (tests/unit/test_mathfn.c): where
 * ln Gamma is near zero (a near 1 and 2) it is a difference of terms near 10. */
static inline double memprof__lgamma(double a)
{
    if (!(a >= 0.0))
        return __builtin_nan("");
    if (a == 0.0 || a == __builtin_inf())
        return __builtin_inf();
    double prod = 1.0;
    while (a < 10.0) {
        prod *= a;
        a += 1.0;
    }
    /* B_2k / (2k (2k - 1)) for k = 8 down to 1. */
    static const double coef[] = {-3617.0 / 122400, 1.0 / 156,  -691.0 / 360360, 1.0 / 1188,
                                  -1.0 / 1680,      1.0 / 1260, -1.0 / 360,      1.0 / 12};
    double z = 1.0 / a, z2 = z * z, s = 0.0;
    for (unsigned i = 0; i < sizeof coef / sizeof coef[0]; i++)
        s = coef[i] + z2 * s;
    double ln_a = memprof__ln(a);
    /* a (ln a - 1) - ln(a) / 2 rather than (a - 1/2) ln a - a: no overflow below the result's. */
    return a * (ln_a - 1.0) - 0.5 * ln_a + 0x1.d67f1c864beb5p-1 /* ln(2 pi) / 2 */ + z * s -
           memprof__ln(prod);
}

#endif
