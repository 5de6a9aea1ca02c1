/* SPDX-License-Identifier: MIT */
/*
 * Threads with a pending deferred cancellation (pthread_cancel) that allocate. malloc,
 * calloc, realloc, posix_memalign and free are not cancellation points in glibc, so such a
 * thread must come out of every one of them alive and be cancelled only at its next real
 * cancellation point. A profiler whose sampled path makes a call that is a cancellation
 * point (getrandom() to seed a new thread, open() and read() of /proc/self/maps for the
 * stack's bounds, a write) kills the thread inside the allocator, with the program's mutex
 * still held: a program that waits for that mutex hangs. argv: BACKEND [ROUNDS] (prog.h).
 *
 *   alloc  ROUNDS threads, each created fresh (its first allocation takes the profiler's
 *          cold path at any rate), is cancelled while it waits at a barrier, then takes a
 *          mutex, allocates, reallocates and frees blocks of many sizes, releases the mutex
 *          and calls pthread_testcancel(). Each must reach pthread_testcancel() and end
 *          there (pthread_join says PTHREAD_CANCELED), with the mutex free.
 *   exit   a forked child whose thread, with a cancellation pending, allocates and calls
 *          exit(3): under the plugin exit() writes the profile (MEMPROF_OUTPUT, when set),
 *          which must neither be cut short by the cancellation nor leave the process
 *          running. The parent wants exit status 3 and, with MEMPROF_OUTPUT, the child's
 *          profile.
 * alarm() turns a hang into a failure; nothing is timed.
 */
#include "prog.h"

#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#define WATCHDOG_S 60

static pthread_barrier_t cancelled_barrier;
static pthread_mutex_t program_lock = PTHREAD_MUTEX_INITIALIZER;
static atomic_int reached_testcancel;

static void on_watchdog(int sig)
{
    (void)sig;
    static const char msg[] = "FAIL: still running after 60 s: a cancelled thread left a "
                              "lock held (it died inside the allocator)\n";
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(1);
}

/* One round of every allocation call, sizes from 1 byte to 1 MiB (blocks of 128 KiB or
 * more give their pages back when freed from the sample heap). */
void *prog_cancel_allocate(void *unused);

__attribute__((noinline)) void *prog_cancel_allocate(void *unused)
{
    (void)unused;
    for (size_t n = 1; n <= (1u << 20); n = n * 3 + 1) {
        char *p = malloc(n);
        CHECK(p != NULL, "malloc(%zu)", n);
        prog_touch(p, 1);
        char *q = calloc(1, n);
        CHECK(q != NULL && q[n - 1] == 0, "calloc(1, %zu)", n);
        p = realloc(p, n * 2 + 8); /* moves (a new slot size) */
        CHECK(p != NULL, "realloc(%zu)", n * 2 + 8);
        p = realloc(p, n / 2 + 1);
        CHECK(p != NULL, "realloc(%zu)", n / 2 + 1);
        void *a = NULL;
        CHECK(posix_memalign(&a, 64, n) == 0, "posix_memalign(64, %zu)", n);
        prog_touch(a, 2);
        free(a);
        free(q);
        free(p);
    }
    return NULL;
}

static void *cancelled_thread(void *arg)
{
    int rounds = *(int *)arg;
    /* No allocation before the cancellation is pending: the first one of this thread must
     * meet it (the profiler seeds a new thread's sampler there). */
    pthread_barrier_wait(&cancelled_barrier); /* not a cancellation point */
    pthread_barrier_wait(&cancelled_barrier); /* the main thread has cancelled us */
    pthread_mutex_lock(&program_lock);
    for (int i = 0; i < rounds; i++)
        prog_cancel_allocate(NULL);
    pthread_mutex_unlock(&program_lock);
    atomic_store(&reached_testcancel, 1);
    pthread_testcancel(); /* ends the thread here */
    return (void *)1;
}

