/* SPDX-License-Identifier: MIT */
/*
 * `memprof run`'s program, as a child of this command: its environment for the plugin, the
 * exec, the signals forwarded to it, and the wait.
 *
 * Only the child's environment gets LD_PRELOAD: this process is never profiled, and it reads
 * the profile afterwards with the static pprof reader.
 *
 * Signals: SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and the --signal dump signal
 * are forwarded to the program when another process sent them to this one (`kill`), so
 * that killing this command kills the program, and a dump signal reaches it whichever of
 * the two it is sent to. A signal the terminal sends (Ctrl-C) goes to the whole foreground
 * process group, program included, so it is not forwarded a second time; si_code tells the
 * two apart (SI_KERNEL for the terminal). What cannot be forwarded (SIGKILL, or this command
 * crashing) must not leave the program running unnoticed with nobody to report on it: the
 * program gets SIGKILL when this command dies (PR_SET_PDEATHSIG, set before the exec).
 *
 * Interpreters: when the program is a CPython, Ruby or PHP interpreter (or a script run by
 * one), the child's environment also loads that interpreter's binding, which joins the
 * plugin's engine with the interpreter's frames and allocator (runtimes.c); --no-runtime
 * leaves the environment alone.
 *
 * The exec of the program is checked through a close-on-exec pipe: the forked child writes
 * errno to it if execvp fails, so a missing program is reported once, by this process, with
 * a shell's exit status (127 not found, 126 not executable).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/values.h"
#include "run.h"
#include "runtimes.h"

/* ---- signals -------------------------------------------------------------------------------- */

static volatile pid_t child_pid;

static void forward(int signo, siginfo_t *si, void *uctx)
{
    (void)uctx;
    int saved = errno;
    /* SI_KERNEL: sent by the terminal to the whole process group, the program included. */
    if (child_pid > 0 && si->si_code != SI_KERNEL && si->si_pid != child_pid)
        kill(child_pid, signo);
    errno = saved;
}

bool memprof_cli_child_prepare(const struct run_options *o, struct run_child *c)
{
    if (pipe2(c->pipefd, O_CLOEXEC) != 0) {
        memprof_cli_error("cannot start %s: %s", o->argv[0], strerror(errno));
        return false;
    }
    /* Block the forwarded signals until the handlers know the child's pid. */
    const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2, o->signo};
    memcpy(c->forwarded, forwarded, sizeof forwarded);
    c->nforwarded = o->signo ? 7 : 6; /* a --signal among the six is set up twice */
    sigset_t block;
    sigemptyset(&block);
    for (size_t i = 0; i < c->nforwarded; i++)
        sigaddset(&block, c->forwarded[i]);
    sigprocmask(SIG_BLOCK, &block, &c->oldmask);
    /* An inherited "SIGCHLD ignored" would make the kernel reap the child before waitpid. */
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigemptyset(&dfl.sa_mask);
    sigaction(SIGCHLD, &dfl, &c->oldchld);
    return true;
}

/* Forwards the signals to the child, whose pid the handler now knows, and unblocks them. */
static void forward_signals(const struct run_child *c)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = forward;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < c->nforwarded; i++) {
        struct sigaction old;
        /* A signal this process ignores (nohup, a background job) stays ignored. */
        if (sigaction(c->forwarded[i], NULL, &old) == 0 && old.sa_handler == SIG_IGN)
            continue;
        sigaction(c->forwarded[i], &sa, NULL);
    }
    sigprocmask(SIG_SETMASK, &c->oldmask, NULL);
}

/* ---- the child ------------------------------------------------------------------------------ */

static bool set_env(const char *name, const char *value)
{
    return setenv(name, value, 1) == 0;
}

