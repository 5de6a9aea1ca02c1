/* SPDX-License-Identifier: MIT */
/*
 * Frame-pointer stack walking bounded by the thread's stack (see capture.h), the DWARF
 * unwinder (libgcc's _Unwind_Backtrace(), or libunwind loaded where glibc needs it), and the
 * registry of the profiler's own code ranges skipped at the leaf end.
 */
#define _GNU_SOURCE /* RTLD_DEFAULT */
#include "config.h"
#include "core/capture.h"

#include <errno.h>
#include <stddef.h>
#if HAVE_LIBUNWIND
#include <dlfcn.h>
#include <link.h>
#include <string.h>
#include <unwind.h>
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

#include "common/atomic.h"
#include "common/compiler.h"
#include "core/platform.h"
#include "core/unwind_fast.h"
#include "core/unwind_probe.h"

#define MAX_OWN_RANGES 8

/* Written at start in every process (compiler.h). */
static struct {
    uintptr_t lo, hi;
} own_ranges[MAX_OWN_RANGES] MEMPROF_START_DATA;
static unsigned n_own_ranges MEMPROF_START_DATA;

MEMPROF_START_TEXT void memprof__capture_add_own_range(uintptr_t lo, uintptr_t hi)
{
    for (unsigned i = 0; i < n_own_ranges; i++)
        if (own_ranges[i].lo == lo && own_ranges[i].hi == hi)
            return;
    if (n_own_ranges < MAX_OWN_RANGES) {
        own_ranges[n_own_ranges].lo = lo;
        own_ranges[n_own_ranges].hi = hi;
        n_own_ranges++;
    }
}

/* Bounds of the memprof_sampling_text section in the object this file is linked into. */
extern const char __start_memprof_sampling_text[] __attribute__((weak, visibility("hidden")));
extern const char __stop_memprof_sampling_text[] __attribute__((weak, visibility("hidden")));

MEMPROF_START_TEXT void memprof__capture_add_own_sampling_text(void)
{
    if (__start_memprof_sampling_text && __stop_memprof_sampling_text)
        memprof__capture_add_own_range((uintptr_t)__start_memprof_sampling_text,
                                       (uintptr_t)__stop_memprof_sampling_text);
}

MEMPROF_START_TEXT void memprof__capture_add_own_object(const void *addr)
{
    uintptr_t lo, hi;
    if (memprof__pf_text_range(addr, &lo, &hi) == 0)
        memprof__capture_add_own_range(lo, hi);
}

/* ---- hook code ------------------------------------------------------------------------ */

/* Bindings' objects (memprof_register_hook_code()): skipped at the leaf end like the
 * profiler's own code, and dropped anywhere else in a stack when it is resolved, since a
 * binding's hook also stands between the program and the allocator it forwards to (a PyMem
 * hook calling pymalloc, which calls malloc). Written under the caller's lock; read lock-free:
 * a range is complete before the count that publishes it is stored (release). */
#define MAX_HOOK_RANGES 4

static struct {
    uintptr_t lo, hi;
} hook_ranges[MAX_HOOK_RANGES];
static _Atomic unsigned n_hook_ranges;

int memprof__capture_add_hook_object(const void *addr)
{
    uintptr_t lo, hi;
    if (memprof__pf_text_range(addr, &lo, &hi) != 0)
        return -EINVAL;
    unsigned n = memprof_atomic_load_relaxed(&n_hook_ranges);
    for (unsigned i = 0; i < n; i++)
        if (hook_ranges[i].lo == lo && hook_ranges[i].hi == hi)
            return 0;
    if (n == MAX_HOOK_RANGES)
        return -ENOSPC;
    hook_ranges[n].lo = lo;
    hook_ranges[n].hi = hi;
    memprof_atomic_store_release(&n_hook_ranges, n + 1);
    memprof__capture_add_own_range(lo, hi);
    return 0;
}

bool memprof__capture_is_hook(uintptr_t pc)
{
    unsigned n = memprof_atomic_load_acquire(&n_hook_ranges);
    for (unsigned i = 0; i < n; i++)
        if (pc >= hook_ranges[i].lo && pc < hook_ranges[i].hi)
            return true;
    return false;
}

static bool is_own(uintptr_t pc)
{
    for (unsigned i = 0; i < n_own_ranges; i++)
        if (pc >= own_ranges[i].lo && pc < own_ranges[i].hi)
            return true;
    return false;
}

MEMPROF_NOINLINE MEMPROF_SAMPLING_TEXT unsigned memprof__capture_fp(uintptr_t *frames, unsigned max,
                                                                    uintptr_t from,
                                                                    uintptr_t stack_top,
                                                                    bool *truncated)
{
    *truncated = false;
    uintptr_t fp = from ? from : (uintptr_t)__builtin_frame_address(0);
    uintptr_t lo = fp;
    unsigned n = 0;
    bool skipping = true;
    /* A frame record is two words: [saved fp, return address]. */
    while (fp >= lo && fp + 2 * sizeof(uintptr_t) <= stack_top &&
           (fp & (sizeof(uintptr_t) - 1)) == 0) {
        const uintptr_t *rec = (const uintptr_t *)fp;
        uintptr_t ret = rec[1], next = rec[0];
        if (ret == 0)
            break;
        if (skipping && is_own(ret)) {
            /* still inside the profiler */
        } else {
            skipping = false;
            if (n == max) {
                *truncated = true;
                break;
            }
            frames[n++] = ret;
        }
        if (next <= fp)
            break;
        fp = next;
    }
    return n;
}

