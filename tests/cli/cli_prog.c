/* SPDX-License-Identifier: MIT */
/*
 * The program the `memprof` command tests run under `memprof run`: it allocates in named
 * functions (so profiles, reports and diffs have known sites), prints its pid so the tests
 * can find its profile file, and can wait for the test to act (periodic and signalled
 * dumps), fork and exec itself (children profiled into their own files), or exit with a
 * chosen status. Built with frame pointers and -g; the blocks stay live until exit.
 *
 *   cli-prog alloc N SIZE           N blocks of SIZE bytes in grow_cache(), N/4 in
 *                                   parse_input(); prints "pid P"
 *   cli-prog wait N SIZE FILE       the same, prints "ready P", then waits (at most 60 s)
 *                                   until FILE exists
 *   cli-prog spawn N SIZE [M]       runs "cli-prog alloc M SIZE" (M defaults to N) as a
 *                                   forked and exec'd child, waits for it, then allocates N
 *                                   blocks itself; prints "pid P" and "child C"
 *   cli-prog exit CODE              exits with CODE at once
 *   cli-prog sigint                 counts SIGINTs: prints "ready P", waits (at most 30 s)
 *                                   for the first, 300 ms more for duplicates, then prints
 *                                   "sigints N from-parent M from-kernel K" (sent by the
 *                                   parent process with kill, or by the terminal) and exits 0
 *   cli-prog mangled N SIZE         N blocks of SIZE bytes in a function whose symbol is the
 *                                   C++ name _ZN7cliprog4holdEmm (cliprog::hold(unsigned
 *                                   long, unsigned long)); prints "pid P"
 *   cli-prog wrapped N SIZE         N blocks of SIZE bytes through xmalloc() (an allocator
 *                                   wrapper of the default list) in fill_table(), N/2 through
 *                                   pool_alloc() (the program's own wrapper, itself calling
 *                                   xmalloc) in fill_pool(); prints "pid P"
 *   cli-prog freed N SIZE           N blocks of SIZE bytes in grow_cache(), all freed before
 *                                   exit (nothing live at the snapshot); prints "pid P"
 *   cli-prog signals                catches INT, TERM, HUP, QUIT, USR1 and USR2: prints
 *                                   "ready P", waits (at most 30 s) for one, then prints
 *                                   "caught SIGNO from-parent 0|1" and exits 0
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BLOCKS 1000000

/* Not static: exported (-rdynamic), so even a symbolizer without debug info names them. */
void grow_cache(size_t n, size_t size);
void parse_input(size_t n, size_t size);

static void *blocks[MAX_BLOCKS];
static size_t nblocks;

static void keep(void *p)
{
    if (!p) {
        perror("cli-prog: malloc");
        exit(3);
    }
    memset(p, 1, 1);
    if (nblocks < MAX_BLOCKS)
        blocks[nblocks++] = p;
}

