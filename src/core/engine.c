/* SPDX-License-Identifier: MIT */
/*
 * The engine: global state, the lifecycle state machine, the allocation and free cold
 * paths, fork handling and statistics (the design is described in engine.h).
 */
#define _GNU_SOURCE
#include "config.h"
#include "core/engine.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "common/atomic.h"
#include "core/capture.h"
#include "core/coldstack.h"
#include "common/estimate.h"
#include "common/process_hooks.h"
#include "core/platform.h"
#include "core/sandbox.h"
#include "core/sources.h"

/* An internal state between UNINITIALIZED and INITIALIZED while init maps the tables. */
#define ENGINE_INITIALIZING 100

/* Aligned so that what init writes (the fields up to depth_min) lies within one page: the
 * page fault that costs every process under the plugin is one, not two. */
#define ENGINE_ALIGN 2048
struct memprof_engine memprof__engine __attribute__((aligned(ENGINE_ALIGN)));
_Static_assert(offsetof(struct memprof_engine, depth_min) + sizeof(uint32_t) <= ENGINE_ALIGN,
               "the fields memprof__engine_init() writes no longer fit in one aligned block");
#define E memprof__engine
/* Aligned: a cache line of its own, shared by every free and rarely written. */
struct memprof_engine_hot memprof__hot __attribute__((aligned(64)));
#define H memprof__hot

/* ---- per-sample weights ------------------------------------------------------------------- */

/* The rounded Horvitz-Thompson weights of one sample (estimate.h), and its contribution to
 * the variance of the byte estimate, s^2 (1-p) / p^2, in units of rate^2 / 2^32: that ratio
 * is x^2 e^-x / (1 - e^-x)^2 for x = s / rate, which falls from 1 (x -> 0) as x grows, so a
 * sample adds at most 2^32 and 2^31 live samples fit. Computed identically on insert and on
 * free so incremental sums cancel exactly. */
struct weights {
    uint64_t bytes, count_fp16, var_q32;
};

static struct weights sample_weights(uint64_t size)
{
    double p = memprof__est_prob(size, E.rate);
    double x = (double)size / (double)E.rate;
    return (struct weights){
        .bytes = memprof__est_round((double)size / p),
        .count_fp16 = memprof__est_round(65536.0 / p),
        .var_q32 = memprof__est_round(x * x * (1.0 - p) / (p * p) * 4294967296.0),
    };
}

/* The engine's totals for the history (history.h), after a sampled event at `ts`. */
static void history_event(uint64_t ts, bool grew)
{
    uint64_t origin = memprof_atomic_load_relaxed(&E.origin_ns);
    struct memprof_hist_now now = {
        .t_ns = ts > origin ? ts - origin : 0,
        .live = memprof_atomic_load_relaxed(&E.live_est_bytes),
        .alloc = memprof_atomic_load_relaxed(&E.alloc_est_bytes),
        .samples = memprof_atomic_load_relaxed(&E.total_samples),
    };
    memprof__hist_sampled(&E.hist, &E.st, &now, grew);
}

/* A sample goes live: the stack's and the engine's live counters. */
static void count_live(struct memprof_stack *s, uint64_t size, const struct weights *w)
{
    if (s) {
        memprof_atomic_add_relaxed(&s->live_samples, 1);
        memprof_atomic_add_relaxed(&s->live_bytes, size);
        memprof_atomic_add_relaxed(&s->live_est_bytes, w->bytes);
        memprof_atomic_add_relaxed(&s->live_est_count_fp16, w->count_fp16);
        memprof_atomic_add_relaxed(&s->live_var_q32, w->var_q32);
    }
    memprof_atomic_add_relaxed(&E.live_est_bytes, (int64_t)w->bytes);
}

static void count_alloc(struct memprof_stack *s, uint64_t size, bool live, uint64_t ts)
{
    struct weights w = sample_weights(size);
    memprof_atomic_add_relaxed(&E.alloc_est_bytes, w.bytes);
    if (s) {
        uint64_t unset = 0; /* the first sample's time, once */
        if (memprof_atomic_load_relaxed(&s->first_ns) == 0)
            memprof_atomic_cas_relaxed(&s->first_ns, &unset, ts);
        memprof_atomic_add_relaxed(&s->alloc_samples, 1);
        memprof_atomic_add_relaxed(&s->alloc_bytes, size);
        memprof_atomic_add_relaxed(&s->alloc_est_bytes, w.bytes);
        memprof_atomic_add_relaxed(&s->alloc_est_count_fp16, w.count_fp16);
    }
    if (live)
        count_live(s, size, &w);
    history_event(ts, live);
}

/* A live sample is freed: its lifetime goes into the stack's histogram, and into the
 * temporary counters if shorter than the threshold. */
