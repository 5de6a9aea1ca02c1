/* SPDX-License-Identifier: MIT */
/*
 * The preload plugin's profile files while the program is busy: dumps requested by signal,
 * exit() from a thread other than main, and writes that fail. Run under LD_PRELOAD with
 * MEMPROF_OUTPUT (and MEMPROF_SIGNAL where a mode sends it); runner.py checks the files and
 * stderr. The program links libmemprof, so it shares the plugin's engine and can read its
 * statistics. argv: MODE [ARGS]:
 *
 *   signal-dumps N PATH   4 threads allocate and free; the main thread sends itself
 *                         MEMPROF_SIGNAL N times, each time waiting until a new file has been
 *                         renamed to PATH, and keeps that version as PATH.<i> (a hard link),
 *                         so the runner can check every dump. Exits 0.
 *   exit-from-thread STATUS  4 threads allocate and free without end; a fifth thread calls
 *                         exit(STATUS) once they are all well under way, while main waits in
 *                         pthread_join. The exit-time profile must still be written.
 *   failed-writes N STATUS  MEMPROF_OUTPUT cannot be written: sends MEMPROF_SIGNAL N times,
 *                         waiting each time until memprof_stats.write_failures has grown by
 *                         one, prints the count, and exits with STATUS (which the failed
 *                         exit-time write must not change).
 *   report                prints the engine's state, rate and unwinder as the plugin set
 *                         them up (for the environment-parsing checks).
 */
#include "limits.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

enum { THREADS = 4, SLOTS = 128 };

static atomic_uint warm; /* threads past their first 2000 allocations */

void *limits_dump_alloc(size_t size);

__attribute__((noinline)) void *limits_dump_alloc(size_t size)
{
    void *p = malloc(size);
    CHECK(p, "malloc failed");
    limits_touch(p, 3);
    return p;
}

static void *allocator(void *arg)
{
    uint64_t x = (uintptr_t)arg * 0x9e3779b97f4a7c15u + 1;
    void *ring[SLOTS] = {0};
    for (unsigned n = 1;; n++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        unsigned k = (unsigned)(x % SLOTS);
        free(ring[k]);
        ring[k] = limits_dump_alloc(16 + x % 20000);
        if (n == 2000)
            atomic_fetch_add(&warm, 1);
    }
    return NULL;
}

static void start_allocators(void)
{
    for (uintptr_t i = 0; i < THREADS; i++) {
        pthread_t t;
        CHECK(pthread_create(&t, NULL, allocator, (void *)(i + 1)) == 0, "pthread_create");
        pthread_detach(t);
    }
    struct timespec ms = {0, 1000 * 1000};
    for (int i = 0; atomic_load(&warm) < THREADS; i++) {
        CHECK(i < 30000, "the allocating threads did not get going in 30 s");
        nanosleep(&ms, NULL);
    }
}

/* The dump signal the plugin was configured with (a number or a name such as USR2). */
static int dump_signal(void)
{
    const char *s = getenv("MEMPROF_SIGNAL");
    CHECK(s, "MEMPROF_SIGNAL is not set");
    if (!strncmp(s, "SIG", 3))
        s += 3;
    if (!strcmp(s, "USR1"))
        return SIGUSR1;
    if (!strcmp(s, "USR2"))
        return SIGUSR2;
    return atoi(s);
}

static ino_t inode_of(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0 ? st.st_ino : 0;
}

static int signal_dumps(int n, const char *path)
{
    CHECK(limits_preloaded(), "not running under the preload plugin");
    int sig = dump_signal();
    start_allocators();
    struct timespec ms = {0, 1000 * 1000};
    for (int i = 0; i < n; i++) {
        ino_t before = inode_of(path);
        CHECK(kill(getpid(), sig) == 0, "kill: %s", strerror(errno));
        /* Each dump renames a fresh file into place: a new inode (the old ones are kept
         * alive by their links, so their numbers are not reused). */
        ino_t now;
        for (int w = 0; (now = inode_of(path)) == before || now == 0; w++) {
            CHECK(w < 60000, "dump %d did not appear within 60 s", i);
            nanosleep(&ms, NULL);
        }
        char keep[4096];
        snprintf(keep, sizeof keep, "%s.%d", path, i);
        /* The dump thread may already be writing the next file; link what is there now. */
        CHECK(link(path, keep) == 0, "link %s: %s", keep, strerror(errno));
    }
    printf("%d dumps\n", n);
    return 0;
}

static int exit_status;

static void *exiter(void *arg)
{
    (void)arg;
    start_allocators();
    exit(exit_status); /* with the allocators still running and main in pthread_join */
}

static int exit_from_thread(int status)
{
    CHECK(limits_preloaded(), "not running under the preload plugin");
    exit_status = status;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, exiter, NULL) == 0, "pthread_create");
    pthread_join(t, NULL);
    CHECK(0, "exit() in a thread returned to main");
}

static int failed_writes(int n, int status)
{
    CHECK(limits_preloaded(), "not running under the preload plugin");
    int sig = dump_signal();
    start_allocators();
    struct timespec ms = {0, 1000 * 1000};
    for (int i = 0; i < n; i++) {
        uint64_t before = limits_stats().write_failures;
        CHECK(kill(getpid(), sig) == 0, "kill: %s", strerror(errno));
        for (int w = 0; limits_stats().write_failures == before; w++) {
            CHECK(w < 60000, "failed dump %d was not counted within 60 s", i);
            nanosleep(&ms, NULL);
        }
    }
    printf("write_failures=%llu\n", (unsigned long long)limits_stats().write_failures);
    fflush(stdout);
    return status;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(argc >= 2, "usage: %s MODE [ARGS]", argv[0]);
    const char *mode = argv[1];
    if (!strcmp(mode, "signal-dumps") && argc == 4)
        return signal_dumps(atoi(argv[2]), argv[3]);
    if (!strcmp(mode, "exit-from-thread") && argc == 3)
        return exit_from_thread(atoi(argv[2]));
    if (!strcmp(mode, "failed-writes") && argc == 4)
        return failed_writes(atoi(argv[2]), atoi(argv[3]));
    if (!strcmp(mode, "report")) {
        memprof_stats s = limits_stats();
        printf("state=%u rate=%llu unwinder=%u\n", s.state, (unsigned long long)s.sampling_rate,
               s.unwinder);
        return 0;
    }
    CHECK(0, "unknown mode or wrong arguments: %s", mode);
}
