/* SPDX-License-Identifier: MIT */
/*
 * The dump signal (MEMPROF_SIGNAL) and the program's own signal dispositions. A program
 * started with the signal ignored (nohup, a shell's trap '' USR2, a supervisor) relies on a
 * stray one doing nothing: the plugin must leave an inherited SIG_IGN as it is (and say so
 * once on stderr, unless MEMPROF_QUIET=1), not install its handler, which would interrupt
 * the program's sleep(). Where it does install its handler, it does so with SA_RESTART, so
 * that the program's blocking calls are restarted. argv: BACKEND (prog.h); MEMPROF_OUTPUT is
 * set (the plugin installs no handler without it). The program runs itself again as children
 * with MEMPROF_SIGNAL=USR2:
 *
 *   ignored  the child starts with SIGUSR2 ignored: in main() it is still SIG_IGN; a
 *            SIGUSR2 made pending while blocked and released inside ppoll() does not end
 *            the wait early (a handler would: EINTR), and sleep(1) while another thread
 *            sends it SIGUSR2 every millisecond sleeps the whole second; stderr has one
 *            line about the signal being ignored (none with MEMPROF_QUIET=1).
 *   handled  the child starts with SIGUSR2 at its default: under the plugin the handler is
 *            installed with SA_RESTART, and a read() from a pipe while SIGUSR2 arrives is
 *            restarted, not failed with EINTR; nothing is said on stderr.
 * A watchdog turns a hang into a failure. The only time measured is the remaining time
 * sleep() reports, which must be 0.
 */
#include "children.h"

#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>

static atomic_bool stop_sending;
static pthread_t main_thread;

static void *send_usr2(void *arg)
{
    int pipe_w = *(int *)arg;
    for (int i = 0; !atomic_load(&stop_sending); i++) {
        pthread_kill(main_thread, SIGUSR2);
        struct timespec tick = {0, 1000 * 1000};
        nanosleep(&tick, NULL);
        if (pipe_w >= 0 && i == 20) /* handled: after 20 signals, the byte read() waits for */
            CHECK(write(pipe_w, "x", 1) == 1, "write");
    }
    return NULL;
}

static int ignored_child(void)
{
    struct sigaction sa;
    CHECK(sigaction(SIGUSR2, NULL, &sa) == 0 && sa.sa_handler == SIG_IGN,
          "SIGUSR2 was ignored when the program started; now its handler is %p",
          (void *)sa.sa_handler);

    /* Pending while blocked, delivered when ppoll() unblocks it: ignored, it is discarded
     * and the wait runs its course (returns 0); with a handler it ends the wait (EINTR). */
    sigset_t block, none;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR2);
    sigemptyset(&none);
    CHECK(pthread_sigmask(SIG_BLOCK, &block, NULL) == 0, "sigmask");
    CHECK(raise(SIGUSR2) == 0, "raise");
    struct timespec wait = {0, 100 * 1000 * 1000};
    int rc = ppoll(NULL, 0, &wait, &none);
    CHECK(rc == 0, "a SIGUSR2 the program ignores interrupted ppoll() (rc %d: %s)", rc,
          strerror(errno));
    CHECK(pthread_sigmask(SIG_UNBLOCK, &block, NULL) == 0, "sigmask");

    /* sleep() while another thread sends SIGUSR2 every millisecond. */
    main_thread = pthread_self();
    int no_pipe = -1;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, send_usr2, &no_pipe) == 0, "pthread_create");
    unsigned left = sleep(1);
    atomic_store(&stop_sending, true);
    pthread_join(t, NULL);
    CHECK(left == 0, "a SIGUSR2 the program ignores interrupted sleep(1) with %u s left", left);
    return 0;
}

static int handled_child(void)
{
    struct sigaction sa;
    CHECK(sigaction(SIGUSR2, NULL, &sa) == 0, "sigaction");
    if (prog_backend == PROG_PRELOAD)
        CHECK(sa.sa_handler != SIG_DFL && sa.sa_handler != SIG_IGN && (sa.sa_flags & SA_RESTART),
              "the plugin's SIGUSR2 handler is missing or lacks SA_RESTART (flags %#x)",
              (unsigned)sa.sa_flags);
    if (sa.sa_handler == SIG_DFL)
        return 0; /* plain: a SIGUSR2 would end the program */
    int p[2];
    CHECK(pipe2(p, O_CLOEXEC) == 0, "pipe");
    main_thread = pthread_self();
    pthread_t t;
    CHECK(pthread_create(&t, NULL, send_usr2, &p[1]) == 0, "pthread_create");
    char c;
    ssize_t n = read(p[0], &c, 1);
    int e = errno;
    atomic_store(&stop_sending, true);
    pthread_join(t, NULL);
    CHECK(n == 1, "read() from a pipe failed while SIGUSR2 arrived: %s", strerror(e));
    return 0;
}

struct child_setup {
    bool ignore, quiet;
};

static void set_up_child(void *arg)
{
    const struct child_setup *c = arg;
    signal(SIGUSR2, c->ignore ? SIG_IGN : SIG_DFL); /* inherited across exec */
    setenv("MEMPROF_SIGNAL", "USR2", 1);
    setenv("MEMPROF_QUIET", c->quiet ? "1" : "0", 1);
}

/* Runs this program as `mode` with SIGUSR2 ignored or at its default and MEMPROF_SIGNAL=USR2
 * (and MEMPROF_QUIET=1 if `quiet`); returns what it wrote on stderr. */
static char *run_child(const char *self, const char *backend, const char *mode, bool ignore,
                       bool quiet)
{
    static char buf[8192];
    char *argv[] = {(char *)self, (char *)backend, (char *)mode, NULL};
    struct child_setup setup = {ignore, quiet};
    int status = children_run_capture(argv, STDERR_FILENO, set_up_child, &setup, buf, sizeof buf);
    CHECK(WIFEXITED(status) && WEXITSTATUS(status) == 0,
          "the %s child (%s) failed (status %#x); its stderr: %s", mode, backend, status, buf);
    return buf;
}

static int count(const char *s, const char *what)
{
    int n = 0;
    for (const char *p = s; (p = strstr(p, what)); p += strlen(what))
        n++;
    return n;
}

int main(int argc, char **argv)
{
    CHECK(argc >= 2, "usage: %s BACKEND", argv[0]);
    alarm(60);
    if (argc > 2) {
        prog_setup(argv[1]);
        return !strcmp(argv[2], "ignored") ? ignored_child() : handled_child();
    }
    prog_setup(argv[1]);
    bool plugin = prog_backend == PROG_PRELOAD;
    const char *said = run_child(argv[0], argv[1], "ignored", true, false);
    CHECK(count(said, "MEMPROF_SIGNAL") == (plugin ? 1 : 0),
          "with SIGUSR2 ignored, %s line(s) about MEMPROF_SIGNAL expected on stderr: '%s'",
          plugin ? "one" : "no", said);
    said = run_child(argv[0], argv[1], "ignored", true, true);
    CHECK(!strstr(said, "memprof"), "MEMPROF_QUIET=1, yet: '%s'", said);
    said = run_child(argv[0], argv[1], "handled", false, false);
    CHECK(!strstr(said, "memprof"), "nothing to say with SIGUSR2 at its default: '%s'", said);
    printf("an inherited SIG_IGN of the dump signal stays (ppoll and sleep not interrupted, "
           "one line); the handler has SA_RESTART (read restarted)\n");
    return 0;
}
