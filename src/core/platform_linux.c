/* SPDX-License-Identifier: MIT */
/*
 * Linux implementation of the core's platform primitives (platform.h): mmap-backed memory,
 * the monotonic clock, getrandom(), gettid() and the mapping that holds an address (stack
 * bounds).
 *
 * The functions the allocator hooks reach (the random seed of a new thread, the stack's
 * mapping, the mappings an intercepted mlockall() locks) make their system calls through
 * syscall(), never through glibc's wrappers: getrandom(), open(), read() and close() are
 * cancellation points, and a thread with a pending pthread_cancel() must come out of malloc
 * (which is not one) alive. Cancelled there, it would die inside the allocator with the
 * program's locks held (tests/stress/programs/cancel.c). syscall() is not a cancellation
 * point. Under a seccomp filter that forbids them (sandbox.h) they make none of those calls.
 */
#define _GNU_SOURCE
#include "config.h"
#include "core/platform.h"
#include "common/atomic.h"
#include "core/sandbox.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <sys/auxv.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if HAVE_GETRANDOM
#include <sys/random.h>
#endif

#ifndef MAP_FIXED_NOREPLACE
#define MAP_FIXED_NOREPLACE 0x100000 /* Linux 4.17; older kernels take it for a hint */
#endif

#ifndef MLOCK_ONFAULT
#define MLOCK_ONFAULT 1 /* Linux 4.4 */
#endif

/* Whether mlockall(MCL_FUTURE) may be in effect: unknown (assume so) until the plugin says it
 * cannot be, yes from the first MCL_FUTURE the engine sees. */
enum { FUTURE_LOCKS_UNKNOWN, FUTURE_LOCKS_NONE, FUTURE_LOCKS_MAYBE };
static _Atomic int future_locks MEMPROF_START_DATA = FUTURE_LOCKS_UNKNOWN;

MEMPROF_START_TEXT void memprof__pf_no_future_locks(void)
{
    int unknown = FUTURE_LOCKS_UNKNOWN;
    memprof_atomic_cas_seqcst(&future_locks, &unknown, FUTURE_LOCKS_NONE);
}

void *memprof__pf_map(size_t size)
{
    /* After the program's mlockall(MCL_FUTURE) the kernel locks every new mapping and faults
     * it in whole, the profiler's too: a table's newest segment (as large as all before it),
     * a snapshot. So the mapping is made inaccessible first (the kernel faults in nothing it
     * cannot access); MADV_DONTNEED, which refuses locked pages, tells whether it came out
     * locked, and then it is locked on fault instead (as the engine's mlockall() leaves the
     * tables mapped before the call); only then is it opened. The program's own blocks in
     * the sample heap are mapped as glibc's would be (memprof__pf_map_at()). */
    int saved = errno;
    if (memprof_atomic_load_seqcst(&future_locks) == FUTURE_LOCKS_NONE) {
        void *q = mmap(NULL, size, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        errno = saved;
        return q == MAP_FAILED ? NULL : q;
    }
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p != MAP_FAILED) {
        if (madvise(p, size, MADV_DONTNEED) != 0 && errno == EINVAL &&
            syscall(SYS_mlock2, p, size, MLOCK_ONFAULT) != 0)
            munlock(p, size); /* a kernel before 4.4: not locked rather than faulted in */
        if (mprotect(p, size, PROT_READ | PROT_WRITE) != 0) {
            munmap(p, size);
            p = MAP_FAILED;
        }
    }
    errno = saved;
    return p == MAP_FAILED ? NULL : p;
}

int memprof__pf_unmap(void *p, size_t size)
{
    if (!p)
        return 0;
    int saved = errno, rc = munmap(p, size) == 0 ? 0 : -errno;
    errno = saved;
    return rc;
}

/* Under a sanitizer that dictates where application memory lies, the window is a reservation
 * of our own (platform.h): its parts are replaced in place, never left unmapped. */
#define WINDOW_FIXED (MEMPROF_WINDOW_RESERVED ? MAP_FIXED : MAP_FIXED_NOREPLACE)

