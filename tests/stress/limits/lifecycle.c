/* SPDX-License-Identifier: MIT */
/*
 * The engine's lifecycle driven from several threads at once while others allocate.
 * argv: BACKEND MODE, BACKEND "preload" (LD_PRELOAD, MEMPROF_START=0) or "got" (no plugin);
 * the rate is MEMPROF_RATE (a plain number; unset: the default).
 *
 *   concurrent-api [N]  4 threads allocate, free and check their blocks while 3 threads call
 *                       memprof_start, stop, get_snapshot (reading every site and frame),
 *                       get_stats and resolve_symbols in a random order (N calls each, default
 *                       150, and on until the allocators have made 30,000 allocations), the
 *                       first calls all at once (so under the GOT backend several threads race
 *                       to patch the GOT). Every call returns 0 or its documented error (start
 *                       and stop: -EBUSY in the wrong state), successful starts and stops
 *                       alternate (their counts differ by the final state), the engine then
 *                       still samples, and after the allocators free everything no sample is
 *                       left live.
 *   shutdown-while-allocating  4 threads allocate and free while the main thread calls
 *                       memprof_shutdown(); they go on (freeing blocks sampled before it)
 *                       with their data intact, and afterwards every API call returns
 *                       -ESHUTDOWN while memprof_get_stats() reports the SHUTDOWN state.
 */
#include "limits.h"

#include <pthread.h>
#include <stdatomic.h>
#include <time.h>

enum { ALLOCATORS = 4, CALLERS = 3, SLOTS = 256, MIN_ALLOCS = 30000 };

static unsigned api_calls = 150; /* per API thread; argv[3] of concurrent-api */

static atomic_int stop_allocating;
static atomic_uint iterations;
static atomic_int storm;     /* the API callers are at work */
static atomic_uint in_storm; /* allocations made meanwhile */
static pthread_barrier_t go;

struct block {
    uint64_t tag;
    unsigned char bytes[];
};

void *limits_lifecycle_alloc(size_t size, uint64_t tag);

__attribute__((noinline)) void *limits_lifecycle_alloc(size_t size, uint64_t tag)
{
    struct block *b = malloc(size);
    CHECK(b, "malloc(%zu) failed", size);
    b->tag = tag;
    return b;
}

/* Allocates and frees in a ring of SLOTS blocks until told to stop, checking each block's
 * tag before freeing it; then frees the rest. */
static void *allocator(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    struct block *ring[SLOTS] = {0};
    uint64_t tags[SLOTS] = {0};
    pthread_barrier_wait(&go);
    for (uint64_t i = 0; !atomic_load_explicit(&stop_allocating, memory_order_relaxed); i++) {
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        unsigned k = (unsigned)(seed % SLOTS);
        if (ring[k]) {
            CHECK(ring[k]->tag == tags[k], "a block's contents changed");
            free(ring[k]);
        }
        tags[k] = seed;
        ring[k] = limits_lifecycle_alloc(sizeof(struct block) + 16 + seed % 4000, seed);
        atomic_fetch_add_explicit(&iterations, 1, memory_order_relaxed);
        if (atomic_load_explicit(&storm, memory_order_relaxed))
            atomic_fetch_add_explicit(&in_storm, 1, memory_order_relaxed);
    }
    for (unsigned k = 0; k < SLOTS; k++) {
        CHECK(!ring[k] || ring[k]->tag == tags[k], "a block's contents changed");
        free(ring[k]);
    }
    return NULL;
}

static atomic_uint starts_ok, stops_ok;

static void read_snapshot(void)
{
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    CHECK(rc == 0 && snap, "memprof_get_snapshot: %s", memprof_strerror(rc));
    for (size_t i = 0; i < memprof_snapshot_site_count(snap); i++) {
        memprof_site_info si = {.size = sizeof si};
        CHECK(memprof_snapshot_site(snap, i, &si) == 0, "memprof_snapshot_site %zu", i);
        int n = memprof_snapshot_stack_depth(snap, si.stack_id);
        CHECK(n >= 0, "memprof_snapshot_stack_depth: %s", memprof_strerror(n));
        for (int f = 0; f < n; f++) {
            memprof_frame fr = {.size = sizeof fr};
            CHECK(memprof_snapshot_frame(snap, si.stack_id, (size_t)f, &fr) == 0, "frame");
        }
    }
    memprof_estimate e = {.size = sizeof e};
    CHECK(memprof_snapshot_estimate(snap, &e) == 0, "memprof_snapshot_estimate");
    memprof_free_snapshot(snap);
}

