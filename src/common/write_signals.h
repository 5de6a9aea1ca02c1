/* SPDX-License-Identifier: MIT */
/*
 * Writes that must not end the program: writing a profile larger than RLIMIT_FSIZE raises
 * SIGXFSZ, and a message to a stderr whose reader has gone raises SIGPIPE, and the default
 * action of both ends the process, whose exit status the profiler must never change.
 * memprof__write_signals_hold() blocks the two in the calling thread, so the write fails
 * with EFBIG or EPIPE instead; memprof__write_signals_release() takes back the ones the
 * write raised (not those already pending: they are the program's) and restores the mask.
 */
#ifndef MEMPROF_COMMON_WRITE_SIGNALS_H
#define MEMPROF_COMMON_WRITE_SIGNALS_H

#include <pthread.h>
#include <signal.h>
#include <time.h>

struct memprof_write_signals {
    sigset_t raised_here; /* the held signals that were not pending before */
    sigset_t old_mask;
};

static inline void memprof__write_signals_hold(struct memprof_write_signals *w)
{
    sigset_t held, pending;
    sigemptyset(&held);
    sigaddset(&held, SIGXFSZ);
    sigaddset(&held, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &held, &w->old_mask);
    w->raised_here = held;
    if (sigpending(&pending) == 0) {
        if (sigismember(&pending, SIGXFSZ) == 1)
            sigdelset(&w->raised_here, SIGXFSZ);
        if (sigismember(&pending, SIGPIPE) == 1)
            sigdelset(&w->raised_here, SIGPIPE);
    }
}

static inline void memprof__write_signals_release(struct memprof_write_signals *w)
{
    const struct timespec now = {0, 0};
    while (!sigisemptyset(&w->raised_here) && sigtimedwait(&w->raised_here, NULL, &now) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &w->old_mask, NULL);
}

#endif
