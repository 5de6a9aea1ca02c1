/* SPDX-License-Identifier: MIT */
/*
 * The engine: the one global profiler instance, its lifecycle state machine, and the entry
 * points interposition backends call for every allocation and free.
 *
 * Lifecycle (doc/architecture.md, Decisions: Lifecycle):
 *   UNINITIALIZED --init--> INITIALIZED --start--> ACTIVE <--stop/start--> STOPPED
 *   any initialised state --shutdown--> SHUTDOWN (one-way)
 * ACTIVE samples allocations and tracks frees; STOPPED tracks frees only, so blocks freed
 * after stop leave the live set; SHUTDOWN disables the free path's filter and ignores all.
 * Tables are never unmapped while hooks can run: a hook may be preempted anywhere.
 *
 * Backends call, for each allocation of `size` bytes, memprof__sampler_charge(size) (a TLS
 * decrement and branch) and only when it says so the cold path: memprof__sample_begin()
 * decides, the backend allocates (from the sample heap if it has one, see below), and
 * memprof__sample_end() records the block. Before each real free they ask whether the block
 * can be a sample (memprof__on_free()).
 *
 * Where sampled blocks live. A backend that can ensure every free() of the process reaches
 * its hooks (the preload plugin in front of glibc, once libc's own symbol entries for free
 * and realloc name the plugin: preload_retarget.c) calls memprof__engine_use_sample_heap()
 * before init, and sampled blocks then come from the sample heap (sampleheap.h): their frees
 * are recognised by address range (memprof__free_sampled_block()), and every other free costs
 * one compare and one load. The GOT backend, which cannot reach pointers to free taken before
 * it started, calls memprof__engine_use_framed_sample_heap() instead: the same heap with
 * blocks glibc's own free() also accepts, at rates where the page each one takes is
 * affordable. Otherwise (lower rates there; MEMPROF_SAMPLE_HEAP=0; requests the heap cannot
 * serve) a sampled block is the real allocator's, an "outside" sample found by the Bloom
 * filter and the heap map; while none is live, a free costs one load. Fork: a pthread_atfork child
 * handler re-seeds the surviving thread and releases anything a vanished thread might have held
 * (the Bloom rebuild try-lock).
 */
#ifndef MEMPROF_CORE_ENGINE_H
#define MEMPROF_CORE_ENGINE_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/compiler.h"
#include "core/bloom.h"
#include "core/heapmap.h"
#include "core/history.h"
#include "core/sampleheap.h"
#include "core/sampler.h"
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
    /* Read by the free fast path on every free, in this order: keep them first, on one
     * cache line, and rarely written. */
    struct memprof_sheap sheap;
    _Atomic uint64_t outside_live; /* live samples of native blocks outside the sample heap */
    struct memprof_bloom bloom;
    bool sheap_wanted; /* a backend asked for the sample heap before init */

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
/* 0 if the engine's tables may be read (initialised, not shut down), else -errno. */
MEMPROF_INTERNAL int memprof__engine_readable(void);
void memprof__engine_stats(memprof_stats *out);

/* A backend announces itself before it feeds the engine (start needs one). */
MEMPROF_INTERNAL void memprof__backend_register(void);
/* Asks, before init, for sampled blocks to be served from the sample heap (only for a
 * backend that ensures every free() of the process reaches its hooks: glibc aborts on a
 * block of that heap).
 * Returns 0, or -EALREADY after init (nothing changes). */
MEMPROF_INTERNAL int memprof__engine_use_sample_heap(void);
/* For a backend in front of glibc that cannot see every free() (the GOT start): after init,
 * before the backend's hooks can allocate, sets up the sample heap with its blocks framed as
 * glibc's mmap()ed chunks (sampleheap.h), which glibc's own free() and realloc() accept. A
 * framed block takes at least a page, so only at rates of MEMPROF_FRAMED_MIN_PAGES pages or
 * more (at most 1/64 more memory than the live heap's, if every sample is small).
 * Returns 0; -ERANGE for a lower rate; -EALREADY if the engine has a sample heap; -EINVAL
 * unless initialised and not active; -ENOMEM if no window of address space is free. */
#define MEMPROF_FRAMED_MIN_PAGES 64u
MEMPROF_INTERNAL int memprof__engine_use_framed_sample_heap(size_t page);
/* mlockall(flags) through real_mlockall, without faulting in the engine's tables and sample
 * heap (platform.h, memprof__pf_mlockall_except()). From outside the hooks. */
MEMPROF_INTERNAL int memprof__engine_mlockall(int flags, int (*real_mlockall)(int));
/* Freed samples that lived less than this many nanoseconds are temporary allocations. */
#define MEMPROF_DEFAULT_TEMP_THRESHOLD_NS 1000000u /* 1 ms */
MEMPROF_INTERNAL uint64_t memprof__engine_temp_threshold(void);
/* Sets the threshold (0: the default); in any state, from any thread. */
MEMPROF_INTERNAL void memprof__engine_set_temp_threshold(uint64_t ns);
/* Marks the object containing `addr` as profiler code, skipped at the leaf end of stacks. */
MEMPROF_INTERNAL void memprof__engine_own_code(const void *addr);
/* Passes `msg` to the log callback of memprof_config, if one was given at init. Only from
 * outside the hooks, with no lock of the caller's held (the callback may do anything). */
