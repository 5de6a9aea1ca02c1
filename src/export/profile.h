/* SPDX-License-Identifier: MIT */
/*
 * The profile model every writer reads: resolved frames and per-stack values, independent
 * of where they came from -- a live snapshot (api/snapshot_profile.h) or a pprof file
 * read back by the `memprof` command. Writers never see engine structures.
 *
 * Values per stack (the four pprof sample types): estimated objects and bytes allocated
 * since sampling began (alloc_*) and still live (inuse_*), already scaled by the unbiased
 * weights, plus the variance of the in-use estimates and the sample counts behind them, so
 * any writer can print intervals and low-sample warnings.
 *
 * The views beyond "live now" (doc/guide.md, "Views"): the stack's share of the heap at its
 * recorded peak (peak_*), what it allocated that was freed within temp_threshold_ns
 * (temp_*), the lifetimes of its freed samples, and the leak statistic of its survivors
 * (leak_*, doc/statistics.md). The profile carries the peak, the heap over time (series) and
 * the threads that allocated. A writer reads one view's numbers through
 * memprof__pstack_view().
 */
#ifndef MEMPROF_EXPORT_PROFILE_H
#define MEMPROF_EXPORT_PROFILE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/lifetime.h"
#include "memprof/memprof.h"

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
    /* The module's memory mapping holding the address, page-aligned, and the file offset
     * of its start (what pprof's Mapping holds); map_limit 0 when not known. */
    uint64_t map_start, map_limit, map_offset;
    /* The function as the binary spells it (a mangled C++ or Rust name; pprof's
     * Function.system_name), NULL when `function` is that spelling. */
    const char *system_name;
};

struct memprof_pstack {
    const uint32_t *frames; /* indexes into memprof_profile.frames, leaf first */
    uint32_t nframes;
    uint64_t alloc_objects, alloc_space; /* estimates, cumulative */
    uint64_t inuse_objects, inuse_space; /* estimates, live now */
    double inuse_space_var, inuse_objects_var;
    uint64_t live_samples, alloc_samples;
    /* Live at the profile's recorded peak (zero if the stack held nothing then). */
    uint64_t peak_objects, peak_space, peak_samples;
    double peak_space_var;
    /* Allocated and freed within temp_threshold_ns (estimates, cumulative). */
    uint64_t temp_objects, temp_space, temp_samples;
    /* Freed samples per lifetime bucket (unweighted counts). */
    uint32_t lifetimes[MEMPROF_LIFETIME_BUCKETS];
    /* Leak statistic of the live samples (doc/statistics.md): the estimated bytes of the
     * survivors allocated in the steady window, their rate per second of that window, and
     * whether the site is a suspect (survivors spread over the window as a steady leak's
     * are). */
    uint64_t leak_space, leak_samples;
    double leak_rate;
    uint32_t leak_suspect;
    /* The thread that allocated: index into memprof_profile.threads + 1; 0 = not known. */
    uint32_t thread;
};

/* One point of the heap over time. */
struct memprof_ppoint {
    uint64_t t_ns;  /* since sampling started */
    uint64_t live;  /* estimated live bytes */
    uint64_t alloc; /* estimated bytes allocated so far */
};

struct memprof_pthread {
    uint64_t tid;
    const char *name; /* NULL when not known */
};

/* The views a writer can show (memprof__pstack_view()): memprof.h's enum memprof_view. */
#define MEMPROF_VIEW_COUNT 5

/* One view's numbers for a stack. var is the variance of bytes where the model has it
 * (live and peak), else 0 with var_known false. */
struct memprof_pvalue {
    uint64_t bytes, objects, samples;
    double var;
    int var_known;
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
    /* The recorded peak (all zero when no sample was ever live): estimated bytes and objects
     * with the variance of bytes, the live samples behind it, and when it was recorded. */
    uint64_t peak_space, peak_objects, peak_samples;
    double peak_space_var;
    uint64_t peak_time_ns; /* since sampling started */
    uint32_t merged;       /* > 1: a merge of this many profiles (no one peak time) */
    uint64_t duration_ns;  /* from sampling start to the snapshot; 0 if not known */
    uint64_t temp_threshold_ns;
    /* The heap over time, oldest first (at most about 1,000 points). */
    struct memprof_ppoint *series;
    size_t nseries;
    struct memprof_pthread *threads;
    size_t nthreads;
    char *thread_names; /* storage of the threads' names */
    /* Health, as far as known. */
    uint64_t truncated_stacks, dropped_samples, stack_overflows, unresolved_addresses,
        total_addresses;
    /* Storage owned by the profile (frame index arrays, strings from a parsed file); series,
     * threads and thread_names are owned too (memprof__profile_free()). */
    void *arena;
};

void memprof__profile_free(struct memprof_profile *p);

