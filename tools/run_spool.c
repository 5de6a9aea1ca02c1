/* SPDX-License-Identifier: MIT */
/*
 * `memprof run`'s profile files: the names the plugin writes, telling this run's files from
 * older ones, naming their frames after the exit, and delivering the main program's file to
 * -o.
 *
 * The profile path handed to the plugin (MEMPROF_OUTPUT) always contains %p, so every process
 * of the run -- including children that fork and exec other programs, each of which loads
 * the plugin afresh -- writes its own file and none overwrites another; and, unless -o has
 * %p, %e, so each file names its program (memprof.cc1.4242.pb.gz beside memprof.gcc.4241...).
 * When -o names a file without %p, the plugin writes "STEM.<program>.<pid>EXT" (out.pb.gz:
 * out.gcc.4241.pb.gz) and this command renames the main program's file to FILE after it
 * exits (or is killed, if a periodic dump exists); children keep theirs. With --no-follow
 * the plugin takes itself out of the environment at start (MEMPROF_FOLLOW=0), so only the
 * program writes a profile. The path is made absolute, so a
 * program that changes directory still writes where the user asked. When -o names something
 * that is written in place rather than replaced (a device such as /dev/null, a FIFO, a
 * socket, /dev/stdout; api/output.h), the files go to a private temporary directory instead
 * and the main program's profile is copied into FILE at the end: renaming over FILE would
 * destroy it, and its directory (/dev) is no place for profiles.
 */
#define _GNU_SOURCE
#include "config.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "api/output.h"
#include "api/values.h"
#include "run.h"

/* ---- profile paths -------------------------------------------------------------------------- */

/* Appends s to buf (of PATH_MAX) at *len, doubling every '%' when `escape`. */
static bool append(char *buf, size_t *len, const char *s, bool escape)
{
    for (; *s; s++) {
        if (*len + 3 >= PATH_MAX)
            return false;
        if (escape && *s == '%')
            buf[(*len)++] = '%';
        buf[(*len)++] = *s;
    }
    buf[*len] = 0;
    return true;
}

/* Expands %e (as `prog`), %p and %% exactly as the plugin does (one shared
 * implementation). */
static bool expand(const char *tmpl, const char *prog, pid_t pid, char *out, size_t size)
{
    char named[PATH_MAX];
    return memprof__expand_program(tmpl, prog, named, sizeof named) &&
           memprof__expand_path(named, pid, out, size, NULL);
}

/* The name %e becomes in the main program's file: the plugin there takes the base name of
 * the file executed (values.h), which is what execvp() makes of argv[0]. */
static const char *main_program_name(const struct run_options *o)
{
    const char *slash = strrchr(o->argv[0], '/');
    return slash ? slash + 1 : o->argv[0];
}

/* Where the extension of a file name starts: ".pb.gz", else the last dot of the base name
 * (not a leading one); the end of the name when there is none. */
static const char *extension_of(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    size_t n = strlen(base);
    if (n > 6 && !strcmp(base + n - 6, ".pb.gz"))
        return base + n - 6;
    const char *dot = strrchr(base, '.');
    return dot && dot != base ? dot : base + n;
}

static bool make_paths(const struct run_options *o, struct paths *ps)
{
    size_t len = 0;
    ps->final = NULL;
    if (o->output && strstr(o->output, "%p")) {
        if (!append(ps->tmpl, &len, o->output, false))
            return false;
    } else if (ps->tmpdir[0]) { /* -o is written in place (run) */
        const char *base = strrchr(o->output, '/');
        base = base ? base + 1 : o->output;
        ps->final = o->output;
        if (!append(ps->tmpl, &len, ps->tmpdir, true) || !append(ps->tmpl, &len, "/", false) ||
            !append(ps->tmpl, &len, *base ? base : "profile", true) ||
            !append(ps->tmpl, &len, ".%e.%p", false))
            return false;
    } else if (o->output) {
        /* Each process's file names its program and pid before the extension, so it keeps
         * the extension its format is known by: out.pb.gz -> out.cc1.4242.pb.gz. */
        ps->final = o->output;
        char stem[PATH_MAX];
        snprintf(stem, sizeof stem, "%s", o->output);
        const char *ext = extension_of(o->output);
        stem[ext - o->output] = 0;
        if (!append(ps->tmpl, &len, stem, true) || !append(ps->tmpl, &len, ".%e.%p", false) ||
            !append(ps->tmpl, &len, ext, true))
            return false;
    } else {
        if (!append(ps->tmpl, &len, "memprof.%e.%p", false) ||
            !append(ps->tmpl, &len, memprof__format_extension(o->format), false))
            return false;
    }
    len = 0;
    if (ps->tmpl[0] != '/') {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd))
            return false;
        if (!append(ps->tmpl_abs, &len, cwd, true) || !append(ps->tmpl_abs, &len, "/", false))
            return false;
    }
    return append(ps->tmpl_abs, &len, ps->tmpl, false);
}