int memprof__pf_map_at(void *addr, size_t size)
{
    int saved = errno;
    void *p = mmap(addr, size, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | WINDOW_FIXED, -1, 0);
    int rc = p == MAP_FAILED ? -errno : 0;
    if (rc == 0 && p != addr) { /* a kernel without MAP_FIXED_NOREPLACE placed it elsewhere */
        munmap(p, size);
        rc = -EEXIST;
    }
    errno = saved;
    return rc;
}

int memprof__pf_unmap_at(void *p, size_t size)
{
    if (!MEMPROF_WINDOW_RESERVED)
        return memprof__pf_unmap(p, size);
    int saved = errno;
    void *q =
        mmap(p, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
    int rc = q == MAP_FAILED ? -errno : 0;
    errno = saved;
    return rc;
}

void memprof__pf_window_release(uintptr_t base, size_t size)
{
    if (MEMPROF_WINDOW_RESERVED && base)
        memprof__pf_unmap((void *)base, size);
}

void memprof__pf_no_huge_pages(void *p, size_t size)
{
    int saved = errno;
    madvise(p, size, MADV_NOHUGEPAGE); /* a kernel without THP says EINVAL */
    errno = saved;
}

MEMPROF_START_TEXT uint64_t memprof__pf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t memprof__pf_thread_id(void)
{
    /* 0 under a seccomp filter that forbids asking (sandbox.h). */
    return memprof__sys_allowed(MEMPROF_SYS_IDS) ? (uint64_t)syscall(SYS_gettid) : 0;
}

/* 64 bits drawn before a seccomp filter forbade getrandom(), and the draws made since. */
static _Atomic uint64_t entropy, entropy_draws;

static uint64_t getrandom64(void)
{
    uint64_t v = 0;
#if HAVE_GETRANDOM
    /* GRND_NONBLOCK: early in boot the pool may not be ready; never block a malloc. Through
     * syscall(): glibc's getrandom() is a cancellation point (above). */
    if (memprof__sys_allowed(MEMPROF_SYS_RANDOM) &&
        syscall(SYS_getrandom, &v, sizeof v, GRND_NONBLOCK) == (long)sizeof v)
        return v;
#endif
    return 0;
}

void memprof__pf_random_prepare(void)
{
    uint64_t none = 0, v = getrandom64();
    if (v)
        memprof_atomic_cas_acqrel(&entropy, &none, v);
}

uint64_t memprof__pf_random(void)
{
    uint64_t v = getrandom64();
    if (v)
        return v;
    /* No getrandom(), or a seccomp filter forbids it now: the entropy drawn before, mixed
     * with a count of the draws (splitmix64's step, so that no two draws are alike), the
     * clock and an address; the process id only if it may still be asked for. */
    uint64_t z = memprof_atomic_load_relaxed(&entropy) +
                 (memprof_atomic_add_relaxed(&entropy_draws, 1) + 1) * 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    int local;
    uint64_t pid = memprof__sys_allowed(MEMPROF_SYS_IDS) ? (uint64_t)getpid() : 0;
    return (z ^ (z >> 31)) ^ memprof__pf_now_ns() ^ ((uint64_t)(uintptr_t)&local << 16) ^ pid;
}

/* Parses the hexadecimal number at *p, advancing *p past it. */
static uintptr_t parse_hex(const char **p, const char *end)
{
    uintptr_t v = 0;
    for (; *p < end; (*p)++) {
        char c = **p;
        unsigned d = c >= '0' && c <= '9'   ? (unsigned)(c - '0')
                     : c >= 'a' && c <= 'f' ? (unsigned)(c - 'a' + 10)
                                            : 16u;
        if (d == 16)
            break;
        v = v << 4 | d;
    }
    return v;
}

/* Reads the range of the /proc/self/maps line at [line, end), which starts "start-end ". */
static bool parse_range(const char *line, const char *end, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t start = parse_hex(&line, end);
    if (line == end || *line++ != '-')
        return false;
    uintptr_t stop = parse_hex(&line, end);
    if (line == end || *line != ' ')
        return false;
    *lo = start;
    *hi = stop;
    return true;
}

/* Calls fn for each mapping of /proc/self/maps, in address order, until it returns true;
 * nothing if the file cannot be read. Plain system calls into a stack buffer: no
 * allocation, no lock, and no cancellation point (syscall(), not open() and read()). Only
 * a line's head is needed; one longer than the buffer (a long path) is judged by its head
 * and the rest skipped. */
static void for_each_mapping(bool (*fn)(void *ctx, uintptr_t lo, uintptr_t hi), void *ctx)
{
    if (!memprof__sys_allowed(MEMPROF_SYS_PROC)) /* a seccomp filter forbids it (sandbox.h) */
        return;
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    char buf[1024];
    size_t have = 0;
    bool done = false, skipping = false;
    uintptr_t lo, hi;
    while (!done) {
        ssize_t n = (ssize_t)syscall(SYS_read, fd, buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        char *line = buf, *end = buf + have, *nl;
        while (!done && (nl = memchr(line, '\n', (size_t)(end - line))) != NULL) {
            done = !skipping && parse_range(line, nl, &lo, &hi) && fn(ctx, lo, hi);
            skipping = false;
            line = nl + 1;
        }
        if (!done && line == buf) { /* no line end in a full buffer */
            done = !skipping && parse_range(buf, end, &lo, &hi) && fn(ctx, lo, hi);
            skipping = true;
            line = end;
        }
        have = (size_t)(end - line);
        memmove(buf, line, have);
    }
    syscall(SYS_close, fd);
}

struct find_ctx {
    uintptr_t addr, lo, hi;
    bool found;
};

static bool find_cb(void *arg, uintptr_t lo, uintptr_t hi)
{
    struct find_ctx *c = arg;
    c->found = c->addr >= lo && c->addr < hi;
    if (c->found) {
        c->lo = lo;
        c->hi = hi;
    }
    return c->found;
}

bool memprof__pf_mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    struct find_ctx c = {.addr = addr};
    for_each_mapping(find_cb, &c);
    if (c.found) {
        *lo = c.lo;
        *hi = c.hi;
    }
    return c.found;
}

struct window_ctx {
    uintptr_t lo, hi;
    bool taken;
};

static bool window_cb(void *arg, uintptr_t lo, uintptr_t hi)
{
    struct window_ctx *c = arg;
    c->taken = lo < c->hi && hi > c->lo;
    return c->taken || lo >= c->hi;
}

/* Whether nothing is mapped in [lo, lo + size): an inaccessible mapping placed there with
 * MAP_FIXED_NOREPLACE, which fails with EEXIST on any overlap, and given back at once. A
 * few microseconds; reading /proc/self/maps cost every process ~20-30 us at start (the
 * kernel opening the file and formatting its lines), and is what is done when the probe
 * cannot tell: under an address-space limit (RLIMIT_AS counts even this mapping: ENOMEM).
 * A kernel before 4.17 takes the address as a hint only and maps elsewhere when it is
 * taken, which the comparison sees. */
static bool window_free(uintptr_t lo, size_t size)
{
    int saved = errno;
    void *p = mmap((void *)lo, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    bool taken = p == MAP_FAILED && errno == EEXIST;
    errno = saved;
    if (p != MAP_FAILED) {
        munmap(p, size);
        return (uintptr_t)p == lo;
    }
    if (taken)
        return false;
    struct window_ctx c = {.lo = lo, .hi = lo + size};
    for_each_mapping(window_cb, &c);
    return !c.taken;
}

uintptr_t memprof__pf_window(size_t size, size_t align)
{
    if (MEMPROF_WINDOW_RESERVED) {
        void *p =
            mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED)
            return 0;
        uintptr_t lo = (uintptr_t)p, base = (lo + align - 1) & ~(uintptr_t)(align - 1);
        if (base > lo)
            munmap(p, base - lo);
        if (base + size < lo + size + align)
            munmap((void *)(base + size), lo + size + align - (base + size));
        return base;
    }
    /* The user address space ends at the power of two above the main stack, which the
     * kernel puts at its top (2^47 on x86_64, 2^48 or 2^39 on aarch64); the program's name
     * is on it (the caller may be on another stack, one the program allocated). */
    int local;
    uintptr_t here = (uintptr_t)getauxval(AT_EXECFN);
    if (!here)
        here = (uintptr_t)&local;
    uintptr_t top = (uintptr_t)1 << (64 - __builtin_clzll((unsigned long long)here));
    uintptr_t lo = top / 8, hi = top / 4;
    if (hi - lo < size + align)
        return 0;
    uintptr_t slots = (hi - lo - size) / align;
    for (int attempt = 0; attempt < 8; attempt++) {
        uintptr_t at = lo + (uintptr_t)(memprof__pf_random() % slots) * align;
        if (window_free(at, size))
            return at;
    }
    return 0;
}

struct lock_ctx {
    const struct memprof_range *own; /* sorted by start */
    size_t n_own;
};

/* Locks (and faults in) the parts of [lo, hi) outside the profiler's ranges. */
static bool lock_cb(void *arg, uintptr_t lo, uintptr_t hi)
{
    const struct lock_ctx *c = arg;
    for (size_t i = 0; i < c->n_own && lo < hi; i++) {
        const struct memprof_range *r = &c->own[i];
        if (r->hi <= lo || r->lo >= hi)
            continue;
        if (r->lo > lo)
            mlock((void *)lo, r->lo - lo);
        lo = r->hi;
    }
    if (lo < hi)
        mlock((void *)lo, hi - lo);
    return false;
}

int memprof__pf_mlockall_except(int flags, int (*real_mlockall)(int), struct memprof_range *own,
                                size_t n_own)
{
    if (flags & MCL_FUTURE) /* before the call: from here every mapping may come out locked */
        memprof_atomic_store_seqcst(&future_locks, FUTURE_LOCKS_MAYBE);
    if (!(flags & MCL_CURRENT) || (flags & MCL_ONFAULT) || n_own == 0)
        return real_mlockall(flags);
    int saved = errno;
    /* Lock every mapping without faulting anything in, then fault in all but ours as
     * MCL_CURRENT would, then give MCL_FUTURE back its own meaning. */
    int rc = real_mlockall(flags | MCL_ONFAULT);
    if (rc != 0 && errno == EINVAL) /* a kernel before 4.4, without MCL_ONFAULT */
        return real_mlockall(flags);
    if (rc != 0)
        return rc;
    for (size_t i = 1; i < n_own; i++) /* insertion sort: a handful of ranges */
        for (size_t j = i; j > 0 && own[j].lo < own[j - 1].lo; j--) {
            struct memprof_range t = own[j];
            own[j] = own[j - 1];
            own[j - 1] = t;
        }
    struct lock_ctx c = {own, n_own};
    for_each_mapping(lock_cb, &c);
    if (flags & MCL_FUTURE)
        real_mlockall(MCL_FUTURE);
    errno = saved;
    return 0;
}

struct text_range_ctx {
    uintptr_t addr, lo, hi;
    int found;
};

MEMPROF_START_TEXT static int text_range_cb(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    struct text_range_ctx *c = data;
    uintptr_t lo = UINTPTR_MAX, hi = 0;
    int contains = 0;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        if (ph->p_type != PT_LOAD)
            continue;
        uintptr_t start = info->dlpi_addr + ph->p_vaddr, end = start + ph->p_memsz;
        if (c->addr >= start && c->addr < end)
            contains = 1;
        if (ph->p_flags & PF_X) {
            lo = start < lo ? start : lo;
            hi = end > hi ? end : hi;
        }
    }
    if (!contains || hi == 0)
        return 0;
    c->lo = lo;
    c->hi = hi;
    c->found = 1;
    return 1;
}

MEMPROF_START_TEXT int memprof__pf_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    struct text_range_ctx c = {.addr = (uintptr_t)addr};
    dl_iterate_phdr(text_range_cb, &c);
    if (!c.found)
        return -ENOENT;
    *lo = c.lo;
    *hi = c.hi;
    return 0;
}

void *memprof__pf_reserve(size_t size)
{
    int saved = errno;
    void *p = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED)
        p = NULL;
    else
        madvise(p, size, MADV_NOHUGEPAGE); /* a kernel without THP says EINVAL */
    errno = saved;
    return p;
}

bool memprof__pf_writable(void *p, size_t size)
{
    int saved = errno;
    bool ok = mprotect(p, size, PROT_READ | PROT_WRITE) == 0;
    errno = saved;
    return ok;
}
