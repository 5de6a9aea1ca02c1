/* SPDX-License-Identifier: MIT */
/*
 * PyMem domain hooks: Python's small-object allocator (pymalloc) carves most objects out of
 * its own 1 MiB arenas and never calls malloc for them, so the malloc hooks (GOT or preload)
 * cannot see them. We wrap the PYMEM_DOMAIN_OBJ and PYMEM_DOMAIN_MEM allocators
 * (PyMem_SetAllocator) and feed the blocks pymalloc serves from its pools through the
 * sampler: memprof_sample_interval()/memprof_report_sampled() (plain pymalloc) or
 * memprof_report_alloc() (WATCH mode), and memprof_report_free().
 *
 * Counting each block once. pymalloc serves requests of 1 to 512 bytes
 * (SMALL_REQUEST_THRESHOLD in 3.10 to 3.13) from its pools and forwards everything else, including
 * 0-byte requests, to PyMem_RawMalloc/RawCalloc/RawRealloc, i.e. to malloc, which the malloc
 * hooks already sample. Those forwards go through the RAW domain's *current* allocator, so we
 * also wrap PYMEM_DOMAIN_RAW with a pass-through that notes "a forward happened on the
 * thread being watched" (the watch). That gives an exact test: a block is a pool block iff
 * the domain's call returned it without calling the RAW domain.
 *
 * Modes, chosen per domain at install time by probing the original allocator with watched
 * requests of 16, 500 and 1024 bytes (this also detects PYTHONMALLOC, -X dev and allocators
 * installed by an embedder or by tracemalloc, without parsing anything):
 *
 * - RELOCATE (plain pymalloc: 16 and 500 stay in the pools, 1024 is forwarded; the usual
 *   case). The hooks must cost next to nothing, because nearly every Python bytecode
 *   allocates or frees: the OBJ/MEM malloc, calloc and realloc wrappers charge each request
 *   to the binding's own byte countdown (a GIL-guarded global drawn by
 *   memprof_sample_interval(); see "the sampling countdown" below) *before* allocating, and
 *   tail-call pymalloc: a compare, a subtraction and a jump, with no call into libmemprof
 *   unless a sample point falls within the request. There is no free wrapper at all (the
 *   domain keeps pymalloc's own free, which CPython's optimized build calls inline). That
 *   works because a sampled block is not taken from pymalloc: it is *relocated* to a small
 *   arena of ours ("the relocation arena") with its sample's id in a header. pymalloc hands
 *   any block that is not in its arenas to PyMem_RawFree/RawRealloc, i.e. to our RAW
 *   wrapper, which recognises our blocks by address range, reports their free and recycles
 *   them. So pool blocks are never samples, only relocated blocks are, and only they need
 *   free tracking. The report ids are a counter (not addresses), advanced when a sample is
 *   taken. When a sample point falls within a realloc, the call is watched: a result that
 *   stayed in the pools is a new allocation and is relocated (one that was forwarded is
 *   malloc's to sample); a relocated block being realloc'ed goes to our RAW wrapper, which
 *   reports its free and moves it to malloc (sampled there like any malloc'ed block).
 * - WATCH (pymalloc under the debug hooks, whose per-block overhead moves the threshold and
 *   whose headers forbid relocation, or another wrapping layer): every request is classified
 *   by watching for a forward; pool blocks are reported keyed by address and every free
 *   checks the binding's exact set of its sampled live blocks ("the sampled-block set").
 * - OFF (the domain does not forward through RAW: PYTHONMALLOC=malloc or malloc_debug, where
 *   every block comes from malloc and is already sampled there, or a custom allocator we
 *   cannot reason about): the domain is left unhooked and nothing is reported.
 *
 * Corner cases:
 * - pymalloc itself calls the RAW domain while serving a pool request when it grows its arena
 *   table or its address radix tree (a few times per process); in WATCH mode such a pool
 *   block is taken for a forwarded one and goes unreported. Negligible.
 * - Frees of blocks allocated before the hooks went in are pool or malloc blocks: nothing to
 *   report. A failed realloc keeps the old block and its sample.
 * - A relocated block costs its size rounded up to 16 bytes plus a 16-byte header; there are
 *   about (live small-object bytes / sampling rate) of them. If the arena (4 GiB of address
 *   space, reserved, committed as used) cannot serve one, that sample is reported freed at
 *   once and the block comes from pymalloc (counted in the stats).
 * - The hooks are installed once and never removed: stop() leaves them in place so frees keep
 *   being tracked, and after shutdown() the reports are no-ops (relocated blocks are still
 *   recycled when freed). Removing them would be unsafe anyway: a later hook (tracemalloc
 *   started after us) saved ours as its "original", and relocated blocks need our RAW
 *   wrapper for as long as they live. tracemalloc.stop() after tracemalloc was started
 *   *after* us restores the allocators it saved, which are ours: fine. If tracemalloc traces
 *   when our hooks go in, it is *below* them, and its stop() would put back the allocators it
 *   saved, without ours: so relocation is not used then (WATCH mode instead, which tolerates
 *   losing its hooks: pool blocks are then no longer sampled and frees of sampled ones are
 *   missed; mp_pymem_outermost() lets the stats show it). Another embedder hook below ours
 *   that is later removed would break relocated blocks the same way; none is known.
 * - The OBJ and MEM domains are only called with the GIL held (a C-API rule), which serializes
 *   our wrappers, the watch, the id counter and the sampled-block set. The RAW domain may be
 *   called by any thread at any time: the watch compares thread identities, the relocation
 *   arena's test is an address range fixed before the hooks go in and its free lists have
 *   their own lock, and our RAW allocator struct carries the original's ctx so that a thread
 *   reading the domain while we replace it (a plain struct copy in CPython) sees a valid
 *   pair either way.
 */
