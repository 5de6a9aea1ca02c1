/* SPDX-License-Identifier: MIT */
/*
 * The child-process harness of the hardening programs that fork or run themselves again
 * (fork_busy.c, fork_dumps.c, handler_exit.c, handler_loader.c, descriptors.c, signals.c):
 * running this program again with one of its descriptors on a pipe and reading what
 * arrives, and reaping a set of children that must all end, with a deadline after which
 * those left count as hung and are killed. The deadline is no timing assertion: a child of these
 * programs that has not ended after tens of seconds is stuck (waiting for a lock nobody will
 * release), not slow, and the run reports how many were.
 */
#ifndef MEMPROF_TESTS_CHILDREN_H
#define MEMPROF_TESTS_CHILDREN_H

#include "prog.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static inline double children_now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* Forks a child that calls setup(arg) (may be NULL), puts the write end of a pipe on its
 * descriptor `target` and execs argv; reads the pipe to its end into buf (at most cap - 1
 * bytes, NUL-terminated) and returns the child's wait status. */
static inline int children_run_capture(char *const argv[], int target, void (*setup)(void *),
                                       void *arg, char *buf, size_t cap)
{
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork");
    if (pid == 0) {
        if (setup)
            setup(arg);
        dup2(p[1], target);
        execv(argv[0], argv);
        _exit(127);
    }
    close(p[1]);
    size_t len = 0;
    ssize_t r;
    while (len < cap - 1 && (r = read(p[0], buf + len, cap - 1 - len)) != 0) {
        if (r < 0 && errno == EINTR)
            continue;
        CHECK(r > 0, "read");
        len += (size_t)r;
    }
    buf[len] = 0;
    close(p[0]);
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    return status;
}

/* Called by children_reap() for each child that ended: its index in the array, pid and wait
 * status. */
typedef void children_ended_fn(int index, pid_t pid, int status, void *ctx);

/* Waits for the n children in pids[] to end, for at most hang_s seconds after the call,
 * calling ended() for each and setting its entry to 0; then kills and reaps the ones left,
 * whose entries stay, and returns how many there were (hung). */
static inline int children_reap(pid_t *pids, int n, double hang_s, children_ended_fn *ended,
                                void *ctx)
{
    int left = 0;
    for (int c = 0; c < n; c++)
        left += pids[c] != 0;
    double start = children_now_s();
    while (left > 0 && children_now_s() - start < hang_s) {
        int status;
        pid_t r = waitpid(-1, &status, WNOHANG);
        if (r <= 0) {
            struct timespec tick = {0, 1000 * 1000};
            nanosleep(&tick, NULL);
            continue;
        }
        int c = 0;
        while (c < n && pids[c] != r)
            c++;
        CHECK(c < n, "an unknown child %d", (int)r);
        pids[c] = 0;
        left--;
        ended(c, r, status, ctx);
    }
    for (int c = 0; c < n; c++)
        if (pids[c]) {
            kill(pids[c], SIGKILL);
            waitpid(pids[c], NULL, 0);
        }
    return left;
}

/* What a child profiled through the GOT start (which writes no profile at exit) does to leave
 * its profile where children_check_profile() looks: a snapshot written as text to
 * PREFIX.<pid>. Exits with status 2 if it cannot. */
static inline void children_write_profile(const char *prefix)
{
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", prefix, (int)getpid());
    memprof_snapshot *s = NULL;
    if (memprof_get_snapshot(&s) != 0 || memprof_snapshot_write(s, path, MEMPROF_FORMAT_TEXT) != 0)
        _exit(2);
    memprof_free_snapshot(s);
}

/* The check of a child that must exit 0 and, if `prefix` is set, leave its profile in
 * PREFIX.<pid> (not empty; removed here). Returns the number of failures, each said on
 * stderr. */
static inline int children_check_profile(pid_t pid, int status, const char *prefix)
{
    int failed = 0;
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "child %d ended with status %#x\n", (int)pid, status);
        failed++;
    }
    if (!prefix)
        return failed;
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", prefix, (int)pid);
    struct stat st;
    if (stat(path, &st) != 0 || st.st_size == 0) {
        fprintf(stderr, "child %d left no profile %s\n", (int)pid, path);
        failed++;
    }
    unlink(path);
    return failed;
}

struct children_checked {
    const char *prefix;
    int failed;
};

static inline void children_checked_ended(int index, pid_t pid, int status, void *ctx)
{
    (void)index;
    struct children_checked *c = ctx;
    c->failed += children_check_profile(pid, status, c->prefix);
}

/* children_reap() with children_check_profile() of each child that ended: returns how many
 * hung, and sets *failed to the failures of the others. */
static inline int children_reap_checked(pid_t *pids, int n, double hang_s, const char *prefix,
                                        int *failed)
{
    struct children_checked c = {prefix, 0};
    int hung = children_reap(pids, n, hang_s, children_checked_ended, &c);
    *failed = c.failed;
    return hung;
}

#endif /* MEMPROF_TESTS_CHILDREN_H */
