/* SPDX-License-Identifier: MIT */
/*
 * The command's symbolization step (`memprof report --symbolize`, and `memprof run` after
 * the program exits): names a profile's unresolved frames from the files of their build
 * ids (export/symbolize.h, resolve/offline.h) and says which modules' files were not found,
 * with where they were looked for.
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli.h"
#include "export/symbolize.h"

#define MAX_MISSING_LISTED 5

int memprof_cli_symbolize(const struct memprof_profile *p, const struct memprof_cli_symbolize *s,
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
    struct memprof_offline *o = memprof__offline_new(&c);
    size_t named = 0;
    int rc = o ? memprof__profile_symbolize(p, o, out, &named) : -ENOMEM;
    if (rc != 0) {
        memprof_cli_error("cannot symbolize: %s", strerror(-rc));
        memprof__offline_free(o);
        return rc;
    }
    const char *build_id, *path;
    size_t n = 0;
    for (; (path = memprof__offline_missing(o, n, &build_id)) != NULL; n++)
        if (!s->quiet && n < MAX_MISSING_LISTED)
            memprof_cli_error("no file of build id %s for %s: its frames stay addresses",
                              build_id ? build_id : "(none)", path ? path : "(no path)");
    if (!s->quiet && n > MAX_MISSING_LISTED)
        memprof_cli_error("... and %zu more modules without files", n - MAX_MISSING_LISTED);
    if (!s->quiet && n)
        memprof_cli_error("looked at the recorded paths, %s/usr/lib/debug/.build-id%s",
                          s->ndebug_dirs ? "--debug-dir, " : "",
                          memprof__offline_has_debuginfod() ? " and DEBUGINFOD_URLS" : "");
    memprof__offline_free(o);
    if (s->named)
        *s->named = named;
    return 0;
}

static int fill_pprof(FILE *out, void *ctx)
{
    return memprof_cli_export(ctx, MEMPROF_FORMAT_PPROF, out, 0, MEMPROF_VIEW_LIVE, false);
}

int memprof_cli_symbolize_file(const char *path, const struct memprof_cli_symbolize *s)
{
    struct memprof_profile *p = memprof_cli_read_profile(path), *named = NULL;
    if (!p)
        return -EINVAL;
    size_t n = 0;
    struct memprof_cli_symbolize with_count = *s;
    with_count.named = &n;
    int rc = memprof_cli_symbolize(p, &with_count, &named);
    /* Rewritten only when something gained a name: a profile already named stays as is. */
    if (rc == 0 && n && memprof_cli_write_atomic(path, fill_pprof, named) != 0)
        rc = -EIO;
    memprof__profile_symbolized_free(named);
    memprof__profile_free(p);
    return rc;
}