#include "binding.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <string.h>
#include <sys/mman.h>

#define SMALL_REQUEST_THRESHOLD 512 /* pymalloc's largest pool request, 3.10 to 3.13 */

static PyMemAllocatorEx raw_orig, mem_orig, obj_orig;
static PyMemAllocatorEx mem_installed, obj_installed;
static enum mp_pymem_mode mem_mode, obj_mode;
static bool installed;

static _Atomic uint64_t sampled;        /* reported blocks sampled, ever */
static _Atomic uint64_t reloc_failures; /* samples dropped: the arena could not serve them */

static inline bool is_small(size_t n)
{
    return n - 1 < SMALL_REQUEST_THRESHOLD; /* 1..512; 0 wraps around */
}

/* ---- the relocation arena (RELOCATE mode) ------------------------------------------------
 *
 * One reserved range of address space, committed in 1 MiB steps by a bump pointer, with a
 * free list per 16-byte size class. Each block is a 16-byte header (the sample's report id
 * and size class) and a 16-byte-aligned payload of up to 512 bytes (pymalloc's alignment).
 * The free lists are guarded by a mutex: blocks are allocated with the GIL held, and freed
 * through the RAW domain, normally with the GIL too, but the lock makes that not matter. */

#define RELOC_RESERVE (4ull << 30)
#define RELOC_COMMIT  (1u << 20)
#define RELOC_CLASSES (SMALL_REQUEST_THRESHOLD / 16)
#define RELOC_MAGIC   0x6d70726fu

struct reloc_hdr {
    uint64_t id;
    uint32_t cls; /* payload size / 16: 1..32 */
    uint32_t magic;
};

static uintptr_t reloc_lo; /* start of the range, 0 until reserved */
static size_t reloc_size;  /* bytes reserved; 0 makes in_reloc() false everywhere */
static size_t reloc_used, reloc_committed;
static struct reloc_hdr *reloc_free[RELOC_CLASSES + 1]; /* next pointer stored in payload */
static pthread_mutex_t reloc_lock = PTHREAD_MUTEX_INITIALIZER;
static _Atomic uint64_t reloc_live;

static inline bool in_reloc(const void *p)
{
    return (uintptr_t)p - reloc_lo < reloc_size;
}

/* Reserves the range, aligned to 1 MiB: pymalloc builds without its address radix tree
 * read a "pool header" at the 16 KiB boundary below any block they are asked to free, which
 * must then be our own committed memory. */
