/* SPDX-License-Identifier: MIT */
/*
 * The pprof tests' profiles and checks (fixture.h). The engine profile is made of real
 * allocations reported through memprof_report_alloc() at rate 1 (every byte sampled, so the
 * estimates are exact), from noinline functions and one always-inline function, so its
 * stacks have real symbols, file:line and an inlined frame once resolved.
 */
#define _GNU_SOURCE
#include "fixture.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include <memprof/runtime.h>

#include "api/snapshot_profile.h"
#include "core/engine.h"
#include "export/pprof.h"
#include "../keep_frame.h"

/* ---- the hand-built profile ------------------------------------------------------------------ */

#define APP      "/usr/bin/app"
#define APP_BIAS 0x555500000000ull
#define LIBFOO   "/usr/lib/x86_64-linux-gnu/libfoo.so.1"
#define STDCXX   "/usr/lib/x86_64-linux-gnu/libstdc++.so.6"

static struct memprof_pframe rich_frames[] = {
    /* 0, 1: leaf_alloc with inlined_helper inlined into it at the same address: one
     * location with two lines */
    {.function = "inlined_helper",
     .file = "/src/app/inl.h",
     .module = APP,
     .build_id = "abcdef01",
     .line = 9,
     .flags = MEMPROF_FRAME_INLINED,
     .address = APP_BIAS + 0x101a,
     .load_bias = APP_BIAS},
    {.function = "leaf_alloc",
     .file = "/src/app/alloc.c",
     .module = APP,
     .build_id = "abcdef01",
     .line = 42,
     .address = APP_BIAS + 0x101a,
     .load_bias = APP_BIAS},
    /* 2, 3 */
    {.function = "compute",
     .file = "/src/app/compute.c",
     .module = APP,
     .build_id = "abcdef01",
     .line = 17,
     .address = APP_BIAS + 0x2020,
     .load_bias = APP_BIAS},
    {.function = "main",
     .file = "/src/app/main.c",
     .module = APP,
     .build_id = "abcdef01",
     .line = 5,
     .address = APP_BIAS + 0x3030,
     .load_bias = APP_BIAS},
    /* 4: no symbol: a location without lines */
    {.module = LIBFOO,
     .build_id = "1234",
     .flags = MEMPROF_FRAME_UNRESOLVED,
     .address = 0x7f0000001234,
     .load_bias = 0x7f0000000000},
    /* 5, 6: interpreter frames, the second one unresolved */
    {.function = "build_index", .file = "script.py", .line = 42, .flags = MEMPROF_FRAME_RUNTIME},
    {.function = MEMPROF_PPROF_UNKNOWN_RUNTIME,
     .flags = MEMPROF_FRAME_RUNTIME | MEMPROF_FRAME_UNRESOLVED},
    /* 7, 8: the same frame, as the outermost frame of a truncated stack and not */
    {.function = "deep",
     .file = "/src/app/deep.c",
     .module = APP,
     .build_id = "abcdef01",
     .line = 3,
     .flags = MEMPROF_FRAME_TRUNCATED,
     .address = APP_BIAS + 0x4040,
     .load_bias = APP_BIAS},
    {.function = "deep",
     .file = "/src/app/deep.c",
     .module = APP,
     .build_id = "abcdef01",
     .line = 3,
     .address = APP_BIAS + 0x4040,
     .load_bias = APP_BIAS},
    /* 9: native code outside any module (JIT), no file or line */
    {.function = "jit_code", .address = 0x10000},
    /* 10: libfoo again, loaded at another bias (dlclose and dlopen): a second mapping */
    {.function = "libfoo_fn",
     .file = "foo.c",
     .line = 7,
     .module = LIBFOO,
     .build_id = "1234",
     .address = 0x7f1000005678,
     .load_bias = 0x7f1000000000},
    /* 11: a C++ name, a shared library without a build id */
    {.function = "operator new(unsigned long)",
     .file = "/usr/include/c++/12/new",
     .line = 0,
     .module = STDCXX,
     .address = 0x7f2000001000,
     .load_bias = 0x7f2000000000},
};

/* Leaf first. */
static const uint32_t st_a[] = {0, 1, 2, 3}, st_b[] = {11, 2, 3}, st_c[] = {4, 5, 6, 3},
                      st_d[] = {2, 7}, st_f[] = {8, 3}, st_g[] = {10, 9, 3}, st_h[] = {2, 3};

