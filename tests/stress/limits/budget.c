/* SPDX-License-Identifier: MIT */
/*
 * A program that gives itself a modest memory budget keeps what it had: the profiler's own
 * address space and private writable memory are a few MiB while idle and grow with use, so
 * they fit in a limit however it is set, also where no wrapper of the profiler sees it.
 * Sandboxes, online judges and CI harnesses limit themselves with setrlimit(); some use the
 * raw prlimit64 system call (seccomp-minded code, Go and Rust runtimes) or prlimit() on
 * another thread's id; under vm.overcommit_memory=2 every private writable mapping counts
 * against the commit limit, touched or not, in the program and in each forked child.
 * argv: BACKEND CASE; BACKEND "plain" (no profiler: the expectations are the kernel's and
 * glibc's), "preload" (LD_PRELOAD, MEMPROF_START=0) or "got" (no plugin); the rate is
 * MEMPROF_RATE (a plain number; unset: the default). CASE:
 *   data        setrlimit(RLIMIT_DATA, 384 MiB), then 256 MiB of blocks;
 *   as          setrlimit(RLIMIT_AS, 768 MiB), then 256 MiB of blocks;
 *   as-syscall  syscall(SYS_prlimit64, 0, RLIMIT_AS, 4 GiB), then 1 GiB of blocks;
 *   as-thread   prlimit(another thread's id, RLIMIT_AS, 4 GiB), then 1 GiB of blocks;
 *   commit      the process's private writable memory (VmData: what RLIMIT_DATA and, under
 *               overcommit_memory=2, the commit charge count) grows by at most 8 MiB when
 *               the profiler starts, stays proportional to what is sampled, and is the same
 *               in a forked child.
 * Blocks are a mix of sizes (tiny to 1.5 MiB, powers of two and not), each touched once.
 * Samples taken before the limit are freed under it, and the live samples return to where
 * they were. Before this (issue 18), every case failed under the profiler: the sample
 * heap's 27 GiB reservation and ~600 MiB of tables counted against every limit, and the
 * wrappers that gave the reservation back missed the raw system call and other threads' ids.
 */
#include "limits.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#define MIB ((size_t)1 << 20)

/* A field of /proc/self/status in bytes ("VmData", "VmSize"). */
static long status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    CHECK(f != NULL, "cannot read /proc/self/status");
    char line[256];
    size_t len = strlen(field);
    long kib = -1;
    while (kib < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, field, len) && line[len] == ':')
            kib = strtol(line + len + 1, NULL, 10);
    fclose(f);
    CHECK(kib >= 0, "no %s in /proc/self/status", field);
    return kib * 1024;
}

/* The sizes allocated in turn: big and small, powers of two and not (sampled blocks of a
 * power-of-two heap must not cost twice their size in address space). */
static const size_t sizes[] = {MIB, 3 * MIB / 2 + 1, 640 << 10, (96 << 10) + 8, 24 << 10, 3000, 200,
                               40,  (2 * MIB),       5000,      130 << 10,      100};

#define MAX_BLOCKS 20000
static char *blocks[MAX_BLOCKS];
static size_t nblocks;

void *budget_alloc(size_t size);

__attribute__((noinline)) void *budget_alloc(size_t size)
{
    void *p = malloc(size);
    limits_touch(p, 1);
    return p;
}

/* Allocates blocks of the mix until `total` bytes, each of which must succeed. */
static size_t alloc_mix(size_t total)
{
    size_t done = 0;
    for (size_t i = 0; done < total; i++) {
        CHECK(nblocks < MAX_BLOCKS, "too many blocks");
        size_t n = sizes[i % (sizeof sizes / sizeof *sizes)];
        blocks[nblocks] = budget_alloc(n);
        CHECK(blocks[nblocks] != NULL,
              "malloc(%zu) failed with %zu MiB allocated under the limit (VmSize %ld MiB, "
              "VmData %ld MiB)",
              n, done >> 20, status_bytes("VmSize") >> 20, status_bytes("VmData") >> 20);
        nblocks++;
        done += n;
    }
    return done;
}

static void free_all(void)
{
    while (nblocks)
        free(blocks[--nblocks]);
}

static _Atomic pid_t thread_id;

static void *idle_thread(void *arg)
{
    pthread_barrier_t *go = arg;
    thread_id = (pid_t)syscall(SYS_gettid);
    pthread_barrier_wait(go); /* its id is known */
    pthread_barrier_wait(go); /* the main thread is done */
    return NULL;
}

static void print_memory(const char *when)
{
    printf("%s: VmSize %ld MiB, VmData %ld MiB\n", when, status_bytes("VmSize") >> 20,
           status_bytes("VmData") >> 20);
    fflush(stdout);
}

