/* SPDX-License-Identifier: MIT */
/*
 * `memprof report`: converts a pprof profile written by memprof into any of the export
 * formats; several profiles are merged into one first, as pprof merges them (values summed,
 * export/merge.c). The profile goes through the pprof reader (which rejects anything memprof did
 * not write, with a reason) into the same profile model the live writers read, so a saved profile
 * and a live snapshot print identically. Output goes to standard output or, with -o, to a
 * file written atomically (temporary file in the same directory, mode 0600, then rename), so
 * a reader of the file never sees half of it.
 *
 * --view chooses what the human-facing formats show (live, alloc, peak, temporary, leaks;
 * doc/guide.md, "Views"); --value chooses bytes or objects for the collapsed format and, in
 * its older pprof-style names (inuse_space, alloc_objects, ...), a view as well. pprof takes
 * neither: it carries every view itself (peak and temporary as sample types, the leak
 * statistic, lifetimes and threads as labels).
 *
 * --symbolize names the frames the profiled process left as addresses (MEMPROF_SYMBOLIZE=0,
 * or modules it could not read) from the files of their build ids, --debug-dir adding
 * places to look (symbolize.c); the output, pprof included, then carries the names.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cli.h"
#include "offline/symbolize.h"

#define DEFAULT_TOP 20

#define MAX_DEBUG_DIRS 16 /* --debug-dir given at most this often */

struct report_job {
    const struct memprof_profile *p;
    memprof_format format;
    unsigned top;
    enum memprof_view view;
    bool objects;
    bool addresses; /* collapsed: keep unresolved frames' addresses (--addresses) */
};

static int fill(FILE *out, void *ctx)
{
    const struct report_job *j = ctx;
    return memprof_cli_export(j->p, j->format, out, j->top, j->view, j->objects, j->addresses);
}

/* Checks --view and --value against each other and the format; fills the job's view and
 * unit. `view` and `value_view` are -1 when not given (value_view also when --value names a
 * unit only). Returns CLI_EXIT_OK or prints one line and returns CLI_EXIT_USAGE. */
static int settle_view(struct report_job *job, const char *view_s, int view, const char *value_s,
                       int value_view)
{
    if (job->format == MEMPROF_FORMAT_PPROF && (view_s || value_s))
        return memprof_cli_usage_error("report",
                                       "%s applies to text, collapsed, speedscope and html; pprof "
                                       "carries every view itself (sample types and labels)",
                                       view_s ? "--view" : "--value");
    if (view >= 0 && value_view >= 0 && view != value_view)
        return memprof_cli_usage_error("report",
                                       "--value %s names the %s view, but --view is %s; use "
                                       "--value bytes or objects with --view",
                                       value_s, memprof__view_name(value_view),
                                       memprof__view_name(view));
    job->view = view >= 0         ? (enum memprof_view)view
                : value_view >= 0 ? (enum memprof_view)value_view
                                  : MEMPROF_VIEW_LIVE;
    if (job->objects && job->format != MEMPROF_FORMAT_COLLAPSED)
        return memprof_cli_usage_error("report",
                                       "--value %s: only the collapsed format counts objects; "
                                       "text, speedscope and html show both or bytes",
                                       value_s);
    if (job->objects && job->view == MEMPROF_VIEW_LEAKS)
        return memprof_cli_usage_error("report", "--value %s: the leaks view counts bytes only",
                                       value_s);
    return CLI_EXIT_OK;
}