static void *api_caller(void *arg)
{
    uint64_t seed = (uintptr_t)arg * 0x2545f4914f6cdd1du + 7;
    pthread_barrier_wait(&go);
    /* At least api_calls calls, and on until the allocators have done real work meanwhile
     * (on two busy cores they may hardly run while three threads call the API). */
    time_t deadline = time(NULL) + 60;
    atomic_store(&storm, 1);
    for (unsigned i = 0; i < api_calls || atomic_load(&in_storm) < MIN_ALLOCS; i++) {
        CHECK(time(NULL) < deadline, "the allocators did not get %d allocations done in 60 s",
              MIN_ALLOCS);
        seed ^= seed << 13, seed ^= seed >> 7, seed ^= seed << 17;
        /* The first call of every thread is a start: they race for the first start. */
        unsigned op = i == 0 ? 0 : (unsigned)(seed % 5);
        int rc;
        memprof_stats s = {.size = sizeof s};
        switch (op) {
        case 0:
            rc = memprof_start();
            CHECK(rc == 0 || rc == -EBUSY, "memprof_start: %s", memprof_strerror(rc));
            if (rc == 0)
                atomic_fetch_add(&starts_ok, 1);
            break;
        case 1:
            rc = memprof_stop();
            CHECK(rc == 0 || rc == -EBUSY, "memprof_stop: %s", memprof_strerror(rc));
            if (rc == 0)
                atomic_fetch_add(&stops_ok, 1);
            break;
        case 2:
            read_snapshot();
            break;
        case 3:
            rc = memprof_get_stats(&s);
            CHECK(rc == 0, "memprof_get_stats: %s", memprof_strerror(rc));
            CHECK(s.state == MEMPROF_STATE_ACTIVE || s.state == MEMPROF_STATE_STOPPED ||
                      s.state == MEMPROF_STATE_INITIALIZED,
                  "state %u", s.state);
            break;
        default:
            rc = memprof_resolve_symbols();
            CHECK(rc >= 0, "memprof_resolve_symbols: %s", memprof_strerror(rc));
            break;
        }
    }
    return NULL;
}

static void run_allocators(pthread_t *t)
{
    for (uintptr_t i = 0; i < ALLOCATORS; i++)
        CHECK(pthread_create(&t[i], NULL, allocator, (void *)(i + 1)) == 0, "pthread_create");
}

static void stop_allocators(pthread_t *t)
{
    atomic_store(&stop_allocating, 1);
    for (int i = 0; i < ALLOCATORS; i++)
        pthread_join(t[i], NULL);
}