static void count_free(const struct memprof_hm_entry *e)
{
    struct memprof_stack *s = memprof__st_get(&E.st, e->stack_id);
    struct weights w = sample_weights(e->size);
    uint64_t now = memprof__pf_now_ns();
    uint64_t lifetime = now > e->ts ? now - e->ts : 0;
    if (s) {
        memprof_atomic_sub_relaxed(&s->live_samples, 1);
        memprof_atomic_sub_relaxed(&s->live_bytes, e->size);
        memprof_atomic_sub_relaxed(&s->live_est_bytes, w.bytes);
        memprof_atomic_sub_relaxed(&s->live_est_count_fp16, w.count_fp16);
        memprof_atomic_sub_relaxed(&s->live_var_q32, w.var_q32);
        memprof_atomic_add_relaxed(&s->lifetimes[memprof__lifetime_bucket(lifetime)], 1);
        if (lifetime < memprof__engine_temp_threshold()) {
            memprof_atomic_add_relaxed(&s->temp_samples, 1);
            memprof_atomic_add_relaxed(&s->temp_est_bytes, w.bytes);
            memprof_atomic_add_relaxed(&s->temp_est_count_fp16, w.count_fp16);
        }
    }
    memprof_atomic_sub_relaxed(&E.live_est_bytes, (int64_t)w.bytes);
    history_event(now, false);
}

/* ---- the tables --------------------------------------------------------------------------- */

/* Without the heap sampled blocks come from the real allocator: slower frees, same
 * results. */
static int init_sample_heap(size_t frame)
{
    int rc = memprof__sheap_init(&H.sheap, frame);
    if (rc != 0)
        memprof__engine_log(MEMPROF_LOG_INFO,
                            "sample heap unavailable (no free window of address space)");
    return rc;
}

/* The tables' state (E.tables): mapped by init, or when first needed if deferred. */
enum { TABLES_NONE, TABLES_MAPPING, TABLES_READY };

/* Maps the tables sized at init (E.hm's geometry, E.st.max_stacks), but for the cold-stack
 * reservation. */
static int map_tables(void)
{
    int rc = memprof__hm_open(&E.hm);
    if (rc == 0 && (rc = memprof__bloom_init(&H.bloom, E.hm.capacity)) != 0)
        memprof__hm_destroy(&E.hm);
    if (rc == 0 && (rc = memprof__st_init(&E.st, E.st.max_stacks)) != 0) {
        memprof__bloom_destroy(&H.bloom);
        memprof__hm_destroy(&E.hm);
    }
    if (rc != 0)
        return rc;
    /* A shutdown meanwhile disabled the filter before bloom_init() reset it (shutdown sets
     * the state first, then disables). */
    if (memprof_atomic_load_seqcst(&E.state) == MEMPROF_STATE_SHUTDOWN)
        memprof__bloom_disable(&H.bloom);
    if (E.sheap_wanted)
        init_sample_heap(0);
    /* What is mapped once; the tables' segments count themselves as they are mapped
     * (memprof__engine_stats()). */
    memprof_atomic_add_relaxed(&E.mapped_bytes, H.bloom.nwords * 16);
    return 0;
}

static void map_tables_into(void *rc)
{
    *(int *)rc = map_tables();
}

/* The cold stacks first, then the rest on one of them: a first sample may come on a small
 * stack (a signal handler's, a coroutine's). */
static int map_all_tables(void)
{
    memprof_atomic_add_relaxed(&E.mapped_bytes, memprof__coldstack_init());
    int rc;
    uintptr_t top = memprof__coldstack_claim();
    if (top) {
        memprof__coldstack_call(map_tables_into, &rc, top);
        memprof__coldstack_release(top);
    } else {
        rc = map_tables();
    }
    return rc;
}

/* The tables, mapped if they were not: 0, or -ENOMEM. A thread that finds another mapping
 * them waits: that takes a few system calls, and the other thread holds no lock a waiter
 * could need (it is inside the profiler, its guard set). */
static MEMPROF_NOINLINE int need_tables(void)
{
    int cur = memprof_atomic_load_acquire(&E.tables);
    while (cur != TABLES_READY) {
        if (cur == TABLES_NONE && memprof_atomic_cas_seqcst(&E.tables, &cur, TABLES_MAPPING)) {
            uint8_t g = memprof__guard_enter();
            int rc = map_all_tables();
            memprof__guard_leave(g);
            /* After a failure the next sample or reader tries again. */
            memprof_atomic_store_release(&E.tables, rc == 0 ? TABLES_READY : TABLES_NONE);
            return rc;
        }
        if (cur == TABLES_MAPPING) {
            sched_yield();
            cur = memprof_atomic_load_acquire(&E.tables);
        }
    }
    return 0;
}

/* Whether the tables are there for a sample about to be taken; a sample they cannot be mapped
 * for is dropped, counted with those the heap map had no room for. */
static inline bool tables_for_sample(void)
{
    if (MEMPROF_LIKELY(memprof_atomic_load_acquire(&E.tables) == TABLES_READY) ||
        need_tables() == 0)
        return true;
    memprof_atomic_add_relaxed(&E.hm.full_drops, 1);
    return false;
}

int memprof__engine_tables(void)
{
    int rc = memprof__engine_readable();
    return rc ? rc : need_tables();
}

