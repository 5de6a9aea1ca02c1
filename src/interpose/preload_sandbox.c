/* SPDX-License-Identifier: MIT */
/*
 * The plugin's prctl() and syscall(): the ways a program installs a seccomp filter on
 * itself (seccomp.h). Before a filter lands the engine does, in the calling thread, what
 * the filter may forbid later and learns which of its own system calls the filter forbids,
 * which it then does without (core/sandbox.h); every call is passed on unchanged.
 *
 * The next definitions (glibc's) are looked up in a constructor that runs after the
 * plugin's main one (the allocator is resolved by then); a call before that, from another
 * library's constructor, is made with the system call instruction itself, as glibc's
 * syscall() does, rather than with a dlsym() that could recurse into this function through
 * the allocator (a sample's seed is a syscall()).
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <unistd.h>

#include "common/atomic.h"
#include "core/backend.h"
#include "interpose/seccomp.h"

#define EXPORT __attribute__((visibility("default")))

typedef long syscall_fn(long, ...);
typedef int prctl_fn(int, ...);

static _Atomic(syscall_fn *) next_syscall MEMPROF_START_DATA;
static _Atomic(prctl_fn *) next_prctl MEMPROF_START_DATA;

__attribute__((constructor(102))) static void resolve_next(void)
{
    memprof_atomic_store_seqcst(&next_syscall, (syscall_fn *)dlsym(RTLD_NEXT, "syscall"));
    memprof_atomic_store_seqcst(&next_prctl, (prctl_fn *)dlsym(RTLD_NEXT, "prctl"));
}

/* The system call instruction, with glibc's convention for the result. */
static long raw_syscall(long nr, const long *a)
{
    long ret;
#if defined(__x86_64__)
    register long r10 __asm__("r10") = a[3];
    register long r8 __asm__("r8") = a[4];
    register long r9 __asm__("r9") = a[5];
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "a"(nr), "D"(a[0]), "S"(a[1]), "d"(a[2]), "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
#elif defined(__aarch64__)
    register long x8 __asm__("x8") = nr;
    register long x0 __asm__("x0") = a[0];
    register long x1 __asm__("x1") = a[1];
    register long x2 __asm__("x2") = a[2];
    register long x3 __asm__("x3") = a[3];
    register long x4 __asm__("x4") = a[4];
    register long x5 __asm__("x5") = a[5];
    __asm__ volatile("svc 0"
                     : "+r"(x0)
                     : "r"(x8), "r"(x1), "r"(x2), "r"(x3), "r"(x4), "r"(x5)
                     : "memory");
    ret = x0;
#else
#error "the preload plugin's syscall() supports x86_64 and aarch64"
#endif
    if ((unsigned long)ret > -4096ul) {
        errno = (int)-ret;
        return -1;
    }
    return ret;
}

static long forward_syscall(long nr, const long *a)
{
    syscall_fn *f = memprof_atomic_load_relaxed(&next_syscall);
    return f ? f(nr, a[0], a[1], a[2], a[3], a[4], a[5]) : raw_syscall(nr, a);
}

static int forward_prctl(int option, const unsigned long *a)
{
    prctl_fn *f = memprof_atomic_load_relaxed(&next_prctl);
    if (f)
        return f(option, a[0], a[1], a[2], a[3]);
    long args[6] = {option, (long)a[0], (long)a[1], (long)a[2], (long)a[3], 0};
    return (int)raw_syscall(SYS_prctl, args);
}

EXPORT long syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long rc = memprof__seccomp_syscall(nr, ap, forward_syscall);
    va_end(ap);
    return rc;
}

EXPORT int prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    int rc = memprof__seccomp_prctl(option, ap, forward_prctl);
    va_end(ap);
    return rc;
}
