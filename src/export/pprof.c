/* SPDX-License-Identifier: MIT */
/*
 * The pprof writer: the profile model as gzip-compressed profile.proto
 * (github.com/google/pprof, proto/profile.proto), the format `go tool pprof`, Pyroscope and
 * Parca read. pprof_read.c reads it back for `memprof report` and `memprof diff`.
 *
 * Encoding (what pprof_read.c relies on; keep the two in step):
 *
 * - sample_type: alloc_objects/count, alloc_space/bytes, inuse_objects/count,
 *   inuse_space/bytes, peak_objects/count, peak_space/bytes (live at the recorded peak),
 *   temp_objects/count, temp_space/bytes (allocated and freed within the temporary
 *   threshold), in that order; default_sample_type inuse_space. Values are the model's
 *   estimates (already scaled by the unbiased weights), clamped to INT64_MAX. A stack that
 *   holds nothing now but did at the peak is a sample with zero inuse values.
 *   period_type space/bytes, period = sampling rate; time_nanos = snapshot wall-clock time.
 * - One Sample per stack; location_id leaf first. A stack without frames (stack table full)
 *   is a Sample without locations.
 * - Locations: one per distinct native return address (one per distinct group of lines, to
 *   be exact). A run of frames at one address where each but the last is flagged
 *   MEMPROF_FRAME_INLINED is ONE location whose Line list is that run in order: line[0] the
 *   innermost inlined callee, the last line the function that owns the address (the order
 *   profile.proto prescribes). A frame without a function or file (unresolved) is a
 *   location with its mapping and address and no lines, which pprof shows as module+offset.
 *   A line whose frame has no function name refers to a Function named "".
 * - Runtime (interpreter) frames, MEMPROF_FRAME_RUNTIME: a location with address 0 and no
 *   mapping, one line. An unresolved one keeps the resolver's name
 *   MEMPROF_PPROF_UNKNOWN_RUNTIME so pprof shows something; the reader turns that name back
 *   into the UNRESOLVED flag.
 * - Functions: name = the function name (demangled), system_name = the name as the binary
 *   spells it (the mangled one; the same as name when there is no other), filename, no
 *   start line. One per distinct (name, file).
 * - Mappings follow pprof's conventions, so that pprof, Parca and Pyroscope can symbolize
 *   a profile with the binaries (`go tool pprof -symbolize=local`): one per memory mapping
 *   of a module that holds an address, as /proc/PID/maps shows it: memory_start and
 *   memory_limit the PT_LOAD segment's extent rounded out to pages, file_offset the file
 *   offset of memory_start (the segment's p_offset rounded down), filename the module's
 *   path, build_id its GNU build id in hex. pprof finds the segment by that offset in the
 *   file's program headers and computes the load bias from it. The main binary (the first
 *   module that is not a shared object) comes first. Frames whose mapping is not known (a
 *   model read from an older file) get one mapping per (module, build id, load bias)
 *   spanning the addresses seen, with file_offset = memory_start - load_bias.
 *   has_functions, has_filenames, has_line_numbers are true when every location of the
 *   mapping has them (so a profile written unsymbolized, MEMPROF_SYMBOLIZE=0, says false
 *   and pprof symbolizes it); has_inline_frames when one of them has inlined lines.
 * - Location addresses of native frames are the return address minus one, inside the call
 *   instruction as profile.proto allows, so a tool that symbolizes the address names the
 *   call's line, as the in-process resolver does; the extension's CALL_ADDRESSES says so and
 *   the reader adds the one back.
 * - Per-sample NumLabels carrying what pprof has no field for, each omitted when zero:
 *   "live_samples" and "alloc_samples" (count), "inuse_space_sd" (bytes) and
 *   "inuse_objects_sd" (count), the standard deviations of the in-use estimates rounded to
 *   integers, and "truncated" = 1 when the stack was cut at the maximum depth (the model's
 *   MEMPROF_FRAME_TRUNCATED on the last frame). For the other views: "peak_samples" and
 *   "temp_samples" (count), "peak_space_sd" (bytes); "leak_space" (bytes), "leak_samples"
 *   (count) and "leak_bytes_per_second" (bytes) of the leak statistic, "leak_suspect" = 1;
 *   "lifetimes", one label per non-empty lifetime bucket b with num = b * 2^32 + count;
 *   the allocating thread as the string label "thread" (its name, or "thread TID") and
 *   "thread_id" (its kernel thread id), so `pprof -tagfocus thread=...` selects it.
 * - Field MEMPROF_PPROF_EXTENSION of Profile (pprof.h), a message pprof skips: the peak's
 *   time, the run's duration and the temporary threshold in nanoseconds, the heap over
 *   time as three packed columns (time since start, live bytes, allocated bytes), each
 *   mapping's load bias in mapping id order (packed; what the reader needs to find an
 *   address in the file without opening it) and CALL_ADDRESSES = 1.
 * - Profile comments: one human-readable line, then "memprof.KEY=VALUE" lines: format=1 (the
 *   reader requires it: it is how a memprof file is told from other pprof files), version,
 *   the whole-heap inuse_space, inuse_objects, live_samples, inuse_space_var and
 *   inuse_objects_var (variances as %.17g, exact), and the health counters
 *   truncated_stacks, dropped_samples, stack_overflows, unresolved_addresses,
 *   total_addresses when not zero.
 * - Gotchas pprof enforces: string_table[0] is "", every id is non-zero, stacks leaf first.
 *
 * The whole uncompressed message is built in memory (it is a fraction of the snapshot it
 * came from), then deflated with a gzip header, as pprof requires on disk.
 */
#include "export/pprof.h"

#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "common/hash.h"
#include "export/gzip_stored.h"
#include "export/protobuf.h"
#include "export/zlib_load.h"
#include "memprof/memprof.h"