int memprof_cli_report(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"format", required_argument, NULL, 'f'},
        {"output", required_argument, NULL, 'o'},
        {"top", required_argument, NULL, 't'},
        {"value", required_argument, NULL, 'v'},
        {"view", required_argument, NULL, 'w'},
        {"symbolize", no_argument, NULL, 's'},
        {"debug-dir", required_argument, NULL, 'd'},
        {"addresses", no_argument, NULL, 'A'},
        {"wrapper", required_argument, NULL, 'W'},
        {"native", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *format_s = NULL, *output = NULL, *view_s = NULL, *value_s = NULL;
    struct report_job job = {.top = DEFAULT_TOP, .view = MEMPROF_VIEW_LIVE};
    int c, view = -1, value_view = -1;
    bool symbolize = false;
    const char *debug_dirs[MAX_DEBUG_DIRS];
    size_t ndebug_dirs = 0;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":f:o:n:t:v:sh", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            symbolize = true;
            break;
        case 'd':
            if (ndebug_dirs == MAX_DEBUG_DIRS)
                return memprof_cli_usage_error("report", "--debug-dir: at most %d directories",
                                               MAX_DEBUG_DIRS);
            debug_dirs[ndebug_dirs++] = optarg;
            symbolize = true; /* a debug directory is only of use to symbolize */
            break;
        case 'A':
            job.addresses = true;
            break;
        case 'W':
            if (!memprof_cli_add_wrapper("report", optarg))
                return CLI_EXIT_USAGE;
            break;
        case 'N':
            memprof_cli_show_native();
            break;
        case 'f':
            format_s = optarg;
            break;
        case 'o':
            output = optarg;
            break;
        case 'n':
        case 't': {
            unsigned long n;
            if (!memprof_cli_parse_uint(optarg, 1000000, &n))
                return memprof_cli_usage_error("report",
                                               "--top '%s': expected a number of sites from 0 "
                                               "(all) to 1000000",
                                               optarg);
            job.top = n ? (unsigned)n : UINT32_MAX;
            break;
        }
        case 'v':
            if (memprof_cli_parse_value(optarg, &value_view, &job.objects) < 0)
                return memprof_cli_usage_error("report",
                                               "--value '%s': expected bytes, objects, "
                                               "inuse_space, alloc_space, inuse_objects or "
                                               "alloc_objects",
                                               optarg);
            value_s = optarg;
            break;
        case 'w':
            if ((view = memprof_cli_view_by_name(optarg)) < 0)
                return memprof_cli_usage_error("report",
                                               "--view '%s': expected live, alloc, peak, "
                                               "temporary or leaks",
                                               optarg);
            view_s = optarg;
            break;
        case 'h':
            memprof_cli_help("report", stdout);
            return CLI_EXIT_OK;
        default:
            return memprof_cli_bad_option("report", c, argv);
        }
    }
    if (optind >= argc)
        return memprof_cli_usage_error("report", "no profile given");
    int ninputs = argc - optind;
    if (output && !strcmp(output, "-"))
        output = NULL;

    if (format_s) {
        job.format = memprof__format_by_name(format_s);
        if (job.format == MEMPROF_FORMAT_AUTO)
            return memprof_cli_usage_error("report",
                                           "--format '%s': expected pprof, speedscope, "
                                           "collapsed, text or html",
                                           format_s);
    } else {
        job.format = output ? memprof__format_by_path(output) : MEMPROF_FORMAT_TEXT;
        if (job.format == MEMPROF_FORMAT_AUTO)
            job.format = MEMPROF_FORMAT_TEXT;
    }
    int status = settle_view(&job, view_s, view, value_s, value_view);
    if (status != CLI_EXIT_OK)
        return status;
    if (job.addresses && job.format != MEMPROF_FORMAT_COLLAPSED)
        return memprof_cli_usage_error("report", "--addresses applies to the collapsed format "
                                                 "only");
    if (job.format == MEMPROF_FORMAT_PPROF && !output && isatty(STDOUT_FILENO))
        return memprof_cli_usage_error("report", "will not write a compressed pprof profile to a "
                                                 "terminal; use -o FILE");

    /* Several profiles are merged as pprof merges them (export/merge.c). */
    struct memprof_profile **in = calloc((size_t)ninputs, sizeof *in), *p = NULL;
    if (!in) {
        memprof_cli_error("%s", strerror(ENOMEM));
        return CLI_EXIT_FAILURE;
    }
    for (int i = 0; i < ninputs; i++)
        if (!(in[i] = memprof_cli_read_profile(argv[optind + i]))) {
            for (int k = 0; k < i; k++)
                memprof__profile_free(in[k]);
            free(in);
            return CLI_EXIT_FAILURE;
        }
    if (ninputs == 1) {
        p = in[0];
        in[0] = NULL;
    } else if (memprof__profile_merge(in, (size_t)ninputs, &p) != 0) {
        memprof_cli_error("cannot merge the profiles: %s", strerror(ENOMEM));
        status = CLI_EXIT_FAILURE;
    }
    struct memprof_profile *named = NULL;
    if (p && !symbolize && memprof__profile_unsymbolized(p))
        memprof_cli_error("the profile holds addresses only (written with MEMPROF_SYMBOLIZE=0?): "
                          "--symbolize names them");
    if (p && symbolize) {
        struct memprof_cli_symbolize s = {.debug_dirs = debug_dirs, .ndebug_dirs = ndebug_dirs};
        if (memprof_cli_symbolize(p, &s, &named) != 0)
            status = CLI_EXIT_FAILURE;
        memprof_cli_symbolize_end(&s);
    }
    job.p = named ? named : p;
    if (!p || (symbolize && !named)) {
        /* merging failed: said above */
    } else if (output) {
        if (memprof_cli_write_atomic(output, fill, &job) != 0)
            status = CLI_EXIT_FAILURE;
    } else {
        int rc = fill(stdout, &job);
        if (fflush(stdout) != 0 && rc == 0)
            rc = -errno;
        if (rc == 0 && ferror(stdout))
            rc = -EIO;
        if (rc != 0) {
            memprof_cli_error("cannot write to standard output: %s", strerror(-rc));
            status = CLI_EXIT_FAILURE;
        }
    }
    memprof__profile_symbolized_free(named); /* points into p */
    memprof__profile_free(p); /* a merged profile points into the inputs: free it first */
    for (int i = 0; i < ninputs; i++)
        memprof__profile_free(in[i]);
    free(in);
    return status;
}
