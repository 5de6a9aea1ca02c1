/* SPDX-License-Identifier: MIT */
/*
 * The text writer: what a person reads first. Its heading (memprof__export_summary) states
 * the whole-heap estimate with its 95 % interval and sample count, the peak with its time,
 * the bytes allocated in total, and the profiler's health (anything dropped, truncated or
 * unresolved). Then one view's top sites (doc/guide.md, "Views"): their estimates, with
 * intervals where the view has a variance (live, peak) and a mark where they rest on few
 * samples, the lifetimes of their freed samples, the thread that allocated, and call paths;
 * for the leaks view the suspects with their rates. A "Threads" section sums the view per
 * thread when the profile knows its threads.
 *
 * Also here: the byte and duration formatting and the site interval every writer shares.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>

#include "common/estimate.h"
#include "export/export.h"
#include "export/interval.h"
#include "memprof/memprof.h"

#define PATH_FRAMES 10

const char *memprof__export_bytes(uint64_t bytes, char *buf, unsigned size)
{
    static const char *units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)bytes;
    unsigned u = 0;
    while (v >= 1024.0 && u + 1 < sizeof units / sizeof *units) {
        v /= 1024.0;
        u++;
    }
    if (u == 0)
        snprintf(buf, size, "%" PRIu64 " B", bytes);
    else
        snprintf(buf, size, "%.1f %s", v, units[u]);
    return buf;
}

const char *memprof__export_duration(uint64_t ns, char *buf, unsigned size)
{
    double v = (double)ns;
    if (ns < 1000)
        snprintf(buf, size, "%" PRIu64 " ns", ns);
    else if (ns < 1000000)
        snprintf(buf, size, "%.3g us", v / 1e3);
    else if (ns < 1000000000)
        snprintf(buf, size, "%.3g ms", v / 1e6);
    else if (ns < 1000000000000ull) /* "%.3g" would turn 1000 s into 1e+03 */
        snprintf(buf, size, "%.*f s",
                 ns < 10000000000ull    ? 2
                 : ns < 100000000000ull ? 1
                                        : 0,
                 v / 1e9);
    else
        snprintf(buf, size, "%.1f h", v / 3.6e12);
    return buf;
}

void memprof__export_interval(double est, double var, uint64_t samples, uint64_t rate,
                              struct memprof_export_interval *out)
{
    /* A view without a variance (alloc, temporary, leaks) gets the mark only, from the
     * variance its samples would have if each carried an equal share (relative error
     * 1/sqrt(samples)). */
    if (var < 0)
        var = samples ? est * est / (double)samples : 0.0;
    /* The interval that holds at small sample counts (doc/statistics.md, "Intervals"); its
     * low-information test looks at the variance, so a few samples of blocks far above the
     * rate, estimated exactly, are not marked. */
    struct memprof_interval iv;
    memprof__interval_at_rate(est, var, samples, rate, &iv);
    out->lo = iv.lo;
    out->hi = iv.hi;
    out->low_information = iv.low_information;
}

/* The first frames of a stack, one per line, with file:line where known. */
static void print_path(const struct memprof_profile *p, const struct memprof_pstack *st, FILE *out)
{
    unsigned shown = st->nframes < PATH_FRAMES ? st->nframes : PATH_FRAMES;
    for (unsigned i = 0; i < shown; i++) {
        const struct memprof_pframe *f = &p->frames[st->frames[i]];
        char buf[256];
        fprintf(out, "        %s %s", i ? "<-" : "at", memprof__pframe_label(f, buf, sizeof buf));
        if (f->file)
            fprintf(out, " (%s:%u)", f->file, f->line);
        else if (f->function && f->sym_offset)
            fprintf(out, "+0x%llx", (unsigned long long)f->sym_offset); /* nothing better */
        fprintf(out, "%s%s\n", (f->flags & MEMPROF_FRAME_INLINED) ? " [inlined]" : "",
                (f->flags & MEMPROF_FRAME_TRUNCATED) ? " [stack truncated]" : "");
    }
    if (st->nframes > shown)
        fprintf(out, "        ... %u more frames\n", st->nframes - shown);
}

static uint64_t add_sat(uint64_t a, uint64_t b)
{
    return a + b < a ? UINT64_MAX : a + b;
}

