/* SPDX-License-Identifier: MIT */
/*
 * `memprof run`'s watcher: names the frames of each process's profile as soon as the
 * process has written it, while the program still runs, instead of all of them after it
 * ended. A build started under `memprof run` writes a raw profile per process (compilers,
 * assemblers, shells); naming them all after the build made the user wait for it, on one
 * processor, when the build was over. The watcher does the same work during the run, on a
 * thread of this command at a lower priority (nice 10), so it mostly takes the time the
 * build leaves idle (its serial steps, waiting for the disk) and what is left at the end is
 * the last few files.
 *
 * How it knows a profile is complete: the plugin writes each profile to a temporary file
 * and renames it into place (api/output.c), so a file appearing under a name the template
 * gives (inotify's IN_MOVED_TO in the template's directory) holds a whole profile. Only
 * those events are watched: the watcher's own rewriting in place (one descriptor, no new
 * file: memprof_cli_symbolize_file()) raises none, so it never sees its own work.
 *
 * When it starts watching: after WATCH_DELAY_MS. Closing an inotify descriptor that has
 * watched makes the process wait for the kernel to retire the watch, a grace period that
 * took 5-17 ms at the end of two runs in three here (even with the watch removed first,
 * when the close follows at once) -- more than a short run's end takes to name its few files
 * itself, and paid by every script that runs `memprof run` many times. So a run that ends
 * within the delay never watches; a longer one lists what arrived meanwhile (what was not
 * there before the run) and then watches.
 *
 * What it leaves to the end (run_spool.c names what this did not): the main program's own
 * profile (its conversion to another format also makes the run's summary), files whose
 * event was lost (inotify's queue overflowed), and everything when the files may be written
 * more than once during the run (--interval, --signal) or cannot be listed. A process that
 * replaces its profile after the watcher named it (a program that exec()s one of the same
 * name, which writes under the same pid) leaves a new file, which is named again: the
 * watcher reads and rewrites one file through one descriptor, so it never writes over a
 * newer one. Modules whose files are missing are reported once, after the run, as before.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/inotify.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "run.h"

/* A file the watcher named (or could not read), as it left it. */
struct named {
    dev_t dev;
    ino_t ino;
    struct timespec mtim;
};

#define WATCH_DELAY_MS 500

struct run_watch {
    const struct tmpl_parts *tp;
    const struct pfiles *before;    /* the listing before the run */
    int inotify_fd, watch, stop[2]; /* inotify_fd: -1 until the watcher watches */
    pthread_t thread;
    bool started;
    pid_t main_pid;
    struct memprof_cli_symbolize s; /* the watcher's until it stops, then the run's */
    struct named *done;
    size_t ndone, cap;
};

struct run_watch *memprof_cli_watch_open(const struct run_options *o, const struct tmpl_parts *t,
                                         const struct pfiles *before)
{
    if (!t->ok || !memprof_cli_run_deferred(o) || o->interval || o->signal_s)
        return NULL;
    struct run_watch *w = calloc(1, sizeof *w);
    if (!w)
        return NULL;
    w->tp = t;
    w->before = before;
    w->inotify_fd = -1;
    if (pipe2(w->stop, O_CLOEXEC) != 0) {
        free(w);
        return NULL;
    }
    w->s = (struct memprof_cli_symbolize){
        .quiet = o->quiet, .format = o->format, .in_place = true, .hold_missing = true};
    return w;
}

/* Whether a file in this state (device, inode, modification time) is one the watcher left. */
static bool is_done(const struct run_watch *w, dev_t dev, ino_t ino, const struct timespec *mtim)
{
    for (size_t i = 0; i < w->ndone; i++)
        if (w->done[i].dev == dev && w->done[i].ino == ino &&
            w->done[i].mtim.tv_sec == mtim->tv_sec && w->done[i].mtim.tv_nsec == mtim->tv_nsec)
            return true;
    return false;
}

/* Names the frames of the profile that appeared as `name` in the template's directory. */
static void take(struct run_watch *w, const char *name)
{
    struct pfile f;
    char path[PATH_MAX];
    struct stat st;
    if (!memprof_cli_spool_match(w->tp, name, &f) || f.pid == (long)w->main_pid ||
        snprintf(path, sizeof path, "%s/%s", w->tp->dir, name) >= (int)sizeof path ||
        lstat(path, &st) != 0 || !S_ISREG(st.st_mode) ||
        is_done(w, st.st_dev, st.st_ino, &st.st_mtim))
        return;
    if (w->ndone == w->cap) {
        size_t cap = w->cap ? w->cap * 2 : 64;
        struct named *v = realloc(w->done, cap * sizeof *v);
        if (!v)
            return; /* left to the end */
        w->done = v;
        w->cap = cap;
    }
    st.st_ino = 0; /* set again when the file was opened */
    w->s.done = &st;
    memprof_cli_symbolize_file(path, &w->s);
    w->s.done = NULL;
    if (st.st_ino)
        w->done[w->ndone++] = (struct named){st.st_dev, st.st_ino, st.st_mtim};
}

