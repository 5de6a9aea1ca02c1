/* SPDX-License-Identifier: MIT */
/*
 * The preload backend's profile files: written at exit (after the program's own atexit
 * handlers), and optionally every MEMPROF_INTERVAL seconds and whenever MEMPROF_SIGNAL
 * arrives. Periodic and signalled dumps run on a dedicated thread, the writer: a signal
 * handler may only post a semaphore, since taking a snapshot and writing a file are not
 * async-signal-safe. The writer carries the re-entrancy guard for life, so its own
 * allocations are never sampled. One mutex orders the dumps, so the exit-time profile is
 * the last one written.
 *
 * Descriptors. The program must never observe one of the profiler's: take the lowest free
 * descriptor its open() expected (the close(0); open() idiom), write to a descriptor the
 * program closed and reopened, keep open a file it lists or closes, or hand one to a
 * program it starts. So the writer has a descriptor table of its own: it calls
 * unshare(CLONE_FILES) when it starts and closes the copy of the program's descriptors
 * that gives it. Everything it opens (the temporary file, and the object and debug files
 * the symbolizer, libdw, keeps open for the life of the process) lives in that table, out
 * of the program's sight. The program's descriptors it does need -- MEMPROF_OUTPUT naming
 * /dev/stdout or /dev/stderr, and stderr for a message -- it takes for the moment of the
 * write with pidfd_getfd() (Linux 5.6); without that system call (an older kernel, a
 * seccomp filter that refuses it) it cannot reach them from a private table, so it keeps
 * sharing the program's, as before. When a writer runs, the exit-time profile is handed to
 * it as well (exit() waits for it), so that all of the plugin's symbolization happens in one
 * table: libdw's descriptors are numbers in the table that opened them.
 *
 * The exit-time profile is always written by a writer: without MEMPROF_INTERVAL and
 * MEMPROF_SIGNAL, exit() starts one for it, sharing the program's descriptor table (so the
 * files are where they were when exit() wrote the profile itself). The thread that calls
 * exit() may hold what writing needs: called from a signal handler (a daemon's SIGTERM
 * handler), it may have interrupted glibc's malloc holding an arena's lock (or, in a
 * single-threaded process, where malloc takes no lock, in the middle of changing the
 * arena), the loader's lock, or the resolver's. Written on that thread, the profile would
 * wait for itself for ever or corrupt the heap. The writer has an arena of its own, and
 * exit() waits for it only while it makes progress: when the writer has slept for
 * EXIT_STALL_S seconds without using the processor (it waits for something the exiting
 * thread holds), exit() gives up the profile, counts the failure, says so in one line and
 * lets the process end. Until the writer runs, the exiting thread's own allocations
 * (pthread_create()'s) come from the sample heap (MEMPROF_GUARD_PRIVATE, wrappers.h), not
 * from the arena it may hold.
 *
 * Threads of its own. The writer is the only thread the plugin adds, and only with
 * MEMPROF_INTERVAL or MEMPROF_SIGNAL (or for the moment of the exit-time profile). A process
 * with it is not single-threaded, which unshare(CLONE_NEWUSER) (unshare(1), bubblewrap) and
 * setns() into a user or mount namespace require: those calls are intercepted
 * (preload_namespaces.c) and stop the writer for their duration
 * (memprof__preload_writer_pause()): it finishes the dump it is writing, exits, and the
 * call waits until the kernel has let the thread go; then a new writer starts.
 *
 * A forked child that exits writes its own profile: to the %p expansion of its pid, or,
 * when the path has no %p, to "<path>.<pid>", so it never overwrites its parent's file. The
 * writer does not survive fork(); a child starts its own at exit (with a table of its own
 * if its parent had a writer). What the writer held at fork time: dump_lock is reset in the
 * child; the resolver's locks (and the loader's, taken inside them) are taken by the
 * resolver's own fork handlers (src/resolve/stacks.c), so the child never finds them held;
 * and a profile's stream writes only on the writer (src/api/output.c), so neither the
 * child's exit() nor the program's fflush(NULL) writes its buffered part to a descriptor of
 * the program's.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <stdio.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <sched.h>
#include <stddef.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

/* The same numbers on every architecture (the common system-call table of Linux 5.3+). */
#ifndef SYS_pidfd_open
#define SYS_pidfd_open 434
#endif
#ifndef SYS_close_range
#define SYS_close_range 436
#endif
#ifndef SYS_pidfd_getfd
#define SYS_pidfd_getfd 438
#endif