/* profile.proto field numbers. */
enum {
    PROFILE_SAMPLE_TYPE = 1,
    PROFILE_SAMPLE = 2,
    PROFILE_MAPPING = 3,
    PROFILE_LOCATION = 4,
    PROFILE_FUNCTION = 5,
    PROFILE_STRING_TABLE = 6,
    PROFILE_TIME_NANOS = 9,
    PROFILE_PERIOD_TYPE = 11,
    PROFILE_PERIOD = 12,
    PROFILE_COMMENT = 13,
    PROFILE_DEFAULT_SAMPLE_TYPE = 14,
    VALUETYPE_TYPE = 1,
    VALUETYPE_UNIT = 2,
    SAMPLE_LOCATION_ID = 1,
    SAMPLE_VALUE = 2,
    SAMPLE_LABEL = 3,
    LABEL_KEY = 1,
    LABEL_STR = 2,
    LABEL_NUM = 3,
    LABEL_NUM_UNIT = 4,
    MAPPING_ID = 1,
    MAPPING_MEMORY_START = 2,
    MAPPING_MEMORY_LIMIT = 3,
    MAPPING_FILE_OFFSET = 4,
    MAPPING_FILENAME = 5,
    MAPPING_BUILD_ID = 6,
    MAPPING_HAS_FUNCTIONS = 7,
    MAPPING_HAS_FILENAMES = 8,
    MAPPING_HAS_LINE_NUMBERS = 9,
    MAPPING_HAS_INLINE_FRAMES = 10,
    LOCATION_ID = 1,
    LOCATION_MAPPING_ID = 2,
    LOCATION_ADDRESS = 3,
    LOCATION_LINE = 4,
    LINE_FUNCTION_ID = 1,
    LINE_LINE = 2,
    FUNCTION_ID = 1,
    FUNCTION_NAME = 2,
    FUNCTION_SYSTEM_NAME = 3,
    FUNCTION_FILENAME = 4,
};

/* ---- a small hash index --------------------------------------------------------------------- */

/* Open addressing over entries kept in the caller's arrays: a slot holds an entry's hash and
 * index + 1 (0 = empty); the caller compares candidates itself. Load factor <= 1/2. */
struct slot {
    uint64_t hash;
    uint32_t index1;
};

struct hindex {
    struct slot *slots;
    size_t mask; /* capacity - 1, capacity a power of two */
    size_t n;
};

static int hindex_init(struct hindex *h, size_t expect)
{
    size_t cap = 64;
    while (cap / 2 < expect && cap < SIZE_MAX / 4 / sizeof *h->slots)
        cap *= 2;
    h->slots = calloc(cap, sizeof *h->slots);
    h->mask = cap - 1;
    h->n = 0;
    return h->slots ? 0 : -ENOMEM;
}

/* First slot for `hash` to probe; step with (i + 1) & mask. */
static size_t hindex_start(const struct hindex *h, uint64_t hash)
{
    return (size_t)hash & h->mask;
}

/* Inserts (hash, index) into an empty slot found by probing, growing first when needed. */
static int hindex_put(struct hindex *h, uint64_t hash, uint32_t index)
{
    if ((h->n + 1) * 2 > h->mask + 1) {
        struct hindex g;
        if (hindex_init(&g, (h->mask + 1)) != 0)
            return -ENOMEM;
        for (size_t i = 0; i <= h->mask; i++) {
            if (!h->slots[i].index1)
                continue;
            size_t k = hindex_start(&g, h->slots[i].hash);
            while (g.slots[k].index1)
                k = (k + 1) & g.mask;
            g.slots[k] = h->slots[i];
        }
        g.n = h->n;
        free(h->slots);
        *h = g;
    }
    size_t k = hindex_start(h, hash);
    while (h->slots[k].index1)
        k = (k + 1) & h->mask;
    h->slots[k] = (struct slot){hash, index + 1};
    h->n++;
    return 0;
}

static uint64_t hash_bytes(const void *data, size_t len, uint64_t seed)
{
    /* FNV-1a, then a full mix: strings here are short and this runs once per frame. */
    const uint8_t *d = data;
    uint64_t h = 0xcbf29ce484222325ull ^ seed;
    for (size_t i = 0; i < len; i++)
        h = (h ^ d[i]) * 0x100000001b3ull;
    return memprof__mix64(h);
}

/* ---- the writer's tables ------------------------------------------------------------------ */

struct mapping {
    uint32_t file, build_id; /* string ids */
    uint64_t load_bias;
    uint64_t lo, hi;               /* lowest and highest address seen */
    uint64_t start, limit, offset; /* the memory mapping, when known (limit != 0) */
    bool has_functions, has_filenames, has_lines, has_inline;
    uint32_t id; /* final id (main binary first) */
};

struct function {
    uint32_t name, system, file; /* string ids */
};

struct line {
    uint32_t function; /* function index + 1 */
    uint32_t line;
};

struct location {
    uint64_t address;
    uint32_t mapping; /* mapping index + 1, 0 for none */
    uint32_t first_line, nlines;
};

struct str {
    const char *s;
    size_t len;
};

struct writer {
    const struct memprof_profile *p;
    struct memprof_pb_buf out;
    int err; /* first error other than out of memory in `out` */

    struct str *strs;
    uint32_t nstrs, str_cap;
    struct hindex str_index;

    struct mapping *maps;
    uint32_t nmaps, map_cap;
    struct hindex map_index;

    struct function *funcs;
    uint32_t nfuncs, func_cap;
    struct hindex func_index;

    struct line *lines;
    uint32_t nlines, line_cap;
    struct location *locs;
    uint32_t nlocs, loc_cap;
    struct hindex loc_index;