/* The run's private directory when -o is written in place: in $TMPDIR (absolute) or /tmp. */
static bool make_tmpdir(struct paths *ps)
{
    const char *t = getenv("TMPDIR");
    if (snprintf(ps->tmpdir, sizeof ps->tmpdir, "%s/memprof-run.XXXXXX",
                 t && *t == '/' ? t : "/tmp") < (int)sizeof ps->tmpdir &&
        mkdtemp(ps->tmpdir))
        return true;
    memprof_cli_error("cannot create a temporary directory for the profiles (%s): %s", ps->tmpdir,
                      strerror(errno));
    ps->tmpdir[0] = 0;
    return false;
}

int memprof_cli_spool_paths(const struct run_options *o, struct paths *ps)
{
    ps->tmpdir[0] = 0;
    ps->main_pid = 0;
    ps->prog = main_program_name(o);
    ps->copied = false;
    ps->main_file[0] = 0;
    if (o->output && !strstr(o->output, "%p") && memprof__output_in_place(o->output) &&
        !make_tmpdir(ps))
        return CLI_EXIT_CANNOT;
    if (!make_paths(o, ps)) {
        memprof_cli_error("the profile path is too long");
        return CLI_EXIT_CANNOT;
    }
    return 0;
}

/* Removes the run's private directory with the main program's file in it once copied; one
 * that still holds a profile is kept (the messages named it). */
void memprof_cli_spool_remove(const struct paths *ps)
{
    if (!ps->tmpdir[0])
        return;
    if (ps->copied)
        unlink(ps->main_file);
    rmdir(ps->tmpdir);
}

/* An output directory that cannot be written is found now, not after a long run (a target
 * written in place is checked when it is written). */
bool memprof_cli_spool_writable(const struct paths *ps)
{
    const char *check = ps->final ? ps->final : ps->tmpl;
    const char *last_slash = strrchr(check, '/');
    char dir[PATH_MAX];
    if (!ps->tmpdir[0] &&
        (ps->final || !last_slash || !memchr(check, '%', (size_t)(last_slash - check)))) {
        int e = memprof_cli_check_writable(check, dir, sizeof dir);
        if (e == EISDIR) {
            memprof_cli_error("cannot write the profile to %s: it is a directory", check);
            return false;
        }
        if (e) {
            memprof_cli_error("cannot write the profile to %s: directory %s: %s", check, dir,
                              strerror(e));
            return false;
        }
    }
    return true;
}

/* ---- which profile files this run wrote --------------------------------------------------- */

void memprof_cli_spool_split(const char *tmpl, struct tmpl_parts *t)
{
    t->ok = false;
    const char *slash = strrchr(tmpl, '/');
    const char *base = slash ? slash + 1 : tmpl;
    if (slash) {
        size_t n = slash == tmpl ? 1 : (size_t)(slash - tmpl);
        memcpy(t->dir, tmpl, n);
        t->dir[n] = 0;
    } else {
        strcpy(t->dir, ".");
    }
    const char *pp = strstr(base, "%p"), *pe = strstr(base, "%e");
    if (strchr(t->dir, '%') || !pp || strstr(pp + 2, "%p") || (pe && strstr(pe + 2, "%e")))
        return;
    snprintf(t->base, sizeof t->base, "%s", base);
    t->ok = true;
}

/* Whether file name `s` is what template `t` expands to for some pid (*pid) and, where the
 * template has %e, some program name (into f->prog). Backtracks over the lengths of the
 * pid and the name: "memprof.%e.%p.pb.gz" matches "memprof.python3.11.42.pb.gz" as
 * program "python3.11", pid 42. */
static bool match_name(const char *t, const char *s, struct pfile *f, long *pid)
{
    for (;; t++, s++) {
        if (t[0] == '%' && (t[1] == 'p' || t[1] == 'e')) {
            bool digits = t[1] == 'p';
            const char *end = s;
            while (digits ? *end >= '0' && *end <= '9' : memprof__program_name_char(*end))
                end++;
            for (; end > s; end--) {
                if (!match_name(t + 2, end, f, pid))
                    continue;
                if (digits) {
                    char *stop;
                    *pid = strtol(s, &stop, 10);
                    return stop == end && *pid > 0;
                }
                snprintf(f->prog, sizeof f->prog, "%.*s", (int)(end - s), s);
                return true;
            }
            return false;
        }
        if (t[0] == '%' && t[1] == '%')
            t++; /* "%%" is one '%' */
        if (*t != *s)
            return false;
        if (!*t)
            return true;
    }
}