/* In the reader's order: inuse_space, then alloc_space, largest first. */
static struct memprof_pstack rich_stacks[] = {
    {.frames = st_a,
     .nframes = 4,
     .alloc_objects = 50,
     .alloc_space = 5000,
     .inuse_objects = 30,
     .inuse_space = 3000,
     .inuse_space_var = 250000.0,
     .inuse_objects_var = 9.0,
     .live_samples = 12,
     .alloc_samples = 20},
    {.frames = st_b,
     .nframes = 3,
     .alloc_objects = 2,
     .alloc_space = 2000,
     .inuse_objects = 2,
     .inuse_space = 2000,
     .inuse_space_var = 40000.0,
     .live_samples = 4,
     .alloc_samples = 4},
    /* d: truncated */
    {.frames = st_d,
     .nframes = 2,
     .alloc_objects = 6,
     .alloc_space = 600,
     .inuse_objects = 5,
     .inuse_space = 500,
     .inuse_space_var = 2500.0,
     .live_samples = 1,
     .alloc_samples = 2},
    /* e: no stack (stack table full) */
    {.frames = NULL,
     .nframes = 0,
     .alloc_objects = 1,
     .alloc_space = 100,
     .inuse_objects = 1,
     .inuse_space = 100,
     .inuse_space_var = 100.0,
     .live_samples = 1,
     .alloc_samples = 1},
    {.frames = st_f,
     .nframes = 2,
     .alloc_objects = 1,
     .alloc_space = 50,
     .inuse_objects = 1,
     .inuse_space = 50,
     .live_samples = 1,
     .alloc_samples = 1},
    /* g: a variance that is not a square: comes back as round(sd)^2 = 35^2 */
    {.frames = st_g,
     .nframes = 3,
     .alloc_objects = 1,
     .alloc_space = 20,
     .inuse_objects = 1,
     .inuse_space = 20,
     .inuse_space_var = 1234.0,
     .inuse_objects_var = 0.3,
     .live_samples = 1,
     .alloc_samples = 1},
    /* c: everything freed since */
    {.frames = st_c, .nframes = 4, .alloc_objects = 7, .alloc_space = 7000, .alloc_samples = 7},
    /* h: nothing at all */
    {.frames = st_h, .nframes = 2},
};

static struct memprof_profile rich = {
    .sampling_rate = 524288,
    .time_unix_ns = 1700000000123456789ull,
    .frames = rich_frames,
    .nframes = sizeof rich_frames / sizeof *rich_frames,
    .stacks = rich_stacks,
    .nstacks = sizeof rich_stacks / sizeof *rich_stacks,
    /* The sums of the stacks (the reader computes them from the samples); the comments carry
     * the whole-heap variances exactly, which the reader uses while the totals agree. */
    .inuse_space = 5670,
    .inuse_objects = 40,
    .live_samples = 20,
    .inuse_space_var = 300000.5,
    .inuse_objects_var = 0.1,
    .truncated_stacks = 1,
    .dropped_samples = 2,
    .stack_overflows = 3,
    .unresolved_addresses = 4,
    .total_addresses = 5,
};

const struct memprof_profile *fixture_rich(void)
{
    return &rich;
}

/* ---- the engine profile ------------------------------------------------------------------ */

static uint64_t next_id = 1;

TEST_KEEP_FRAME void fixture_alloc_leaf(size_t n);
TEST_KEEP_FRAME void fixture_alloc_leaf(size_t n)
{
    memprof_report_alloc(next_id++, n);
    __asm__ volatile("" ::: "memory");
}

static inline __attribute__((always_inline)) void fixture_inlined_fill(unsigned count, size_t n)
{
    for (unsigned i = 0; i < count; i++)
        fixture_alloc_leaf(n);
}

