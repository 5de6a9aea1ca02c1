/* SPDX-License-Identifier: MIT */
/*
 * Libraries with a malloc family of their own loaded with RTLD_DEEPBIND (deep_malloc_lib.c):
 * the dynamic loader binds their own code's allocator calls to their own definitions, so
 * the blocks they allocate and free are theirs. The GOT start (memprof_start() with no
 * plugin), which patches their allocator slots, must route those calls to the library's
 * allocator, not to libc's. One library is loaded, and each of its allocator calls made
 * once, before memprof_start(); the other is loaded after it (through the GOT start's dlopen
 * hook). argv: BACKEND LIB_BEFORE LIB_AFTER [ROUNDS] (prog.h).
 *
 * Each library's work (malloc, calloc, realloc from NULL and moving, posix_memalign,
 * aligned_alloc, memalign, malloc_usable_size, free: seven blocks a round) must come from its own
 * allocator, with no foreign block freed there; at rate 1 under the GOT start the calls are
 * sampled.
 */
#include "prog.h"

#include <dlfcn.h>

typedef void counts_fn(uint64_t *allocs, uint64_t *foreign);
typedef int work_fn(int rounds);

struct lib {
    const char *path;
    counts_fn *counts;
    work_fn *work;
};

static void load(struct lib *l)
{
    void *h = dlopen(l->path, RTLD_LAZY | RTLD_LOCAL | RTLD_DEEPBIND);
    CHECK(h, "dlopen %s: %s", l->path, dlerror());
    l->counts = (counts_fn *)dlsym(h, "deep_malloc_counts");
    l->work = (work_fn *)dlsym(h, "deep_malloc_work");
    CHECK(l->counts && l->work, "dlsym in %s", l->path);
}

static void check_work(struct lib *l, int rounds, const char *when)
{
    uint64_t before, after, foreign;
    l->counts(&before, &foreign);
    int blocks = l->work(rounds);
    CHECK(blocks == 7 * rounds, "%s: the library's allocator calls failed", when);
    l->counts(&after, &foreign);
    printf("%s: %d blocks, %" PRIu64 " from the library's own allocator, %" PRIu64
           " foreign frees\n",
           when, blocks, after - before, foreign);
    CHECK(foreign == 0, "%s: the library's free() received %" PRIu64 " blocks it did not make",
          when, foreign);
    CHECK(after - before == (uint64_t)blocks,
          "%s: %" PRIu64 " of the library's %d blocks came from its own allocator", when,
          after - before, blocks);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 4, "usage: %s BACKEND LIB_BEFORE LIB_AFTER [ROUNDS]", argv[0]);
    int rounds = argc > 4 ? atoi(argv[4]) : 300;
    struct lib early = {argv[2], NULL, NULL}, late = {argv[3], NULL, NULL};
    load(&early);
    check_work(&early, 1, "before start"); /* every call once: its slots are bound */
    prog_setup(argv[1]);
    load(&late);
    uint64_t samples = prog_profiled() ? prog_stats().total_samples : 0;
    check_work(&early, rounds, "loaded before start");
    check_work(&late, rounds, "loaded after start");
    if (prog_backend == PROG_GOT && prog_rate() == 1) {
        uint64_t now = prog_stats().total_samples;
        CHECK(now - samples >= 2 * 7 * (uint64_t)rounds,
              "at rate 1 the libraries' calls are sampled: %" PRIu64 " samples", now - samples);
    }
    return 0;
}
