/* SPDX-License-Identifier: MIT */
/*
 * The two ways a program installs a seccomp filter, as both backends see them: prctl(
 * PR_SET_SECCOMP, mode, filter), and the seccomp system call, for which glibc has no wrapper
 * (programs and libseccomp call syscall(SYS_seccomp, op, flags, filter), or syscall(
 * SYS_prctl, ...)). The plugin exports prctl() and syscall() (preload_sandbox.c), the GOT
 * start patches their slots (got.c); each call that installs a filter is bracketed by
 * memprof__engine_seccomp_before() and _after() (backend.h), so the engine gets ready for it
 * and learns what it forbids (core/sandbox.h). A result of -1 means the kernel refused the
 * filter; any other is taken as installed (with SECCOMP_FILTER_FLAG_TSYNC a failure returns
 * a thread id: that only costs the profiler calls it could still have made).
 * memprof__seccomp_syscall() and memprof__seccomp_prctl() are the whole of both backends'
 * hooks but for where the call goes next (the backend's forwarding function).
 */
#ifndef MEMPROF_INTERPOSE_SECCOMP_H
#define MEMPROF_INTERPOSE_SECCOMP_H

#include <linux/seccomp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

#include "core/backend.h"

/* The filter a prctl(option, mode, arg) call installs: true with *strict and *fprog set, or
 * false if the call installs none. */
static inline bool memprof__prctl_seccomp(long option, unsigned long mode, unsigned long arg,
                                          bool *strict, const void **fprog)
{
    if (option != PR_SET_SECCOMP || (mode != SECCOMP_MODE_STRICT && mode != SECCOMP_MODE_FILTER))
        return false;
    *strict = mode == SECCOMP_MODE_STRICT;
    *fprog = (const void *)arg;
    return true;
}

/* The same for syscall(nr, a[0], ..., a[5]). */
static inline bool memprof__syscall_seccomp(long nr, const long *a, bool *strict,
                                            const void **fprog)
{
    if (nr == SYS_prctl)
        return memprof__prctl_seccomp(a[0], (unsigned long)a[1], (unsigned long)a[2], strict,
                                      fprog);
    if (nr != SYS_seccomp || (a[0] != SECCOMP_SET_MODE_STRICT && a[0] != SECCOMP_SET_MODE_FILTER))
        return false;
    *strict = a[0] == SECCOMP_SET_MODE_STRICT;
    *fprog = (const void *)a[2];
    return true;
}

/* Where a hooked call goes on: glibc's syscall() or prctl() (or the instruction itself)
 * with the arguments read. */
typedef long memprof_syscall_forward(long nr, const long *a);
typedef int memprof_prctl_forward(int option, const unsigned long *a);

/* syscall(nr, ...) from its variable arguments `ap`: reads six after the number, as glibc's
 * own syscall() does whatever the caller passed, and forwards them. */
static inline long memprof__seccomp_syscall(long nr, va_list ap, memprof_syscall_forward *forward)
{
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    bool strict = false;
    const void *fprog = NULL;
    if (__builtin_expect(!memprof__syscall_seccomp(nr, a, &strict, &fprog), 1))
        return forward(nr, a);
    uint32_t marked = memprof__engine_seccomp_before(strict, fprog);
    long rc = forward(nr, a);
    memprof__engine_seccomp_after(marked, rc != -1);
    return rc;
}

/* prctl(option, ...) likewise: four arguments after the option, as glibc's prctl() reads. */
static inline int memprof__seccomp_prctl(int option, va_list ap, memprof_prctl_forward *forward)
{
    unsigned long a[4];
    for (int i = 0; i < 4; i++)
        a[i] = va_arg(ap, unsigned long);
    bool strict = false;
    const void *fprog = NULL;
    if (!memprof__prctl_seccomp(option, a[0], a[1], &strict, &fprog))
        return forward(option, a);
    uint32_t marked = memprof__engine_seccomp_before(strict, fprog);
    int rc = forward(option, a);
    memprof__engine_seccomp_after(marked, rc != -1);
    return rc;
}

#endif