#include "api/output.h"
#include "api/owner.h"
#include "api/values.h"
#include "common/atomic.h"
#include "common/process_hooks.h"
#include "core/backend.h"
#include "core/sandbox.h"
#include "interpose/preload.h"
#include "memprof/memprof.h"

static struct memprof_dump_config cfg;
static pid_t pid_at_start MEMPROF_START_DATA;
static pthread_mutex_t dump_lock = PTHREAD_MUTEX_INITIALIZER;
static sem_t wakeup;    /* a dump is wanted: the dump signal, or exit() */
static sem_t exit_done; /* the writer has written the exit-time profile */
static volatile sig_atomic_t exiting;
static atomic_int exit_requested;
/* The process whose exit-time profile has been taken (at exit, or earlier on a runtime's
 * demand: memprof_write_exit_profile()), and how writing it went. */
static atomic_int exit_profile_pid;
static atomic_int exit_rc;
/* The writer: the process it runs in (0: none in this process), its thread, its thread id,
 * and whether its descriptor table is its own. `wanted`: this process or its parent before
 * a fork started one for MEMPROF_INTERVAL or MEMPROF_SIGNAL, so the writer exit() starts
 * has a table of its own too. Started and stopped under writer_ctl. */
static pthread_mutex_t writer_ctl = PTHREAD_MUTEX_INITIALIZER;
static pid_t writer_pid;
static pthread_t writer_thread;
static atomic_long writer_tid;
static atomic_bool writer_private;
static bool wanted;
/* Asking the writer to end (memprof__preload_writer_pause): STOP_ASKED, which the writer
 * acknowledges as STOP_TAKEN when it ends; a pause that gives up waiting takes the request
 * back only if it was not taken. */
enum { STOP_NONE, STOP_ASKED, STOP_TAKEN };
static atomic_int writer_stop;
/* The first failure of the process has been reported (a forked child inherits it). */
static int reported;

/* How long exit() waits for a writer that makes no progress, and how long a pause waits
 * for the dump in progress (a profile written to a FIFO waits for its reader). */
#define EXIT_STALL_S 3
#define PAUSE_WAIT_S 10

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
    memprof__engine_count_write_failure();
}

/* Writes the profile once; `why` names the occasion in messages. Serialised by dump_lock.
 * Every failure is counted in write_failures and never fatal; the first one of the process
 * (a forked child inherits its parent's count) is reported in one line. Returns 0 or the
 * negative errno of the failure. */
static int dump(const char *why)
{
    if (!cfg.output[0])
        return -ENOTSUP;
    int rc = memprof__engine_readable();
    if (rc != 0)
        return rc;
    /* The program installed a seccomp filter that would kill it for a system call writing
     * takes (core/sandbox.h): no profile, and one line if stderr may still be written. */
    if (!memprof__sys_allowed(MEMPROF_SYS_WRITE)) {
        count_failure();
        if (!reported++)
            memprof__preload_say("memprof: no %s profile: a seccomp filter of the program "
                                 "forbids system calls that writing it takes",
                                 why);
        return -EPERM;
    }
    char path[PATH_MAX];
    if (!expand_path(cfg.output, getpid(), path, sizeof path)) {
        count_failure();
        if (!reported++)
            memprof__preload_say("memprof: MEMPROF_OUTPUT is too long; no profile written");
        return -ENAMETOOLONG;
    }
    memprof_snapshot *snap = NULL;
    rc = memprof_get_snapshot(&snap);
    /* On the writer's own table, a descriptor name in MEMPROF_OUTPUT means the program's. */
    const struct memprof_output how = {.process_fd = memprof__preload_program_fd};
    if (rc == 0) /* counts its own failures */
        rc = memprof__snapshot_write_how(snap, path, cfg.format,
                                         memprof__preload_private_fds() ? &how : NULL);
    else
        count_failure();
    memprof_free_snapshot(snap);
    if (rc != 0 && !reported++)
        memprof__preload_say("memprof: could not write the %s profile to %s: %s", why, path,
                             memprof_strerror(rc));
    return rc;
}

bool memprof__preload_private_fds(void)
{
    /* Without the thread's id (a seccomp filter forbids asking: core/sandbox.h) any thread
     * may be the writer: the cautious answer, with which no descriptor is taken for one. */
    return memprof_atomic_load_seqcst(&writer_private) &&
           (!memprof__sys_allowed(MEMPROF_SYS_IDS) ||
            memprof_atomic_load_seqcst(&writer_tid) == syscall(SYS_gettid));
}

