/* SPDX-License-Identifier: MIT */
/*
 * Descriptor-free readability probes for libunwind (the why is in unwind_probe.h).
 */
#define _GNU_SOURCE
#include "core/unwind_probe.h"

#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/compiler.h"
#include "core/imports.h"

/* Negative, so never a descriptor the kernel would accept, and not AT_FDCWD (-100). */
#define PROBE_FD (-4242)

/* One byte at addr is readable. errno is 0 on success: libunwind loops while errno is
 * EINTR, also after a successful write. */
static ssize_t probe(const void *addr)
{
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

void memprof__unwind_probes_install(const void *addr)
{
    static const struct memprof_import imports[] = {
        {"pipe2", (void *)probe_pipe2},     {"read", (void *)probe_read},
        {"write", (void *)probe_write},     {"close", (void *)probe_close},
        {"syscall", (void *)probe_syscall},
    };
    memprof__imports_patch_at(addr, imports, MEMPROF_ARRAY_SIZE(imports));
}
