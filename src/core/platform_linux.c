/* SPDX-License-Identifier: MIT */
/*
 * Linux implementation of the core's platform primitives (platform.h): mmap-backed memory,
 * the monotonic clock, getrandom(), gettid() and the mapping that holds an address (stack
 * bounds).
 */
#define _GNU_SOURCE
#include "config.h"
#include "core/platform.h"

#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
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
    /* Both limits count a private writable mapping, reserved or not (RLIMIT_DATA since
     * Linux 4.7). */
    struct rlimit as, data;
    if (getrlimit(RLIMIT_AS, &as) != 0 || as.rlim_cur != RLIM_INFINITY ||
        getrlimit(RLIMIT_DATA, &data) != 0 || data.rlim_cur != RLIM_INFINITY)
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

/* Whether the /proc/self/maps line at [line, end), which starts "start-end ", holds addr. */
static bool line_holds(const char *line, const char *end, uintptr_t addr, uintptr_t *lo,
                       uintptr_t *hi)
{
    uintptr_t start = parse_hex(&line, end);
    if (line == end || *line++ != '-')
        return false;
    uintptr_t stop = parse_hex(&line, end);
    if (line == end || *line != ' ' || addr < start || addr >= stop)
        return false;
    *lo = start;
    *hi = stop;
    return true;
}

bool memprof__pf_mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi)
{
    /* Plain system calls into a stack buffer: no allocation, no lock. Only a line's head is
     * needed; one longer than the buffer (a long path) is judged by its head and the rest
     * skipped. */
    int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return false;
    char buf[1024];
    size_t have = 0;
    bool found = false, skipping = false;
    while (!found) {
        ssize_t n = read(fd, buf + have, sizeof buf - have);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        have += (size_t)n;
        char *line = buf, *end = buf + have, *nl;
        while (!found && (nl = memchr(line, '\n', (size_t)(end - line))) != NULL) {
            found = !skipping && line_holds(line, nl, addr, lo, hi);
            skipping = false;
            line = nl + 1;
        }
        if (!found && line == buf) { /* no line end in a full buffer */
            found = !skipping && line_holds(buf, end, addr, lo, hi);
            skipping = true;
            line = end;
        }
        have = (size_t)(end - line);
        memmove(buf, line, have);
    }
    close(fd);
    return found;
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
