/* SPDX-License-Identifier: MIT */
/*
 * The engine: the one global profiler instance and its lifecycle state machine, as the API
 * layer (src/api/) sees it. Interposition backends see only core/backend.h, which this
 * header includes: the entry points they call for every allocation and free, and the few
 * fields the free fast path reads.
 *
 * Lifecycle (doc/architecture.md, Decisions: Lifecycle):
 *   UNINITIALIZED --init--> INITIALIZED --start--> ACTIVE <--stop/start--> STOPPED
 *   any initialised state --shutdown--> SHUTDOWN (one-way)
 * ACTIVE samples allocations and tracks frees; STOPPED tracks frees only, so blocks freed
 * after stop leave the live set; SHUTDOWN disables the free path's filter and ignores all.
 * Tables are never unmapped while hooks can run: a hook may be preempted anywhere. Init maps
 * them, unless a backend deferred them (memprof__engine_defer_tables()): then the first sample
 * or reader does.
 */
#ifndef MEMPROF_CORE_ENGINE_H
#define MEMPROF_CORE_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "core/backend.h"
#include "core/heapmap.h"
#include "core/history.h"
#include "core/stacktab.h"
#include "core/threads.h"
#include "memprof/memprof.h"

/* Mean of the countdown drawn while not sampling: the cold path then runs about once per
 * this many bytes, and right after start at most about this many bytes per thread go
 * unsampled before the first draw at the real rate. */
#define MEMPROF_IDLE_INTERVAL  (64u * 1024u)
#define MEMPROF_MAX_RATE       ((uint64_t)1 << 40)
#define MEMPROF_DEFAULT_FRAMES 64u
#define MEMPROF_SHALLOW_DEPTH  4u

#define MEMPROF_NOT_SAMPLED_BITS  10
#define MEMPROF_NOT_SAMPLED_SLOTS (1u << MEMPROF_NOT_SAMPLED_BITS)

struct memprof_engine {
    bool sheap_wanted;  /* a backend asked for the sample heap before init */
    bool defer_tables;  /* a backend asked for the tables to be mapped when first needed */
    _Atomic int tables; /* TABLES_* (engine.c) */

    _Atomic int state;           /* memprof_state, or ENGINE_INITIALIZING */
    _Atomic uint32_t generation; /* bumped by start, stop and shutdown */
    uint64_t rate;               /* immutable after init */
    uint32_t max_frames;
    uint32_t unwinder; /* enum memprof_unwinder (capture.h) */
    uint64_t seed;
    _Atomic uint64_t thread_seq; /* threads seeded so far (deterministic seeding) */
    memprof_log_fn log_fn;
    void *log_ctx;
    _Atomic int backends; /* interposition backends feeding this engine */

    struct memprof_heapmap hm;
    struct memprof_stacktab st;

    _Atomic uint64_t total_samples;
    _Atomic uint64_t freed_samples;
    _Atomic uint64_t reentrant_skips;
    _Atomic uint64_t truncated_stacks;
    /* Unwinding health (doc/guarantees.md): native depth over all samples, the minimum, and
     * how many were shallow (< MEMPROF_SHALLOW_DEPTH frames). */
    _Atomic uint64_t depth_total;
    _Atomic uint32_t depth_min;
    _Atomic uint64_t shallow_stacks;
    _Atomic uint64_t mapped_bytes;
    _Atomic uint64_t write_failures; /* counted by the API layer */
    /* Live estimate maintained incrementally: rounded weights added on insert and the same
     * rounded weights subtracted on free, so it returns exactly to zero. */
    _Atomic int64_t live_est_bytes;
    _Atomic uint64_t alloc_est_bytes; /* weighted bytes of every sample taken */
    /* Freed samples younger than this count as temporary; 0 = the default. */
    _Atomic uint64_t temp_threshold_ns;
    /* CLOCK_MONOTONIC time of the first start: the history's and the snapshot's time zero. */
    _Atomic uint64_t origin_ns;
    /* The peak picture and the heap over time (history.h). */
    struct memprof_history hist;
    /* The threads that took samples (threads.h). */
    struct memprof_threads threads;

    /* Addresses the Bloom filter let through to the heap map, which did not know them: a
     * freed sample's bits stay set until a rebuild, and allocators hand the same address
     * out again at once (glibc's tcache), so without this every later free of it would
     * search the heap map. Direct-mapped; an entry is a fact ("not a live sample") until a
     * sample of that address is inserted, which clears it first. */
    _Atomic uint64_t not_sampled[MEMPROF_NOT_SAMPLED_SLOTS];
    _Atomic uint64_t free_misses; /* frees that searched the heap map in vain */
};

extern MEMPROF_INTERNAL struct memprof_engine memprof__engine;

/* ---- lifecycle (called by the API layer) ------------------------------------------------ */
/* Validated configuration the engine is built from. */
struct memprof_engine_config {
    uint64_t rate, heap_map_capacity, max_stacks, seed;
    uint32_t max_frames;
    uint32_t unwinder; /* enum memprof_unwinder, resolved (never DEFAULT) */
    memprof_log_fn log_fn;
    void *log_ctx;
};
MEMPROF_INTERNAL int memprof__engine_init(const struct memprof_engine_config *cfg);
MEMPROF_INTERNAL int memprof__engine_start(void);
MEMPROF_INTERNAL int memprof__engine_stop(void);
MEMPROF_INTERNAL void memprof__engine_shutdown(void);
/* The current memprof_state. */
MEMPROF_INTERNAL int memprof__engine_state(void);
void memprof__engine_stats(memprof_stats *out);

/* Freed samples that lived less than this many nanoseconds are temporary allocations. */
#define MEMPROF_DEFAULT_TEMP_THRESHOLD_NS 1000000u /* 1 ms */
MEMPROF_INTERNAL uint64_t memprof__engine_temp_threshold(void);
/* Sets the threshold (0: the default); in any state, from any thread. */
MEMPROF_INTERNAL void memprof__engine_set_temp_threshold(uint64_t ns);

/* Records a sample of `size` bytes at `ptr` with the given stack: the part of the cold path
 * after capture. Exposed for tests and benchmarks. */
void memprof__record(uint64_t key, size_t size, const uintptr_t *frames, unsigned depth,
                     bool truncated);
/* The same with interpreter frames: frames[native..depth) are ids of frame source `source`. */
void memprof__record_mixed(uint64_t key, size_t size, const uintptr_t *frames, unsigned depth,
                           unsigned native, unsigned source, bool truncated);

/* Custom allocators (runtime.h): keys are id | MEMPROF_REPORT_KEY_BIT so they never equal a
 * user-space address. */
#define MEMPROF_REPORT_KEY_BIT ((uint64_t)1 << 63)
/* The cold path of a reported allocation whose charge (memprof__sampler_charge) said
 * sample; returns whether it was sampled. */
MEMPROF_COLD bool memprof__report_slow(uint64_t key, size_t size);
/* Removes a reported block; returns whether it was a live sample. */
bool memprof__report_free(uint64_t key);
/* For a runtime that keeps its own countdown (runtime.h 1.1): the bytes to the next sample
 * point, drawn from the calling thread's generator (seeded on first use), or 0 while the
 * engine is not ACTIVE or the caller is profiler code. */
uint64_t memprof__sample_interval(void);
/* Records `key` as a sample of `size` bytes on the calling thread without deciding (the
 * caller's countdown did). False if the engine is not ACTIVE, size is 0, or the caller is
 * profiler code. */
MEMPROF_COLD bool memprof__report_record(uint64_t key, size_t size);

#endif
