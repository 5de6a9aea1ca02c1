/* SPDX-License-Identifier: MIT */
/*
 * The two transcendental functions the sampling path needs, the natural logarithm (the
 * sampler's exponential draws) and exp(x) - 1 (a sample's probability and weights), computed
 * here instead of by libm: linking libm made every process the preload plugin starts in map
 * and relocate it before main (~0.2 ms of CPU per process, doc/performance.md, Start-up), for
 * two functions, and a hook may not load anything later. Accurate to about one unit in the
 * last place (tests/unit/test_mathfn.c compares them with libm); not bit-identical to libm,
 * which nothing needs: the engine computes a sample's weights with the same function on insert
 * and free, so its sums still cancel exactly. The writers' statistics (export/interval.c) use
 * libm, loaded when first needed.
 *
 * Both reduce the argument by powers of two and evaluate a series whose terms are fixed by the
 * mathematics (1/(2k+1), 1/k!), kept short by the reduction.
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

#endif
