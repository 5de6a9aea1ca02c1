/* SPDX-License-Identifier: MIT */
/*
 * Allocating on small stacks. Crash and diagnostic handlers run on a sigaltstack of a few
 * KiB and allocate (to format a message, to collect a report); coroutine libraries run
 * their coroutines on stacks of 8 to 16 KiB (ucontext, boost.context, green threads) and
 * those call malloc, free and snprintf like any code. glibc needs well under 4 KiB for
 * that, so the profiler's sampled path must not need much more of the program's stack: a
 * DWARF unwinder with its cursor, context and frame buffers on that stack runs off its end.
 * argv: BACKEND [ROUNDS] (prog.h).
 *
 * Four threads each install a sigaltstack of 8 KiB (threads 0 and 2) or 12 KiB (1 and 3)
 * and raise SIGUSR1 on themselves ROUNDS times; the handler allocates, reallocates, formats
 * into and frees blocks from 24 bytes to 1 MiB (so that the default rate samples some too).
 * Then each runs a ucontext coroutine on a stack of the same size that does the same for
 * ROUNDS rounds, switching back to the thread after each. Every small stack has 64 KiB of
 * PROT_NONE below it, so running off its end is a SIGSEGV rather than a silent overwrite
 * of whatever lies below (a frame bigger than a page would jump a one-page guard). The
 * alternate stacks are enlarged by what the kernel's signal frame needs beyond the 3376
 * bytes of an AVX-512 machine (AT_MINSIGSTKSZ), so that a handler has the same room on a
 * machine with larger register state. Under a profiler, samples must have been taken during
 * the run. Each stack's high-water mark is printed (informational, not checked).
 */
#include "prog.h"

#include <pthread.h>
#include <signal.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <ucontext.h>
#include <unistd.h>

#define THREADS  4
#define GUARD    ((size_t)64 * 1024)
#define PATTERN  0xa5
#define WATCHDOG 60

#ifndef AT_MINSIGSTKSZ
#define AT_MINSIGSTKSZ 51
#endif

struct small_stack {
    unsigned char *lo; /* lowest usable byte; GUARD bytes of PROT_NONE below */
    size_t size;
};

static unsigned rounds = 40;

static void stack_map(struct small_stack *s, size_t size)
{
    unsigned char *m =
        mmap(NULL, GUARD + size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    CHECK(m != MAP_FAILED, "mmap: %s", strerror(errno));
    CHECK(mprotect(m + GUARD, size, PROT_READ | PROT_WRITE) == 0, "mprotect: %s", strerror(errno));
    s->lo = m + GUARD;
    s->size = size;
    memset(s->lo, PATTERN, size);
}

/* Bytes of the stack that were written: from the lowest one that lost the pattern up. */
static size_t stack_used(const struct small_stack *s)
{
    size_t i = 0;
    while (i < s->size && s->lo[i] == PATTERN)
        i++;
    return s->size - i;
}

static void stack_unmap(struct small_stack *s)
{
    munmap(s->lo - GUARD, GUARD + s->size);
}

/* What a handler or a coroutine does: every allocation call, 24 bytes to 1 MiB, and an
 * snprintf into a block. noinline: each call is a real call on the small stack. */
__attribute__((noinline)) static void allocate_some(unsigned round)
{
    static const size_t sizes[] = {24, 200, 3000, 40000, (size_t)1 << 20};
    void *p[sizeof sizes / sizeof *sizes];
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++) {
        p[i] = malloc(sizes[i]);
        CHECK(p[i] != NULL, "malloc(%zu)", sizes[i]);
        prog_touch(p[i], (unsigned char)round);
    }
    int n = snprintf(p[1], 200, "round %u of %u: %zu bytes at %p, %.3f", round, rounds, sizes[2],
                     p[2], round / 7.0);
    CHECK(n > 0 && n < 200, "snprintf returned %d", n);
    char *q = calloc(1, 5000);
    CHECK(q != NULL && q[4999] == 0, "calloc(1, 5000)");
    void *r = realloc(p[2], 9000);
    CHECK(r != NULL, "realloc(9000)");
    p[2] = r;
    free(q);
    for (size_t i = 0; i < sizeof sizes / sizeof *sizes; i++)
        free(p[i]);
}

