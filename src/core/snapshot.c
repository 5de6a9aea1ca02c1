/* SPDX-License-Identifier: MIT */
/*
 * Taking a snapshot: copy the live samples out of the heap map, aggregate them per call
 * stack with their estimates, add the cumulative per-stack counters, the peak picture, the
 * heap over time, lifetimes and each site's leak statistic (snapshot.h).
 */
#include "core/snapshot.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/atomic.h"
#include "core/engine.h"
#include "core/platform.h"
#include "memprof/memprof.h"

#define E memprof__engine

struct collect {
    struct memprof_snap_sample *samples;
    size_t n, cap;
};

static void collect_sample(void *ctx, const struct memprof_hm_entry *e)
{
    struct collect *c = ctx;
    if (c->n < c->cap)
        c->samples[c->n++] = (struct memprof_snap_sample){e->size, e->ts, e->stack_id};
}

static int by_live_bytes_desc(const void *a, const void *b)
{
    const struct memprof_snap_site *x = a, *y = b;
    if (x->live.bytes != y->live.bytes)
        return x->live.bytes < y->live.bytes ? 1 : -1;
    if (x->alloc_est_bytes != y->alloc_est_bytes)
        return x->alloc_est_bytes < y->alloc_est_bytes ? 1 : -1;
    return x->stack_id < y->stack_id ? -1 : x->stack_id > y->stack_id;
}

struct peak_ctx {
    struct memprof_snapshot *s;
    const uint32_t *site_of;
    size_t nids;
};

/* The variance counters are in units of rate^2 / 2^32 (engine.c, sample_weights()). */
static double var_of_q32(uint64_t q, uint64_t rate)
{
    return (double)q * ((double)rate * (double)rate / 4294967296.0);
}

static void peak_site(void *arg, uint32_t id, const struct memprof_stack *st)
{
    struct peak_ctx *c = arg;
    if (id >= c->nids || !c->site_of[id])
        return; /* a stack interned after the sites were listed */
    struct memprof_snap_site *site = &c->s->sites[c->site_of[id] - 1];
    site->peak = (struct memprof_est){
        .samples = memprof_atomic_load_relaxed(&st->peak_samples),
        .bytes = (double)memprof_atomic_load_relaxed(&st->peak_est_bytes),
        .bytes_var = var_of_q32(memprof_atomic_load_relaxed(&st->peak_var_q32), c->s->rate),
        .count = (double)memprof_atomic_load_relaxed(&st->peak_est_count_fp16) / 65536.0,
    };
}

/* The recorded peak, unless this snapshot's live heap is larger: then the peak is now. */
static void take_peak(struct memprof_snapshot *s, const uint32_t *site_of, size_t nids)
{
    struct peak_ctx c = {s, site_of, nids};
    struct memprof_hist_peak peak;
    memprof__hist_read_peak(&E.hist, &E.st, &peak, peak_site, &c);
    if (s->total.bytes >= (double)peak.bytes) {
        s->peak = s->total;
        s->peak_t_ns = s->duration_ns;
        for (size_t i = 0; i < s->nsites; i++)
            s->sites[i].peak = s->sites[i].live;
        return;
    }
    s->peak = (struct memprof_est){
        .samples = peak.samples,
        .bytes = (double)peak.bytes,
        .bytes_var = var_of_q32(peak.var_q32, s->rate),
        .count = (double)peak.count_fp16 / 65536.0,
    };
    s->peak_t_ns = peak.t_ns;
}

/* Each site's leak statistic from its survivors. The samples are grouped by stack with a
 * counting sort (`end` has room for nids + 1 entries, `work` for every sample), then each
 * group is judged (and sorted by time) by memprof__leak_site(): linear in the samples plus
 * the sort of each site's own. */
static void take_leaks(struct memprof_snapshot *s, const uint32_t *site_of, size_t nids,
                       size_t *end, struct memprof_leak_sample *work)
{
    memset(end, 0, (nids + 1) * sizeof *end);
    for (size_t i = 0; i < s->nsamples; i++)
        if (s->samples[i].stack_id < nids)
            end[s->samples[i].stack_id]++;
    for (size_t id = 1; id <= nids; id++)
        end[id] += end[id - 1]; /* end of each stack's group; end[nids] = all placed */
    for (size_t i = 0; i < s->nsamples; i++) {
        const struct memprof_snap_sample *smp = &s->samples[i];
        if (smp->stack_id < nids)
            work[--end[smp->stack_id]] = (struct memprof_leak_sample){
                smp->ts, (double)smp->size / memprof__est_prob(smp->size, s->rate)};
    }
    /* Now end[id] is where group id begins, and end[id + 1] where it ends. */
    uint64_t origin = memprof_atomic_load_relaxed(&E.origin_ns);
    for (size_t id = 0; id < nids; id++) {
        size_t n = end[id + 1] - end[id];
        if (!n || !site_of[id])
            continue;
        struct memprof_snap_site *site = &s->sites[site_of[id] - 1];
        memprof__leak_site(work + end[id], n, origin, s->timestamp_ns, site->lifetimes,
                           site->first_ns, &site->leak);
    }
}