/* ---- recording ------------------------------------------------------------------------- */

/* Whether key is a block of the sample heap, whose frees are recognised by address. Unlike
 * memprof__in_sample_heap(), the free path's range test: a block of the real allocator may
 * lie in the heap's range too, in a mapping someone else made in the window, and the slot
 * test tells them apart without reading the block. */
static inline bool is_heap_key(uint64_t key)
{
    const void *p = (const void *)(uintptr_t)key;
    return memprof__sheap_owns(&H.sheap, p) && memprof__sheap_used(&H.sheap, p);
}

/* A sample whose block a native free() must find through the Bloom filter: a block of the
 * real allocator (not of the sample heap, not a custom allocator's report id). */
static inline bool is_outside(uint64_t key)
{
    return !(key & MEMPROF_REPORT_KEY_BIT) && !is_heap_key(key);
}

/* Whether the Bloom filter holds the key: every key but the sample heap's. */
static inline bool in_bloom(uint64_t key)
{
    return !is_heap_key(key);
}

struct key_filter {
    void (*fn)(void *ctx, uint64_t key);
    void *ctx;
};

static void bloom_key(void *arg, uint64_t key)
{
    struct key_filter *f = arg;
    if (in_bloom(key))
        f->fn(f->ctx, key);
}

static void heapmap_keys(void *hm, void (*fn)(void *ctx, uint64_t key), void *ctx)
{
    struct key_filter f = {fn, ctx};
    memprof__hm_for_each_key(hm, bloom_key, &f);
}

static void maybe_rebuild_bloom(void)
{
    uint64_t live = memprof_atomic_load_relaxed(&E.hm.live);
    if (memprof__bloom_should_rebuild(&H.bloom, live))
        memprof__bloom_rebuild(&H.bloom, heapmap_keys, &E.hm, live);
}

static _Atomic uint64_t *not_sampled_slot(uint64_t key)
{
    return &E.not_sampled[(key * 0x9E3779B97F4A7C15ull) >> (64 - MEMPROF_NOT_SAMPLED_BITS)];
}

/* Inserts a sample for `key` with a known stack (insert half of the cold path). The
 * outside count goes up first, so that a free of the block cannot skip the filter; a sample
 * that does not go live takes it back. The key leaves the not-sampled cache before anything
 * else: a free of the block comes after this thread returned it, so it sees the entry gone. */
static bool insert(uint64_t key, uint64_t size, uint32_t stack_id, uint64_t ts)
{
    bool outside = is_outside(key), bloom = in_bloom(key);
    if (bloom) {
        uint64_t cached = key;
        memprof_atomic_cas_relaxed(not_sampled_slot(key), &cached, 0);
    }
    if (outside)
        memprof_atomic_add_relaxed(&H.outside_live, 1);
    uint64_t token = bloom ? memprof__bloom_add_begin(&H.bloom, key) : 0;
    struct memprof_hm_slot *slot = memprof__hm_reserve(&E.hm, key);
    bool live = false;
    if (slot) { /* else full: counted by the heap map */
        if (bloom)
            memprof__bloom_add_end(&H.bloom, key, token);
        live = memprof__hm_finalize(&E.hm, slot, stack_id, size, ts);
    }
    if (!live && outside)
        memprof_atomic_sub_relaxed(&H.outside_live, 1);
    return live;
}

/* Removes key's live sample, if any, and counts its free. */
static bool remove_sample(uint64_t key, struct memprof_hm_entry *out)
{
    if (memprof__hm_remove(&E.hm, key, out) != MEMPROF_HM_FOUND)
        return false;
    if (is_outside(key))
        memprof_atomic_sub_relaxed(&H.outside_live, 1);
    memprof_atomic_add_relaxed(&E.freed_samples, 1);
    count_free(out);
    return true;
}

/* Removes the sample of a native block the Bloom filter said may be one. An address the heap
 * map did not know goes to the not-sampled cache, which answers its next frees (the same
 * address handed out again) without a search. The entry is stored before the caller's real
 * free, hence before the allocator can hand the block out again to be sampled. */
static bool remove_maybe_sampled(uint64_t key, struct memprof_hm_entry *out)
{
    _Atomic uint64_t *ns = not_sampled_slot(key);
    if (memprof_atomic_load_relaxed(ns) == key)
        return false;
    if (remove_sample(key, out))
        return true;
    memprof_atomic_store_relaxed(ns, key);
    memprof_atomic_add_relaxed(&E.free_misses, 1);
    return false;
}

static void count_depth(unsigned native)
{
    memprof_atomic_add_relaxed(&E.depth_total, native);
    if (native < MEMPROF_SHALLOW_DEPTH)
        memprof_atomic_add_relaxed(&E.shallow_stacks, 1);
    uint32_t min = memprof_atomic_load_relaxed(&E.depth_min);
    while (native < min && !memprof_atomic_cas_weak_relaxed(&E.depth_min, &min, native))
        ;
}

