/* SPDX-License-Identifier: MIT */
/*
 * A snapshot into the writers' profile model (export/profile.h): each site's stack resolved
 * (resolve/stacks.h), its frames deduplicated, its estimates copied. The API layer's job, so
 * that export/ knows nothing of the engine or the resolver. Also the writers' notion of an
 * allocator function, public for bindings that name sites themselves.
 */
#include "api/snapshot_profile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/hash.h"
#include "core/snapshot.h"
#include "resolve/stacks.h"
#include "resolve/symbols.h"

/* Frames are equal when every field is: strings are interned by the resolver, so comparing
 * their pointers is enough. */
static uint64_t frame_hash(const struct memprof_rframe *f)
{
    uint64_t h = memprof__mix64(f->address) ^ memprof__mix64((uintptr_t)f->function + f->line);
    return memprof__mix64(h ^ (uintptr_t)f->file ^ ((uint64_t)f->flags << 56));
}

static int same_frame(const struct memprof_pframe *p, const struct memprof_rframe *f)
{
    return p->address == f->address && p->function == f->function && p->file == f->file &&
           p->line == f->line && p->flags == f->flags && p->module == f->module;
}

static uint64_t wall_clock_at(uint64_t mono_ns)
{
    struct timespec rt, mono;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC, &mono);
    uint64_t now_rt = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    uint64_t now_mono = (uint64_t)mono.tv_sec * 1000000000u + (uint64_t)mono.tv_nsec;
    return now_rt - (now_mono > mono_ns ? now_mono - mono_ns : 0);
}

int memprof__profile_from_snapshot(const struct memprof_snapshot *s, struct memprof_profile **out)
{
    *out = NULL;
    struct memprof_profile *p = calloc(1, sizeof *p);
    const struct memprof_rstack **rs = calloc(s->nsites ? s->nsites : 1, sizeof *rs);
    size_t total = 0;
    if (!p || !rs)
        goto oom;
    for (size_t i = 0; i < s->nsites; i++) {
        rs[i] = memprof__resolve_stack(s->stacks, s->sites[i].stack_id);
        total += rs[i] ? rs[i]->n : 0;
    }
    /* One allocation for the index arrays; frames and stacks separately (they may grow). */
    uint32_t *idx = malloc((total ? total : 1) * sizeof *idx);
    p->arena = idx;
    p->stacks = calloc(s->nsites ? s->nsites : 1, sizeof *p->stacks);
    size_t cap = 1024;
    while (cap < total * 2)
        cap <<= 1;
    uint32_t *table = calloc(cap, sizeof *table); /* frame hash -> index + 1 */
    p->frames = malloc((total ? total : 1) * sizeof *p->frames);
    if (!idx || !p->stacks || !table || !p->frames) {
        free(table);
        goto oom;
    }
    p->sampling_rate = s->rate;
    p->time_unix_ns = wall_clock_at(s->timestamp_ns);
    for (size_t i = 0; i < s->nsites; i++) {
        const struct memprof_snap_site *site = &s->sites[i];
        struct memprof_pstack *st = &p->stacks[p->nstacks++];
        st->frames = idx;
        for (unsigned j = 0; rs[i] && j < rs[i]->n; j++) {
            const struct memprof_rframe *f = &rs[i]->frames[j];
            size_t k = frame_hash(f) & (cap - 1);
            while (table[k] && !same_frame(&p->frames[table[k] - 1], f))
                k = (k + 1) & (cap - 1);
            if (!table[k]) {
                p->frames[p->nframes] = (struct memprof_pframe){.function = f->function,
                                                                .file = f->file,
                                                                .module = f->module,
                                                                .build_id = f->build_id,
                                                                .line = f->line,
                                                                .flags = f->flags,
                                                                .address = f->address,
                                                                .load_bias = f->load_bias,
                                                                .sym_offset = f->sym_offset,
                                                                .map_start = f->map_start,
                                                                .map_limit = f->map_limit,
                                                                .map_offset = f->map_offset,
                                                                .system_name = f->system_name};
                table[k] = (uint32_t)++p->nframes;
            }
            *idx++ = table[k] - 1;
            st->nframes++;
        }
        st->alloc_objects = site->alloc_est_count;
        st->alloc_space = site->alloc_est_bytes;
        st->inuse_objects = memprof__est_round(site->live.count);
        st->inuse_space = memprof__est_round(site->live.bytes);
        st->inuse_space_var = site->live.bytes_var;
        st->inuse_objects_var = site->live.count_var;
        st->live_samples = site->live.samples;
        st->alloc_samples = site->alloc_samples;
        st->peak_objects = memprof__est_round(site->peak.count);
        st->peak_space = memprof__est_round(site->peak.bytes);
        st->peak_samples = site->peak.samples;
        st->peak_space_var = site->peak.bytes_var;
        st->temp_objects = site->temp_est_count;
        st->temp_space = site->temp_est_bytes;
        st->temp_samples = site->temp_samples;
        memcpy(st->lifetimes, site->lifetimes, sizeof st->lifetimes);
        st->leak_space = memprof__est_round(site->leak.bytes);
        st->leak_samples = site->leak.samples;
        st->leak_rate = site->leak.rate;
        st->leak_suspect = site->leak.suspect;
        st->thread = site->thread <= s->nthreads ? site->thread : 0;
    }
    free(table);
    free(rs);
    rs = NULL;
    p->inuse_space = memprof__est_round(s->total.bytes);
    p->inuse_objects = memprof__est_round(s->total.count);
    p->inuse_space_var = s->total.bytes_var;
    p->inuse_objects_var = s->total.count_var;
    p->live_samples = s->total.samples;
    p->peak_space = memprof__est_round(s->peak.bytes);
    p->peak_objects = memprof__est_round(s->peak.count);
    p->peak_samples = s->peak.samples;
    p->peak_space_var = s->peak.bytes_var;
    p->peak_time_ns = s->peak_t_ns;
    p->duration_ns = s->duration_ns;
    p->temp_threshold_ns = s->temp_threshold_ns;
    if (s->nseries) {
        p->series = malloc(s->nseries * sizeof *p->series);
        if (!p->series)
            goto oom;
        for (size_t i = 0; i < s->nseries; i++)
            p->series[i] =
                (struct memprof_ppoint){s->series[i].t_ns, s->series[i].live, s->series[i].alloc};
        p->nseries = s->nseries;
    }
    if (s->nthreads) {
        p->threads = calloc(s->nthreads, sizeof *p->threads);
        p->thread_names = malloc(s->nthreads * sizeof s->threads->name);
        if (!p->threads || !p->thread_names)
            goto oom;
        for (size_t i = 0; i < s->nthreads; i++) {
            char *name = p->thread_names + i * sizeof s->threads->name;
            memcpy(name, s->threads[i].name, sizeof s->threads->name);
            p->threads[i] = (struct memprof_pthread){s->threads[i].tid, name[0] ? name : NULL};
        }
        p->nthreads = s->nthreads;
    }
    p->truncated_stacks = s->truncated_stacks;
    p->dropped_samples = s->heap_map_full_drops;
    p->stack_overflows = s->stack_table_overflows;
    memprof__sym_counts(&p->total_addresses, &p->unresolved_addresses);
    *out = p;
    return 0;
oom:
    free(rs);
    memprof__profile_free(p);
    return -ENOMEM;
}

int memprof_is_allocator_function(const char *name)
{
    if (!name)
        return -EINVAL;
    struct memprof_pframe f = {.function = name};
    return memprof__pframe_is_wrapper(&f) ? 1 : 0;
}