const struct memprof_est *memprof__snapshot_view_est(const struct memprof_snap_site *site, int view,
                                                     struct memprof_est *buf)
{
    switch (view) {
    case MEMPROF_VIEW_LIVE:
        return site->live.samples ? &site->live : NULL;
    case MEMPROF_VIEW_PEAK:
        return site->peak.samples ? &site->peak : NULL;
    case MEMPROF_VIEW_ALLOC:
        *buf = (struct memprof_est){.samples = site->alloc_samples,
                                    .bytes = (double)site->alloc_est_bytes,
                                    .count = (double)site->alloc_est_count};
        return site->alloc_samples ? buf : NULL;
    case MEMPROF_VIEW_TEMPORARY:
        *buf = (struct memprof_est){.samples = site->temp_samples,
                                    .bytes = (double)site->temp_est_bytes,
                                    .count = (double)site->temp_est_count};
        return site->temp_samples ? buf : NULL;
    case MEMPROF_VIEW_LEAKS:
        *buf = (struct memprof_est){.samples = site->leak.samples, .bytes = site->leak.bytes};
        return site->leak.suspect ? buf : NULL;
    default:
        return NULL;
    }
}

/* qsort_r-free ordering of a view's site indexes: the values are computed once. */
struct ranked {
    double bytes;
    uint32_t site;
};

static int by_bytes_desc(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->site < y->site ? -1 : x->site > y->site;
}

/* Each view's ranking of the (already sorted) sites; `work` has room for nsites entries. */
static void rank_views(struct memprof_snapshot *s, struct ranked *work)
{
    for (int v = 0; v < 5; v++) {
        size_t n = 0;
        for (size_t i = 0; i < s->nsites; i++) {
            struct memprof_est buf;
            const struct memprof_est *e = memprof__snapshot_view_est(&s->sites[i], v, &buf);
            if (e && e->bytes > 0)
                work[n++] = (struct ranked){e->bytes, (uint32_t)i};
        }
        qsort(work, n, sizeof *work, by_bytes_desc);
        for (size_t i = 0; i < n; i++)
            s->view_order[v][i] = work[i].site;
        s->view_nsites[v] = n;
    }
}

/* The registry's threads, with the names of those still alive read afresh. */
static void take_threads(struct memprof_snapshot *s)
{
    memprof__threads_refresh(&E.threads);
    s->nthreads = memprof__threads_count(&E.threads);
    for (size_t i = 0; i < s->nthreads; i++) {
        uint64_t tid = 0;
        const char *name = memprof__threads_get(&E.threads, (unsigned)i, &tid);
        s->threads[i].tid = tid;
        snprintf(s->threads[i].name, sizeof s->threads[i].name, "%s", name ? name : "");
    }
}

