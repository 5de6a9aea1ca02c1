/* SPDX-License-Identifier: MIT */
/*
 * `memprof diff BASE NEW`: which call sites' live bytes changed between two profiles, and
 * whether each change is real or within sampling noise.
 *
 * Sites are matched by their stack as the sequence of frame labels (function names, else
 * module+offset), not by addresses, so two runs of the same binary -- or two builds that
 * moved code -- still match. Stacks of one profile that share a label sequence (different
 * lines of one function, say) are merged by adding their estimates and variances.
 *
 * Each site's live-byte estimate is a sum of independent per-sample terms, so the estimates
 * from two profiles are independent and the variance of their difference is the sum of the
 * two variances (common/estimate.h explains the estimator). The change's 95 % interval is then
 * change +/- 1.96 sqrt(var_base + var_new), by the same normal approximation the text
 * writer uses; a change whose interval contains 0 is marked "within sampling noise". The
 * profiles may have been taken at different sampling rates: the estimates are unbiased at
 * any rate, only their variances differ.
 *
 * Stacks are keyed from their site's frame outward, as the text report names sites (wrappers
 * and interpreter internals left out; --wrapper adds wrappers, --native keeps every frame).
 *
 * --symbolize (and --debug-dir) name the frames of profiles written as addresses first, as
 * `memprof report --symbolize` does (symbolize.c), so the sites read as functions.
 */
#define _GNU_SOURCE
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cli.h"
#include "offline/symbolize.h"

#define DEFAULT_TOP 20
#define Z95         1.959964
#define KEY_SEP     '\x1f' /* between labels in a key: never part of a symbol name */
#define SHOW_FRAMES 6

#define MAX_DEBUG_DIRS 16 /* --debug-dir given at most this often */

struct site {
    char *key;       /* labels, leaf first, separated by KEY_SEP */
    double bytes[2]; /* estimated live bytes in BASE and NEW */
    double var[2];   /* their variances */
    uint64_t samples[2];
    double change, lo, hi;
};

struct site_table {
    struct site *sites;
    size_t n, cap;
    size_t *slots; /* open addressing: index + 1, 0 = empty */
    size_t nslots;
};

static uint64_t hash_key(const char *s)
{
    uint64_t h = 1469598103934665603u; /* FNV-1a */
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 1099511628211u;
    return h;
}

static bool table_grow(struct site_table *t)
{
    size_t nslots = t->nslots ? t->nslots * 2 : 1024;
    size_t *slots = calloc(nslots, sizeof *slots);
    if (!slots)
        return false;
    for (size_t i = 0; i < t->n; i++) {
        size_t k = hash_key(t->sites[i].key) & (nslots - 1);
        while (slots[k])
            k = (k + 1) & (nslots - 1);
        slots[k] = i + 1;
    }
    free(t->slots);
    t->slots = slots;
    t->nslots = nslots;
    return true;
}

