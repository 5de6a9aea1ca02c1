/* SPDX-License-Identifier: MIT */
/*
 * The LD_PRELOAD backend: definitions of the C allocator entry points that forward to the
 * next definition in the lookup order (glibc's, or another preloaded allocator's) and
 * report each allocation and free to the engine.
 *
 * The real functions are found with dlsym(RTLD_NEXT) on first use. dlsym itself may
 * allocate, so while resolution is in progress allocations are served from a small static
 * bootstrap heap. If the real allocator cannot be found the process cannot continue:
 * this is the one place that prints a message and aborts (nothing can run without it).
 *
 * The semantics (errno, overflow checks, realloc's rules) live in the shared wrappers
 * (wrappers.h); this file adds the symbol exports and the bootstrap phase.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <link.h>
#include <malloc.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/atomic.h"
#include "core/backend.h"
#include "core/platform.h"
#include "interpose/bootstrap.h"
#include "interpose/preload.h"
#include "interpose/wrappers.h"

#define EXPORT __attribute__((visibility("default")))

static void *early_malloc(size_t n);
static void early_free(void *p);
static void *early_calloc(size_t n, size_t size);
static void *early_realloc(void *old, size_t n);

/* The hot entry points call through `real` without testing whether it is resolved yet:
 * until it is, these slots hold the early_*() functions below, which resolve first. */
static struct memprof_allocator real = {
    .malloc = early_malloc,
    .free = early_free,
    .calloc = early_calloc,
    .realloc = early_realloc,
    .frees_reach_us = memprof__preload_retarget_ready,
};

/* 0 = not resolved, 1 = resolving (allocations go to the bootstrap heap), 2 = resolved. */
static _Atomic int resolve_state MEMPROF_START_DATA;

static void die(const char *what)
{
    static const char prefix[] = "memprof: cannot find the real allocator function ";
    (void)!write(STDERR_FILENO, prefix, sizeof prefix - 1);
    (void)!write(STDERR_FILENO, what, strlen(what));
    (void)!write(STDERR_FILENO, "; aborting\n", 11);
    abort();
}

static void *next(const char *name, int required)
{
    /* libc's dlsym() itself: the plugin's would forward each lookup to it after work of its
     * own, with the same answer (RTLD_NEXT is judged from the caller, this function). */
    memprof_dlsym_fn *libc_dlsym = memprof__preload_libc_dlsym();
    void *f = libc_dlsym ? libc_dlsym(RTLD_NEXT, name) : dlsym(RTLD_NEXT, name);
    if (!f && required)
        die(name);
    return f;
}

/* libc's code range, found once by the first of the questions below. */
static uintptr_t libc_lo MEMPROF_START_DATA, libc_hi MEMPROF_START_DATA;

static bool in_libc(const void *f)
{
    if (!libc_hi &&
        memprof__pf_text_range((const void *)gnu_get_libc_version, &libc_lo, &libc_hi) != 0)
        return false;
    return (uintptr_t)f >= libc_lo && (uintptr_t)f < libc_hi;
}

/* Whether a and b are code of the same object: both libc's, most often. */
static bool same_object(const void *a, const void *b)
{
    if (in_libc(a) && in_libc(b))
        return true;
    uintptr_t a_lo, a_hi, b_lo, b_hi;
    return memprof__pf_text_range(a, &a_lo, &a_hi) == 0 &&
           memprof__pf_text_range(b, &b_lo, &b_hi) == 0 && a_lo == b_lo;
}

/* Resolves the real functions once. Returns false while another thread is resolving (the
 * caller then uses the bootstrap heap). */
MEMPROF_START_TEXT static bool resolve_real(void)
{
    int expected = 0;
    if (memprof_atomic_load_acquire(&resolve_state) == 2)
        return true;
    if (!memprof_atomic_cas_seqcst(&resolve_state, &expected, 1))
        return expected == 2;
    real.free = next("free", 1);
    real.calloc = next("calloc", 1);
    real.realloc = next("realloc", 1);
    real.posix_memalign = next("posix_memalign", 1);
    real.aligned_alloc = next("aligned_alloc", 1);
    real.memalign = next("memalign", 1);
    real.valloc = next("valloc", 1);
    real.pvalloc = next("pvalloc", 0);
    /* pvalloc is obsolete and not every allocator has one: dlsym(RTLD_NEXT) then finds
     * glibc's, whose blocks the other allocator's free() cannot release. Use it only if it
     * comes from the object that provides malloc, which its code range tells (dladdr()
     * would scan the object's whole symbol table, ~50 us for libc's, in every process). */
    void *real_malloc = next("malloc", 1); /* stored last: the early slot resolves until then */
    if (real.pvalloc && !same_object((const void *)real.pvalloc, real_malloc))
        real.pvalloc = NULL;
    real.malloc_usable_size = next("malloc_usable_size", 1);
    real.malloc = (void *(*)(size_t))real_malloc;
    memprof_atomic_store_release(&resolve_state, 2);
    return true;
}