MEMPROF_INTERNAL void memprof__engine_log(int level, const char *msg);
/* Before the calling thread installs a seccomp filter (sandbox.h): `strict` for
 * SECCOMP_MODE_STRICT, else `fprog` is the filter's struct sock_fprog. Does now what the
 * thread would otherwise do at its first sample, while every call is still allowed (its
 * seed, its registration with its id and name, its stack's bounds for frame-pointer walks),
 * draws the entropy later seeds use if getrandom() becomes forbidden, and marks what the
 * filter forbids; frame-pointer unwinding, which needs /proc, turns to DWARF if the filter
 * forbids reading it and libunwind is there. Returns the groups it marked, for
 * memprof__engine_seccomp_after(). */
MEMPROF_INTERNAL uint32_t memprof__engine_seccomp_before(bool strict, const void *fprog);
/* After the call: a filter the kernel refused (`installed` false) forbids nothing. */
MEMPROF_INTERNAL void memprof__engine_seccomp_after(uint32_t marked, bool installed);

/* Sets the calling thread's re-entrancy guard; returns the previous value for
 * memprof__guard_leave(). Everything the API does on a user thread runs under it, so the
 * profiler's own allocations are never sampled. */
static inline uint8_t memprof__guard_enter(void)
{
    uint8_t old = memprof__tls.guard;
    memprof__tls.guard = 1;
    return old;
}
static inline void memprof__guard_leave(uint8_t old)
{
    memprof__tls.guard = old;
}

/* ---- hot-path entry points (called by backends) ----------------------------------------- */
/* The allocation cold path, part 1, for an allocation of `size` bytes whose charge
 * (memprof__sampler_charge) said so: decides whether it is sampled (the countdown is drawn
 * afresh either way). On true, the thread's re-entrancy guard is set, errno's value is kept
 * in *saved_errno, and the caller allocates and then calls memprof__sample_end(). */
MEMPROF_INTERNAL MEMPROF_COLD bool memprof__sample_begin(size_t size, int *saved_errno);
/* Part 2: records the block at ptr as a sample of `size` bytes (nothing if ptr is NULL, the
 * allocation having failed), restores errno if ptr is not NULL, and clears the guard. */
MEMPROF_INTERNAL void memprof__sample_end(void *ptr, size_t size, int saved_errno);
/* Both parts around an allocation already made (ptr may be NULL if it failed). */
MEMPROF_INTERNAL MEMPROF_COLD void memprof__alloc_slow(void *ptr, size_t size);
/* The free cold path: the Bloom filter says ptr may be sampled. */
MEMPROF_INTERNAL MEMPROF_COLD void memprof__free_slow(void *ptr);

MEMPROF_INLINE void memprof__on_alloc(void *ptr, size_t size)
{
    if (memprof__sampler_charge(size))
        memprof__alloc_slow(ptr, size);
}

/* Whether ptr lies in the sample heap's range (the free path's test): then the backend
 * must not hand it to the real allocator but to memprof__free_sampled_block() (or, if
 * memprof__sample_heap_block() confirms it, realloc it itself). */
MEMPROF_INLINE bool memprof__in_sample_heap(const void *ptr)
{
    return memprof__sheap_owns(&memprof__engine.sheap, ptr);
}

/* The cold confirmation: ptr, in the range, is the sample heap's block (with framing, not
 * the real allocator's block in a hole glibc left there; sampleheap.h). */
MEMPROF_INLINE bool memprof__sample_heap_block(const void *ptr)
{
    return memprof__sheap_holds(&memprof__engine.sheap, ptr);
}

/* A block of the sample heap for a sampled allocation (between memprof__sample_begin() and
 * memprof__sample_end()), or NULL: then the block comes from the real allocator. */
MEMPROF_INTERNAL void *memprof__sample_heap_alloc(size_t n, size_t align, bool zero);
/* The free of a block in the sample heap's range: removes its sample and recycles the
 * block. False (nothing done) if memprof__sample_heap_block() denies it: the real allocator
 * frees it. */
MEMPROF_INTERNAL MEMPROF_COLD bool memprof__free_sampled_block(void *ptr);

/* Whether ptr (not a block of the sample heap) may be a live sample: false means certainly
 * not. Nothing live outside the sample heap (the usual case under the preload plugin, and in
 * programs that free what they sample quickly) means nothing to look for; the count only
 * changes in cold paths, so its line stays shared. */
MEMPROF_INLINE bool memprof__maybe_sampled(const void *ptr)
{
    return memprof_atomic_load_relaxed(&memprof__engine.outside_live) != 0 && ptr &&
           memprof__bloom_maybe(&memprof__engine.bloom, (uint64_t)(uintptr_t)ptr);
}

MEMPROF_INLINE void memprof__on_free(void *ptr)
{
    if (MEMPROF_UNLIKELY(memprof__maybe_sampled(ptr)))
        memprof__free_slow(ptr);
}

/* realloc support: removes ptr's sample (if any; ptr may be a block of the sample heap)
 * before the real realloc and hands it back, so a failed realloc can put it back with
 * memprof__restore(). Returns true if a sample was taken out. */
MEMPROF_INTERNAL bool memprof__take(void *ptr, struct memprof_hm_entry *out);
MEMPROF_INTERNAL void memprof__restore(const struct memprof_hm_entry *e);

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
