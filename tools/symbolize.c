/* SPDX-License-Identifier: MIT */
/*
 * The command's symbolization step (`memprof report --symbolize`, and `memprof run` after
 * the program exits): names a profile's unresolved frames from the files of their build
 * ids (offline/symbolize.h, offline/offline.h) and says which modules' files were not found,
 * with where they were looked for.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

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
    /* The modules not found since the last call (the session remembers them all). */
    const char *build_id, *path;
    size_t n = s->said;
    for (; (path = memprof__offline_missing(o, n, &build_id)) != NULL; n++)
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
    if (s->named)
        *s->named = named;
    return 0;
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

int memprof_cli_symbolize_file(const char *path, struct memprof_cli_symbolize *s)
{
    struct memprof_profile *p = memprof_cli_read_profile(path), *named = NULL;
    if (!p)
        return -EINVAL;
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
        (s->in_place ? memprof_cli_rewrite_in_place(path, fill, &r)
                     : memprof_cli_write_atomic(path, fill, &r)) != 0)
        rc = -EIO;
    memprof__profile_symbolized_free(named);
    memprof__profile_free(p);
    return rc;
}

void memprof_cli_symbolize_end(struct memprof_cli_symbolize *s)
{
    memprof__offline_free(s->session);
    s->session = NULL;
}
