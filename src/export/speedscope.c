/* SPDX-License-Identifier: MIT */
/*
 * The speedscope writer (https://www.speedscope.app, file format
 * https://www.speedscope.app/file-format-schema.json). One file holds one "sampled"
 * profile per view (profile.h) over one shared frame table, named by the view ("live",
 * "peak", "alloc", "temporary", "leaks"): the selected view first, which speedscope opens
 * (activeProfileIndex 0), then the others in that order; asked for the live view of a
 * program that freed (nearly) everything before the snapshot, the peak first, as the HTML
 * page and the text report do (memprof__prefer_peak()). Live and allocated bytes are always
 * there; peak, temporary and leaks only when some stack has bytes in them, so a profile
 * without that information does not offer an empty view. Each stack of the profile becomes
 * one sample, root first as speedscope wants, weighted by the view's estimated bytes; stacks
 * whose weight is zero are left out of that profile.
 *
 * Also here: the JSON string escaper and the frame merging shared with the HTML writer
 * (json.h), so both writers show the same frames.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "export/export.h"
#include "export/json.h"
#include "memprof/memprof.h"

/* ---- JSON strings ---------------------------------------------------------------------- */

/* A small output buffer: the escaper emits byte by byte and stdio locks per call. */
struct jbuf {
    FILE *out;
    unsigned n;
    char b[256];
};

static void jb_flush(struct jbuf *j)
{
    fwrite(j->b, 1, j->n, j->out);
    j->n = 0;
}

static void jb_put(struct jbuf *j, const char *s, unsigned n)
{
    if (j->n + n > sizeof j->b)
        jb_flush(j);
    memcpy(j->b + j->n, s, n);
    j->n += n;
}

/*
 * Length of the well-formed UTF-8 sequence starting at s (lead byte >= 0x80), or, when it is
 * ill-formed, minus the length of its maximal ill-formed prefix (at least 1). The ranges are
 * Table 3-7 of the Unicode standard: no overlong forms, no surrogates, nothing above U+10FFFF.
 */
static int utf8_len(const unsigned char *s)
{
    unsigned char c = s[0], lo = 0x80, hi = 0xBF;
    int need;
    if (c >= 0xC2 && c <= 0xDF)
        need = 1;
    else if (c >= 0xE0 && c <= 0xEF) {
        need = 2;
        if (c == 0xE0)
            lo = 0xA0;
        else if (c == 0xED)
            hi = 0x9F;
    } else if (c >= 0xF0 && c <= 0xF4) {
        need = 3;
        if (c == 0xF0)
            lo = 0x90;
        else if (c == 0xF4)
            hi = 0x8F;
    } else
        return -1;
    /* Only the second byte has a restricted range; a NUL terminator fails every test. */
    for (int i = 1; i <= need; i++) {
        if (s[i] < lo || s[i] > hi)
            return -i;
        lo = 0x80;
        hi = 0xBF;
    }
    return need + 1;
}

void memprof__json_string(FILE *out, const char *s, bool html)
{
    static const char hex[] = "0123456789abcdef";
    struct jbuf j = {.out = out};
    const unsigned char *c = (const unsigned char *)(s ? s : "");
    jb_put(&j, "\"", 1);
    while (*c) {
        if (*c >= 0x80) {
            int n = utf8_len(c);
            if (n < 0) {
                jb_put(&j, "\\ufffd", 6);
                c += -n;
            } else {
                /* U+2028/U+2029 end a line in pre-2019 JavaScript: escape them in HTML. */
                if (html && n == 3 && c[0] == 0xE2 && c[1] == 0x80 && (c[2] & 0xFE) == 0xA8)
                    jb_put(&j, c[2] == 0xA8 ? "\\u2028" : "\\u2029", 6);
                else
                    jb_put(&j, (const char *)c, (unsigned)n);
                c += n;
            }
            continue;
        }
        char esc[6] = {'\\', 0};
        switch (*c) {
        case '"':
        case '\\':
            esc[1] = (char)*c;
            jb_put(&j, esc, 2);
            break;
        case '\n':
            jb_put(&j, "\\n", 2);
            break;
        case '\t':
            jb_put(&j, "\\t", 2);
            break;
        case '\r':
            jb_put(&j, "\\r", 2);
            break;
        default:
            if (*c < 0x20 || *c == 0x7F || (html && (*c == '<' || *c == '>' || *c == '&'))) {
                esc[1] = 'u';
                esc[2] = '0';
                esc[3] = '0';
                esc[4] = hex[*c >> 4];
                esc[5] = hex[*c & 15];
                jb_put(&j, esc, 6);
            } else
                jb_put(&j, (const char *)c, 1);
        }
        c++;
    }
    jb_put(&j, "\"", 1);
    jb_flush(&j);
}