    /* Per model frame, resolved lazily: string ids, function and mapping (index + 1). */
    uint32_t *frame_func, *frame_map;
    /* "thread TID" names of unnamed threads, per thread index (allocated when needed). */
    char (*unnamed_threads)[32];

    uint64_t *loc_ids; /* scratch: one stack's location ids */
};

/* Grows an array of `size`-byte elements to hold one more; false when impossible. */
static bool grow(void *arrayp, uint32_t *cap, uint32_t n, size_t size)
{
    if (n < *cap)
        return true;
    if (*cap >= UINT32_MAX / 2)
        return false;
    uint32_t c = *cap ? *cap * 2 : 64;
    void *a = realloc(*(void **)arrayp, (size_t)c * size);
    if (!a)
        return false;
    *(void **)arrayp = a;
    *cap = c;
    return true;
}

/* The string-table id of s (NULL and "" are 0), or UINT32_MAX when out of memory. */
static uint32_t intern(struct writer *w, const char *s)
{
    if (!s || !*s)
        return 0;
    size_t len = strlen(s);
    uint64_t h = hash_bytes(s, len, 0);
    for (size_t k = hindex_start(&w->str_index, h); w->str_index.slots[k].index1;
         k = (k + 1) & w->str_index.mask) {
        const struct slot *sl = &w->str_index.slots[k];
        uint32_t i = sl->index1 - 1;
        if (sl->hash == h && w->strs[i].len == len && memcmp(w->strs[i].s, s, len) == 0)
            return i;
    }
    uint32_t id = w->nstrs;
    if (!grow(&w->strs, &w->str_cap, id, sizeof *w->strs) || hindex_put(&w->str_index, h, id) != 0)
        return UINT32_MAX;
    w->strs[id] = (struct str){s, len};
    w->nstrs++;
    return id;
}

/* Function index + 1 for a frame's (name, system name, file), or 0 when out of memory. */
static uint32_t function_of(struct writer *w, const struct memprof_pframe *f)
{
    uint32_t name = intern(w, f->function), file = intern(w, f->file);
    uint32_t system = f->system_name ? intern(w, f->system_name) : name;
    if (name == UINT32_MAX || file == UINT32_MAX || system == UINT32_MAX)
        return 0;
    uint64_t h = memprof__mix64((uint64_t)name << 32 | file) ^ memprof__mix64(system);
    for (size_t k = hindex_start(&w->func_index, h); w->func_index.slots[k].index1;
         k = (k + 1) & w->func_index.mask) {
        uint32_t i = w->func_index.slots[k].index1 - 1;
        if (w->funcs[i].name == name && w->funcs[i].file == file && w->funcs[i].system == system)
            return i + 1;
    }
    if (!grow(&w->funcs, &w->func_cap, w->nfuncs, sizeof *w->funcs) ||
        hindex_put(&w->func_index, h, w->nfuncs) != 0)
        return 0;
    w->funcs[w->nfuncs] = (struct function){name, system, file};
    return ++w->nfuncs;
}

/* Mapping index + 1 of a native frame's module, 0 for frames without one, or UINT32_MAX
 * when out of memory. */
static uint32_t mapping_of(struct writer *w, const struct memprof_pframe *f)
{
    if (!f->module || !*f->module || (f->flags & MEMPROF_FRAME_RUNTIME))
        return 0;
    uint32_t file = intern(w, f->module), bid = intern(w, f->build_id);
    if (file == UINT32_MAX || bid == UINT32_MAX)
        return UINT32_MAX;
    /* A memory mapping of the module when the frame knows it, else the module. */
    uint64_t limit = f->map_limit > f->map_start ? f->map_limit : 0,
             start = limit ? f->map_start : 0;
    uint64_t h = memprof__mix64(((uint64_t)file << 32 | bid) ^ memprof__mix64(f->load_bias) ^
                                memprof__mix64(start + 1));
    for (size_t k = hindex_start(&w->map_index, h); w->map_index.slots[k].index1;
         k = (k + 1) & w->map_index.mask) {
        uint32_t i = w->map_index.slots[k].index1 - 1;
        const struct mapping *m = &w->maps[i];
        if (m->file == file && m->build_id == bid && m->load_bias == f->load_bias &&
            m->start == start && m->limit == limit)
            return i + 1;
    }
    if (!grow(&w->maps, &w->map_cap, w->nmaps, sizeof *w->maps) ||
        hindex_put(&w->map_index, h, w->nmaps) != 0)
        return UINT32_MAX;
    w->maps[w->nmaps] = (struct mapping){
        .file = file,
        .build_id = bid,
        .load_bias = f->load_bias,
        .start = start,
        .limit = limit,
        .offset = limit ? f->map_offset : 0,
        .lo = UINT64_MAX,
        .hi = 0,
        .has_functions = true,
        .has_filenames = true,
        .has_lines = true,
    };
    return ++w->nmaps;
}

/* Mapping index + 1 of model frame i (0 for none), computed once per frame: frame_map
 * holds that value + 1, 0 meaning not yet computed. UINT32_MAX when out of memory. */
static uint32_t frame_mapping(struct writer *w, uint32_t i)
{
    if (!w->frame_map[i]) {
        uint32_t map = mapping_of(w, &w->p->frames[i]);
        if (map == UINT32_MAX)
            return UINT32_MAX;
        w->frame_map[i] = map + 1;
    }
    return w->frame_map[i] - 1;
}

/* Function index + 1 of model frame i, computed once; 0 when out of memory. */
static uint32_t frame_function(struct writer *w, uint32_t i)
{
    if (!w->frame_func[i])
        w->frame_func[i] = function_of(w, &w->p->frames[i]);
    return w->frame_func[i];
}