TEST_KEEP_FRAME void fixture_build_big(void);
TEST_KEEP_FRAME void fixture_build_big(void)
{
    fixture_inlined_fill(4, 100000);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME void fixture_build_small(void);
TEST_KEEP_FRAME void fixture_build_small(void)
{
    for (unsigned i = 0; i < 10; i++)
        fixture_alloc_leaf(1000);
    __asm__ volatile("" ::: "memory");
}

int fixture_engine(struct memprof_profile **out)
{
    static bool started;
    if (!started) {
        memprof__backend_register(); /* this test feeds the engine itself */
        memprof_config cfg;
        memprof_config_init(&cfg);
        cfg.sampling_rate = 1;
        int rc = memprof_init_config(&cfg);
        if (rc == 0)
            rc = memprof_start();
        if (rc != 0)
            return rc;
        started = true;
        fixture_build_big();
        fixture_build_small();
        /* Half of the small blocks freed: alloc and inuse differ. */
        for (uint64_t id = 5; id < 10; id++)
            memprof_report_free(id);
    }
    memprof_snapshot *s = NULL;
    int rc = memprof_get_snapshot(&s);
    if (rc != 0)
        return rc;
    rc = memprof__profile_from_snapshot(s, out);
    memprof_free_snapshot(s);
    return rc;
}

/* ---- checks ------------------------------------------------------------------------------- */

int fixture_consistent(const struct memprof_profile *p, FILE *log)
{
    for (size_t i = 0; i < p->nframes; i++) {
        const struct memprof_pframe *f = &p->frames[i];
        /* strlen reads every string to its end: ASan catches one that is not terminated. */
        size_t n = (f->function ? strlen(f->function) : 0) + (f->file ? strlen(f->file) : 0) +
                   (f->module ? strlen(f->module) : 0) + (f->build_id ? strlen(f->build_id) : 0);
        (void)n;
    }
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (st->nframes && !st->frames) {
            fprintf(log, "stack %zu: %u frames and no array\n", i, st->nframes);
            return -1;
        }
        for (uint32_t j = 0; j < st->nframes; j++)
            if (st->frames[j] >= p->nframes) {
                fprintf(log, "stack %zu frame %u: index %u of %zu\n", i, j, st->frames[j],
                        p->nframes);
                return -1;
            }
        if (i && (st->inuse_space > p->stacks[i - 1].inuse_space)) {
            fprintf(log, "stack %zu: not sorted by inuse_space\n", i);
            return -1;
        }
        if (!(st->inuse_space_var >= 0.0) || !(st->inuse_objects_var >= 0.0)) {
            fprintf(log, "stack %zu: bad variance\n", i);
            return -1;
        }
    }
    return 0;
}

static bool same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

static const char *show(const char *s)
{
    return s ? s : "(null)";
}

static double rounded_var(double var)
{
    double sd = var > 0.0 ? (double)llround(sqrt(var)) : 0.0;
    return sd * sd;
}

static int compare_frame(const struct memprof_pframe *w, const struct memprof_pframe *g,
                         size_t stack, uint32_t index, FILE *log)
{
    /* What the reader can know: a frame without a module has no load bias; a runtime frame
     * has neither address nor bias. */
    uint64_t bias = w->module ? w->load_bias : 0;
    /* A frame that knows its memory mapping (the resolver's) keeps it: pprof's Mapping. */
    bool same_map = !w->module || !w->map_limit ||
                    (w->map_start == g->map_start && w->map_limit == g->map_limit &&
                     w->map_offset == g->map_offset);
    if (same_str(w->function, g->function) && same_str(w->file, g->file) &&
        same_str(w->module, g->module) && same_str(w->build_id, g->build_id) &&
        w->line == g->line && w->flags == g->flags && w->address == g->address &&
        bias == g->load_bias && same_map)
        return 0;
    fprintf(
        log,
        "stack %zu frame %u differs:\n"
        "  want %s %s:%u module %s build_id %s flags %#x address %#" PRIx64 " bias %#" PRIx64 "\n"
        "  got  %s %s:%u module %s build_id %s flags %#x address %#" PRIx64 " bias %#" PRIx64 "\n",
        stack, index, show(w->function), show(w->file), w->line, show(w->module), show(w->build_id),
        w->flags, w->address, bias, show(g->function), show(g->file), g->line, show(g->module),
        show(g->build_id), g->flags, g->address, g->load_bias);
    if (!same_map)
        fprintf(log,
                "  mapping: want %#" PRIx64 "-%#" PRIx64 " at %#" PRIx64 ", got %#" PRIx64
                "-%#" PRIx64 " at %#" PRIx64 "\n",
                w->map_start, w->map_limit, w->map_offset, g->map_start, g->map_limit,
                g->map_offset);
    return 1;
}

#define SAME(what, a, b)                                                                           \
    do {                                                                                           \
        if ((a) != (b)) {                                                                          \
            fprintf(log, "%s: want %.17g, got %.17g\n", what, (double)(a), (double)(b));           \
            diffs++;                                                                               \
        }                                                                                          \
    } while (0)