bool memprof_cli_spool_match(const struct tmpl_parts *t, const char *name, struct pfile *f)
{
    long pid = 0;
    f->prog[0] = 0;
    if (!t->ok || !match_name(t->base, name, f, &pid))
        return false;
    f->pid = pid;
    return true;
}

static int by_pid(const void *a, const void *b)
{
    const struct pfile *x = a, *y = b;
    return x->pid < y->pid ? -1 : x->pid > y->pid;
}

/* Lists the regular files in the template's directory named as it names them, by pid. Time stamps
 * cannot tell an old file from a new one reliably (coarse or multigrain file times), so the
 * run compares a listing taken before the program starts with one taken after: a file is
 * this run's if it is new or was replaced (the plugin renames a new inode into place). */
void memprof_cli_spool_scan(const struct tmpl_parts *t, struct pfiles *out)
{
    out->v = NULL;
    out->n = 0;
    if (!t->ok)
        return;
    DIR *d = opendir(t->dir);
    if (!d)
        return;
    size_t cap = 0;
    struct dirent *e;
    while ((e = readdir(d))) {
        struct pfile found;
        char path[PATH_MAX];
        struct stat st;
        if (!memprof_cli_spool_match(t, e->d_name, &found) ||
            snprintf(path, sizeof path, "%s/%s", t->dir, e->d_name) >= (int)sizeof path ||
            stat(path, &st) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (out->n == cap) {
            size_t ncap = cap ? cap * 2 : 16;
            struct pfile *v = realloc(out->v, ncap * sizeof *v);
            if (!v)
                break;
            out->v = v;
            cap = ncap;
        }
        struct pfile *f = &out->v[out->n++];
        *f = found;
        snprintf(f->name, sizeof f->name, "%s", e->d_name);
        f->dev = st.st_dev;
        f->ino = st.st_ino;
        f->mtim = st.st_mtim;
    }
    closedir(d);
    if (out->n)
        qsort(out->v, out->n, sizeof *out->v, by_pid);
}

bool memprof_cli_spool_existed(const struct pfiles *before, const struct pfile *f)
{
    for (size_t i = 0; i < before->n; i++) {
        const struct pfile *b = &before->v[i];
        if (!strcmp(b->name, f->name) && b->dev == f->dev && b->ino == f->ino &&
            b->mtim.tv_sec == f->mtim.tv_sec && b->mtim.tv_nsec == f->mtim.tv_nsec)
            return true;
    }
    return false;
}

/* Whether the main program's profile `path` (for pid) was written by this run. */
static bool written_by_run(const char *path, pid_t pid, const struct tmpl_parts *t,
                           const struct pfiles *before, const struct pfiles *after,
                           const struct timespec *start)
{
    if (t->ok) {
        for (size_t i = 0; i < after->n; i++)
            if (after->v[i].pid == (long)pid)
                return !memprof_cli_spool_existed(before, &after->v[i]);
        return false;
    }
    /* A template this command cannot list: the pid in the name is the guard against old
     * files; time stamps only catch a stale file from a reused pid. */
    struct stat st;
    return stat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_mtim.tv_sec >= start->tv_sec - 2;
}

/* The main program's file: what the template names for its pid, except that %e is the name
 * of the program that wrote it, which is not the one started when that one exec()ed another
 * (env, nice, a wrapper script's exec): then the listing has it under its pid (the newest of
 * this run's, should an earlier program of the pid have left one too). */
static bool main_file(const struct paths *ps, pid_t pid, const struct pfiles *before,
                      const struct pfiles *after, char *out, size_t size)
{
    if (!expand(ps->tmpl, ps->prog, pid, out, size))
        return false;
    const struct pfile *found = NULL;
    for (size_t i = 0; i < after->n; i++) {
        const struct pfile *f = &after->v[i];
        if (f->pid == (long)pid && !memprof_cli_spool_existed(before, f) &&
            (!found || f->mtim.tv_sec > found->mtim.tv_sec ||
             (f->mtim.tv_sec == found->mtim.tv_sec && f->mtim.tv_nsec > found->mtim.tv_nsec)))
            found = f;
    }
    if (found) {
        const char *slash = strrchr(out, '/');
        size_t keep = slash ? (size_t)(slash + 1 - out) : 0;
        if (keep + strlen(found->name) >= size)
            return false;
        strcpy(out + keep, found->name);
    }
    return true;
}

/* ---- symbolizing after the exit ------------------------------------------------------------ */

/* Whether the program writes raw addresses and this command names them after it exits
 * (symbolize.c), unless the user chose with MEMPROF_SYMBOLIZE. The program's exit then costs
 * no symbolization. A raw profile is complete only as pprof: for the other formats the
 * program writes pprof under the profile's name and this command converts it, which it can
 * do only when nobody reads the files while the program runs (no --interval or --signal). */
bool memprof_cli_run_deferred(const struct run_options *o)
{
    return !getenv("MEMPROF_SYMBOLIZE") &&
           (o->format == MEMPROF_FORMAT_PPROF || (!o->interval && !o->signal_s));
}

/* Names the frames of every profile this run wrote that the watcher did not, in place and
 * in the chosen format, before anything reads them; with the watcher's state `watched`
 * (NULL: none), so modules it read are not read again. A profile of the main program converted to
 * another format than pprof leaves its summary in `summary` (the summary cannot read it back). */
static void symbolize_written(const struct run_options *o, const struct run_files *r,
                              struct memprof_cli_symbolize *watched, FILE *summary)
{
    struct memprof_cli_symbolize own = {.quiet = o->quiet, .format = o->format, .in_place = true};
    struct memprof_cli_symbolize *s = watched ? watched : &own;
    s->summary_top = MEMPROF_RUN_SUMMARY_TOP;
    s->hold_missing = false;
    for (size_t i = 0; memprof_cli_run_deferred(o) && i < r->after.n; i++) {
        const struct pfile *f = &r->after.v[i];
        char path[PATH_MAX];
        s->summary = f->pid == (long)r->pid ? summary : NULL;
        if (!memprof_cli_spool_existed(r->before, f) && !memprof_cli_watch_named(r->watch, f) &&
            snprintf(path, sizeof path, "%s/%s", r->tp->dir, f->name) < (int)sizeof path)
            memprof_cli_symbolize_file(path, s);
    }
    memprof_cli_symbolize_missing(s); /* those the watcher met, if no file was left */
    memprof_cli_symbolize_end(s);
}

/* ---- the main program's file to -o ---------------------------------------------------------- */

static int copy_file(FILE *out, void *ctx)
{
    int fd = open((const char *)ctx, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return -errno;
    char buf[65536];
    ssize_t n;
    int rc = 0;
    while ((n = read(fd, buf, sizeof buf)) != 0) {
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 || fwrite(buf, 1, (size_t)n, out) != (size_t)n) {
            rc = -(n < 0 ? errno : EIO);
            break;
        }
    }
    close(fd);
    return rc;
}

/* The main program's profile `written`, found: named if it was not in a listing, then
 * renamed or copied to -o's name. */
static void deliver(const struct run_options *o, struct paths *ps, struct run_files *r,
                    char *written, FILE *summary)
{
    r->profile = r->read_from = written;
    if (!r->tp->ok && memprof_cli_run_deferred(o)) { /* not in a listing: only this one */
        struct memprof_cli_symbolize s = {.quiet = o->quiet,
                                          .format = o->format,
                                          .summary = summary,
                                          .summary_top = MEMPROF_RUN_SUMMARY_TOP,
                                          .in_place = true};
        memprof_cli_symbolize_file(written, &s);
        memprof_cli_symbolize_end(&s);
    }
    if (ps->final && ps->tmpdir[0]) {
        /* Written in place: the file in the temporary directory is read for the summary
         * and removed afterwards (memprof_cli_spool_remove). */
        if (memprof_cli_write_atomic(ps->final, copy_file, written) == 0) {
            r->profile = ps->final;
            ps->copied = true;
        }
    } else if (ps->final) {
        if (rename(written, ps->final) == 0)
            r->profile = r->read_from = ps->final;
        else
            memprof_cli_error("cannot rename %s to %s: %s", written, ps->final, strerror(errno));
    }
}

void memprof_cli_spool_collect(const struct run_options *o, struct paths *ps,
                               const struct timespec *start, struct run_files *r, FILE *summary)
{
    char *written = ps->main_file;
    r->profile = r->read_from = NULL;
    /* Stopped before the listing: a file it rewrote after being listed would look new. */
    struct memprof_cli_symbolize *watched = memprof_cli_watch_stop(r->watch);
    memprof_cli_spool_scan(r->tp, &r->after);
    symbolize_written(o, r, watched, summary);
    if (main_file(ps, r->pid, r->before, &r->after, written, sizeof ps->main_file) &&
        written_by_run(written, r->pid, r->tp, r->before, &r->after, start))
        deliver(o, ps, r, written, summary);
}
