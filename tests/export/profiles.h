/* SPDX-License-Identifier: MIT */
/*
 * Known profiles for the writer tests, built by hand as profile-model literals (no engine):
 *
 * - basic: a few stacks whose speedscope and HTML rendering the checkers know exactly:
 *   frames merged by (function, file, line), an unresolved frame, an interpreter frame, an
 *   inlined frame, a stack cut at the maximum depth, a stack the stack table could not store,
 *   a stack freed since (live bytes 0), one with no bytes at all, and one with the frames of
 *   another (as the same stack in two threads is).
 * - special: function, file and thread names that try to break JSON and HTML (quotes,
 *   backslashes, control characters, "</script>", "<!--", U+2028, non-ASCII, malformed
 *   UTF-8).
 * - views: every view with its own leader (live: grow_cache, peak: build_report, alloc and
 *   temporary: parse_request, leaks: leaky_register), a peak at 3.25 s, lifetimes, two leak
 *   suspects and a site that is not one, threads (one without a name), a heap-over-time
 *   series, and a site from two samples (low information).
 * - empty: no frames, no stacks.
 * - big: 10,000 stacks of depth 8 to 40 over 2,000 functions (size and speed).
 *
 * Each profile lives in static storage or, for big, until profiles_free().
 */
#ifndef MEMPROF_TESTS_EXPORT_PROFILES_H
#define MEMPROF_TESTS_EXPORT_PROFILES_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "export/profile.h"
#include "memprof/memprof.h"

/* ---- basic ---- */

/* Tables read best one record per line or two. */
// clang-format off
static struct memprof_pframe basic_frames[] = {
    /* 0 */ {.function = "leaf_alloc", .file = "/src/app/alloc.c", .module = "/usr/bin/app",
             .line = 42, .address = 0x401010},
    /* 1 */ {.function = "compute", .file = "/src/app/compute.c", .module = "/usr/bin/app",
             .line = 17, .address = 0x402020},
    /* 2 */ {.function = "main", .file = "/src/app/main.c", .module = "/usr/bin/app",
             .line = 5, .address = 0x403030},
    /* 3: same function, file and line as 0 at another address: merged with it */
    {.function = "leaf_alloc", .file = "/src/app/alloc.c", .module = "/usr/bin/app", .line = 42,
     .address = 0x401014},
    /* 4: no symbol, labelled "module+offset" */
    {.module = "/usr/lib/x86_64-linux-gnu/libfoo.so.1", .flags = MEMPROF_FRAME_UNRESOLVED,
     .address = 0x7f0000001234, .load_bias = 0x7f0000000000},
    /* 5: an interpreter frame */
    {.function = "build_index", .file = "script.py", .line = 42, .flags = MEMPROF_FRAME_RUNTIME},
    /* 6 */ {.function = "inlined_helper", .file = "/src/app/inl.h", .module = "/usr/bin/app",
             .line = 9, .flags = MEMPROF_FRAME_INLINED, .address = 0x401010},
    /* 7: the outermost frame of a stack cut at the maximum depth */
    {.function = "deep", .file = "/src/app/deep.c", .module = "/usr/bin/app", .line = 3,
     .flags = MEMPROF_FRAME_TRUNCATED, .address = 0x404040},
    /* 8: same function as 1 at another line: a frame of its own */
    {.function = "compute", .file = "/src/app/compute.c", .module = "/usr/bin/app",
     .line = 21, .address = 0x402080},
};

/* Leaf first, as in the model. */
static const uint32_t basic_a[] = {0, 1, 2}, basic_b[] = {6, 3, 8, 2}, basic_c[] = {4, 5, 2},
                      basic_d[] = {0, 7}, basic_f[] = {1, 2};

