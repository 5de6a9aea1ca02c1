/* SPDX-License-Identifier: MIT */
/*
 * A signal handler that allocates while its thread is inside the dynamic loader. C++
 * exception unwinding, backtrace() and programs of their own walk the loaded objects with
 * dl_iterate_phdr() or ask dladdr(), under the loader's lock, a recursive mutex; a handler
 * that runs in the middle of its lock or unlock and takes it again waits for itself for
 * ever. The handler itself takes no loader lock, but its allocations are sampled, and the
 * sampled path must not take one either (libunwind's unw_backtrace() calls dl_iterate_phdr
 * on an address it has not seen). argv: BACKEND [ROUNDS] (prog.h).
 *
 * Four children, one after another, each this program run again (a fresh process, as the
 * profiler sees a program: not a fork() child, where it unwinds differently) and
 * single-threaded: a timer sends SIGALRM every 50 us, whose handler frees and allocates
 * blocks of 24 to 2,544 bytes; meanwhile the child calls dl_iterate_phdr(), dladdr() and
 * backtrace() ROUNDS times (default 100,000). Every child must end with status 0; one that
 * has not ended 30 s after it started has hung (the run then fails). Nothing else is timed.
 */
#include "children.h"

#include <execinfo.h>
#include <link.h>
#include <sys/time.h>

#define CHILDREN 4
#define HANG_S   30

static volatile sig_atomic_t ticks;
static void *ring[64];

static void on_alarm(int sig)
{
    (void)sig;
    unsigned k = (unsigned)ticks++ % 64;
    free(ring[k]);
    ring[k] = malloc(24 + k * 40);
    prog_touch(ring[k], 1);
}

static int visit(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(size_t *)data += info->dlpi_phnum;
    return 0;
}

static int child(long rounds)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_alarm;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    CHECK(sigaction(SIGALRM, &sa, NULL) == 0, "sigaction");
    struct itimerval every = {{0, 50}, {0, 50}};
    CHECK(setitimer(ITIMER_REAL, &every, NULL) == 0, "setitimer");
    size_t phdrs = 0;
    for (long i = 0; i < rounds; i++) {
        dl_iterate_phdr(visit, &phdrs);
        Dl_info info;
        CHECK(dladdr((void *)child, &info) != 0, "dladdr");
        void *frames[32];
        backtrace(frames, 32);
    }
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    return 0;
}

static void keep_status(int index, pid_t pid, int status, void *ctx)
{
    (void)index;
    (void)pid;
    *(int *)ctx = status;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND [ROUNDS]", argv[0]);
    prog_setup(argv[1]);
    long rounds = argc > 2 ? atol(argv[2]) : 100000;
    if (argc > 3) { /* a child: BACKEND ROUNDS child */
        void *warm[1];
        backtrace(warm, 1); /* glibc loads libgcc_s on first use: not in the handler */
        return child(rounds);
    }
    char arg[32];
    snprintf(arg, sizeof arg, "%ld", rounds);
    for (int c = 0; c < CHILDREN; c++) {
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            execl(argv[0], argv[0], argv[1], arg, "child", (char *)NULL);
            _exit(127);
        }
        pid_t pids[1] = {pid};
        int status = 0;
        int hung = children_reap(pids, 1, HANG_S, keep_status, &status);
        CHECK(hung == 0,
              "child %d hung: a SIGALRM handler that allocates deadlocked while the "
              "child was inside dl_iterate_phdr(), dladdr() or backtrace()",
              c);
        CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0, "child %d ended with status %#x", c,
              status);
    }
    printf("%d children, %ld rounds of dl_iterate_phdr, dladdr and backtrace each, under a "
           "SIGALRM handler that allocates every 50 us\n",
           CHILDREN, rounds);
    return 0;
}