int memprof__preload_program_fd(int n)
{
    if (!memprof__sys_allowed(MEMPROF_SYS_WRITER) || !memprof__sys_allowed(MEMPROF_SYS_IDS))
        return -EPERM; /* a seccomp filter forbids the calls below (core/sandbox.h) */
    /* A pidfd of the process refers to its main thread, whose table is the program's. */
    int pidfd = (int)syscall(SYS_pidfd_open, getpid(), 0);
    if (pidfd < 0)
        return -errno;
    int fd = (int)syscall(SYS_pidfd_getfd, pidfd, n, 0); /* close-on-exec */
    int e = errno;
    close(pidfd);
    return fd < 0 ? -e : fd;
}

/* Gives the calling thread (the writer) a descriptor table of its own, emptied: see the top
 * of this file. Returns whether it did; false leaves it sharing the program's. */
static bool own_descriptor_table(void)
{
    /* Can this thread reach the program's descriptors from a table of its own? Asked without
     * opening anything: pidfd_open(0) is EINVAL and pidfd_getfd(-1) EBADF where they exist
     * and are allowed, ENOSYS or EPERM where not. */
    if (syscall(SYS_pidfd_open, 0, 0) != -1 || errno != EINVAL ||
        syscall(SYS_pidfd_getfd, -1, 0, 0) != -1 || errno != EBADF)
        return false;
    if (unshare(CLONE_FILES) != 0)
        return false;
    /* The copy holds the program's files open, which it may be waiting to see closed (a
     * pipe's reader waits for its end of file): close them all in this table. POSIX record
     * locks belong to the table that set them, so none of the program's is released. */
    if (syscall(SYS_close_range, 0u, ~0u, 0u) != 0) {
        struct rlimit lim;
        long max = getrlimit(RLIMIT_NOFILE, &lim) == 0 && lim.rlim_cur != RLIM_INFINITY &&
                           lim.rlim_cur < (1u << 20)
                       ? (long)lim.rlim_cur
                       : 1L << 20;
        for (long fd = 0; fd < max; fd++)
            close((int)fd);
    }
    return true;
}

static void *writer_main(void *arg)
{
    bool private_table = arg != NULL;
    memprof__guard_enter(); /* this thread's allocations are the profiler's own */
    /* The program has no reason to cancel this thread, and must not leave dump_lock held
     * by trying. */
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, NULL);
    memprof_atomic_store_seqcst(&writer_tid, syscall(SYS_gettid));
    memprof_atomic_store_seqcst(&writer_private, private_table && own_descriptor_table());
    for (;;) {
        int rc;
        if (cfg.interval_s && !memprof_atomic_load_seqcst(&exit_requested)) {
            struct timespec deadline;
            clock_gettime(CLOCK_REALTIME, &deadline);
            deadline.tv_sec += cfg.interval_s;
            while ((rc = sem_timedwait(&wakeup, &deadline)) != 0 && errno == EINTR)
                ;
        } else {
            while ((rc = sem_wait(&wakeup)) != 0 && errno == EINTR)
                ;
        }
        /* Asked to end (a pause), unless exit() wants its profile first. */
        int asked = STOP_ASKED;
        if (!memprof_atomic_load_seqcst(&exit_requested) &&
            memprof_atomic_cas_seqcst(&writer_stop, &asked, STOP_TAKEN))
            break;
        pthread_mutex_lock(&dump_lock);
        if (memprof_atomic_load_seqcst(&exit_requested)) {
            if (!exiting) {
                exiting = 1;
                memprof_atomic_store_seqcst(&exit_rc, dump("exit-time"));
            }
            pthread_mutex_unlock(&dump_lock);
            sem_post(&exit_done);
            continue;
        }
        if (!exiting)
            dump(rc == 0 ? "signalled" : "periodic");
        pthread_mutex_unlock(&dump_lock);
    }
    return NULL;
}

/* Starts the writer in this process unless it runs, with a descriptor table of its own if
 * `private_table`; false if it cannot be started. Called with writer_ctl held. Joinable, so
 * that a pause can wait for it to end. */
