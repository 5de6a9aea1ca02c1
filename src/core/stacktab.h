/* SPDX-License-Identifier: MIT */
/*
 * The stack table: interns call stacks (arrays of return addresses) into dense ids that stay
 * valid for the life of the process, and keeps per-stack sample counters.
 *
 * Structure. Records are appended to an array indexed by id; their frames go to an
 * append-only frame arena; a bucket array of chain heads indexes them by hash. The record
 * array and the arena grow by segments, each mapped when the first id or frame in it is
 * handed out (segments.h), so memory, address space and commit charge grow with the number
 * of distinct stacks rather than with the capacity (1M records of 232 bytes and 32M frames
 * by default); the buckets are one small mapping. Records are never removed or moved; a
 * stack's frames never straddle two arena segments.
 *
 * Lock-free interning (cold path only):
 *   1. Walk the chain of the stack's bucket from its head (acquire); compare hash, depth
 *      and frames. A hit returns the id.
 *   2. Otherwise take a fresh id (fetch_add) and arena space, fill the record.
 *   3. Link it: next := head; CAS bucket head -> id (release). On CAS failure, other
 *      threads pushed records meanwhile: compare against just those (the chain only grows at
 *      its head) and, on a match, abandon the new record (it is never published); otherwise
 *      retry the CAS with the new head.
 * A record is visible to readers once PUBLISHED is set. It is set, by the creator after its
 * CAS or by any thread that finds the record in a chain (only linked records are reachable),
 * whichever comes first, so a stack id handed to a sample is published before the sample is.
 * No stack is ever interned twice and readers never see a half-written record.
 *
 * Id 0 is the "overflow" stack: samples whose stack could not be interned because the table
 * or the arena is full, or a segment could not be mapped, are attributed to it and counted.
 */
#ifndef MEMPROF_CORE_STACKTAB_H
#define MEMPROF_CORE_STACKTAB_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/lifetime.h"
#include "core/segments.h"

#define MEMPROF_STACK_OVERFLOW_ID 0u
#define MEMPROF_STACK_PUBLISHED   0x1u
#define MEMPROF_STACK_TRUNCATED   0x2u
#define MEMPROF_STACK_OVERFLOW    0x4u
#define MEMPROF_STACK_MAX_DEPTH   512u
/* Segments of 2^8 records (58 KiB) and 2^13 frames (64 KiB) to begin with. */
#define MEMPROF_STACK_REC_BITS   8u
#define MEMPROF_STACK_FRAME_BITS 13u

struct memprof_stack {
    uint64_t hash;
    _Atomic uint32_t next; /* id + 1 of the next record in the bucket chain, 0 = end */
    uint16_t depth;
    _Atomic uint16_t flags;
    uint64_t frames_off;   /* index into the frame arena */
    uint16_t native_depth; /* frames[0..native_depth) are return addresses, leaf first; the
                              rest are interpreter frame ids from a frame source, innermost
                              first */
    uint8_t source;        /* frame source tag (sources.h), 0 = native frames only */
    uint16_t thread;       /* the allocating thread (threads.h), part of the stack's identity */
    /* Sampled (unweighted) counters, updated in cold paths. */
    _Atomic uint64_t live_samples, live_bytes;
    _Atomic uint64_t alloc_samples, alloc_bytes;
    /* Weighted estimates of everything allocated from this stack (estimate.h): bytes
     * rounded per sample, counts in 1/65536 units. */
    _Atomic uint64_t alloc_est_bytes, alloc_est_count_fp16;
    /* The same weights for the live samples, and the variance of the live byte estimate in
     * units of rate^2 / 2^32 (one sample adds at most 2^32: see engine.c). Integers, so adding
     * on insert and subtracting on free cancel exactly. */
    _Atomic uint64_t live_est_bytes, live_est_count_fp16, live_var_q32;
    /* The live counters as they were at the recorded peak (history.h). */
    _Atomic uint64_t peak_samples, peak_est_bytes, peak_est_count_fp16, peak_var_q32;
    /* Freed samples that lived less than the engine's temporary threshold, and their weights. */
    _Atomic uint64_t temp_samples, temp_est_bytes, temp_est_count_fp16;
    /* CLOCK_MONOTONIC time of the stack's first sample (the leak statistic's window). */
    _Atomic uint64_t first_ns;
    /* Freed samples per lifetime bucket (common/lifetime.h). */
    _Atomic uint32_t lifetimes[MEMPROF_LIFETIME_BUCKETS];
};

struct memprof_stacktab {
    _Atomic(void *) recs[MEMPROF_SEG_MAX]; /* struct memprof_stack[], NULL until mapped */
    size_t max_stacks;
    _Atomic uint32_t *buckets;
    size_t nbuckets;
    _Atomic(void *) arena[MEMPROF_SEG_MAX]; /* uintptr_t[], NULL until mapped */
    size_t arena_cap;
    _Atomic uint64_t arena_used;
    _Atomic uint64_t nids;         /* ids handed out (some may be abandoned) */
    _Atomic uint64_t published;    /* distinct stacks, the overflow stack included */
    _Atomic uint64_t overflows;    /* interns that fell back to the overflow stack */
    _Atomic uint64_t mapped_bytes; /* buckets and the segments mapped so far */
};

/* Sets the table up for up to max_stacks stacks, mapping its buckets and first record
 * segment. Returns 0 or -ENOMEM. */
int memprof__st_init(struct memprof_stacktab *st, size_t max_stacks);
/* Releases the mappings (tests only: ids and records must not be used afterwards). */
void memprof__st_destroy(struct memprof_stacktab *st);
/* Hash of a frame array (the one intern uses). */
uint64_t memprof__st_hash(const uintptr_t *frames, unsigned depth);
/* Interns a stack; returns its id, or MEMPROF_STACK_OVERFLOW_ID when full. */
uint32_t memprof__st_intern(struct memprof_stacktab *st, const uintptr_t *frames, unsigned depth,
                            bool truncated);
/* Interns a mixed stack: `native` return addresses followed by depth - native interpreter
 * frame ids of frame source `source` (its tag, sources.h; 0 if none), allocated by thread `thread`
 * (threads.h; 0 if not known). */
uint32_t memprof__st_intern_mixed(struct memprof_stacktab *st, const uintptr_t *frames,
                                  unsigned depth, unsigned native, unsigned source, unsigned thread,
                                  bool truncated);
/* Number of ids handed out so far; iterate 0..n and skip records for which
 * memprof__st_get() returns NULL. */
uint64_t memprof__st_nids(struct memprof_stacktab *st);
/* A published record, or NULL for an unknown or unpublished id. */
struct memprof_stack *memprof__st_get(struct memprof_stacktab *st, uint32_t id);
/* The mappings of the table so far: writes at most `max` ranges to `out`, returns how many. */
size_t memprof__st_ranges(struct memprof_stacktab *st, struct memprof_range *out, size_t max);
/* The frames of a record (leaf first). Its arena segment is mapped: the record was written
 * after it. */
static inline const uintptr_t *memprof__st_frames(const struct memprof_stacktab *st,
                                                  const struct memprof_stack *s)
{
    unsigned k = memprof__seg_of(s->frames_off, MEMPROF_STACK_FRAME_BITS);
    const uintptr_t *seg = memprof_atomic_load_acquire(&st->arena[k]);
    return seg + (s->frames_off - memprof__seg_start(k, MEMPROF_STACK_FRAME_BITS));
}

#endif