/* Frames [first, last] of a stack form one location: see "Locations" at the top. */
static unsigned group_end(const struct memprof_profile *p, const struct memprof_pstack *st,
                          unsigned first)
{
    const struct memprof_pframe *f0 = &p->frames[st->frames[first]];
    unsigned last = first;
    if (f0->address == 0 || (f0->flags & MEMPROF_FRAME_RUNTIME))
        return last;
    while (last + 1 < st->nframes) {
        const struct memprof_pframe *f = &p->frames[st->frames[last]];
        const struct memprof_pframe *next = &p->frames[st->frames[last + 1]];
        if (!(f->flags & MEMPROF_FRAME_INLINED) || next->address != f0->address ||
            (next->flags & MEMPROF_FRAME_RUNTIME))
            break;
        last++;
    }
    return last;
}

/* The location id of frames [first, last] of a stack, created when new; 0 when out of
 * memory. The candidate's lines are appended to w->lines and dropped again if an equal
 * location exists. */
static uint32_t location_of(struct writer *w, const struct memprof_pstack *st, unsigned first,
                            unsigned last)
{
    const struct memprof_profile *p = w->p;
    const struct memprof_pframe *owner = &p->frames[st->frames[last]];
    uint32_t map = frame_mapping(w, st->frames[last]);
    if (map == UINT32_MAX)
        return 0;
    struct location cand = {
        /* Inside the call instruction (see the top). */
        .address =
            (owner->flags & MEMPROF_FRAME_RUNTIME) || !owner->address ? 0 : owner->address - 1,
        .mapping = map,
        .first_line = w->nlines,
    };
    /* An unresolved native frame has no lines, so pprof shows its module and address. */
    bool no_lines = first == last && !owner->function && !owner->file &&
                    !(owner->flags & MEMPROF_FRAME_RUNTIME);
    uint64_t h = memprof__mix64(cand.address ^ ((uint64_t)cand.mapping << 40));
    for (unsigned i = first; !no_lines && i <= last; i++) {
        uint32_t fn = frame_function(w, st->frames[i]);
        if (!fn || !grow(&w->lines, &w->line_cap, w->nlines, sizeof *w->lines))
            return 0;
        uint32_t line = p->frames[st->frames[i]].line;
        w->lines[w->nlines++] = (struct line){fn, line};
        h = memprof__mix64(h ^ ((uint64_t)fn << 32 | line));
    }
    cand.nlines = w->nlines - cand.first_line;
    for (size_t k = hindex_start(&w->loc_index, h); w->loc_index.slots[k].index1;
         k = (k + 1) & w->loc_index.mask) {
        if (w->loc_index.slots[k].hash != h)
            continue;
        uint32_t i = w->loc_index.slots[k].index1 - 1;
        const struct location *l = &w->locs[i];
        if (l->address == cand.address && l->mapping == cand.mapping && l->nlines == cand.nlines &&
            (cand.nlines == 0 || memcmp(&w->lines[l->first_line], &w->lines[cand.first_line],
                                        cand.nlines * sizeof *w->lines) == 0)) {
            w->nlines = cand.first_line;
            return i + 1;
        }
    }
    if (!grow(&w->locs, &w->loc_cap, w->nlocs, sizeof *w->locs) ||
        hindex_put(&w->loc_index, h, w->nlocs) != 0)
        return 0;
    w->locs[w->nlocs] = cand;
    if (cand.mapping) {
        /* What the mapping's has_* flags summarise, and its address range. */
        struct mapping *m = &w->maps[cand.mapping - 1];
        if (cand.address < m->lo)
            m->lo = cand.address;
        if (cand.address > m->hi)
            m->hi = cand.address;
        if (cand.nlines == 0)
            m->has_functions = m->has_filenames = m->has_lines = false;
        if (cand.nlines > 1)
            m->has_inline = true;
        for (unsigned i = first; !no_lines && i <= last; i++) {
            const struct memprof_pframe *f = &p->frames[st->frames[i]];
            m->has_functions &= f->function != NULL;
            m->has_filenames &= f->file != NULL;
            m->has_lines &= f->line != 0;
        }
    }
    return ++w->nlocs;
}

/* ---- encoding ----------------------------------------------------------------------------- */

static int64_t clamp64(uint64_t v)
{
    return v > INT64_MAX ? INT64_MAX : (int64_t)v;
}

static int64_t round64(double v)
{
    if (!(v > 0.0)) /* also NaN */
        return 0;
    if (v >= 9.2e18)
        return INT64_MAX;
    /* llround() by hand (halves away from zero), which would be libm's: v - trunc(v) is
     * exact. */
    int64_t t = (int64_t)v;
    return v - (double)t >= 0.5 ? t + 1 : t;
}

static int64_t sd_of(double var)
{
    return round64(var > 0.0 ? sqrt(var) : 0.0);
}

static void num_label(struct writer *w, uint32_t key, int64_t v, uint32_t unit)
{
    if (v == 0)
        return;
    size_t m = memprof__pb_begin(&w->out, SAMPLE_LABEL);
    memprof__pb_uint(&w->out, LABEL_KEY, key);
    memprof__pb_int(&w->out, LABEL_NUM, v);
    memprof__pb_uint(&w->out, LABEL_NUM_UNIT, unit);
    memprof__pb_end(&w->out, m);
}

/* The "thread" label of thread index `t` (+ 1): its name, or "thread TID" when it has none.
 * The string table keeps pointers, so the made-up names live in the writer until the end. */
static int str_label(struct writer *w, uint32_t key, uint32_t t)
{
    const struct memprof_pthread *th = &w->p->threads[t - 1];
    const char *name = th->name;
    if (!name || !*name) {
        if (!w->unnamed_threads &&
            !(w->unnamed_threads = calloc(w->p->nthreads, sizeof *w->unnamed_threads)))
            return -ENOMEM;
        name = w->unnamed_threads[t - 1];
        snprintf(w->unnamed_threads[t - 1], sizeof *w->unnamed_threads, "thread %" PRIu64, th->tid);
    }
    uint32_t id = intern(w, name);
    if (id == UINT32_MAX)
        return -ENOMEM;
    size_t m = memprof__pb_begin(&w->out, SAMPLE_LABEL);
    memprof__pb_uint(&w->out, LABEL_KEY, key);
    memprof__pb_uint(&w->out, LABEL_STR, id);
    memprof__pb_end(&w->out, m);
    return 0;
}

