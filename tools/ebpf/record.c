/* SPDX-License-Identifier: MIT */
/*
 * The bookkeeping of record.h. Everything is keyed the way the library keys it: a stack is
 * its frames plus the thread that allocated (pprof keeps one sample per thread; the views
 * merge threads per site), a sample is its serial number, never its address, which the
 * allocator hands out again. Estimates are the library's (common/estimate.h): a sample of s
 * bytes weighs s / p(s) bytes and 1 / p(s) allocations, p(s) = 1 - exp(-s/R). The live
 * figures of the profile are summed afresh from the live samples at the end, so rounding
 * in the running sums (used only to find the peak) never reaches them. Each site's leak
 * statistic is the engine's (common/leakstat.h), from its live samples' allocation times, its
 * first sample and its lifetime histogram, over the time of the record.
 */
#define _GNU_SOURCE
#include "record.h"

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/estimate.h"
#include "common/leakstat.h"
#include "common/lifetime.h"
#include "memprof/memprof.h"

#define MAX_SERIES         1024
#define FIRST_SERIES_NS    10000000ull /* 10 ms between points, doubled as the run grows */
#define TEMP_THRESHOLD_NS  1000000ull  /* the library's default (engine.h) */
#define PEAK_MARGIN        64          /* a new peak picture when 1/64 above the last */
#define NO_STACK_FRAME_FMT "[stack not recorded: bpf_get_stack() error %d]"

struct rstack {
    uint64_t hash;
    uint32_t thread; /* index into threads + 1 */
    uint32_t nframes;
    size_t first; /* into frame_pool */
    bool truncated;
    struct memprof_est alloc, live, temp, peak, final_live;
    uint32_t lifetimes[MEMPROF_LIFETIME_BUCKETS];
    uint64_t first_ns; /* its first sample's time */
    struct memprof_leak_stat leak;
};

struct rsample {
    uint64_t serial, size, t_ns;
    uint32_t stack;
    struct rsample *next;
};

struct rthread {
    uint32_t tid;
    char *name;
};

struct memprof_ebpf_record {
    struct memprof_ebpf_maps *maps;
    uint64_t rate, start_ns;
    /* Frames: addresses interned (open addressing, address -> frame index + 1). */
    struct memprof_pframe *frames;
    size_t nframes, capframes;
    uint64_t *addr_keys;
    uint32_t *addr_vals;
    size_t addr_cap;
    char **owned_strings; /* labels of stackless frames */
    size_t nowned;
    /* Stacks: open addressing on the hash of (thread, frames), value index + 1. */
    struct rstack *stacks;
    size_t nstacks, capstacks;
    uint32_t *stack_slots;
    size_t stack_cap;
    uint32_t *frame_pool;
    size_t npool, cappool;
    /* Live samples by serial (chained). */
    struct rsample **buckets;
    size_t nbuckets, nlive;
    struct rthread *threads;
    size_t nthreads;
    /* Whole heap, running. */
    struct memprof_est live_total, peak_total;
    uint64_t peak_time_ns;
    struct memprof_ppoint *series;
    size_t nseries;
    uint64_t series_step, last_point;
    double alloc_bytes_total;
};

