/* SPDX-License-Identifier: MIT */
/*
 * 95 % intervals that hold at small sample counts (interval.h; doc/statistics.md,
 * "Intervals"): the exact Poisson (Garwood) interval of an effective sample count, scaled to
 * bytes, built on the regularized incomplete gamma function and its inverse, implemented
 * here (series and continued fraction, then a safeguarded Newton iteration) on the library's
 * own exp, ln and ln Gamma (common/mathfn.h), so that writing a profile needs nothing from
 * libm (sqrt and fabs are the processor's instructions here, -fno-math-errno).
 */
#include "export/interval.h"

#include <float.h>
#include <math.h>

#include "common/mathfn.h"

/* Two-sided 95 %: the normal 97.5 % quantile, and -ln(0.025) = ln 40, the Garwood upper bound
 * of a zero count (P(no sample) = e^-mu = 0.025). */
#define Z_975 1.959963984540054
#define LN_40 3.6888794541139363

/* Above this shape the gamma quantile is the Wilson-Hilferty approximation, whose relative
 * error there is below 2e-7 (tests/unit/test_interval.c checks it against the iteration at
 * this boundary); below it the exact iteration, whose expansions need O(sqrt(a)) terms. */
#define GAMMA_ASYMPTOTIC 2000.0

/* P(a, x) and Q(a, x) = 1 - P(a, x), each computed where it is the smaller one (or from
 * it), so that each keeps its relative precision in its own tail; returns P, sets *q. */
static double gamma_pq(double a, double x, double *q_out)
{
    *q_out = 1.0;
    if (!(x > 0.0))
        return 0.0;
    *q_out = 0.0;
    /* Shape 0 (or below the smallest normal double, where 1/a overflows) is the point mass
     * at 0; an infinite x has all the mass below it. */
    if (!(a >= DBL_MIN) || isinf(x))
        return 1.0;
    /* x^a e^-x / Gamma(a), the factor both expansions share, in logs to avoid overflow. */
    double front = memprof__exp(a * memprof__ln(x) - x - memprof__lgamma(a));
    if (x < a + 1.0) {
        /* The series P = front * sum_k x^k / (a (a+1) ... (a+k)): positive terms that fall
         * off once a + k > x, so it converges fast exactly where it is used. */
        double ak = a, term = 1.0 / a, sum = term;
        for (int k = 0; k < 100000; k++) {
            ak += 1.0;
            term *= x / ak;
            sum += term;
            if (term < sum * 1e-17)
                break;
        }
        double p = sum * front;
        p = p < 1.0 ? p : 1.0;
        *q_out = 1.0 - p;
        return p;
    }
    /* The continued fraction for Q = 1 - P (modified Lentz), which converges fast for
     * x > a + 1, where the series would need many terms and lose digits. */
    double b = x + 1.0 - a, c = 1.0 / DBL_MIN, d = 1.0 / b, h = d;
    for (int i = 1; i < 100000; i++) {
        double an = -(double)i * ((double)i - a);
        b += 2.0;
        d = an * d + b;
        if (fabs(d) < DBL_MIN)
            d = DBL_MIN;
        c = b + an / c;
        if (fabs(c) < DBL_MIN)
            c = DBL_MIN;
        d = 1.0 / d;
        double delta = d * c;
        h *= delta;
        if (fabs(delta - 1.0) < 1e-16)
            break;
    }
    double q = front * h;
    q = q < 1.0 ? q : 1.0;
    *q_out = q;
    return 1.0 - q;
}

double memprof__gamma_p(double a, double x)
{
    double q;
    return gamma_pq(a, x, &q);
}

/* The standard normal distribution function: the square of a standard normal, halved, is
 * Gamma(1/2), so Phi(x) = Q(1/2, x^2 / 2) / 2 below 0 and 1 - that above; the lower tail
 * keeps its relative precision (the Halley step below divides by the density there). */
static double normal_cdf(double x)
{
    double q;
    (void)gamma_pq(0.5, 0.5 * x * x, &q);
    return x < 0.0 ? 0.5 * q : 1.0 - 0.5 * q;
}

