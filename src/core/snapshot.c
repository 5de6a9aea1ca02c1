/* SPDX-License-Identifier: MIT */
/*
 * Taking a snapshot: copy the live samples out of the heap map, aggregate them per call
 * stack with their estimates, and add the cumulative per-stack counters (snapshot.h).
 */
#include "core/snapshot.h"

#include <errno.h>
#include <stdlib.h>

#include "common/atomic.h"
#include "core/engine.h"
#include "core/platform.h"

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

static size_t align_up(size_t n)
{
    return (n + 63) & ~(size_t)63;
}

int memprof__snapshot_take(struct memprof_snapshot **out)
{
    *out = NULL;
    int rc = memprof__engine_readable();
    if (rc)
        return rc;
    /* Upper bound: every open heap-map slot. Pages of the mapping that stay unused are never
     * touched. */
    unsigned active = memprof_atomic_load_acquire(&E.hm.active);
    size_t cap = (size_t)MEMPROF_HM_MIN_SEG << active;
    size_t off_samples = align_up(sizeof(struct memprof_snapshot));
    size_t bytes = off_samples + cap * sizeof(struct memprof_snap_sample);
    unsigned char *mem = memprof__pf_map(bytes);
    if (!mem)
        return -ENOMEM;
    struct memprof_snapshot *s = (struct memprof_snapshot *)mem;
    s->map_bytes = bytes;
    s->rate = E.rate;
    s->timestamp_ns = memprof__pf_now_ns();
    s->stacks = &E.st;
    s->samples = (struct memprof_snap_sample *)(mem + off_samples);
    struct collect c = {.samples = s->samples, .cap = cap};
    memprof__hm_for_each(&E.hm, collect_sample, &c);
    s->nsamples = c.n;

    /* Stack ids are read after the samples: a sample's stack is interned before the sample
     * is inserted, so every collected sample's id is below this bound. */
    size_t nids = memprof__st_nids(&E.st);
    size_t off_sites = align_up(nids * sizeof(uint32_t));
    s->sites_bytes = off_sites + (nids ? nids : 1) * sizeof(struct memprof_snap_site);
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
        site->alloc_samples = memprof_atomic_load_relaxed(&st->alloc_samples);
        site->alloc_est_bytes = memprof_atomic_load_relaxed(&st->alloc_est_bytes);
        site->alloc_est_count =
            (memprof_atomic_load_relaxed(&st->alloc_est_count_fp16) + 32768) >> 16;
    }
    for (size_t i = 0; i < s->nsamples; i++) {
        const struct memprof_snap_sample *smp = &s->samples[i];
        memprof__est_add(&s->total, smp->size, s->rate);
        if (smp->stack_id >= nids)
            continue; /* cannot happen (see above); never index out of bounds */
        /* The stack's counters may not show the sample yet (they are updated right after
         * the insert): give it a site anyway. */
        if (!site_of[smp->stack_id]) {
            s->sites[s->nsites].stack_id = smp->stack_id;
            site_of[smp->stack_id] = (uint32_t)++s->nsites;
        }
        struct memprof_snap_site *site = &s->sites[site_of[smp->stack_id] - 1];
        memprof__est_add(&site->live, smp->size, s->rate);
    }
    qsort(s->sites, s->nsites, sizeof *s->sites, by_live_bytes_desc);
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
