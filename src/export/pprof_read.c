/* SPDX-License-Identifier: MIT */
/*
 * The pprof reader: a profile.proto file written by memprof (pprof.c documents the
 * encoding) back into the profile model, for `memprof report` and `memprof diff`.
 *
 * The input is untrusted and this code is fuzzed, so it is written to fail cleanly on
 * anything: every read goes through the bounds-checked decoder (protobuf.h); every id and
 * string index is checked against its table before use; the decompressed size, table sizes,
 * lines per location, frames per stack and frames in all are capped before anything is
 * allocated from them (a few bytes of input must not turn into gigabytes of model); and
 * every loop advances through a finite buffer or a counted table. Anything unexpected is
 * -EINVAL with a message; nothing is trusted to be well formed because pprof.c wrote it.
 *
 * The work is done in passes over views of the message (no copies until the end): count the
 * top-level fields, collect views of each sub-message, decode the tables (strings, sample
 * types, functions, mappings, locations), decode the samples against them, and finally
 * allocate the model and its single arena (frame indexes and the strings it refers to).
 */
#include "export/pprof.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "export/protobuf.h"
#include "export/zlib_load.h"
#include "memprof/memprof.h"

size_t memprof__pprof_read_limit = MEMPROF_PPROF_MAX_SIZE;

/* Caps, far above what memprof writes (its stack table holds about a million stacks of at
 * most 512 native frames; inlining seldom nests more than a few dozen deep), and low enough
 * that the model built from a hostile file stays within a few GiB. */
#define MAX_TABLE              ((size_t)1 << 24) /* samples, locations, functions, strings */
#define MAX_MAPPINGS           ((size_t)1 << 20)
#define MAX_SAMPLE_TYPES       64
#define MAX_LINES_PER_LOCATION 1024
#define MAX_TOTAL_LINES        ((size_t)1 << 26)
#define MAX_STACK_FRAMES       ((size_t)1 << 16) /* per stack, after expanding inlined lines */
#define MAX_TOTAL_STACK_FRAMES ((size_t)1 << 27) /* in all stacks together */
#define MAX_LABELS_PER_SAMPLE  1024

/* The sample types the model has a place for, and their units. */
#define NVALUES 8
static const char *const value_names[NVALUES] = {"alloc_objects", "alloc_space",  "inuse_objects",
                                                 "inuse_space",   "peak_objects", "peak_space",
                                                 "temp_objects",  "temp_space"};
static const char *const value_units[NVALUES] = {"count", "bytes", "count", "bytes",
                                                 "count", "bytes", "count", "bytes"};

/* The numeric labels read into the model (pprof.c), "lifetimes" apart. */
enum {
    L_LIVE_SAMPLES,
    L_ALLOC_SAMPLES,
    L_INUSE_SPACE_SD,
    L_INUSE_OBJECTS_SD,
    L_PEAK_SAMPLES,
    L_PEAK_SPACE_SD,
    L_TEMP_SAMPLES,
    L_LEAK_SPACE,
    L_LEAK_SAMPLES,
    L_LEAK_RATE,
    L_LEAK_SUSPECT,
    L_THREAD_ID,
    L_TRUNCATED,
    NLABELS
};
static const char *const label_names[NLABELS + 1] = {
    "live_samples",  "alloc_samples", "inuse_space_sd", "inuse_objects_sd", "peak_samples",
    "peak_space_sd", "temp_samples",  "leak_space",     "leak_samples",     "leak_bytes_per_second",
    "leak_suspect",  "thread_id",     "truncated",      "lifetimes"};

/* ---- errors ------------------------------------------------------------------------------- */

struct view {
    const uint8_t *p;
    size_t n;
};

struct rfunc {
    uint64_t id, name, system, file;
};

struct rmap {
    uint64_t id, start, limit, offset, file, build_id;
    uint64_t bias; /* from the extension (pprof.h) when has_bias */
    bool has_bias;
};

struct rline {
    uint32_t func; /* function index + 1, 0 for none */
    uint32_t line;
};

struct rloc {
    uint64_t id, address;
    uint32_t map; /* mapping index + 1, 0 for none */
    uint32_t first_line, nlines;
    uint32_t first_frame;     /* model frames: max(nlines, 1) of them */
    uint32_t truncated_frame; /* model frame + 1 of the last frame flagged TRUNCATED, or 0 */
};

struct rsample {
    size_t first_ref; /* into refs[] */
    uint32_t nrefs, nframes;
    /* alloc_objects, alloc_space, inuse_objects, inuse_space, peak_objects, peak_space,
     * temp_objects, temp_space */
    uint64_t value[NVALUES];
    /* The numeric labels, in the order of label_names[] (the last one, "truncated", is a
     * flag). */
    uint64_t label[NLABELS];
    uint32_t lifetimes[MEMPROF_LIFETIME_BUCKETS];
    uint64_t thread; /* string index of the "thread" label, 0 if none */
};

/* An id -> table index map: the table's (id, index) pairs sorted by id. */
struct idpair {
    uint64_t id;
    uint32_t index;
};

struct idmap {
    struct idpair *pairs;
    size_t n;
    bool dense; /* ids are exactly 1..n in table order: no search needed */
};

struct reader {
    char *err;
    size_t errlen;
    bool failed;

    struct view msg;
    uint8_t *inflated;
    bool gzipped;

    /* Top-level fields. */
    struct view *strs, *stypes, *samples_v, *maps_v, *locs_v, *funcs_v;
    size_t nstrs, nstypes, nsamples, nmaps, nlocs, nfuncs;
    uint64_t *comments;
    size_t ncomments;
    uint64_t time_nanos, period;

    /* Decoded tables. */
    int stype_index[NVALUES]; /* sample_type position of each model value, -1 if absent */
    struct rfunc *funcs;
    struct rmap *maps;
    struct rloc *locs;
    struct rline *lines;
    size_t nlines;
    struct idmap func_ids, map_ids, loc_ids;
    struct rsample *samples;
    uint32_t *refs; /* location indexes of all samples */
    size_t nrefs, ntruncated;
    uint64_t label_keys[NLABELS + 1]; /* string ids of label_names[], UINT64_MAX if absent */
    uint64_t thread_key;              /* string id of "thread", UINT64_MAX if absent */
    struct view extension;            /* MEMPROF_PPROF_EXTENSION, n = 0 if absent */
    bool call_addresses;              /* locations hold return addresses - 1 (pprof.c) */

    /* From the comments. */
    bool have_format;
    bool have_total[5];
    uint64_t total[3]; /* inuse_space, inuse_objects, live_samples */
    double total_var[2];
    uint64_t health[5];
};

static int fail(struct reader *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(struct reader *r, const char *fmt, ...)
{
    /* Keep the first message: later ones are consequences. */
    if (!r->failed && r->err && r->errlen) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(r->err, r->errlen, fmt, ap);
        va_end(ap);
    }
    r->failed = true;
    return -EINVAL;
}

/* Allocates n elements of `size`, n capped by the callers; never malloc(0). */
static void *alloc_array(size_t n, size_t size)
{
    return calloc(n ? n : 1, size);
}

/* ---- decompression ------------------------------------------------------------------------ */