/* The slots may be seen filled before resolve_state says so: that is fine, each is either
 * its early_*() function or the real one. */
static inline bool ready(void)
{
    return MEMPROF_LIKELY(memprof_atomic_load_acquire(&resolve_state) == 2) || resolve_real();
}

/* The real functions, once known; before that, the bootstrap heap. They are called by the
 * wrappers after the profiler's own work, so they only allocate or free. Only bootstrap
 * blocks exist before resolution, and free() and realloc() catch those first. */
static void *early_malloc(size_t n)
{
    return ready() ? real.malloc(n) : memprof__bootstrap_alloc(n, 16);
}

static void early_free(void *p)
{
    if (ready())
        real.free(p);
}

static void *early_calloc(size_t n, size_t size)
{
    if (ready())
        return real.calloc(n, size);
    /* The wrapper checked n * size for overflow; static storage is already zero. */
    return memprof__bootstrap_alloc(n * size, 16);
}

static void *early_realloc(void *old, size_t n)
{
    if (ready())
        return real.realloc(old, n);
    return old ? NULL : memprof__bootstrap_alloc(n, 16);
}

/* The plugin's own definitions, whatever the global lookup of their names finds. (GCC
 * would have the aliases repeat the attributes glibc's headers give the targets.) */
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif
extern __typeof(free) memprof_plugin_free __attribute__((alias("free"), visibility("hidden")));
extern __typeof(realloc) memprof_plugin_realloc
    __attribute__((alias("realloc"), visibility("hidden")));
extern __typeof(reallocarray) memprof_plugin_reallocarray
    __attribute__((alias("reallocarray"), visibility("hidden")));
extern __typeof(malloc_usable_size) memprof_plugin_malloc_usable_size
    __attribute__((alias("malloc_usable_size"), visibility("hidden")));
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

/* Whether the global lookup of free ends at the plugin's: in a program that is not
 * position-independent it returns the program's PLT stub for free (the function's canonical
 * address there), an undefined symbol whose calls the loader sends to the plugin; anything
 * else is a definition that comes first (the program's own allocator). */
static bool free_is_ours(void)
{
    void *f = dlsym(RTLD_DEFAULT, "free");
    if (f == (void *)memprof_plugin_free)
        return true;
    /* The object holding f, asked through its hash table: dladdr1() found the nearest symbol
     * by scanning all of them, 0.3 ms in every cc1 (a program that is not position-independent
     * with 29,000 dynamic symbols). */
    return f && memprof__preload_defines(f, "free") == 0;
}

/* Whether the plugin is the process's allocator with glibc's behind it, which the sample
 * heap needs: the global lookup of free finds the plugin (not a definition in the program),
 * and the next allocator is glibc's own (jemalloc and tcmalloc have entry points that free
 * a malloc'ed block without passing the free symbol: sdallocx, tc_free, operator delete;
 * a sample-heap block reaching one of them would crash the program). */
static bool behind_glibc(void)
{
    if (!free_is_ours())
        return false;
    /* Compared with libc's code range: dladdr() would scan libc's symbol table each time. */
    void *fns[] = {(void *)real.malloc, (void *)real.free, (void *)real.calloc,
                   (void *)real.realloc, (void *)real.memalign};
    for (size_t i = 0; i < MEMPROF_ARRAY_SIZE(fns); i++)
        if (!in_libc(fns[i]))
            return false;
    return true;
}

/* Prepares every later lookup of the functions that take a block back to find the plugin,
 * also those that end in libc's own symbol table (preload_retarget.c). */