static void value_type(struct writer *w, uint32_t field, uint32_t type, uint32_t unit)
{
    size_t m = memprof__pb_begin(&w->out, field);
    memprof__pb_uint(&w->out, VALUETYPE_TYPE, type);
    memprof__pb_uint(&w->out, VALUETYPE_UNIT, unit);
    memprof__pb_end(&w->out, m);
}

/* String ids used in every file, interned first. */
struct fixed_strings {
    uint32_t alloc_objects, alloc_space, inuse_objects, inuse_space, count, bytes, space;
    uint32_t live_samples, alloc_samples, inuse_space_sd, inuse_objects_sd, truncated;
    uint32_t peak_objects, peak_space, temp_objects, temp_space, peak_samples, peak_space_sd,
        temp_samples, leak_space, leak_samples, leak_rate, leak_suspect, lifetimes, thread,
        thread_id;
};

static int encode_samples(struct writer *w, const struct fixed_strings *s)
{
    const struct memprof_profile *p = w->p;
    for (size_t i = 0; i < p->nstacks; i++) {
        const struct memprof_pstack *st = &p->stacks[i];
        size_t nloc = 0;
        for (unsigned j = 0; j < st->nframes; j++)
            if (st->frames[j] >= p->nframes)
                return -EINVAL; /* a model bug; never write a dangling reference */
        for (unsigned j = 0; j < st->nframes; j++) {
            unsigned last = group_end(p, st, j);
            uint32_t id = location_of(w, st, j, last);
            if (!id)
                return -ENOMEM;
            w->loc_ids[nloc++] = id;
            j = last;
        }
        size_t m = memprof__pb_begin(&w->out, PROFILE_SAMPLE);
        if (nloc) {
            size_t packed = memprof__pb_begin(&w->out, SAMPLE_LOCATION_ID);
            for (size_t k = 0; k < nloc; k++)
                memprof__pb_raw_varint(&w->out, w->loc_ids[k]);
            memprof__pb_end(&w->out, packed);
        }
        /* Same order as sample_type. Packed even when zero: every sample has every value. */
        size_t packed = memprof__pb_begin(&w->out, SAMPLE_VALUE);
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->alloc_objects));
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->alloc_space));
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->inuse_objects));
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->inuse_space));
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->peak_objects));
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->peak_space));
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->temp_objects));
        memprof__pb_raw_varint(&w->out, (uint64_t)clamp64(st->temp_space));
        memprof__pb_end(&w->out, packed);
        num_label(w, s->live_samples, clamp64(st->live_samples), s->count);
        num_label(w, s->alloc_samples, clamp64(st->alloc_samples), s->count);
        num_label(w, s->inuse_space_sd, sd_of(st->inuse_space_var), s->bytes);
        num_label(w, s->inuse_objects_sd, sd_of(st->inuse_objects_var), s->count);
        bool truncated =
            st->nframes && (p->frames[st->frames[st->nframes - 1]].flags & MEMPROF_FRAME_TRUNCATED);
        num_label(w, s->truncated, truncated, 0);
        num_label(w, s->peak_samples, clamp64(st->peak_samples), s->count);
        num_label(w, s->peak_space_sd, sd_of(st->peak_space_var), s->bytes);
        num_label(w, s->temp_samples, clamp64(st->temp_samples), s->count);
        num_label(w, s->leak_space, clamp64(st->leak_space), s->bytes);
        num_label(w, s->leak_samples, clamp64(st->leak_samples), s->count);
        num_label(w, s->leak_rate, round64(st->leak_rate), s->bytes);
        num_label(w, s->leak_suspect, st->leak_suspect != 0, 0);
        for (unsigned b = 0; b < MEMPROF_LIFETIME_BUCKETS; b++)
            num_label(w, s->lifetimes, st->lifetimes[b] ? ((int64_t)b << 32) | st->lifetimes[b] : 0,
                      s->count);
        if (st->thread && st->thread <= p->nthreads) {
            if (str_label(w, s->thread, st->thread) != 0)
                return -ENOMEM;
            num_label(w, s->thread_id, clamp64(p->threads[st->thread - 1].tid), 0);
        }
        memprof__pb_end(&w->out, m);
    }
    return 0;
}

/* A shared object's file name contains ".so" followed by the end or a '.'. */
static bool is_shared_object(const char *path)
{
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    for (const char *s = strstr(base, ".so"); s; s = strstr(s + 1, ".so"))
        if (s[3] == '\0' || s[3] == '.')
            return true;
    return false;
}