static int gunzip(struct reader *r, const uint8_t *in, size_t len)
{
    const size_t limit = memprof__pprof_read_limit;
    const struct memprof__zlib *zl = memprof__zlib();
    if (!zl)
        return fail(r, "zlib (libz.so.1) cannot be loaded to decompress it");
    z_stream zs = {0};
    /* 15 + 16: gzip only (profile.proto's on-disk form); zlib checks the CRC and length. */
    if (zl->inflate_init2(&zs, 15 + 16, ZLIB_VERSION, (int)sizeof zs) != Z_OK)
        return -ENOMEM;
    size_t cap = len < limit / 4 ? len * 4 + 4096 : limit;
    if (cap > limit)
        cap = limit;
    size_t n = 0, fed = 0;
    uint8_t *buf = malloc(cap ? cap : 1);
    int rc = 0;
    if (!buf) {
        rc = -ENOMEM;
        goto out;
    }
    for (;;) {
        /* avail_in and avail_out are uInt: hand over at most 1 GiB at a time. */
        if (zs.avail_in == 0 && fed < len) {
            size_t piece = len - fed < ((size_t)1 << 30) ? len - fed : ((size_t)1 << 30);
            zs.next_in = (unsigned char *)(uintptr_t)(in + fed);
            zs.avail_in = (uInt)piece;
            fed += piece;
        }
        if (n == cap) {
            if (cap >= limit) {
                rc = fail(r, "decompresses to more than %zu bytes (limit)", limit);
                goto out;
            }
            size_t ncap = cap < limit / 2 ? cap * 2 : limit;
            uint8_t *nb = realloc(buf, ncap);
            if (!nb) {
                rc = -ENOMEM;
                goto out;
            }
            buf = nb;
            cap = ncap;
        }
        size_t room = cap - n < ((size_t)1 << 30) ? cap - n : ((size_t)1 << 30);
        zs.next_out = buf + n;
        zs.avail_out = (uInt)room;
        int zrc = zl->inflate(&zs, Z_NO_FLUSH);
        n += room - zs.avail_out;
        if (zrc == Z_STREAM_END) {
            size_t left = zs.avail_in + (len - fed);
            if (left == 0)
                break;
            /* gzip allows concatenated members; anything else after the end is corrupt. */
            const uint8_t *next = in + (len - left);
            if (left >= 2 && next[0] == 0x1f && next[1] == 0x8b && zl->inflate_reset(&zs) == Z_OK)
                continue;
            rc = fail(r, "%zu bytes of trailing garbage after the gzip stream", left);
            goto out;
        }
        if (zrc == Z_OK)
            continue; /* progress was made */
        if (zrc == Z_BUF_ERROR && zs.avail_out == 0)
            continue; /* output full: grow above */
        if (zrc == Z_BUF_ERROR && zs.avail_in == 0 && fed == len) {
            rc = fail(r, "truncated gzip stream");
            goto out;
        }
        if (zrc == Z_MEM_ERROR) {
            rc = -ENOMEM;
            goto out;
        }
        rc = fail(r, "corrupt gzip data (%s)", zs.msg ? zs.msg : "inflate error");
        goto out;
    }
    r->inflated = buf;
    r->msg = (struct view){buf, n};
    buf = NULL;
out:
    free(buf);
    zl->inflate_end(&zs);
    return rc;
}

/* ---- top level ------------------------------------------------------------------------------ */

/* profile.proto field numbers (pprof.c has the writer's list). */
enum {
    P_SAMPLE_TYPE = 1,
    P_SAMPLE = 2,
    P_MAPPING = 3,
    P_LOCATION = 4,
    P_FUNCTION = 5,
    P_STRING_TABLE = 6,
    P_TIME_NANOS = 9,
    P_COMMENT = 13,
    P_PERIOD = 12,
};

static int want_wire(struct reader *r, const struct memprof_pb_field *f, uint32_t wire,
                     const char *what)
{
    if (f->wire != wire)
        return fail(r, "%s has wire type %u, expected %u", what, f->wire, wire);
    return 0;
}

/* Views of one repeated message field: counted in pass 1, filled in pass 2. */
static int add_view(struct reader *r, struct view *v, size_t *n, size_t cap,
                    const struct memprof_pb_field *f, const char *what)
{
    if (want_wire(r, f, MEMPROF_PB_LEN, what))
        return -EINVAL;
    if (*n >= cap)
        return fail(r, "more than %zu %s entries", cap, what);
    if (v)
        v[*n] = (struct view){f->data, f->len};
    (*n)++;
    return 0;
}

static int top_level_pass(struct reader *r, bool fill)
{
    struct memprof_pb_reader pr = {r->msg.p, r->msg.p + r->msg.n};
    struct memprof_pb_field f;
    const char *why = NULL;
    int more;
    r->nstrs = r->nstypes = r->nsamples = r->nmaps = r->nlocs = r->nfuncs = r->ncomments = 0;
    while ((more = memprof__pb_next(&pr, &f, &why)) == 1) {
        int rc = 0;
        size_t cnt;
        switch (f.number) {
        case P_SAMPLE_TYPE:
            rc = add_view(r, r->stypes, &r->nstypes, MAX_SAMPLE_TYPES, &f, "sample_type");
            break;
        case P_SAMPLE:
            rc = add_view(r, r->samples_v, &r->nsamples, MAX_TABLE, &f, "sample");
            break;
        case P_MAPPING:
            rc = add_view(r, r->maps_v, &r->nmaps, MAX_MAPPINGS, &f, "mapping");
            break;
        case P_LOCATION:
            rc = add_view(r, r->locs_v, &r->nlocs, MAX_TABLE, &f, "location");
            break;
        case P_FUNCTION:
            rc = add_view(r, r->funcs_v, &r->nfuncs, MAX_TABLE, &f, "function");
            break;
        case P_STRING_TABLE:
            rc = add_view(r, r->strs, &r->nstrs, MAX_TABLE, &f, "string_table");
            break;
        case P_TIME_NANOS:
            rc = want_wire(r, &f, MEMPROF_PB_VARINT, "time_nanos");
            r->time_nanos = f.value;
            break;
        case P_PERIOD:
            rc = want_wire(r, &f, MEMPROF_PB_VARINT, "period");
            r->period = f.value;
            break;
        case P_COMMENT:
            if (memprof__pb_count_varints(&f, &cnt) != 0)
                return fail(r, "malformed comment list");
            if (cnt > MAX_TABLE - r->ncomments)
                return fail(r, "too many comments");
            if (fill)
                memprof__pb_get_varints(&f, r->comments + r->ncomments);
            r->ncomments += cnt;
            break;
        case MEMPROF_PPROF_EXTENSION:
            rc = want_wire(r, &f, MEMPROF_PB_LEN, "memprof extension");
            r->extension = (struct view){f.data, f.len};
            break;
        default:
            break; /* fields memprof does not write (drop_frames, period_type, ...) */
        }
        if (rc)
            return rc;
    }
    if (more < 0 && r->gzipped)
        return fail(r, "not a valid protobuf message after decompression (%s at byte %zu)", why,
                    (size_t)(pr.p - r->msg.p));
    if (more < 0)
        return fail(r,
                    "not a pprof profile: neither gzip-compressed nor a valid protobuf "
                    "message (%s at byte %zu)",
                    why, (size_t)(pr.p - r->msg.p));
    return 0;
}

