/* SPDX-License-Identifier: MIT */
/*
 * The command's symbolization step (`memprof report --symbolize`, and `memprof run` after
 * the program exits): names a profile's unresolved frames from the files of their build
 * ids (offline/symbolize.h, offline/offline.h) and says which modules' files were not found,
 * with where they were looked for.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli.h"
#include "offline/symbolize.h"

#define MAX_MISSING_LISTED 5

int memprof_cli_symbolize(const struct memprof_profile *p, struct memprof_cli_symbolize *s,
                          struct memprof_profile **out)
{
    *out = NULL;
    if (!memprof__offline_supported()) {
        memprof_cli_error("cannot symbolize: this memprof was built without elfutils' libdw");
        return -ENOTSUP;
    }
    struct memprof_offline_config c = {
        .debug_dirs = s->debug_dirs,
        .ndebug_dirs = s->ndebug_dirs,
        .debuginfod = true,
    };
    /* A run's profiles share one session: each module's files are read once. */
    if (!s->session && !(s->session = memprof__offline_new(&c))) {
        memprof_cli_error("cannot symbolize: %s", strerror(ENOMEM));
        return -ENOMEM;
    }
    struct memprof_offline *o = s->session;
    size_t named = 0;
    int rc = memprof__profile_symbolize(p, o, out, &named);
    if (rc != 0) {
        memprof_cli_error("cannot symbolize: %s", strerror(-rc));
        return rc;
    }
    if (s->named)
        *s->named = named;
    if (!s->hold_missing)
        memprof_cli_symbolize_missing(s);
    return 0;
}

void memprof_cli_symbolize_missing(struct memprof_cli_symbolize *s)
{
    /* The modules not found since the last call (the session remembers them all). */
    const char *build_id, *path;
    size_t n = s->said;
    for (; s->session && (path = memprof__offline_missing(s->session, n, &build_id)) != NULL; n++)
        if (!s->quiet && n < MAX_MISSING_LISTED)
            memprof_cli_error("no file of build id %s for %s: its frames stay addresses",
                              build_id ? build_id : "(none)", path ? path : "(no path)");
    if (!s->quiet && n > MAX_MISSING_LISTED && s->said <= MAX_MISSING_LISTED)
        memprof_cli_error("... and more modules without files");
    if (!s->quiet && n > s->said)
        memprof_cli_error("looked at the recorded paths, %s/usr/lib/debug/.build-id%s",
                          s->ndebug_dirs ? "--debug-dir, " : "",
                          memprof__offline_has_debuginfod() ? " and DEBUGINFOD_URLS" : "");
    s->said = n;
}

struct rewrite {
    const struct memprof_profile *p;
    memprof_format format;
};

static int fill(FILE *out, void *ctx)
{
    const struct rewrite *r = ctx;
    /* What memprof run would have had the program write: the live view, the default top. */
    return memprof_cli_export(r->p, r->format, out, 20, MEMPROF_VIEW_LIVE, false, false);
}

/* The file at `path` open for rewriting in place, its state in *st; -1 when it cannot be
 * (not a regular file, not writable). */
static int open_in_place(const char *path, struct stat *st)
{
    int fd = open(path, O_RDWR | O_CLOEXEC | O_NOFOLLOW);
    if (fd >= 0 && (fstat(fd, st) != 0 || !S_ISREG(st->st_mode))) {
        close(fd);
        fd = -1;
    }
    return fd;
}

int memprof_cli_symbolize_file(const char *path, struct memprof_cli_symbolize *s)
{
    /* In place, the file is read and rewritten through one descriptor: if the program
     * replaces it meanwhile (renaming a newer profile over it), the newer one stays. */
    struct stat st;
    int fd = s->in_place ? open_in_place(path, &st) : -1;
    struct memprof_profile *p = fd >= 0 ? memprof_cli_read_profile_fd(fd, path)
                                        : memprof_cli_read_profile(path),
                           *named = NULL;
    if (!p) {
        if (fd >= 0 && s->done)
            *s->done = st;
        if (fd >= 0)
            close(fd);
        return -EINVAL;
    }
    size_t n = 0, *count = s->named;
    s->named = &n;
    int rc = memprof_cli_symbolize(p, s, &named);
    s->named = count;
    /* A pprof profile already named stays as is; another format is always written. */
    memprof_format format = s->format == MEMPROF_FORMAT_AUTO ? MEMPROF_FORMAT_PPROF : s->format;
    struct rewrite r = {named, format};
    if (rc == 0 && s->summary && format != MEMPROF_FORMAT_PPROF)
        memprof_cli_write_summary(named, s->summary, s->summary_top);
    if (rc == 0 && (n || format != MEMPROF_FORMAT_PPROF) &&
        (fd >= 0 ? memprof_cli_rewrite_in_place(fd, path, fill, &r)
                 : memprof_cli_write_atomic(path, fill, &r)) != 0)
        rc = -EIO;
    if (fd >= 0 && s->done && fstat(fd, s->done) != 0)
        *s->done = st;
    if (fd >= 0)
        close(fd);
    memprof__profile_symbolized_free(named);
    memprof__profile_free(p);
    return rc;
}

void memprof_cli_symbolize_end(struct memprof_cli_symbolize *s)
{
    memprof__offline_free(s->session);
    s->session = NULL;
}
