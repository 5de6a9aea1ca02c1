/* SPDX-License-Identifier: MIT */
/*
 * The leak statistic of one call site, from the allocation times of its live samples at a
 * snapshot (doc/statistics.md, "Leak suspects").
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
#ifndef MEMPROF_CORE_LEAKS_H
#define MEMPROF_CORE_LEAKS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define MEMPROF_LEAK_STARTUP     0.10 /* the first tenth of the run is start-up */
#define MEMPROF_LEAK_RECENT      0.10 /* the last tenth is too recent to judge */
#define MEMPROF_LEAK_MIN_WINDOW  0.10 /* a window shorter than this share of the run: none */
#define MEMPROF_LEAK_MIN_SAMPLES 4u

struct memprof_leak_window {
    uint64_t lo_ns, hi_ns; /* [lo, hi), in the samples' time base; empty if lo >= hi */
};

/* The steady window of a run from `origin_ns` to `now_ns` for a site whose first sample was
 * at `first_ns` (0: not known) and whose longest freed lifetime was `max_lifetime_ns` (0 if
 * it freed nothing). */
struct memprof_leak_window memprof__leak_window(uint64_t origin_ns, uint64_t now_ns,
                                                uint64_t max_lifetime_ns, uint64_t first_ns);

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

/* The statistic of survivors s[0..n), sorted by allocation time. */
void memprof__leak_stat(const struct memprof_leak_sample *s, size_t n,
                        struct memprof_leak_window win, struct memprof_leak_stat *out);

/* The 0.1 % critical value of the one-sample Kolmogorov-Smirnov distance for n points
 * (Stephens' modification of the limiting value 1.949 / sqrt(n)). */
double memprof__ks_critical(size_t n);

#endif
