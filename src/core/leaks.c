/* SPDX-License-Identifier: MIT */
/*
 * The leak statistic of a call site: its steady window, and whether the survivors in it
 * look like a constant-rate leak (leaks.h, doc/statistics.md).
 */
#include "core/leaks.h"

#include <math.h>

struct memprof_leak_window memprof__leak_window(uint64_t origin_ns, uint64_t now_ns,
                                                uint64_t max_lifetime_ns, uint64_t first_ns)
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

double memprof__ks_critical(size_t n)
{
    double r = sqrt((double)n);
    return 1.949 / (r + 0.12 + 0.11 / r);
}

void memprof__leak_stat(const struct memprof_leak_sample *s, size_t n,
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
