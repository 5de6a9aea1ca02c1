/* SPDX-License-Identifier: MIT */
/*
 * The heap's history from sampled events: peak recordings and the heap-over-time series,
 * written under a try-lock and read under sequence numbers (the design is in history.h).
 */
#include "core/history.h"

#include "common/atomic.h"

/* Readers retry this often before they accept what they copied. */
#define READ_TRIES 64

static bool try_lock(struct memprof_history *h)
{
    uint32_t free_ = 0;
    return memprof_atomic_cas_acquire(&h->lock, &free_, 1);
}

static void unlock(struct memprof_history *h)
{
    memprof_atomic_store_release(&h->lock, 0);
}

/* Writers bracket their stores with these: odd while writing. The release fence after the
 * first increment keeps the stores after it; the release increment keeps them before it. */
static void write_begin(_Atomic uint64_t *seq)
{
    memprof_atomic_add_relaxed(seq, 1);
    memprof_atomic_fence_release();
}

static void write_end(_Atomic uint64_t *seq)
{
    memprof_atomic_add_release(seq, 1);
}

/* A reader's view is valid when the sequence number was even and did not change. */
static uint64_t read_begin(_Atomic uint64_t *seq)
{
    return memprof_atomic_load_acquire(seq);
}

static bool read_valid(_Atomic uint64_t *seq, uint64_t begin)
{
    memprof_atomic_fence_acquire();
    return !(begin & 1) && memprof_atomic_load_relaxed(seq) == begin;
}

/* ---- peak ------------------------------------------------------------------------------ */

static void record_peak(struct memprof_history *h, struct memprof_stacktab *st,
                        const struct memprof_hist_now *now)
{
    write_begin(&h->peak_seq);
    uint64_t n = memprof__st_nids(st), bytes = 0, count = 0, var = 0, samples = 0;
    for (uint64_t id = 0; id < n; id++) {
        struct memprof_stack *s = memprof__st_get(st, (uint32_t)id);
        if (!s)
            continue;
        uint64_t ls = memprof_atomic_load_relaxed(&s->live_samples);
        uint64_t lb = ls ? memprof_atomic_load_relaxed(&s->live_est_bytes) : 0;
        uint64_t lc = ls ? memprof_atomic_load_relaxed(&s->live_est_count_fp16) : 0;
        uint64_t lv = ls ? memprof_atomic_load_relaxed(&s->live_var_q32) : 0;
        /* A stack that held nothing at this peak nor the last costs one load. */
        if (ls || memprof_atomic_load_relaxed(&s->peak_samples)) {
            memprof_atomic_store_relaxed(&s->peak_samples, ls);
            memprof_atomic_store_relaxed(&s->peak_est_bytes, lb);
            memprof_atomic_store_relaxed(&s->peak_est_count_fp16, lc);
            memprof_atomic_store_relaxed(&s->peak_var_q32, lv);
        }
        samples += ls;
        bytes += lb;
        count += lc;
        var += lv;
    }
    /* The picture's own sum, not now->live: counters of other threads' samples may have
     * moved while it was copied, and the peak must equal the sum of its sites. */
    memprof_atomic_store_relaxed(&h->peak_bytes, bytes);
    memprof_atomic_store_relaxed(&h->peak_count_fp16, count);
    memprof_atomic_store_relaxed(&h->peak_var_q32, var);
    memprof_atomic_store_relaxed(&h->peak_samples, samples);
    memprof_atomic_store_relaxed(&h->peak_t_ns, now->t_ns);
    write_end(&h->peak_seq);
    uint64_t base = bytes > (uint64_t)now->live ? bytes : (uint64_t)now->live;
    memprof_atomic_store_relaxed(&h->peak_trigger, (int64_t)(base + base / MEMPROF_PEAK_MARGIN));
    memprof_atomic_store_relaxed(&h->peak_samples_at, now->samples);
}

static bool peak_due(struct memprof_history *h, struct memprof_stacktab *st,
                     const struct memprof_hist_now *now)
{
    if (now->live <= 0 || now->live <= memprof_atomic_load_relaxed(&h->peak_trigger))
        return false;
    uint64_t since = now->samples - memprof_atomic_load_relaxed(&h->peak_samples_at);
    return since >= memprof__st_nids(st) / MEMPROF_PEAK_AMORTIZE;
}

/* ---- series ---------------------------------------------------------------------------- */

static void store_point(struct memprof_hist_apoint *dst, uint64_t t_ns, uint64_t live,
                        uint64_t alloc)
{
    memprof_atomic_store_relaxed(&dst->t_ns, t_ns);
    memprof_atomic_store_relaxed(&dst->live, live);
    memprof_atomic_store_relaxed(&dst->alloc, alloc);
}

static void copy_point(struct memprof_hist_apoint *dst, const struct memprof_hist_apoint *src,
                       uint64_t alloc)
{
    store_point(dst, memprof_atomic_load_relaxed(&src->t_ns),
                memprof_atomic_load_relaxed(&src->live), alloc);
}

/* Halves the series: each pair of neighbours becomes the one with more live bytes, with the
 * later one's allocated total (a running sum). */
static void downsample(struct memprof_history *h, uint32_t n)
{
    struct memprof_hist_apoint *pt = h->points;
    uint32_t k = 0;
    for (uint32_t i = 0; i < n; i += 2, k++) {
        uint32_t last = i + 1 < n ? i + 1 : i;
        uint32_t keep =
            memprof_atomic_load_relaxed(&pt[last].live) >= memprof_atomic_load_relaxed(&pt[i].live)
                ? last
                : i;
        copy_point(&pt[k], &pt[keep], memprof_atomic_load_relaxed(&pt[last].alloc));
    }
    memprof_atomic_store_relaxed(&h->npoints, k);
    uint64_t step = memprof_atomic_load_relaxed(&h->step_ns);
    memprof_atomic_store_relaxed(&h->step_ns, step ? step * 2 : MEMPROF_SERIES_STEP_NS * 2);
}