/* The plugin's environment in the child: LD_PRELOAD and the MEMPROF_* options. */
static bool plugin_env(const struct run_options *o, const char *plugin, const struct paths *ps)
{
    const char *old = getenv("LD_PRELOAD");
    char preload[2 * PATH_MAX];
    /* The plugin goes first: the first preloaded object defining malloc wins, and the plugin
     * finds the next one (an allocator preloaded after it) with dlsym(RTLD_NEXT). */
    if (old && *old)
        snprintf(preload, sizeof preload, "%s:%s", plugin, old);
    else
        snprintf(preload, sizeof preload, "%s", plugin);
    bool ok = set_env("LD_PRELOAD", preload) && set_env("MEMPROF_OUTPUT", ps->tmpl_abs) &&
              set_env("MEMPROF_FORMAT",
                      memprof__format_name(memprof_cli_run_deferred(o) ? MEMPROF_FORMAT_PPROF
                                                                       : o->format)) &&
              set_env("MEMPROF_START", "1");
    if (ok && o->rate)
        ok = set_env("MEMPROF_RATE", o->rate);
    if (ok && o->interval)
        ok = set_env("MEMPROF_INTERVAL", o->interval);
    if (ok && o->signal_s)
        ok = set_env("MEMPROF_SIGNAL", o->signal_s);
    if (ok && o->unwind)
        ok = set_env("MEMPROF_UNWIND", o->unwind);
    if (ok && o->temp_threshold)
        ok = set_env("MEMPROF_TEMP_THRESHOLD", o->temp_threshold);
    if (ok && o->quiet)
        ok = set_env("MEMPROF_QUIET", "1");
    if (ok)
        ok = set_env("MEMPROF_FOLLOW", o->no_follow ? "0" : "1");
    /* The processes the program starts write no profile when they took no sample (most of a
     * build's shells and short tools at the default rate: their files cost more than the
     * rest of the profiler); the program itself, this process, always writes its own. Unless
     * the user chose. */
    char keep[32];
    snprintf(keep, sizeof keep, "0:%ld", (long)getpid());
    if (ok && !getenv("MEMPROF_WRITE_EMPTY"))
        ok = set_env("MEMPROF_WRITE_EMPTY", keep);
    if (ok && memprof_cli_run_deferred(o))
        ok = set_env("MEMPROF_SYMBOLIZE", "0");
    if (ok && !o->no_runtime) {
        char name[64];
        enum memprof_cli_runtime rt = memprof_cli_runtime_of(o->argv, name, sizeof name);
        ok = memprof_cli_runtime_setup(rt, name, o->quiet);
    }
    return ok;
}

/* In the forked child: the environment for the plugin, then exec. Never returns. */
static void exec_child(const struct run_options *o, const char *plugin, const struct paths *ps,
                       const struct run_child *c, pid_t parent)
{
    /* The program must not outlive this command unnoticed; and if the command died before
     * the request was made, it is not started at all. */
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent)
        _exit(CLI_EXIT_CANNOT);
    /* The program inherits what this command inherited: signal mask and SIGCHLD. */
    sigaction(SIGCHLD, &c->oldchld, NULL);
    sigprocmask(SIG_SETMASK, &c->oldmask, NULL);
    int e = ENOMEM;
    if (plugin_env(o, plugin, ps)) {
        execvp(o->argv[0], o->argv);
        e = errno;
    }
    (void)!write(c->pipefd[1], &e, sizeof e);
    _exit(CLI_EXIT_NOTFOUND);
}

bool memprof_cli_child_start(const struct run_options *o, const char *plugin, struct paths *ps,
                             struct run_child *c)
{
    fflush(NULL);
    pid_t parent = getpid();
    pid_t pid = fork();
    if (pid < 0) {
        int e = errno;
        sigprocmask(SIG_SETMASK, &c->oldmask, NULL);
        close(c->pipefd[0]);
        close(c->pipefd[1]);
        memprof_cli_error("cannot start %s: %s", o->argv[0], strerror(e));
        return false;
    }
    if (pid == 0) {
        close(c->pipefd[0]);
        exec_child(o, plugin, ps, c, parent);
    }
    close(c->pipefd[1]);
    child_pid = pid;
    c->pid = ps->main_pid = pid;
    forward_signals(c);
    return true;
}

int memprof_cli_child_wait(const struct run_options *o, struct run_child *c, int *status)
{
    int exec_errno = 0;
    ssize_t r;
    while ((r = read(c->pipefd[0], &exec_errno, sizeof exec_errno)) < 0 && errno == EINTR)
        ;
    close(c->pipefd[0]);
    while (waitpid(c->pid, status, 0) < 0) {
        if (errno != EINTR) {
            memprof_cli_error("waiting for %s: %s", o->argv[0], strerror(errno));
            return CLI_EXIT_CANNOT;
        }
    }
    child_pid = 0;
    if (r == (ssize_t)sizeof exec_errno) {
        if (exec_errno == ENOENT && !strchr(o->argv[0], '/')) {
            memprof_cli_error("%s: command not found", o->argv[0]);
            return CLI_EXIT_NOTFOUND;
        }
        memprof_cli_error("cannot run %s: %s", o->argv[0], strerror(exec_errno));
        return exec_errno == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
    }
    return -1;
}