/* Bytes allocated since sampling began, over all stacks (the model keeps no total). */
static uint64_t allocated_total(const struct memprof_profile *p)
{
    uint64_t total = 0;
    for (size_t i = 0; i < p->nstacks; i++)
        total = add_sat(total, p->stacks[i].alloc_space);
    return total;
}

/* "12.0 MiB (95% interval 11.5 MiB to 12.5 MiB)", with ", few samples" inside the
 * parentheses when the estimate rests on little information. */
static const char *estimate_text(uint64_t bytes, double var, uint64_t samples, uint64_t rate,
                                 char *buf, unsigned size)
{
    struct memprof_export_interval iv;
    char b1[32], b2[32], b3[32];
    memprof__export_interval((double)bytes, var, samples, rate, &iv);
    snprintf(
        buf, size, "%s (95%% interval %s to %s%s)", memprof__export_bytes(bytes, b1, sizeof b1),
        memprof__export_bytes(iv.lo, b2, sizeof b2), memprof__export_bytes(iv.hi, b3, sizeof b3),
        iv.low_information ? ", few samples" : "");
    return buf;
}

/* "at 1.25 s", or for merged profiles, whose peaks were moments of different processes,
 * "(the sum of N profiles' peaks)". */
static const char *peak_when(const struct memprof_profile *p, char *buf, unsigned size)
{
    char t[32];
    if (p->merged > 1)
        snprintf(buf, size, "(the sum of %u profiles' peaks)", p->merged);
    else
        snprintf(buf, size, "at %s", memprof__export_duration(p->peak_time_ns, t, sizeof t));
    return buf;
}

/* Where names are missing and how to get them (memprof__unnamed_modules()): otherwise a
 * stripped program's profile is a column of `git+0x289719` frames with no word on why. */
static void print_symbols_note(const struct memprof_profile *p, FILE *out)
{
    const char *mods[3];
    bool more;
    size_t n = memprof__unnamed_modules(p, mods, sizeof mods / sizeof *mods, &more);
    if (n == 0)
        return;
    fprintf(out, "Note: the frames without a name are in ");
    for (size_t k = 0; k < n; k++)
        fprintf(out, "%s%s", k ? ", " : "", mods[k]);
    fprintf(out,
            "%s (no symbols or debug information found). Install their debug files "
            "(Debian: the -dbgsym packages) and profile again, or name a pprof file "
            "later: memprof report --symbolize --debug-dir DIR FILE.\n",
            more ? " and others" : "");
}

int memprof__export_summary(const struct memprof_profile *p, FILE *out)
{
    char b1[64], b2[32], b3[32], est[128];
    uint64_t alloc = allocated_total(p);
    int peak_known = p->peak_space || p->peak_samples;
    fprintf(out, "libmemprof %s heap profile (sampling rate %" PRIu64 " bytes)\n",
            MEMPROF_VERSION_STRING, p->sampling_rate);
    if (p->inuse_space == 0 && alloc > 0) {
        /* A bare "0 B" would read as "nothing happened": say what did. */
        fprintf(out, "Estimated live heap: 0 B live at the snapshot; ");
        if (peak_known)
            fprintf(out, "peak %s %s; ",
                    estimate_text(p->peak_space, p->peak_space_var, p->peak_samples,
                                  p->sampling_rate, est, sizeof est),
                    peak_when(p, b1, sizeof b1));
        else
            fprintf(out, "no peak recorded; ");
        fprintf(out, "allocated in total: %s\n", memprof__export_bytes(alloc, b2, sizeof b2));
    } else {
        struct memprof_export_interval iv;
        memprof__export_interval((double)p->inuse_space, p->inuse_space_var, p->live_samples,
                                 p->sampling_rate, &iv);
        fprintf(out,
                "Estimated live heap: %s (95%% interval %s to %s), ~%" PRIu64
                " allocations, from %" PRIu64 " live samples\n",
                memprof__export_bytes(p->inuse_space, b1, sizeof b1),
                memprof__export_bytes(iv.lo, b2, sizeof b2),
                memprof__export_bytes(iv.hi, b3, sizeof b3), p->inuse_objects, p->live_samples);
        if (peak_known) {
            fprintf(out, "Peak: %s %s; ",
                    estimate_text(p->peak_space, p->peak_space_var, p->peak_samples,
                                  p->sampling_rate, est, sizeof est),
                    peak_when(p, b1, sizeof b1));
            if (p->duration_ns)
                fprintf(out, "live at the snapshot (%s): ",
                        memprof__export_duration(p->duration_ns, b1, sizeof b1));
            else
                fprintf(out, "live at the snapshot: ");
            fprintf(out, "%s; allocated in total: %s\n",
                    memprof__export_bytes(p->inuse_space, b2, sizeof b2),
                    memprof__export_bytes(alloc, b3, sizeof b3));
        } else if (alloc > 0) {
            fprintf(out, "Peak: not recorded in this profile; allocated in total: %s\n",
                    memprof__export_bytes(alloc, b1, sizeof b1));
        }
    }
    struct memprof_export_interval heap;
    memprof__export_interval((double)p->inuse_space, p->inuse_space_var, p->live_samples,
                             p->sampling_rate, &heap);
    if (p->live_samples > 0 && heap.low_information)
        fprintf(out,
                "Note: only %" PRIu64 " live samples; treat the estimates as rough (a lower "
                "sampling rate gives more precision).\n",
                p->live_samples);
    fprintf(out,
            "Health: %" PRIu64 " samples dropped (heap map full), %" PRIu64
            " stack-table overflows, %" PRIu64 " truncated stacks, ",
            p->dropped_samples, p->stack_overflows, p->truncated_stacks);
    /* A raw profile looked nothing up, so "0 of N without symbols" would be wrong twice. */
    if (memprof__profile_unsymbolized(p))
        fprintf(out, "the profile is unsymbolized (written with MEMPROF_SYMBOLIZE=0): "
                     "memprof report --symbolize names its frames\n");
    else {
        fprintf(out, "%" PRIu64 " of %" PRIu64 " code addresses without symbols\n",
                p->unresolved_addresses, p->total_addresses);
        print_symbols_note(p, out);
    }
    return ferror(out) ? -EIO : 0;
}

