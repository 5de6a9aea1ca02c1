/* SPDX-License-Identifier: MIT */
/*
 * The heap's history, kept from sampled events only: the per-stack picture at the peak of the
 * estimated live heap, and the heap over time. Nothing here runs on the allocation fast
 * paths; the cold paths call memprof__hist_sampled() after each sampled allocation and free.
 *
 * Peak. The engine keeps the live estimate (sum of live sample weights) incrementally. When a
 * sampled allocation takes it past the trigger, the calling thread copies every stack's live
 * counters into the stack's peak counters (a "recording") and sets the trigger to the new
 * peak plus 1/MEMPROF_PEAK_MARGIN of it. So the recorded peak is within that margin of the
 * highest estimate reached (doc/statistics.md), and recordings are bounded: at most
 * 1 + log(peak / first) / log(1 + 1/MEMPROF_PEAK_MARGIN) of them (about 45 per doubling of
 * the heap). A recording costs one pass over the stack table; to keep that amortized, a new
 * one waits for at least (stacks / MEMPROF_PEAK_AMORTIZE) samples since the last one. The
 * snapshot compares the recorded peak with the live heap it sees and keeps the larger.
 *
 * Heap over time. A series of at most MEMPROF_SERIES_CAP points (time, live estimate,
 * allocated estimate). Time is cut into windows of `step`; each point is the sampled event
 * with the highest live estimate in its window (so a spike between two points is never
 * lost), appended when the first event of the next window comes. When the series is full,
 * pairs of neighbours are merged the same way (keeping the higher, with the later allocated
 * total) and the step doubles. So it covers the whole run with 512 to 1,024 points,
 * whatever its length, and its highest point is the highest estimate reached.
 *
 * Concurrency. Writers (cold paths on any thread, or a signal handler on one) take a try-lock
 * and skip their update when it is busy: they never wait, so neither a signal handler nor a
 * fork child can block on it. Readers (snapshots) never take the lock: each structure has a
 * sequence number that writers make odd while they write, and readers copy, then retry if it
 * changed (a bounded number of times; a writer interrupted for longer leaves a slightly torn
 * picture, never a wait). Every field is an atomic accessed relaxed between the sequence
 * number's acquire and release operations.
 */
#ifndef MEMPROF_CORE_HISTORY_H
#define MEMPROF_CORE_HISTORY_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/lifetime.h"
#include "core/stacktab.h"

#define MEMPROF_PEAK_MARGIN    64u /* a recording when the estimate passes peak + peak/64 */
#define MEMPROF_PEAK_AMORTIZE  32u /* samples since the last recording >= stacks / 32 */
#define MEMPROF_SERIES_CAP     1024u
#define MEMPROF_SERIES_STEP_NS 1000000u /* the first step: 1 ms */

struct memprof_hist_point {
    uint64_t t_ns;  /* since the engine's time origin */
    uint64_t live;  /* estimated live bytes */
    uint64_t alloc; /* estimated bytes allocated so far */
};

struct memprof_history {
    _Atomic uint32_t lock; /* try-lock of writers */
    /* Peak. */
    _Atomic uint64_t peak_seq;
    _Atomic int64_t peak_trigger;
    _Atomic uint64_t peak_samples_at; /* total samples at the last recording */
    _Atomic uint64_t peak_bytes, peak_count_fp16, peak_var_q32, peak_samples, peak_t_ns;
    /* Series: the points, and the current window (its start and highest event). */
    _Atomic uint64_t series_seq;
    _Atomic uint64_t step_ns, window_t_ns;
    _Atomic uint32_t npoints, have_cand;
    struct memprof_hist_apoint {
        _Atomic uint64_t t_ns, live, alloc;
    } points[MEMPROF_SERIES_CAP], cand;
};

/* The engine's totals at a sampled event. */
struct memprof_hist_now {
    uint64_t t_ns; /* since the time origin */
    int64_t live;  /* estimated live bytes (may be transiently negative under races) */
    uint64_t alloc;
    uint64_t samples; /* samples taken so far */
};

/* After a sampled allocation (`grew`) or free: updates the peak (allocations only) and the
 * series. Never waits; from any thread, also from a signal handler, under the guard. */
void memprof__hist_sampled(struct memprof_history *h, struct memprof_stacktab *st,
                           const struct memprof_hist_now *now, bool grew);

/* The recorded peak, read consistently with the per-stack peak counters that
 * memprof__hist_read_peak_stacks() copies out. */
struct memprof_hist_peak {
    uint64_t bytes, count_fp16, var_q32, samples, t_ns;
};
/* Reads the peak and calls fn for every stack with peak samples. Lock-free; retries a few
 * times if a recording runs meanwhile. fn may be called again for the same stack after a
 * retry: it must overwrite, not add. */
void memprof__hist_read_peak(struct memprof_history *h, struct memprof_stacktab *st,
                             struct memprof_hist_peak *peak,
                             void (*fn)(void *ctx, uint32_t id, const struct memprof_stack *s),
                             void *ctx);
/* Copies the series into out (room for MEMPROF_SERIES_CAP + 1 points: the window in
 * progress ends it); returns the count. */
size_t memprof__hist_read_series(struct memprof_history *h, struct memprof_hist_point *out);
/* In a fork child: the forking thread is the only one left; releases the lock a vanished
 * thread may have held and makes the sequence numbers even. */
void memprof__hist_after_fork(struct memprof_history *h);

#endif
