/* SPDX-License-Identifier: MIT */
/*
 * Threads that ask glibc for their own stack with pthread_getattr_np(), as language
 * runtimes do at start-up (Ruby's VM, Rust's std, garbage collectors that scan stacks).
 * glibc holds the thread's lock while it allocates in there (the initial thread reads
 * /proc/self/maps with getline(), every thread sizes a CPU set with realloc()), so a
 * profiler that asks pthread_getattr_np() for a stack's bounds while sampling such an
 * allocation waits for itself forever. Here the first allocation of the main thread and of
 * each new thread happens inside pthread_getattr_np() (at MEMPROF_RATE=1 every one is
 * sampled), with other threads asking about the main thread meanwhile. A watchdog turns a
 * deadlock into a failure. Afterwards, in a profiled run, the samples have stacks.
 * argv: BACKEND [THREADS] (default 32).
 */
#include "prog.h"

#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#define WATCHDOG_S 60

static pthread_t main_thread;

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: still running after 60 s: deadlock in pthread_getattr_np\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

/* Checks that `thread`'s stack as pthread_getattr_np() reports it is sane, and when it is the
 * caller's own, that it holds the caller's frame. */
static void check_stack_of(pthread_t thread)
{
    pthread_attr_t attr;
    void *addr = NULL;
    size_t size = 0;
    int rc = pthread_getattr_np(thread, &attr);
    CHECK(rc == 0, "pthread_getattr_np: %s", strerror(rc));
    CHECK(pthread_attr_getstack(&attr, &addr, &size) == 0 && size > 0, "no stack reported");
    pthread_attr_destroy(&attr);
    if (pthread_equal(thread, pthread_self())) {
        char *here = (char *)&attr;
        CHECK(here >= (char *)addr && here < (char *)addr + size,
              "the caller's frame is outside its reported stack");
    }
}

void *prog_stack_attrs_thread(void *arg);

__attribute__((noinline)) void *prog_stack_attrs_thread(void *arg)
{
    (void)arg;
    check_stack_of(pthread_self()); /* this thread's first allocations */
    check_stack_of(main_thread);
    char *p = malloc(4096);
    CHECK(p != NULL, "malloc failed");
    prog_touch(p, 1);
    free(p);
    return NULL;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND [THREADS]", argv[0]);
    int threads = argc > 2 ? atoi(argv[2]) : 32;
    signal(SIGALRM, on_watchdog);
    alarm(WATCHDOG_S);
    main_thread = pthread_self();
    /* Under the plugin this is the main thread's first sampled allocation. */
    check_stack_of(main_thread);
    prog_setup(argv[1]);
    check_stack_of(main_thread);

    pthread_t *t = calloc((size_t)threads, sizeof *t);
    CHECK(t != NULL, "calloc failed");
    for (int i = 0; i < threads; i++)
        CHECK(pthread_create(&t[i], NULL, prog_stack_attrs_thread, NULL) == 0,
              "pthread_create failed");
    for (int i = 0; i < threads; i++)
        pthread_join(t[i], NULL);
    free(t);

    if (prog_profiled()) {
        memprof_stats s = prog_stats();
        printf("%" PRIu64 " samples, %" PRIu64 " native frames in all\n", s.total_samples,
               s.stack_depth_total);
        if (prog_rate() == 1)
            CHECK(s.total_samples > (uint64_t)threads && s.stack_depth_total >= s.total_samples,
                  "at rate 1 every thread's allocations are sampled, each with a stack");
    }
    alarm(0);
    return 0;
}