/* ---- The view's sites ---------------------------------------------------------------- */

struct ranked {
    uint64_t bytes;
    double rate; /* leaks: what they are ranked by */
    size_t index;
};

static int by_rank(const void *a, const void *b)
{
    const struct ranked *x = a, *y = b;
    if (x->rate != y->rate)
        return x->rate < y->rate ? 1 : -1;
    if (x->bytes != y->bytes)
        return x->bytes < y->bytes ? 1 : -1;
    return x->index < y->index ? -1 : x->index > y->index;
}

/* "worker-1 (tid 1234)" or "tid 1234", NULL when the stack's thread is not known. */
static const char *thread_text(const struct memprof_profile *p, uint32_t thread, char *buf,
                               unsigned size)
{
    if (thread == 0 || thread > p->nthreads)
        return NULL;
    const struct memprof_pthread *t = &p->threads[thread - 1];
    if (t->name && *t->name)
        snprintf(buf, size, "%s (tid %" PRIu64 ")", t->name, t->tid);
    else
        snprintf(buf, size, "tid %" PRIu64, t->tid);
    return buf;
}

/* "< 4.1 ms": a lifetime quantile is the upper edge of its bucket. */
static const char *lifetime_text(uint64_t edge, char *buf, unsigned size)
{
    char d[32];
    if (edge == UINT64_MAX)
        snprintf(buf, size, ">= %s",
                 memprof__export_duration(
                     memprof__lifetime_bucket_end_ns(MEMPROF_LIFETIME_BUCKETS - 2), d, sizeof d));
    else
        snprintf(buf, size, "< %s", memprof__export_duration(edge, d, sizeof d));
    return buf;
}

/* The line under a site with what else is known of it: lifetimes, thread. */
static void print_details(const struct memprof_profile *p, const struct memprof_pstack *st,
                          FILE *out)
{
    char l50[40], l90[40], th[160];
    uint64_t q50 = memprof__pstack_lifetime_quantile(st, 0.5);
    const char *thread = thread_text(p, st->thread, th, sizeof th);
    if (!q50 && !thread)
        return;
    fputs("        ", out);
    if (q50)
        fprintf(out, "freed after: p50 %s, p90 %s", lifetime_text(q50, l50, sizeof l50),
                lifetime_text(memprof__pstack_lifetime_quantile(st, 0.9), l90, sizeof l90));
    if (thread)
        fprintf(out, "%sthread %s", q50 ? "; " : "", thread);
    fputc('\n', out);
}

