/* SPDX-License-Identifier: MIT */
/*
 * The plugin's unshare() and setns(), each forwarding to the next definition (glibc's).
 *
 * The kernel lets only a single-threaded process enter a new user namespace
 * (unshare(CLONE_NEWUSER), setns() to a user namespace: EINVAL otherwise) and only a process
 * whose threads do not share its filesystem information join another mount namespace
 * (setns() to a mount namespace). unshare(1), bubblewrap and other sandboxes do this from a
 * single-threaded program, which under MEMPROF_INTERVAL or MEMPROF_SIGNAL is not
 * single-threaded any more: the plugin's profile-writing thread (preload_dump.c) would make
 * the call fail. So around these calls the writer is stopped (it finishes the dump in
 * progress) and started again afterwards, whatever the call's outcome; calls that do not
 * need a single thread (other namespaces, CLONE_FILES, CLONE_FS, clone() into new
 * namespaces) pass straight through, and so does every call in a process without a writer.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <sched.h>
#include <stdbool.h>

#include "interpose/preload.h"
#include "interpose/preload_next.h"

#define EXPORT __attribute__((visibility("default")))

static _Atomic(void *) next_unshare, next_setns;

/* After a call made with the writer stopped (`paused`): starts it again; the call's errno
 * stays. */
static int resumed(bool paused, int rc)
{
    int e = errno;
    if (paused)
        memprof__preload_writer_resume();
    errno = e;
    return rc;
}

EXPORT int unshare(int flags)
{
    int (*f)(int) = (int (*)(int))memprof__preload_next(&next_unshare, "unshare");
    if (!f)
        return -1;
    /* CLONE_NEWUSER implies CLONE_THREAD; these three need the caller to be alone. */
    bool paused = (flags & (CLONE_NEWUSER | CLONE_THREAD | CLONE_SIGHAND | CLONE_VM)) &&
                  memprof__preload_writer_pause();
    return resumed(paused, f(flags));
}

EXPORT int setns(int fd, int nstype)
{
    int (*f)(int, int) = (int (*)(int, int))memprof__preload_next(&next_setns, "setns");
    if (!f)
        return -1;
    /* 0: whatever namespace fd is (a pidfd may name several). */
    bool paused = (nstype == 0 || (nstype & (CLONE_NEWUSER | CLONE_NEWNS))) &&
                  memprof__preload_writer_pause();
    return resumed(paused, f(fd, nstype));
}
