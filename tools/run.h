/* SPDX-License-Identifier: MIT */
/*
 * The parts of `memprof run` (run.c), one file per responsibility, and what they share: the
 * options as parsed (run.c), the profile files of one run (run_spool.c: their names, the
 * listings that tell this run's files from older ones, the main program's file delivered to
 * -o), the program as a child of this command (run_child.c: the plugin's environment, the
 * exec, forwarded signals, the wait), and what is printed after it ended (run_summary.c). Not
 * an interface of the command as a whole: cli.h is that.
 */
#ifndef MEMPROF_TOOLS_RUN_H
#define MEMPROF_TOOLS_RUN_H

#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>
#include <time.h>

#include "cli.h"

#define MEMPROF_RUN_SUMMARY_TOP 5 /* sites in each summary */

struct run_options {
    const char *rate, *output, *format_s, *interval, *signal_s, *unwind, *temp_threshold;
    memprof_format format;
    int signo;
    bool quiet;
    bool no_follow;  /* profile the program only, not the programs it executes */
    bool no_runtime; /* do not load an interpreter's binding (runtimes.c) */
    char **argv;     /* the program and its arguments */
};

/* Whether the program writes raw addresses and this command names them after it exits
 * (run_spool.c). */
bool memprof_cli_run_deferred(const struct run_options *o);

/* ---- the profile files of a run (run_spool.c) ----------------------------------------------- */

/* The profile paths of one run. `tmpl` is relative to this process's directory (used here);
 * `tmpl_abs` is the same made absolute (given to the plugin). When `final` is set, the main
 * program's file is renamed to it, or copied into it when `final` is written in place (then
 * the files are in the temporary directory `tmpdir`). */
struct paths {
    char tmpl[PATH_MAX], tmpl_abs[PATH_MAX];
    const char *final;
    char tmpdir[PATH_MAX];    /* empty: none */
    pid_t main_pid;           /* the program's, once started */
    const char *prog;         /* what %e becomes in its file names */
    char main_file[PATH_MAX]; /* its profile, once found */
    bool copied;              /* its file was copied into `final`: remove it */
};

/* A template whose file names can be recognised in a directory listing: one %p in the file
 * name, none in the directory; %e (the program) at most once. */
struct tmpl_parts {
    bool ok;
    char dir[PATH_MAX], base[PATH_MAX]; /* base: the file name part, unexpanded */
};

/* One file named like the template, as found in a listing. */
struct pfile {
    char name[NAME_MAX + 1];
    char prog[NAME_MAX + 1]; /* what %e became; empty without %e */
    long pid;
    dev_t dev;
    ino_t ino;
    struct timespec mtim;
};

struct pfiles {
    struct pfile *v;
    size_t n;
};

/* What a run left: the listings before and after it, and the main program's profile. */
struct run_files {
    const struct tmpl_parts *tp;
    const struct pfiles *before;
    struct pfiles after;
    struct run_watch *watch; /* what named files during the run (run_watch.c); NULL: none */
    pid_t pid;               /* the main program's */
    const char *profile;     /* where its profile is for the user; NULL: none written */
    const char *read_from;   /* where to read that profile (a copy when `profile` is a device) */
    char *converted;         /* its summary, taken when it was converted to another format */
};

/* Sets up ps for options o: the private directory when -o is written in place, the
 * templates. Returns 0, or this command's exit status after one line. Undo with
 * memprof_cli_spool_remove(). */
int memprof_cli_spool_paths(const struct run_options *o, struct paths *ps);
/* Removes the private directory (with the main program's file once copied). */
void memprof_cli_spool_remove(const struct paths *ps);
/* Whether the directory that will hold the profiles can be written: false after one line. */
bool memprof_cli_spool_writable(const struct paths *ps);
void memprof_cli_spool_split(const char *tmpl, struct tmpl_parts *t);
/* Lists the files named like template t (sorted by pid; free out->v). */
void memprof_cli_spool_scan(const struct tmpl_parts *t, struct pfiles *out);
/* Whether `name` is what template t expands to for some pid and program: then sets f->pid
 * and f->prog (the rest of f is left alone). */
bool memprof_cli_spool_match(const struct tmpl_parts *t, const char *name, struct pfile *f);
/* Whether file f of the listing after the run was already there before it. */
bool memprof_cli_spool_existed(const struct pfiles *before, const struct pfile *f);
/* After the program `r->pid` ended: lists the files (r->after), names their frames, and
 * finds the main program's profile (r->profile, r->read_from), renamed or copied to -o's
 * name. A summary taken during a conversion goes to `summary`. */
void memprof_cli_spool_collect(const struct run_options *o, struct paths *ps,
                               const struct timespec *start, struct run_files *r, FILE *summary);

/* ---- naming the files while the program runs (run_watch.c) ---------------------------------- */

struct run_watch;
/* Before the program starts: prepares the watcher of the directory of template t for the
 * profiles o has the processes write raw (`before`: the listing before the run, kept by the
 * caller until memprof_cli_watch_free()). NULL when there is nothing to watch (the files are
 * then all named after the run). */
struct run_watch *memprof_cli_watch_open(const struct run_options *o, const struct tmpl_parts *t,
                                         const struct pfiles *before);
/* Once the program `main_pid` runs: names every other process's profile as it appears, on a
 * thread of its own. Does nothing for a NULL w. */
void memprof_cli_watch_start(struct run_watch *w, pid_t main_pid);
/* After the program ended: waits for the file in hand and stops. Returns the symbolization
 * state (its session holds the modules read so far) for naming the rest, which the caller
 * ends with memprof_cli_symbolize_end(); NULL for a NULL w. */
struct memprof_cli_symbolize *memprof_cli_watch_stop(struct run_watch *w);
/* Whether file f (as listed after the run) is as the watcher left it: nothing to name. */
bool memprof_cli_watch_named(const struct run_watch *w, const struct pfile *f);
/* Stops it if it runs, ends its session (if memprof_cli_watch_stop()'s caller did not), and
 * frees it (NULL: nothing). */
void memprof_cli_watch_free(struct run_watch *w);

/* ---- the program (run_child.c) -------------------------------------------------------------- */

/* The program as this command's child: the pipe its failed exec reports on, the signals
 * forwarded to it, and what this command's own handling of them was before. */
struct run_child {
    int pipefd[2];
    int forwarded[7];
    size_t nforwarded;
    sigset_t oldmask;
    struct sigaction oldchld;
    pid_t pid;
};

/* Before the fork: the pipe, the forwarded signals blocked until the child's pid is known,
 * SIGCHLD at its default. Returns false after one line. */
bool memprof_cli_child_prepare(const struct run_options *o, struct run_child *c);
/* Starts the program under the plugin at `plugin`, writing to ps's template, and forwards
 * signals to it. Returns false after one line (nothing started). */
bool memprof_cli_child_start(const struct run_options *o, const char *plugin, struct paths *ps,
                             struct run_child *c);
/* Waits for it: returns -1 with its wait status in *status when it ran, else this command's
 * exit status after one line (it could not be executed, or the wait failed). */
int memprof_cli_child_wait(const struct run_options *o, struct run_child *c, int *status);

/* ---- after the program (run_summary.c) ------------------------------------------------------ */

/* Prints what the run left (the main program's summary or why there is none, the other
 * processes' profiles, the largest of their heaps) and returns this command's exit status
 * for the program's wait status. */
int memprof_cli_run_report(const struct run_options *o, const struct run_files *r, int status);

#endif
