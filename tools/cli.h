/* SPDX-License-Identifier: MIT */
/*
 * The `memprof` command's shared pieces: the subcommands' entry points (run.c, report.c,
 * diff.c), their usage texts (help.c), and the helpers they share (common.c): messages in
 * one fixed shape, strict parsing of rates and format names, reading a saved profile, and
 * writing an output file atomically. The command links the internal static library, never
 * libmemprof.so, so reading and converting profiles does not start a profiler inside it.
 *
 * Exit statuses are shared by every subcommand: 0 success, 1 failure (a profile that cannot
 * be read, an output that cannot be written), 2 usage error; `memprof run` also passes the
 * program's own status through (see help.c).
 */
#ifndef MEMPROF_TOOLS_CLI_H
#define MEMPROF_TOOLS_CLI_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "api/values.h"
#include "export/export.h"
#include "export/profile.h"
#include "memprof/memprof.h"

#define CLI_EXIT_OK       0
#define CLI_EXIT_FAILURE  1
#define CLI_EXIT_USAGE    2
#define CLI_EXIT_CANNOT   125 /* memprof run failed before the program started */
#define CLI_EXIT_NOEXEC   126 /* the program was found but could not be executed */
#define CLI_EXIT_NOTFOUND 127 /* the program was not found */

#define CLI_PRINTF(a, b) __attribute__((format(printf, a, b)))

/* ---- subcommands ---------------------------------------------------------------------------- */

int memprof_cli_run(int argc, char **argv);
int memprof_cli_report(int argc, char **argv);
int memprof_cli_diff(int argc, char **argv);
int memprof_cli_attach(int argc, char **argv);

/* Prints the full usage text of `cmd` (NULL: the command as a whole) to `out`. Returns false
 * if there is no such subcommand. */
bool memprof_cli_help(const char *cmd, FILE *out);

/* ---- messages ------------------------------------------------------------------------------- */

/* "memprof: <message>" on stderr, one line. */
void memprof_cli_error(const char *fmt, ...) CLI_PRINTF(1, 2);
/* "memprof <cmd>: <message> (see 'memprof <cmd> --help')" on stderr; returns CLI_EXIT_USAGE. */
int memprof_cli_usage_error(const char *cmd, const char *fmt, ...) CLI_PRINTF(2, 3);

/* Parses getopt_long's result for an unknown option or a missing argument into one usage line.
 * `c` is what getopt_long returned ('?' or ':'). Returns CLI_EXIT_USAGE. */
int memprof_cli_bad_option(const char *cmd, int c, char **argv);

/* ---- values --------------------------------------------------------------------------------- */

/* A rate in bytes: digits with an optional K, M or G suffix (binary; "Ki", "KiB" accepted),
 * 1 .. 2^40, exactly as MEMPROF_RATE accepts it. Returns 0 when invalid. */
uint64_t memprof_cli_parse_rate(const char *s);
/* A non-negative decimal integer no larger than `max`; false when invalid. */
bool memprof_cli_parse_uint(const char *s, unsigned long max, unsigned long *out);
/* A signal the profiler can catch, by name (USR2, SIGUSR2; any case) or number; 0 when
 * invalid. Rejects the signals that cannot be caught or mean a crash (KILL, STOP, SEGV, BUS,
 * FPE, ILL), as MEMPROF_SIGNAL does. */
int memprof_cli_parse_signal(const char *s);
/* "SIGUSR2", "SIGRTMIN+3", or "signal 99" into buf. */
const char *memprof_cli_signal_name(int signo, char *buf, size_t size);

/* ---- how sites are shown (export/sites.c) --------------------------------------------------- */

/* --wrapper PATTERN: adds a pattern (a shell glob of function names; no comma) to the
 * allocator wrappers that sites are not named after, through MEMPROF_WRAPPERS, which the
 * writers of this process and of a program this command starts read. Returns false, after
 * one line, for an empty pattern or one with a comma. */
bool memprof_cli_add_wrapper(const char *cmd, const char *pattern);
/* --native: the text and HTML writers (here and in a program started) show every native
 * frame (MEMPROF_NATIVE=1). */
void memprof_cli_show_native(void);

/* Format names and extensions: memprof__format_by_name() & co. (api/values.h). */

/* `--value` names: the units "bytes" and "objects", or pprof's sample types inuse_space,
 * alloc_space, inuse_objects and alloc_objects, which name a view too. Returns 0 with
 * *objects set and *view the view named (-1: none), or -1 if the name is unknown. */
int memprof_cli_parse_value(const char *name, int *view, bool *objects);
/* `--view` names (live, alloc, peak, temporary, leaks): the view, or -1 if unknown. */
int memprof_cli_view_by_name(const char *name);

/* ---- files ---------------------------------------------------------------------------------- */

/* Reads a pprof profile written by memprof ("-" is standard input); function names it holds
 * still mangled (C++, Rust) come back demangled. On failure prints one line naming the file
 * and the reason and returns NULL. */
