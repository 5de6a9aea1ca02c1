/* SPDX-License-Identifier: MIT */
/*
 * 95 % intervals of heap estimates that hold at small sample counts (doc/statistics.md,
 * "Intervals"). An estimate of n samples of blocks much smaller than the sampling rate R is
 * R times a Poisson count, so est +/- 1.96 sd covers the truth only 87-93 % of the time for
 * 3-20 samples; these intervals use the exact (Garwood) Poisson interval of an effective
 * sample count instead, and say when an estimate rests on little information by looking at
 * its variance rather than its sample count (blocks far above R are estimated exactly from
 * one sample each). Pure arithmetic on an estimate, its variance and its sample count (the
 * sums of src/common/estimate.h), so writers, readers and the API share it; no dependency on
 * the engine or the symbolizer.
 */
#ifndef MEMPROF_EXPORT_INTERVAL_H
#define MEMPROF_EXPORT_INTERVAL_H

#include <stdint.h>

/* 95 % interval of a site estimate; *low says the estimate rests on little information. */
struct memprof_interval {
    uint64_t lo, hi;          /* the interval, rounded to whole bytes (or allocations) */
    int low_information;      /* effective_samples < MEMPROF_INTERVAL_LOW_INFORMATION */
    double effective_samples; /* est^2 / var: 0 without samples, INFINITY when exact */
};

/* Below this many effective samples an estimate is "rough" (few samples): its 95 % interval
 * reaches below half the estimate and more than 1.8 times above it (Garwood at 10 samples:
 * 0.48 to 1.84 times the estimate), so it may be off by a factor of two. */
#define MEMPROF_INTERVAL_LOW_INFORMATION 10.0

/*
 * The interval of an estimate `est` (a sum of Horvitz-Thompson weights s/p), its variance
 * estimate `var` (sum of s^2 (1-p)/p^2) and the `samples` it rests on, when the sampling rate
 * is not known: (est / n_eff) times the Garwood interval of n_eff = est^2 / var. Exact
 * ([est, est]) when var is 0; [0, 0] and low information without samples or when est is 0
 * (without the rate nothing bounds what left no sample; memprof__interval_at_rate() does).
 */
void memprof__interval(double est, double var, uint64_t samples, struct memprof_interval *out);

/*
 * The same for byte estimates taken at sampling rate `rate` (0: unknown, then it is
 * memprof__interval()). Knowing R splits the estimate into a part the samples establish for
 * certain and a Poisson part of scale R, which keeps the interval honest for sites that mix
 * blocks far above R with a few small ones; the upper end always allows for ln(40) R bytes
 * that left no sample (the Garwood bound of a zero count), so an estimate with var = 0 is
 * [est, est + 3.69 R] and one without samples [0, 3.69 R]. Use this wherever the rate is
 * known; doc/statistics.md has the construction and the coverage measured.
 */
void memprof__interval_at_rate(double est, double var, uint64_t samples, uint64_t rate,
                               struct memprof_interval *out);

/* The regularized lower incomplete gamma function P(a, x) (a >= 0, x >= 0) and its inverse in
 * x (0 < p < 1); shape 0 is the point mass at 0. Exposed for the tests. */
double memprof__gamma_p(double a, double x);
double memprof__gamma_quantile(double a, double p);

#endif
