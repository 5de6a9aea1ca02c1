/* SPDX-License-Identifier: MIT */
/*
 * The preload backend's profile files: written at exit (after the program's own atexit
 * handlers), and optionally every MEMPROF_INTERVAL seconds and whenever MEMPROF_SIGNAL
 * arrives. Periodic and signalled dumps run on a dedicated thread: a signal handler may only
 * post a semaphore, since taking a snapshot and writing a file are not async-signal-safe.
 * The thread carries the re-entrancy guard for life, so its own allocations are never
 * sampled. One mutex orders the dumps, so the exit-time profile is the last one written.
 *
 * A forked child that exits writes its own profile: to the %p expansion of its pid, or,
 * when the path has no %p, to "<path>.<pid>", so it never overwrites its parent's file. The
 * dump thread does not survive fork(); a child only writes at exit.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "api/values.h"
#include "common/atomic.h"
#include "core/engine.h"
#include "interpose/preload.h"
#include "memprof/memprof.h"

static struct memprof_dump_config cfg;
static pid_t pid_at_start;
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t wakeup;
static volatile sig_atomic_t exiting;

/* Expands %p and %% in the output template for the given pid; false if too long or bad. */
static bool expand_path(const char *tmpl, pid_t pid, char *out, size_t size)
{
    bool had_pid;
    if (!memprof__expand_path(tmpl, pid, out, size, &had_pid))
        return false;
    size_t o = strlen(out);
    if (!had_pid && pid != pid_at_start) {
        /* A forked child: never overwrite the parent's profile. */
        int n = snprintf(out + o, size - o, ".%d", (int)pid);
        if (n < 0 || (size_t)n >= size - o)
            return false;
    }
    return true;
}

/* Counts a failure that happened before memprof_snapshot_write() could count it. */
static void count_failure(void)
{
    memprof_atomic_add_relaxed(&memprof__engine.write_failures, 1);
}

/* Writes the profile once; `why` names the occasion in messages. Serialised by dump_lock.
 * Every failure is counted in write_failures and never fatal; the first one of the process
 * (a forked child inherits its parent's count) is reported in one line. */
static void dump(const char *why)
{
    static int reported;
    if (!cfg.output[0] || memprof__engine_readable() != 0)
        return;
    char path[PATH_MAX];
    if (!expand_path(cfg.output, getpid(), path, sizeof path)) {
        count_failure();
        if (!reported++)
            memprof__preload_say("memprof: MEMPROF_OUTPUT is too long; no profile written");
        return;
    }
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    if (rc == 0)
        rc = memprof_snapshot_write(snap, path, cfg.format); /* counts its own failures */
    else
        count_failure();
    memprof_free_snapshot(snap);
    if (rc != 0 && !reported++)
        memprof__preload_say("memprof: could not write the %s profile to %s: %s", why, path,
                             memprof_strerror(rc));
}

static void dump_at_exit(void)
{
    /* exit() is not a cancellation point, but writing the profile makes calls that are
     * (open, write, close): a thread with a pending pthread_cancel() that calls exit() would
     * be cancelled in here, holding dump_lock, and the process would not end. The state is
     * restored for whatever exit() runs next. */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    pthread_mutex_lock(&dump_lock);
    exiting = 1;
    dump("exit-time");
    pthread_mutex_unlock(&dump_lock);
    pthread_setcancelstate(cancel_state, NULL);
}

static void on_signal(int signo)
{
    (void)signo;
    int saved = errno;
    sem_post(&wakeup); /* async-signal-safe */
    errno = saved;
}

static void *dump_thread(void *arg)
{
    (void)arg;
    memprof__guard_enter(); /* this thread's allocations are the profiler's own */
    /* The program has no reason to cancel this thread, and must not leave dump_lock held
     * by trying. */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    for (;;) {
        int rc;
        if (cfg.interval_s) {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_sec += cfg.interval_s;
            while ((rc = sem_timedwait(&wakeup, &deadline)) != 0 && errno == EINTR)
                ;
        } else {
            while ((rc = sem_wait(&wakeup)) != 0 && errno == EINTR)
                ;
        }
        pthread_mutex_lock(&dump_lock);
        if (!exiting)
            dump(rc == 0 ? "signalled" : "periodic");
        pthread_mutex_unlock(&dump_lock);
    }
    return NULL;
}

static void atfork_child(void)
{
    /* The lock may have been held by the dump thread, which does not exist here. */
    pthread_mutex_init(&dump_lock, NULL);
}

void memprof__preload_dump_setup(const struct memprof_dump_config *c)
{
    cfg = *c;
    pid_at_start = getpid();
    pthread_atfork(NULL, NULL, atfork_child);
    /* Registered from the constructor, so it runs after the program's own atexit
     * handlers: the profile sees what is still live at the very end. */
    atexit(dump_at_exit);
    if (!cfg.output[0] || (!cfg.interval_s && !cfg.signo))
        return;
    sem_init(&wakeup, 0, 0);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    /* The thread must not keep the process from receiving the dump signal elsewhere, and
     * must not take signals meant for the program: block everything in it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, &attr, dump_thread, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
        memprof__preload_say("memprof: cannot start the profile-writing thread (%s); "
                             "MEMPROF_INTERVAL and MEMPROF_SIGNAL are ignored",
                             strerror(rc));
        return;
    }
    if (cfg.signo) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(cfg.signo, &sa, NULL);
    }
}
