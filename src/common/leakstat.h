/* SPDX-License-Identifier: MIT */
/*
 * The leak statistic of one call site, from the allocation times of its live samples
 * (doc/statistics.md, "Leak suspects"): pure arithmetic, header-only, so the engine's
 * snapshot (core/snapshot.c) and the command's eBPF mode (tools/ebpf/record.c), which may not
 * include the engine, judge a site by the same rule.
 *
 * A steady leak leaves survivors allocated all through the time its site allocates; a cache
 * built at start-up leaves survivors allocated early; churn leaves survivors allocated just
 * before the snapshot (younger than the lifetimes the site's freed samples had). So the
 * statistic looks only at survivors allocated in a steady window: from the end of start-up
 * (the first MEMPROF_LEAK_STARTUP of the run) or the site's first sample, whichever is later,
 * to before the last MEMPROF_LEAK_RECENT of the run or the site's longest observed lifetime,
 * whichever is longer. A site is a suspect when at least MEMPROF_LEAK_MIN_SAMPLES survivors
 * fall in the window and their times are consistent with a constant rate over it: the
 * Kolmogorov-Smirnov distance of their empirical distribution from the uniform one is below
 * the 0.1 % critical value (a steady leak is missed one time in a thousand by chance; a
 * burst or a start-up cache lies far above it). Its leak bytes are the estimated bytes of those
 * survivors, its rate those bytes per second of the window.
 */
#ifndef MEMPROF_COMMON_LEAKSTAT_H
#define MEMPROF_COMMON_LEAKSTAT_H

#include <math.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "common/lifetime.h"

#define MEMPROF_LEAK_STARTUP     0.10 /* the first tenth of the run is start-up */
#define MEMPROF_LEAK_RECENT      0.10 /* the last tenth is too recent to judge */
#define MEMPROF_LEAK_MIN_WINDOW  0.10 /* a window shorter than this share of the run: none */
#define MEMPROF_LEAK_MIN_SAMPLES 4u

struct memprof_leak_window {
    uint64_t lo_ns, hi_ns; /* [lo, hi), in the samples' time base; empty if lo >= hi */
};

/* A survivor: its allocation time and its estimated bytes. */
struct memprof_leak_sample {
    uint64_t ts;
    double w;
};

struct memprof_leak_stat {
    uint64_t samples; /* survivors in the window */
    double bytes;     /* their estimated bytes */
    double rate;      /* bytes per second of the window */
    double ks;        /* Kolmogorov-Smirnov distance from uniform over the window */
    bool suspect;
};

/* The longest lifetime of a site's freed samples as its lifetime histogram (common/lifetime.h)
 * tells it: the upper edge of its highest non-empty bucket (the open last bucket: four times
 * its lower edge, about 18 minutes); 0 if it freed nothing. Both modes take it from the
 * histogram, so a site gets the same window from the same samples. */
static inline uint64_t memprof__leak_max_lifetime_ns(const uint32_t *lifetimes)
{
    for (unsigned b = MEMPROF_LIFETIME_BUCKETS; b-- > 0;)
        if (lifetimes[b])
            return b + 1 < MEMPROF_LIFETIME_BUCKETS ? memprof__lifetime_bucket_end_ns(b)
                                                    : memprof__lifetime_bucket_end_ns(b - 1) * 4;
    return 0;
}

/* The steady window of a run from `origin_ns` to `now_ns` for a site whose first sample was
 * at `first_ns` (0: not known) and whose longest freed lifetime was `max_lifetime_ns` (0 if
 * it freed nothing). */
static inline struct memprof_leak_window memprof__leak_window(uint64_t origin_ns, uint64_t now_ns,
                                                              uint64_t max_lifetime_ns,
                                                              uint64_t first_ns)
{
    struct memprof_leak_window w = {0, 0};
    if (now_ns <= origin_ns)
        return w;
    double run = (double)(now_ns - origin_ns);
    double recent = run * MEMPROF_LEAK_RECENT;
    if ((double)max_lifetime_ns > recent)
        recent = (double)max_lifetime_ns;
    double lo = run * MEMPROF_LEAK_STARTUP, hi = run - recent;
    /* A site that began allocating later is judged from then on: a leak that starts after a
     * warm-up is still steady over the time its site allocates. */
    if (first_ns > origin_ns && (double)(first_ns - origin_ns) > lo)
        lo = (double)(first_ns - origin_ns);
    if (hi - lo < run * MEMPROF_LEAK_MIN_WINDOW)
        return w;
    w.lo_ns = origin_ns + (uint64_t)lo;
    w.hi_ns = origin_ns + (uint64_t)hi;
    return w;
}

/* The 0.1 % critical value of the one-sample Kolmogorov-Smirnov distance for n points
 * (Stephens' modification of the limiting value 1.949 / sqrt(n)). */
static inline double memprof__ks_critical(size_t n)
{
    double r = sqrt((double)n);
    return 1.949 / (r + 0.12 + 0.11 / r);
}

/* The statistic of survivors s[0..n), sorted by allocation time. */
static inline void memprof__leak_stat(const struct memprof_leak_sample *s, size_t n,
                                      struct memprof_leak_window win, struct memprof_leak_stat *out)
{
    *out = (struct memprof_leak_stat){0};
    if (win.hi_ns <= win.lo_ns)
        return;
    size_t first = 0;
    while (first < n && s[first].ts < win.lo_ns)
        first++;
    size_t end = first;
    while (end < n && s[end].ts < win.hi_ns)
        end++;
    size_t k = end - first;
    double span = (double)(win.hi_ns - win.lo_ns);
    /* The KS distance: at the i-th point (0-based) of k the empirical distribution jumps
     * from i/k to (i+1)/k; the uniform one is at u. */
    double d = 0;
    for (size_t i = 0; i < k; i++) {
        out->bytes += s[first + i].w;
        double u = (double)(s[first + i].ts - win.lo_ns) / span;
        double above = (double)(i + 1) / (double)k - u, below = u - (double)i / (double)k;
        if (above > d)
            d = above;
        if (below > d)
            d = below;
    }
    out->samples = k;
    out->ks = k ? d : 1.0;
    out->rate = out->bytes / (span / 1e9);
    out->suspect = k >= MEMPROF_LEAK_MIN_SAMPLES && d <= memprof__ks_critical(k);
}

static inline int memprof__leak_by_time(const void *a, const void *b)
{
    const struct memprof_leak_sample *x = a, *y = b;
    return x->ts < y->ts ? -1 : x->ts > y->ts;
}

/* The statistic of one site at `now_ns` of a run that began at `origin_ns`, from its
 * survivors s[0..n) in any order (sorted here by allocation time), the time of its first
 * sample and its freed samples' lifetime histogram: what the engine's snapshot and the eBPF
 * mode compute for each site. */
static inline void memprof__leak_site(struct memprof_leak_sample *s, size_t n, uint64_t origin_ns,
                                      uint64_t now_ns, const uint32_t *lifetimes, uint64_t first_ns,
                                      struct memprof_leak_stat *out)
{
    qsort(s, n, sizeof *s, memprof__leak_by_time);
    struct memprof_leak_window win =
        memprof__leak_window(origin_ns, now_ns, memprof__leak_max_lifetime_ns(lifetimes), first_ns);
    memprof__leak_stat(s, n, win, out);
}

#endif