static size_t align_up(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

int memprof__snapshot_take(struct memprof_snapshot **out)
{
    *out = NULL;
    int rc = memprof__engine_tables();
    if (rc)
        return rc;
    /* Upper bound: every open heap-map slot. Pages of the mapping that stay unused are never
     * touched. */
    unsigned active = memprof_atomic_load_acquire(&E.hm.active);
    size_t cap = (size_t)MEMPROF_HM_MIN_SEG << active;
    size_t off_samples = align_up(sizeof(struct memprof_snapshot));
    size_t off_series = align_up(off_samples + cap * sizeof(struct memprof_snap_sample));
    /* The series, the window in progress and this snapshot's own point. */
    size_t off_threads =
        align_up(off_series + (MEMPROF_SERIES_CAP + 2) * sizeof(struct memprof_hist_point));
    size_t off_work =
        align_up(off_threads + MEMPROF_MAX_THREADS * sizeof(struct memprof_snap_thread));
    /* Work space for the leak statistic: a time and a weight per sample. */
    size_t bytes = off_work + cap * sizeof(struct memprof_leak_sample);
    unsigned char *mem = memprof__pf_map(bytes);
    if (!mem)
        return -ENOMEM;
    struct memprof_snapshot *s = (struct memprof_snapshot *)mem;
    s->map_bytes = bytes;
    s->rate = E.rate;
    s->timestamp_ns = memprof__pf_now_ns();
    uint64_t origin = memprof_atomic_load_relaxed(&E.origin_ns);
    s->duration_ns = origin && s->timestamp_ns > origin ? s->timestamp_ns - origin : 0;
    s->temp_threshold_ns = memprof__engine_temp_threshold();
    s->series = (struct memprof_hist_point *)(mem + off_series);
    s->nseries = memprof__hist_read_series(&E.hist, s->series);
    s->threads = (struct memprof_snap_thread *)(mem + off_threads);
    take_threads(s);
    s->stacks = &E.st;
    s->samples = (struct memprof_snap_sample *)(mem + off_samples);
    struct collect c = {.samples = s->samples, .cap = cap};
    memprof__hm_for_each(&E.hm, collect_sample, &c);
    s->nsamples = c.n;

    /* Stack ids are read after the samples: a sample's stack is interned before the sample
     * is inserted, so every collected sample's id is below this bound. */
    size_t nids = memprof__st_nids(&E.st);
    size_t off_sites = align_up(nids * sizeof(uint32_t));
    size_t off_views = align_up(off_sites + (nids ? nids : 1) * sizeof(struct memprof_snap_site));
    size_t off_rank = align_up(off_views + 5 * (nids ? nids : 1) * sizeof(uint32_t));
    size_t off_ends = align_up(off_rank + (nids ? nids : 1) * sizeof(struct ranked));
    s->sites_bytes = off_ends + (nids + 1) * sizeof(size_t);
    unsigned char *smem = memprof__pf_map(s->sites_bytes);
    if (!smem) {
        memprof__snapshot_free(s);
        return -ENOMEM;
    }
    s->sites_map = smem;
    uint32_t *site_of = (uint32_t *)smem; /* stack id -> site index + 1 */
    s->sites = (struct memprof_snap_site *)(smem + off_sites);

    /* Every published stack that ever allocated gets a site, live or not. */
    for (size_t id = 0; id < nids; id++) {
        struct memprof_stack *st = memprof__st_get(&E.st, (uint32_t)id);
        if (!st || memprof_atomic_load_relaxed(&st->alloc_samples) == 0)
            continue;
        struct memprof_snap_site *site = &s->sites[s->nsites];
        site_of[id] = (uint32_t)++s->nsites;
        site->stack_id = (uint32_t)id;
        site->thread = st->thread;
        site->first_ns = memprof_atomic_load_relaxed(&st->first_ns);
        site->alloc_samples = memprof_atomic_load_relaxed(&st->alloc_samples);
        site->alloc_est_bytes = memprof_atomic_load_relaxed(&st->alloc_est_bytes);
        site->alloc_est_count =
            (memprof_atomic_load_relaxed(&st->alloc_est_count_fp16) + 32768) >> 16;
        site->temp_samples = memprof_atomic_load_relaxed(&st->temp_samples);
        site->temp_est_bytes = memprof_atomic_load_relaxed(&st->temp_est_bytes);
        site->temp_est_count =
            (memprof_atomic_load_relaxed(&st->temp_est_count_fp16) + 32768) >> 16;
        for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++)
            site->lifetimes[b] = memprof_atomic_load_relaxed(&st->lifetimes[b]);
    }
    for (size_t i = 0; i < s->nsamples; i++) {
        const struct memprof_snap_sample *smp = &s->samples[i];
        memprof__est_add(&s->total, smp->size, s->rate);
        if (smp->stack_id >= nids)
            continue; /* cannot happen (see above); never index out of bounds */
        /* The stack's counters may not show the sample yet (they are updated right after
         * the insert): give it a site anyway. */
        if (!site_of[smp->stack_id]) {
            struct memprof_stack *st = memprof__st_get(&E.st, smp->stack_id);
            s->sites[s->nsites].stack_id = smp->stack_id;
            s->sites[s->nsites].thread = st ? st->thread : 0;
            site_of[smp->stack_id] = (uint32_t)++s->nsites;
        }
        struct memprof_snap_site *site = &s->sites[site_of[smp->stack_id] - 1];
        memprof__est_add(&site->live, smp->size, s->rate);
    }
    take_leaks(s, site_of, nids, (size_t *)(smem + off_ends),
               (struct memprof_leak_sample *)(mem + off_work));
    take_peak(s, site_of, nids);
    /* The series ends with this snapshot. */
    s->series[s->nseries++] =
        (struct memprof_hist_point){s->duration_ns, memprof__est_round(s->total.bytes),
                                    memprof_atomic_load_relaxed(&E.alloc_est_bytes)};
    qsort(s->sites, s->nsites, sizeof *s->sites, by_live_bytes_desc);
    for (int v = 0; v < 5; v++)
        s->view_order[v] = (uint32_t *)(smem + off_views) + (size_t)v * (nids ? nids : 1);
    rank_views(s, (struct ranked *)(smem + off_rank));
    s->truncated_stacks = memprof_atomic_load_relaxed(&E.truncated_stacks);
    s->heap_map_full_drops = memprof_atomic_load_relaxed(&E.hm.full_drops);
    s->stack_table_overflows = memprof_atomic_load_relaxed(&E.st.overflows);
    *out = s;
    return 0;
}

void memprof__snapshot_free(struct memprof_snapshot *s)
{
    if (!s)
        return;
    memprof__pf_unmap(s->sites_map, s->sites_bytes);
    memprof__pf_unmap(s, s->map_bytes);
}

const uintptr_t *memprof__snapshot_site_frames(const struct memprof_snapshot *s,
                                               const struct memprof_snap_site *site,
                                               unsigned *depth)
{
    struct memprof_stack *st = memprof__st_get(s->stacks, site->stack_id);
    *depth = st ? st->depth : 0;
    return st ? memprof__st_frames(s->stacks, st) : NULL;
}
