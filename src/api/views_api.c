/* SPDX-License-Identifier: MIT */
/*
 * The public view accessors of a snapshot (memprof.h, MEMPROF_1.2): the peak, the heap over
 * time, each view's ranking of sites, and the temporary threshold.
 */
#include <errno.h>
#include <string.h>

#include "core/engine.h"
#include "core/snapshot.h"
#include "export/interval.h"
#include "memprof/memprof.h"

#define FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

int memprof_snapshot_peak(const memprof_snapshot *snapshot, memprof_peak_info *out)
{
    if (!snapshot || !out || out->size < FIELD_END(memprof_peak_info, bytes))
        return -EINVAL;
    const struct memprof_est *pk = &snapshot->peak;
    memprof_peak_info info = {
        .size = out->size,
        .bytes = memprof__est_round(pk->bytes),
        .count = memprof__est_round(pk->count),
        .samples = pk->samples,
        .time_ns = snapshot->peak_t_ns,
        .duration_ns = snapshot->duration_ns,
        .allocated_bytes = snapshot->nseries ? snapshot->series[snapshot->nseries - 1].alloc : 0,
        .temporary_threshold_ns = snapshot->temp_threshold_ns,
    };
    struct memprof_interval iv;
    memprof__interval_at_rate(pk->bytes, pk->bytes_var, pk->samples, snapshot->rate, &iv);
    info.bytes_low = iv.lo;
    info.bytes_high = iv.hi;
    memcpy(out, &info, out->size < sizeof info ? out->size : sizeof info);
    return 0;
}

size_t memprof_snapshot_series(const memprof_snapshot *snapshot, memprof_heap_point *out,
                               size_t max)
{
    if (!snapshot)
        return 0;
    for (size_t i = 0; out && i < max && i < snapshot->nseries; i++)
        out[i] = (memprof_heap_point){snapshot->series[i].t_ns, snapshot->series[i].live,
                                      snapshot->series[i].alloc};
    return snapshot->nseries;
}

size_t memprof_snapshot_view_site_count(const memprof_snapshot *snapshot, memprof_view view)
{
    if (!snapshot || (unsigned)view >= 5)
        return 0;
    return snapshot->view_nsites[view];
}

int memprof_snapshot_view_site(const memprof_snapshot *snapshot, memprof_view view, size_t index,
                               memprof_view_site *out)
{
    if (!snapshot || !out || (unsigned)view >= 5 || index >= snapshot->view_nsites[view] ||
        out->size < FIELD_END(memprof_view_site, bytes))
        return -EINVAL;
    const struct memprof_snap_site *site = &snapshot->sites[snapshot->view_order[view][index]];
    struct memprof_est buf;
    const struct memprof_est *e = memprof__snapshot_view_est(site, view, &buf);
    memprof_view_site info = {
        .size = out->size,
        .stack_id = site->stack_id,
        .flags = site->leak.suspect ? MEMPROF_SITE_LEAK_SUSPECT : 0,
        .bytes = memprof__est_round(e->bytes),
        .count = memprof__est_round(e->count),
        .samples = e->samples,
        .lifetime_p50_ns = memprof__lifetime_quantile(site->lifetimes, 0.5),
        .lifetime_p90_ns = memprof__lifetime_quantile(site->lifetimes, 0.9),
        .leak_rate = view == MEMPROF_VIEW_LEAKS ? site->leak.rate : 0,
    };
    if (site->thread && site->thread <= snapshot->nthreads) {
        const struct memprof_snap_thread *t = &snapshot->threads[site->thread - 1];
        info.thread_id = t->tid;
        info.thread_name = t->name[0] ? t->name : NULL;
    }
    /* Views without a variance: each sample taken to weigh the site's mean, a Poisson
     * count scaled by it. The interval holds at small counts (export/interval.h). */
    double var = view == MEMPROF_VIEW_LIVE || view == MEMPROF_VIEW_PEAK
                     ? e->bytes_var
                     : e->bytes * e->bytes / (double)(e->samples ? e->samples : 1);
    struct memprof_interval iv;
    memprof__interval_at_rate(e->bytes, var, e->samples, snapshot->rate, &iv);
    info.bytes_low = iv.lo;
    info.bytes_high = iv.hi;
    if (iv.low_information)
        info.flags |= MEMPROF_SITE_LOW_INFORMATION;
    memcpy(out, &info, out->size < sizeof info ? out->size : sizeof info);
    return 0;
}

int memprof_set_temporary_threshold(uint64_t ns)
{
    memprof__engine_set_temp_threshold(ns);
    return 0;
}