/* The standard normal quantile: Acklam's rational approximation (relative error 1e-9), then
 * one Halley step on the distribution function, which makes it exact to rounding. */
static double normal_quantile(double p)
{
    if (p == 0.975)
        return Z_975;
    if (p == 0.025)
        return -Z_975;
    static const double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                               -2.759285104469687e+02, 1.383577518672690e+02,
                               -3.066479806614716e+01, 2.506628277459239e+00};
    static const double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                               -1.556989798598866e+02, 6.680131188771972e+01,
                               -1.328068155288572e+01};
    static const double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                               -2.400758277161838e+00, -2.549732539343734e+00,
                               4.374664141464968e+00,  2.938163982698783e+00};
    static const double d[] = {7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00,
                               3.754408661907416e+00};
    double x;
    if (p < 0.02425) {
        double q = sqrt(-2.0 * memprof__ln(p));
        x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else if (p > 1.0 - 0.02425) {
        double q = sqrt(-2.0 * memprof__log1p(-p));
        x = -(((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
            ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
    } else {
        double q = p - 0.5, r = q * q;
        x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
            (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
    }
    double e = normal_cdf(x) - p;
    double u = e * sqrt(2.0 * M_PI) * memprof__exp(x * x / 2.0);
    return x - u / (1.0 + x * u / 2.0);
}

/* Wilson-Hilferty: (X / a)^(1/3) is nearly normal with mean 1 - 1/(9a) and variance 1/(9a). */
static double wilson_hilferty(double a, double z)
{
    double t = 1.0 - 1.0 / (9.0 * a) + z / (3.0 * sqrt(a));
    return t > 0.0 ? a * t * t * t : 0.0;
}

double memprof__gamma_quantile(double a, double p)
{
    if (!(a > 0.0) || !(p > 0.0))
        return 0.0;
    if (p >= 1.0)
        return INFINITY;
    double z = normal_quantile(p);
    if (a > GAMMA_ASYMPTOTIC)
        return wilson_hilferty(a, z);
    /* Newton's method on t = ln x, where P(a, e^t) is smooth in both tails, inside a bracket
     * [tl, th] that every evaluation narrows; a step that leaves it bisects instead.
     * dP/dt = x * density(x) = exp(a t - e^t - ln Gamma(a)). */
    double lga = memprof__lgamma(a);
    /* Start: Wilson-Hilferty where it is positive, else the lower tail's leading term,
     * P(a, x) ~ x^a / Gamma(a + 1), good for small x (small a, small p). */
    double x0 = wilson_hilferty(a, z);
    double t_small = (memprof__ln(p) + memprof__lgamma(a + 1.0)) / a;
    if (t_small < memprof__ln(DBL_MIN) && p < 0.5)
        return 0.0; /* the quantile is below the smallest normal double */
    double t = x0 > 0.0 ? memprof__ln(x0) : t_small > -745.0 ? t_small : -745.0;
    /* Bracket the root by stepping out a factor e at a time. */
    double tl = t, th = t;
    double g = memprof__gamma_p(a, memprof__exp(t)) - p;
    if (g < 0.0) {
        while (th < 710.0 && memprof__gamma_p(a, memprof__exp(th)) < p)
            th += 1.0;
    } else {
        while (tl > -745.0 && memprof__gamma_p(a, memprof__exp(tl)) >= p)
            tl -= 1.0;
        if (tl <= -745.0)
            return 0.0;
    }
    for (int i = 0; i < 200; i++) {
        if (g < 0.0)
            tl = t;
        else
            th = t;
        double slope = memprof__exp(a * t - memprof__exp(t) - lga);
        double next = slope > 0.0 ? t - g / slope : NAN;
        if (!(next > tl && next < th)) /* also NAN: no usable slope */
            next = 0.5 * (tl + th);
        double step = fabs(next - t);
        t = next;
        if (step < 1e-14 * (1.0 + fabs(t)) || th - tl < 1e-14 * (1.0 + fabs(t)))
            break;
        g = memprof__gamma_p(a, memprof__exp(t)) - p;
        if (g == 0.0)
            break;
    }
    return memprof__exp(t);
}

/* Rounds a non-negative estimate to a whole number, as estimate.h's memprof__est_round()
 * does (this file does not depend on src/core). */
static uint64_t round_count(double v)
{
    return !(v > 0.0) ? 0 : v >= 1.8e19 ? UINT64_MAX : (uint64_t)(v + 0.5); /* NaN: 0 */
}

/*
 * The construction (doc/statistics.md, "Intervals"). The estimate is modelled as a part the
 * samples establish for certain, k, plus c times a Poisson count whose estimate is m:
 *
 *   est = k + c m,  var = c^2 m   =>   m = var / c^2,  k = est - var / c,
 *   interval = k + c * [G(0.025; m), G(0.975; m + 1)]
 *
 * with G(q; a) the q-quantile of Gamma(a), which for integer m is Garwood's exact Poisson
 * interval (lower 1/2 chi2(0.025; 2m), upper 1/2 chi2(0.975; 2m + 2)) and interpolates it
 * smoothly in between. Without the rate, c = var / est: k = 0 and m = est^2 / var = n_eff,
 * which is n when every sample weighs R. With the rate, c = R: a sample of s bytes weighs
 * w = s / p and adds w^2 (1 - p) to var, so it adds x^2 e^-x / (1 - e^-x)^2 (x = s / R) to m:
 * about 1 for blocks far below R (each one Poisson event of R bytes, as above), about 0 for
 * blocks far above R, whose weight then goes to k (k never exceeds the bytes of the sampled
 * blocks themselves, so it is certain). A site with big blocks and a few small ones thus
 * gets the Poisson interval of its small ones on top of its big ones, where n_eff would
 * treat the whole site as precise.
 */
static void interval(double est, double var, uint64_t samples, double rate,
                     struct memprof_interval *out)
{
    if (!(est > 0.0) || samples == 0) {
        /* Nothing was sampled. With the rate, ln(40) R is the exact 95 % upper bound of what
         * left no sample: m bytes escape every sample with probability e^(-m/R), whatever
         * the block sizes. Without it there is no bound: [0, 0], the estimate itself. */
        out->lo = 0;
        out->hi = rate > 0.0 ? round_count(LN_40 * rate) : 0;
        out->low_information = 1;
        out->effective_samples = 0.0;
        return;
    }
    if (isinf(var)) {
        /* Nothing known (an infinite variance can only come from a file, not from samples). */
        *out = (struct memprof_interval){.lo = 0, .hi = UINT64_MAX, .low_information = 1};
        return;
    }
    if (!(var > 0.0))
        var = 0.0; /* no variance (blocks with p = 1): exact, up to the allowance below */
    out->effective_samples = var > 0.0 ? est * est / var : INFINITY;
    out->low_information = out->effective_samples < MEMPROF_INTERVAL_LOW_INFORMATION;
    double c = var / est;
    /* A consistent (est, var) pair has var / est <= R (each sample adds w^2 (1-p) to var and
     * w to est, and w (1 - p) = R x / (e^x - 1) <= R); a larger ratio cannot come from
     * samples at this rate, and then the rate-free model is the safe one. */
    if (rate > c)
        c = rate;
    if (!(c > 0.0)) {
        out->lo = out->hi = round_count(est); /* var = 0 without a rate: exact */
        return;
    }
    double m = var / (c * c), k = est - var / c;
    if (k < 0.0)
        k = 0.0; /* rounding: est - var / c is >= 0 in exact arithmetic */
    out->lo = round_count(k + c * memprof__gamma_quantile(m, 0.025));
    out->hi = round_count(k + c * memprof__gamma_quantile(m + 1.0, 0.975));
}

void memprof__interval(double est, double var, uint64_t samples, struct memprof_interval *out)
{
    interval(est, var, samples, 0.0, out);
}

void memprof__interval_at_rate(double est, double var, uint64_t samples, uint64_t rate,
                               struct memprof_interval *out)
{
    interval(est, var, samples, (double)rate, out);
}