static int concurrent_api(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = limits_rate();
    int rc = memprof_init_config(&c);
    CHECK(rc == 0, "memprof_init_config: %s (MEMPROF_START=0 under the plugin)",
          memprof_strerror(rc));
    pthread_barrier_init(&go, NULL, ALLOCATORS + CALLERS);
    pthread_t alloc[ALLOCATORS], callers[CALLERS];
    run_allocators(alloc);
    for (uintptr_t i = 0; i < CALLERS; i++)
        CHECK(pthread_create(&callers[i], NULL, api_caller, (void *)(i + 1)) == 0, "create");
    for (int i = 0; i < CALLERS; i++)
        pthread_join(callers[i], NULL);
    memprof_stats s = limits_stats();
    limits_print_stats("after the API storm");
    unsigned starts = atomic_load(&starts_ok), stops = atomic_load(&stops_ok);
    printf("%u successful starts, %u successful stops, %u allocations (%u during the calls)\n",
           starts, stops, atomic_load(&iterations), atomic_load(&in_storm));
    CHECK(starts >= 1, "no memprof_start succeeded");
    CHECK(starts == stops || starts == stops + 1, "starts and stops do not alternate");
    CHECK(s.state == (starts == stops + 1 ? MEMPROF_STATE_ACTIVE : MEMPROF_STATE_STOPPED),
          "final state %u after %u starts and %u stops", s.state, starts, stops);

    /* The engine still samples the allocators afterwards. (Whether the scheduler let them
     * run while the engine happened to be active during the storm is up to chance.) */
    if (s.state == MEMPROF_STATE_STOPPED)
        CHECK(memprof_start() == 0, "memprof_start after the storm failed");
    else
        CHECK(memprof_start() == -EBUSY, "memprof_start while active did not say EBUSY");
    struct timespec ms = {0, 1000 * 1000};
    for (int i = 0; limits_stats().total_samples == s.total_samples; i++) {
        CHECK(i < 30000, "no sample within 30 s of restarting");
        nanosleep(&ms, NULL);
    }
    stop_allocators(alloc); /* they free every block they hold */
    CHECK(memprof_stop() == 0, "memprof_stop failed");
    limits_print_stats("after the allocators freed everything");
    /* Frees are tracked while stopped too. A handful of live samples may belong to stdio
     * and the threads' own allocations. */
    s = limits_stats();
    CHECK(s.live_samples < 32, "%llu samples live after every block was freed",
          (unsigned long long)s.live_samples);
    printf("concurrent-api: ok\n");
    return 0;
}

static int shutdown_while_allocating(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = limits_rate();
    limits_start(&c);
    pthread_barrier_init(&go, NULL, ALLOCATORS + 1);
    pthread_t alloc[ALLOCATORS];
    run_allocators(alloc);
    pthread_barrier_wait(&go);
    struct timespec ms = {0, 1000 * 1000};
    while (atomic_load(&iterations) < MIN_ALLOCS)
        nanosleep(&ms, NULL);
    memprof_stats before = limits_stats();
    memprof_shutdown();
    unsigned at_shutdown = atomic_load(&iterations);
    while (atomic_load(&iterations) < at_shutdown + MIN_ALLOCS)
        nanosleep(&ms, NULL);
    stop_allocators(alloc); /* also frees every block, many sampled before the shutdown */
    printf("samples before shutdown: %llu (%llu live); %u allocations after it\n",
           (unsigned long long)before.total_samples, (unsigned long long)before.live_samples,
           atomic_load(&iterations) - at_shutdown);
    CHECK(before.total_samples > 0, "nothing was sampled before the shutdown");
    CHECK(limits_rate() != 1 || before.live_samples > 0, "nothing live at rate 1");

    memprof_stats s = limits_stats();
    CHECK(s.state == MEMPROF_STATE_SHUTDOWN, "state %u after shutdown", s.state);
    memprof_snapshot *snap = (memprof_snapshot *)&s;
    int rc = memprof_get_snapshot(&snap);
    CHECK(rc == -ESHUTDOWN && !snap, "memprof_get_snapshot: %s", memprof_strerror(rc));
    CHECK((rc = memprof_start()) == -ESHUTDOWN, "memprof_start: %s", memprof_strerror(rc));
    CHECK((rc = memprof_stop()) == -ESHUTDOWN, "memprof_stop: %s", memprof_strerror(rc));
    CHECK((rc = memprof_init(0)) == -ESHUTDOWN, "memprof_init: %s", memprof_strerror(rc));
    CHECK((rc = memprof_resolve_symbols()) == -ESHUTDOWN, "memprof_resolve_symbols: %s",
          memprof_strerror(rc));
    /* The program keeps allocating normally. */
    void *p = limits_lifecycle_alloc(1 << 20, 1);
    free(p);
    printf("shutdown-while-allocating: ok\n");
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(argc >= 3, "usage: %s preload|got MODE", argv[0]);
    limits_expect_backend(argv[1]);
    if (!strcmp(argv[2], "concurrent-api")) {
        if (argc > 3)
            api_calls = (unsigned)atoi(argv[3]);
        return concurrent_api();
    }
    if (!strcmp(argv[2], "shutdown-while-allocating"))
        return shutdown_while_allocating();
    CHECK(0, "unknown mode %s", argv[2]);
}
