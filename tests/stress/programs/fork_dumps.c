/* SPDX-License-Identifier: MIT */
/*
 * fork() while a profile is being written. A thread that writes profiles (the plugin's
 * writer under MEMPROF_INTERVAL; under the GOT start, a thread of the program's calling
 * memprof_snapshot_write()) holds the resolver's locks, and inside them the loader's, for
 * much of each profile; a fork() at that moment used to leave them held in the child, whose
 * exit-time profile (or snapshot) then waited for a thread that does not exist there, for
 * ever. argv: BACKEND [CHILDREN] (prog.h); under the plugin the run has MEMPROF_INTERVAL=1
 * and MEMPROF_OUTPUT=PATH (no %p), so each child writes PATH.<pid>.
 *
 * The program allocates from 4,096 distinct call stacks (a 12-level binary tree of calls),
 * blocks large enough to be sampled at any rate, which stay live: every profile resolves
 * them all. Then it forks CHILDREN children (default 200), milliseconds apart over at least
 * 2.5 s (the first two periodic profiles), without waiting for them; each allocates once and
 * calls exit(), which writes its profile (under the GOT start the child writes a snapshot
 * itself before exit). Every child must end with status 0 and, profiled, leave its profile. A
 * child that has not ended 30 s after the last fork has hung (the run then fails and reports
 * how many); nothing else is timed.
 *
 * The program calls fflush(NULL) before each fork(), as programs do, and its descriptor 0
 * is a file of its own, open for writing: stdio's flush of every stream (and a child's at
 * exit) must not write the part of a profile that is being written into it (the plugin's
 * writer has a descriptor table of its own, whose descriptor 0 is its temporary file), and
 * no profile may fail for it (memprof_stats.write_failures stays 0).
 */
#include "children.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

#define LEVELS       12 /* 2^12 call stacks */
#define MAX_CHILDREN 1000
#define HANG_S       30
#define FORK_SPAN_US 2500000u /* 2.5 s: the profiles at 1 s and 2 s (MEMPROF_INTERVAL=1) */

static size_t block;
static atomic_bool stop;
static char snap_path[4096];

/* The tree: each level calls the next through one of two call sites. */
void *prog_fork_dumps_step(unsigned bits, int level);
void *prog_fork_dumps_left(unsigned bits, int level);
void *prog_fork_dumps_right(unsigned bits, int level);

__attribute__((noinline)) void *prog_fork_dumps_left(unsigned bits, int level)
{
    void *p = prog_fork_dumps_step(bits, level);
    __asm__ volatile("" : : "r"(p) : "memory"); /* a real call, not a tail call */
    return p;
}

__attribute__((noinline)) void *prog_fork_dumps_right(unsigned bits, int level)
{
    void *p = prog_fork_dumps_step(bits, level);
    __asm__ volatile("" : : "r"(p) : "memory");
    return p;
}

__attribute__((noinline)) void *prog_fork_dumps_step(unsigned bits, int level)
{
    if (level == 0) {
        void *p = malloc(block);
        prog_touch(p, 1);
        return p;
    }
    return (bits & 1) ? prog_fork_dumps_left(bits >> 1, level - 1)
                      : prog_fork_dumps_right(bits >> 1, level - 1);
}

/* Under the GOT start: the program's own profile writer. */
static void *snapshots(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop)) {
        memprof_snapshot *s = NULL;
        CHECK(memprof_get_snapshot(&s) == 0, "memprof_get_snapshot");
        int rc = memprof_snapshot_write(s, snap_path, MEMPROF_FORMAT_TEXT);
        CHECK(rc == 0, "memprof_snapshot_write: %s", memprof_strerror(rc));
        memprof_free_snapshot(s);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND [CHILDREN]", argv[0]);
    prog_setup(argv[1]);
    int children = argc > 2 ? atoi(argv[2]) : 200;
    CHECK(children > 0 && children <= MAX_CHILDREN, "CHILDREN: 1 to %d", MAX_CHILDREN);
    const char *out = getenv("MEMPROF_OUTPUT");
    CHECK(prog_backend != PROG_PRELOAD || (out && !strchr(out, '%') && strlen(out) < 2048),
          "MEMPROF_OUTPUT without %% expected under the plugin");
    char data[] = "/tmp/memprof-fork-dumps-stdin-XXXXXX";
    int stdin_fd = mkstemp(data);
    CHECK(stdin_fd >= 0 && dup2(stdin_fd, STDIN_FILENO) == STDIN_FILENO, "a file as stdin");
    close(stdin_fd);
    unlink(data);
    uint64_t rate = prog_rate() ? prog_rate() : PROG_DEFAULT_RATE;
    /* Four times the rate: sampled with probability 1 - e^-4 at any rate. */
    block = prog_profiled() && rate * 4 > 64 ? (size_t)rate * 4 : 64;
    for (unsigned i = 0; i < (1u << LEVELS); i++)
        CHECK(prog_fork_dumps_step(i, LEVELS) != NULL, "malloc(%zu)", block);

    pthread_t writer;
    if (prog_backend == PROG_GOT) {
        snprintf(snap_path, sizeof snap_path, "/tmp/memprof-fork-dumps-%d.txt", (int)getpid());
        CHECK(pthread_create(&writer, NULL, snapshots, NULL) == 0, "pthread_create");
    }

    /* Gaps of 0-5 ms, stretched so that the forks span at least FORK_SPAN_US whatever the
     * number of children: at least two of the writer's profiles, the first included (its
     * first uses of anything loaded lazily), fall among them also on an idle machine. */
    unsigned stretch = (FORK_SPAN_US / 2500u + (unsigned)children - 1) / (unsigned)children;
    static pid_t pids[MAX_CHILDREN];
    for (int c = 0; c < children; c++) {
        /* At varying points of the writer's work. */
        struct timespec gap = {0, (long)((unsigned)c * 7919u % 5000u * stretch) * 1000};
        nanosleep(&gap, NULL);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            void *p = malloc(100);
            prog_touch(p, 1);
            if (prog_backend == PROG_GOT)
                children_write_profile(snap_path);
            exit(0);
        }
        pids[c] = pid;
    }
    atomic_store(&stop, true);
    if (prog_backend == PROG_GOT)
        pthread_join(writer, NULL);

    const char *prefix = prog_backend == PROG_PRELOAD ? out
                         : prog_backend == PROG_GOT   ? snap_path
                                                      : NULL;
    int failed;
    int left = children_reap_checked(pids, children, HANG_S, prefix, &failed);
    if (snap_path[0])
        unlink(snap_path);
    CHECK(left == 0, "%d of %d children forked while profiles were written hung at exit", left,
          children);
    CHECK(failed == 0, "%d children failed", failed);
    struct stat in;
    CHECK(fstat(STDIN_FILENO, &in) == 0 && in.st_size == 0,
          "%lld bytes of a profile were written to the program's descriptor 0",
          (long long)in.st_size);
    if (prog_profiled()) {
        memprof_stats st = prog_stats();
        CHECK(st.write_failures == 0, "%" PRIu64 " profiles of the program failed",
              st.write_failures);
    }
    printf("%d children forked while profiles of %u call stacks were written exited and "
           "wrote their own\n",
           children, 1u << LEVELS);
    return 0;
}