static void encode_mappings(struct writer *w)
{
    /* pprof and other readers take mapping[0] for the main binary: move the first module
     * that is not a shared object to the front, keep the others in order of appearance. */
    uint32_t main_map = 0;
    for (uint32_t i = 0; i < w->nmaps; i++)
        if (!is_shared_object(w->strs[w->maps[i].file].s)) {
            main_map = i;
            break;
        }
    uint32_t next = 2;
    for (uint32_t i = 0; i < w->nmaps; i++)
        w->maps[i].id = i == main_map ? 1 : next++;
    for (uint32_t r = 0; r < w->nmaps; r++) {
        uint32_t i = r == 0 ? main_map : (r <= main_map ? r - 1 : r);
        const struct mapping *mp = &w->maps[i];
        uint64_t lo = mp->lo <= mp->hi ? mp->lo : 0, hi = mp->lo <= mp->hi ? mp->hi : 0;
        /* file_offset = lo - load_bias keeps address - start + offset = address - bias; a
         * bias above the lowest address would be meaningless (negative file addresses). */
        uint64_t offset = lo >= mp->load_bias ? lo - mp->load_bias : 0;
        uint64_t limit = hi == UINT64_MAX ? hi : hi + 1;
        if (mp->limit) {
            lo = mp->start;
            limit = mp->limit;
            offset = mp->offset;
        }
        size_t m = memprof__pb_begin(&w->out, PROFILE_MAPPING);
        memprof__pb_uint(&w->out, MAPPING_ID, mp->id);
        memprof__pb_uint(&w->out, MAPPING_MEMORY_START, lo);
        memprof__pb_uint(&w->out, MAPPING_MEMORY_LIMIT, limit);
        memprof__pb_uint(&w->out, MAPPING_FILE_OFFSET, offset);
        memprof__pb_uint(&w->out, MAPPING_FILENAME, mp->file);
        memprof__pb_uint(&w->out, MAPPING_BUILD_ID, mp->build_id);
        memprof__pb_bool(&w->out, MAPPING_HAS_FUNCTIONS, mp->has_functions);
        memprof__pb_bool(&w->out, MAPPING_HAS_FILENAMES, mp->has_filenames);
        memprof__pb_bool(&w->out, MAPPING_HAS_LINE_NUMBERS, mp->has_lines);
        memprof__pb_bool(&w->out, MAPPING_HAS_INLINE_FRAMES, mp->has_inline);
        memprof__pb_end(&w->out, m);
    }
}

static void encode_locations_and_functions(struct writer *w)
{
    for (uint32_t i = 0; i < w->nlocs; i++) {
        const struct location *l = &w->locs[i];
        size_t m = memprof__pb_begin(&w->out, PROFILE_LOCATION);
        memprof__pb_uint(&w->out, LOCATION_ID, i + 1);
        if (l->mapping)
            memprof__pb_uint(&w->out, LOCATION_MAPPING_ID, w->maps[l->mapping - 1].id);
        memprof__pb_uint(&w->out, LOCATION_ADDRESS, l->address);
        for (uint32_t k = 0; k < l->nlines; k++) {
            const struct line *ln = &w->lines[l->first_line + k];
            size_t lm = memprof__pb_begin(&w->out, LOCATION_LINE);
            memprof__pb_uint(&w->out, LINE_FUNCTION_ID, ln->function);
            memprof__pb_int(&w->out, LINE_LINE, ln->line);
            memprof__pb_end(&w->out, lm);
        }
        memprof__pb_end(&w->out, m);
    }
    for (uint32_t i = 0; i < w->nfuncs; i++) {
        size_t m = memprof__pb_begin(&w->out, PROFILE_FUNCTION);
        memprof__pb_uint(&w->out, FUNCTION_ID, i + 1);
        memprof__pb_uint(&w->out, FUNCTION_NAME, w->funcs[i].name);
        memprof__pb_uint(&w->out, FUNCTION_SYSTEM_NAME, w->funcs[i].system);
        memprof__pb_uint(&w->out, FUNCTION_FILENAME, w->funcs[i].file);
        memprof__pb_end(&w->out, m);
    }
}

/* The profile comments (see the top). Their text lives in `buf` until encoding ends.
 * Returns how many there are, or -ENOMEM. */
#define NCOMMENTS 13
static int add_comments(struct writer *w, char (*buf)[128], uint32_t *ids)
{
    const struct memprof_profile *p = w->p;
    unsigned n = 0;
    snprintf(buf[n++], sizeof *buf,
             "libmemprof heap profile: values are unbiased estimates, "
             "sampling rate %" PRIu64 " bytes",
             p->sampling_rate);
    snprintf(buf[n++], sizeof *buf, "memprof.format=1");
    snprintf(buf[n++], sizeof *buf, "memprof.version=%s", MEMPROF_VERSION_STRING);
    snprintf(buf[n++], sizeof *buf, "memprof.inuse_space=%" PRIu64, p->inuse_space);
    snprintf(buf[n++], sizeof *buf, "memprof.inuse_objects=%" PRIu64, p->inuse_objects);
    snprintf(buf[n++], sizeof *buf, "memprof.live_samples=%" PRIu64, p->live_samples);
    snprintf(buf[n++], sizeof *buf, "memprof.inuse_space_var=%.17g",
             p->inuse_space_var > 0.0 && isfinite(p->inuse_space_var) ? p->inuse_space_var : 0.0);
    snprintf(buf[n++], sizeof *buf, "memprof.inuse_objects_var=%.17g",
             p->inuse_objects_var > 0.0 && isfinite(p->inuse_objects_var) ? p->inuse_objects_var
                                                                          : 0.0);
    /* Health counters only when non-zero (the reader's default): every pprof report prints
     * the comments, and a healthy profile should not say so five times. */
    const struct {
        const char *key;
        uint64_t value;
    } health[] = {
        {"truncated_stacks", p->truncated_stacks},
        {"dropped_samples", p->dropped_samples},
        {"stack_overflows", p->stack_overflows},
        {"unresolved_addresses", p->unresolved_addresses},
        {"total_addresses", p->total_addresses},
    };
    for (size_t i = 0; i < sizeof health / sizeof *health; i++)
        if (health[i].value)
            snprintf(buf[n++], sizeof *buf, "memprof.%s=%" PRIu64, health[i].key, health[i].value);
    for (unsigned i = 0; i < n; i++)
        if ((ids[i] = intern(w, buf[i])) == UINT32_MAX)
            return -ENOMEM;
    return (int)n;
}

