/* SPDX-License-Identifier: MIT */
/*
 * PyMem domain hooks: Python's small-object allocator (pymalloc) carves most objects out of
 * its own 1 MiB arenas and never calls malloc for them, so the malloc hooks (GOT or preload)
 * cannot see them. We wrap the PYMEM_DOMAIN_OBJ and PYMEM_DOMAIN_MEM allocators
 * (PyMem_SetAllocator) and report the blocks that pymalloc serves from its pools to the
 * sampler with memprof_report_alloc()/memprof_report_free(), keyed by address (report ids
 * live in their own key space, so they never collide with malloc'ed addresses).
 *
 * Counting each block once. pymalloc serves requests of 1 to 512 bytes
 * (SMALL_REQUEST_THRESHOLD in 3.11) from its pools and forwards everything else, including
 * 0-byte requests, to PyMem_RawMalloc/RawCalloc/RawRealloc, i.e. to malloc, which the malloc
 * hooks already sample. Those forwards go through the RAW domain's *current* allocator, so we
 * also wrap PYMEM_DOMAIN_RAW with a pass-through that only notes "a forward happened on the
 * thread being watched". That gives an exact test: a block is a pool block iff the domain's
 * call returned it without calling the RAW domain.
 *
 * Modes, chosen per domain at install time by probing the original allocator with watched
 * requests of 16, 500 and 1024 bytes (this also detects PYTHONMALLOC, -X dev and allocators
 * installed by an embedder or by tracemalloc, without parsing anything):
 * - SIZE (plain pymalloc: 16 and 500 stay in the pools, 1024 is forwarded): malloc and
 *   calloc report requests of 1..512 bytes without watching (the cheap path: a compare and
 *   a call that decrements the sampler's countdown); realloc is always watched, because its
 *   result stays in malloc when the old block came from malloc, whatever the new size.
 * - WATCH (pymalloc under the debug hooks, whose per-block overhead moves the threshold, or
 *   another wrapping layer): every request is classified by watching for a forward.
 * - OFF (the domain does not forward through RAW: PYTHONMALLOC=malloc or malloc_debug, where
 *   every block comes from malloc and is already sampled there, or a custom allocator we
 *   cannot reason about): the domain is left unhooked and nothing is reported.
 *
 * Corner cases:
 * - pymalloc itself calls the RAW domain while serving a pool request when it grows its arena
 *   table or its address radix tree (a few times per process); such a pool block is taken
 *   for a forwarded one and goes unreported. Negligible.
 * - Frees: every free of the hooked domains is reported (before the block is released) while
 *   any reported block is sampled and live; report_free() of a block that was never sampled
 *   or was allocated before the hooks went in is a Bloom-filter probe, then nothing.
 *   A failed realloc keeps the old block's sample.
 * - The hooks are installed once and never removed: stop() leaves them in place so frees keep
 *   being tracked, and after shutdown() the reports are no-ops. Removing them would be unsafe
 *   anyway: a later hook (tracemalloc started after us) saved ours as its "original".
 *   Conversely, tracemalloc.stop() after tracemalloc was started *after* us restores the
 *   allocators it saved, which are ours: fine; but if tracemalloc was started before us and
 *   stopped after, it puts back pymalloc and our hooks are gone: pool blocks are no longer
 *   reported, and frees of sampled ones are missed (they stay "live"). mp_pymem_outermost()
 *   lets the stats show when our wrappers are not the current allocators.
 * - The OBJ and MEM domains are only called with the GIL held (a C-API rule), which serializes
 *   our wrappers and the watch. The RAW domain may be called by any thread at any time; the
 *   watch compares thread identities, and our RAW allocator struct carries the original's ctx
 *   so that a thread reading the domain while we replace it (a plain struct copy in CPython)
 *   sees a valid pair either way.
 */
#include "binding.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define SMALL_REQUEST_THRESHOLD 512 /* pymalloc's largest pool request in 3.11 */

static PyMemAllocatorEx raw_orig, mem_orig, obj_orig;
static enum mp_pymem_mode mem_mode, obj_mode;
static bool installed;

static _Atomic uint64_t live_sampled; /* our reported blocks sampled and not yet freed */
static _Atomic uint64_t sampled;      /* our reported blocks sampled, ever */

/* ---- reporting ---------------------------------------------------------------------------- */

static inline void report_alloc(void *p, size_t n)
{
    if (memprof_report_alloc((uint64_t)(uintptr_t)p, n) == 1) {
        atomic_fetch_add_explicit(&live_sampled, 1, memory_order_relaxed);
        atomic_fetch_add_explicit(&sampled, 1, memory_order_relaxed);
    }
}

static inline void report_free(void *p)
{
    if (p && atomic_load_explicit(&live_sampled, memory_order_relaxed) &&
        memprof_report_free((uint64_t)(uintptr_t)p) == 1)
        atomic_fetch_sub_explicit(&live_sampled, 1, memory_order_relaxed);
}

/* ---- the forward watch -------------------------------------------------------------------- */

static _Atomic uintptr_t watch_owner; /* the watching thread (pthread_self()), 0 = nobody */
static _Atomic int forwarded;         /* the watching thread called the RAW domain */

struct watch {
    uintptr_t owner;
    int forwarded;
};