static struct memprof_pstack basic_stacks[] = {
    {.frames = basic_a, .nframes = 3, .alloc_objects = 50, .alloc_space = 5000,
     .inuse_objects = 30, .inuse_space = 3000, .inuse_space_var = 250000.0,
     .inuse_objects_var = 9.0, .live_samples = 12, .alloc_samples = 20},
    {.frames = basic_b, .nframes = 4, .alloc_objects = 2, .alloc_space = 2000, .inuse_objects = 2,
     .inuse_space = 2000, .inuse_space_var = 40000.0, .live_samples = 4, .alloc_samples = 4},
    /* c: everything freed since */
    {.frames = basic_c, .nframes = 3, .alloc_objects = 7, .alloc_space = 7000, .alloc_samples = 7},
    /* d: truncated */
    {.frames = basic_d, .nframes = 2, .alloc_objects = 6, .alloc_space = 600, .inuse_objects = 5,
     .inuse_space = 500, .inuse_space_var = 2500.0, .live_samples = 1, .alloc_samples = 2},
    /* e: no stack (stack table full) */
    {.frames = NULL, .nframes = 0, .alloc_objects = 1, .alloc_space = 100, .inuse_objects = 1,
     .inuse_space = 100, .inuse_space_var = 100.0, .live_samples = 1, .alloc_samples = 1},
    /* f: nothing at all */
    {.frames = basic_f, .nframes = 2},
    /* g: the frames of a again, as a second thread's stack is: one site with a */
    {.frames = basic_a, .nframes = 3, .alloc_objects = 1, .alloc_space = 100, .alloc_samples = 1},
};

static struct memprof_profile basic_profile = {
    .sampling_rate = 524288,
    .time_unix_ns = 1700000000123456789ull,
    .frames = basic_frames,
    .nframes = sizeof basic_frames / sizeof *basic_frames,
    .stacks = basic_stacks,
    .nstacks = sizeof basic_stacks / sizeof *basic_stacks,
    .inuse_space = 5600,
    .inuse_objects = 38,
    .live_samples = 18,
    .inuse_space_var = 292600.0,
    .inuse_objects_var = 12.0,
    .truncated_stacks = 1,
    .dropped_samples = 2,
    .stack_overflows = 1,
    .unresolved_addresses = 1,
    .total_addresses = 8,
};

/* ---- special ---- */

static struct memprof_pframe special_frames[] = {
    {.function = "</script><script>alert(1)</script>", .file = "</SCRIPT>.c", .line = 1},
    {.function = "say \"hi\" \\ back\\slash", .file = "C:\\src\\quote\".c", .line = 2},
    {.function = "tab\there\nnewline\x01\x1f\x7f ctrl", .file = "ctl.c", .line = 3},
    {.function = "na\xc3\xafve \xe5\x87\xbd\xe6\x95\xb0 \xf0\x9f\x98\x80", .file = "u.c", .line = 4},
    /* malformed UTF-8: stray bytes, a cut sequence, a surrogate, an overlong '/' */
    {.function = "bad \xff\xfe x \xc3( y \xed\xa0\x80 z \xc0\xaf \xe2\x82", .line = 5},
    {.function = "line\xe2\x80\xa8sep\xe2\x80\xa9para <!-- & -->", .file = "a&b<c>.c", .line = 6},
    {.function = "operator<<(std::ostream&, Foo const&)", .file = "x.cc", .line = 7},
};

static const uint32_t special_a[] = {0, 1, 2, 3}, special_b[] = {4, 5, 6, 3};

/* A thread name is as hostile as a function name. */
static struct memprof_pthread special_threads[] = {
    {.tid = 7, .name = "</script><b onmouseover=alert(1)>thr\"ead</b>\xe2\x80\xa8 \xff"}};

static struct memprof_pstack special_stacks[] = {
    {.frames = special_a, .nframes = 4, .alloc_objects = 1, .alloc_space = 64,
     .inuse_objects = 1, .inuse_space = 64, .live_samples = 1, .alloc_samples = 1, .thread = 1},
    {.frames = special_b, .nframes = 4, .alloc_objects = 1, .alloc_space = 32,
     .inuse_objects = 1, .inuse_space = 32, .live_samples = 1, .alloc_samples = 1, .thread = 1},
};