/* ---- Unique frames --------------------------------------------------------------------- */

static uint64_t str_hash(uint64_t h, const char *s)
{
    /* FNV-1a; a terminator byte keeps ("ab", "c") and ("a", "bc") apart. */
    for (; s && *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return (h ^ 0xFF) * 0x100000001b3ull;
}

static int same_str(const char *a, const char *b)
{
    return a == b || (a && b && strcmp(a, b) == 0);
}

int memprof__uframes_build(const struct memprof_profile *p, struct memprof_uframes *u)
{
    memset(u, 0, sizeof *u);
    u->no_stack = u->truncated = UINT32_MAX;
    size_t cap = 64;
    while (cap < p->nframes * 2)
        cap <<= 1;
    uint32_t *table = calloc(cap, sizeof *table); /* key hash -> unique index + 1 */
    u->of = malloc((p->nframes ? p->nframes : 1) * sizeof *u->of);
    u->rep = malloc((p->nframes + 2) * sizeof *u->rep);
    if (!table || !u->of || !u->rep) {
        free(table);
        memprof__uframes_free(u);
        return -ENOMEM;
    }
    for (size_t i = 0; i < p->nframes; i++) {
        const struct memprof_pframe *f = &p->frames[i];
        char buf[256], rbuf[256];
        const char *label = memprof__pframe_label(f, buf, sizeof buf);
        uint64_t h = str_hash(str_hash(0xcbf29ce484222325ull, label), f->file) ^ f->line;
        h *= 0x9E3779B97F4A7C15ull;
        size_t k = (size_t)(h >> 32) & (cap - 1);
        for (; table[k]; k = (k + 1) & (cap - 1)) {
            const struct memprof_pframe *r = &p->frames[u->rep[table[k] - 1]];
            if (r->line == f->line && same_str(r->file, f->file) &&
                strcmp(memprof__pframe_label(r, rbuf, sizeof rbuf), label) == 0)
                break;
        }
        if (!table[k]) {
            u->rep[u->n] = (uint32_t)i;
            table[k] = ++u->n;
        }
        u->of[i] = table[k] - 1;
    }
    free(table);
    /* The synthetic frames, only when some stack needs them. */
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (st->nframes == 0 && u->no_stack == UINT32_MAX) {
            u->no_stack = u->n;
            u->rep[u->n++] = UINT32_MAX;
        } else if (st->nframes &&
                   (p->frames[st->frames[st->nframes - 1]].flags & MEMPROF_FRAME_TRUNCATED) &&
                   u->truncated == UINT32_MAX) {
            u->truncated = u->n;
            u->rep[u->n++] = UINT32_MAX;
        }
    }
    return 0;
}

void memprof__uframes_free(struct memprof_uframes *u)
{
    free(u->of);
    free(u->rep);
    u->of = u->rep = NULL;
}

const char *memprof__uframe_label(const struct memprof_profile *p, const struct memprof_uframes *u,
                                  uint32_t i, char *buf, size_t size, const char **file,
                                  uint32_t *line)
{
    *file = NULL;
    *line = 0;
    if (i == u->no_stack)
        return MEMPROF_UFRAME_NO_STACK_LABEL;
    if (i == u->truncated)
        return MEMPROF_UFRAME_TRUNCATED_LABEL;
    const struct memprof_pframe *f = &p->frames[u->rep[i]];
    *file = f->file;
    *line = f->file ? f->line : 0;
    return memprof__pframe_label(f, buf, size);
}

uint32_t memprof__uframes_path(const struct memprof_profile *p, const struct memprof_uframes *u,
                               const struct memprof_pstack *st, uint32_t *path)
{
    uint32_t n = 0;
    if (st->nframes == 0) {
        path[n++] = u->no_stack;
        return n;
    }
    if (p->frames[st->frames[st->nframes - 1]].flags & MEMPROF_FRAME_TRUNCATED)
        path[n++] = u->truncated;
    for (uint32_t j = st->nframes; j-- > 0;)
        path[n++] = u->of[st->frames[j]];
    return n;
}

/* ---- The speedscope file --------------------------------------------------------------- */

static uint64_t weight_of(const struct memprof_pstack *st, enum memprof_view view)
{
    struct memprof_pvalue v;
    memprof__pstack_view(st, view, &v);
    return v.bytes;
}