void memprof__record(uint64_t key, size_t size, const uintptr_t *frames, unsigned depth,
                     bool truncated)
{
    memprof__record_mixed(key, size, frames, depth, depth, 0, truncated);
}

void memprof__record_mixed(uint64_t key, size_t size, const uintptr_t *frames, unsigned depth,
                           unsigned native, unsigned source, bool truncated)
{
    memprof_atomic_add_relaxed(&E.total_samples, 1);
    if (truncated)
        memprof_atomic_add_relaxed(&E.truncated_stacks, 1);
    count_depth(native);
    unsigned thread = memprof__threads_self(&E.threads);
    uint32_t id = memprof__st_intern_mixed(&E.st, frames, depth, native, source, thread, truncated);
    struct memprof_stack *s = memprof__st_get(&E.st, id);
    uint64_t ts = memprof__pf_now_ns();
    bool live = insert(key, size, id, ts);
    count_alloc(s, size, live, ts);
    /* Checking every 64th sample keeps even this cheap test off most samples. */
    if ((memprof_atomic_load_relaxed(&E.total_samples) & 63) == 0)
        maybe_rebuild_bloom();
}

static void seed_thread(struct memprof_tls *t)
{
    uint64_t seq = memprof_atomic_add_relaxed(&E.thread_seq, 1);
    /* The ids only add to the random bits; a seccomp filter may forbid asking for them. */
    uint64_t ids = memprof__sys_allowed(MEMPROF_SYS_IDS)
                       ? memprof__pf_thread_id() << 32 ^ (uint64_t)getpid() << 48
                       : 0;
    uint64_t seed = E.seed ? E.seed + seq * 0x9E3779B97F4A7C15ull
                           : memprof__pf_random() ^ ids ^ (uint64_t)(uintptr_t)t;
    memprof__rng_seed(&t->rng, seed);
    t->seeded = 1;
}

MEMPROF_SAMPLING_TEXT bool memprof__sample_begin(size_t size, int *saved_errno)
{
    struct memprof_tls *t = &memprof__tls;
    if (t->guard) {
        /* The profiler's own allocation on this thread: never sampled. Leave the countdown
         * at 1 so the thread's next allocation takes the cold path, and the generation stale
         * so that path decides it normally, with probability p(size) (memorylessness), and
         * does not sample it for certain (tests/statistics, profiler_allocations_...). */
        t->countdown = 1;
        t->generation = memprof_atomic_load_relaxed(&E.generation) - 1;
        memprof_atomic_add_relaxed(&E.reentrant_skips, 1);
        return false;
    }
    t->guard = 1;
    /* A successful malloc must leave errno alone, even when this path made system calls
     * (getrandom, /proc for the stack bounds, the unwinder's file reads) that set it. */
    int saved = errno;
    if (!t->seeded)
        seed_thread(t);
    int state = memprof_atomic_load_acquire(&E.state);
    uint64_t rate = E.rate ? E.rate : MEMPROF_DEFAULT_RATE;
    if (state != MEMPROF_STATE_ACTIVE) {
        t->countdown = memprof__sampler_draw(
            &t->rng, rate < MEMPROF_IDLE_INTERVAL ? rate : MEMPROF_IDLE_INTERVAL);
        goto not_sampled;
    }
    uint32_t gen = memprof_atomic_load_relaxed(&E.generation);
    if (t->generation != gen) {
        /* The countdown was drawn for another state or rate: decide this allocation afresh
         * (by memorylessness this is exactly a sample with probability p(size)). */
        t->generation = gen;
        int64_t c = memprof__sampler_draw(&t->rng, rate);
        if ((uint64_t)c > size) {
            t->countdown = c - (int64_t)size;
            goto not_sampled;
        }
    }
    t->countdown = memprof__sampler_draw(&t->rng, rate);
    /* The tables (the sample heap among them) exist before the caller allocates the block. */
    if (size == 0 || !tables_for_sample())
        goto not_sampled;
    *saved_errno = saved;
    return true;
not_sampled:
    errno = saved;
    t->guard = 0;
    return false;
}

struct record_args {
    uint64_t key;
    size_t size;
    uintptr_t from;           /* the caller's frame, on the program's stack */
    struct memprof_regs regs; /* the caller's registers there, for the DWARF walk */
};

/* Captures the stack and records a sample of `size` bytes under `key` (guard set). Runs on a
 * stack of the profiler's (coldstack.h): the DWARF unwinder's cursor and the frame buffers
 * below would not fit on the small stacks programs allocate on (signal handlers, coroutines). */