MEMPROF_START_TEXT bool memprof__capture_have_dwarf(void)
{
    return HAVE_LIBUNWIND;
}

#if HAVE_LIBUNWIND
/* Profiler frames at the leaf end: this function, the engine's cold path and the switch to
 * its stack (coldstack.h), the backend's hook, and possibly a wrapper or two. */
#define OWN_FRAMES_MARGIN 12

/* Whether DWARF stacks come from libgcc's unwinder rather than from libunwind. libgcc (GCC 12 and
 * later) finds a return address's unwind table with glibc's _dl_find_object() (2.35 and later),
 * which reads the loader's list of objects without a lock. libunwind asks dl_iterate_phdr(), which
 * takes the loader's lock, a recursive mutex that a signal handler must not take: a handler that
 * allocates (and is sampled) while its thread is inside dl_iterate_phdr() or dladdr() -- C++
 * exception unwinding, backtrace(), the program's own walks -- interrupted the mutex's own lock or
 * unlock, and waited for it for ever; and a fork() while another thread held it for libunwind left
 * it held in the child, whose exit-time profile then waited for it in the symbolizer. So libunwind
 * is used only where glibc has no _dl_find_object(), and there never in a fork() child (the flag is
 * set by memprof__capture_after_fork(), before any thread of the child exists). Both give the same
 * return addresses, starting with capture_dwarf's own. */
static bool use_backtrace MEMPROF_START_DATA; /* written at start (compiler.h) */

/* libgcc's unwinder: the copy linked into this library (libgcc_eh, -static-libgcc), or the
 * process's libgcc_s.so.1 when it has one. Both find a return address's unwind table with
 * glibc's _dl_find_object(), without a lock or an allocation, so they give the same stacks,
 * except through code whose tables were registered at run time with __register_frame() (a
 * JIT's): those only the libgcc_s the JIT called knows. So the process's is used whenever it
 * is loaded when the engine warms up (every C++ program, whose libstdc++ needs it, has it from
 * the start).
 * Linking libgcc_s instead made every process the plugin starts in map it and run its
 * constructor, whose CPUID instructions trap to the hypervisor in a virtual machine (~0.08 ms
 * of CPU per process, doc/performance.md, Start-up). The two functions are used as a pair:
 * one copy's context is not the other's. */
struct unwinder {
    _Unwind_Reason_Code (*backtrace)(_Unwind_Trace_Fn, void *);
    _Unwind_Ptr (*get_ip)(struct _Unwind_Context *);
};

static const struct unwinder linked_unwinder = {_Unwind_Backtrace, _Unwind_GetIP};
static struct unwinder process_unwinder;
static const struct unwinder *_Atomic unwinder = &linked_unwinder;

/* The path of the loaded libgcc_s.so.1, found among the loaded objects' names: dlopen() of
 * the soname with RTLD_NOLOAD would, when it is not loaded, search the cache and open the
 * file to compare it (nine system calls in every process). */
struct loaded {
    const char *path;
};

MEMPROF_START_TEXT static int find_libgcc_s(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    const char *name = info->dlpi_name, *slash = name ? strrchr(name, '/') : NULL;
    if (!slash || strcmp(slash + 1, "libgcc_s.so.1") != 0)
        return 0;
    ((struct loaded *)data)->path = name;
    return 1;
}

/* Switches to the process's libgcc_s if it is loaded. dlopen() takes the loader's lock: never
 * in a hook. */
static void use_process_libgcc(void)
{
    if (memprof_atomic_load_acquire(&unwinder) == &process_unwinder)
        return;
    struct loaded l = {NULL};
    if (!dl_iterate_phdr(find_libgcc_s, &l))
        return;
    /* By path, which the loader matches against the loaded objects' names without a search. */
    void *h = dlopen(l.path, RTLD_NOLOAD | RTLD_LAZY | RTLD_NODELETE);
    if (!h)
        return;
    struct unwinder u;
    *(void **)&u.backtrace = dlsym(h, "_Unwind_Backtrace");
    *(void **)&u.get_ip = dlsym(h, "_Unwind_GetIP");
    if (!u.backtrace || !u.get_ip)
        return;
    process_unwinder = u;
    memprof_atomic_store_release(&unwinder, &process_unwinder);
}

struct walk {
    void **buf;
    int n, max;
    _Unwind_Ptr (*get_ip)(struct _Unwind_Context *);
};

static MEMPROF_SAMPLING_TEXT _Unwind_Reason_Code walk_frame(struct _Unwind_Context *ctx, void *arg)
{
    struct walk *w = arg;
    if (w->n == w->max)
        return _URC_END_OF_STACK;
    w->buf[w->n++] = (void *)w->get_ip(ctx);
    return _URC_NO_REASON;
}

