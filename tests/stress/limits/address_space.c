/* SPDX-License-Identifier: MIT */
/*
 * A program that limits its own address space after profiling started keeps allocating up
 * to its limit. The profiler reserves no capacity ahead of use (the sample heap maps what
 * its blocks need in a window of address space, the tables grow by segments), so the limit
 * counts only memory in use, whichever call sets it; before that (issue 18), a 27 GiB
 * reservation made every allocation that needed a new mapping fail unless a wrapper of the
 * setter gave it back first.
 * argv: BACKEND CALL [data], BACKEND "preload" (LD_PRELOAD, MEMPROF_START=0) or "got" (no
 * plugin), CALL the function that sets the limit: setrlimit, prlimit (pid 0) or prlimit-self
 * (the process's own pid); "data" limits RLIMIT_DATA instead of RLIMIT_AS, which counts
 * private writable mappings. The rate is MEMPROF_RATE (a plain number; unset: the default).
 *
 * Blocks sampled before the limit (in the sample heap) are freed, reallocated and counted
 * as before; 1 GiB of blocks allocated under a 3 GiB limit all succeed (blocks of the real
 * allocator may lie in the sample heap's window too, and their samples must still leave
 * the live set when freed); after everything allocated since the start is freed, the live
 * samples are what they were. Setting limits says nothing to the log callback.
 * (tests/stress/limits/budget.c: budgets of a few hundred MiB, the raw system call,
 * another thread's id.)
 */
#include "limits.h"

#include <malloc.h>
#include <sys/resource.h>
#include <unistd.h>

#define BEFORE     64
#define AFTER      1024 /* blocks of 1 MiB: 1 GiB under the limit */
#define AFTER_SIZE ((size_t)1 << 20)
#define SMALL      20000
#define LIMIT      ((rlim_t)3 << 30)

static int messages;

static void on_log(void *ctx, int level, const char *msg)
{
    (void)ctx;
    printf("log %d: %s\n", level, msg);
    messages++;
}

static int limited = RLIMIT_AS;

/* Sets the limit under test (soft and hard: the test may lower the hard limit, never raise
 * it) with the call under test. */
static int limit_as(const char *how, rlim_t v)
{
    struct rlimit r = {v, v};
    if (!strcmp(how, "setrlimit"))
        return setrlimit(limited, &r);
    if (!strcmp(how, "prlimit"))
        return prlimit(0, limited, &r, NULL);
    if (!strcmp(how, "prlimit-self"))
        return prlimit(getpid(), limited, &r, NULL);
    CHECK(0, "unknown call '%s' (setrlimit, prlimit or prlimit-self)", how);
    return -1;
}

void *limits_as_alloc(size_t size);

__attribute__((noinline)) void *limits_as_alloc(size_t size)
{
    void *p = malloc(size);
    CHECK(p, "malloc(%zu) failed under the limit", size);
    limits_touch(p, 1);
    return p;
}

int main(int argc, char **argv)
{
    CHECK(argc == 3 || (argc == 4 && !strcmp(argv[3], "data")),
          "usage: %s preload|got setrlimit|prlimit|prlimit-self [data]", argv[0]);
    limits_expect_backend(argv[1]);
    if (argc == 4)
        limited = RLIMIT_DATA;
    uint64_t rate = limits_rate();
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = rate;
    c.log_fn = on_log;
    limits_start(&c);
    limits_print_stats("start"); /* stdout's buffer is allocated here, not later */
    uint64_t live_at_start = limits_stats().live_samples;

    /* Blocks of every size the heap serves, most of them sampled. */
    static char *before[BEFORE];
    for (int i = 0; i < BEFORE; i++)
        before[i] = limits_as_alloc((size_t)16 << (i % 17));
    memprof_stats s = limits_stats();
    CHECK(s.live_samples > live_at_start, "nothing sampled before the limit");

    /* Other limits change nothing. */
    struct rlimit files;
    CHECK(getrlimit(RLIMIT_NOFILE, &files) == 0, "getrlimit: %s", strerror(errno));
    CHECK(setrlimit(RLIMIT_NOFILE, &files) == 0, "setrlimit(RLIMIT_NOFILE): %s", strerror(errno));
    CHECK(limit_as(argv[2], RLIM_INFINITY) == 0, "%s(RLIM_INFINITY): %s", argv[2], strerror(errno));
    int quiet = messages;
    CHECK(limit_as(argv[2], LIMIT) == 0, "%s: %s", argv[2], strerror(errno));
    CHECK(limit_as(argv[2], LIMIT) == 0, "%s again: %s", argv[2], strerror(errno));
    CHECK(messages == quiet, "%d log messages about the limit", messages - quiet);

    static char *after[AFTER];
    for (int i = 0; i < AFTER; i++) {
        after[i] = limits_as_alloc(AFTER_SIZE);
        /* The allocator's own size, also for a block of the sample heap (its pages). */
        size_t usable = malloc_usable_size(after[i]);
        CHECK(usable >= AFTER_SIZE && usable < AFTER_SIZE + 65536,
              "malloc_usable_size of a 1 MiB block is %zu", usable);
    }
    static char *small[SMALL];
    for (int i = 0; i < SMALL; i++)
        small[i] = limits_as_alloc(64);
    /* Half the blocks from before the limit move, the rest stay. */
    for (int i = 0; i < BEFORE; i += 2) {
        before[i] = realloc(before[i], (size_t)24 << (i % 17));
        CHECK(before[i] && before[i][0] == 1, "realloc of block %d under the limit failed", i);
    }
    s = limits_stats();
    CHECK(s.total_samples > 0 && s.live_samples > live_at_start, "nothing sampled under the limit");
    memprof_snapshot *snap = NULL;
    CHECK(memprof_get_snapshot(&snap) == 0, "snapshot under the limit failed");
    memprof_free_snapshot(snap);
    limits_print_stats("under the limit, 1 GiB allocated");

    /* An allocation beyond the limit fails as it would without the profiler (called
     * through a volatile pointer: a compiler may drop an unused malloc, clang does). */
    void *(*volatile alloc)(size_t) = malloc;
    errno = 0;
    void *too_big = alloc((size_t)4 << 30);
    CHECK(too_big == NULL && errno == ENOMEM, "a 4 GiB block under a 3 GiB limit");
    free(too_big);

    for (int i = 0; i < AFTER; i++)
        free(after[i]);
    for (int i = 0; i < SMALL; i++)
        free(small[i]);
    for (int i = 0; i < BEFORE; i++)
        free(before[i]);
    s = limits_stats();
    limits_print_stats("all freed");
    CHECK(s.live_samples == live_at_start,
          "%llu samples live after every block was freed, %llu "
          "at the start",
          (unsigned long long)s.live_samples, (unsigned long long)live_at_start);
    return 0;
}