static inline struct watch watch_begin(void)
{
    struct watch saved = {atomic_load_explicit(&watch_owner, memory_order_relaxed),
                          atomic_load_explicit(&forwarded, memory_order_relaxed)};
    atomic_store_explicit(&forwarded, 0, memory_order_relaxed);
    atomic_store_explicit(&watch_owner, (uintptr_t)pthread_self(), memory_order_relaxed);
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
    if (atomic_load_explicit(&watch_owner, memory_order_relaxed) == (uintptr_t)pthread_self())
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

static void *raw_realloc(void *ctx, void *p, size_t n)
{
    note_raw();
    return raw_orig.realloc(ctx, p, n);
}

/* ---- the domain wrappers ------------------------------------------------------------------ */

static inline bool is_small(size_t n)
{
    return n - 1 < SMALL_REQUEST_THRESHOLD; /* 1..512; 0 wraps around */
}

/* One set of wrappers per domain (they must reach their own original without using ctx,
 * which is the original's own). */
#define DEFINE_WRAPPERS(dom)                                                                  \
    static void *dom##_malloc(void *ctx, size_t n)                                            \
    {                                                                                         \
        if (dom##_mode == MP_PYMEM_SIZE) {                                                    \
            void *p = dom##_orig.malloc(ctx, n);                                              \
            if (p && is_small(n))                                                             \
                report_alloc(p, n);                                                           \
            return p;                                                                         \
        }                                                                                     \
        struct watch w = watch_begin();                                                       \
        void *p = dom##_orig.malloc(ctx, n);                                                  \
        if (!watch_end(w) && p && n)                                                          \
            report_alloc(p, n);                                                               \
        return p;                                                                             \
    }                                                                                         \
    static void *dom##_calloc(void *ctx, size_t nelem, size_t elsize)                         \
    {                                                                                         \
        size_t n;                                                                             \
        bool overflow = __builtin_mul_overflow(nelem, elsize, &n);                            \
        if (dom##_mode == MP_PYMEM_SIZE) {                                                    \
            void *p = dom##_orig.calloc(ctx, nelem, elsize);                                  \
            if (p && !overflow && is_small(n))                                                \
                report_alloc(p, n);                                                           \
            return p;                                                                         \
        }                                                                                     \
        struct watch w = watch_begin();                                                       \
        void *p = dom##_orig.calloc(ctx, nelem, elsize);                                      \
        if (!watch_end(w) && p && !overflow && n)                                             \
            report_alloc(p, n);                                                               \
        return p;                                                                             \
    }                                                                                         \
    static void *dom##_realloc(void *ctx, void *old, size_t n)                                \
    {                                                                                         \
        struct watch w = watch_begin();                                                       \
        void *p = dom##_orig.realloc(ctx, old, n);                                            \
        bool fwd = watch_end(w);                                                              \
        if (!p)                                                                               \
            return p; /* failed: the old block and its sample stay */                         \
        report_free(old);                                                                     \
        if (!fwd && n && (dom##_mode != MP_PYMEM_SIZE || is_small(n)))                        \
            report_alloc(p, n);                                                               \
        return p;                                                                             \
    }                                                                                         \
    static void dom##_free(void *ctx, void *p)                                                \
    {                                                                                         \
        report_free(p);                                                                       \
        dom##_orig.free(ctx, p);                                                              \
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
        return MP_PYMEM_SIZE;
    if (!f16 && f1024)
        return MP_PYMEM_WATCH;
    return MP_PYMEM_OFF;
}

int mp_pymem_install(void)
{
    if (installed)
        return 0;
    PyMem_GetAllocator(PYMEM_DOMAIN_RAW, &raw_orig);
    PyMemAllocatorEx raw_hook = {raw_orig.ctx, raw_malloc, raw_calloc, raw_realloc,
                                 raw_orig.free};
    PyMem_SetAllocator(PYMEM_DOMAIN_RAW, &raw_hook);

    PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &mem_orig);
    PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &obj_orig);
    mem_mode = probe(&mem_orig);
    obj_mode = probe(&obj_orig);
    if (mem_mode != MP_PYMEM_OFF) {
        PyMemAllocatorEx hook = {mem_orig.ctx, mem_malloc, mem_calloc, mem_realloc, mem_free};
        PyMem_SetAllocator(PYMEM_DOMAIN_MEM, &hook);
    }
    if (obj_mode != MP_PYMEM_OFF) {
        PyMemAllocatorEx hook = {obj_orig.ctx, obj_malloc, obj_calloc, obj_realloc, obj_free};
        PyMem_SetAllocator(PYMEM_DOMAIN_OBJ, &hook);
    }
    installed = true;
    return 0;
}

enum mp_pymem_mode mp_pymem_mode(PyMemAllocatorDomain domain)
{
    if (!installed)
        return MP_PYMEM_NOT_INSTALLED;
    return domain == PYMEM_DOMAIN_OBJ ? obj_mode : domain == PYMEM_DOMAIN_MEM ? mem_mode
                                                                              : MP_PYMEM_OFF;
}

const char *mp_pymem_mode_name(enum mp_pymem_mode mode)
{
    switch (mode) {
    case MP_PYMEM_NOT_INSTALLED:
        return "not installed";
    case MP_PYMEM_SIZE:
        return "pymalloc";
    case MP_PYMEM_WATCH:
        return "pymalloc (watched)";
    case MP_PYMEM_OFF:
        return "off (domain uses malloc)";
    }
    return "unknown";
}

int mp_pymem_outermost(void)
{
    if (!installed)
        return 0;
    PyMemAllocatorEx a;
    if (mem_mode != MP_PYMEM_OFF) {
        PyMem_GetAllocator(PYMEM_DOMAIN_MEM, &a);
        if (a.malloc != mem_malloc)
            return 0;
    }
    if (obj_mode != MP_PYMEM_OFF) {
        PyMem_GetAllocator(PYMEM_DOMAIN_OBJ, &a);
        if (a.malloc != obj_malloc)
            return 0;
    }
    return 1;
}

uint64_t mp_pymem_sampled(void)
{
    return atomic_load_explicit(&sampled, memory_order_relaxed);
}