/* One "sampled" profile: samples (root-first unique frame indexes) and their weights. */
static void write_sampled(const struct memprof_profile *p, const struct memprof_uframes *u,
                          uint32_t *path, enum memprof_view view, FILE *out)
{
    uint64_t total = 0;
    for (size_t i = 0; i < p->nstacks; i++) {
        uint64_t w = weight_of(&p->stacks[i], view);
        total = total + w < total ? UINT64_MAX : total + w;
    }
    fprintf(out,
            "{\"type\":\"sampled\",\"name\":\"%s\",\"unit\":\"bytes\",\"startValue\":0,"
            "\"endValue\":%" PRIu64 ",\n\"samples\":[",
            memprof__view_name(view), total);
    const char *sep = "";
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        if (weight_of(st, view) == 0)
            continue;
        uint32_t n = memprof__uframes_path(p, u, st, path);
        fprintf(out, "%s\n[", sep);
        for (uint32_t j = 0; j < n; j++)
            fprintf(out, j ? ",%" PRIu32 : "%" PRIu32, path[j]);
        fputc(']', out);
        sep = ",";
    }
    fputs("],\n\"weights\":[", out);
    sep = "";
    for (size_t i = 0; i < p->nstacks; i++) {
        uint64_t w = weight_of(&p->stacks[i], view);
        if (w == 0)
            continue;
        fprintf(out, "%s%" PRIu64, sep, w);
        sep = ",";
    }
    fputs("]}", out);
}

/* Whether the file offers a view: always the selected one, live and allocated bytes; the
 * others when some stack has bytes in them. */
static int view_present(const struct memprof_profile *p, enum memprof_view v,
                        enum memprof_view selected)
{
    if (v == selected || v == MEMPROF_VIEW_LIVE || v == MEMPROF_VIEW_ALLOC)
        return 1;
    for (size_t i = 0; i < p->nstacks; i++)
        if (weight_of(&p->stacks[i], v))
            return 1;
    return 0;
}

int memprof__export_speedscope(const struct memprof_profile *p, FILE *out, enum memprof_view view)
{
    if ((unsigned)view >= MEMPROF_VIEW_COUNT)
        return -EINVAL;
    if (view == MEMPROF_VIEW_LIVE && memprof__prefer_peak(p))
        view = MEMPROF_VIEW_PEAK;
    struct memprof_uframes u;
    if (memprof__uframes_build(p, &u) < 0)
        return -ENOMEM;
    uint32_t longest = 0;
    for (size_t i = 0; i < p->nstacks; i++)
        longest = p->stacks[i].nframes > longest ? p->stacks[i].nframes : longest;
    uint32_t *path = malloc(((size_t)longest + 1) * sizeof *path);
    if (!path) {
        memprof__uframes_free(&u);
        return -ENOMEM;
    }

    /* The title speedscope shows: when the snapshot was taken, in UTC. */
    char name[96] = "libmemprof heap profile";
    time_t t = (time_t)(p->time_unix_ns / 1000000000u);
    struct tm tm;
    if (p->time_unix_ns && gmtime_r(&t, &tm))
        strftime(name, sizeof name, "libmemprof heap profile %Y-%m-%d %H:%M:%S UTC", &tm);
    fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n"
          "\"exporter\":\"libmemprof " MEMPROF_VERSION_STRING "\",\n\"name\":",
          out);
    memprof__json_string(out, name, false);
    fputs(",\n\"activeProfileIndex\":0,\n\"shared\":{\"frames\":[", out);
    for (uint32_t i = 0; i < u.n; i++) {
        char buf[256];
        const char *file;
        uint32_t line;
        const char *label = memprof__uframe_label(p, &u, i, buf, sizeof buf, &file, &line);
        fputs(i ? ",\n{\"name\":" : "\n{\"name\":", out);
        memprof__json_string(out, label, false);
        if (file) {
            fputs(",\"file\":", out);
            memprof__json_string(out, file, false);
        }
        if (line)
            fprintf(out, ",\"line\":%" PRIu32, line);
        fputc('}', out);
    }
    fputs("]},\n\"profiles\":[\n", out);
    /* The order of the rest: the live heap and its peak, then the
     * allocation traffic, then what may be wrong with it. */
    static const enum memprof_view order[] = {MEMPROF_VIEW_LIVE, MEMPROF_VIEW_PEAK,
                                              MEMPROF_VIEW_ALLOC, MEMPROF_VIEW_TEMPORARY,
                                              MEMPROF_VIEW_LEAKS};
    write_sampled(p, &u, path, view, out);
    for (size_t i = 0; i < sizeof order / sizeof *order; i++)
        if (order[i] != view && view_present(p, order[i], view)) {
            fputs(",\n", out);
            write_sampled(p, &u, path, order[i], out);
        }
    fputs("]}\n", out);
    free(path);
    memprof__uframes_free(&u);
    return ferror(out) ? -EIO : 0;
}