static bool reloc_reserve(void)
{
    const size_t align = 1u << 20;
    void *p = mmap(NULL, RELOC_RESERVE + align, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        return false;
    uintptr_t lo = ((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1);
    reloc_lo = lo;
    reloc_size = RELOC_RESERVE;
    return true;
}

/* A block for n (1..512) bytes with its payload zeroed if asked, or NULL. */
static void *reloc_alloc(uint64_t id, size_t n, bool zero)
{
    uint32_t cls = (uint32_t)((n + 15) / 16);
    struct reloc_hdr *h;
    pthread_mutex_lock(&reloc_lock);
    h = reloc_free[cls];
    if (h) {
        memcpy(&reloc_free[cls], (const void *)(h + 1), sizeof reloc_free[cls]); /* the link */
    } else {
        size_t need = sizeof *h + (size_t)cls * 16;
        if (reloc_used + need > reloc_committed) {
            if (reloc_committed + RELOC_COMMIT > reloc_size ||
                mprotect((void *)(reloc_lo + reloc_committed), RELOC_COMMIT,
                         PROT_READ | PROT_WRITE) != 0) {
                pthread_mutex_unlock(&reloc_lock);
                return NULL;
            }
            reloc_committed += RELOC_COMMIT;
        }
        h = (struct reloc_hdr *)(reloc_lo + reloc_used);
        reloc_used += need;
    }
    pthread_mutex_unlock(&reloc_lock);
    h->id = id;
    h->cls = cls;
    h->magic = RELOC_MAGIC;
    if (zero)
        memset(h + 1, 0, n);
    atomic_fetch_add_explicit(&reloc_live, 1, memory_order_relaxed);
    return h + 1;
}

/* Frees a relocated block: its sample leaves the live set first. */
static void reloc_release(void *p)
{
    struct reloc_hdr *h = (struct reloc_hdr *)p - 1;
    memprof_report_free(h->id);
    h->magic = 0;
    pthread_mutex_lock(&reloc_lock);
    memcpy((void *)(h + 1), &reloc_free[h->cls], sizeof reloc_free[h->cls]);
    reloc_free[h->cls] = h;
    pthread_mutex_unlock(&reloc_lock);
    atomic_fetch_sub_explicit(&reloc_live, 1, memory_order_relaxed);
}

/* The report id of the next sample (GIL). Above any user-space address, so these ids never
 * meet the address-keyed ids of WATCH mode. */
static uint64_t next_id = 1ull << 62;

/* ---- the sampling countdown (RELOCATE mode) ----------------------------------------------
 *
 * Nearly every Python bytecode allocates, so the RELOCATE-mode wrappers must not call into
 * libmemprof for each request: memprof_report_alloc() did, and that call (a PLT hop, the
 * library's argument check and its TLS countdown) was half of the binding's overhead. The
 * binding keeps its own byte countdown instead, drawn by memprof_sample_interval() with the
 * engine's rate and distribution, and calls the library only when a sample point falls within
 * a request (memprof_report_sampled()), about once per sampling rate's worth of bytes.
 *
 * One countdown for the whole interpreter, not one per thread: the OBJ and MEM domains are
 * only called with the GIL held, so the countdown is a plain global (no TLS access, which
 * from a dlopen'ed extension would be a __tls_get_addr call) and the GIL-serialized requests
 * of all threads form one stream of bytes; each request is still sampled with probability
 * p(n) = 1 - exp(-n/rate), independently of the others, because the remainder of an
 * exponential countdown is exponential whatever came before (doc/architecture.md, Decisions: Estimator).
 *
 * Every request is charged, including those pymalloc forwards to malloc (over 512 bytes, or
 * forwarded reallocs): testing the size first would cost every request a compare, and
 * charging bytes we never sample biases nothing for the same reason. When the sample point
 * falls within such a request it is not sampled here (the malloc hooks sample it) and a new
 * countdown is drawn. */

#define IDLE_POLL (64u << 10) /* bytes between asks while the engine is not sampling */

/* The countdown holds the bytes to the next sample point *minus one*: a request of n bytes
 * reaches the point when n > countdown, which is exactly when subtracting n borrows, so the
 * hot wrappers' test is the subtraction itself (countdown_charge: five instructions in all).
 * A countdown that is not a sample point (none drawn yet, or the engine was not sampling)
 * is "idle": it only says when to ask the engine again. */
static uint64_t countdown;
static bool countdown_idle = true;

/* Charges a request of n bytes; false (nothing charged) when it reaches the countdown's end,
 * for countdown_expired() to decide. */
static inline bool countdown_charge(size_t n)
{
    uint64_t left;
    if (__builtin_sub_overflow(countdown, n, &left))
        return false;
    countdown = left;
    return true;
}

/* The countdown ran out within a request of n bytes (n > countdown): says whether this
 * request is sampled, and draws the next countdown. An idle countdown decides the request
 * afresh (by memorylessness, exactly a sample with probability p(n)). GIL held. */
__attribute__((noinline)) static bool countdown_expired(size_t n)
{
    if (countdown_idle) {
        uint64_t c = memprof_sample_interval();
        countdown_idle = c == 0;
        if (c == 0) {
            countdown = IDLE_POLL - 1; /* not sampling: ask again later */
            return false;
        }
        if (n < c) {
            countdown = c - n - 1;
            return false;
        }
    }
    uint64_t c = memprof_sample_interval();
    countdown_idle = c == 0;
    countdown = (c ? c : IDLE_POLL) - 1;
    return is_small(n); /* larger requests are pymalloc's forwards: sampled by malloc's hooks */
}

/* Takes the sample decided by countdown_expired() for a request of n (1..512) bytes: records
 * it and returns a relocated block carrying it, or NULL (the engine did not record it, e.g.
 * it stopped meanwhile, or the arena could not serve it: then the sample is dropped).
 * Inlined into the (out-of-line) slow paths, so a sampled stack shows one frame of ours. */
static inline __attribute__((always_inline)) void *take_sample(size_t n, bool zero)
{
    uint64_t id = next_id++;
    if (memprof_report_sampled(id, n) != 1)
        return NULL;
    atomic_fetch_add_explicit(&sampled, 1, memory_order_relaxed);
    void *p = reloc_alloc(id, n, zero);
    if (!p) {
        memprof_report_free(id);
        atomic_fetch_add_explicit(&reloc_failures, 1, memory_order_relaxed);
    }
    return p;
}

/* ---- the sampled-block set (WATCH mode) ---------------------------------------------------
 *
 * In WATCH mode samples are pool blocks keyed by address, and every free must tell the
 * engine when the block was sampled. Asking the engine for every free (a probe of its Bloom
 * filter, sized for a million live samples, so usually a cache miss) would cost more than all
 * the rest of the hooks, so the binding keeps the exact set of its own sampled, live blocks:
 * an open-addressing table of addresses (linear probing, at most a quarter full,
 * backward-shift deletion) with a bitmap of its occupied slots beside it. A free whose home
 * slot is empty is settled by one bit of the bitmap; only sampled blocks reach the engine.
 * Only the OBJ and MEM wrappers touch it, with the GIL held. A block the engine dropped (its
 * heap map full) is in the set but unknown to the engine: memprof_report_free() answers 0. */

static uint64_t no_slots_occ[1];
static uintptr_t *set_slots;             /* 0 = empty */
static uint64_t *set_occ = no_slots_occ; /* bit i: slot i is occupied */
static size_t set_mask, set_count;

static inline size_t set_hash(uintptr_t p)
{
    return (size_t)(((uint64_t)p >> 4) * 0x9E3779B97F4A7C15ull >> 24);
}

static inline bool occ_get(const uint64_t *occ, size_t i)
{
    return (occ[i >> 6] >> (i & 63)) & 1;
}

static inline void occ_set(uint64_t *occ, size_t i, bool on)
{
    if (on)
        occ[i >> 6] |= 1ull << (i & 63);
    else
        occ[i >> 6] &= ~(1ull << (i & 63));
}

static void set_put(uintptr_t *slots, uint64_t *occ, size_t mask, uintptr_t p)
{
    size_t i = set_hash(p) & mask;
    while (slots[i] && slots[i] != p)
        i = (i + 1) & mask;
    slots[i] = p;
    occ_set(occ, i, true);
}

static void set_add(uintptr_t p)
{
    if (!set_slots || (set_count + 1) * 4 > set_mask + 1) {
        size_t cap = set_slots ? (set_mask + 1) * 2 : 4096;
        char *mem = mmap(NULL, cap * sizeof(uintptr_t) + cap / 8, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (mem == MAP_FAILED) {
            if (!set_slots || set_count + 1 > set_mask)
                return; /* cannot track it: its free will go unreported (a stale sample) */
        } else {
            uintptr_t *slots = (uintptr_t *)mem;
            uint64_t *occ = (uint64_t *)(mem + cap * sizeof(uintptr_t));
            for (size_t i = 0; set_slots && i <= set_mask; i++)
                if (set_slots[i])
                    set_put(slots, occ, cap - 1, set_slots[i]);
            uintptr_t *old = set_slots;
            size_t old_cap = set_mask + 1;
            set_slots = slots;
            set_occ = occ;
            set_mask = cap - 1;
            if (old)
                munmap(old, old_cap * sizeof(uintptr_t) + old_cap / 8);
        }
    }
    size_t i = set_hash(p) & set_mask;
    while (set_slots[i] && set_slots[i] != p)
        i = (i + 1) & set_mask;
    if (!set_slots[i])
        set_count++;
    set_slots[i] = p;
    occ_set(set_occ, i, true);
}

/* Removes p if present; returns whether it was. */
static bool set_remove(uintptr_t p)
{
    size_t i = set_hash(p) & set_mask;
    for (;;) {
        uintptr_t v = set_slots[i];
        if (v == p)
            break;
        if (!v)
            return false;
        i = (i + 1) & set_mask;
    }
    /* Backward-shift deletion: move later entries of the cluster into the hole when their
     * home slot does not lie cyclically in (hole, their slot]. */
    size_t hole = i;
    for (size_t j = (i + 1) & set_mask; set_slots[j]; j = (j + 1) & set_mask) {
        size_t home = set_hash(set_slots[j]) & set_mask;
        bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
        if (!stays) {
            set_slots[hole] = set_slots[j];
            hole = j;
        }
    }
    set_slots[hole] = 0;
    occ_set(set_occ, hole, false);
    set_count--;
    return true;
}

static inline void report_pool_alloc(void *p, size_t n)
{
    if (__builtin_expect(memprof_report_alloc((uint64_t)(uintptr_t)p, n) == 1, 0)) {
        set_add((uintptr_t)p);
        atomic_fetch_add_explicit(&sampled, 1, memory_order_relaxed);
    }
}

__attribute__((noinline)) static void report_pool_free_slow(void *p)
{
    if (set_remove((uintptr_t)p))
        memprof_report_free((uint64_t)(uintptr_t)p);
}

/* Whether a free must look further: something sampled is live and p's home slot is used. */
static inline bool pool_free_needs_check(void *p)
{
    return __builtin_expect(set_count != 0, 0) &&
           occ_get(set_occ, set_hash((uintptr_t)p) & set_mask);
}

static inline void report_pool_free(void *p)
{
    if (pool_free_needs_check(p))
        report_pool_free_slow(p);
}

/* ---- the forward watch and the RAW wrappers ----------------------------------------------- */

static _Atomic uintptr_t watch_owner; /* the watching thread's thread pointer, 0 = nobody */
static _Atomic int forwarded;         /* the watching thread called the RAW domain */

/* This thread's identity: its thread pointer (%fs:0 on x86-64), read without a call. */
static inline uintptr_t self_id(void)
{
    return (uintptr_t)__builtin_thread_pointer();
}

struct watch {
    uintptr_t owner;
    int forwarded;
};

static inline struct watch watch_begin(void)
{
    struct watch saved = {atomic_load_explicit(&watch_owner, memory_order_relaxed),
                          atomic_load_explicit(&forwarded, memory_order_relaxed)};
    atomic_store_explicit(&forwarded, 0, memory_order_relaxed);
    atomic_store_explicit(&watch_owner, self_id(), memory_order_relaxed);
    return saved;
}

/* Ends a watch; returns whether the RAW domain was called during it. */
static inline bool watch_end(struct watch saved)
{
    bool fwd = atomic_load_explicit(&forwarded, memory_order_relaxed) != 0;
    atomic_store_explicit(&watch_owner, saved.owner, memory_order_relaxed);
    atomic_store_explicit(&forwarded, saved.forwarded, memory_order_relaxed);
    return fwd;
}

static inline void note_raw(void)
{
    if (atomic_load_explicit(&watch_owner, memory_order_relaxed) == self_id())
        atomic_store_explicit(&forwarded, 1, memory_order_relaxed);
}

static void *raw_malloc(void *ctx, size_t n)
{
    note_raw();
    return raw_orig.malloc(ctx, n);
}

static void *raw_calloc(void *ctx, size_t nelem, size_t elsize)
{
    note_raw();
    return raw_orig.calloc(ctx, nelem, elsize);
}

/* A relocated block being realloc'ed (pymalloc forwards it here): it moves to malloc, where
 * it is sampled like any malloc'ed block, and its own sample leaves the live set. */
__attribute__((noinline)) static void *reloc_realloc(void *ctx, void *p, size_t n)
{
    struct reloc_hdr *h = (struct reloc_hdr *)p - 1;
    size_t cap = (size_t)h->cls * 16;
    void *q = raw_orig.malloc(ctx, n);
    if (!q)
        return NULL; /* the old block and its sample stay */
    memcpy(q, p, n < cap ? n : cap);
    reloc_release(p);
    return q;
}

static void *raw_realloc(void *ctx, void *p, size_t n)
{
    note_raw();
    if (__builtin_expect(in_reloc(p), 0))
        return reloc_realloc(ctx, p, n);
    return raw_orig.realloc(ctx, p, n);
}

static void raw_free(void *ctx, void *p)
{
    if (__builtin_expect(in_reloc(p), 0))
        reloc_release(p);
    else
        raw_orig.free(ctx, p);
}

/* ---- the domain wrappers ------------------------------------------------------------------ */

/* One set of wrappers per domain (each must reach its own original without using ctx, which
 * is the original's own): RELOCATE mode's (the free is the original's) and WATCH mode's. */
#define DEFINE_WRAPPERS(dom)                                                                       \
    /* The hot ones: a subtraction (its borrow decides), then a tail call of pymalloc (ctx is the  \
     * original's own). Sample points go out of line. */                                           \
    __attribute__((noinline)) static void *dom##_malloc_slow(void *ctx, size_t n)                  \
    {                                                                                              \
        if (countdown_expired(n)) {                                                                \
            void *p = take_sample(n, false);                                                       \
            if (p)                                                                                 \
                return p;                                                                          \
        }                                                                                          \
        return dom##_orig.malloc(ctx, n);                                                          \
    }                                                                                              \
    static void *dom##_malloc_reloc(void *ctx, size_t n)                                           \
    {                                                                                              \
        if (__builtin_expect(countdown_charge(n), 1))                                              \
            return dom##_orig.malloc(ctx, n);                                                      \
        return dom##_malloc_slow(ctx, n);                                                          \
    }                                                                                              \
    __attribute__((noinline)) static void *dom##_calloc_slow(void *ctx, size_t nelem,              \
                                                             size_t elsize, size_t n)              \
    {                                                                                              \
        if (countdown_expired(n)) {                                                                \
            void *p = take_sample(n, true);                                                        \
            if (p)                                                                                 \
                return p;                                                                          \
        }                                                                                          \
        return dom##_orig.calloc(ctx, nelem, elsize);                                              \
    }                                                                                              \
    static void *dom##_calloc_reloc(void *ctx, size_t nelem, size_t elsize)                        \
    {                                                                                              \
        size_t n;                                                                                  \
        if (__builtin_mul_overflow(nelem, elsize, &n)) /* fails in pymalloc: not charged */        \
            return dom##_orig.calloc(ctx, nelem, elsize);                                          \
        if (__builtin_expect(countdown_charge(n), 1))                                              \
            return dom##_orig.calloc(ctx, nelem, elsize);                                          \
        return dom##_calloc_slow(ctx, nelem, elsize, n);                                           \
    }                                                                                              \
    /* The sample point falls within this request: only a result that stayed in the pools          \
     * (no forward to RAW) is a small allocation of ours to sample. */                             \
    __attribute__((noinline)) static void *dom##_realloc_slow(void *ctx, void *old, size_t n)      \
    {                                                                                              \
        struct watch w = watch_begin();                                                            \
        void *p = dom##_orig.realloc(ctx, old, n);                                                 \
        bool fwd = watch_end(w);                                                                   \
        if (countdown_expired(n) && !fwd && p) {                                                   \
            void *q = take_sample(n, false);                                                       \
            if (q) {                                                                               \
                memcpy(q, p, n);                                                                   \
                dom##_orig.free(ctx, p);                                                           \
                return q;                                                                          \
            }                                                                                      \
        }                                                                                          \
        return p;                                                                                  \
    }                                                                                              \
    static void *dom##_realloc_reloc(void *ctx, void *old, size_t n)                               \
    {                                                                                              \
        if (__builtin_expect(countdown_charge(n), 1))                                              \
            return dom##_orig.realloc(ctx, old, n);                                                \
        return dom##_realloc_slow(ctx, old, n);                                                    \
    }                                                                                              \
    static void *dom##_malloc_watch(void *ctx, size_t n)                                           \
    {                                                                                              \
        struct watch w = watch_begin();                                                            \
        void *p = dom##_orig.malloc(ctx, n);                                                       \
        if (!watch_end(w) && p && n)                                                               \
            report_pool_alloc(p, n);                                                               \
        return p;                                                                                  \
    }                                                                                              \
    static void *dom##_calloc_watch(void *ctx, size_t nelem, size_t elsize)                        \
    {                                                                                              \
        size_t n;                                                                                  \
        bool overflow = __builtin_mul_overflow(nelem, elsize, &n);                                 \
        struct watch w = watch_begin();                                                            \
        void *p = dom##_orig.calloc(ctx, nelem, elsize);                                           \
        if (!watch_end(w) && p && !overflow && n)                                                  \
            report_pool_alloc(p, n);                                                               \
        return p;                                                                                  \
    }                                                                                              \
    static void *dom##_realloc_watch(void *ctx, void *old, size_t n)                               \
    {                                                                                              \
        struct watch w = watch_begin();                                                            \
        void *p = dom##_orig.realloc(ctx, old, n);                                                 \
        bool fwd = watch_end(w);                                                                   \
        if (!p)                                                                                    \
            return p; /* failed: the old block and its sample stay */                              \
        report_pool_free(old);                                                                     \
        if (!fwd && n)                                                                             \
            report_pool_alloc(p, n);                                                               \
        return p;                                                                                  \
    }                                                                                              \
    __attribute__((noinline)) static void dom##_free_checked(void *ctx, void *p)                   \
    {                                                                                              \
        report_pool_free_slow(p);                                                                  \
        dom##_orig.free(ctx, p);                                                                   \
    }                                                                                              \
    /* Both branches end in tail calls: no stack frame. */                                         \
    static void dom##_free_watch(void *ctx, void *p)                                               \
    {                                                                                              \
        if (pool_free_needs_check(p))                                                              \
            dom##_free_checked(ctx, p);                                                            \
        else                                                                                       \
            dom##_orig.free(ctx, p);                                                               \
    }                                                                                              \
    static PyMemAllocatorEx dom##_hooks(void)                                                      \
    {                                                                                              \
        if (dom##_mode == MP_PYMEM_RELOCATE)                                                       \
            return (PyMemAllocatorEx){dom##_orig.ctx, dom##_malloc_reloc, dom##_calloc_reloc,      \
                                      dom##_realloc_reloc, dom##_orig.free};                       \
        return (PyMemAllocatorEx){dom##_orig.ctx, dom##_malloc_watch, dom##_calloc_watch,          \
                                  dom##_realloc_watch, dom##_free_watch};                          \
    }

DEFINE_WRAPPERS(mem)
DEFINE_WRAPPERS(obj)

/* ---- installation ------------------------------------------------------------------------- */

/* Whether a watched request of n bytes through allocator a was forwarded to RAW. */
static bool forwards(const PyMemAllocatorEx *a, size_t n)
{
    struct watch w = watch_begin();
    void *p = a->malloc(a->ctx, n);
    bool fwd = watch_end(w);
    a->free(a->ctx, p);
    return fwd;
}

static enum mp_pymem_mode probe(const PyMemAllocatorEx *a)
{
    bool f16 = forwards(a, 16), f500 = forwards(a, 500), f1024 = forwards(a, 1024);
    if (!f16 && !f500 && f1024)
        return reloc_size ? MP_PYMEM_RELOCATE : MP_PYMEM_WATCH;
    if (!f16 && f1024)
        return MP_PYMEM_WATCH;
    return MP_PYMEM_OFF;
}

/* Whether tracemalloc traces now. Its hooks are then *below* ours, and tracemalloc.stop()
 * would put back the RAW allocator it saved, without our wrapper: relocated blocks would then
 * reach libc's free(). So relocation is only used when nothing of the kind is below us. */
static bool tracemalloc_tracing(void)
{
    PyObject *m = PyImport_ImportModule("_tracemalloc");
    PyObject *r = m ? PyObject_CallMethod(m, "is_tracing", NULL) : NULL;
    bool tracing = r ? PyObject_IsTrue(r) == 1 : false;
    Py_XDECREF(r);
    Py_XDECREF(m);
    PyErr_Clear();
    return tracing;
}

/* fork(): another thread may be freeing a relocated block (free lists locked). */
static void fork_prepare(void)
{
    pthread_mutex_lock(&reloc_lock);
}

static void fork_parent(void)
{
    pthread_mutex_unlock(&reloc_lock);
}

static void fork_child(void)
{
    pthread_mutex_init(&reloc_lock, NULL);
}

int mp_pymem_install(void)
{
    if (installed)
        return 0;
    pthread_atfork(fork_prepare, fork_parent, fork_child);
    /* Without the arena, plain pymalloc is handled in WATCH mode. */
    if (!tracemalloc_tracing())
        reloc_reserve();
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &raw_orig);
    PyMemAllocatorEx raw_hook = {raw_orig.ctx, raw_malloc, raw_calloc, raw_realloc, raw_free};
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &raw_hook);

    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &mem_orig);
    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &obj_orig);
    mem_mode = probe(&mem_orig);
    obj_mode = probe(&obj_orig);
    if (mem_mode != MP_PYMEM_OFF) {
        mem_installed = mem_hooks();
        PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &mem_installed);
    }
    if (obj_mode != MP_PYMEM_OFF) {
        obj_installed = obj_hooks();
        PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &obj_installed);
    }
    installed = true;
    return 0;
}