/* One view's numbers of a stack. */
void memprof__pstack_view(const struct memprof_pstack *st, enum memprof_view v,
                          struct memprof_pvalue *out);
/* Whether a report asked for the live view shows the peak instead: nothing, or next to
 * nothing (under 1/16 of the peak's bytes), was live at the snapshot, as at the exit of a
 * program that freed what it allocated, while the peak view has sites. */
bool memprof__prefer_peak(const struct memprof_profile *p);
/* A view's name: "live", "alloc", "peak", "temporary" or "leaks". */
const char *memprof__view_name(enum memprof_view v);
/* The view of a name, or -1 for an unknown one. */
int memprof__view_by_name(const char *name);
/* The q-quantile (0 < q < 1) of a stack's freed-sample lifetimes, as the upper edge of the
 * bucket it falls in, in nanoseconds; 0 when nothing was freed. */
uint64_t memprof__pstack_lifetime_quantile(const struct memprof_pstack *st, double q);

/* The profile by call site: a copy whose stacks are p's merged across threads (stacks with
 * the same frames summed; `thread` 0 where several threads allocated), sorted by inuse_space.
 * Everything but the stacks is shared with p, which must outlive the copy. What people read
 * lists sites; pprof keeps one sample per thread. Returns 0 or -ENOMEM. */
int memprof__profile_sites(const struct memprof_profile *p, struct memprof_profile **out);
void memprof__profile_sites_free(struct memprof_profile *m);

/* One profile of several (read from files), as pprof merges them: their stacks side by side
 * (threads renumbered), every value and whole-heap figure summed; no heap over time and no
 * peak time; the largest sampling rate. Frames and threads keep pointing at the inputs'
 * strings: the inputs must outlive the result (memprof__profile_free() frees it). Returns 0
 * or -ENOMEM. */
int memprof__profile_merge(struct memprof_profile *const *in, size_t n,
                           struct memprof_profile **out);

/* The label of a frame for flame graphs and summaries: the function name, else
 * "module+0xoffset", else "[unknown]". Returns buf or a string owned by the profile. */
const char *memprof__pframe_label(const struct memprof_pframe *f, char *buf, size_t size);

/* Whether p names none of its native frames: written with MEMPROF_SYMBOLIZE=0 (or by a
 * process that could not read a single symbol), for `memprof report --symbolize` to name. */
bool memprof__profile_unsymbolized(const struct memprof_profile *p);

/* For the note on frames without names (text summary and HTML page): when a quarter or more
 * of p's code addresses have no name, the file names of the modules holding such frames, in
 * frame order, at most `max` of them into out[] (*more: there are others). Returns how many;
 * 0 when no note is due (also for a raw profile, which says it is unsymbolized instead). */
size_t memprof__unnamed_modules(const struct memprof_profile *p, const char **out, size_t max,
                                bool *more);

/* ---- Sites named by the user's code (sites.c) ------------------------------------------ */

/* Whether f is an allocator wrapper: a native frame whose function matches the default list
 * (memprof__wrappers_default()) or a pattern of MEMPROF_WRAPPERS. */
bool memprof__pframe_is_wrapper(const struct memprof_pframe *f);
/* The default wrapper patterns (shell globs), for the documentation's tests. */
const char *const *memprof__wrappers_default(size_t *n);
/* The index in st->frames of the frame that names the site: the innermost interpreter frame
 * if the stack has one, else the caller of the outermost wrapper among the innermost frames
 * (the frames inside it are the allocator's; sites.c), or the outermost frame when all are
 * wrappers; 0 for an empty stack or one without wrappers. */
uint32_t memprof__pstack_site(const struct memprof_profile *p, const struct memprof_pstack *st);
/* The index of the frame a site is named by, given its site's frame `site`: that frame, or,
 * when it is a runtime's own method without a source file (a C method of Ruby's, an internal
 * function of PHP), the next interpreter frame out that has one (the user's code that called
 * it). */
uint32_t memprof__pstack_label(const struct memprof_profile *p, const struct memprof_pstack *st,
                               uint32_t site);
/* Whether MEMPROF_NATIVE asks the human-facing writers for every native frame. */
bool memprof__present_native(void);
/* The profile as people read it: a copy whose stacks start at their site's frame (the
 * wrappers and interpreter internals inside it left out) with the native frames between two
 * interpreter frames folded away; with `native` the stacks are p's own. Stacks that become
 * equal stay separate (memprof__profile_sites() merges them). Frames, series, threads and
 * strings stay p's, which must outlive the copy. Returns 0 or -ENOMEM. */
int memprof__profile_presented(const struct memprof_profile *p, bool native,
                               struct memprof_profile **out);
void memprof__profile_presented_free(struct memprof_profile *q);

#endif