MEMPROF_SAMPLING_TEXT static void record_here(void *arg)
{
    const struct record_args *a = arg;
    struct memprof_tls *t = &memprof__tls;
    /* Native frames, then room for interpreter frames; on this (cold) stack, not TLS. */
    uintptr_t frames[MEMPROF_CAPTURE_MAX + MEMPROF_MAX_RUNTIME_FRAMES];
    /* A frame-pointer walk reads only inside the mapping of the program's stack it starts
     * on, looked up again when the thread samples on another stack (a signal handler's) or
     * below the mapping's start (the main stack grew). */
    if (E.unwinder != MEMPROF_UNWIND_DWARF && (a->from < t->stack_lo || a->from >= t->stack_top) &&
        !memprof__pf_mapping_of(a->from, &t->stack_lo, &t->stack_top))
        t->stack_lo = t->stack_top = 0;
    bool truncated;
    unsigned native = memprof__capture((enum memprof_unwinder)E.unwinder, frames, E.max_frames,
                                       a->from, &a->regs, t->stack_top, &truncated);
    unsigned source;
    unsigned rt = memprof__sources_capture((uint64_t *)(frames + native),
                                           MEMPROF_MAX_RUNTIME_FRAMES, &source);
    memprof__record_mixed(a->key, a->size, frames, native + rt, native, source, truncated);
}

/* Part 2 of the cold path for any key (0: the allocation failed, nothing to record). */
MEMPROF_SAMPLING_TEXT static void sample_end_key(uint64_t key, size_t size, int saved_errno)
{
    if (key) {
        struct record_args a = {key, size, (uintptr_t)__builtin_frame_address(0), {0}};
        MEMPROF_REGS_HERE(&a.regs);
        uintptr_t top = memprof__coldstack_claim();
        if (top) {
            memprof__coldstack_call(record_here, &a, top);
            memprof__coldstack_release(top);
        } else {
            record_here(&a); /* none free: on the program's stack, as it is */
        }
        errno = saved_errno;
    }
    memprof__tls.guard = 0;
}

MEMPROF_SAMPLING_TEXT void memprof__sample_end(void *ptr, size_t size, int saved_errno)
{
    sample_end_key((uint64_t)(uintptr_t)ptr, size, saved_errno);
}

MEMPROF_SAMPLING_TEXT void memprof__alloc_slow(void *ptr, size_t size)
{
    int saved;
    if (memprof__sample_begin(size, &saved))
        memprof__sample_end(ptr, size, saved);
}

MEMPROF_SAMPLING_TEXT bool memprof__report_slow(uint64_t key, size_t size)
{
    int saved;
    if (!memprof__sample_begin(size, &saved))
        return false;
    sample_end_key(key, size, saved);
    return true;
}

uint64_t memprof__sample_interval(void)
{
    struct memprof_tls *t = &memprof__tls;
    if (t->guard || memprof_atomic_load_acquire(&E.state) != MEMPROF_STATE_ACTIVE)
        return 0;
    if (MEMPROF_UNLIKELY(!t->seeded)) {
        int saved = errno; /* getrandom */
        seed_thread(t);
        errno = saved;
    }
    return (uint64_t)memprof__sampler_draw(&t->rng, E.rate ? E.rate : MEMPROF_DEFAULT_RATE);
}

MEMPROF_SAMPLING_TEXT bool memprof__report_record(uint64_t key, size_t size)
{
    struct memprof_tls *t = &memprof__tls;
    if (t->guard || size == 0 || memprof_atomic_load_acquire(&E.state) != MEMPROF_STATE_ACTIVE)
        return false;
    t->guard = 1;
    int saved = errno;
    if (!tables_for_sample()) {
        errno = saved;
        t->guard = 0;
        return false;
    }
    sample_end_key(key, size, saved);
    return true;
}

bool memprof__report_free(uint64_t key)
{
    struct memprof_hm_entry e;
    return memprof__bloom_maybe(&H.bloom, key) && remove_sample(key, &e);
}

void memprof__free_slow(void *ptr)
{
    /* The caller's filter probe said maybe: go on without probing again. */
    struct memprof_hm_entry e;
    remove_maybe_sampled((uint64_t)(uintptr_t)ptr, &e);
}

void *memprof__sample_heap_alloc(size_t n, size_t align, bool zero)
{
    return memprof__sheap_alloc(&H.sheap, n, align, zero);
}

bool memprof__free_sampled_block(void *ptr)
{
    if (!memprof__sheap_holds(&H.sheap, ptr))
        return false;
    /* After shutdown the engine ignores frees (as the Bloom filter, disabled, makes it do
     * for other blocks); the block is still recycled. */
    struct memprof_hm_entry e;
    if (memprof_atomic_load_acquire(&E.state) != MEMPROF_STATE_SHUTDOWN)
        remove_sample((uint64_t)(uintptr_t)ptr, &e);
    memprof__sheap_free(&H.sheap, ptr);
    return true;
}

bool memprof__take(void *ptr, struct memprof_hm_entry *out)
{
    if (!ptr)
        return false;
    uint64_t key = (uint64_t)(uintptr_t)ptr;
    if (!in_bloom(key))
        return remove_sample(key, out);
    return memprof__bloom_maybe(&H.bloom, key) && remove_maybe_sampled(key, out);
}

void memprof__restore(const struct memprof_hm_entry *e)
{
    memprof_atomic_sub_relaxed(&E.freed_samples, 1); /* remove_sample counted it freed */
    if (insert(e->key, e->size, e->stack_id, e->ts)) {
        struct weights w = sample_weights(e->size);
        count_live(memprof__st_get(&E.st, e->stack_id), e->size, &w);
    }
}