static struct memprof_profile special_profile = {
    .sampling_rate = 4096,
    .frames = special_frames,
    .nframes = sizeof special_frames / sizeof *special_frames,
    .stacks = special_stacks,
    .nstacks = 2,
    .inuse_space = 96,
    .inuse_objects = 2,
    .live_samples = 2,
    .threads = special_threads,
    .nthreads = 1,
};


/* ---- views ---- */

#define MiB (1024ull * 1024ull)
#define KiB 1024ull

static struct memprof_pframe views_frames[] = {
    /* 0 */ {.function = "grow_cache", .file = "/src/svc/cache.c", .line = 88, .address = 0x1000},
    /* 1 */ {.function = "parse_request", .file = "/src/svc/parse.c", .line = 30, .address = 0x2000},
    /* 2 */ {.function = "leaky_register", .file = "/src/svc/registry.c", .line = 12,
             .address = 0x3000},
    /* 3 */ {.function = "build_report", .file = "/src/svc/report.c", .line = 51, .address = 0x4000},
    /* 4 */ {.function = "handle", .file = "/src/svc/server.c", .line = 200, .address = 0x5000},
    /* 5 */ {.function = "main", .file = "/src/svc/main.c", .line = 10, .address = 0x6000},
    /* 6 */ {.function = "worker_loop", .file = "/src/svc/server.c", .line = 150, .address = 0x7000},
    /* 7 */ {.function = "cache_insert", .file = "/src/svc/cache.c", .line = 120, .address = 0x8000},
    /* 8 */ {.function = "tiny_site", .file = "/src/svc/tiny.c", .line = 7, .address = 0x9000},
};

static const uint32_t views_a[] = {0, 4, 5}, views_b[] = {3, 4, 5}, views_c[] = {1, 6, 5},
                      views_d[] = {2, 6, 5}, views_e[] = {0, 6, 5}, views_g[] = {7, 4, 5},
                      views_f[] = {8, 5};

/* Threads: 1 main, 2 worker-1, 3 a thread without a name. */
static struct memprof_pthread views_threads[] = {
    {.tid = 1001, .name = "main"}, {.tid = 1002, .name = "worker-1"}, {.tid = 1003}};