/* ---- tables ------------------------------------------------------------------------------- */

static int check_string(struct reader *r, uint64_t index, const char *what)
{
    if (index >= r->nstrs)
        return fail(r, "%s refers to string %llu of %zu", what, (unsigned long long)index,
                    r->nstrs);
    return 0;
}

static bool str_is(const struct reader *r, uint64_t index, const char *s)
{
    size_t len = strlen(s);
    return index < r->nstrs && r->strs[index].n == len && memcmp(r->strs[index].p, s, len) == 0;
}

static int cmp_idpair(const void *a, const void *b)
{
    const struct idpair *x = a, *y = b;
    return x->id < y->id ? -1 : x->id > y->id;
}

/* Builds the id map of a table whose ids are ids(i); rejects zero and duplicate ids. */
static int build_idmap(struct reader *r, struct idmap *m, size_t n, const void *table,
                       size_t stride, const char *what)
{
    m->n = n;
    m->dense = true;
    for (size_t i = 0; i < n; i++) {
        uint64_t id = *(const uint64_t *)(const void *)((const char *)table + i * stride);
        if (id == 0)
            return fail(r, "%s %zu has id 0", what, i);
        m->dense &= id == i + 1;
    }
    if (m->dense)
        return 0;
    m->pairs = alloc_array(n, sizeof *m->pairs);
    if (!m->pairs)
        return -ENOMEM;
    for (size_t i = 0; i < n; i++)
        m->pairs[i] = (struct idpair){
            *(const uint64_t *)(const void *)((const char *)table + i * stride), (uint32_t)i};
    qsort(m->pairs, n, sizeof *m->pairs, cmp_idpair);
    for (size_t i = 1; i < n; i++)
        if (m->pairs[i].id == m->pairs[i - 1].id)
            return fail(r, "duplicate %s id %llu", what, (unsigned long long)m->pairs[i].id);
    return 0;
}