/* ---- lifecycle ----------------------------------------------------------------------------- */

static void atfork_child(void)
{
    /* Only the forking thread survives: give it a fresh random sequence (otherwise parent
     * and child would sample identically) and drop what a vanished thread may have held. */
    memprof__tls.seeded = 0;
    memprof__tls.stack_lo = memprof__tls.stack_top = 0;
    memprof__capture_after_fork();
    memprof__coldstack_after_fork();
    memprof__hist_after_fork(&E.hist);
    memprof__threads_after_fork();
    memprof_atomic_store_relaxed(&H.bloom.rebuilding, 0);
    /* A rebuild cut short by the fork left gen odd: the active filter is intact, and the
     * half-built one is rebuilt from scratch next time, so just end the rebuild. */
    uint64_t g = memprof_atomic_load_relaxed(&H.bloom.gen);
    if (g & 1)
        memprof_atomic_store_relaxed(&H.bloom.gen, g - 1);
    memprof__sheap_after_fork(&H.sheap);
    /* A thread that was mapping the tables is gone: the next use maps them afresh. */
    int mapping = TABLES_MAPPING;
    memprof_atomic_cas_relaxed(&E.tables, &mapping, TABLES_NONE);
}

MEMPROF_START_TEXT int memprof__engine_init(const struct memprof_engine_config *cfg)
{
    int expected = MEMPROF_STATE_UNINITIALIZED;
    if (!memprof_atomic_cas_seqcst(&E.state, &expected, ENGINE_INITIALIZING))
        return expected == MEMPROF_STATE_SHUTDOWN ? -ESHUTDOWN : -EALREADY;
    uint8_t g = memprof__guard_enter();
    E.rate = cfg->rate;
    E.max_frames = cfg->max_frames;
    E.unwinder = cfg->unwinder;
    E.depth_min = UINT32_MAX;
    E.seed = cfg->seed;
    E.log_fn = cfg->log_fn;
    E.log_ctx = cfg->log_ctx;
    /* The sizes are known (and reported) from init on, the tables mapped now or later. */
    memprof__hm_setup(&E.hm, cfg->heap_map_capacity);
    E.st.max_stacks = cfg->max_stacks;
    if (!E.defer_tables) {
        int rc = need_tables();
        if (rc != 0) {
            memprof_atomic_store_seqcst(&E.state, MEMPROF_STATE_UNINITIALIZED);
            memprof__guard_leave(g);
            return rc;
        }
    }
    memprof__capture_add_own_sampling_text();
    if (E.unwinder == MEMPROF_UNWIND_DWARF)
        memprof__capture_warm_up();
    static _Atomic int atfork_done MEMPROF_START_DATA;
    if (!memprof_atomic_exchange_acqrel(&atfork_done, 1))
        memprof_atfork(NULL, NULL, atfork_child);
    memprof_atomic_store_seqcst(&E.state, MEMPROF_STATE_INITIALIZED);
    memprof__guard_leave(g);
    return 0;
}

static int transition(int from_a, int from_b, int to)
{
    int cur = memprof_atomic_load_seqcst(&E.state);
    for (;;) {
        if (cur == MEMPROF_STATE_UNINITIALIZED || cur == ENGINE_INITIALIZING)
            return -ENOTCONN;
        if (cur == MEMPROF_STATE_SHUTDOWN)
            return -ESHUTDOWN;
        if (cur != from_a && cur != from_b)
            return -EBUSY;
        if (memprof_atomic_cas_seqcst(&E.state, &cur, to)) {
            memprof_atomic_add_relaxed(&E.generation, 1);
            return 0;
        }
    }
}

MEMPROF_START_TEXT int memprof__engine_start(void)
{
    /* Without a backend nothing would ever reach the engine; say so rather than pretend.
     * (Wrong-state errors take precedence, so check the state first.) */
    int st = memprof__engine_state();
    if ((st == MEMPROF_STATE_INITIALIZED || st == MEMPROF_STATE_STOPPED) &&
        memprof_atomic_load_acquire(&E.backends) == 0)
        return -ENOTSUP;
    /* Times in the history count from the first start (no sample is taken before it). */
    uint64_t none = 0;
    memprof_atomic_cas_relaxed(&E.origin_ns, &none, memprof__pf_now_ns());
    return transition(MEMPROF_STATE_INITIALIZED, MEMPROF_STATE_STOPPED, MEMPROF_STATE_ACTIVE);
}

int memprof__engine_stop(void)
{
    return transition(MEMPROF_STATE_ACTIVE, MEMPROF_STATE_ACTIVE, MEMPROF_STATE_STOPPED);
}