/* Appends the window's highest event (h->cand), under the series' sequence number. */
static void append_candidate(struct memprof_history *h)
{
    uint32_t n = memprof_atomic_load_relaxed(&h->npoints);
    if (n >= MEMPROF_SERIES_CAP) {
        downsample(h, n);
        n = memprof_atomic_load_relaxed(&h->npoints);
    }
    copy_point(&h->points[n], &h->cand, memprof_atomic_load_relaxed(&h->cand.alloc));
    memprof_atomic_store_relaxed(&h->npoints, n + 1);
}

static void set_candidate(struct memprof_history *h, const struct memprof_hist_now *now)
{
    store_point(&h->cand, now->t_ns, now->live > 0 ? (uint64_t)now->live : 0, now->alloc);
}

/* The current window has ended: `now` is the first event at least a step after its start. */
static bool window_over(struct memprof_history *h, const struct memprof_hist_now *now)
{
    if (!memprof_atomic_load_relaxed(&h->have_cand))
        return true;
    uint64_t step = memprof_atomic_load_relaxed(&h->step_ns);
    return now->t_ns - memprof_atomic_load_relaxed(&h->window_t_ns) >=
           (step ? step : MEMPROF_SERIES_STEP_NS);
}

/* The series' part of an event: a new window appends the last one's highest event; within a
 * window a higher event replaces the candidate. */
static void series_event(struct memprof_history *h, const struct memprof_hist_now *now)
{
    write_begin(&h->series_seq);
    if (window_over(h, now)) {
        if (memprof_atomic_load_relaxed(&h->have_cand))
            append_candidate(h);
        memprof_atomic_store_relaxed(&h->window_t_ns, now->t_ns);
        set_candidate(h, now);
        memprof_atomic_store_relaxed(&h->have_cand, 1);
    } else if (now->live > 0 && (uint64_t)now->live > memprof_atomic_load_relaxed(&h->cand.live)) {
        set_candidate(h, now);
    }
    write_end(&h->series_seq);
}

void memprof__hist_sampled(struct memprof_history *h, struct memprof_stacktab *st,
                           const struct memprof_hist_now *now, bool grew)
{
    bool peak = grew && peak_due(h, st, now);
    bool higher = now->live > 0 && (uint64_t)now->live > memprof_atomic_load_relaxed(&h->cand.live);
    if (!peak && !higher && !window_over(h, now))
        return;
    if (!try_lock(h))
        return; /* another thread is writing; this event's update is skipped */
    if (peak && peak_due(h, st, now))
        record_peak(h, st, now);
    series_event(h, now);
    unlock(h);
}

void memprof__hist_read_peak(struct memprof_history *h, struct memprof_stacktab *st,
                             struct memprof_hist_peak *peak,
                             void (*fn)(void *ctx, uint32_t id, const struct memprof_stack *s),
                             void *ctx)
{
    for (int tries = 0; tries < READ_TRIES; tries++) {
        uint64_t seq = read_begin(&h->peak_seq);
        peak->bytes = memprof_atomic_load_relaxed(&h->peak_bytes);
        peak->count_fp16 = memprof_atomic_load_relaxed(&h->peak_count_fp16);
        peak->var_q32 = memprof_atomic_load_relaxed(&h->peak_var_q32);
        peak->samples = memprof_atomic_load_relaxed(&h->peak_samples);
        peak->t_ns = memprof_atomic_load_relaxed(&h->peak_t_ns);
        uint64_t n = memprof__st_nids(st);
        for (uint64_t id = 0; id < n && peak->samples; id++) {
            struct memprof_stack *s = memprof__st_get(st, (uint32_t)id);
            if (s && memprof_atomic_load_relaxed(&s->peak_samples))
                fn(ctx, (uint32_t)id, s);
        }
        if (read_valid(&h->peak_seq, seq))
            return;
    }
}

size_t memprof__hist_read_series(struct memprof_history *h, struct memprof_hist_point *out)
{
    uint32_t n = 0;
    for (int tries = 0; tries < READ_TRIES; tries++) {
        uint64_t seq = read_begin(&h->series_seq);
        n = memprof_atomic_load_relaxed(&h->npoints);
        if (n > MEMPROF_SERIES_CAP)
            n = MEMPROF_SERIES_CAP;
        for (uint32_t i = 0; i < n; i++)
            out[i] = (struct memprof_hist_point){
                memprof_atomic_load_relaxed(&h->points[i].t_ns),
                memprof_atomic_load_relaxed(&h->points[i].live),
                memprof_atomic_load_relaxed(&h->points[i].alloc),
            };
        /* The window in progress ends the series with its highest event so far. */
        if (memprof_atomic_load_relaxed(&h->have_cand))
            out[n++] = (struct memprof_hist_point){
                memprof_atomic_load_relaxed(&h->cand.t_ns),
                memprof_atomic_load_relaxed(&h->cand.live),
                memprof_atomic_load_relaxed(&h->cand.alloc),
            };
        if (read_valid(&h->series_seq, seq))
            break;
    }
    return n;
}

void memprof__hist_after_fork(struct memprof_history *h)
{
    memprof_atomic_store_relaxed(&h->lock, 0);
    uint64_t s = memprof_atomic_load_relaxed(&h->peak_seq);
    memprof_atomic_store_relaxed(&h->peak_seq, s + (s & 1));
    s = memprof_atomic_load_relaxed(&h->series_seq);
    memprof_atomic_store_relaxed(&h->series_seq, s + (s & 1));
}