/* Table index + 1 of `id`, or 0 when absent. */
static uint32_t idmap_find(const struct idmap *m, uint64_t id)
{
    if (m->dense)
        return id >= 1 && id <= m->n ? (uint32_t)id : 0;
    size_t lo = 0, hi = m->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (m->pairs[mid].id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < m->n && m->pairs[lo].id == id ? m->pairs[lo].index + 1 : 0;
}

static int varint_field(struct reader *r, const struct memprof_pb_field *f, uint64_t *out,
                        const char *what)
{
    if (want_wire(r, f, MEMPROF_PB_VARINT, what))
        return -EINVAL;
    *out = f->value;
    return 0;
}

static int decode_sample_types(struct reader *r)
{
    for (int k = 0; k < NVALUES; k++)
        r->stype_index[k] = -1;
    for (size_t i = 0; i < r->nstypes; i++) {
        struct memprof_pb_reader pr = {r->stypes[i].p, r->stypes[i].p + r->stypes[i].n};
        struct memprof_pb_field f;
        const char *why = NULL;
        uint64_t type = 0, unit = 0;
        int more;
        while ((more = memprof__pb_next(&pr, &f, &why)) == 1) {
            if (f.number == 1 && varint_field(r, &f, &type, "sample_type.type"))
                return -EINVAL;
            if (f.number == 2 && varint_field(r, &f, &unit, "sample_type.unit"))
                return -EINVAL;
        }
        if (more < 0)
            return fail(r, "malformed sample_type (%s)", why);
        if (check_string(r, type, "sample_type") || check_string(r, unit, "sample_type"))
            return -EINVAL;
        for (int k = 0; k < NVALUES; k++) {
            if (!str_is(r, type, value_names[k]))
                continue;
            if (r->stype_index[k] >= 0)
                return fail(r, "sample type %s appears twice", value_names[k]);
            if (!str_is(r, unit, value_units[k]))
                return fail(r, "sample type %s is not in %s", value_names[k], value_units[k]);
            r->stype_index[k] = (int)i;
        }
    }
    if (r->stype_index[3] < 0)
        return fail(r, "no inuse_space/bytes sample type: not a heap profile written by memprof");
    return 0;
}

static int decode_functions(struct reader *r)
{
    r->funcs = alloc_array(r->nfuncs, sizeof *r->funcs);
    if (!r->funcs)
        return -ENOMEM;
    for (size_t i = 0; i < r->nfuncs; i++) {
        struct memprof_pb_reader pr = {r->funcs_v[i].p, r->funcs_v[i].p + r->funcs_v[i].n};
        struct memprof_pb_field f;
        const char *why = NULL;
        struct rfunc *fn = &r->funcs[i];
        int more, rc = 0;
        while ((more = memprof__pb_next(&pr, &f, &why)) == 1 && rc == 0) {
            switch (f.number) {
            case 1:
                rc = varint_field(r, &f, &fn->id, "function.id");
                break;
            case 2:
                rc = varint_field(r, &f, &fn->name, "function.name");
                break;
            case 3:
                rc = varint_field(r, &f, &fn->system, "function.system_name");
                if (rc == 0)
                    rc = check_string(r, fn->system, "function.system_name");
                break;
            case 4:
                rc = varint_field(r, &f, &fn->file, "function.filename");
                break;
            default:
                break;
            }
        }
        if (rc)
            return rc;
        if (more < 0)
            return fail(r, "malformed function (%s)", why);
        if (check_string(r, fn->name, "function.name") ||
            check_string(r, fn->file, "function.filename"))
            return -EINVAL;
    }
    return build_idmap(r, &r->func_ids, r->nfuncs, &r->funcs[0].id, sizeof *r->funcs, "function");
}

static int decode_mappings(struct reader *r)
{
    r->maps = alloc_array(r->nmaps, sizeof *r->maps);
    if (!r->maps)
        return -ENOMEM;
    for (size_t i = 0; i < r->nmaps; i++) {
        struct memprof_pb_reader pr = {r->maps_v[i].p, r->maps_v[i].p + r->maps_v[i].n};
        struct memprof_pb_field f;
        const char *why = NULL;
        struct rmap *m = &r->maps[i];
        int more, rc = 0;
        while ((more = memprof__pb_next(&pr, &f, &why)) == 1 && rc == 0) {
            switch (f.number) {
            case 1:
                rc = varint_field(r, &f, &m->id, "mapping.id");
                break;
            case 2:
                rc = varint_field(r, &f, &m->start, "mapping.memory_start");
                break;
            case 3:
                rc = varint_field(r, &f, &m->limit, "mapping.memory_limit");
                break;
            case 4:
                rc = varint_field(r, &f, &m->offset, "mapping.file_offset");
                break;
            case 5:
                rc = varint_field(r, &f, &m->file, "mapping.filename");
                break;
            case 6:
                rc = varint_field(r, &f, &m->build_id, "mapping.build_id");
                break;
            default:
                break; /* the has_* flags: the model has no use for them */
            }
        }
        if (rc)
            return rc;
        if (more < 0)
            return fail(r, "malformed mapping (%s)", why);
        if (check_string(r, m->file, "mapping.filename") ||
            check_string(r, m->build_id, "mapping.build_id"))
            return -EINVAL;
    }
    return build_idmap(r, &r->map_ids, r->nmaps, &r->maps[0].id, sizeof *r->maps, "mapping");
}

/* What the extension says about mappings and addresses (pprof.h): each mapping's load bias,
 * by mapping id, and whether location addresses are return addresses - 1. Without it (older
 * files) the bias is memory_start - file_offset, how those files wrote it. */
static int decode_mapping_extension(struct reader *r)
{
    if (!r->extension.n)
        return 0;
    struct memprof_pb_reader pr = {r->extension.p, r->extension.p + r->extension.n};
    struct memprof_pb_field f, biases = {0};
    const char *why = NULL;
    size_t nbiases = 0;
    int more;
    while ((more = memprof__pb_next(&pr, &f, &why)) == 1) {
        if (f.number == MEMPROF_PPROF_EXT_CALL_ADDRESSES) {
            uint64_t v = 0;
            int rc = varint_field(r, &f, &v, "extension.call_addresses");
            if (rc)
                return rc;
            r->call_addresses = v == 1;
        } else if (f.number == MEMPROF_PPROF_EXT_MAPPING_BIAS) {
            if (memprof__pb_count_varints(&f, &nbiases) != 0)
                return fail(r, "malformed mapping biases");
            biases = f;
        }
    }
    if (more < 0)
        return fail(r, "malformed memprof extension (%s)", why);
    if (!nbiases || nbiases != r->nmaps)
        return 0; /* not this file's mappings (a merge by another tool): do without */
    uint64_t *v = alloc_array(nbiases, sizeof *v);
    if (!v)
        return -ENOMEM;
    memprof__pb_get_varints(&biases, v);
    for (size_t i = 0; i < r->nmaps; i++)
        if (r->maps[i].id >= 1 && r->maps[i].id <= nbiases) {
            r->maps[i].bias = v[r->maps[i].id - 1];
            r->maps[i].has_bias = true;
        }
    free(v);
    return 0;
}

/* Decodes one Line into *out (function resolved). */
static int decode_line(struct reader *r, struct view v, struct rline *out)
{
    struct memprof_pb_reader pr = {v.p, v.p + v.n};
    struct memprof_pb_field f;
    const char *why = NULL;
    uint64_t fid = 0, line = 0;
    int more;
    while ((more = memprof__pb_next(&pr, &f, &why)) == 1) {
        if (f.number == 1 && varint_field(r, &f, &fid, "line.function_id"))
            return -EINVAL;
        if (f.number == 2 && varint_field(r, &f, &line, "line.line"))
            return -EINVAL;
    }
    if (more < 0)
        return fail(r, "malformed line (%s)", why);
    /* int64 on the wire: a negative line arrives as a huge unsigned value. */
    if (line > UINT32_MAX)
        return fail(r, "line number %lld out of range", (long long)line);
    uint32_t fn = 0;
    if (fid && !(fn = idmap_find(&r->func_ids, fid)))
        return fail(r, "line refers to function id %llu, which does not exist",
                    (unsigned long long)fid);
    *out = (struct rline){fn, (uint32_t)line};
    return 0;
}

static int decode_locations(struct reader *r)
{
    r->locs = alloc_array(r->nlocs, sizeof *r->locs);
    if (!r->locs)
        return -ENOMEM;
    /* First pass: scalar fields and the number of lines, so one array holds all lines. */
    size_t total = 0;
    for (size_t i = 0; i < r->nlocs; i++) {
        struct memprof_pb_reader pr = {r->locs_v[i].p, r->locs_v[i].p + r->locs_v[i].n};
        struct memprof_pb_field f;
        const char *why = NULL;
        struct rloc *l = &r->locs[i];
        uint64_t map_id = 0;
        int more, rc = 0;
        while ((more = memprof__pb_next(&pr, &f, &why)) == 1 && rc == 0) {
            switch (f.number) {
            case 1:
                rc = varint_field(r, &f, &l->id, "location.id");
                break;
            case 2:
                rc = varint_field(r, &f, &map_id, "location.mapping_id");
                break;
            case 3:
                rc = varint_field(r, &f, &l->address, "location.address");
                break;
            case 4:
                rc = want_wire(r, &f, MEMPROF_PB_LEN, "location.line");
                if (rc == 0 && l->nlines >= MAX_LINES_PER_LOCATION)
                    rc = fail(r, "location with more than %d lines", MAX_LINES_PER_LOCATION);
                l->nlines++;
                break;
            default:
                break;
            }
        }
        if (rc)
            return rc;
        if (more < 0)
            return fail(r, "malformed location (%s)", why);
        if (map_id && !(l->map = idmap_find(&r->map_ids, map_id)))
            return fail(r, "location refers to mapping id %llu, which does not exist",
                        (unsigned long long)map_id);
        l->first_line = (uint32_t)total;
        total += l->nlines;
        if (total > MAX_TOTAL_LINES)
            return fail(r, "more than %zu lines in all locations", MAX_TOTAL_LINES);
    }
    r->lines = alloc_array(total, sizeof *r->lines);
    if (!r->lines)
        return -ENOMEM;
    r->nlines = total;
    /* Second pass: the lines. The counts above bound the writes. */
    for (size_t i = 0; i < r->nlocs; i++) {
        struct memprof_pb_reader pr = {r->locs_v[i].p, r->locs_v[i].p + r->locs_v[i].n};
        struct memprof_pb_field f;
        const char *why = NULL;
        struct rloc *l = &r->locs[i];
        uint32_t k = 0;
        while (memprof__pb_next(&pr, &f, &why) == 1)
            if (f.number == 4 && k < l->nlines &&
                decode_line(r, (struct view){f.data, f.len}, &r->lines[l->first_line + k++]))
                return -EINVAL;
    }
    return build_idmap(r, &r->loc_ids, r->nlocs, &r->locs[0].id, sizeof *r->locs, "location");
}

/* ---- samples ------------------------------------------------------------------------------ */

static int decode_label(struct reader *r, struct view v, struct rsample *s)
{
    struct memprof_pb_reader pr = {v.p, v.p + v.n};
    struct memprof_pb_field f;
    const char *why = NULL;
    uint64_t key = 0, str = 0, num = 0, unit = 0;
    int more;
    while ((more = memprof__pb_next(&pr, &f, &why)) == 1) {
        int rc = 0;
        if (f.number == 1)
            rc = varint_field(r, &f, &key, "label.key");
        else if (f.number == 2)
            rc = varint_field(r, &f, &str, "label.str");
        else if (f.number == 3)
            rc = varint_field(r, &f, &num, "label.num");
        else if (f.number == 4)
            rc = varint_field(r, &f, &unit, "label.num_unit");
        if (rc)
            return rc;
    }
    if (more < 0)
        return fail(r, "malformed label (%s)", why);
    if (check_string(r, key, "label.key") || check_string(r, str, "label.str") ||
        check_string(r, unit, "label.num_unit"))
        return -EINVAL;
    if (key == r->thread_key && str)
        s->thread = str;
    for (int k = 0; k <= NLABELS; k++) {
        if (key != r->label_keys[k])
            continue;
        if (num > INT64_MAX)
            return fail(r, "negative value of a sample's memprof label");
        if (k < NLABELS) {
            s->label[k] = num;
        } else { /* lifetimes: bucket * 2^32 + count */
            if ((num >> 32) >= MEMPROF_LIFETIME_BUCKETS)
                return fail(r, "lifetime bucket %llu out of range",
                            (unsigned long long)(num >> 32));
            s->lifetimes[num >> 32] = (uint32_t)num;
        }
    }
    return 0;
}

/* A sample's location_id field f (packed or one varint): pass 1 (`store` false) checks every
 * id and counts its references and frames into s; pass 2 stores the location indexes at
 * r->refs[*nrefs...]. */
static int decode_sample_locations(struct reader *r, const struct memprof_pb_field *f,
                                   struct rsample *s, bool store, size_t *nrefs)
{
    size_t cnt;
    if (memprof__pb_count_varints(f, &cnt) != 0)
        return fail(r, "malformed sample.location_id");
    if (cnt > MAX_STACK_FRAMES - s->nrefs || (store && cnt > s->nrefs - (*nrefs - s->first_ref)))
        return fail(r, "sample with more than %zu locations", MAX_STACK_FRAMES);
    uint64_t ids[64];
    /* Decode in small batches into a stack buffer: the view is already validated. A
     * VARINT field has no data (and NULL + 0 is undefined). */
    struct memprof_pb_reader vr = {NULL, NULL};
    if (f->wire == MEMPROF_PB_LEN)
        vr = (struct memprof_pb_reader){f->data, f->data + f->len};
    for (size_t done = 0; done < cnt;) {
        size_t batch = cnt - done < 64 ? cnt - done : 64;
        if (f->wire == MEMPROF_PB_VARINT) {
            ids[0] = f->value;
        } else {
            for (size_t k = 0; k < batch; k++)
                if (memprof__pb_read_varint(&vr, &ids[k]) != 0)
                    return fail(r, "malformed sample.location_id");
        }
        for (size_t k = 0; k < batch; k++) {
            uint32_t loc = idmap_find(&r->loc_ids, ids[k]);
            if (!loc)
                return fail(r, "sample refers to location id %llu, which does not exist",
                            (unsigned long long)ids[k]);
            const struct rloc *l = &r->locs[loc - 1];
            size_t frames = l->nlines ? l->nlines : 1;
            if (!store) {
                if (frames > MAX_STACK_FRAMES - s->nframes)
                    return fail(r, "stack of more than %zu frames", MAX_STACK_FRAMES);
                s->nframes += (uint32_t)frames;
                s->nrefs++;
            } else {
                r->refs[(*nrefs)++] = loc - 1;
            }
        }
        done += batch;
    }
    return 0;
}

/* After pass 1 of sample s: its `nvalues` values into the model's order, and its references
 * and frames added to the profile's totals. */
static int finish_sample(struct reader *r, struct rsample *s, const uint64_t *values,
                         size_t nvalues, size_t *nrefs, size_t *nframes)
{
    if (nvalues != r->nstypes)
        return fail(r, "sample has %zu values for %zu sample types", nvalues, r->nstypes);
    for (int k = 0; k < NVALUES; k++) {
        if (r->stype_index[k] < 0)
            continue;
        uint64_t v = values[r->stype_index[k]];
        if (v > INT64_MAX)
            return fail(r, "negative sample value");
        s->value[k] = v;
    }
    if (s->nframes > MAX_TOTAL_STACK_FRAMES - *nframes)
        return fail(r, "more than %zu frames in all stacks", MAX_TOTAL_STACK_FRAMES);
    *nframes += s->nframes;
    *nrefs += s->nrefs;
    if (s->label[L_TRUNCATED] && s->nrefs)
        r->ntruncated++;
    return 0;
}

/* Decodes sample i: values, labels and (when refs is set) its location indexes. Pass 1
 * (refs == NULL) counts references and frames and checks every id; pass 2 stores them. */
static int decode_sample(struct reader *r, size_t i, size_t *nrefs, size_t *nframes)
{
    struct memprof_pb_reader pr = {r->samples_v[i].p, r->samples_v[i].p + r->samples_v[i].n};
    struct memprof_pb_field f;
    const char *why = NULL;
    struct rsample *s = &r->samples[i];
    size_t nvalues = 0, nlabels = 0;
    uint64_t values[MAX_SAMPLE_TYPES];
    int more;
    bool store = r->refs != NULL;
    if (!store)
        *s = (struct rsample){.first_ref = *nrefs};
    while ((more = memprof__pb_next(&pr, &f, &why)) == 1) {
        if (f.number == 1) {
            if (decode_sample_locations(r, &f, s, store, nrefs) != 0)
                return -EINVAL;
        } else if (f.number == 2) {
            size_t cnt;
            if (memprof__pb_count_varints(&f, &cnt) != 0)
                return fail(r, "malformed sample.value");
            if (cnt > r->nstypes - nvalues)
                return fail(r, "sample has more values than there are sample types");
            memprof__pb_get_varints(&f, values + nvalues);
            nvalues += cnt;
        } else if (f.number == 3) {
            if (want_wire(r, &f, MEMPROF_PB_LEN, "sample.label"))
                return -EINVAL;
            if (++nlabels > MAX_LABELS_PER_SAMPLE)
                return fail(r, "sample with more than %d labels", MAX_LABELS_PER_SAMPLE);
            if (!store && decode_label(r, (struct view){f.data, f.len}, s) != 0)
                return -EINVAL;
        }
    }
    if (more < 0)
        return fail(r, "malformed sample (%s)", why);
    return store ? 0 : finish_sample(r, s, values, nvalues, nrefs, nframes);
}

/* ---- comments ----------------------------------------------------------------------------- */

/* Parses a decimal uint64 occupying all of [p, p + n). */
static bool parse_u64(const uint8_t *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0 || n > 20)
        return false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9')
            return false;
        unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10)
            return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool parse_var(const uint8_t *p, size_t n, double *out)
{
    char buf[64];
    if (n == 0 || n >= sizeof buf)
        return false;
    for (size_t i = 0; i < n; i++)
        if (!strchr("0123456789.eE+-", p[i]))
            return false; /* also keeps out "nan", "inf", hex floats and NULs */
    memcpy(buf, p, n);
    buf[n] = '\0';
    char *end;
    double v = strtod(buf, &end);
    if (end != buf + n || !isfinite(v) || v < 0.0)
        return false;
    *out = v;
    return true;
}