__attribute__((noinline)) void grow_cache(size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        keep(malloc(size));
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void parse_input(size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        keep(malloc(size));
    __asm__ volatile("" ::: "memory");
}

static void allocate(size_t n, size_t size)
{
    grow_cache(n, size);
    parse_input(n / 4, size);
}

static volatile sig_atomic_t sigints, from_parent, from_kernel;

static void on_sigint(int signo, siginfo_t *si, void *uctx)
{
    (void)signo, (void)uctx;
    sigints++;
    if (si->si_code == SI_KERNEL)
        from_kernel++;
    else if (si->si_pid == getppid())
        from_parent++;
}

/* An xmalloc as GNU programs have it, and a wrapper of the program's own above it. */
void *xmalloc(size_t size);
void *pool_alloc(size_t size);
void fill_table(size_t n, size_t size);
void fill_pool(size_t n, size_t size);

__attribute__((noinline)) void *xmalloc(size_t size)
{
    void *p = malloc(size);
    if (!p)
        abort();
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void *pool_alloc(size_t size)
{
    void *p = xmalloc(size);
    __asm__ volatile("" ::: "memory");
    return p;
}

__attribute__((noinline)) void fill_table(size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        keep(xmalloc(size));
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void fill_pool(size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        keep(pool_alloc(size));
    __asm__ volatile("" ::: "memory");
}

/* A C function under a C++ symbol name, so the profile has a mangled name to demangle. */
void mangled_hold(size_t n, size_t size) __asm__("_ZN7cliprog4holdEmm");
__attribute__((noinline)) void mangled_hold(size_t n, size_t size)
{
    for (size_t i = 0; i < n; i++)
        keep(malloc(size));
}

static volatile sig_atomic_t caught, caught_from_parent;

static void on_signal(int signo, siginfo_t *si, void *uctx)
{
    (void)uctx;
    if (!caught) {
        caught = signo;
        caught_from_parent = si->si_pid == getppid();
    }
}

static void sleep_ms(long ms)
{
    struct timespec ts = {ms / 1000, (ms % 1000) * 1000 * 1000};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
        ;
}

static unsigned long arg(const char *s)
{
    char *end;
    errno = 0;
    unsigned long v = strtoul(s, &end, 10);
    if (errno || *end || !*s) {
        fprintf(stderr, "cli-prog: bad number '%s'\n", s);
        exit(2);
    }
    return v;
}

int main(int argc, char **argv)
{
    if (argc >= 2 && !strcmp(argv[1], "exit") && argc == 3)
        return (int)arg(argv[2]);
    if (argc == 4 && !strcmp(argv[1], "alloc")) {
        allocate(arg(argv[2]), arg(argv[3]));
        printf("pid %d\n", (int)getpid());
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "wrapped")) {
        fill_table(arg(argv[2]), arg(argv[3]));
        fill_pool(arg(argv[2]) / 2, arg(argv[3]));
        printf("pid %d\n", (int)getpid());
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "freed")) {
        grow_cache(arg(argv[2]), arg(argv[3]));
        for (size_t i = 0; i < nblocks; i++)
            free(blocks[i]);
        nblocks = 0;
        printf("pid %d\n", (int)getpid());
        return 0;
    }
    if (argc == 4 && !strcmp(argv[1], "mangled")) {
        mangled_hold(arg(argv[2]), arg(argv[3]));
        printf("pid %d\n", (int)getpid());
        return 0;
    }
    if (argc == 5 && !strcmp(argv[1], "wait")) {
        allocate(arg(argv[2]), arg(argv[3]));
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        struct stat st;
        for (int i = 0; i < 6000 && stat(argv[4], &st) != 0; i++)
            sleep_ms(10);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "sigint")) {
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_sigint;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGINT, &sa, NULL);
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (int i = 0; i < 3000 && !sigints; i++)
            sleep_ms(10);
        sleep_ms(300);
        printf("sigints %d from-parent %d from-kernel %d\n", (int)sigints, (int)from_parent,
               (int)from_kernel);
        return 0;
    }
    if (argc == 2 && !strcmp(argv[1], "signals")) {
        static const int signals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_signal;
        sa.sa_flags = SA_SIGINFO;
        sigemptyset(&sa.sa_mask);
        for (size_t i = 0; i < sizeof signals / sizeof *signals; i++)
            sigaction(signals[i], &sa, NULL);
        printf("ready %d\n", (int)getpid());
        fflush(stdout);
        for (int i = 0; i < 3000 && !caught; i++)
            sleep_ms(10);
        printf("caught %d from-parent %d\n", (int)caught, (int)caught_from_parent);
        return 0;
    }
    if ((argc == 4 || argc == 5) && !strcmp(argv[1], "spawn")) {
        fflush(stdout);
        pid_t child = fork();
        if (child < 0) {
            perror("cli-prog: fork");
            return 3;
        }
        if (child == 0) {
            execl("/proc/self/exe", argv[0], "alloc", argc == 5 ? argv[4] : argv[2], argv[3],
                  (char *)NULL);
            perror("cli-prog: exec");
            _exit(127);
        }
        int status;
        if (waitpid(child, &status, 0) != child || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
            fprintf(stderr, "cli-prog: the child failed\n");
            return 3;
        }
        allocate(arg(argv[2]), arg(argv[3]));
        printf("pid %d\nchild %d\n", (int)getpid(), (int)child);
        return 0;
    }
    fprintf(stderr, "usage: cli-prog alloc|wait|spawn|exit|sigint|signals ...\n");
    return 2;
}