/* Sorted by live bytes, largest first, as the model keeps them. */
static struct memprof_pstack views_stacks[] = {
    /* a: the most live bytes; samples freed after more than 4.5 minutes */
    {.frames = views_a, .nframes = 3, .inuse_space = 6 * MiB, .inuse_objects = 600,
     .inuse_space_var = 90000000000.0, .live_samples = 12, .alloc_space = 8 * MiB,
     .alloc_objects = 800, .alloc_samples = 16, .peak_space = 2 * MiB, .peak_objects = 200,
     .peak_samples = 4, .peak_space_var = 1e12, .lifetimes = {[15] = 2}, .thread = 1},
    /* d: the fastest leak */
    {.frames = views_d, .nframes = 3, .inuse_space = 3 * MiB, .inuse_objects = 3072,
     .inuse_space_var = 4e11, .live_samples = 12, .alloc_space = 3 * MiB, .alloc_objects = 3072,
     .alloc_samples = 12, .peak_space = 1536 * KiB, .peak_objects = 1536, .peak_samples = 3,
     .peak_space_var = 2e11, .leak_space = 3 * MiB, .leak_samples = 12, .leak_rate = 102400.0,
     .leak_suspect = 1, .thread = 3},
    /* b: the peak's leader, mostly freed since; lifetimes around a second */
    {.frames = views_b, .nframes = 3, .inuse_space = 1 * MiB, .inuse_objects = 10,
     .inuse_space_var = 2.5e11, .live_samples = 2, .alloc_space = 30 * MiB, .alloc_objects = 300,
     .alloc_samples = 60, .peak_space = 20 * MiB, .peak_objects = 200, .peak_samples = 40,
     .peak_space_var = 1e13, .lifetimes = {[10] = 8, [11] = 4}, .thread = 2},
    /* g: a slower leak */
    {.frames = views_g, .nframes = 3, .inuse_space = 1 * MiB, .inuse_objects = 1024,
     .inuse_space_var = 2e11, .live_samples = 2, .alloc_space = 1 * MiB, .alloc_objects = 1024,
     .alloc_samples = 2, .leak_space = 1 * MiB, .leak_samples = 2, .leak_rate = 10240.0,
     .leak_suspect = 1, .thread = 1},
    /* e: survivors with a leak statistic, but not a suspect */
    {.frames = views_e, .nframes = 3, .inuse_space = 512 * KiB, .inuse_objects = 8,
     .inuse_space_var = 5e10, .live_samples = 1, .alloc_space = 512 * KiB, .alloc_objects = 8,
     .alloc_samples = 1, .leak_space = 512 * KiB, .leak_samples = 1, .leak_rate = 900000.0,
     .thread = 1},
    /* c: the allocation traffic, nearly all of it temporary */
    {.frames = views_c, .nframes = 3, .inuse_space = 64 * KiB, .inuse_objects = 64,
     .inuse_space_var = 1e9, .live_samples = 1, .alloc_space = 400 * MiB,
     .alloc_objects = 409600, .alloc_samples = 800, .peak_space = 512 * KiB, .peak_objects = 512,
     .peak_samples = 1, .peak_space_var = 2.5e11, .temp_space = 390 * MiB,
     .temp_objects = 399360, .temp_samples = 780, .lifetimes = {[3] = 50, [4] = 30, [5] = 10,
     [8] = 5}, .thread = 2},
    /* f: two samples of a small site, thread not known */
    {.frames = views_f, .nframes = 2, .inuse_space = 4 * KiB, .inuse_objects = 4,
     .inuse_space_var = 1.6e7, .live_samples = 2, .alloc_space = 4 * KiB, .alloc_objects = 4,
     .alloc_samples = 2},
};

/* The heap over time: up to the peak at 3.25 s, then down to what is live at 10 s. */
static struct memprof_ppoint views_series[] = {
    {0, 0, 0},
    {500000000, 3 * MiB, 40 * MiB},
    {1000000000, 7 * MiB, 90 * MiB},
    {2000000000, 15 * MiB, 180 * MiB},
    {3000000000, 23 * MiB, 260 * MiB},
    {3250000000, 24 * MiB, 280 * MiB},
    {4000000000, 18 * MiB, 320 * MiB},
    {6000000000, 13 * MiB, 380 * MiB},
    {8000000000, 12 * MiB, 420 * MiB},
    {10000000000, 11 * MiB + 580 * KiB, 442 * MiB + 516 * KiB},
};

static struct memprof_profile views_profile = {
    .sampling_rate = 524288,
    .time_unix_ns = 1700000000000000000ull,
    .frames = views_frames,
    .nframes = sizeof views_frames / sizeof *views_frames,
    .stacks = views_stacks,
    .nstacks = sizeof views_stacks / sizeof *views_stacks,
    /* The sums of the stacks' live values. */
    .inuse_space = 11 * MiB + 580 * KiB,
    .inuse_objects = 4782,
    .live_samples = 32,
    .inuse_space_var = 90000000000.0 + 2.5e11 + 1e9 + 4e11 + 5e10 + 2e11 + 1.6e7,
    /* The peak: the sums of the stacks' peak values. */
    .peak_space = 24 * MiB,
    .peak_objects = 2448,
    .peak_samples = 48,
    .peak_space_var = 1e12 + 1e13 + 2.5e11 + 2e11,
    .peak_time_ns = 3250000000ull,
    .duration_ns = 10000000000ull,
    .temp_threshold_ns = 1000000,
    .series = views_series,
    .nseries = sizeof views_series / sizeof *views_series,
    .threads = views_threads,
    .nthreads = sizeof views_threads / sizeof *views_threads,
    .total_addresses = 9,
};

#undef MiB
#undef KiB

// clang-format on