void memprof__engine_shutdown(void)
{
    /* One-way from every state, even before init (a later init then fails): only an init in
     * progress is waited out, since its tables are being mapped. */
    int cur = memprof_atomic_load_seqcst(&E.state);
    while (cur != MEMPROF_STATE_SHUTDOWN) {
        if (cur == ENGINE_INITIALIZING) {
            sched_yield();
            cur = memprof_atomic_load_seqcst(&E.state);
            continue;
        }
        if (memprof_atomic_cas_seqcst(&E.state, &cur, MEMPROF_STATE_SHUTDOWN)) {
            memprof_atomic_add_relaxed(&E.generation, 1);
            memprof__bloom_disable(&H.bloom);
            return;
        }
    }
}

MEMPROF_START_TEXT int memprof__engine_state(void)
{
    int st = memprof_atomic_load_acquire(&E.state);
    return st == ENGINE_INITIALIZING ? MEMPROF_STATE_UNINITIALIZED : st;
}

MEMPROF_START_TEXT int memprof__engine_readable(void)
{
    switch (memprof__engine_state()) {
    case MEMPROF_STATE_UNINITIALIZED:
        return -ENOTCONN;
    case MEMPROF_STATE_SHUTDOWN:
        return -ESHUTDOWN;
    default:
        return 0;
    }
}

MEMPROF_START_TEXT void memprof__backend_register(void)
{
    memprof_atomic_add_relaxed(&E.backends, 1);
}

MEMPROF_START_TEXT int memprof__engine_defer_tables(void)
{
    if (memprof_atomic_load_acquire(&E.state) != MEMPROF_STATE_UNINITIALIZED)
        return -EALREADY;
    E.defer_tables = true;
    return 0;
}

MEMPROF_START_TEXT int memprof__engine_use_sample_heap(void)
{
    if (memprof_atomic_load_acquire(&E.state) != MEMPROF_STATE_UNINITIALIZED)
        return -EALREADY;
    E.sheap_wanted = true;
    return 0;
}

int memprof__engine_use_framed_sample_heap(size_t page)
{
    int st = memprof_atomic_load_acquire(&E.state);
    if (st != MEMPROF_STATE_INITIALIZED && st != MEMPROF_STATE_STOPPED)
        return -EINVAL;
    if (H.sheap.size)
        return -EALREADY;
    if (E.rate < MEMPROF_FRAMED_MIN_PAGES * page)
        return -ERANGE;
    return init_sample_heap(page);
}

uint64_t memprof__engine_temp_threshold(void)
{
    uint64_t t = memprof_atomic_load_relaxed(&E.temp_threshold_ns);
    return t ? t : MEMPROF_DEFAULT_TEMP_THRESHOLD_NS;
}

void memprof__engine_set_temp_threshold(uint64_t ns)
{
    memprof_atomic_store_relaxed(&E.temp_threshold_ns, ns);
}

void memprof__engine_count_write_failure(void)
{
    memprof_atomic_add_relaxed(&E.write_failures, 1);
}

MEMPROF_START_TEXT void memprof__engine_own_code(const void *addr)
{
    memprof__capture_add_own_object(addr);
}

int memprof__engine_mlockall(int flags, int (*real_mlockall)(int))
{
    /* Deferred tables are mapped now, to be left out like the rest: mapped after an
     * mlockall(MCL_FUTURE), they would be locked, the whole cold-stack reservation faulted in. */
    (void)memprof__engine_tables();
    struct memprof_range
        own[7 + MEMPROF_HM_MAX_SEGS + 1 + 2 * MEMPROF_SEG_MAX + MEMPROF_SHEAP_CLASSES];
    size_t n = 0;
#define OWN(p, bytes)                                                                              \
    do {                                                                                           \
        if (p)                                                                                     \
            own[n++] = (struct memprof_range){(uintptr_t)(p), (uintptr_t)(p) + (bytes)};           \
    } while (0)
    for (int i = 0; i < 2; i++)
        OWN(H.bloom.filters[i].words, H.bloom.nwords * sizeof(uint64_t));
    uintptr_t lo, hi;
    if (memprof__coldstack_range(&lo, &hi))
        OWN(lo, hi - lo);
#undef OWN
    /* The segments of the heap map and the stack table mapped so far. */
    n += memprof__hm_ranges(&E.hm, own + n, MEMPROF_HM_MAX_SEGS);
    n += memprof__st_ranges(&E.st, own + n, 1 + 2 * MEMPROF_SEG_MAX);
    /* The sample heap's slots below each class's mark hold the program's own blocks. */
    n += memprof__sheap_unused(&H.sheap, own + n, MEMPROF_SHEAP_CLASSES);
    return memprof__pf_mlockall_except(flags, real_mlockall, own, n);
}

void memprof__engine_log(int level, const char *msg)
{
    if (E.log_fn)
        E.log_fn(E.log_ctx, level, msg);
}

static int compare_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