static uint64_t mix(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

struct memprof_ebpf_record *memprof__ebpf_record_new(struct memprof_ebpf_maps *maps, uint64_t rate,
                                                     uint64_t start_ns)
{
    struct memprof_ebpf_record *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->maps = maps;
    r->rate = rate;
    r->start_ns = start_ns;
    r->series_step = FIRST_SERIES_NS;
    r->nbuckets = 1024;
    r->buckets = calloc(r->nbuckets, sizeof *r->buckets);
    if (!r->buckets) {
        free(r);
        return NULL;
    }
    return r;
}

/* ---- frames ------------------------------------------------------------------------------ */

static int push_frame(struct memprof_ebpf_record *r, const struct memprof_pframe *f)
{
    if (r->nframes == r->capframes) {
        size_t nc = r->capframes ? 2 * r->capframes : 256;
        struct memprof_pframe *nf = realloc(r->frames, nc * sizeof *nf);
        if (!nf)
            return -ENOMEM;
        r->frames = nf;
        r->capframes = nc;
    }
    r->frames[r->nframes++] = *f;
    return 0;
}

static int grow_addrs(struct memprof_ebpf_record *r)
{
    size_t nc = r->addr_cap ? 2 * r->addr_cap : 1024;
    uint64_t *k = calloc(nc, sizeof *k);
    uint32_t *v = calloc(nc, sizeof *v);
    if (!k || !v) {
        free(k);
        free(v);
        return -ENOMEM;
    }
    for (size_t i = 0; i < r->addr_cap; i++) {
        if (!r->addr_vals[i])
            continue;
        size_t j = mix(r->addr_keys[i]) & (nc - 1);
        while (v[j])
            j = (j + 1) & (nc - 1);
        k[j] = r->addr_keys[i];
        v[j] = r->addr_vals[i];
    }
    free(r->addr_keys);
    free(r->addr_vals);
    r->addr_keys = k;
    r->addr_vals = v;
    r->addr_cap = nc;
    return 0;
}

/* The frame of a return address: its module, build id and load bias from the maps now. */
static long frame_of(struct memprof_ebpf_record *r, uint64_t addr)
{
    if (r->nframes * 2 >= r->addr_cap && grow_addrs(r) != 0)
        return -1;
    size_t j = mix(addr) & (r->addr_cap - 1);
    while (r->addr_vals[j]) {
        if (r->addr_keys[j] == addr)
            return (long)r->addr_vals[j] - 1;
        j = (j + 1) & (r->addr_cap - 1);
    }
    struct memprof_pframe f = {.address = addr, .flags = MEMPROF_FRAME_UNRESOLVED};
    const struct memprof_ebpf_mapping *m = memprof__ebpf_maps_find(r->maps, addr);
    if (m) {
        const struct memprof_ebpf_module *mod = &r->maps->modules[m->module];
        f.module = mod->open;
        f.build_id = mod->build_id[0] ? mod->build_id : NULL;
        f.load_bias = m->bias;
        f.map_start = m->start;
        f.map_limit = m->end;
        f.map_offset = m->offset;
    }
    if (push_frame(r, &f) != 0)
        return -1;
    r->addr_keys[j] = addr;
    r->addr_vals[j] = (uint32_t)r->nframes;
    return (long)r->nframes - 1;
}

/* One frame per bpf_get_stack() error, saying so where the stack would be. */
static long stackless_frame(struct memprof_ebpf_record *r, int err)
{
    char label[96];
    snprintf(label, sizeof label, NO_STACK_FRAME_FMT, err);
    for (size_t i = 0; i < r->nframes; i++)
        if (!r->frames[i].module && r->frames[i].function &&
            strcmp(r->frames[i].function, label) == 0)
            return (long)i;
    char **no = realloc(r->owned_strings, (r->nowned + 1) * sizeof *no);
    if (!no)
        return -1;
    r->owned_strings = no;
    if (!(no[r->nowned] = strdup(label)))
        return -1;
    struct memprof_pframe f = {.function = no[r->nowned++]};
    if (push_frame(r, &f) != 0)
        return -1;
    return (long)r->nframes - 1;
}

/* ---- threads and stacks -------------------------------------------------------------------- */

static uint32_t thread_of(struct memprof_ebpf_record *r, uint32_t tid)
{
    for (size_t i = r->nthreads; i-- > 0;)
        if (r->threads[i].tid == tid)
            return (uint32_t)i + 1;
    struct rthread *nt = realloc(r->threads, (r->nthreads + 1) * sizeof *nt);
    if (!nt)
        return 0;
    r->threads = nt;
    char path[64], name[32] = "";
    snprintf(path, sizeof path, "/proc/%d/task/%u/comm", (int)r->maps->pid, tid);
    FILE *f = fopen(path, "re");
    if (f) {
        if (fgets(name, sizeof name, f))
            name[strcspn(name, "\n")] = 0;
        fclose(f);
    }
    nt[r->nthreads] = (struct rthread){tid, name[0] ? strdup(name) : NULL};
    return (uint32_t)++r->nthreads;
}

static bool stack_equal(const struct memprof_ebpf_record *r, const struct rstack *s,
                        uint32_t thread, const uint32_t *frames, uint32_t n)
{
    return s->thread == thread && s->nframes == n &&
           memcmp(r->frame_pool + s->first, frames, n * sizeof *frames) == 0;
}

static int grow_stack_slots(struct memprof_ebpf_record *r)
{
    size_t nc = r->stack_cap ? 2 * r->stack_cap : 1024;
    uint32_t *slots = calloc(nc, sizeof *slots);
    if (!slots)
        return -ENOMEM;
    for (size_t i = 0; i < r->nstacks; i++) {
        size_t j = r->stacks[i].hash & (nc - 1);
        while (slots[j])
            j = (j + 1) & (nc - 1);
        slots[j] = (uint32_t)i + 1;
    }
    free(r->stack_slots);
    r->stack_slots = slots;
    r->stack_cap = nc;
    return 0;
}

static long stack_of(struct memprof_ebpf_record *r, uint32_t thread, const uint32_t *frames,
                     uint32_t n, bool truncated)
{
    uint64_t h = mix(thread + 0x9e3779b97f4a7c15ull);
    for (uint32_t i = 0; i < n; i++)
        h = mix(h ^ frames[i]);
    if (r->nstacks * 2 >= r->stack_cap && grow_stack_slots(r) != 0)
        return -1;
    size_t j = h & (r->stack_cap - 1);
    while (r->stack_slots[j]) {
        struct rstack *s = &r->stacks[r->stack_slots[j] - 1];
        if (s->hash == h && stack_equal(r, s, thread, frames, n))
            return (long)r->stack_slots[j] - 1;
        j = (j + 1) & (r->stack_cap - 1);
    }
    if (r->npool + n > r->cappool) {
        size_t nc = 2 * (r->npool + n) + 1024;
        uint32_t *np = realloc(r->frame_pool, nc * sizeof *np);
        if (!np)
            return -1;
        r->frame_pool = np;
        r->cappool = nc;
    }
    if (r->nstacks == r->capstacks) {
        size_t nc = r->capstacks ? 2 * r->capstacks : 256;
        struct rstack *ns = realloc(r->stacks, nc * sizeof *ns);
        if (!ns)
            return -1;
        r->stacks = ns;
        r->capstacks = nc;
    }
    struct rstack *s = &r->stacks[r->nstacks];
    memset(s, 0, sizeof *s);
    s->hash = h;
    s->thread = thread;
    s->nframes = n;
    s->first = r->npool;
    s->truncated = truncated;
    memcpy(r->frame_pool + r->npool, frames, n * sizeof *frames);
    r->npool += n;
    r->stack_slots[j] = (uint32_t)++r->nstacks;
    return (long)r->nstacks - 1;
}

/* ---- samples ------------------------------------------------------------------------------- */

/* The running sums less one sample (the inverse of memprof__est_add()). */
static void est_sub(struct memprof_est *e, uint64_t size, uint64_t rate)
{
    struct memprof_est one = {0};
    memprof__est_add(&one, size, rate);
    e->samples -= one.samples;
    e->bytes -= one.bytes;
    e->bytes_var -= one.bytes_var;
    e->count -= one.count;
    e->count_var -= one.count_var;
}

static void add_point(struct memprof_ebpf_record *r, uint64_t t)
{
    if (r->nseries && t - r->last_point < r->series_step)
        return;
    if (r->nseries == MAX_SERIES) { /* keep every other point, at twice the step */
        for (size_t i = 0; i < MAX_SERIES / 2; i++)
            r->series[i] = r->series[2 * i];
        r->nseries = MAX_SERIES / 2;
        r->series_step *= 2;
    }
    if (!r->series && !(r->series = malloc(MAX_SERIES * sizeof *r->series)))
        return;
    r->series[r->nseries++] =
        (struct memprof_ppoint){.t_ns = t,
                                .live = memprof__est_round(r->live_total.bytes),
                                .alloc = memprof__est_round(r->alloc_bytes_total)};
    r->last_point = t;
}

/* A new peak picture when the live estimate passes the last one by a margin. */
static void check_peak(struct memprof_ebpf_record *r, uint64_t t)
{
    if (r->live_total.bytes <= r->peak_total.bytes * (1.0 + 1.0 / PEAK_MARGIN))
        return;
    r->peak_total = r->live_total;
    r->peak_time_ns = t;
    for (size_t i = 0; i < r->nstacks; i++)
        r->stacks[i].peak = r->stacks[i].live;
}

static int on_alloc(struct memprof_ebpf_record *r, const struct memprof_ebpf_event *e)
{
    uint32_t thread = thread_of(r, e->tid);
    uint32_t frames[MEMPROF_EBPF_MAX_FRAMES];
    uint32_t n = 0;
    if (e->nframes < 0) {
        long f = stackless_frame(r, -e->nframes);
        if (f < 0)
            return -ENOMEM;
        frames[n++] = (uint32_t)f;
    }
    for (int i = 0; i < e->nframes && i < MEMPROF_EBPF_MAX_FRAMES; i++) {
        if (!e->frames[i])
            break;
        long f = frame_of(r, e->frames[i]);
        if (f < 0)
            return -ENOMEM;
        frames[n++] = (uint32_t)f;
    }
    long s = stack_of(r, thread, frames, n, e->nframes >= MEMPROF_EBPF_MAX_FRAMES);
    if (s < 0)
        return -ENOMEM;
    struct rsample *smp = malloc(sizeof *smp);
    if (!smp)
        return -ENOMEM;
    uint64_t t = e->time_ns > r->start_ns ? e->time_ns - r->start_ns : 0;
    *smp = (struct rsample){e->serial, e->size, t, (uint32_t)s, NULL};
    size_t b = mix(e->serial) & (r->nbuckets - 1);
    smp->next = r->buckets[b];
    r->buckets[b] = smp;
    r->nlive++;
    struct rstack *st = &r->stacks[s];
    if (!st->alloc.samples)
        st->first_ns = t;
    memprof__est_add(&st->alloc, e->size, r->rate);
    memprof__est_add(&st->live, e->size, r->rate);
    memprof__est_add(&r->live_total, e->size, r->rate);
    r->alloc_bytes_total += (double)e->size / memprof__est_prob(e->size, r->rate);
    check_peak(r, t);
    add_point(r, t);
    if (r->nlive > 2 * r->nbuckets) { /* rehash into twice the buckets */
        size_t nb = 2 * r->nbuckets;
        struct rsample **nbk = calloc(nb, sizeof *nbk);
        if (nbk) {
            for (size_t i = 0; i < r->nbuckets; i++)
                for (struct rsample *x = r->buckets[i], *nx; x; x = nx) {
                    nx = x->next;
                    size_t k = mix(x->serial) & (nb - 1);
                    x->next = nbk[k];
                    nbk[k] = x;
                }
            free(r->buckets);
            r->buckets = nbk;
            r->nbuckets = nb;
        }
    }
    return 0;
}

static void on_free(struct memprof_ebpf_record *r, const struct memprof_ebpf_event *e)
{
    size_t b = mix(e->serial) & (r->nbuckets - 1);
    for (struct rsample **pp = &r->buckets[b]; *pp; pp = &(*pp)->next) {
        struct rsample *smp = *pp;
        if (smp->serial != e->serial)
            continue;
        *pp = smp->next;
        r->nlive--;
        uint64_t t = e->time_ns > r->start_ns ? e->time_ns - r->start_ns : 0;
        uint64_t life = t > smp->t_ns ? t - smp->t_ns : 0;
        struct rstack *st = &r->stacks[smp->stack];
        est_sub(&st->live, smp->size, r->rate);
        est_sub(&r->live_total, smp->size, r->rate);
        st->lifetimes[memprof__lifetime_bucket(life)]++;
        if (life < TEMP_THRESHOLD_NS)
            memprof__est_add(&st->temp, smp->size, r->rate);
        add_point(r, t);
        free(smp);
        return;
    }
}

int memprof__ebpf_record_event(struct memprof_ebpf_record *r, const struct memprof_ebpf_event *e)
{
    if (e->kind == MEMPROF_EBPF_ALLOC)
        return on_alloc(r, e);
    if (e->kind == MEMPROF_EBPF_FREE)
        on_free(r, e);
    return 0;
}

/* ---- the profile --------------------------------------------------------------------------- */

static int by_inuse(const void *a, const void *b)
{
    const struct memprof_pstack *x = a, *y = b;
    if (x->inuse_space != y->inuse_space)
        return x->inuse_space < y->inuse_space ? 1 : -1;
    return x->alloc_space < y->alloc_space ? 1 : x->alloc_space > y->alloc_space ? -1 : 0;
}

/* Each stack's leak statistic at `now` (since the start of the record), as the engine's
 * snapshot computes it: the live samples grouped by stack (a counting sort), each group by
 * time. Returns 0 or -ENOMEM. */
static int take_leaks(struct memprof_ebpf_record *r, uint64_t now)
{
    size_t *end = calloc(r->nstacks + 1, sizeof *end);
    struct memprof_leak_sample *work = malloc((r->nlive ? r->nlive : 1) * sizeof *work);
    if (!end || !work) {
        free(end);
        free(work);
        return -ENOMEM;
    }
    for (size_t b = 0; b < r->nbuckets; b++)
        for (const struct rsample *x = r->buckets[b]; x; x = x->next)
            end[x->stack]++;
    for (size_t i = 1; i <= r->nstacks; i++)
        end[i] += end[i - 1]; /* the end of each stack's group */
    for (size_t b = 0; b < r->nbuckets; b++)
        for (const struct rsample *x = r->buckets[b]; x; x = x->next)
            work[--end[x->stack]] = (struct memprof_leak_sample){
                x->t_ns, (double)x->size / memprof__est_prob(x->size, r->rate)};
    /* Now end[i] is where stack i's group begins, end[i + 1] where it ends. */
    for (size_t i = 0; i < r->nstacks; i++) {
        struct rstack *s = &r->stacks[i];
        size_t n = end[i + 1] - end[i];
        memset(&s->leak, 0, sizeof s->leak);
        if (!n)
            continue;
        memprof__leak_site(work + end[i], n, 0, now, s->lifetimes, s->first_ns, &s->leak);
    }
    free(end);
    free(work);
    return 0;
}

int memprof__ebpf_record_profile(struct memprof_ebpf_record *r, uint64_t end_ns,
                                 const struct memprof_ebpf_health *h, struct memprof_profile **out)
{
    *out = NULL;
    struct memprof_profile *p = calloc(1, sizeof *p);
    if (!p)
        return -ENOMEM;
    p->sampling_rate = r->rate;
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    p->time_unix_ns = (uint64_t)now.tv_sec * 1000000000ull + (uint64_t)now.tv_nsec;
    p->duration_ns = end_ns > r->start_ns ? end_ns - r->start_ns : 0;
    p->temp_threshold_ns = TEMP_THRESHOLD_NS;
    if (take_leaks(r, p->duration_ns) != 0) {
        free(p);
        return -ENOMEM;
    }
    /* Live figures afresh from the live samples. */
    struct memprof_est total = {0};
    for (size_t i = 0; i < r->nstacks; i++)
        memset(&r->stacks[i].final_live, 0, sizeof r->stacks[i].final_live);
    for (size_t b = 0; b < r->nbuckets; b++)
        for (const struct rsample *x = r->buckets[b]; x; x = x->next) {
            memprof__est_add(&r->stacks[x->stack].final_live, x->size, r->rate);
            memprof__est_add(&total, x->size, r->rate);
        }
    p->frames = malloc((r->nframes ? r->nframes : 1) * sizeof *p->frames);
    p->stacks = calloc(r->nstacks ? r->nstacks : 1, sizeof *p->stacks);
    p->arena = malloc((r->npool ? r->npool : 1) * sizeof(uint32_t));
    p->threads = calloc(r->nthreads ? r->nthreads : 1, sizeof *p->threads);
    size_t names = 1;
    for (size_t i = 0; i < r->nthreads; i++)
        names += r->threads[i].name ? strlen(r->threads[i].name) + 1 : 0;
    p->thread_names = malloc(names);
    if (!p->frames || !p->stacks || !p->arena || !p->threads || !p->thread_names) {
        memprof__profile_free(p);
        return -ENOMEM;
    }
    if (r->nframes)
        memcpy(p->frames, r->frames, r->nframes * sizeof *p->frames);
    p->nframes = r->nframes;
    memcpy(p->arena, r->frame_pool, r->npool * sizeof(uint32_t));
    char *np = p->thread_names;
    for (size_t i = 0; i < r->nthreads; i++) {
        p->threads[i].tid = r->threads[i].tid;
        if (r->threads[i].name) {
            strcpy(np, r->threads[i].name);
            p->threads[i].name = np;
            np += strlen(np) + 1;
        }
    }
    p->nthreads = r->nthreads;
    uint64_t truncated = 0;
    for (size_t i = 0; i < r->nstacks; i++) {
        const struct rstack *s = &r->stacks[i];
        struct memprof_pstack *ps = &p->stacks[i];
        ps->frames = (const uint32_t *)p->arena + s->first;
        ps->nframes = s->nframes;
        ps->alloc_objects = memprof__est_round(s->alloc.count);
        ps->alloc_space = memprof__est_round(s->alloc.bytes);
        ps->alloc_samples = s->alloc.samples;
        ps->inuse_objects = memprof__est_round(s->final_live.count);
        ps->inuse_space = memprof__est_round(s->final_live.bytes);
        ps->inuse_space_var = s->final_live.bytes_var;
        ps->inuse_objects_var = s->final_live.count_var;
        ps->live_samples = s->final_live.samples;
        ps->peak_objects = memprof__est_round(s->peak.count);
        ps->peak_space = memprof__est_round(s->peak.bytes);
        ps->peak_samples = s->peak.samples;
        ps->peak_space_var = s->peak.bytes_var > 0 ? s->peak.bytes_var : 0;
        ps->temp_objects = memprof__est_round(s->temp.count);
        ps->temp_space = memprof__est_round(s->temp.bytes);
        ps->temp_samples = s->temp.samples;
        memcpy(ps->lifetimes, s->lifetimes, sizeof ps->lifetimes);
        ps->leak_space = memprof__est_round(s->leak.bytes);
        ps->leak_samples = s->leak.samples;
        ps->leak_rate = s->leak.rate;
        ps->leak_suspect = s->leak.suspect;
        ps->thread = s->thread;
        truncated += s->truncated;
    }
    p->nstacks = r->nstacks;
    qsort(p->stacks, p->nstacks, sizeof *p->stacks, by_inuse);
    p->inuse_space = memprof__est_round(total.bytes);
    p->inuse_objects = memprof__est_round(total.count);
    p->inuse_space_var = total.bytes_var;
    p->inuse_objects_var = total.count_var;
    p->live_samples = total.samples;
    p->peak_space = memprof__est_round(r->peak_total.bytes);
    p->peak_objects = memprof__est_round(r->peak_total.count);
    p->peak_space_var = r->peak_total.bytes_var > 0 ? r->peak_total.bytes_var : 0;
    p->peak_samples = r->peak_total.samples;
    p->peak_time_ns = r->peak_time_ns;
    if (r->nseries) {
        p->series = malloc(r->nseries * sizeof *p->series);
        if (p->series) {
            memcpy(p->series, r->series, r->nseries * sizeof *p->series);
            p->nseries = r->nseries;
        }
    }
    p->truncated_stacks = truncated;
    p->dropped_samples = h ? h->dropped : 0;
    p->stack_overflows = h ? h->stack_errors : 0;
    for (size_t i = 0; i < p->nframes; i++)
        if (p->frames[i].address) {
            p->total_addresses++;
            p->unresolved_addresses++;
        }
    *out = p;
    return 0;
}

void memprof__ebpf_record_free(struct memprof_ebpf_record *r)
{
    if (!r)
        return;
    for (size_t b = 0; b < r->nbuckets; b++)
        for (struct rsample *x = r->buckets[b], *nx; x; x = nx) {
            nx = x->next;
            free(x);
        }
    free(r->buckets);
    for (size_t i = 0; i < r->nthreads; i++)
        free(r->threads[i].name);
    free(r->threads);
    for (size_t i = 0; i < r->nowned; i++)
        free(r->owned_strings[i]);
    free(r->owned_strings);
    free(r->frames);
    free(r->addr_keys);
    free(r->addr_vals);
    free(r->stacks);
    free(r->stack_slots);
    free(r->frame_pool);
    free(r->series);
    free(r);
}
