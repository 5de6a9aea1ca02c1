/* SPDX-License-Identifier: MIT */
/*
 * The profile model every writer reads: resolved frames and per-stack values, independent
 * of where they came from -- a live snapshot (memprof__profile_from_snapshot) or a pprof file
 * read back by the `memprof` command. Writers never see engine structures.
 *
 * Values per stack (the four pprof sample types): estimated objects and bytes allocated
 * since sampling began (alloc_*) and still live (inuse_*), already scaled by the unbiased
 * weights, plus the variance of the in-use estimates and the sample counts behind them, so
 * any writer can print intervals and low-sample warnings.
 */
#ifndef MEMPROF_EXPORT_PROFILE_H
#define MEMPROF_EXPORT_PROFILE_H

#include <stddef.h>
#include <stdint.h>

struct memprof_snapshot;

struct memprof_pframe {
    const char *function; /* NULL when unknown (then label from module + address) */
    const char *file;     /* NULL when unknown */
    const char *module;   /* NULL for runtime frames or unknown */
    const char *build_id; /* hex, NULL if none */
    uint32_t line;
    uint32_t flags;   /* MEMPROF_FRAME_* (memprof.h) */
    uint64_t address; /* 0 for runtime frames */
    uint64_t load_bias;
    uint64_t sym_offset; /* address - start of the function, when known (0 otherwise) */
};

struct memprof_pstack {
    const uint32_t *frames; /* indexes into memprof_profile.frames, leaf first */
    uint32_t nframes;
    uint64_t alloc_objects, alloc_space; /* estimates, cumulative */
    uint64_t inuse_objects, inuse_space; /* estimates, live now */
    double inuse_space_var, inuse_objects_var;
    uint64_t live_samples, alloc_samples;
};

struct memprof_profile {
    uint64_t sampling_rate;
    uint64_t time_unix_ns; /* wall-clock time the snapshot was taken */
    struct memprof_pframe *frames;
    size_t nframes;
    struct memprof_pstack *stacks; /* sorted by inuse_space, largest first */
    size_t nstacks;
    /* Whole heap. */
    uint64_t inuse_space, inuse_objects, live_samples;
    double inuse_space_var, inuse_objects_var;
    /* Health, as far as known. */
    uint64_t truncated_stacks, dropped_samples, stack_overflows, unresolved_addresses,
        total_addresses;
    /* Storage owned by the profile (frame index arrays, strings from a parsed file). */
    void *arena;
};

/* Builds the profile of a snapshot (resolving its stacks). Returns 0 or -ENOMEM. */
int memprof__profile_from_snapshot(const struct memprof_snapshot *s, struct memprof_profile **out);
void memprof__profile_free(struct memprof_profile *p);

/* The label of a frame for flame graphs and summaries: the function name, else
 * "module+0xoffset", else "[unknown]". Returns buf or a string owned by the profile. */
const char *memprof__pframe_label(const struct memprof_pframe *f, char *buf, size_t size);

#endif