uint32_t memprof__engine_seccomp_before(bool strict, const void *fprog)
{
    uint8_t g = memprof__guard_enter();
    int saved = errno;
    /* Deferred tables are mapped while mmap() is still allowed. */
    (void)memprof__engine_tables();
    struct memprof_tls *t = &memprof__tls;
    memprof__pf_random_prepare();
    if (!t->seeded)
        seed_thread(t);
    memprof__threads_self(&E.threads);
    uint32_t forbids = memprof__sandbox_forbids(strict, fprog);
    if (E.unwinder != MEMPROF_UNWIND_DWARF) {
        /* A frame-pointer walk reads only inside its stack's mapping, looked up in
         * /proc/self/maps at a thread's first sample: this thread's now. Where the filter
         * forbids reading /proc, every thread unwinds with DWARF from now on, which needs
         * no bounds (its first use, which opens a pipe, made now). */
        uintptr_t here = (uintptr_t)__builtin_frame_address(0);
        if ((here < t->stack_lo || here >= t->stack_top) &&
            !memprof__pf_mapping_of(here, &t->stack_lo, &t->stack_top))
            t->stack_lo = t->stack_top = 0;
        if ((forbids & 1u << MEMPROF_SYS_PROC) && memprof__capture_have_dwarf()) {
            memprof__capture_warm_up();
            __atomic_store_n(&E.unwinder, MEMPROF_UNWIND_DWARF, __ATOMIC_RELAXED);
        }
    }
    /* Snapshots sort with glibc's qsort(), which asks the kernel for the machine's memory
     * size (sysinfo) the first time it sorts 1 KiB or more, and remembers it (before glibc
     * 2.37): a sort now. */
    uint64_t keys[160];
    for (size_t i = 0; i < MEMPROF_ARRAY_SIZE(keys); i++)
        keys[i] = i * 0x9E3779B97F4A7C15ull;
    qsort(keys, MEMPROF_ARRAY_SIZE(keys), sizeof *keys, compare_u64);
    uint32_t before = memprof_atomic_or_seqcst(&memprof__sys_forbidden, forbids);
    errno = saved;
    memprof__guard_leave(g);
    return forbids & ~before;
}

void memprof__engine_seccomp_after(uint32_t marked, bool installed)
{
    if (!installed && marked)
        memprof_atomic_and_seqcst(&memprof__sys_forbidden, ~marked);
}

/* ---- statistics ---------------------------------------------------------------------------- */

MEMPROF_START_TEXT uint64_t memprof__engine_samples(void)
{
    return memprof_atomic_load_relaxed(&E.total_samples);
}

void memprof__engine_stats(memprof_stats *s)
{
    int st = memprof__engine_state();
    s->state = (uint32_t)st;
    if (st == MEMPROF_STATE_UNINITIALIZED)
        return;
    s->sampling_rate = E.rate;
    s->total_samples = memprof_atomic_load_relaxed(&E.total_samples);
    s->live_samples = memprof_atomic_load_relaxed(&E.hm.live);
    s->freed_samples = memprof_atomic_load_relaxed(&E.freed_samples);
    uint64_t published = memprof_atomic_load_relaxed(&E.st.published);
    s->unique_stacks = published ? published - 1 : 0; /* not "overflow"; 0 before mapping */
    int64_t est = memprof_atomic_load_relaxed(&E.live_est_bytes);
    s->estimated_live_bytes = est > 0 ? (uint64_t)est : 0;
    s->heap_map_capacity = E.hm.capacity;
    s->heap_map_used = memprof__hm_used(&E.hm);
    s->heap_map_full_drops = memprof_atomic_load_relaxed(&E.hm.full_drops);
    s->stack_table_capacity = E.st.max_stacks;
    s->stack_table_overflows = memprof_atomic_load_relaxed(&E.st.overflows);
    s->bloom_rebuilds = memprof_atomic_load_relaxed(&H.bloom.rebuilds);
    s->bloom_fill_permille = memprof__bloom_fill_permille(&H.bloom);
    s->death_during_birth = memprof_atomic_load_relaxed(&E.hm.death_during_birth);
    s->tombstones_reused = memprof_atomic_load_relaxed(&E.hm.tombstones_reused);
    s->reentrant_skips = memprof_atomic_load_relaxed(&E.reentrant_skips);
    s->truncated_stacks = memprof_atomic_load_relaxed(&E.truncated_stacks);
    s->profiler_bytes = memprof_atomic_load_relaxed(&E.mapped_bytes) +
                        memprof_atomic_load_relaxed(&E.hm.mapped_bytes) +
                        memprof_atomic_load_relaxed(&E.st.mapped_bytes);
    s->write_failures = memprof_atomic_load_relaxed(&E.write_failures);
    s->unwinder = E.unwinder;
    uint32_t min = memprof_atomic_load_relaxed(&E.depth_min);
    s->stack_depth_min = min == UINT32_MAX ? 0 : min;
    s->stack_depth_total = memprof_atomic_load_relaxed(&E.depth_total);
    s->shallow_stacks = memprof_atomic_load_relaxed(&E.shallow_stacks);
    uint64_t bad = s->shallow_stacks + s->truncated_stacks;
    s->unwind_confidence_permille =
        s->total_samples == 0
            ? 1000
            : (bad >= s->total_samples ? 0 : 1000 - bad * 1000 / s->total_samples);
}
