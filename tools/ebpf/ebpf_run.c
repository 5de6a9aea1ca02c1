/* SPDX-License-Identifier: MIT */
/*
 * `memprof run --ebpf -- PROGRAM`: runs a program with uprobes on its allocator entry
 * points instead of the preload plugin, so static programs and Rust programs whose global
 * allocator never calls malloc are profiled too, and nothing is loaded into the program.
 *
 * The program is started under ptrace, for two moments only: it stops itself before the
 * exec, while the probes are attached (a uprobe is set on a file; the kernel puts it into
 * the program's mappings of that file when they appear, so libc's probes work although
 * libc is mapped after the exec), and it stops at its exit (PTRACE_EVENT_EXIT), while its
 * maps can still be read, so the last samples' frames get their modules. Children it
 * forks are traced as well (below: each with a trace of its own). Every other stop is a
 * signal for the program, passed on as it came. Which libc: the one this command
 * runs with, the one a dynamically linked program on this system loads (a script's
 * interpreter too, executed in the same process); a static program is probed in itself.
 *
 * Signals sent to this command by another process (kill) are forwarded to the program, as
 * `memprof run` does; those from the terminal reach the program directly.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/values.h"
#include "cli.h"
#include "ebpf_cli.h"
#include "elfscan.h"
#include "procmaps.h"
#include "trace.h"

#define POLL_MS       50
#define RESCAN_ROUNDS 10 /* the maps are read again every 500 ms */

static volatile pid_t child_pid;

static void forward(int signo, siginfo_t *si, void *uctx)
{
    (void)uctx;
    if (si->si_code != SI_KERNEL && child_pid > 0)
        kill(child_pid, signo);
}

/* PROGRAM as execvp would find it. */
static bool find_program(const char *name, char *out)
{
    if (strchr(name, '/')) {
        snprintf(out, PATH_MAX, "%s", name);
        return access(out, X_OK) == 0;
    }
    const char *path = getenv("PATH");
    if (!path || !*path)
        path = "/usr/local/bin:/usr/bin:/bin";
    while (*path) {
        size_t n = strcspn(path, ":");
        if (n && n < PATH_MAX - 2 &&
            snprintf(out, PATH_MAX, "%.*s/%s", (int)n, path, name) < PATH_MAX &&
            access(out, X_OK) == 0) {
            struct stat st;
            if (stat(out, &st) == 0 && S_ISREG(st.st_mode))
                return true;
        }
        path += n + (path[n] == ':');
    }
    return false;
}

/* The C library this command runs with: where the program's malloc will be. */
static bool own_libc(char *out)
{
    Dl_info info;
    if (!dladdr((void *)(uintptr_t)malloc, &info) || !info.dli_fname)
        return false;
    return realpath(info.dli_fname, out) != NULL;
}

static void start_child(char *path, char **argv, int errfd)
{
    prctl(PR_SET_PDEATHSIG, SIGKILL);
    if (ptrace(PTRACE_TRACEME, 0, NULL, NULL) == 0)
        raise(SIGSTOP);
    execv(path, argv);
    int e = errno;
    if (write(errfd, &e, sizeof e) < 0)
        _exit(CLI_EXIT_NOEXEC);
    _exit(e == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC);
}

/* The program's status as a shell reports it. */
static int exit_code(int status)
{
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
}

struct run_ebpf {
    uint64_t rate;
    const char *output;
    memprof_format format;
    bool quiet;
    char **argv;
};

/* ---- children ------------------------------------------------------------------------
 * A child the program forks is traced too (PTRACE_O_TRACEFORK: it starts stopped), with a
 * trace of its own: the BPF program is loaded for its pid, its probes set on the files it
 * has mapped, and it writes its own profile (the output name's %p is its pid) at its exit.
 * Probes belong to one process, so nothing else on the system pays for them. Children are
 * followed only when each gets a profile of its own: with -o naming one file for all, not.
 * What a forked child holds from its parent is not in its profile (as after an attach).
 */
#define MAX_CHILDREN 64

struct child {
    pid_t pid;
    struct memprof_ebpf_trace *t; /* NULL: not traced (no probe to set, or out of room) */
    bool started;                 /* its first stop was seen (and its trace started) */
    bool finished;
    char name[NAME_MAX + 1];
    char out[PATH_MAX];
};

struct children {
    struct child c[MAX_CHILDREN];
    size_t n;
    bool follow;
};

static struct child *find_child(struct children *cs, pid_t pid)
{
    for (size_t i = 0; i < cs->n; i++)
        if (cs->c[i].pid == pid)
            return &cs->c[i];
    return NULL;
}

/* The process's command name (after an exec, the program's). */
static void comm_of(pid_t pid, char *out, size_t size)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
    FILE *f = fopen(p, "re");
    if (f) {
        if (fgets(out, (int)size, f))
            out[strcspn(out, "\n")] = 0;
        fclose(f);
    }
}

