/* SPDX-License-Identifier: MIT */
/*
 * Unbiased estimates from Poisson samples (doc/architecture.md, Decisions: Estimator; the
 * simpler "each sample weighs R" makes a 100 MiB block count as 512 KiB).
 *
 * An allocation of s bytes is sampled with probability p(s) = 1 - exp(-s/R) (sampler.h).
 * Weighting each sample by 1/p(s) gives the Horvitz-Thompson estimator: sum s/p(s) over
 * samples estimates the bytes, sum 1/p(s) the number of allocations, both without bias.
 * Each sampled allocation contributes an independent Bernoulli term, so the variance of the
 * byte estimate is sum over the population of s^2 (1-p)/p; its unbiased estimate from the
 * samples is sum s^2 (1-p)/p^2 (and (1-p)/p^2 for counts). Intervals use the normal
 * approximation, est +/- 1.96 sd, which is sound from about 100 samples on.
 */
#ifndef MEMPROF_COMMON_ESTIMATE_H
#define MEMPROF_COMMON_ESTIMATE_H

#include <math.h>
#include <stdint.h>

#include "common/mathfn.h"

/* Probability that an allocation of `size` bytes is sampled at mean interval `rate`. */
static inline double memprof__est_prob(uint64_t size, uint64_t rate)
{
    /* -expm1(-x) keeps full precision for tiny x, where 1 - exp(-x) would cancel; the
     * library's own (mathfn.h): this runs in the sampling path. */
    return -memprof__expm1(-(double)size / (double)rate);
}

/* Running sums for one estimate (a whole heap, or one call site). */
struct memprof_est {
    uint64_t samples;
    double bytes, bytes_var;
    double count, count_var;
};

static inline void memprof__est_add(struct memprof_est *e, uint64_t size, uint64_t rate)
{
    if (size == 0)
        return;
    double p = memprof__est_prob(size, rate);
    double q = (1.0 - p) / (p * p);
    e->samples++;
    e->bytes += (double)size / p;
    e->bytes_var += (double)size * (double)size * q;
    e->count += 1.0 / p;
    e->count_var += q;
}

static inline void memprof__est_merge(struct memprof_est *into, const struct memprof_est *e)
{
    into->samples += e->samples;
    into->bytes += e->bytes;
    into->bytes_var += e->bytes_var;
    into->count += e->count;
    into->count_var += e->count_var;
}

/* Rounds a non-negative estimate to an integer. */
static inline uint64_t memprof__est_round(double v)
{
    return v <= 0.0 ? 0 : v >= 1.8e19 ? UINT64_MAX : (uint64_t)(v + 0.5);
}

/* The 95 % interval [lo, hi] of an estimate with variance `var`, clamped at zero. */
static inline void memprof__est_interval(double est, double var, uint64_t *lo, uint64_t *hi)
{
    double half = 1.959964 * sqrt(var > 0.0 ? var : 0.0);
    *lo = memprof__est_round(est - half);
    *hi = memprof__est_round(est + half);
}

#endif
