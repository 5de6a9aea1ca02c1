/* SPDX-License-Identifier: MIT */
/*
 * The two ways a program installs a seccomp filter, as both backends see them: prctl(
 * PR_SET_SECCOMP, mode, filter), and the seccomp system call, for which glibc has no wrapper
 * (programs and libseccomp call syscall(SYS_seccomp, op, flags, filter), or syscall(
 * SYS_prctl, ...)). The plugin exports prctl() and syscall() (preload_sandbox.c), the GOT
 * start patches their slots (got.c); each call that installs a filter is bracketed by
 * memprof__engine_seccomp_before() and _after() (engine.h), so the engine gets ready for it
 * and learns what it forbids (core/sandbox.h). A result of -1 means the kernel refused the
 * filter; any other is taken as installed (with SECCOMP_FILTER_FLAG_TSYNC a failure returns
 * a thread id: that only costs the profiler calls it could still have made).
 */
#ifndef MEMPROF_INTERPOSE_SECCOMP_H
#define MEMPROF_INTERPOSE_SECCOMP_H

#include <linux/seccomp.h>
#include <stdbool.h>
#include <sys/prctl.h>
#include <sys/syscall.h>

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

#endif