static bool prepare_retarget(void)
{
    const struct memprof_retarget targets[] = {
        {"free", (void *)memprof_plugin_free, true},
        {"cfree", (void *)memprof_plugin_free, false},
        {"realloc", (void *)memprof_plugin_realloc, true},
        {"reallocarray", (void *)memprof_plugin_reallocarray, true},
        {"malloc_usable_size", (void *)memprof_plugin_malloc_usable_size, true},
#if HAVE_FREE_SIZED
        {"free_sized", (void *)free_sized, false},
#endif
    };
    return memprof__preload_retarget_prepare(targets, MEMPROF_ARRAY_SIZE(targets));
}

__attribute__((constructor(101))) static void preload_init(void)
{
    resolve_real();
    memprof__backend_register();
    memprof__engine_own_code((const void *)preload_init);
    /* The engine's tables then map with one system call each (platform.h). */
    memprof__pf_no_future_locks();
    /* No block of the sample heap may exist before every lookup of free finds the plugin:
     * the sample heap asks memprof__preload_retarget_ready() before its first block. */
    bool prepared = behind_glibc() && prepare_retarget();
    if (!prepared)
        memprof__preload_retarget_none();
    memprof__preload_configure(prepared);
}

/* The plugin's DT_FINI (src/meson.build): what crti's _fini does, nothing, but placed with the
 * start-up code rather than at the end of .text, whose page every exit then faulted in. */
MEMPROF_START_TEXT void memprof__preload_fini(void) {}

/* ---- the entry points ---------------------------------------------------------------- */

EXPORT void *malloc(size_t n)
{
    return memprof__wrap_malloc(&real, n);
}

EXPORT void free(void *p)
{
    if (MEMPROF_UNLIKELY(memprof__bootstrap_owns(p)))
        return;
    memprof__wrap_free(&real, p);
}

#if HAVE_FREE_SIZED
EXPORT void free_sized(void *p, size_t n)
{
    (void)n;
    free(p);
}
#endif

EXPORT void *calloc(size_t n, size_t size)
{
    return memprof__wrap_calloc(&real, n, size);
}

/* realloc of a block from the bootstrap heap: move it to the real heap. Out of line: realloc()
 * then needs no stack frame. */
static MEMPROF_NOINLINE void *realloc_bootstrap(void *old, size_t n)
{
    void *p = malloc(n);
    if (p) {
        size_t have = memprof__bootstrap_size(old);
        memcpy(p, old, have < n ? have : n);
    }
    return p;
}

EXPORT void *realloc(void *old, size_t n)
{
    if (MEMPROF_UNLIKELY(memprof__bootstrap_owns(old)))
        return realloc_bootstrap(old, n);
    return memprof__wrap_realloc(&real, old, n);
}

EXPORT void *reallocarray(void *old, size_t n, size_t size)
{
    size_t total;
    if (__builtin_mul_overflow(n, size, &total)) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, total);
}

EXPORT int posix_memalign(void **out, size_t align, size_t n)
{
    if (!ready()) {
        if (align < sizeof(void *) || (align & (align - 1)))
            return EINVAL;
        void *p = memprof__bootstrap_alloc(n, align);
        if (!p)
            return ENOMEM;
        *out = p;
        return 0;
    }
    return memprof__wrap_posix_memalign(&real, out, align, n);
}

EXPORT void *aligned_alloc(size_t align, size_t n)
{
    if (!ready())
        return memprof__bootstrap_alloc(n, align);
    return memprof__wrap_aligned_alloc(&real, align, n);
}

EXPORT void *memalign(size_t align, size_t n)
{
    if (!ready())
        return memprof__bootstrap_alloc(n, align);
    return memprof__wrap_memalign(&real, align, n);
}

EXPORT void *valloc(size_t n)
{
    if (!ready())
        return memprof__bootstrap_alloc(n, 4096);
    return memprof__wrap_valloc(&real, n, (size_t)sysconf(_SC_PAGESIZE));
}

EXPORT void *pvalloc(size_t n)
{
    if (!ready())
        return memprof__bootstrap_alloc(n, 4096);
    return memprof__wrap_pvalloc(&real, n, (size_t)sysconf(_SC_PAGESIZE));
}

EXPORT size_t malloc_usable_size(void *p)
{
    if (!p)
        return 0;
    if (memprof__bootstrap_owns(p))
        return memprof__bootstrap_size(p);
    /* In the range but not the heap's: glibc's block in someone else's mapping there. */
    if (memprof__in_sample_heap(p) && memprof__sample_heap_block(p))
        return memprof__sheap_usable(&memprof__hot.sheap, p);
    if (!ready())
        return 0; /* only bootstrap blocks exist before resolution */
    return real.malloc_usable_size(p);
}