/* The commit case: the profiler's private writable memory is small and follows use. */
static void check_commit(long before, const char *backend)
{
    long idle = status_bytes("VmData");
    printf("VmData: %ld KiB before the profiler, %ld KiB after init and start\n", before >> 10,
           idle >> 10);
    CHECK(idle - before <= (long)(8 * MIB), "the idle profiler added %ld KiB of VmData",
          (idle - before) >> 10);
    /* 20,000 small blocks and 200 big ones, over 40 call sites: at rate 1 all sampled. */
    static char *small[20000];
    size_t live = 0;
    for (int i = 0; i < 20000; i++) {
        small[i] = budget_alloc(16 + (size_t)(i % 40) * 8);
        CHECK(small[i], "malloc failed");
        live += 16 + (size_t)(i % 40) * 8;
    }
    live += alloc_mix(64 * MIB);
    long used = status_bytes("VmData");
    printf("VmData: %ld KiB with %zu KiB live\n", used >> 10, live >> 10);
    /* What the program holds (twice, for glibc's and the heap's rounding) and 16 MiB for the
     * profiler's tables at 20,000 samples and more. */
    CHECK(used - before <= (long)(2 * live + 16 * MIB),
          "VmData grew by %ld KiB for %zu KiB of live blocks", (used - before) >> 10, live >> 10);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        /* The child's copy is charged again under overcommit_memory=2: the same bound. */
        long child = status_bytes("VmData");
        void *p = budget_alloc(100);
        free(p);
        _exit(child - before <= (long)(2 * live + 16 * MIB) ? 0 : 1);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid: %s", strerror(errno));
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "the forked child's VmData is larger");
    for (int i = 0; i < 20000; i++)
        free(small[i]);
    free_all();
    (void)backend;
}

int main(int argc, char **argv)
{
    CHECK(argc == 3, "usage: %s plain|preload|got data|as|as-syscall|as-thread|commit", argv[0]);
    const char *backend = argv[1], *what = argv[2];
    bool plain = limits_expect_backend_or_plain(backend);
    long vm_data_before = status_bytes("VmData");
    if (!plain) {
        limits_start_at_rate();
        limits_print_stats("start");
    }
    print_memory("after start");
    if (!strcmp(what, "commit")) {
        check_commit(vm_data_before, backend);
        return 0;
    }

    /* The thread whose id the as-thread case limits, first: glibc keeps what it allocates
     * for a thread (its DTV) with the thread's cached stack, live after the join. */
    pthread_t thread;
    pthread_barrier_t go;
    if (!strcmp(what, "as-thread")) {
        pthread_barrier_init(&go, NULL, 2);
        CHECK(pthread_create(&thread, NULL, idle_thread, &go) == 0, "pthread_create");
        pthread_barrier_wait(&go);
    }

    /* Samples from before the limit, freed under it. */
    uint64_t live_at_start = plain ? 0 : limits_stats().live_samples;
    alloc_mix(16 * MIB);
    size_t before = nblocks;

    size_t target = 256 * MIB;
    struct rlimit lim;
    if (!strcmp(what, "data") || !strcmp(what, "as")) {
        bool data = !strcmp(what, "data");
        lim.rlim_cur = lim.rlim_max = (rlim_t)(data ? 384 : 768) * MIB;
        CHECK(setrlimit(data ? RLIMIT_DATA : RLIMIT_AS, &lim) == 0, "setrlimit: %s",
              strerror(errno));
    } else if (!strcmp(what, "as-syscall")) {
        target = 1024 * MIB;
        lim.rlim_cur = lim.rlim_max = (rlim_t)4096 * MIB;
        CHECK(syscall(SYS_prlimit64, 0, RLIMIT_AS, &lim, NULL) == 0, "prlimit64: %s",
              strerror(errno));
    } else if (!strcmp(what, "as-thread")) {
        target = 1024 * MIB;
        pid_t tid = thread_id;
        CHECK(tid != 0 && tid != getpid(), "the thread's id is %d", (int)tid);
        lim.rlim_cur = lim.rlim_max = (rlim_t)4096 * MIB;
        CHECK(prlimit(tid, RLIMIT_AS, &lim, NULL) == 0, "prlimit(%d): %s", (int)tid,
              strerror(errno));
    } else {
        CHECK(0, "unknown case '%s'", what);
    }
    print_memory("under the limit");
    alloc_mix(target);
    print_memory("allocated");
    if (!plain) {
        memprof_snapshot *snap = NULL;
        CHECK(memprof_get_snapshot(&snap) == 0, "snapshot under the limit failed");
        memprof_free_snapshot(snap);
        limits_print_stats("under the limit");
    }
    /* The blocks from before the limit first. */
    for (size_t i = 0; i < before; i++) {
        free(blocks[i]);
        blocks[i] = NULL;
    }
    free_all();
    if (!strcmp(what, "as-thread")) {
        pthread_barrier_wait(&go);
        pthread_join(thread, NULL);
    }
    if (!plain) {
        limits_print_stats("all freed");
        uint64_t live = limits_stats().live_samples;
        CHECK(live == live_at_start, "%llu samples live after every block was freed, %llu before",
              (unsigned long long)live, (unsigned long long)live_at_start);
    }
    return 0;
}