static void print_title(const struct memprof_profile *p, enum memprof_view view, FILE *out)
{
    char b1[32], b2[64];
    switch (view) {
    case MEMPROF_VIEW_ALLOC:
        fprintf(out, "Top sites by estimated bytes allocated since sampling began:\n");
        break;
    case MEMPROF_VIEW_PEAK:
        if (p->peak_space || p->peak_samples)
            fprintf(out, "Top sites by estimated bytes live at the peak (%s %s):\n",
                    memprof__export_bytes(p->peak_space, b1, sizeof b1),
                    peak_when(p, b2, sizeof b2));
        else
            fprintf(out, "Top sites by estimated bytes live at the peak:\n");
        break;
    case MEMPROF_VIEW_TEMPORARY:
        if (p->temp_threshold_ns)
            fprintf(out,
                    "Top sites by estimated bytes of temporary allocations (freed within %s):\n",
                    memprof__export_duration(p->temp_threshold_ns, b1, sizeof b1));
        else
            fprintf(out, "Top sites by estimated bytes of temporary allocations (threshold not "
                         "recorded in this profile):\n");
        break;
    case MEMPROF_VIEW_LEAKS:
        fprintf(out, "Leak suspects, fastest growing first (doc/statistics.md):\n");
        break;
    case MEMPROF_VIEW_LIVE:
    default:
        fprintf(out, "Top sites by estimated live bytes:\n");
        break;
    }
}

static void print_site(const struct memprof_profile *p, const struct memprof_pstack *st,
                       enum memprof_view view, unsigned rank, FILE *out)
{
    char b1[32], b2[32], est[128], label[256];
    struct memprof_pvalue v;
    struct memprof_export_interval iv;
    memprof__pstack_view(st, view, &v);
    memprof__export_interval((double)v.bytes, v.var_known ? v.var : -1.0, v.samples,
                             p->sampling_rate, &iv);
    const char *few = iv.low_information ? " (few samples)" : "";
    /* Named by its innermost frame that is the user's (sites.c), as every writer names it. */
    uint32_t at = st->nframes ? memprof__pstack_label(p, st, memprof__pstack_site(p, st)) : 0;
    const char *site = st->nframes
                           ? memprof__pframe_label(&p->frames[st->frames[at]], label, sizeof label)
                           : "[no stack: stack table full]";
    /* The site's name ends the line, so a reader (or a script) finds it at the end. */
    if (view == MEMPROF_VIEW_LEAKS)
        fprintf(out,
                "%3u. leaking ~%s/s over the window%s, %s of survivors, %" PRIu64 " samples  %s\n",
                rank, memprof__export_bytes(memprof__est_round(st->leak_rate), b1, sizeof b1), few,
                memprof__export_bytes(v.bytes, b2, sizeof b2), v.samples, site);
    else if (v.var_known)
        fprintf(out, "%3u. %s, ~%" PRIu64 " allocations, %" PRIu64 " samples  %s\n", rank,
                estimate_text(v.bytes, v.var, v.samples, p->sampling_rate, est, sizeof est),
                v.objects, v.samples, site);
    else
        fprintf(out, "%3u. %s%s, ~%" PRIu64 " allocations, %" PRIu64 " samples  %s\n", rank,
                memprof__export_bytes(v.bytes, b1, sizeof b1), few, v.objects, v.samples, site);
    print_details(p, st, out);
    print_path(p, st, out);
}

/* Bytes of the view per thread, largest first; only when the profile knows its threads. */
static int print_threads(const struct memprof_profile *p, enum memprof_view view, unsigned top,
                         FILE *out)
{
    if (p->nthreads == 0)
        return 0;
    struct ranked *t = calloc(p->nthreads + 1, sizeof *t); /* [0]: not known */
    if (!t)
        return -ENOMEM;
    for (size_t i = 0; i <= p->nthreads; i++)
        t[i].index = i;
    for (size_t i = 0; i < p->nstacks; i++) {
        struct memprof_pvalue v;
        uint32_t th = p->stacks[i].thread <= p->nthreads ? p->stacks[i].thread : 0;
        memprof__pstack_view(&p->stacks[i], view, &v);
        t[th].bytes = add_sat(t[th].bytes, v.bytes);
    }
    qsort(t, p->nthreads + 1, sizeof *t, by_rank);
    fprintf(out, "\nThreads (estimated bytes, %s view):\n", memprof__view_name(view));
    unsigned shown = 0;
    for (size_t i = 0; i <= p->nthreads && shown < top && t[i].bytes; i++, shown++) {
        char b[32], th[160];
        const char *name = thread_text(p, (uint32_t)t[i].index, th, sizeof th);
        fprintf(out, "  %10s  %s\n", memprof__export_bytes(t[i].bytes, b, sizeof b),
                name ? name : "(thread not known)");
    }
    if (shown == 0)
        fprintf(out, "  (nothing in this view)\n");
    free(t);
    return 0;
}