/* A child ptrace attached, known from its parent's fork event or its own first stop. */
static struct child *add_child(struct children *cs, pid_t pid, const char *parent_name)
{
    if (cs->n == MAX_CHILDREN)
        return NULL;
    struct child *c = &cs->c[cs->n++];
    memset(c, 0, sizeof *c);
    c->pid = pid;
    snprintf(c->name, sizeof c->name, "%.*s", NAME_MAX, parent_name);
    return c;
}

/* The child `w` reported a fork: its child is known before that one's first stop, so that
 * it is let go, not killed, if this command ends first (release_children()). A fork event
 * can also come after the new child already exited: it is then added again, and found
 * gone at the end. */
static void note_fork(struct children *cs, pid_t w, const char *name)
{
    unsigned long pid;
    if (ptrace(PTRACE_GETEVENTMSG, w, NULL, &pid) == 0 && !find_child(cs, (pid_t)pid))
        add_child(cs, (pid_t)pid, name);
}

/* A child at its first stop: its trace is started before it runs. */
static void trace_new_child(struct children *cs, const struct run_ebpf *o, struct child *c)
{
    c->started = true;
    comm_of(c->pid, c->name, sizeof c->name);
    pid_t pid = c->pid;
    if (!cs->follow || !memprof__ebpf_output_path(o->output, c->name, o->format, pid, c->out))
        return;
    static char paths[256][PATH_MAX];
    unsigned n = memprof__ebpf_mapped_files(pid, paths, 256);
    if (!n)
        return; /* gone already */
    struct memprof_ebpf_file files[256];
    for (unsigned i = 0; i < n; i++)
        files[i] = (struct memprof_ebpf_file){paths[i], true};
    if (memprof__ebpf_trace_start("run", pid, o->rate, files, n, &c->t) != 0)
        c->t = NULL; /* said in one line; the child runs untraced */
    else if (!o->quiet)
        memprof_cli_error("run --ebpf: following child process %d", (int)pid);
}

static void finish_child(struct child *c, const struct run_ebpf *o)
{
    if (!c->t || c->finished)
        return;
    c->finished = true;
    struct memprof_ebpf_output eo = {
        .path = c->out, .format = o->format, .program = c->name, .quiet = o->quiet};
    memprof__ebpf_trace_finish(c->t, &eo);
}

/* A wait status of a traced process other than the program itself. Its first stop may
 * come before its parent's fork event. */
static void child_status(struct children *cs, const struct run_ebpf *o, pid_t w, int status,
                         const char *parent_name)
{
    struct child *c = find_child(cs, w);
    if (!c && !(c = add_child(cs, w, parent_name))) {
        if (WIFSTOPPED(status)) /* out of room: let go untraced */
            ptrace(PTRACE_DETACH, w, NULL, NULL);
        return;
    }
    if (WIFEXITED(status) || WIFSIGNALED(status)) {
        finish_child(c, o); /* without an exit stop: frames may lack names */
        memprof__ebpf_trace_free(c->t);
        *c = cs->c[--cs->n];
        return;
    }
    if (!WIFSTOPPED(status))
        return;
    int sig = WSTOPSIG(status), event = status >> 16;
    if (!c->started) {
        trace_new_child(cs, o, c);
        sig = sig == SIGSTOP ? 0 : sig; /* its start */
    } else if (sig == SIGTRAP && event) {
        if (event == PTRACE_EVENT_EXEC)
            comm_of(w, c->name, sizeof c->name);
        if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK)
            note_fork(cs, w, c->name);
        if (event == PTRACE_EVENT_EXIT)
            finish_child(c, o);
        sig = 0;
    }
    ptrace(PTRACE_CONT, w, NULL, (void *)(long)sig);
}

static void poll_children(struct children *cs, bool rescan, bool quiet)
{
    for (size_t i = 0; i < cs->n; i++) {
        if (!cs->c[i].t || cs->c[i].finished)
            continue;
        memprof__ebpf_trace_poll(cs->c[i].t, 0);
        if (rescan)
            memprof__ebpf_trace_rescan(cs->c[i].t, quiet);
    }
}

/* The program is gone: children still running write what they have and are let go (the
 * tracer's exit would kill them: PTRACE_O_EXITKILL). */