static bool start_writer(bool private_table)
{
    if (writer_pid == getpid())
        return true;
    /* The thread must not keep the process from receiving the dump signal elsewhere, and
     * must not take signals meant for the program: block everything in it. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    pthread_t t;
    int rc = pthread_create(&t, NULL, writer_main, private_table ? (void *)1 : NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (rc != 0) {
        errno = rc;
        return false;
    }
    writer_thread = t;
    writer_pid = getpid();
    if (private_table)
        wanted = true;
    return true;
}

static struct timespec in_seconds(clockid_t clock, long s)
{
    struct timespec t;
    clock_gettime(clock, &t);
    t.tv_sec += s;
    return t;
}

static long long ns_of(const struct timespec *t)
{
    return (long long)t->tv_sec * 1000000000 + t->tv_nsec;
}

/* The scheduler state of thread `tid` of this process ('R' running or runnable, 'S' asleep
 * in a wait it can be woken from -- a futex, a pipe --, 'D' waiting for the disk, ...),
 * '?' if it cannot be read. System calls, not glibc's open() and read(): cancellation
 * points, and the caller may have interrupted stdio. */
static char thread_state(long tid)
{
    if (!memprof__sys_allowed(MEMPROF_SYS_PROC))
        return '?';
    char path[64], buf[256];
    snprintf(path, sizeof path, "/proc/self/task/%ld/stat", tid);
    int fd = (int)syscall(SYS_openat, AT_FDCWD, path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return '?';
    long n = syscall(SYS_read, fd, buf, sizeof buf - 1);
    syscall(SYS_close, fd);
    if (n <= 0)
        return '?';
    buf[n] = 0;
    const char *end = strrchr(buf, ')'); /* the name in parentheses may hold anything */
    return end && end[1] == ' ' && end[2] ? end[2] : '?';
}

/* Waits for the writer `t` to post exit_done, for as long as it makes progress: gives up when for
 * EXIT_STALL_S seconds it has used no processor time and slept in a wait it can be woken from,
 * which is what a writer waiting for a lock the exiting thread holds does for ever. A writer that
 * waits for the disk ('D': reading debug information, writing under memory pressure) or for a
 * processor ('R') is waited for. Without its clock, waits as before. */
static bool wait_for_exit_profile(pthread_t t)
{
    clockid_t cpu;
    bool clocked = pthread_getcpuclockid(t, &cpu) == 0;
    long long used = -1, still_since = 0;
    for (;;) {
        struct timespec tick = in_seconds(CLOCK_REALTIME, 0);
        tick.tv_nsec += 100 * 1000 * 1000;
        if (tick.tv_nsec >= 1000000000) {
            tick.tv_sec++;
            tick.tv_nsec -= 1000000000;
        }
        if (sem_timedwait(&exit_done, &tick) == 0)
            return true;
        struct timespec c, now;
        if (errno == EINTR || !clocked || clock_gettime(cpu, &c) != 0)
            continue;
        clock_gettime(CLOCK_MONOTONIC, &now);
        /* Less than 50 us of processor time since the last look counts as none. Its kernel
         * id, once it has stored it (first thing it does): looked up here, not waited for
         * before, which slept 1 ms in every process writing a profile. */
        long tid = memprof_atomic_load_seqcst(&writer_tid);
        char state = tid ? thread_state(tid) : 'R';
        if (used < 0 || ns_of(&c) - used >= 50 * 1000 || (state != 'S' && state != '?')) {
            used = ns_of(&c);
            still_since = ns_of(&now);
        } else if (ns_of(&now) - still_since >= (long long)EXIT_STALL_S * 1000000000) {
            return false;
        }
    }
}

/* Hands the exit-time profile to a writer (started for it if none runs) and waits for it;
 * false if no writer could be started. */
static bool exit_profile_on_writer(void)
{
    /* Under a seccomp filter (core/sandbox.h) no writer is started: dump() in the exiting
     * thread then only says why there is no profile, or writes it. */
    if (!memprof__sys_allowed(MEMPROF_SYS_WRITE) || !memprof__sys_allowed(MEMPROF_SYS_WRITER))
        return false;
    /* A pause in progress holds writer_ctl: wait for it, a little. */
    struct timespec until = in_seconds(CLOCK_REALTIME, 1);
    if (pthread_mutex_timedlock(&writer_ctl, &until) != 0)
        return false;
    bool started = start_writer(wanted);
    pthread_t t = writer_thread;
    pthread_mutex_unlock(&writer_ctl);
    if (!started)
        return false;
    memprof_atomic_store_seqcst(&exit_requested, 1);
    sem_post(&wakeup);
    if (!wait_for_exit_profile(t)) {
        memprof_atomic_store_seqcst(&exit_rc, -ETIMEDOUT);
        count_failure();
        if (!reported++)
            memprof__preload_say("memprof: no exit-time profile: its writing thread made no "
                                 "progress for %d s (exit() was called where it holds what "
                                 "writing needs, such as from a signal handler)",
                                 EXIT_STALL_S);
    }
    return true;
}

bool memprof__preload_writer_pause(void)
{
    if (writer_pid != getpid())
        return false; /* none in this process (a fork child, or no MEMPROF_INTERVAL) */
    pthread_mutex_lock(&writer_ctl);
    if (writer_pid != getpid()) {
        pthread_mutex_unlock(&writer_ctl);
        return false;
    }
    memprof_atomic_store_seqcst(&writer_stop, STOP_ASKED);
    sem_post(&wakeup);
    /* It ends when the dump it is writing is written. */
    struct timespec until = in_seconds(CLOCK_REALTIME, PAUSE_WAIT_S);
    if (pthread_timedjoin_np(writer_thread, NULL, &until) != 0) {
        int asked = STOP_ASKED;
        if (memprof_atomic_cas_seqcst(&writer_stop, &asked, STOP_NONE)) {
            /* Still writing: leave it be (the call will see it), and it carries on. */
            pthread_mutex_unlock(&writer_ctl);
            return false;
        }
        pthread_join(writer_thread, NULL); /* it has just taken the request: ending */
    }
    /* pthread_join() returns when the thread's id is released, before the kernel has taken
     * the thread out of the process; until it has, the process is not single-threaded. */
    long tid = memprof_atomic_load_seqcst(&writer_tid);
    for (int i = 0; i < 10000 && syscall(SYS_tgkill, getpid(), tid, 0) == 0; i++) {
        struct timespec tick = {0, 100 * 1000};
        nanosleep(&tick, NULL);
    }
    writer_pid = 0;
    memprof_atomic_store_seqcst(&writer_tid, 0);
    memprof_atomic_store_seqcst(&writer_private, false);
    memprof_atomic_store_seqcst(&writer_stop, STOP_NONE);
    return true; /* writer_ctl stays held until memprof__preload_writer_resume() */
}

void memprof__preload_writer_resume(void)
{
    if (!start_writer(true))
        memprof__preload_say("memprof: cannot restart the profile-writing thread (%s); "
                             "MEMPROF_INTERVAL and MEMPROF_SIGNAL are ignored from now on",
                             strerror(errno));
    pthread_mutex_unlock(&writer_ctl);
}

/* Whether this process's exit-time profile would hold nothing worth a file
 * (MEMPROF_WRITE_EMPTY=0): no sample was ever taken, so every estimate is zero, and no
 * periodic dump wrote a file the exit-time profile would have to bring up to date. Under
 * memprof run most of a build's or a script's processes (the shell, true, echo) take no
 * sample at the default rate, and writing their files was most of what they paid for the
 * profiler (doc/performance.md, Start-up). */
static bool empty_and_unwanted(pid_t me)
{
    if (cfg.write_empty || cfg.interval_s || cfg.signo || me == cfg.write_empty_pid)
        return false;
    /* The sample count alone: the whole of memprof_get_stats() (locks, table walks) would
     * touch pages this process has not touched yet. */
    return memprof__engine_samples() == 0;
}

/* Takes the exit-time profile, once per process: at exit, or at a runtime's end before it
 * frees its data (memprof_write_exit_profile()). Returns as that function. */
MEMPROF_START_TEXT static int exit_profile(void)
{
    if (!cfg.output[0])
        return -ENOTSUP;
    /* Without getpid() (a seccomp filter: core/sandbox.h), the process the plugin started in. */
    pid_t me = memprof__sys_allowed(MEMPROF_SYS_IDS) ? getpid() : pid_at_start;
    if (memprof_atomic_exchange_acqrel(&exit_profile_pid, (int)me) == (int)me)
        return -EALREADY;
    int rc = memprof__engine_readable();
    if (rc != 0)
        return rc;
    if (empty_and_unwanted(me))
        return 0;
    /* exit() is not a cancellation point, but writing the profile makes calls that are
     * (open, write, close; sem_timedwait while the writer writes): a thread with a pending
     * pthread_cancel() that calls exit() would be cancelled in here, holding dump_lock, and
     * the process would not end. The state is restored for whatever exit() runs next. */
    int cancel_state;
    pthread_setcancelstate(PTHREAD_CANCEL_DISABLE, &cancel_state);
    /* From here this thread's allocations (starting the writer) avoid the real allocator,
     * which a signal handler calling exit() may have interrupted; a zero countdown sends
     * every one of them to the cold path, where the guard is looked at. */
    uint8_t guard = memprof__tls.guard;
    memprof__tls.guard = MEMPROF_GUARD_PRIVATE;
    memprof__tls.countdown = 0;
    if (!exit_profile_on_writer()) {
        /* No thread can be started (a limit on processes, a sandbox): write it here. */
        pthread_mutex_lock(&dump_lock);
        exiting = 1;
        memprof_atomic_store_seqcst(&exit_rc, dump("exit-time"));
        pthread_mutex_unlock(&dump_lock);
    }
    memprof__guard_leave(guard);
    pthread_setcancelstate(cancel_state, NULL);
    return memprof_atomic_load_seqcst(&exit_rc);
}

MEMPROF_START_TEXT static void dump_at_exit(void)
{
    (void)exit_profile();
}

static void on_signal(int signo)
{
    (void)signo;
    int saved = errno;
    sem_post(&wakeup); /* async-signal-safe */
    errno = saved;
}

static void atfork_child(void)
{
    /* The lock may have been held by the writer, which does not exist here; a child whose
     * parent had one starts its own at exit (`wanted` stays). */
    pthread_mutex_init(&dump_lock, NULL);
    pthread_mutex_init(&writer_ctl, NULL);
    sem_init(&wakeup, 0, 0);
    sem_init(&exit_done, 0, 0);
    writer_pid = 0;
    memprof_atomic_store_seqcst(&writer_tid, 0);
    memprof_atomic_store_seqcst(&writer_private, false);
    memprof_atomic_store_seqcst(&writer_stop, STOP_NONE);
    /* The child's own exit-time profile is still to be written, also when the fork came
     * after the parent's. */
    exiting = 0;
    memprof_atomic_store_seqcst(&exit_requested, 0);
}

MEMPROF_START_TEXT void memprof__preload_dump_setup(const struct memprof_dump_config *c)
{
    memcpy(&cfg, c, offsetof(struct memprof_dump_config, output) + strlen(c->output) + 1);
    /* The format a name's extension gives is the template's: a forked child's "<path>.<pid>"
     * (expand_path()) ends in its pid, and would otherwise be written as text. */
    int by_name = cfg.format == MEMPROF_FORMAT_AUTO ? memprof_format_from_path(cfg.output) : 0;
    if (by_name > 0)
        cfg.format = (memprof_format)by_name;
    pid_at_start = getpid();
    sem_init(&wakeup, 0, 0);
    sem_init(&exit_done, 0, 0);
    memprof_atfork(NULL, NULL, atfork_child);
    /* Registered from the constructor, so it runs after the program's own atexit
     * handlers: the profile sees what is still live at the very end. */
    memprof_atexit(dump_at_exit);
    if (!cfg.output[0])
        return;
    memprof__set_exit_profile_writer(exit_profile);
    struct sigaction old;
    if (cfg.signo && sigaction(cfg.signo, NULL, &old) == 0 && !(old.sa_flags & SA_SIGINFO) &&
        old.sa_handler == SIG_IGN) {
        /* The program started with the signal ignored (nohup, trap '' USR2, a supervisor)
         * and relies on a stray one doing nothing: a handler would interrupt its sleep() and
         * other waits. Leave it ignored, and say why no profile comes of it. */
        memprof__preload_say("memprof: ignoring MEMPROF_SIGNAL: signal %d (%s) is ignored in "
                             "this process, and stays so; no profile is written on it",
                             cfg.signo, strsignal(cfg.signo));
        cfg.signo = 0;
    }
    if (!cfg.interval_s && !cfg.signo)
        return;
    pthread_mutex_lock(&writer_ctl);
    bool started = start_writer(true);
    pthread_mutex_unlock(&writer_ctl);
    if (!started) {
        memprof__preload_say("memprof: cannot start the profile-writing thread (%s); "
                             "MEMPROF_INTERVAL and MEMPROF_SIGNAL are ignored",
                             strerror(errno));
        return;
    }
    if (cfg.signo) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_signal;
        /* The program's interrupted system calls are restarted where the kernel can. */
        sa.sa_flags = SA_RESTART;
        sigemptyset(&sa.sa_mask);
        sigaction(cfg.signo, &sa, NULL);
    }
}