static int decode_comments(struct reader *r)
{
    static const char prefix[] = "memprof.";
    static const char *const ints[] = {"inuse_space",          "inuse_objects",   "live_samples",
                                       "truncated_stacks",     "dropped_samples", "stack_overflows",
                                       "unresolved_addresses", "total_addresses", "format"};
    for (size_t i = 0; i < r->ncomments; i++) {
        if (check_string(r, r->comments[i], "comment"))
            return -EINVAL;
        struct view c = r->strs[r->comments[i]];
        if (c.n < sizeof prefix - 1 || memcmp(c.p, prefix, sizeof prefix - 1) != 0)
            continue; /* free text */
        const uint8_t *eq = memchr(c.p, '=', c.n);
        if (!eq)
            continue;
        const uint8_t *key = c.p + sizeof prefix - 1, *val = eq + 1;
        size_t klen = (size_t)(eq - key), vlen = (size_t)(c.p + c.n - val);
        bool known = false;
        for (size_t k = 0; k < sizeof ints / sizeof *ints; k++) {
            if (klen != strlen(ints[k]) || memcmp(key, ints[k], klen) != 0)
                continue;
            uint64_t v;
            if (!parse_u64(val, vlen, &v))
                return fail(r, "malformed comment memprof.%s", ints[k]);
            known = true;
            if (k < 3) {
                r->total[k] = v;
                r->have_total[k] = true;
            } else if (k < 8) {
                r->health[k - 3] = v;
            } else {
                if (v != 1)
                    return fail(r,
                                "memprof pprof format %llu is not supported (this build reads "
                                "format 1)",
                                (unsigned long long)v);
                r->have_format = true;
            }
        }
        static const char *const vars[] = {"inuse_space_var", "inuse_objects_var"};
        for (size_t k = 0; !known && k < 2; k++) {
            if (klen != strlen(vars[k]) || memcmp(key, vars[k], klen) != 0)
                continue;
            if (!parse_var(val, vlen, &r->total_var[k]))
                return fail(r, "malformed comment memprof.%s", vars[k]);
            r->have_total[3 + k] = true;
        }
    }
    if (!r->have_format)
        return fail(r, "not written by memprof (no memprof.format comment); memprof reads only "
                       "its own pprof files");
    return 0;
}

