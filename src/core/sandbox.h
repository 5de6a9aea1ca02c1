/* SPDX-License-Identifier: MIT */
/*
 * The profiler's system calls under a seccomp filter the program installs on itself.
 *
 * A sandboxed program (OpenSSH's privilege-separated child, daemons using libseccomp)
 * installs a filter that allows the system calls it needs and kills the process (SIGSYS)
 * for any other. glibc's allocator needs only memory calls (brk, mmap, munmap, mprotect,
 * madvise, futex), which the profiler's tables and sample heap also make and a filter for
 * a program that allocates must allow; but the sampled path and the exit-time profile make
 * others:
 * getrandom, gettid and getpid for a new thread's seed, prctl(PR_GET_NAME) for the thread
 * registry, reads of /proc/self/maps for frame-pointer walks, libunwind's memory probes and
 * signal mask, and everything writing a file takes. One of them after such a filter kills
 * the program.
 *
 * So the backends intercept the two ways of installing a filter, prctl(PR_SET_SECCOMP) and
 * the seccomp system call through syscall() (glibc has no wrapper; libseccomp uses
 * syscall()), and before the filter lands the engine does its one-time work in the calling
 * thread (engine.h) and runs the filter here, a classic-BPF interpreter, on each system
 * call the profiler may make, with the arguments the profiler passes. A call the filter
 * would answer with anything but ALLOW, LOG or ERRNO (KILL_PROCESS, KILL_THREAD, TRAP,
 * TRACE, USER_NOTIF) is forbidden from then on, for the whole process: the profiler skips
 * it or does without (a seed from entropy drawn before the filter, a thread without its id
 * or name, a stack walk without /proc, no exit-time profile). A call answered with ERRNO is
 * still made: it fails, and every such call already copes with failure. Filters stack (each
 * further one can only forbid more), so the forbidden set only grows, except that a filter
 * the kernel refuses gives back what it added.
 *
 * Per process, not per thread: a filter binds only the thread that installs it and the
 * threads that thread starts later (all threads with SECCOMP_FILTER_FLAG_TSYNC), but the
 * profiler cannot tell which thread a filter binds, so all of them do without.
 *
 * Not seen: a filter inherited from the parent process or installed before the profiler
 * started (systemd's SystemCallFilter=, a container runtime's profile), and one installed
 * with a raw system call instruction. Those filters are commonly denylists answering with
 * ERRNO, which the profiler survives.
 */
#ifndef MEMPROF_CORE_SANDBOX_H
#define MEMPROF_CORE_SANDBOX_H

#include <stdbool.h>
#include <stdint.h>

#include "common/atomic.h"
#include "common/compiler.h"

/* The groups of system calls the profiler makes, each allowed or forbidden as a whole. */
enum memprof_sys {
    MEMPROF_SYS_RANDOM,      /* getrandom(): a new thread's seed */
    MEMPROF_SYS_IDS,         /* gettid(), getpid(): seeds, the thread registry */
    MEMPROF_SYS_THREAD_NAME, /* prctl(PR_GET_NAME): the thread registry */
    MEMPROF_SYS_PROC,        /* openat(), read(), close(): /proc files, libunwind's open() */
    MEMPROF_SYS_PROBE,       /* libunwind's memory probes: mincore(), msync(),
                              * process_vm_readv() of getpid() */
    MEMPROF_SYS_SIGMASK,     /* rt_sigprocmask(): libunwind's locks */
    MEMPROF_SYS_SAY,         /* fstat() and write() of stderr: the plugin's messages */
    MEMPROF_SYS_WRITE,       /* writing a profile: symbolization (files, libraries libdw
                              * loads), the temporary file, rename, signals held */
    MEMPROF_SYS_WRITER,      /* the plugin's profile-writing thread: its start (clone3,
                              * clone), its descriptor table (unshare, close_range), the
                              * program's descriptors (pidfd_open, pidfd_getfd) */
    MEMPROF_SYS_COUNT
};

/* Bit g set: group g is forbidden. Only ever grows, but for a refused filter's bits. */
extern MEMPROF_INTERNAL _Atomic uint32_t memprof__sys_forbidden;

/* Whether the profiler may make the system calls of group g. */
static inline bool memprof__sys_allowed(enum memprof_sys g)
{
    return !(memprof_atomic_load_relaxed(&memprof__sys_forbidden) & (1u << g));
}

/* The groups a filter forbids: `strict` for SECCOMP_MODE_STRICT (only read, write, exit
 * and rt_sigreturn are left), else `fprog` is the filter's struct sock_fprog. A filter the
 * interpreter cannot read forbids everything (the kernel will refuse it anyway). */
MEMPROF_INTERNAL uint32_t memprof__sandbox_forbids(bool strict, const void *fprog);

#endif
