/* SPDX-License-Identifier: MIT */
/*
 * exit() from a signal handler. Many daemons end from their SIGTERM handler with exit(),
 * which is not async-signal-safe but works while their atexit handlers take no lock. The
 * plugin's exit-time profile is written from exit(), so it must neither wait for what the
 * interrupted code holds nor use what it left half changed: glibc's malloc in a
 * multi-threaded process holds an arena's lock (the profile's own allocations waited for it
 * for ever), in a single-threaded one takes no lock at all (they corrupted the arena, and
 * glibc aborted); the dynamic loader's lock (dl_iterate_phdr) is one the resolver needs.
 * argv: BACKEND (prog.h); MEMPROF_OUTPUT=PATH (no %p) is set, and each child writes
 * PATH.<pid>.
 *
 *   malloc  30 children (15 single-threaded, 15 with a second thread that allocates too)
 *           allocate, reallocate and free in a loop; each gets SIGTERM, whose handler calls
 *           exit(0).
 *   loader  4 children walk the loaded objects with dl_iterate_phdr() in a loop (the loader's
 *           lock held most of the time); each gets SIGTERM likewise.
 * Each child is this program run again (so that the plugin starts in it with the child's
 * stderr, a file of its own). Every child must end with status 0, and under the plugin
 * either have written its profile or have said in one line on stderr why there is none
 * (the exit-time profile gives up when its writer can make no progress). A child that has
 * not ended 30 s after its SIGTERM has hung (the run then fails and reports how many);
 * nothing else is timed.
 */
#include "children.h"

#include <link.h>
#include <pthread.h>
#include <stdbool.h>

#define MALLOC_CHILDREN 30
#define LOADER_CHILDREN 4
#define CHILDREN        (MALLOC_CHILDREN + LOADER_CHILDREN)
#define HANG_S          30

static void on_term(int sig)
{
    (void)sig;
    exit(0); /* what the daemons do */
}

/* Allocates for ever: a ring of blocks of many sizes, replaced, grown and freed. */
static void *allocate(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg;
    static __thread void *ring[256];
    for (;;) {
        seed = seed * 1103515245u + 12345u;
        unsigned k = (seed >> 8) % 256;
        if (seed & 1) {
            free(ring[k]);
            ring[k] = malloc(16 + (seed >> 12) % 70000);
        } else {
            void *p = realloc(ring[k], 16 + (seed >> 12) % 3000);
            if (p)
                ring[k] = p;
        }
        prog_touch(ring[k], 1);
    }
    return NULL;
}

static int count_objects(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    for (volatile int i = 0; i < 1000; i++) /* hold the loader's lock a while */
        ;
    *(size_t *)data += info->dlpi_phnum;
    return 0;
}

/* The child's work: `loader` walks the loaded objects, else allocates (`threaded`: on two
 * threads). `ready` gets a byte once SIGTERM would find the child at work. */
static int child(int ready, bool loader, bool threaded, unsigned seed)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_term;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTERM, &sa, NULL);
    if (threaded) {
        /* SIGTERM is for the main thread, whatever it is doing. */
        sigset_t term, old;
        sigemptyset(&term);
        sigaddset(&term, SIGTERM);
        pthread_sigmask(SIG_BLOCK, &term, &old);
        pthread_t t;
        if (pthread_create(&t, NULL, allocate, (void *)(uintptr_t)(seed * 7 + 1)) != 0)
            _exit(3);
        pthread_sigmask(SIG_SETMASK, &old, NULL);
    }
    for (int i = 0; i < 1000; i++) /* some of it live at exit */
        prog_touch(malloc(100 + (unsigned)i), 1);
    (void)!write(ready, "x", 1);
    close(ready);
    if (!loader)
        allocate((void *)(uintptr_t)seed);
    for (size_t n = 0;;)
        dl_iterate_phdr(count_objects, &n);
    return 1;
}

/* What the parent learns of its children as they end. */
struct reaped {
    bool plugin;
    const char *out;
    char (*errs)[4200]; /* each child's stderr file */
    int failed, written, said;
};