/* ---- building the model ------------------------------------------------------------------- */

/* Stacks sort by inuse_space, then alloc_space, largest first, then by position in the file
 * (so the order does not depend on the sort algorithm). */
struct sort_item {
    struct memprof_pstack st;
    size_t pos;
};

static int cmp_stacks(const void *a, const void *b)
{
    const struct sort_item *x = a, *y = b;
    if (x->st.inuse_space != y->st.inuse_space)
        return x->st.inuse_space > y->st.inuse_space ? -1 : 1;
    if (x->st.alloc_space != y->st.alloc_space)
        return x->st.alloc_space > y->st.alloc_space ? -1 : 1;
    return x->pos < y->pos ? -1 : x->pos > y->pos;
}

static int sort_stacks(struct memprof_profile *p)
{
    struct sort_item *items = alloc_array(p->nstacks, sizeof *items);
    if (!items)
        return -ENOMEM;
    for (size_t i = 0; i < p->nstacks; i++)
        items[i] = (struct sort_item){p->stacks[i], i};
    qsort(items, p->nstacks, sizeof *items, cmp_stacks);
    for (size_t i = 0; i < p->nstacks; i++)
        p->stacks[i] = items[i].st;
    free(items);
    return 0;
}

static uint64_t sat_add(uint64_t a, uint64_t b)
{
    return a > UINT64_MAX - b ? UINT64_MAX : a + b;
}

/* Marks a string the model needs (build() then copies it into the arena). */
static double sq(uint64_t sd)
{
    return (double)sd * (double)sd;
}

/* The extension message (pprof.h): times of the run and the heap over time. Absent in files
 * of older versions and in files pprof re-encoded; then the model has no series. */
static int decode_extension(struct reader *r, struct memprof_profile *p)
{
    if (!r->extension.n)
        return 0; /* (and .p may be NULL: no pointer arithmetic on it) */
    struct memprof_pb_reader pr = {r->extension.p, r->extension.p + r->extension.n};
    struct memprof_pb_field f, col[3];
    const char *why = NULL;
    size_t ncol[3] = {0, 0, 0};
    bool have[3] = {false, false, false};
    int more;
    while ((more = memprof__pb_next(&pr, &f, &why)) == 1) {
        int rc = 0;
        switch (f.number) {
        case MEMPROF_PPROF_EXT_PEAK_TIME_NS:
            rc = varint_field(r, &f, &p->peak_time_ns, "extension.peak_time_ns");
            break;
        case MEMPROF_PPROF_EXT_DURATION_NS:
            rc = varint_field(r, &f, &p->duration_ns, "extension.duration_ns");
            break;
        case MEMPROF_PPROF_EXT_TEMP_THRESHOLD_NS:
            rc = varint_field(r, &f, &p->temp_threshold_ns, "extension.temp_threshold_ns");
            break;
        case MEMPROF_PPROF_EXT_SERIES_T_NS:
        case MEMPROF_PPROF_EXT_SERIES_LIVE:
        case MEMPROF_PPROF_EXT_SERIES_ALLOC: {
            unsigned c = (unsigned)(f.number - MEMPROF_PPROF_EXT_SERIES_T_NS);
            if (have[c] || memprof__pb_count_varints(&f, &ncol[c]) != 0)
                return fail(r, "malformed heap-over-time series");
            col[c] = f;
            have[c] = true;
            break;
        }
        default:
            break;
        }
        if (rc)
            return rc;
    }
    if (more < 0)
        return fail(r, "malformed memprof extension (%s)", why);
    if (!have[0])
        return 0;
    if (!have[1] || !have[2] || ncol[1] != ncol[0] || ncol[2] != ncol[0] ||
        ncol[0] > MEMPROF_PPROF_MAX_SERIES)
        return fail(r, "heap-over-time series with columns of different lengths or too long");
    uint64_t *tmp = alloc_array(ncol[0] * 3, sizeof *tmp);
    p->series = alloc_array(ncol[0], sizeof *p->series);
    if (!tmp || !p->series) {
        free(tmp);
        return -ENOMEM;
    }
    for (unsigned c = 0; c < 3; c++)
        memprof__pb_get_varints(&col[c], tmp + c * ncol[0]);
    for (size_t i = 0; i < ncol[0]; i++)
        p->series[i] = (struct memprof_ppoint){tmp[i], tmp[ncol[0] + i], tmp[2 * ncol[0] + i]};
    p->nseries = ncol[0];
    free(tmp);
    return 0;
}

/* The index + 1 of thread (name, tid) in the model, added if new. Files hold a few hundred
 * threads at most (threads.h); merged files more, so past MAX_THREADS they go unnamed. */
#define MAX_THREADS 4096
static int thread_of(struct memprof_profile *p, const char *name, uint64_t tid, uint32_t *out)
{
    for (size_t i = 0; i < p->nthreads; i++)
        if (p->threads[i].tid == tid && strcmp(p->threads[i].name, name) == 0) {
            *out = (uint32_t)i + 1;
            return 0;
        }
    *out = 0;
    if (p->nthreads >= MAX_THREADS)
        return 0;
    if ((p->nthreads & (p->nthreads - 1)) == 0) { /* 0, 1, 2, 4, ...: grow to double */
        void *grown = realloc(p->threads, (p->nthreads ? 2 * p->nthreads : 1) * sizeof *p->threads);
        if (!grown)
            return -ENOMEM;
        p->threads = grown;
    }
    p->threads[p->nthreads++] = (struct memprof_pthread){tid, name};
    *out = (uint32_t)p->nthreads;
    return 0;
}

static const char *const MARK = "";

/* Copies the strings the model keeps (names, system names and files of functions, files and
 * build ids of mappings, thread names; index 0 is "" and stays NULL) into one arena after
 * room for `total_frames` frame indexes, and points cs[] at the copies. */