/* ---- empty ---- */

static struct memprof_profile empty_profile = {.sampling_rate = 524288};

/* ---- big ---- */

#define BIG_STACKS    10000
#define BIG_FUNCTIONS 2000

static inline uint64_t big_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/*
 * Realistic sharing: stacks start from a few roots and follow one of 64 "call paths" for a
 * while before diverging, so the call tree shares prefixes as real programs do. One frame
 * per function (frame i is function i). Returns NULL when out of memory.
 */
static inline struct memprof_profile *big_profile_new(void)
{
    static char names[BIG_FUNCTIONS][24], files[50][24];
    struct memprof_profile *p = calloc(1, sizeof *p);
    struct memprof_pframe *frames = calloc(BIG_FUNCTIONS, sizeof *frames);
    struct memprof_pstack *stacks = calloc(BIG_STACKS, sizeof *stacks);
    uint32_t *idx = malloc((size_t)BIG_STACKS * 40 * sizeof *idx);
    if (!p || !frames || !stacks || !idx) {
        free(p);
        free(frames);
        free(stacks);
        free(idx);
        return NULL;
    }
    for (int i = 0; i < 50; i++)
        snprintf(files[i], sizeof files[i], "/src/big/file%02d.c", i);
    for (int i = 0; i < BIG_FUNCTIONS; i++) {
        snprintf(names[i], sizeof names[i], "big_function_%04d", i);
        frames[i] = (struct memprof_pframe){.function = names[i],
                                            .file = files[i % 50],
                                            .module = "/usr/bin/big",
                                            .line = 10u + (unsigned)i,
                                            .address = 0x400000u + 16u * (unsigned)i};
    }
    uint64_t rng = 12345;
    uint32_t paths[64][40];
    for (int k = 0; k < 64; k++)
        for (int d = 0; d < 40; d++)
            paths[k][d] = d == 0 ? (uint32_t)(k % 3) : (uint32_t)(big_rand(&rng) % BIG_FUNCTIONS);
    p->sampling_rate = 524288;
    p->time_unix_ns = 1700000000000000000ull;
    p->frames = frames;
    p->nframes = BIG_FUNCTIONS;
    p->stacks = stacks;
    p->arena = idx;
    for (int s = 0; s < BIG_STACKS; s++) {
        uint32_t depth = 8 + (uint32_t)(big_rand(&rng) % 33), shared = depth / 2;
        const uint32_t *path = paths[big_rand(&rng) % 64];
        uint32_t *f = idx + (size_t)s * 40;
        /* Root first in `path`; the model wants leaf first. */
        for (uint32_t d = 0; d < depth; d++)
            f[depth - 1 - d] = d < shared ? path[d] : (uint32_t)(big_rand(&rng) % BIG_FUNCTIONS);
        uint64_t bytes = 1 + big_rand(&rng) % 1000000;
        struct memprof_pstack *st = &stacks[s];
        *st = (struct memprof_pstack){.frames = f, .nframes = depth};
        st->alloc_space = bytes * (1 + big_rand(&rng) % 4);
        st->alloc_objects = 1 + bytes / 1000;
        st->alloc_samples = 1 + big_rand(&rng) % 10;
        if (s % 5 != 4) { /* a fifth is freed */
            st->inuse_space = bytes;
            st->inuse_objects = 1 + bytes / 2000;
            st->inuse_space_var = (double)bytes * 4096.0;
            st->live_samples = 1 + big_rand(&rng) % 5;
        }
        p->inuse_space += st->inuse_space;
        p->inuse_objects += st->inuse_objects;
        p->inuse_space_var += st->inuse_space_var;
        p->live_samples += st->live_samples;
    }
    p->nstacks = BIG_STACKS;
    p->total_addresses = BIG_FUNCTIONS;
    return p;
}

static inline void big_profile_free(struct memprof_profile *p)
{
    if (!p)
        return;
    free(p->frames);
    free(p->stacks);
    free(p->arena);
    free(p);
}

#endif