static _Thread_local unsigned handled;

static void on_usr1(int sig)
{
    (void)sig;
    allocate_some(handled++);
}

struct coroutine {
    ucontext_t thread, self;
};

static _Thread_local struct coroutine *current;

static void coroutine_body(void)
{
    for (unsigned i = 0; i < rounds; i++) {
        allocate_some(i);
        CHECK(swapcontext(&current->self, &current->thread) == 0, "swapcontext");
    }
}

static void *run(void *arg)
{
    unsigned index = (unsigned)(uintptr_t)arg;
    size_t size = index % 2 ? 12 * 1024 : 8 * 1024;

    /* A handler on the alternate stack. */
    unsigned long frame = getauxval(AT_MINSIGSTKSZ);
    struct small_stack alt;
    stack_map(&alt, size + (frame > 3376 ? frame - 3376 : 0));
    stack_t ss = {.ss_sp = alt.lo, .ss_size = alt.size, .ss_flags = 0};
    CHECK(sigaltstack(&ss, NULL) == 0, "sigaltstack(%zu): %s", alt.size, strerror(errno));
    for (unsigned i = 0; i < rounds; i++)
        CHECK(pthread_kill(pthread_self(), SIGUSR1) == 0, "pthread_kill");
    CHECK(handled == rounds, "the handler ran %u times, not %u", handled, rounds);
    stack_t off = {.ss_flags = SS_DISABLE};
    CHECK(sigaltstack(&off, NULL) == 0, "sigaltstack(SS_DISABLE): %s", strerror(errno));
    printf("thread %u: %zu-byte alternate stack, %zu bytes used by the handler and the "
           "kernel's frame\n",
           index, alt.size, stack_used(&alt));
    stack_unmap(&alt);

    /* A coroutine. */
    struct small_stack cs;
    stack_map(&cs, size);
    struct coroutine co;
    current = &co;
    CHECK(getcontext(&co.self) == 0, "getcontext");
    co.self.uc_stack.ss_sp = cs.lo;
    co.self.uc_stack.ss_size = cs.size;
    co.self.uc_link = &co.thread;
    makecontext(&co.self, coroutine_body, 0);
    for (unsigned i = 0; i <= rounds; i++) /* the last switch ends the coroutine */
        CHECK(swapcontext(&co.thread, &co.self) == 0, "swapcontext");
    printf("thread %u: %zu-byte coroutine stack, %zu bytes used\n", index, cs.size,
           stack_used(&cs));
    stack_unmap(&cs);
    return NULL;
}

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: still running after 60 s\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND [ROUNDS]", argv[0]);
    prog_setup(argv[1]);
    if (argc > 2)
        rounds = (unsigned)strtoul(argv[2], NULL, 10);
    signal(SIGALRM, on_watchdog);
    alarm(WATCHDOG);
    setvbuf(stdout, NULL, _IOLBF, 0);

    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGUSR1, &sa, NULL) == 0, "sigaction");

    uint64_t before = prog_profiled() ? prog_stats().total_samples : 0;
    pthread_t t[THREADS];
    for (unsigned i = 1; i < THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, run, (void *)(uintptr_t)i) == 0, "pthread_create");
    run((void *)(uintptr_t)0);
    for (unsigned i = 1; i < THREADS; i++)
        pthread_join(t[i], NULL);
    if (prog_profiled()) {
        uint64_t after = prog_stats().total_samples;
        CHECK(after > before,
              "no sample was taken on the small stacks (%" PRIu64 " before, %" PRIu64 " after)",
              before, after);
        printf("%" PRIu64 " samples\n", after - before);
    }
    return 0;
}