static int copy_strings(struct reader *r, size_t total_frames, struct memprof_profile *p,
                        const char **cs)
{
    for (size_t i = 0; i < r->nfuncs; i++)
        cs[r->funcs[i].name] = cs[r->funcs[i].system] = cs[r->funcs[i].file] = MARK;
    for (size_t i = 0; i < r->nmaps; i++)
        cs[r->maps[i].file] = cs[r->maps[i].build_id] = MARK;
    for (size_t i = 0; i < r->nsamples; i++)
        cs[r->samples[i].thread] = MARK;
    cs[0] = NULL;
    size_t str_bytes = 0;
    for (size_t i = 0; i < r->nstrs; i++)
        if (cs[i])
            str_bytes += r->strs[i].n + 1; /* <= message size + table size: no overflow */
    size_t idx_bytes = total_frames * sizeof(uint32_t);
    char *arena = malloc(idx_bytes + str_bytes + 1);
    if (!arena)
        return -ENOMEM;
    p->arena = arena;
    char *sp = arena + idx_bytes;
    for (size_t i = 0; i < r->nstrs; i++) {
        if (!cs[i])
            continue;
        memcpy(sp, r->strs[i].p, r->strs[i].n);
        sp[r->strs[i].n] = '\0';
        cs[i] = sp;
        sp += r->strs[i].n + 1;
    }
    return 0;
}

/* The model's frames: max(nlines, 1) per location (its inlined lines, innermost first), and
 * room for one more per truncated stack. */
static int build_frames(struct reader *r, struct memprof_profile *p, const char **cs)
{
    size_t nframes = 0;
    for (size_t i = 0; i < r->nlocs; i++) {
        r->locs[i].first_frame = (uint32_t)nframes;
        nframes += r->locs[i].nlines ? r->locs[i].nlines : 1; /* <= MAX_TOTAL_LINES + nlocs */
    }
    size_t extra = r->ntruncated < r->nlocs ? r->ntruncated : r->nlocs;
    p->frames = alloc_array(nframes + extra, sizeof *p->frames);
    if (!p->frames)
        return -ENOMEM;
    for (size_t i = 0; i < r->nlocs; i++) {
        const struct rloc *l = &r->locs[i];
        const struct rmap *m = l->map ? &r->maps[l->map - 1] : NULL;
        bool runtime = !m && l->address == 0;
        struct memprof_pframe base = {
            .module = m ? cs[m->file] : NULL,
            .build_id = m ? cs[m->build_id] : NULL,
            /* The model holds return addresses (pprof.c). */
            .address = l->address && r->call_addresses && !runtime ? l->address + 1 : l->address,
            /* Older files: file_offset = memory_start - load_bias (wrapping is harmless). */
            .load_bias = m ? (m->has_bias ? m->bias : m->start - m->offset) : 0,
            .map_start = m && m->has_bias ? m->start : 0,
            .map_limit = m && m->has_bias ? m->limit : 0,
            .map_offset = m && m->has_bias ? m->offset : 0,
            .flags = runtime ? MEMPROF_FRAME_RUNTIME : 0,
        };
        struct memprof_pframe *fr = &p->frames[l->first_frame];
        if (l->nlines == 0) {
            *fr = base;
            fr->flags |= MEMPROF_FRAME_UNRESOLVED;
            continue;
        }
        for (uint32_t k = 0; k < l->nlines; k++) {
            const struct rline *ln = &r->lines[l->first_line + k];
            const struct rfunc *fn = ln->func ? &r->funcs[ln->func - 1] : NULL;
            fr[k] = base;
            fr[k].function = fn ? cs[fn->name] : NULL;
            /* Kept only when it is another spelling (a mangled name). */
            fr[k].system_name = fn && fn->system != fn->name && cs[fn->system] &&
                                        (!fr[k].function || strcmp(cs[fn->system], fr[k].function))
                                    ? cs[fn->system]
                                    : NULL;
            fr[k].file = fn ? cs[fn->file] : NULL;
            fr[k].line = ln->line;
            /* Every line but the last was inlined into the next one (profile.proto). */
            if (k + 1 < l->nlines)
                fr[k].flags |= MEMPROF_FRAME_INLINED;
            if (!fr[k].function ||
                (runtime && strcmp(fr[k].function, MEMPROF_PPROF_UNKNOWN_RUNTIME) == 0))
                fr[k].flags |= MEMPROF_FRAME_UNRESOLVED;
        }
    }
    p->nframes = nframes;
    return 0;
}

/* A sample's values and labels into its stack. */
static void stack_values(struct memprof_pstack *st, const struct rsample *s)
{
    st->alloc_objects = s->value[0];
    st->alloc_space = s->value[1];
    st->inuse_objects = s->value[2];
    st->inuse_space = s->value[3];
    st->inuse_space_var = sq(s->label[L_INUSE_SPACE_SD]);
    st->inuse_objects_var = sq(s->label[L_INUSE_OBJECTS_SD]);
    st->live_samples = s->label[L_LIVE_SAMPLES];
    st->alloc_samples = s->label[L_ALLOC_SAMPLES];
    st->peak_objects = s->value[4];
    st->peak_space = s->value[5];
    st->temp_objects = s->value[6];
    st->temp_space = s->value[7];
    st->peak_samples = s->label[L_PEAK_SAMPLES];
    st->peak_space_var = sq(s->label[L_PEAK_SPACE_SD]);
    st->temp_samples = s->label[L_TEMP_SAMPLES];
    st->leak_space = s->label[L_LEAK_SPACE];
    st->leak_samples = s->label[L_LEAK_SAMPLES];
    st->leak_rate = (double)s->label[L_LEAK_RATE];
    st->leak_suspect = s->label[L_LEAK_SUSPECT] != 0;
    memcpy(st->lifetimes, s->lifetimes, sizeof st->lifetimes);
}

/* Adds a stack to the whole profile's figures (used unless the comments carry them). */
static void add_to_totals(struct memprof_profile *p, const struct memprof_pstack *st)
{
    p->peak_space = sat_add(p->peak_space, st->peak_space);
    p->peak_objects = sat_add(p->peak_objects, st->peak_objects);
    p->peak_samples = sat_add(p->peak_samples, st->peak_samples);
    p->peak_space_var += st->peak_space_var;
    p->inuse_space = sat_add(p->inuse_space, st->inuse_space);
    p->inuse_objects = sat_add(p->inuse_objects, st->inuse_objects);
    p->live_samples = sat_add(p->live_samples, st->live_samples);
    p->inuse_space_var += st->inuse_space_var;
    p->inuse_objects_var += st->inuse_objects_var;
}

/* The stacks, leaf first as in the file, each location expanded into its lines, their frame
 * indexes in the arena's first part. */
