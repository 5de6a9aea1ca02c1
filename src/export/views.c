/* SPDX-License-Identifier: MIT */
/*
 * The views of a profile (profile.h): which numbers of a stack each view shows, the views'
 * names, and the lifetime buckets with their quantiles. Shared by every writer and reader so
 * a view means the same in every format.
 */
#include <stdint.h>
#include <string.h>

#include "export/profile.h"

static const char *const view_names[MEMPROF_VIEW_COUNT] = {"live", "alloc", "peak", "temporary",
                                                           "leaks"};

const char *memprof__view_name(enum memprof_view v)
{
    return (unsigned)v < MEMPROF_VIEW_COUNT ? view_names[v] : "live";
}

int memprof__view_by_name(const char *name)
{
    for (int i = 0; i < MEMPROF_VIEW_COUNT; i++)
        if (strcmp(name, view_names[i]) == 0)
            return i;
    return -1;
}

void memprof__pstack_view(const struct memprof_pstack *st, enum memprof_view v,
                          struct memprof_pvalue *out)
{
    *out = (struct memprof_pvalue){0};
    switch (v) {
    case MEMPROF_VIEW_ALLOC:
        *out = (struct memprof_pvalue){st->alloc_space, st->alloc_objects, st->alloc_samples, 0, 0};
        break;
    case MEMPROF_VIEW_PEAK:
        *out = (struct memprof_pvalue){st->peak_space, st->peak_objects, st->peak_samples,
                                       st->peak_space_var, 1};
        break;
    case MEMPROF_VIEW_TEMPORARY:
        *out = (struct memprof_pvalue){st->temp_space, st->temp_objects, st->temp_samples, 0, 0};
        break;
    case MEMPROF_VIEW_LEAKS:
        if (st->leak_suspect)
            *out = (struct memprof_pvalue){st->leak_space, 0, st->leak_samples, 0, 0};
        break;
    case MEMPROF_VIEW_LIVE:
    default:
        *out = (struct memprof_pvalue){st->inuse_space, st->inuse_objects, st->live_samples,
                                       st->inuse_space_var, 1};
        break;
    }
}

uint64_t memprof__lifetime_bucket_end_ns(unsigned bucket)
{
    if (bucket >= MEMPROF_LIFETIME_BUCKETS - 1)
        return UINT64_MAX;
    return (uint64_t)1000 << (2 * bucket); /* 1 us * 4^bucket */
}

unsigned memprof__lifetime_bucket(uint64_t ns)
{
    unsigned b = 0;
    while (b < MEMPROF_LIFETIME_BUCKETS - 1 && ns >= memprof__lifetime_bucket_end_ns(b))
        b++;
    return b;
}

uint64_t memprof__pstack_lifetime_quantile(const struct memprof_pstack *st, double q)
{
    uint64_t total = 0;
    for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++)
        total += st->lifetimes[b];
    if (total == 0)
        return 0;
    double want = q * (double)total, seen = 0;
    for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++) {
        seen += st->lifetimes[b];
        if (seen >= want && st->lifetimes[b])
            return memprof__lifetime_bucket_end_ns(b);
    }
    return memprof__lifetime_bucket_end_ns(MEMPROF_LIFETIME_BUCKETS - 1);
}