/* Puts a RELOCATE-mode domain's original allocator back while sampling is off, or ours back
 * when it resumes: a stopped profiler then costs Python's allocator nothing. Safe because
 * in that mode pool blocks are never samples and relocated blocks are freed through RAW,
 * which stays hooked. Only when ours (or the original) is the domain's current allocator:
 * a hook that wrapped ours (tracemalloc started later) is never removed. WATCH mode keeps
 * its wrappers (its frees must be seen). GIL held. */
static void swap_domain(PyMemAllocatorDomain domain, enum mp_pymem_mode mode,
                        const PyMemAllocatorEx *ours, const PyMemAllocatorEx *orig, bool on)
{
    if (!installed || mode != MP_PYMEM_RELOCATE)
        return;
    PyMemAllocatorEx cur;
    PyMem_GetAllocator(domain, &cur);
    const PyMemAllocatorEx *from = on ? orig : ours, *to = on ? ours : orig;
    if (cur.malloc == from->malloc && cur.calloc == from->calloc && cur.realloc == from->realloc &&
        cur.ctx == from->ctx) {
        PyMemAllocatorEx a = *to;
        PyMem_SetAllocator(domain, &a);
    }
}

void mp_pymem_set_active(int on)
{
    /* A (re)start decides its first request afresh, whatever the countdown held. */
    countdown = 0;
    countdown_idle = true;
    swap_domain(PYMEM_DOMAIN_MEM, mem_mode, &mem_installed, &mem_orig, on != 0);
    swap_domain(PYMEM_DOMAIN_OBJ, obj_mode, &obj_installed, &obj_orig, on != 0);
}

