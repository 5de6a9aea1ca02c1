/* SPDX-License-Identifier: MIT */
/*
 * Descriptor-free readability probes for libunwind (the why is in unwind_probe.h).
 */
#define _GNU_SOURCE
#include "core/unwind_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/compiler.h"
#include "loader/imports.h"
#include "core/sandbox.h"

/* Negative, so never a descriptor the kernel would accept, and not AT_FDCWD (-100). */
#define PROBE_FD (-4242)

/* One byte at addr is readable. errno is 0 on success: libunwind loops while errno is
 * EINTR, also after a successful write. */
static ssize_t probe(const void *addr)
{
    if (!memprof__sys_allowed(MEMPROF_SYS_PROBE)) { /* under a seccomp filter (sandbox.h) */
        errno = EFAULT;
        return -1;
    }
    char byte;
    struct iovec local = {&byte, 1}, remote = {(void *)addr, 1};
    if (process_vm_readv(getpid(), &local, 1, &remote, 1, 0) == 1) {
        errno = 0;
        return 1;
    }
    errno = EFAULT;
    return -1;
}

static int probe_pipe2(int fds[2], int flags)
{
    (void)flags;
    fds[0] = fds[1] = PROBE_FD;
    return 0;
}

static ssize_t probe_read(int fd, void *buf, size_t n)
{
    if (fd != PROBE_FD)
        return read(fd, buf, n);
    errno = EAGAIN; /* nothing to drain: what libunwind takes for an open, empty pipe */
    return -1;
}

static ssize_t probe_write(int fd, const void *buf, size_t n)
{
    return fd == PROBE_FD ? probe(buf) : write(fd, buf, n);
}

static int probe_close(int fd)
{
    return fd == PROBE_FD ? 0 : close(fd);
}

/* syscall() takes at most six arguments after the number; reading six is what glibc's own
 * syscall() does whatever the caller passed. */
static long probe_syscall(long nr, ...)
{
    va_list ap;
    va_start(ap, nr);
    long a[6];
    for (int i = 0; i < 6; i++)
        a[i] = va_arg(ap, long);
    va_end(ap);
    if (nr == SYS_write && (int)a[0] == PROBE_FD)
        return probe((const void *)a[1]);
    return syscall(nr, a[0], a[1], a[2], a[3], a[4], a[5]);
}

/* The other system calls of libunwind's unwinds, which a seccomp filter the program
 * installed may forbid (sandbox.h): the probes' first step (mincore(), or msync() where
 * mincore() does not work) then finds the memory unreadable, so the walk ends there; the
 * signal mask its locks set is left alone (the profiler's own guard already keeps a signal
 * handler on this thread from sampling inside the unwind); debug files are not opened. */
static int probe_mincore(void *addr, size_t n, unsigned char *vec)
{
    if (memprof__sys_allowed(MEMPROF_SYS_PROBE))
        return mincore(addr, n, vec);
    errno = ENOMEM;
    return -1;
}

static int probe_msync(void *addr, size_t n, int flags)
{
    if (memprof__sys_allowed(MEMPROF_SYS_PROBE))
        return msync(addr, n, flags);
    errno = ENOMEM;
    return -1;
}

static int probe_sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    if (memprof__sys_allowed(MEMPROF_SYS_SIGMASK))
        return sigprocmask(how, set, old);
    if (old) /* restored later by a call that is skipped as well */
        sigemptyset(old);
    return 0;
}

static int probe_open(const char *path, int flags, ...)
{
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    if (memprof__sys_allowed(MEMPROF_SYS_PROC))
        return open(path, flags, mode);
    errno = EACCES;
    return -1;
}

void memprof__unwind_probes_install(const void *addr)
{
    static const struct memprof_import imports[] = {
        {"pipe2", (void *)probe_pipe2},     {"read", (void *)probe_read},
        {"write", (void *)probe_write},     {"close", (void *)probe_close},
        {"syscall", (void *)probe_syscall}, {"mincore", (void *)probe_mincore},
        {"msync", (void *)probe_msync},     {"sigprocmask", (void *)probe_sigprocmask},
        {"open", (void *)probe_open},
    };
    memprof__imports_patch_at(addr, imports, MEMPROF_ARRAY_SIZE(imports));
}