static void alloc_phase(int threads, int rounds)
{
    for (int i = 0; i < threads; i++) {
        atomic_store(&reached_testcancel, 0);
        CHECK(pthread_barrier_init(&cancelled_barrier, NULL, 2) == 0, "barrier");
        pthread_t t;
        CHECK(pthread_create(&t, NULL, cancelled_thread, &rounds) == 0, "pthread_create");
        pthread_barrier_wait(&cancelled_barrier);
        CHECK(pthread_cancel(t) == 0, "pthread_cancel");
        pthread_barrier_wait(&cancelled_barrier);
        void *ret = NULL;
        CHECK(pthread_join(t, &ret) == 0, "pthread_join");
        CHECK(ret == PTHREAD_CANCELED, "thread %d was not cancelled (returned %p)", i, ret);
        CHECK(atomic_load(&reached_testcancel),
              "thread %d was cancelled inside the allocator, before pthread_testcancel()", i);
        int rc = pthread_mutex_trylock(&program_lock);
        CHECK(rc == 0, "thread %d died holding the program's mutex (a waiter would hang)", i);
        pthread_mutex_unlock(&program_lock);
        pthread_barrier_destroy(&cancelled_barrier);
    }
    printf("alloc: %d cancelled threads allocated %d rounds each and ended at "
           "pthread_testcancel()\n",
           threads, rounds);
}

/* In the child: a thread with a pending cancellation allocates and calls exit(3). */
static void *exiting_thread(void *arg)
{
    (void)arg;
    pthread_barrier_wait(&cancelled_barrier);
    pthread_barrier_wait(&cancelled_barrier);
    prog_cancel_allocate(NULL);
    exit(3);
}

static void exit_phase(void)
{
    const char *out = getenv("MEMPROF_OUTPUT");
    char path[4096] = "";
    if (out && prog_backend == PROG_PRELOAD) /* the child writes PATH.<pid> */
        CHECK(strlen(out) < 2048 && !strchr(out, '%'), "MEMPROF_OUTPUT without %% expected");
    fflush(NULL);
    pid_t pid = fork();
    CHECK(pid >= 0, "fork: %s", strerror(errno));
    if (pid == 0) {
        CHECK(pthread_barrier_init(&cancelled_barrier, NULL, 2) == 0, "barrier");
        pthread_t t;
        CHECK(pthread_create(&t, NULL, exiting_thread, NULL) == 0, "pthread_create");
        pthread_barrier_wait(&cancelled_barrier);
        CHECK(pthread_cancel(t) == 0, "pthread_cancel");
        pthread_barrier_wait(&cancelled_barrier);
        pthread_join(t, NULL);
        /* Only if the thread was cancelled inside exit(): the process did not end. */
        static const char msg[] = "FAIL: exit() in a thread with a pending cancellation was "
                                  "cancelled instead of ending the process\n";
        (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
        _exit(99);
    }
    int status;
    CHECK(waitpid(pid, &status, 0) == pid, "waitpid");
    CHECK(WIFEXITED(status), "the child was killed by signal %d",
          WIFSIGNALED(status) ? WTERMSIG(status) : 0);
    CHECK(WEXITSTATUS(status) == 3, "the child's exit status is %d, not exit()'s 3",
          WEXITSTATUS(status));
    if (out && prog_backend == PROG_PRELOAD) {
        snprintf(path, sizeof path, "%s.%d", out, (int)pid);
        struct stat st;
        CHECK(stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0,
              "the child's exit-time profile %s is missing or empty", path);
        unlink(path);
    }
    printf("exit: a thread with a pending cancellation called exit(3); status 3%s\n",
           path[0] ? ", profile written" : "");
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND [ROUNDS]", argv[0]);
    signal(SIGALRM, on_watchdog);
    alarm(WATCHDOG_S);
    prog_setup(argv[1]);
    int rounds = argc > 2 ? atoi(argv[2]) : 1;
    alloc_phase(16, rounds);
    exit_phase();
    if (prog_profiled()) {
        memprof_stats s = prog_stats();
        printf("%" PRIu64 " samples\n", s.total_samples);
        if (prog_rate() == 1)
            CHECK(s.total_samples > 16, "at rate 1 every allocation is sampled");
    }
    alarm(0);
    return 0;
}
