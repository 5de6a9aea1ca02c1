/* SPDX-License-Identifier: MIT */
/*
 * fork() from a process whose other threads allocate without pause, from code at addresses
 * the unwinder has not seen before (a JIT's, or a large program's first calls of many
 * functions). With libunwind, each such sample asked dl_iterate_phdr(), under the loader's
 * lock, which glibc does not reset in a fork() child: a child forked while a sampling
 * thread held it inherited it held, and its exit-time profile (or snapshot) waited for it in
 * the resolver for ever. argv: BACKEND [CHILDREN] (prog.h); under the plugin MEMPROF_OUTPUT
 * is PATH (no %p), so each child writes PATH.<pid>.
 *
 * Three threads allocate and free without pause, each call made from a fresh copy of a
 * small function (65,536 copies in an executable mapping, x86-64 only: elsewhere the test is
 * skipped), and one from ordinary code. The main thread forks CHILDREN children (default
 * 30), a millisecond apart, without waiting for them; each allocates and calls exit(),
 * which writes its profile under the plugin (under the GOT start the child writes a
 * snapshot through the API first). Every child must end with status 0 and, profiled, leave
 * its profile. A child that has not ended 30 s after the last fork has hung (the run then
 * fails and reports how many); nothing else is timed.
 */
#include "children.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <sys/mman.h>

#define STUB_BYTES   32
#define STUBS        65536
#define THREADS      4
#define MAX_CHILDREN 1000
#define HANG_S       30

typedef void *stub_fn(size_t);

static unsigned char *stubs;
static atomic_uint next_stub;
static atomic_bool stop;

#if defined(__x86_64__)
/* Copies of `push %rbp; mov %rsp,%rbp; movabs $malloc,%rax; call *%rax; pop %rbp; ret`: a
 * real call, so the copy's address is on the stack when malloc is sampled. */
static bool make_stubs(void)
{
    stubs = mmap(NULL, (size_t)STUB_BYTES * STUBS, PROT_READ | PROT_WRITE | PROT_EXEC,
                 MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (stubs == MAP_FAILED)
        return false;
    void *(*volatile target)(size_t) = malloc;
    void *(*m)(size_t) = target;
    unsigned char code[] = {0x55, 0x48, 0x89, 0xe5, 0x48, 0xb8, 0,    0,    0,
                            0,    0,    0,    0,    0,    0xff, 0xd0, 0x5d, 0xc3};
    memcpy(code + 6, &m, sizeof m);
    for (size_t i = 0; i < STUBS; i++)
        memcpy(stubs + i * STUB_BYTES, code, sizeof code);
    return true;
}
#else
static bool make_stubs(void)
{
    return false;
}
#endif

static void *fresh_code(void *arg)
{
    (void)arg;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        unsigned i = atomic_fetch_add(&next_stub, 1) % STUBS;
        void *p = ((stub_fn *)(void *)(stubs + (size_t)i * STUB_BYTES))(100);
        prog_touch(p, 1);
        free(p);
    }
    return NULL;
}

static void *ordinary_code(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    void *ring[128] = {0};
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % 128;
        free(ring[k]);
        ring[k] = malloc(16 + (seed >> 12) % 5000);
        prog_touch(ring[k], 1);
    }
    for (int k = 0; k < 128; k++)
        free(ring[k]);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND [CHILDREN]", argv[0]);
    prog_setup(argv[1]);
    int children = argc > 2 ? atoi(argv[2]) : 30;
    CHECK(children > 0 && children <= MAX_CHILDREN, "CHILDREN: 1 to %d", MAX_CHILDREN);
    const char *out = getenv("MEMPROF_OUTPUT");
    CHECK(prog_backend != PROG_PRELOAD || (out && !strchr(out, '%') && strlen(out) < 2048),
          "MEMPROF_OUTPUT without %% expected under the plugin");
    if (!make_stubs()) {
        printf("SKIP: no executable copies of code here (not x86-64, or W^X enforced)\n");
        return 77;
    }
    char snap[4096];
    snprintf(snap, sizeof snap, "/tmp/memprof-fork-busy-%d.txt", (int)getpid());

    pthread_t threads[THREADS];
    for (int i = 0; i < THREADS; i++)
        CHECK(pthread_create(&threads[i], NULL, i ? fresh_code : ordinary_code,
                             (void *)(uintptr_t)(i + 1)) == 0,
              "pthread_create");
    static pid_t pids[MAX_CHILDREN];
    for (int c = 0; c < children; c++) {
        struct timespec gap = {0, 1000 * 1000};
        nanosleep(&gap, NULL);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            for (int i = 0; i < 100; i++)
                prog_touch(malloc(100 + (unsigned)i), 1);
            if (prog_backend == PROG_GOT)
                children_write_profile(snap);
            exit(0);
        }
        pids[c] = pid;
    }
    atomic_store(&stop, true);
    for (int i = 0; i < THREADS; i++)
        pthread_join(threads[i], NULL);

    const char *prefix = prog_backend == PROG_PRELOAD ? out
                         : prog_backend == PROG_GOT   ? snap
                                                      : NULL;
    int failed;
    int left = children_reap_checked(pids, children, HANG_S, prefix, &failed);
    CHECK(left == 0, "%d of %d children forked while threads allocated hung at exit", left,
          children);
    CHECK(failed == 0, "%d children failed", failed);
    printf("%d children forked while %d threads allocated (%u calls from %d copies of the code) "
           "exited%s\n",
           children, THREADS, atomic_load(&next_stub), STUBS,
           prog_profiled() ? " and wrote their own profile" : "");
    return 0;
}