static void packed_column(struct writer *w, uint32_t field, size_t offset)
{
    const struct memprof_profile *p = w->p;
    size_t m = memprof__pb_begin(&w->out, field);
    for (size_t i = 0; i < p->nseries; i++)
        memprof__pb_raw_varint(&w->out, *(const uint64_t *)((const char *)&p->series[i] + offset));
    memprof__pb_end(&w->out, m);
}

/* The extension message (see the top). */
static void encode_extension(struct writer *w)
{
    const struct memprof_profile *p = w->p;
    size_t m = memprof__pb_begin(&w->out, MEMPROF_PPROF_EXTENSION);
    memprof__pb_uint(&w->out, MEMPROF_PPROF_EXT_PEAK_TIME_NS, p->peak_time_ns);
    memprof__pb_uint(&w->out, MEMPROF_PPROF_EXT_DURATION_NS, p->duration_ns);
    memprof__pb_uint(&w->out, MEMPROF_PPROF_EXT_TEMP_THRESHOLD_NS, p->temp_threshold_ns);
    if (p->nseries) {
        packed_column(w, MEMPROF_PPROF_EXT_SERIES_T_NS, offsetof(struct memprof_ppoint, t_ns));
        packed_column(w, MEMPROF_PPROF_EXT_SERIES_LIVE, offsetof(struct memprof_ppoint, live));
        packed_column(w, MEMPROF_PPROF_EXT_SERIES_ALLOC, offsetof(struct memprof_ppoint, alloc));
    }
    if (w->nmaps) {
        /* In mapping id order: the main binary's first (encode_mappings). */
        size_t b = memprof__pb_begin(&w->out, MEMPROF_PPROF_EXT_MAPPING_BIAS);
        for (uint32_t id = 1; id <= w->nmaps; id++)
            for (uint32_t i = 0; i < w->nmaps; i++)
                if (w->maps[i].id == id)
                    memprof__pb_raw_varint(&w->out, w->maps[i].load_bias);
        memprof__pb_end(&w->out, b);
    }
    memprof__pb_uint(&w->out, MEMPROF_PPROF_EXT_CALL_ADDRESSES, 1);
    memprof__pb_end(&w->out, m);
}

/* A raw profile's message up to this size is written uncompressed (in a gzip member). */
#define RAW_STORED_MAX ((size_t)256 << 10)

/* Deflates the message to `out` with a gzip header at zlib's fastest level, as Go's runtime
 * writes its profiles: the default level took a quarter more of `memprof run`'s time renaming
 * a build's hundred profiles, for files 4 % smaller. */
static int gzip_to(const struct memprof_pb_buf *msg, FILE *out)
{
    const struct memprof__zlib *zl = memprof__zlib();
    if (!zl) /* still a gzip file every reader takes, uncompressed */
        return memprof__gzip_stored(msg->data, msg->len, out);
    z_stream zs = {0};
    /* A window no larger than the message, and a hash table in proportion: zlib's default
     * state (32 KiB window, 64 KiB hash heads, 64 KiB pending buffer) is a fresh mapping to
     * fault in and a table to clear, which for the few KiB of most processes' profiles cost
     * more than compressing them. The output is the same format; 9 is zlib's smallest window
     * for deflate, 15 its largest. */
    int bits = 9;
    while (bits < 15 && ((size_t)1 << bits) < msg->len)
        bits++;
    /* + 16: a gzip header and trailer instead of zlib's. */
    int zrc = zl->deflate_init2(&zs, Z_BEST_SPEED, Z_DEFLATED, bits + 16, bits - 7,
                                Z_DEFAULT_STRATEGY, ZLIB_VERSION, (int)sizeof zs);
    if (zrc != Z_OK)
        return zrc == Z_MEM_ERROR ? -ENOMEM : -EINVAL;
    static const size_t chunk = 1u << 16;
    unsigned char *obuf = malloc(chunk);
    if (!obuf) {
        zl->deflate_end(&zs);
        return -ENOMEM;
    }
    int rc = 0;
    size_t fed = 0;
    do {
        /* avail_in is a uInt: feed a large message in pieces. */
        if (zs.avail_in == 0 && fed < msg->len) {
            size_t piece = msg->len - fed < (1u << 30) ? msg->len - fed : (1u << 30);
            zs.next_in = msg->data + fed;
            zs.avail_in = (uInt)piece;
            fed += piece;
        }
        zs.next_out = obuf;
        zs.avail_out = (uInt)chunk;
        zrc = zl->deflate(&zs, fed == msg->len ? Z_FINISH : Z_NO_FLUSH);
        if (zrc == Z_STREAM_ERROR) {
            rc = -EINVAL;
            break;
        }
        size_t have = chunk - zs.avail_out;
        if (have && fwrite(obuf, 1, have, out) != have) {
            rc = -EIO;
            break;
        }
    } while (zrc != Z_STREAM_END);
    free(obuf);
    zl->deflate_end(&zs);
    if (rc == 0 && ferror(out))
        rc = -EIO;
    return rc;
}

static void writer_free(struct writer *w)
{
    memprof__pb_buf_free(&w->out);
    free(w->strs);
    free(w->str_index.slots);
    free(w->maps);
    free(w->map_index.slots);
    free(w->funcs);
    free(w->func_index.slots);
    free(w->lines);
    free(w->locs);
    free(w->loc_index.slots);
    free(w->frame_func);
    free(w->frame_map);
    free(w->loc_ids);
    free(w->unnamed_threads);
}