static void release_children(struct children *cs, const struct run_ebpf *o)
{
    for (size_t i = 0; i < cs->n; i++) {
        struct child *c = &cs->c[i];
        int st;
        if (!c->started) {
            /* Its first stop is on its way (or it is gone: ECHILD). */
            if (waitpid(c->pid, &st, __WALL) == c->pid && WIFSTOPPED(st))
                ptrace(PTRACE_DETACH, c->pid, NULL, NULL);
            continue;
        }
        finish_child(c, o);
        memprof__ebpf_trace_free(c->t);
        if (kill(c->pid, SIGSTOP) == 0) {
            while (waitpid(c->pid, &st, __WALL) == c->pid && WIFSTOPPED(st) &&
                   WSTOPSIG(st) != SIGSTOP)
                ptrace(PTRACE_CONT, c->pid, NULL, (void *)(long)WSTOPSIG(st));
            ptrace(PTRACE_DETACH, c->pid, NULL, (void *)(long)SIGCONT);
        }
    }
    cs->n = 0;
}

static int trace_child(const struct run_ebpf *o, char *path)
{
    char libc[PATH_MAX];
    /* A static program defines its malloc; any other, a script included (its interpreter
     * is executed in the same process), uses the C library. */
    struct memprof_ebpf_elf scan;
    bool dynamic = memprof__ebpf_elf_is_dynamic(path) ||
                   memprof__ebpf_elf_scan(path, false, &scan) == -ENOEXEC;
    struct memprof_ebpf_file files[2] = {{path, !dynamic}};
    unsigned nfiles = 1;
    if (dynamic && own_libc(libc))
        files[nfiles++] = (struct memprof_ebpf_file){libc, true};

    int pipefd[2];
    if (pipe2(pipefd, O_CLOEXEC) != 0) {
        memprof_cli_error("run --ebpf: pipe: %s", strerror(errno));
        return CLI_EXIT_CANNOT;
    }
    pid_t pid = fork();
    if (pid < 0) {
        memprof_cli_error("run --ebpf: fork: %s", strerror(errno));
        return CLI_EXIT_CANNOT;
    }
    if (pid == 0) {
        close(pipefd[0]);
        start_child(path, o->argv, pipefd[1]);
    }
    close(pipefd[1]);
    child_pid = pid;
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFSTOPPED(status)) {
        memprof_cli_error("run --ebpf: the program could not be traced (ptrace refused)");
        close(pipefd[0]);
        return CLI_EXIT_CANNOT;
    }
    /* Children are followed when each can have a profile of its own. */
    static struct children cs;
    cs.follow = !o->output || strstr(o->output, "%p");
    ptrace(PTRACE_SETOPTIONS, pid, NULL,
           (void *)(long)(PTRACE_O_TRACEEXIT | PTRACE_O_TRACEEXEC | PTRACE_O_EXITKILL |
                          (cs.follow ? PTRACE_O_TRACEFORK | PTRACE_O_TRACEVFORK : 0)));

    struct memprof_ebpf_trace *t;
    int rc = memprof__ebpf_trace_start("run", pid, o->rate, files, nfiles, &t);
    if (rc) {
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        close(pipefd[0]);
        return rc;
    }
    struct sigaction sa = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    static const int forwarded[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2};
    for (size_t i = 0; i < sizeof forwarded / sizeof *forwarded; i++)
        sigaction(forwarded[i], &sa, NULL);

    char name[PATH_MAX];
    snprintf(name, sizeof name, "%s", strrchr(path, '/') ? strrchr(path, '/') + 1 : path);
    char out[PATH_MAX];
    if (!memprof__ebpf_output_path(o->output, name, o->format, pid, out)) {
        memprof_cli_error("run --ebpf: the profile's path is too long");
        kill(pid, SIGKILL);
        waitpid(pid, &status, 0);
        close(pipefd[0]);
        memprof__ebpf_trace_free(t);
        return CLI_EXIT_USAGE;
    }

    ptrace(PTRACE_CONT, pid, NULL, NULL);
    bool execed = false, finished = false, write_failed = false;
    int code = CLI_EXIT_FAILURE;
    struct memprof_ebpf_output eo = {
        .path = out, .format = o->format, .program = name, .quiet = o->quiet};
    for (unsigned round = 1;; round++) {
        memprof__ebpf_trace_poll(t, POLL_MS); /* an error shows at the end */
        /* The program's own libraries and those it dlopen()s: after its exec only (before,
         * the maps are this command's). */
        if (execed && !finished && round % RESCAN_ROUNDS == 0)
            memprof__ebpf_trace_rescan(t, o->quiet);
        poll_children(&cs, round % RESCAN_ROUNDS == 0, o->quiet);
        pid_t w = waitpid(-1, &status, WNOHANG | __WALL);
        if (w == 0)
            continue;
        if (w < 0) {
            if (errno == EINTR)
                continue;
            break;
        }
        if (w != pid) {
            child_status(&cs, o, w, status, name);
            continue;
        }
        if (WIFEXITED(status) || WIFSIGNALED(status)) {
            code = exit_code(status);
            int e = 0;
            if (!execed && read(pipefd[0], &e, sizeof e) == (ssize_t)sizeof e) {
                memprof_cli_error("run --ebpf: cannot execute %s: %s", path, strerror(e));
                code = e == ENOENT ? CLI_EXIT_NOTFOUND : CLI_EXIT_NOEXEC;
            } else if (!finished && memprof__ebpf_trace_finish(t, &eo) != 0 && code == 0) {
                code = CLI_EXIT_FAILURE; /* killed without an exit stop: frames may lack names */
            }
            break;
        }
        if (!WIFSTOPPED(status))
            continue;
        int sig = WSTOPSIG(status), event = status >> 16;
        if (sig == SIGTRAP && event) {
            if (event == PTRACE_EVENT_EXEC)
                execed = true;
            if (event == PTRACE_EVENT_FORK || event == PTRACE_EVENT_VFORK)
                note_fork(&cs, pid, name);
            /* The program is ending and its maps are still there: write now. */
            if (event == PTRACE_EVENT_EXIT && execed && !finished) {
                finished = true;
                write_failed = memprof__ebpf_trace_finish(t, &eo) != 0;
            }
            sig = 0;
        }
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
    }
    release_children(&cs, o);
    if (write_failed && code == 0)
        code = CLI_EXIT_FAILURE;
    close(pipefd[0]);
    memprof__ebpf_trace_free(t);
    return code;
}

