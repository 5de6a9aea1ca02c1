/* SPDX-License-Identifier: MIT */
/*
 * The views of a profile (profile.h): which numbers of a stack each view shows, the views'
 * names, the lifetime buckets with their quantiles, and the profile's sites (its stacks
 * merged across the threads that allocated them). Shared by every writer and reader so a
 * view means the same in every format.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "export/profile.h"

/* memprof__prefer_peak(): the live view is as good as empty below this fraction of the peak
 * (an interpreter's start-up leftovers at exit, against the script's data at its peak). */
#define PEAK_OVER_LIVE 16

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

bool memprof__prefer_peak(const struct memprof_profile *p)
{
    uint64_t live = 0, peak = 0;
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        live = live + st->inuse_space < live ? UINT64_MAX : live + st->inuse_space;
        peak = peak + st->peak_space < peak ? UINT64_MAX : peak + st->peak_space;
    }
    return peak > 0 && live < peak / PEAK_OVER_LIVE;
}

uint64_t memprof__pstack_lifetime_quantile(const struct memprof_pstack *st, double q)
{
    return memprof__lifetime_quantile(st->lifetimes, q);
}

/* ---- sites: stacks merged across threads -------------------------------------------------- */

/* Stacks ordered by their frames (then anything: equal frames end up adjacent). */
static int by_frames(const void *a, const void *b)
{
    const struct memprof_pstack *x = *(const struct memprof_pstack *const *)a;
    const struct memprof_pstack *y = *(const struct memprof_pstack *const *)b;
    if (x->nframes != y->nframes)
        return x->nframes < y->nframes ? -1 : 1;
    return memcmp(x->frames, y->frames, x->nframes * sizeof *x->frames);
}

static int by_inuse_desc(const void *a, const void *b)
{
    const struct memprof_pstack *x = a, *y = b;
    if (x->inuse_space != y->inuse_space)
        return x->inuse_space < y->inuse_space ? 1 : -1;
    if (x->alloc_space != y->alloc_space)
        return x->alloc_space < y->alloc_space ? 1 : -1;
    return 0;
}

static uint64_t sat(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* Adds stack b's numbers into a (the same call path, another thread). */
static void merge_into(struct memprof_pstack *a, const struct memprof_pstack *b)
{
    a->alloc_objects = sat(a->alloc_objects, b->alloc_objects);
    a->alloc_space = sat(a->alloc_space, b->alloc_space);
    a->inuse_objects = sat(a->inuse_objects, b->inuse_objects);
    a->inuse_space = sat(a->inuse_space, b->inuse_space);
    a->inuse_space_var += b->inuse_space_var;
    a->inuse_objects_var += b->inuse_objects_var;
    a->live_samples = sat(a->live_samples, b->live_samples);
    a->alloc_samples = sat(a->alloc_samples, b->alloc_samples);
    a->peak_objects = sat(a->peak_objects, b->peak_objects);
    a->peak_space = sat(a->peak_space, b->peak_space);
    a->peak_samples = sat(a->peak_samples, b->peak_samples);
    a->peak_space_var += b->peak_space_var;
    a->temp_objects = sat(a->temp_objects, b->temp_objects);
    a->temp_space = sat(a->temp_space, b->temp_space);
    a->temp_samples = sat(a->temp_samples, b->temp_samples);
    for (unsigned k = 0; k < MEMPROF_LIFETIME_BUCKETS; k++)
        a->lifetimes[k] = a->lifetimes[k] + b->lifetimes[k] < a->lifetimes[k]
                              ? UINT32_MAX
                              : a->lifetimes[k] + b->lifetimes[k];
    /* Leak verdicts are per thread's survivors; a site is a suspect if one of its threads
     * is, with the suspects' bytes and rates. */
    if (b->leak_suspect) {
        if (!a->leak_suspect)
            a->leak_space = a->leak_samples = 0, a->leak_rate = 0;
        a->leak_space = sat(a->leak_space, b->leak_space);
        a->leak_samples = sat(a->leak_samples, b->leak_samples);
        a->leak_rate += b->leak_rate;
        a->leak_suspect = 1;
    } else if (!a->leak_suspect) {
        a->leak_space = sat(a->leak_space, b->leak_space);
        a->leak_samples = sat(a->leak_samples, b->leak_samples);
        a->leak_rate += b->leak_rate;
    }
    if (a->thread != b->thread)
        a->thread = 0; /* several threads */
}

int memprof__profile_sites(const struct memprof_profile *p, struct memprof_profile **out)
{
    *out = NULL;
    struct memprof_profile *m = malloc(sizeof *m);
    const struct memprof_pstack **order = malloc((p->nstacks ? p->nstacks : 1) * sizeof *order);
    struct memprof_pstack *stacks = malloc((p->nstacks ? p->nstacks : 1) * sizeof *stacks);
    if (!m || !order || !stacks) {
        free(m);
        free(order);
        free(stacks);
        return -ENOMEM;
    }
    for (size_t i = 0; i < p->nstacks; i++)
        order[i] = &p->stacks[i];
    qsort(order, p->nstacks, sizeof *order, by_frames);
    size_t n = 0;
    for (size_t i = 0; i < p->nstacks; i++) {
        if (n && by_frames(&order[i], &order[i - 1]) == 0)
            merge_into(&stacks[n - 1], order[i]);
        else
            stacks[n++] = *order[i];
    }
    free(order);
    qsort(stacks, n, sizeof *stacks, by_inuse_desc);
    /* Everything else is the original's: frames, series, threads and strings stay owned by
     * it, so the copy owns only its stacks (memprof__profile_sites_free()). */
    *m = *p;
    m->stacks = stacks;
    m->nstacks = n;
    *out = m;
    return 0;
}

void memprof__profile_sites_free(struct memprof_profile *m)
{
    if (!m)
        return;
    free(m->stacks);
    free(m);
}