enum mp_pymem_mode mp_pymem_mode(PyMemAllocatorDomain domain)
{
    if (!installed)
        return MP_PYMEM_NOT_INSTALLED;
    return domain == PYMEM_DOMAIN_OBJ   ? obj_mode
           : domain == PYMEM_DOMAIN_MEM ? mem_mode
                                        : MP_PYMEM_OFF;
}

const char *mp_pymem_mode_name(enum mp_pymem_mode mode)
{
    switch (mode) {
    case MP_PYMEM_NOT_INSTALLED:
        return "not installed";
    case MP_PYMEM_RELOCATE:
        return "pymalloc";
    case MP_PYMEM_WATCH:
        return "pymalloc (watched)";
    case MP_PYMEM_OFF:
        return "off (domain uses malloc)";
    }
    return "unknown";
}

/* Ours, or (RELOCATE mode, paused) the original we put back ourselves. */
static bool domain_is_ours(PyMemAllocatorDomain domain, enum mp_pymem_mode mode,
                           const PyMemAllocatorEx *ours, const PyMemAllocatorEx *orig)
{
    if (mode == MP_PYMEM_OFF)
        return true;
    PyMemAllocatorEx a;
    PyMem_GetAllocator(domain, &a);
    return a.malloc == ours->malloc || (mode == MP_PYMEM_RELOCATE && a.malloc == orig->malloc);
}

int mp_pymem_outermost(void)
{
    if (!installed)
        return 0;
    return domain_is_ours(PYMEM_DOMAIN_MEM, mem_mode, &mem_installed, &mem_orig) &&
           domain_is_ours(PYMEM_DOMAIN_OBJ, obj_mode, &obj_installed, &obj_orig);
}

uint64_t mp_pymem_sampled(void)
{
    return atomic_load_explicit(&sampled, memory_order_relaxed);
}

uint64_t mp_pymem_relocated_live(void)
{
    return atomic_load_explicit(&reloc_live, memory_order_relaxed);
}

uint64_t mp_pymem_dropped(void)
{
    return atomic_load_explicit(&reloc_failures, memory_order_relaxed);
}
