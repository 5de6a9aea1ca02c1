/* SPDX-License-Identifier: MIT */
/*
 * The plugin's calls about the process's memory that must know of the profiler's reserved
 * address space, each forwarding to the next definition (glibc's):
 * - setrlimit(), setrlimit64(), prlimit() and prlimit64() seal the sample heap first when
 *   the call gives this process a finite RLIMIT_AS or RLIMIT_DATA (wrappers.h,
 *   memprof__before_rlimit()). The heap's reservation is address space in a private
 *   writable mapping, which both limits count, and a program that limits its own, as
 *   sandboxes and test harnesses do, would otherwise find its allocations failing long
 *   before its limit.
 * - mlockall(MCL_CURRENT) would fault in every page of the profiler's tables and sample
 *   heap, gigabytes never touched: memprof__engine_mlockall() locks them on fault instead.
 *
 * The file defines the four setters under their own names, so it is compiled without
 * _FILE_OFFSET_BITS: with it, glibc's headers would rename setrlimit to setrlimit64 here. On
 * the 64-bit targets the two structures are the same.
 */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdatomic.h>
#include <sys/mman.h>
#include <sys/resource.h>

#include "interpose/wrappers.h"

#define EXPORT __attribute__((visibility("default")))

_Static_assert(sizeof(struct rlimit) == sizeof(struct rlimit64), "64-bit rlimit layout");

typedef int set_fn(__rlimit_resource_t, const struct rlimit *);
typedef int set64_fn(__rlimit_resource_t, const struct rlimit64 *);
typedef int pr_fn(pid_t, enum __rlimit_resource, const struct rlimit *, struct rlimit *);
typedef int pr64_fn(pid_t, enum __rlimit_resource, const struct rlimit64 *, struct rlimit64 *);

/* The next definition of `name`, looked up on first use. NULL only if libc has none: the
 * caller then fails with ENOSYS. */
static void *next_fn(_Atomic(void *) *cache, const char *name)
{
    void *f = atomic_load_explicit(cache, memory_order_acquire);
    if (!f) {
        f = dlsym(RTLD_NEXT, name);
        atomic_store_explicit(cache, f, memory_order_release);
    }
    if (!f)
        errno = ENOSYS;
    return f;
}

static _Atomic(void *) next_set, next_set64, next_pr, next_pr64, next_mlockall;

/* The soft limit of a new limit, NULL if none is set. glibc declares the pointer nonnull,
 * but the system call answers NULL with EFAULT: the empty asm keeps the compiler from
 * dropping the test on the strength of the declaration. rlim_cur comes first in both
 * structures. */
static const rlim_t *soft_of(const void *rl)
{
    __asm__("" : "+r"(rl));
    return rl ? &((const struct rlimit *)rl)->rlim_cur : NULL;
}

EXPORT int setrlimit(__rlimit_resource_t resource, const struct rlimit *rl)
{
    set_fn *f = (set_fn *)next_fn(&next_set, "setrlimit");
    if (!f)
        return -1;
    memprof__before_rlimit(0, (int)resource, soft_of(rl));
    return f(resource, rl);
}

EXPORT int setrlimit64(__rlimit_resource_t resource, const struct rlimit64 *rl)
{
    set64_fn *f = (set64_fn *)next_fn(&next_set64, "setrlimit64");
    if (!f)
        return -1;
    memprof__before_rlimit(0, (int)resource, soft_of(rl));
    return f(resource, rl);
}

EXPORT int prlimit(pid_t pid, enum __rlimit_resource resource, const struct rlimit *rl,
                   struct rlimit *old)
{
    pr_fn *f = (pr_fn *)next_fn(&next_pr, "prlimit");
    if (!f)
        return -1;
    memprof__before_rlimit(pid, (int)resource, soft_of(rl));
    return f(pid, resource, rl, old);
}

EXPORT int prlimit64(pid_t pid, enum __rlimit_resource resource, const struct rlimit64 *rl,
                     struct rlimit64 *old)
{
    pr64_fn *f = (pr64_fn *)next_fn(&next_pr64, "prlimit64");
    if (!f)
        return -1;
    memprof__before_rlimit(pid, (int)resource, soft_of(rl));
    return f(pid, resource, rl, old);
}

EXPORT int mlockall(int flags)
{
    int (*f)(int) = (int (*)(int))next_fn(&next_mlockall, "mlockall");
    if (!f)
        return -1;
    return memprof__engine_mlockall(flags, f);
}