int memprof__export_text_sites(const struct memprof_profile *p, FILE *out, enum memprof_view view,
                               unsigned top)
{
    if ((unsigned)view >= MEMPROF_VIEW_COUNT)
        return -EINVAL;
    /* Sites, not stacks: a call path allocated by several threads is one site here (the
     * Threads section and pprof keep them apart), and so are the paths that differ only in
     * the wrappers and interpreter internals left out of them (sites.c). */
    struct memprof_profile *shown, *sites;
    if (memprof__profile_presented(p, memprof__present_native(), &shown) != 0)
        return -ENOMEM;
    if (memprof__profile_sites(shown, &sites) != 0) {
        memprof__profile_presented_free(shown);
        return -ENOMEM;
    }
    struct ranked *r = malloc((sites->nstacks + 1) * sizeof *r);
    if (!r) {
        memprof__profile_sites_free(sites);
        memprof__profile_presented_free(shown);
        return -ENOMEM;
    }
    size_t n = 0;
    for (size_t i = 0; i < sites->nstacks; i++) {
        struct memprof_pvalue v;
        memprof__pstack_view(&sites->stacks[i], view, &v);
        if (v.bytes == 0)
            continue;
        r[n++] = (struct ranked){v.bytes,
                                 view == MEMPROF_VIEW_LEAKS ? sites->stacks[i].leak_rate : 0, i};
    }
    qsort(r, n, sizeof *r, by_rank);
    print_title(sites, view, out);
    for (size_t i = 0; i < n && i < top; i++)
        print_site(sites, &sites->stacks[r[i].index], view, (unsigned)i + 1, out);
    if (n == 0) {
        switch (view) {
        case MEMPROF_VIEW_LEAKS:
            fprintf(out, "  No leak suspects: no site's surviving allocations are spread over "
                         "the run as a steady leak's are.\n");
            break;
        case MEMPROF_VIEW_LIVE:
            fprintf(out, "  (no live samples)\n");
            break;
        default:
            fprintf(out, "  (no samples in the %s view)\n", memprof__view_name(view));
            break;
        }
    }
    free(r);
    memprof__profile_sites_free(sites);
    memprof__profile_presented_free(shown);
    return ferror(out) ? -EIO : 0;
}

/* Whether some stack has bytes in view v. */
static bool view_has_bytes(const struct memprof_profile *p, enum memprof_view v)
{
    for (size_t i = 0; i < p->nstacks; i++) {
        struct memprof_pvalue val;
        memprof__pstack_view(&p->stacks[i], v, &val);
        if (val.bytes)
            return true;
    }
    return false;
}

int memprof__export_text(const struct memprof_profile *p, FILE *out, enum memprof_view view,
                         unsigned top)
{
    if ((unsigned)view >= MEMPROF_VIEW_COUNT)
        return -EINVAL;
    int rc = memprof__export_summary(p, out);
    if (rc)
        return rc;
    fputc('\n', out);
    /* A program that freed (nearly) everything before the snapshot has no live site worth
     * the name: its peak says what its memory held (the HTML page opens there too). */
    if (view == MEMPROF_VIEW_LIVE && memprof__prefer_peak(p)) {
        if (view_has_bytes(p, MEMPROF_VIEW_LIVE))
            fprintf(out, "Little was live at the snapshot (under 1/16 of the peak): the sites "
                         "at the peak instead (--view live shows the live ones).\n");
        else
            fprintf(out, "Nothing sampled was live at the snapshot (the program freed what it "
                         "allocated): the sites at the peak instead.\n");
        view = MEMPROF_VIEW_PEAK;
    }
    if ((rc = memprof__export_text_sites(p, out, view, top)) != 0)
        return rc;
    rc = print_threads(p, view, top, out);
    if (rc)
        return rc;
    return ferror(out) ? -EIO : 0;
}