int fixture_compare(const struct memprof_profile *want, const struct memprof_profile *got,
                    FILE *log)
{
    int diffs = 0;
    SAME("sampling_rate", want->sampling_rate, got->sampling_rate);
    SAME("time_unix_ns", want->time_unix_ns, got->time_unix_ns);
    SAME("inuse_space", want->inuse_space, got->inuse_space);
    SAME("inuse_objects", want->inuse_objects, got->inuse_objects);
    SAME("live_samples", want->live_samples, got->live_samples);
    SAME("inuse_space_var", want->inuse_space_var, got->inuse_space_var);
    SAME("inuse_objects_var", want->inuse_objects_var, got->inuse_objects_var);
    SAME("truncated_stacks", want->truncated_stacks, got->truncated_stacks);
    SAME("dropped_samples", want->dropped_samples, got->dropped_samples);
    SAME("stack_overflows", want->stack_overflows, got->stack_overflows);
    SAME("unresolved_addresses", want->unresolved_addresses, got->unresolved_addresses);
    SAME("total_addresses", want->total_addresses, got->total_addresses);
    SAME("nstacks", want->nstacks, got->nstacks);
    SAME("peak_time_ns", want->peak_time_ns, got->peak_time_ns);
    SAME("duration_ns", want->duration_ns, got->duration_ns);
    SAME("temp_threshold_ns", want->temp_threshold_ns, got->temp_threshold_ns);
    SAME("nseries", want->nseries, got->nseries);
    for (size_t i = 0; i < want->nseries && i < got->nseries; i++) {
        SAME("series t_ns", want->series[i].t_ns, got->series[i].t_ns);
        SAME("series live", want->series[i].live, got->series[i].live);
        SAME("series alloc", want->series[i].alloc, got->series[i].alloc);
    }
    for (size_t i = 0; i < want->nstacks && i < got->nstacks; i++) {
        const struct memprof_pstack *w = &want->stacks[i], *g = &got->stacks[i];
        char what[64];
#define SAME_ST(field, a, b)                                                                       \
    do {                                                                                           \
        snprintf(what, sizeof what, "stack %zu %s", i, field);                                     \
        SAME(what, a, b);                                                                          \
    } while (0)
        SAME_ST("nframes", w->nframes, g->nframes);
        SAME_ST("alloc_objects", w->alloc_objects, g->alloc_objects);
        SAME_ST("alloc_space", w->alloc_space, g->alloc_space);
        SAME_ST("inuse_objects", w->inuse_objects, g->inuse_objects);
        SAME_ST("inuse_space", w->inuse_space, g->inuse_space);
        SAME_ST("inuse_space_var", rounded_var(w->inuse_space_var), g->inuse_space_var);
        SAME_ST("inuse_objects_var", rounded_var(w->inuse_objects_var), g->inuse_objects_var);
        SAME_ST("live_samples", w->live_samples, g->live_samples);
        SAME_ST("alloc_samples", w->alloc_samples, g->alloc_samples);
        SAME_ST("peak_objects", w->peak_objects, g->peak_objects);
        SAME_ST("peak_space", w->peak_space, g->peak_space);
        SAME_ST("peak_samples", w->peak_samples, g->peak_samples);
        SAME_ST("peak_space_var", rounded_var(w->peak_space_var), g->peak_space_var);
        SAME_ST("temp_objects", w->temp_objects, g->temp_objects);
        SAME_ST("temp_space", w->temp_space, g->temp_space);
        SAME_ST("temp_samples", w->temp_samples, g->temp_samples);
        for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++)
            SAME_ST("lifetimes[b]", w->lifetimes[b], g->lifetimes[b]);
        SAME_ST("leak_space", w->leak_space, g->leak_space);
        SAME_ST("leak_samples", w->leak_samples, g->leak_samples);
        SAME_ST("leak_rate", llround(w->leak_rate), g->leak_rate);
        SAME_ST("leak_suspect", w->leak_suspect != 0, g->leak_suspect);
        /* Threads are renumbered by the reader: compare what they name. */
        const struct memprof_pthread *wt = w->thread ? &want->threads[w->thread - 1] : NULL;
        const struct memprof_pthread *gt = g->thread ? &got->threads[g->thread - 1] : NULL;
        SAME_ST("thread known", wt != NULL, gt != NULL);
        if (wt && gt) {
            SAME_ST("thread tid", wt->tid, gt->tid);
            if (strcmp(wt->name ? wt->name : "", gt->name ? gt->name : "") != 0 &&
                !(!wt->name && gt->name && strncmp(gt->name, "thread ", 7) == 0)) {
                fprintf(log, "stack %zu thread name: want %s, got %s\n", i,
                        wt->name ? wt->name : "(none)", gt->name ? gt->name : "(none)");
                diffs++;
            }
        }
#undef SAME_ST
        for (uint32_t j = 0; j < w->nframes && j < g->nframes; j++)
            diffs +=
                compare_frame(&want->frames[w->frames[j]], &got->frames[g->frames[j]], i, j, log);
    }
    return diffs;
}

int fixture_write(const struct memprof_profile *p, unsigned char **data, size_t *len)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return -errno;
    int rc = memprof__export_pprof(p, f);
    if (fclose(f) != 0 && rc == 0)
        rc = -EIO;
    if (rc != 0) {
        free(buf);
        return rc;
    }
    *data = (unsigned char *)buf;
    *len = size;
    return 0;
}
