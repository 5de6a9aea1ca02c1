/* SPDX-License-Identifier: MIT */
/*
 * Known profiles for the writer tests, built by hand as profile-model literals (no engine):
 *
 * - basic: a few stacks whose speedscope and HTML rendering the checkers know exactly:
 *   frames merged by (function, file, line), an unresolved frame, an interpreter frame, an
 *   inlined frame, a stack cut at the maximum depth, a stack the stack table could not store,
 *   a stack freed since (live bytes 0) and one with no bytes at all.
 * - special: function and file names that try to break JSON and HTML (quotes, backslashes,
 *   control characters, "</script>", "<!--", U+2028, non-ASCII, malformed UTF-8).
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

static struct memprof_pstack special_stacks[] = {
    {.frames = special_a, .nframes = 4, .alloc_objects = 1, .alloc_space = 64,
     .inuse_objects = 1, .inuse_space = 64, .live_samples = 1, .alloc_samples = 1},
    {.frames = special_b, .nframes = 4, .alloc_objects = 1, .alloc_space = 32,
     .inuse_objects = 1, .inuse_space = 32, .live_samples = 1, .alloc_samples = 1},
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
};

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
