/* SPDX-License-Identifier: MIT */
/*
 * The engine as interposition backends (src/interpose/) see it: the one engine header a
 * backend includes: calls, and one struct read inline on the fast paths (memprof__hot: the
 * sample heap's range, the count of samples outside it and the Bloom filter, read by every
 * free). The API layer (core/engine.h) owns the rest of the engine; backends never touch it.
 * Each backend is linked with the engine it drives (the GOT backend into libmemprof.so.1,
 * the preload plugin built from the library's objects), so both sides of this interface
 * always come from one build.
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
#ifndef MEMPROF_CORE_BACKEND_H
#define MEMPROF_CORE_BACKEND_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "config.h"

#include "common/atomic.h"
#include "common/compiler.h"
#include "core/bloom.h"
#include "core/heapmap.h"
#include "core/sampleheap.h"
#include "core/sampler.h"

/* What the free fast path reads on every free, in this order: on one cache line, rarely
 * written. */
struct memprof_engine_hot {
    struct memprof_sheap sheap;
    _Atomic uint64_t outside_live; /* live samples of native blocks outside the sample heap */
    struct memprof_bloom bloom;
};
extern MEMPROF_INTERNAL struct memprof_engine_hot memprof__hot;

/* ---- set-up and services (called by backends outside their hooks) ---------------------- */
/* A backend announces itself before it feeds the engine (start needs one). */
MEMPROF_INTERNAL void memprof__backend_register(void);
/* Asks, before init, for sampled blocks to be served from the sample heap (only for a
 * backend that ensures every free() of the process reaches its hooks: glibc aborts on a
 * block of that heap).
 * Returns 0, or -EALREADY after init (nothing changes). */
MEMPROF_INTERNAL int memprof__engine_use_sample_heap(void);
/* Asks, before init, for the engine's tables (heap map, Bloom filter, stack table, sample heap,
 * cold stacks) to be mapped at the first sample or snapshot instead of by init: most processes
 * a preload plugin starts never take a sample (a shell's, a build's short-lived tools), and
 * the mappings and page faults are most of what starting the engine costs. A sample that
 * finds them unmappable is dropped and counted as one the heap map had no room for.
 * Returns 0, or -EALREADY after init (nothing changes). */
MEMPROF_INTERNAL int memprof__engine_defer_tables(void);
/* The tables, mapped now if deferred and not mapped yet (by the first reader: a snapshot, a
 * program's mlockall() or seccomp filter). Returns 0, -ENOTCONN before init, -ESHUTDOWN after
 * shutdown, -ENOMEM. */
MEMPROF_INTERNAL int memprof__engine_tables(void);
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
/* 0 if the engine's tables may be read (initialised, not shut down), else -errno. */
MEMPROF_INTERNAL int memprof__engine_readable(void);
/* The samples taken so far (memprof_stats.total_samples), read without the rest: a backend
 * asks at exit whether there is anything to write. Any thread. */
uint64_t memprof__engine_samples(void);
/* Counts a profile the backend could not write (memprof_stats.write_failures). */
MEMPROF_INTERNAL void memprof__engine_count_write_failure(void);
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
    return memprof__sheap_owns(&memprof__hot.sheap, ptr);
}

/* The cold confirmation: ptr, in the range, is the sample heap's block (with framing, not
 * the real allocator's block in a hole glibc left there; sampleheap.h). */
MEMPROF_INLINE bool memprof__sample_heap_block(const void *ptr)
{
    return memprof__sheap_holds(&memprof__hot.sheap, ptr);
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
    return memprof_atomic_load_relaxed(&memprof__hot.outside_live) != 0 && ptr &&
           memprof__bloom_maybe(&memprof__hot.bloom, (uint64_t)(uintptr_t)ptr);
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

#endif