static bool stopping(const struct run_watch *w)
{
    struct pollfd p = {.fd = w->stop[0], .events = POLLIN};
    return poll(&p, 1, 0) > 0;
}

/* Waits WATCH_DELAY_MS, then watches the directory and names what arrived meanwhile.
 * Returns false when the run ended first (or nothing can be watched). */
static bool start_watching(struct run_watch *w)
{
    struct pollfd stop = {.fd = w->stop[0], .events = POLLIN};
    int rc;
    while ((rc = poll(&stop, 1, WATCH_DELAY_MS)) < 0 && errno == EINTR)
        ;
    if (rc != 0)
        return false;
    int fd = inotify_init1(IN_CLOEXEC | IN_NONBLOCK);
    if (fd < 0)
        return false;
    w->inotify_fd = fd;
    if ((w->watch = inotify_add_watch(fd, w->tp->dir, IN_MOVED_TO)) < 0)
        return false;
    /* Listed after the watch began: a file renamed into place meanwhile is seen twice at
     * worst, and take() names it once. */
    struct pfiles now;
    memprof_cli_spool_scan(w->tp, &now);
    for (size_t i = 0; i < now.n && !stopping(w); i++)
        if (!memprof_cli_spool_existed(w->before, &now.v[i]))
            take(w, now.v[i].name);
    free(now.v);
    return true;
}

static void *watch_main(void *arg)
{
    struct run_watch *w = arg;
    /* The command's work, not the program's: the program's processes come first. */
    setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), 10);
    if (!start_watching(w))
        return NULL;
    union {
        struct inotify_event ev;
        char bytes[16384];
    } buf;
    struct pollfd fds[2] = {{.fd = w->inotify_fd, .events = POLLIN},
                            {.fd = w->stop[0], .events = POLLIN}};
    for (;;) {
        if (poll(fds, 2, -1) < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (fds[1].revents)
            break;
        ssize_t n = read(w->inotify_fd, buf.bytes, sizeof buf.bytes);
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n <= 0)
            break;
        /* A lost event (IN_Q_OVERFLOW) loses nothing: the end lists the directory. */
        for (ssize_t at = 0; at < n && !stopping(w);) {
            const struct inotify_event *ev = (const struct inotify_event *)(buf.bytes + at);
            at += (ssize_t)(sizeof *ev + ev->len);
            if (ev->len && (ev->mask & IN_MOVED_TO))
                take(w, ev->name);
        }
    }
    return NULL;
}

void memprof_cli_watch_start(struct run_watch *w, pid_t main_pid)
{
    if (!w)
        return;
    w->main_pid = main_pid;
    /* No signal is for the watcher: the forwarding handlers run on the main thread. */
    sigset_t all, old;
    sigfillset(&all);
    pthread_sigmask(SIG_SETMASK, &all, &old);
    w->started = pthread_create(&w->thread, NULL, watch_main, w) == 0;
    pthread_sigmask(SIG_SETMASK, &old, NULL);
}

struct memprof_cli_symbolize *memprof_cli_watch_stop(struct run_watch *w)
{
    if (!w)
        return NULL;
    if (w->started) {
        ssize_t rc;
        while ((rc = write(w->stop[1], "", 1)) < 0 && errno == EINTR)
            ;
        pthread_join(w->thread, NULL);
        w->started = false;
        /* Closing an inotify descriptor that still watches waits for the kernel to retire
         * the watch (a grace period); removed now, it is retired while the run's end is
         * written, and the close at the end is quicker (see the top of the file). */
        if (w->inotify_fd >= 0 && w->watch >= 0)
            inotify_rm_watch(w->inotify_fd, w->watch);
    }
    return &w->s;
}

bool memprof_cli_watch_named(const struct run_watch *w, const struct pfile *f)
{
    return w && is_done(w, f->dev, f->ino, &f->mtim);
}

void memprof_cli_watch_free(struct run_watch *w)
{
    if (!w)
        return;
    memprof_cli_symbolize_end(memprof_cli_watch_stop(w)); /* unless the run's end did */
    if (w->inotify_fd >= 0)
        close(w->inotify_fd);
    for (int i = 0; i < 2; i++)
        if (w->stop[i] >= 0)
            close(w->stop[i]);
    free(w->done);
    free(w);
}