static int build_stacks(struct reader *r, struct memprof_profile *p, const char **cs)
{
    p->stacks = alloc_array(r->nsamples, sizeof *p->stacks);
    if (!p->stacks)
        return -ENOMEM;
    uint32_t *next = (uint32_t *)(void *)p->arena;
    for (size_t i = 0; i < r->nsamples; i++) {
        const struct rsample *s = &r->samples[i];
        struct memprof_pstack *st = &p->stacks[i];
        st->frames = next;
        for (uint32_t j = 0; j < s->nrefs; j++) {
            const struct rloc *l = &r->locs[r->refs[s->first_ref + j]];
            uint32_t n = l->nlines ? l->nlines : 1;
            for (uint32_t k = 0; k < n; k++)
                *next++ = l->first_frame + k;
        }
        st->nframes = (uint32_t)(next - st->frames);
        if (s->label[L_TRUNCATED] && st->nframes) {
            /* The model flags the last frame of a cut stack; that frame is a copy. */
            struct rloc *l = &r->locs[r->refs[s->first_ref + s->nrefs - 1]];
            if (!l->truncated_frame) {
                p->frames[p->nframes] = p->frames[st->frames[st->nframes - 1]];
                p->frames[p->nframes].flags |= MEMPROF_FRAME_TRUNCATED;
                l->truncated_frame = (uint32_t)++p->nframes;
            }
            next[-1] = l->truncated_frame - 1;
        }
        stack_values(st, s);
        int rc;
        if (s->thread && (rc = thread_of(p, cs[s->thread], s->label[L_THREAD_ID], &st->thread)))
            return rc;
        add_to_totals(p, st);
    }
    p->nstacks = r->nsamples;
    return sort_stacks(p) != 0 ? -ENOMEM : 0;
}

/* Every figure comes from the samples read: a file that pprof filtered (-focus) or merged
 * keeps the comments of the profile it came from, which no longer describe it. The comments'
 * exact whole-heap variances (the labels carry rounded standard deviations per stack) are
 * used only when their totals are the samples' own. */
static void whole_profile(const struct reader *r, struct memprof_profile *p)
{
    bool comments_agree = r->have_total[0] && r->have_total[1] && r->have_total[2] &&
                          r->total[0] == p->inuse_space && r->total[1] == p->inuse_objects &&
                          r->total[2] == p->live_samples;
    if (comments_agree && r->have_total[3])
        p->inuse_space_var = r->total_var[0];
    if (comments_agree && r->have_total[4])
        p->inuse_objects_var = r->total_var[1];
    p->truncated_stacks = r->health[0];
    p->dropped_samples = r->health[1];
    p->stack_overflows = r->health[2];
    p->unresolved_addresses = r->health[3];
    p->total_addresses = r->health[4];
    p->sampling_rate = r->period;
    p->time_unix_ns = r->time_nanos;
}

static int build(struct reader *r, size_t total_frames, struct memprof_profile **out)
{
    int rc = -ENOMEM;
    struct memprof_profile *p = calloc(1, sizeof *p);
    const char **cs = alloc_array(r->nstrs, sizeof *cs);
    if (p && cs && (rc = copy_strings(r, total_frames, p, cs)) == 0 &&
        (rc = build_frames(r, p, cs)) == 0 && (rc = build_stacks(r, p, cs)) == 0) {
        whole_profile(r, p);
        if ((rc = decode_extension(r, p)) == 0) {
            *out = p;
            p = NULL;
        }
    }
    free(cs);
    memprof__profile_free(p);
    return rc;
}

/* ---- entry point -------------------------------------------------------------------------- */

static void reader_free(struct reader *r)
{
    free(r->inflated);
    free(r->strs);
    free(r->stypes);
    free(r->samples_v);
    free(r->maps_v);
    free(r->locs_v);
    free(r->funcs_v);
    free(r->comments);
    free(r->funcs);
    free(r->maps);
    free(r->locs);
    free(r->lines);
    free(r->func_ids.pairs);
    free(r->map_ids.pairs);
    free(r->loc_ids.pairs);
    free(r->samples);
    free(r->refs);
}

static int read_profile(struct reader *r, const uint8_t *data, size_t len,
                        struct memprof_profile **out)
{
    int rc;
    if (len == 0)
        return fail(r, "empty file");
    r->gzipped = len >= 2 && data[0] == 0x1f && data[1] == 0x8b;
    if (r->gzipped) {
        if ((rc = gunzip(r, data, len)) != 0)
            return rc;
    } else {
        if (len > memprof__pprof_read_limit)
            return fail(r, "larger than %zu bytes (limit)", memprof__pprof_read_limit);
        r->msg = (struct view){data, len};
    }

    /* Count the top-level fields, then collect their views. */
    if ((rc = top_level_pass(r, false)) != 0)
        return rc;
    r->strs = alloc_array(r->nstrs, sizeof *r->strs);
    r->stypes = alloc_array(r->nstypes, sizeof *r->stypes);
    r->samples_v = alloc_array(r->nsamples, sizeof *r->samples_v);
    r->maps_v = alloc_array(r->nmaps, sizeof *r->maps_v);
    r->locs_v = alloc_array(r->nlocs, sizeof *r->locs_v);
    r->funcs_v = alloc_array(r->nfuncs, sizeof *r->funcs_v);
    r->comments = alloc_array(r->ncomments, sizeof *r->comments);
    if (!r->strs || !r->stypes || !r->samples_v || !r->maps_v || !r->locs_v || !r->funcs_v ||
        !r->comments)
        return -ENOMEM;
    if ((rc = top_level_pass(r, true)) != 0)
        return rc;

    if (r->nstrs == 0 || r->strs[0].n != 0)
        return fail(r, "string_table[0] is not the empty string");
    if ((rc = decode_comments(r)) != 0 || (rc = decode_sample_types(r)) != 0 ||
        (rc = decode_functions(r)) != 0 || (rc = decode_mappings(r)) != 0 ||
        (rc = decode_mapping_extension(r)) != 0 || (rc = decode_locations(r)) != 0)
        return rc;
    if (r->period > INT64_MAX)
        return fail(r, "negative period");
    if (r->time_nanos > INT64_MAX)
        r->time_nanos = 0; /* before 1970: informational only */

    /* Label keys we read; strings are unique in memprof files, the first match wins. */
    for (int k = 0; k <= NLABELS; k++) {
        r->label_keys[k] = UINT64_MAX;
        for (size_t i = 1; i < r->nstrs && r->label_keys[k] == UINT64_MAX; i++)
            if (str_is(r, i, label_names[k]))
                r->label_keys[k] = i;
    }
    r->thread_key = UINT64_MAX;
    for (size_t i = 1; i < r->nstrs && r->thread_key == UINT64_MAX; i++)
        if (str_is(r, i, "thread"))
            r->thread_key = i;

    /* Samples: pass 1 checks and counts, pass 2 stores location references. */
    r->samples = alloc_array(r->nsamples, sizeof *r->samples);
    if (!r->samples)
        return -ENOMEM;
    size_t nrefs = 0, nframes = 0;
    for (size_t i = 0; i < r->nsamples; i++)
        if ((rc = decode_sample(r, i, &nrefs, &nframes)) != 0)
            return rc;
    r->refs = alloc_array(nrefs, sizeof *r->refs);
    if (!r->refs)
        return -ENOMEM;
    r->nrefs = nrefs;
    size_t at = 0;
    for (size_t i = 0; i < r->nsamples; i++)
        if ((rc = decode_sample(r, i, &at, NULL)) != 0)
            return rc;
    return build(r, nframes, out);
}

int memprof__pprof_read(const void *data, size_t len, struct memprof_profile **out, char *err,
                        size_t errlen)
{
    if (err && errlen)
        err[0] = '\0';
    if (!out || (!data && len))
        return -EINVAL;
    *out = NULL;
    struct reader r = {.err = err, .errlen = errlen};
    int rc = read_profile(&r, data, len, out);
    if (rc == -ENOMEM && err && errlen && !r.failed)
        snprintf(err, errlen, "out of memory");
    reader_free(&r);
    return rc;
}