/* The site with this key, created (zeroed) if new; takes ownership of key. NULL on OOM. */
static struct site *table_get(struct site_table *t, char *key)
{
    if ((t->n + 1) * 2 > t->nslots && !table_grow(t)) {
        free(key);
        return NULL;
    }
    size_t k = hash_key(key) & (t->nslots - 1);
    while (t->slots[k]) {
        struct site *s = &t->sites[t->slots[k] - 1];
        if (!strcmp(s->key, key)) {
            free(key);
            return s;
        }
        k = (k + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        struct site *bigger = realloc(t->sites, cap * sizeof *bigger);
        if (!bigger) {
            free(key);
            return NULL;
        }
        t->sites = bigger;
        t->cap = cap;
    }
    struct site *s = &t->sites[t->n];
    memset(s, 0, sizeof *s);
    s->key = key;
    t->slots[k] = ++t->n;
    return s;
}

static void table_free(struct site_table *t)
{
    for (size_t i = 0; i < t->n; i++)
        free(t->sites[i].key);
    free(t->sites);
    free(t->slots);
}

/* The key of a stack: its frame labels, leaf first. A stack without frames (the engine's
 * stack-table overflow bucket) gets a label of its own. NULL on OOM. */
static char *stack_key(const struct memprof_profile *p, const struct memprof_pstack *st)
{
    if (st->nframes == 0)
        return strdup("[no stack: stack table full]");
    size_t len = 0, cap = 256;
    char *key = malloc(cap);
    if (!key)
        return NULL;
    for (uint32_t i = 0; i < st->nframes; i++) {
        char buf[256];
        const char *label = st->frames[i] < p->nframes
                                ? memprof__pframe_label(&p->frames[st->frames[i]], buf, sizeof buf)
                                : "[unknown]";
        size_t n = strlen(label);
        if (len + n + 2 > cap) {
            while (len + n + 2 > cap)
                cap *= 2;
            char *bigger = realloc(key, cap);
            if (!bigger) {
                free(key);
                return NULL;
            }
            key = bigger;
        }
        if (i)
            key[len++] = KEY_SEP;
        memcpy(key + len, label, n);
        len += n;
    }
    key[len] = 0;
    return key;
}

static bool add_profile(struct site_table *t, const struct memprof_profile *all, int which)
{
    /* Stacks as the text report shows them, from their site's frame outward (sites.c): a
     * site is then matched whatever wrapper or interpreter internals it allocated through. */
    struct memprof_profile *p;
    if (memprof__profile_presented(all, memprof__present_native(), &p) != 0)
        return false;
    bool ok = true;
    for (size_t i = 0; i < p->nstacks && ok; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (st->inuse_space == 0 && st->live_samples == 0)
            continue;
        char *key = stack_key(p, st);
        struct site *s = key ? table_get(t, key) : NULL;
        if (!s) {
            ok = false;
            break;
        }
        s->bytes[which] += (double)st->inuse_space;
        s->var[which] += st->inuse_space_var > 0 ? st->inuse_space_var : 0;
        s->samples[which] += st->live_samples;
    }
    memprof__profile_presented_free(p);
    return ok;
}

static int by_abs_change(const void *a, const void *b)
{
    const struct site *x = a, *y = b;
    double dx = fabs(x->change), dy = fabs(y->change);
    if (dx != dy)
        return dx < dy ? 1 : -1;
    return strcmp(x->key, y->key);
}

/* "+1.5 MiB", "-512 B", "0 B" */
static const char *signed_bytes(double v, char *buf, unsigned size)
{
    char mag[32];
    double a = fabs(v);
    memprof__export_bytes(a >= 1.8e19 ? UINT64_MAX : (uint64_t)(a + 0.5), mag, sizeof mag);
    snprintf(buf, size, "%s%s", (uint64_t)(a + 0.5) == 0 ? "" : v < 0 ? "-" : "+", mag);
    return buf;
}

static const char *bytes(double v, char *buf, unsigned size)
{
    return memprof__export_bytes(v <= 0        ? 0
                                 : v >= 1.8e19 ? UINT64_MAX
                                               : (uint64_t)(v + 0.5),
                                 buf, size);
}

/* The change of one estimate and its interval. */
static void change_of(double base, double base_var, double now, double now_var, double *change,
                      double *lo, double *hi)
{
    double half = Z95 * sqrt((base_var > 0 ? base_var : 0) + (now_var > 0 ? now_var : 0));
    *change = now - base;
    *lo = *change - half;
    *hi = *change + half;
}

static void print_site_path(const char *key, FILE *out)
{
    unsigned shown = 0;
    const char *p = key;
    fputs("        at ", out);
    while (*p) {
        const char *end = strchr(p, KEY_SEP);
        size_t n = end ? (size_t)(end - p) : strlen(p);
        if (shown == SHOW_FRAMES) {
            fputs(" <- ...", out);
            break;
        }
        if (shown)
            fputs(" <- ", out);
        fwrite(p, 1, n, out);
        shown++;
        if (!end)
            break;
        p = end + 1;
    }
    fputc('\n', out);
}

static void print_diff(const struct memprof_profile *base, const struct memprof_profile *now,
                       const char *base_name, const char *now_name, struct site_table *t,
                       unsigned top, FILE *out)
{
    char b1[40], b2[40], b3[40], b4[40], b5[40];
    double change, lo, hi;
    change_of((double)base->inuse_space, base->inuse_space_var, (double)now->inuse_space,
              now->inuse_space_var, &change, &lo, &hi);
    fprintf(out, "memprof diff: %s -> %s\n", base_name, now_name);
    fprintf(out, "Live heap: %s -> %s, change %s (95%% interval %s to %s)%s\n",
            bytes((double)base->inuse_space, b1, sizeof b1),
            bytes((double)now->inuse_space, b2, sizeof b2), signed_bytes(change, b3, sizeof b3),
            signed_bytes(lo, b4, sizeof b4), signed_bytes(hi, b5, sizeof b5),
            lo <= 0 && hi >= 0 ? ", within sampling noise" : "");
    fprintf(out,
            "Live samples: %" PRIu64 " -> %" PRIu64 "; sampling rate %" PRIu64 " -> %" PRIu64
            " bytes\n",
            base->live_samples, now->live_samples, base->sampling_rate, now->sampling_rate);
    if (base->live_samples < 100 || now->live_samples < 100)
        fprintf(out, "Note: fewer than 100 live samples in a profile; the intervals are rough.\n");

    size_t changed = 0, noise = 0;
    for (size_t i = 0; i < t->n; i++) {
        struct site *s = &t->sites[i];
        change_of(s->bytes[0], s->var[0], s->bytes[1], s->var[1], &s->change, &s->lo, &s->hi);
        if (s->change != 0) {
            changed++;
            noise += s->lo <= 0 && s->hi >= 0;
        }
    }
    qsort(t->sites, t->n, sizeof *t->sites, by_abs_change);
    fprintf(out, "\n%zu of %zu sites changed (%zu within sampling noise); largest changes first:\n",
            changed, t->n, noise);
    unsigned shown = 0;
    for (size_t i = 0; i < t->n && shown < top; i++) {
        const struct site *s = &t->sites[i];
        if (s->change == 0)
            break;
        fprintf(out, "%3u. %s (%s to %s)  %s -> %s, %" PRIu64 " -> %" PRIu64 " samples%s\n",
                ++shown, signed_bytes(s->change, b1, sizeof b1), signed_bytes(s->lo, b2, sizeof b2),
                signed_bytes(s->hi, b3, sizeof b3), bytes(s->bytes[0], b4, sizeof b4),
                bytes(s->bytes[1], b5, sizeof b5), s->samples[0], s->samples[1],
                s->lo <= 0 && s->hi >= 0 ? "  within sampling noise" : "");
        print_site_path(s->key, out);
    }
    if (changed > shown)
        fprintf(out, "  ... %zu more changed sites (--top 0 shows all)\n", changed - shown);
    if (changed == 0)
        fprintf(out, "  (no site's estimate changed)\n");
}

int memprof_cli_diff(int argc, char **argv)
{
    static const struct option longopts[] = {
        {"top", required_argument, NULL, 't'},
        {"symbolize", no_argument, NULL, 's'},
        {"debug-dir", required_argument, NULL, 'd'},
        {"wrapper", required_argument, NULL, 'W'},
        {"native", no_argument, NULL, 'N'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    unsigned top = DEFAULT_TOP;
    int c;
    bool symbolize = false;
    const char *debug_dirs[MAX_DEBUG_DIRS];
    size_t ndebug_dirs = 0;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":n:t:sh", longopts, NULL)) != -1) {
        switch (c) {
        case 's':
            symbolize = true;
            break;
        case 'W':
            if (!memprof_cli_add_wrapper("diff", optarg))
                return CLI_EXIT_USAGE;
            break;
        case 'N':
            memprof_cli_show_native();
            break;
        case 'd':
            if (ndebug_dirs == MAX_DEBUG_DIRS)
                return memprof_cli_usage_error("diff", "--debug-dir: at most %d directories",
                                               MAX_DEBUG_DIRS);
            debug_dirs[ndebug_dirs++] = optarg;
            symbolize = true;
            break;
        case 'n':
        case 't': {
            unsigned long n;
            if (!memprof_cli_parse_uint(optarg, 1000000, &n))
                return memprof_cli_usage_error("diff",
                                               "--top '%s': expected a number of sites from 0 "
                                               "(all) to 1000000",
                                               optarg);
            top = n ? (unsigned)n : UINT32_MAX;
            break;
        }
        case 'h':
            memprof_cli_help("diff", stdout);
            return CLI_EXIT_OK;
        default:
            return memprof_cli_bad_option("diff", c, argv);
        }
    }
    if (argc - optind != 2)
        return memprof_cli_usage_error("diff", "expected two profiles, BASE and NEW; got %d",
                                       argc - optind);
    struct memprof_profile *base = memprof_cli_read_profile(argv[optind]);
    if (!base)
        return CLI_EXIT_FAILURE;
    struct memprof_profile *now = memprof_cli_read_profile(argv[optind + 1]);
    if (!now) {
        memprof__profile_free(base);
        return CLI_EXIT_FAILURE;
    }
    int status = CLI_EXIT_OK;
    struct memprof_profile *named_base = NULL, *named_now = NULL;
    if (!symbolize && (memprof__profile_unsymbolized(base) || memprof__profile_unsymbolized(now)))
        memprof_cli_error("a profile holds addresses only (written with MEMPROF_SYMBOLIZE=0?): "
                          "--symbolize names them");
    if (symbolize) {
        /* One session for both: a module's files are read once. */
        struct memprof_cli_symbolize sy = {.debug_dirs = debug_dirs, .ndebug_dirs = ndebug_dirs};
        if (memprof_cli_symbolize(base, &sy, &named_base) != 0 ||
            memprof_cli_symbolize(now, &sy, &named_now) != 0)
            status = CLI_EXIT_FAILURE;
        memprof_cli_symbolize_end(&sy);
    }
    const struct memprof_profile *b = named_base ? named_base : base;
    const struct memprof_profile *n = named_now ? named_now : now;
    struct site_table t = {0};
    if (status != CLI_EXIT_OK) {
        /* said by memprof_cli_symbolize() */
    } else if (!add_profile(&t, b, 0) || !add_profile(&t, n, 1)) {
        memprof_cli_error("out of memory comparing the profiles");
        status = CLI_EXIT_FAILURE;
    } else {
        print_diff(b, n, argv[optind], argv[optind + 1], &t, top, stdout);
        if (fflush(stdout) != 0 || ferror(stdout)) {
            memprof_cli_error("cannot write to standard output");
            status = CLI_EXIT_FAILURE;
        }
    }
    table_free(&t);
    memprof__profile_symbolized_free(named_base);
    memprof__profile_symbolized_free(named_now);
    memprof__profile_free(base);
    memprof__profile_free(now);
    return status;
}