static void child_ended(int c, pid_t r, int status, void *ctx)
{
    struct reaped *rp = ctx;
    char err[512] = "";
    int fd = open(rp->errs[c], O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        ssize_t n = read(fd, err, sizeof err - 1);
        err[n > 0 ? n : 0] = 0;
        close(fd);
    }
    unlink(rp->errs[c]);
    if (!WIFEXITED(status) || WEXITSTATUS(status) != 0) {
        fprintf(stderr, "%s child %d ended with status %#x (%s)%s%s\n",
                c < MALLOC_CHILDREN ? "malloc" : "loader", (int)r, status,
                WIFSIGNALED(status) ? strsignal(WTERMSIG(status)) : "exit status",
                err[0] ? "; its stderr: " : "", err);
        rp->failed++;
        return;
    }
    if (!rp->plugin)
        return;
    char path[4200];
    snprintf(path, sizeof path, "%s.%d", rp->out, (int)r);
    struct stat st;
    if (stat(path, &st) == 0 && st.st_size > 0) {
        rp->written++;
    } else if (strstr(err, "memprof: no exit-time profile")) {
        rp->said++;
    } else {
        fprintf(stderr, "child %d wrote no profile and said nothing: '%s'\n", (int)r, err);
        rp->failed++;
    }
    unlink(path);
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND", argv[0]);
    prog_setup(argv[1]);
    if (argc == 5) /* a child: BACKEND malloc|loader THREADS SEED, fd 3 its ready pipe */
        return child(3, !strcmp(argv[2], "loader"), atoi(argv[3]) == 2, (unsigned)atoi(argv[4]));
    const char *out = getenv("MEMPROF_OUTPUT");
    bool plugin = prog_backend == PROG_PRELOAD;
    CHECK(!plugin || (out && !strchr(out, '%') && strlen(out) < 2048),
          "MEMPROF_OUTPUT without %% expected under the plugin");

    pid_t pids[CHILDREN];
    char errs[CHILDREN][4200];
    int ready[2];
    CHECK(pipe2(ready, O_CLOEXEC) == 0, "pipe");
    for (int c = 0; c < CHILDREN; c++) {
        /* Each child's stderr goes to a file of its own, for the one line it may write. */
        snprintf(errs[c], sizeof errs[c], "%s.stderr.%d", plugin ? out : "/tmp/handler-exit", c);
        fflush(NULL);
        pid_t pid = fork();
        CHECK(pid >= 0, "fork: %s", strerror(errno));
        if (pid == 0) {
            int fd = open(errs[c], O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
            if (fd < 0 || dup2(fd, STDERR_FILENO) < 0 || dup2(ready[1], 3) != 3)
                _exit(4);
            /* A program of its own: its profile is PATH.<pid> only if it says so. */
            char own[4200], threads[8], seed[16];
            snprintf(own, sizeof own, "%s.%%p", plugin ? out : "");
            if (plugin)
                setenv("MEMPROF_OUTPUT", own, 1);
            snprintf(threads, sizeof threads, "%d", c % 2 + 1);
            snprintf(seed, sizeof seed, "%d", c + 1);
            execl(argv[0], argv[0], argv[1], c >= MALLOC_CHILDREN ? "loader" : "malloc", threads,
                  seed, (char *)NULL);
            _exit(127);
        }
        pids[c] = pid;
    }
    close(ready[1]);
    for (int c = 0; c < CHILDREN; c++) {
        char x;
        CHECK(read(ready[0], &x, 1) == 1, "a child died before it was ready");
    }
    close(ready[0]);
    struct timespec settle = {0, 100 * 1000 * 1000}; /* all of them at work */
    nanosleep(&settle, NULL);
    for (int c = 0; c < CHILDREN; c++)
        kill(pids[c], SIGTERM);

    struct reaped rp = {plugin, out, errs, 0, 0, 0};
    int left = children_reap(pids, CHILDREN, HANG_S, child_ended, &rp);
    for (int c = 0; c < CHILDREN; c++)
        if (pids[c]) /* hung, and killed */
            unlink(errs[c]);
    CHECK(left == 0, "%d of %d children hung in exit() called from their SIGTERM handler", left,
          CHILDREN);
    CHECK(rp.failed == 0, "%d of %d children failed", rp.failed, CHILDREN);
    printf("%d children called exit() from their SIGTERM handler and ended", CHILDREN);
    if (plugin)
        printf(": %d wrote their profile, %d said why not", rp.written, rp.said);
    printf("\n");
    return 0;
}
