/* SPDX-License-Identifier: MIT */
/*
 * Linux implementation of the core's platform primitives (platform.h): mmap-backed memory,
 * the monotonic clock, getrandom(), gettid() and the calling thread's stack bounds.
 */
#define _GNU_SOURCE
#include "config.h"
#include "core/platform.h"

#include <errno.h>
#include <link.h>
#include <pthread.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#if HAVE_GETRANDOM
#include <sys/random.h>
#endif

void *memprof__pf_map(size_t size)
{
    void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void memprof__pf_unmap(void *p, size_t size)
{
    if (p)
        munmap(p, size);
}

void *memprof__pf_map_sparse(size_t size)
{
    struct rlimit as;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur != RLIM_INFINITY)
        return NULL;
    void *p = memprof__pf_map(size);
    if (p)
        madvise(p, size, MADV_NOHUGEPAGE); /* advisory: a kernel without THP says EINVAL */
    return p;
}

void memprof__pf_release(void *p, size_t size)
{
    int saved = errno;
    madvise(p, size, MADV_DONTNEED);
    errno = saved;
}

uint64_t memprof__pf_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t memprof__pf_thread_id(void)
{
    return (uint64_t)syscall(SYS_gettid);
}

uint64_t memprof__pf_random(void)
{
    uint64_t v = 0;
#if HAVE_GETRANDOM
    /* GRND_NONBLOCK: early in boot the pool may not be ready; never block a malloc. */
    if (getrandom(&v, sizeof v, GRND_NONBLOCK) == (ssize_t)sizeof v)
        return v;
#endif
    int local;
    return memprof__pf_now_ns() ^ ((uint64_t)(uintptr_t)&local << 16) ^ (uint64_t)getpid();
}

uintptr_t memprof__pf_stack_top(void)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    if (pthread_getattr_np(pthread_self(), &attr) != 0)
        return 0;
    if (pthread_attr_getstack(&attr, &addr, &size) != 0)
        size = 0;
    pthread_attr_destroy(&attr);
    return size ? (uintptr_t)addr + size : 0;
}

struct text_range_ctx {
    uintptr_t addr, lo, hi;
    int found;
};

static int text_range_cb(struct dl_phdr_info *info, size_t size, void *data)
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

int memprof__pf_text_range(const void *addr, uintptr_t *lo, uintptr_t *hi)
{
    struct text_range_ctx c = {.addr = (uintptr_t)addr};
    dl_iterate_phdr(text_range_cb, &c);
    if (!c.found)
        return -ENOENT;
    *lo = c.lo;
    *hi = c.hi;
    return 0;
}