int memprof__export_pprof(const struct memprof_profile *p, FILE *out)
{
    if (!p || !out)
        return -EINVAL;
    /* Ids are 32-bit here; a profile that large could not be opened anyway. */
    if (p->nframes >= UINT32_MAX / 2 || p->nstacks >= UINT32_MAX / 2)
        return -EOVERFLOW;
    struct writer w = {.p = p};
    int rc = -ENOMEM;
    size_t maxdepth = 1;
    for (size_t i = 0; i < p->nstacks; i++)
        if (p->stacks[i].nframes > maxdepth)
            maxdepth = p->stacks[i].nframes;
    w.frame_func = calloc(p->nframes ? p->nframes : 1, sizeof *w.frame_func);
    w.frame_map = calloc(p->nframes ? p->nframes : 1, sizeof *w.frame_map);
    w.loc_ids = malloc(maxdepth * sizeof *w.loc_ids);
    if (!w.frame_func || !w.frame_map || !w.loc_ids ||
        hindex_init(&w.str_index, 256 + p->nframes) || hindex_init(&w.map_index, 16) ||
        hindex_init(&w.func_index, p->nframes) || hindex_init(&w.loc_index, p->nframes))
        goto done;
    /* string_table[0] must be "". */
    if (!grow(&w.strs, &w.str_cap, 0, sizeof *w.strs))
        goto done;
    w.strs[0] = (struct str){"", 0};
    w.nstrs = 1;

    struct fixed_strings s;
    uint32_t *ids[] = {&s.alloc_objects,
                       &s.alloc_space,
                       &s.inuse_objects,
                       &s.inuse_space,
                       &s.count,
                       &s.bytes,
                       &s.space,
                       &s.live_samples,
                       &s.alloc_samples,
                       &s.inuse_space_sd,
                       &s.inuse_objects_sd,
                       &s.truncated,
                       &s.peak_objects,
                       &s.peak_space,
                       &s.temp_objects,
                       &s.temp_space,
                       &s.peak_samples,
                       &s.peak_space_sd,
                       &s.temp_samples,
                       &s.leak_space,
                       &s.leak_samples,
                       &s.leak_rate,
                       &s.leak_suspect,
                       &s.lifetimes,
                       &s.thread,
                       &s.thread_id};
    static const char *const names[] = {"alloc_objects",
                                        "alloc_space",
                                        "inuse_objects",
                                        "inuse_space",
                                        "count",
                                        "bytes",
                                        "space",
                                        "live_samples",
                                        "alloc_samples",
                                        "inuse_space_sd",
                                        "inuse_objects_sd",
                                        "truncated",
                                        "peak_objects",
                                        "peak_space",
                                        "temp_objects",
                                        "temp_space",
                                        "peak_samples",
                                        "peak_space_sd",
                                        "temp_samples",
                                        "leak_space",
                                        "leak_samples",
                                        "leak_bytes_per_second",
                                        "leak_suspect",
                                        "lifetimes",
                                        "thread",
                                        "thread_id"};
    _Static_assert(sizeof ids / sizeof *ids == sizeof names / sizeof *names, "one per name");
    for (size_t i = 0; i < sizeof ids / sizeof *ids; i++)
        if ((*ids[i] = intern(&w, names[i])) == UINT32_MAX)
            goto done;

    value_type(&w, PROFILE_SAMPLE_TYPE, s.alloc_objects, s.count);
    value_type(&w, PROFILE_SAMPLE_TYPE, s.alloc_space, s.bytes);
    value_type(&w, PROFILE_SAMPLE_TYPE, s.inuse_objects, s.count);
    value_type(&w, PROFILE_SAMPLE_TYPE, s.inuse_space, s.bytes);
    value_type(&w, PROFILE_SAMPLE_TYPE, s.peak_objects, s.count);
    value_type(&w, PROFILE_SAMPLE_TYPE, s.peak_space, s.bytes);
    value_type(&w, PROFILE_SAMPLE_TYPE, s.temp_objects, s.count);
    value_type(&w, PROFILE_SAMPLE_TYPE, s.temp_space, s.bytes);
    if ((rc = encode_samples(&w, &s)) != 0)
        goto done;
    rc = -ENOMEM;
    char comments[NCOMMENTS][128];
    uint32_t comment_ids[NCOMMENTS];
    int ncomments = add_comments(&w, comments, comment_ids);
    if (ncomments < 0)
        goto done;
    encode_mappings(&w);
    encode_locations_and_functions(&w);
    /* Strings last: everything above has interned its own. */
    for (uint32_t i = 0; i < w.nstrs; i++)
        memprof__pb_bytes(&w.out, PROFILE_STRING_TABLE, w.strs[i].s, w.strs[i].len);
    memprof__pb_int(&w.out, PROFILE_TIME_NANOS, clamp64(p->time_unix_ns));
    value_type(&w, PROFILE_PERIOD_TYPE, s.space, s.bytes);
    memprof__pb_int(&w.out, PROFILE_PERIOD, clamp64(p->sampling_rate));
    size_t packed = memprof__pb_begin(&w.out, PROFILE_COMMENT);
    for (int i = 0; i < ncomments; i++)
        memprof__pb_raw_varint(&w.out, comment_ids[i]);
    memprof__pb_end(&w.out, packed);
    memprof__pb_uint(&w.out, PROFILE_DEFAULT_SAMPLE_TYPE, s.inuse_space);
    encode_extension(&w);
    if (w.out.oom)
        goto done;
    /* A raw profile is what memprof run's processes write for the command to name and
     * rewrite after the exit, in every process of a build: most are a few KiB (a cc1 of
     * `bench_make.py`'s build: 8 KiB), which are stored, without loading zlib or setting up
     * its state; larger ones deflated (gzip_to). A profile without a frame
     * (no sample: the program memprof run starts writes one in any case) is stored too. */
    bool raw = p->nframes == 0 || memprof__profile_unsymbolized(p);
    if (raw && w.out.len <= RAW_STORED_MAX)
        rc = memprof__gzip_stored(w.out.data, w.out.len, out);
    else
        rc = gzip_to(&w.out, out);
done:
    writer_free(&w);
    return rc;
}