/* What glibc's backtrace() does, called directly: backtrace() dlopen()s libgcc_s at its
 * first use, which the engine then had to do at start in every process (a hook must not
 * load anything). The first address is the caller's own, as with backtrace(). */
static inline __attribute__((always_inline)) int libgcc_backtrace(void **buf, int max)
{
    const struct unwinder *u = memprof_atomic_load_acquire(&unwinder);
    struct walk w = {buf, 0, max, u->get_ip};
    u->backtrace(walk_frame, &w);
    if (w.n > 1 && !w.buf[w.n - 1]) /* a zero return address ends the stack */
        w.n--;
    return w.n;
}

/* libunwind's unw_backtrace(), loaded by memprof__capture_warm_up() where glibc has no
 * _dl_find_object(): the library is not linked, so that the processes that never need it
 * (every one on glibc 2.35 or later) do not map it, nor the liblzma it brings, at start. */
typedef int (*unw_backtrace_fn)(void **, int);
/* The soname of the nongnu libunwind the headers come from (8 since 2012). */
#define MEMPROF_LIBUNWIND_SONAME "libunwind.so.8"
static unw_backtrace_fn unw_bt;
#define STRINGIFY_(x) #x
#define STRINGIFY(x)  STRINGIFY_(x)

/* dlopen() allocates and takes the loader's lock: warm-up time only, never in a hook. */
static unw_backtrace_fn load_libunwind(void)
{
    void *h = dlopen(MEMPROF_LIBUNWIND_SONAME, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
    return h ? (unw_backtrace_fn)dlsym(h, STRINGIFY(unw_backtrace)) : NULL;
}

void memprof__capture_after_fork(void)
{
    use_backtrace = true;
}

static MEMPROF_NOINLINE MEMPROF_SAMPLING_TEXT unsigned
capture_dwarf(uintptr_t *frames, unsigned max, const struct memprof_regs *regs, bool *truncated)
{
    void *buf[MEMPROF_CAPTURE_MAX + OWN_FRAMES_MARGIN + 1];
    int want = (int)max + OWN_FRAMES_MARGIN + 1;
    bool libgcc = MEMPROF_LIKELY(use_backtrace || !unw_bt), ended = false;
    /* The cached walk in front of libgcc's (unwind_fast.h), from the registers the sampling
     * path took on the program's stack; libunwind, where it is the unwinder, caches its own. */
    int got = libgcc && regs ? memprof__unwind_fast(regs, buf, want, &ended) : -1;
    if (got < 0) {
        /* libunwind only once memprof__capture_warm_up() loaded it. */
        got = libgcc ? libgcc_backtrace(buf, want) : unw_bt(buf, want);
        ended = got < want;
    }
    int i = 0;
    while (i < got && is_own((uintptr_t)buf[i]))
        i++;
    unsigned n = 0;
    for (; i < got && n < max; i++)
        frames[n++] = (uintptr_t)buf[i];
    /* More frames than fit, or the buffer ran full (there may be more beyond it). */
    *truncated = i < got || !ended;
    return n;
}
#else
/* Without libunwind every stack comes from frame pointers: nothing changes in a fork child. */
void memprof__capture_after_fork(void) {}
#endif

#if HAVE_LIBUNWIND
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
#pragma weak _dl_find_object
#endif

/* Whether glibc has _dl_find_object() (2.35): where the headers say it may, through a weak
 * reference, which the loader binds with the rest (dlsym() was a lookup more in every
 * process at start). */
MEMPROF_START_TEXT static bool have_dl_find_object(void)
{
#if defined(__GLIBC__) && __GLIBC_PREREQ(2, 35)
    return _dl_find_object != NULL;
#else
    return dlsym(RTLD_DEFAULT, "_dl_find_object") != NULL;
#endif
}
#endif

MEMPROF_START_TEXT void memprof__capture_warm_up(void)
{
#if HAVE_LIBUNWIND
    use_process_libgcc();
    if (have_dl_find_object()) {
        use_backtrace = true;
        return;
    }
    if (!unw_bt && !(unw_bt = load_libunwind())) {
        use_backtrace = true; /* libunwind is not installed: libgcc's unwinder it is */
        return;
    }
    /* Before libunwind's first use in this process, which would open its pipe. */
    memprof__unwind_probes_install((const void *)unw_bt);
    uintptr_t frames[8];
    bool truncated;
    capture_dwarf(frames, 8, NULL, &truncated);
#endif
}

MEMPROF_SAMPLING_TEXT unsigned memprof__capture(enum memprof_unwinder how, uintptr_t *frames,
                                                unsigned max, uintptr_t from,
                                                const struct memprof_regs *regs,
                                                uintptr_t stack_top, bool *truncated)
{
    if (max > MEMPROF_CAPTURE_MAX)
        max = MEMPROF_CAPTURE_MAX;
#if HAVE_LIBUNWIND
    if (how == MEMPROF_UNWIND_DWARF)
        return capture_dwarf(frames, max, regs, truncated);
#else
    (void)how, (void)regs;
#endif
    return memprof__capture_fp(frames, max, from, stack_top, truncated);
}