struct memprof_profile *memprof_cli_read_profile(const char *path);
/* The same from the open descriptor fd (read from where it is to its end; not closed), the
 * file's name for messages in `name`. */
struct memprof_profile *memprof_cli_read_profile_fd(int fd, const char *name);

/* Offline symbolization (symbolize.c): the debug directories given (--debug-dir), searched
 * before /usr/lib/debug, and whether to keep quiet about modules without files. */
struct memprof_cli_symbolize {
    const char *const *debug_dirs;
    size_t ndebug_dirs;
    bool quiet;
    size_t *named; /* if not NULL, set to how many addresses gained a name */
    /* Kept between calls, so that several profiles read each module's files once; zero
     * them before the first call, memprof_cli_symbolize_end() after the last. */
    struct memprof_offline *session;
    size_t said;           /* modules without files already named on stderr */
    memprof_format format; /* memprof_cli_symbolize_file() writes this (AUTO: pprof) */
    /* If not NULL, memprof_cli_symbolize_file() also writes the named profile's summary
     * there (memprof_cli_write_summary(), summary_top sites) when it converts the file to
     * another format than pprof: memprof run's exit summary, which the converted file could
     * not give. */
    FILE *summary;
    unsigned summary_top;
    /* memprof_cli_symbolize_file() rewrites the file in place (memprof run's own files)
     * instead of through a new file renamed over it (memprof_cli_rewrite_in_place()). */
    bool in_place;
    /* If not NULL, memprof_cli_symbolize_file() in place sets it to the state of the file it
     * read (after rewriting it), whether or not that succeeded; untouched when the file
     * could not be opened for writing. */
    struct stat *done;
    /* The modules without files are not reported now but by the next call without it. */
    bool hold_missing;
};
/* Names p's unresolved frames; *out is the symbolized copy (p must outlive it; free it with
 * memprof__profile_symbolized_free()). Returns 0, or a negative errno after one line. */
int memprof_cli_symbolize(const struct memprof_profile *p, struct memprof_cli_symbolize *s,
                          struct memprof_profile **out);
/* The same for the pprof file at `path`, rewritten in place (atomically) when anything
 * gained a name, or always when s->format asks for another format than pprof. Returns 0 or
 * a negative errno after one line. */
int memprof_cli_symbolize_file(const char *path, struct memprof_cli_symbolize *s);
/* Reports the modules without files met since the last report (one line each, up to five,
 * unless s->quiet). */
void memprof_cli_symbolize_missing(struct memprof_cli_symbolize *s);
void memprof_cli_symbolize_end(struct memprof_cli_symbolize *s);

/* Checks that a file can be created in the directory that would hold `path` (by creating
 * and removing a temporary file there, which also works for root and read-only mounts).
 * Returns 0 or a positive errno; `dir` receives the directory checked. */
int memprof_cli_check_writable(const char *path, char *dir, size_t dirsize);

/* Writes `path` with what `fill` writes: a regular file (or a new one) atomically, through a
 * temporary file (mode 0600) in the same directory renamed over `path`; a symbolic link at
 * `path` is replaced, never followed, unless it names a descriptor (/dev/stdout). A device,
 * FIFO, socket or descriptor name is written in place (api/output.h). On failure the
 * temporary file is removed, one line is printed and -1 returned. `fill` returns 0 or a
 * negative errno. */
int memprof_cli_write_atomic(const char *path, int (*fill)(FILE *out, void *ctx), void *ctx);
/* Replaces the content of the regular file open for reading and writing as `fd` (named
 * `path` in messages; not closed) with what fill() writes, in the same file: no new file
 * is created and none deleted (memprof run rewrites a profile per process
 * of a build; on ext4, each file created where many were deleted in the last minutes scans
 * past all of them). The content is made in memory first, and the old one is written back
 * if writing the new one fails; a crash in the middle of the write leaves a damaged file,
 * which is why files the user named go through memprof_cli_write_atomic(). Returns 0, or
 * -1 after one line. */
int memprof_cli_rewrite_in_place(int fd, const char *path, int (*fill)(FILE *out, void *ctx),
                                 void *ctx);

/* Writes profile `p` in format `f` (never AUTO) to `out`: `view` is the view the text and
 * collapsed formats show and speedscope and HTML open on (pprof carries all of them), `top`
 * limits the text format's sites, `objects` makes the collapsed format count objects instead
 * of bytes, `addresses` keeps its unresolved frames' addresses instead of merging them per
 * module ("module+?"). Returns 0 or a negative errno. */
int memprof_cli_export(const struct memprof_profile *p, memprof_format f, FILE *out, unsigned top,
                       enum memprof_view view, bool objects, bool addresses);

/* ---- summary -------------------------------------------------------------------------------- */

/* The summary of a profile (summary.c): heading, top `top` sites at the peak (when above the
 * end), live at the end, and leak suspects. */
void memprof_cli_write_summary(const struct memprof_profile *p, FILE *out, unsigned top);

#endif