/* The name of an option of `memprof run` that only the plugin can honour. */
static const char *plugin_only_option(int c)
{
    switch (c) {
    case 'i':
        return "--interval";
    case 's':
        return "--signal";
    case 'u':
        return "--unwind";
    case 'T':
        return "--temp-threshold";
    case 'F':
        return "--no-follow";
    default:
        return "--no-runtime";
    }
}

int memprof_cli_ebpf_run(int argc, char **argv)
{
    enum { OPT_EBPF = 256 };
    static const struct option longopts[] = {
        {"ebpf", no_argument, NULL, OPT_EBPF},
        {"rate", required_argument, NULL, 'r'},
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"interval", required_argument, NULL, 'i'},
        {"signal", required_argument, NULL, 's'},
        {"unwind", required_argument, NULL, 'u'},
        {"temp-threshold", required_argument, NULL, 'T'},
        {"no-follow", no_argument, NULL, 'F'},
        {"no-runtime", no_argument, NULL, 'R'},
        {"wrapper", required_argument, NULL, 'W'},
        {"native", no_argument, NULL, 'N'},
        {NULL, 0, NULL, 0},
    };
    struct run_ebpf o = {.rate = (uint64_t)MEMPROF_DEFAULT_RATE};
    const char *format_s = NULL;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, "+:r:o:f:i:s:u:T:qh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_EBPF:
            break;
        case 'r':
            if (!(o.rate = memprof_cli_parse_rate(optarg)))
                return memprof_cli_usage_error("run",
                                               "--rate '%s': expected bytes between 1 and 2^40, "
                                               "optionally with a K, M or G suffix",
                                               optarg);
            break;
        case 'o':
            if (!*optarg)
                return memprof_cli_usage_error("run", "--output: empty file name");
            o.output = optarg;
            break;
        case 'f':
            format_s = optarg;
            break;
        case 'q':
            o.quiet = true;
            break;
        case 'W': /* the summary's and the text writers' site names */
            if (!memprof_cli_add_wrapper("run", optarg))
                return CLI_EXIT_USAGE;
            break;
        case 'N':
            memprof_cli_show_native();
            break;
        case 'h':
            memprof_cli_help("run", stdout);
            return CLI_EXIT_OK;
        case 'i':
        case 's':
        case 'u':
        case 'T':
        case 'F':
        case 'R':
            return memprof_cli_usage_error("run",
                                           "%s: not available with --ebpf (the program "
                                           "is probed from outside; nothing runs in it)",
                                           plugin_only_option(c));
        default:
            return memprof_cli_bad_option("run", c, argv);
        }
    }
    if (optind >= argc || !*argv[optind])
        return memprof_cli_usage_error("run", "no program given: memprof run --ebpf [OPTIONS] -- "
                                              "PROGRAM [ARGS...]");
    o.argv = argv + optind;
    if (format_s) {
        o.format = memprof__format_by_name(format_s);
        if (o.format == MEMPROF_FORMAT_AUTO)
            return memprof_cli_usage_error("run",
                                           "--format '%s': expected pprof, speedscope, "
                                           "collapsed, text or html",
                                           format_s);
    } else {
        o.format = o.output ? memprof__format_by_path(o.output) : MEMPROF_FORMAT_PPROF;
        if (o.format == MEMPROF_FORMAT_AUTO)
            o.format = MEMPROF_FORMAT_PPROF;
    }
    char path[PATH_MAX];
    if (!find_program(o.argv[0], path)) {
        memprof_cli_error("run --ebpf: %s: program not found", o.argv[0]);
        return CLI_EXIT_NOTFOUND;
    }
    return trace_child(&o, path);
}
