/* SPDX-License-Identifier: MIT */
/*
 * The pprof writer and reader (src/export/pprof.c, pprof_read.c) and the protobuf wire
 * format under them: round trips of a hand-built profile that uses every case of the
 * encoding and of a real engine profile, writing twice gives the same bytes, and the reader
 * rejects, with a message and without crashing, every kind of bad input: hand-crafted
 * protobufs that break one rule each, truncations at every offset, random byte flips,
 * garbage with and without a gzip wrapper, a decompression bomb. Run it under ASan/UBSan
 * too (the project's sanitizer build runs the unit suite).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "export/export.h"
#include "export/pprof.h"
#include "export/protobuf.h"
#include "../export/profiles.h"
#include "fixture.h"
#include "memprof/memprof.h"
#include "../check.h"

/* A small deterministic PRNG (xorshift64*): the same corruptions on every run. */
static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545f4914f6cdd1dull;
}

/* gzip-compresses [data, data + len) into a malloc'ed buffer. */
static unsigned char *gzip_buf(const void *data, size_t len, size_t *outlen)
{
    z_stream zs = {0};
    if (deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK)
        return NULL;
    size_t cap = deflateBound(&zs, (uLong)len) + 64;
    unsigned char *out = malloc(cap);
    zs.next_in = (unsigned char *)(uintptr_t)data;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = out ? deflate(&zs, Z_FINISH) : Z_MEM_ERROR;
    *outlen = cap - zs.avail_out;
    deflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* Inflates a gzip buffer (the writer's output) for the raw-protobuf tests. */
static unsigned char *gunzip_buf(const unsigned char *data, size_t len, size_t *outlen)
{
    z_stream zs = {0};
    if (inflateInit2(&zs, 15 + 16) != Z_OK)
        return NULL;
    size_t cap = 1 << 20;
    unsigned char *out = malloc(cap);
    zs.next_in = (unsigned char *)(uintptr_t)data;
    zs.avail_in = (uInt)len;
    zs.next_out = out;
    zs.avail_out = (uInt)cap;
    int rc = out ? inflate(&zs, Z_FINISH) : Z_MEM_ERROR;
    *outlen = cap - zs.avail_out;
    inflateEnd(&zs);
    if (rc != Z_STREAM_END) {
        free(out);
        return NULL;
    }
    return out;
}

/* Reads a buffer; on success checks the model's invariants and frees it. Returns the
 * reader's result; err gets the message. */
static int try_read(const void *data, size_t len, char *err, size_t errlen)
{
    struct memprof_profile *p = (struct memprof_profile *)(uintptr_t)1;
    int rc = memprof__pprof_read(data, len, &p, err, errlen);
    if (rc == 0) {
        CHECK(p != NULL);
        CHECK(fixture_consistent(p, stderr) == 0);
        memprof__profile_free(p);
    } else {
        CHECK(p == NULL);
        CHECK(rc == -EINVAL || rc == -ENOMEM);
        if (errlen)
            CHECK(strlen(err) > 0 && strlen(err) < errlen);
    }
    return rc;
}

static void expect_reject(const void *data, size_t len, const char *substring, const char *what)
{
    char err[256];
    int rc = try_read(data, len, err, sizeof err);
    if (rc != -EINVAL) {
        fprintf(stderr, "%s: expected -EINVAL, got %d\n", what, rc);
        failures++;
    } else if (substring && !strstr(err, substring)) {
        fprintf(stderr, "%s: message \"%s\" lacks \"%s\"\n", what, err, substring);
        failures++;
    }
}

/* ---- the wire format ----------------------------------------------------------------------- */

static void test_varints(void)
{
    static const uint64_t values[] = {
        0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, (uint64_t)INT64_MAX, UINT64_MAX};
    struct memprof_pb_buf b = {0};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++)
        memprof__pb_raw_varint(&b, values[i]);
    CHECK(!b.oom);
    struct memprof_pb_reader r = {b.data, b.data + b.len};
    for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
        uint64_t v = 12345;
        CHECK(memprof__pb_read_varint(&r, &v) == 0 && v == values[i]);
    }
    CHECK(r.p == r.end);
    memprof__pb_buf_free(&b);

    /* UINT64_MAX takes 10 bytes; an 11th byte, or a 10th above 1, is an error. */
    static const uint8_t eleven[] = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff,
                                     0xff, 0xff, 0xff, 0x81, 0x00};
    static const uint8_t tenth_too_big[] = {0xff, 0xff, 0xff, 0xff, 0xff,
                                            0xff, 0xff, 0xff, 0xff, 0x02};
    static const uint8_t truncated[] = {0x80, 0x80};
    uint64_t v;
    r = (struct memprof_pb_reader){eleven, eleven + sizeof eleven};
    CHECK(memprof__pb_read_varint(&r, &v) == -1);
    r = (struct memprof_pb_reader){tenth_too_big, tenth_too_big + sizeof tenth_too_big};
    CHECK(memprof__pb_read_varint(&r, &v) == -1);
    r = (struct memprof_pb_reader){truncated, truncated + sizeof truncated};
    CHECK(memprof__pb_read_varint(&r, &v) == -1);
    r = (struct memprof_pb_reader){truncated, truncated};
    CHECK(memprof__pb_read_varint(&r, &v) == -1);
}

static void test_messages(void)
{
    /* A nested message longer than 127 bytes needs a two-byte length: end() moves it. */
    struct memprof_pb_buf b = {0};
    char text[300];
    memset(text, 'x', sizeof text);
    size_t outer = memprof__pb_begin(&b, 7);
    memprof__pb_uint(&b, 1, 42);
    size_t inner = memprof__pb_begin(&b, 2);
    memprof__pb_bytes(&b, 3, text, sizeof text);
    memprof__pb_end(&b, inner);
    memprof__pb_int(&b, 4, -1);
    memprof__pb_uint(&b, 5, 0); /* omitted */
    memprof__pb_end(&b, outer);
    CHECK(!b.oom);

    struct memprof_pb_reader r = {b.data, b.data + b.len};
    struct memprof_pb_field f;
    const char *why = NULL;
    CHECK(memprof__pb_next(&r, &f, &why) == 1 && f.number == 7 && f.wire == MEMPROF_PB_LEN);
    CHECK(memprof__pb_next(&r, &f, &why) == 0);
    struct memprof_pb_reader in = {f.data, f.data + f.len};
    CHECK(memprof__pb_next(&in, &f, &why) == 1 && f.number == 1 && f.value == 42);
    CHECK(memprof__pb_next(&in, &f, &why) == 1 && f.number == 2 && f.len == 3 + sizeof text);
    struct memprof_pb_reader in2 = {f.data, f.data + f.len};
    CHECK(memprof__pb_next(&in2, &f, &why) == 1 && f.number == 3 && f.len == sizeof text &&
          memcmp(f.data, text, sizeof text) == 0);
    CHECK(memprof__pb_next(&in, &f, &why) == 1 && f.number == 4 && f.value == UINT64_MAX);
    CHECK(memprof__pb_next(&in, &f, &why) == 0);
    memprof__pb_buf_free(&b);

    /* Fixed-width fields, packed and unpacked repeated varints. */
    static const uint8_t fixed[] = {0x09, 1, 2,    3,    4,    5,    6,    7,    8,    0x15, 1,
                                    0,    0, 0x80, 0x1a, 0x03, 0x01, 0x96, 0x01, 0x18, 0x05};
    r = (struct memprof_pb_reader){fixed, fixed + sizeof fixed};
    CHECK(memprof__pb_next(&r, &f, &why) == 1 && f.wire == MEMPROF_PB_I64 &&
          f.value == 0x0807060504030201ull);
    CHECK(memprof__pb_next(&r, &f, &why) == 1 && f.wire == MEMPROF_PB_I32 &&
          f.value == 0x80000001ull);
    size_t n = 0;
    uint64_t vals[4] = {0};
    CHECK(memprof__pb_next(&r, &f, &why) == 1 && f.number == 3);
    CHECK(memprof__pb_count_varints(&f, &n) == 0 && n == 2);
    memprof__pb_get_varints(&f, vals);
    CHECK(vals[0] == 1 && vals[1] == 150);
    CHECK(memprof__pb_next(&r, &f, &why) == 1 && f.number == 3 && f.wire == MEMPROF_PB_VARINT);
    CHECK(memprof__pb_count_varints(&f, &n) == 0 && n == 1);
    memprof__pb_get_varints(&f, vals);
    CHECK(vals[0] == 5);
    CHECK(memprof__pb_next(&r, &f, &why) == 0);

    /* Malformed fields. */
    static const struct {
        uint8_t bytes[12];
        size_t len;
    } bad[] = {
        {{0x00, 0x01}, 2},       /* field number 0 */
        {{0x0b}, 1},             /* group start (wire type 3) */
        {{0x0c}, 1},             /* group end (wire type 4) */
        {{0x0e}, 1},             /* wire type 6 */
        {{0x0a, 0x05, 1, 2}, 4}, /* length past the end */
        {{0x0a, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0x01}, 11}, /* huge */
        {{0x09, 1, 2, 3}, 4},                   /* truncated fixed64 */
        {{0x0d, 1, 2}, 3},                      /* truncated fixed32 */
        {{0x08}, 1},                            /* key without its varint */
        {{0x80}, 1},                            /* truncated key */
        {{0xf8, 0xff, 0xff, 0xff, 0x7f, 0}, 6}, /* field number 2^32 - 1 */
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        r = (struct memprof_pb_reader){bad[i].bytes, bad[i].bytes + bad[i].len};
        why = NULL;
        if (memprof__pb_next(&r, &f, &why) != -1 || !why) {
            fprintf(stderr, "malformed field %zu accepted\n", i);
            failures++;
        }
    }
    /* A packed payload cut in the middle of a varint. */
    f = (struct memprof_pb_field){
        .number = 1, .wire = MEMPROF_PB_LEN, .data = (const uint8_t *)"\x01\x80", .len = 2};
    CHECK(memprof__pb_count_varints(&f, &n) == -1);
    f.wire = MEMPROF_PB_I64;
    CHECK(memprof__pb_count_varints(&f, &n) == -1);
}

/* ---- round trips -------------------------------------------------------------------------- */

static void test_round_trip(const char *name, const struct memprof_profile *p)
{
    unsigned char *gz = NULL, *gz2 = NULL;
    size_t len = 0, len2 = 0;
    int rc = fixture_write(p, &gz, &len);
    CHECK(rc == 0);
    if (rc != 0)
        return;
    CHECK(len > 18 && gz[0] == 0x1f && gz[1] == 0x8b); /* gzip */

    char err[256] = "unset";
    struct memprof_profile *back = NULL;
    rc = memprof__pprof_read(gz, len, &back, err, sizeof err);
    if (rc != 0) {
        fprintf(stderr, "%s: reading back failed (%d): %s\n", name, rc, err);
        failures++;
        free(gz);
        return;
    }
    CHECK(err[0] == '\0');
    CHECK(fixture_consistent(back, stderr) == 0);
    int diffs = fixture_compare(p, back, stderr);
    if (diffs) {
        fprintf(stderr, "%s: %d difference(s) after the round trip\n", name, diffs);
        failures++;
    }

    /* Writing what was read gives the same file: nothing the writer uses is lost, and the
     * output is deterministic. */
    CHECK(fixture_write(back, &gz2, &len2) == 0);
    if (len2 != len || memcmp(gz, gz2, len) != 0) {
        fprintf(stderr, "%s: second write differs (%zu vs %zu bytes)\n", name, len, len2);
        failures++;
    }

    /* The raw protobuf is accepted as well. */
    size_t rawlen = 0;
    unsigned char *raw = gunzip_buf(gz, len, &rawlen);
    CHECK(raw != NULL);
    if (raw) {
        struct memprof_profile *again = NULL;
        CHECK(memprof__pprof_read(raw, rawlen, &again, err, sizeof err) == 0);
        if (again) {
            CHECK(fixture_compare(p, again, stderr) == 0);
            memprof__profile_free(again);
        }
        free(raw);
    }
    memprof__profile_free(back);
    free(gz);
    free(gz2);
}

static const struct memprof_pframe *find_function(const struct memprof_profile *p, const char *fn)
{
    for (size_t i = 0; i < p->nframes; i++)
        if (p->frames[i].function && strcmp(p->frames[i].function, fn) == 0)
            return &p->frames[i];
    return NULL;
}

static void test_engine_round_trip(void)
{
    struct memprof_profile *p = NULL;
    int rc = fixture_engine(&p);
    CHECK(rc == 0);
    if (rc != 0)
        return;
    /* The engine gives what the Go check relies on: named functions, file:line, and the
     * always-inline function as an inlined frame. */
    const struct memprof_pframe *leaf = find_function(p, "fixture_alloc_leaf");
    const struct memprof_pframe *inl = find_function(p, "fixture_inlined_fill");
    CHECK(leaf && leaf->file && strstr(leaf->file, "fixture.c") && leaf->line > 0);
    CHECK(find_function(p, "fixture_build_big") && find_function(p, "fixture_build_small"));
    if (inl)
        CHECK(inl->flags & MEMPROF_FRAME_INLINED);
    else
        fprintf(stderr, "note: no inlined frame resolved (libdw missing?)\n");
    test_round_trip("engine", p);
    memprof__profile_free(p);
}

static void test_empty_profile(void)
{
    struct memprof_profile empty = {.sampling_rate = 1};
    test_round_trip("empty", &empty);
}

/* The reader's order: stacks sorted by inuse_space, then alloc_space, then file order. */
static void test_reader_sorts(void)
{
    const struct memprof_profile *rich = fixture_rich();
    struct memprof_pstack stacks[16];
    size_t n = rich->nstacks;
    CHECK(n <= 16);
    /* Reverse the order before writing: the reader must restore it. */
    for (size_t i = 0; i < n; i++)
        stacks[i] = rich->stacks[n - 1 - i];
    struct memprof_profile rev = *rich;
    rev.stacks = stacks;
    unsigned char *gz = NULL;
    size_t len = 0;
    CHECK(fixture_write(&rev, &gz, &len) == 0);
    struct memprof_profile *back = NULL;
    char err[256];
    CHECK(memprof__pprof_read(gz, len, &back, err, sizeof err) == 0);
    if (back) {
        CHECK(fixture_compare(rich, back, stderr) == 0);
        memprof__profile_free(back);
    }
    free(gz);
}

/* Renders a profile with a text-producing writer into a malloc'ed string. */
static char *render(const struct memprof_profile *p, bool text)
{
    char *buf = NULL;
    size_t size = 0;
    FILE *f = open_memstream(&buf, &size);
    if (!f)
        return NULL;
    int rc = text ? memprof__export_text(p, f, MEMPROF_VIEW_LIVE, 50)
                  : memprof__export_collapsed(p, f, MEMPROF_VIEW_LIVE, false, true);
    fclose(f);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* What `memprof report` prints from a pprof file is what the live profile printed. */
/* Every view's numbers, the lifetimes, the leak statistic, the threads and the heap over
 * time come back from a pprof file as they were written (the export tests' views profile). */
static void test_views_round_trip(void)
{
    test_round_trip("views", &views_profile);
    /* Unused otherwise; referenced so the shared header's other profiles do not warn. */
    (void)basic_profile;
    (void)special_profile;
    (void)empty_profile;
}

/* A file whose comments no longer describe its samples (pprof -focus keeps the comments of
 * the profile it filtered): every figure comes from the samples, the variances too. */
static void test_totals_come_from_the_samples(void)
{
    struct memprof_profile stale = *fixture_rich();
    stale.inuse_space = 999999;
    stale.inuse_objects = 999;
    stale.live_samples = 99;
    stale.inuse_space_var = 1e15;
    unsigned char *gz = NULL;
    size_t len = 0;
    struct memprof_profile *back = NULL;
    char err[256];
    CHECK(fixture_write(&stale, &gz, &len) == 0);
    CHECK(memprof__pprof_read(gz, len, &back, err, sizeof err) == 0);
    if (back) {
        CHECK(back->inuse_space == fixture_rich()->inuse_space);
        CHECK(back->inuse_objects == fixture_rich()->inuse_objects);
        CHECK(back->live_samples == fixture_rich()->live_samples);
        double var = 0;
        for (size_t i = 0; i < back->nstacks; i++)
            var += back->stacks[i].inuse_space_var;
        CHECK(back->inuse_space_var == var);
    }
    memprof__profile_free(back);
    free(gz);
}

static void test_views_survive(void)
{
    unsigned char *gz = NULL;
    size_t len = 0;
    struct memprof_profile *back = NULL;
    char err[256];
    CHECK(fixture_write(fixture_rich(), &gz, &len) == 0);
    CHECK(memprof__pprof_read(gz, len, &back, err, sizeof err) == 0);
    for (int text = 0; back && text < 2; text++) {
        char *want = render(fixture_rich(), text), *got = render(back, text);
        CHECK(want && got && strlen(want) > 100);
        if (want && got && strcmp(want, got) != 0) {
            fprintf(stderr, "%s output differs after the round trip:\n--- live\n%s--- read\n%s",
                    text ? "text" : "collapsed", want, got);
            failures++;
        }
        free(want);
        free(got);
    }
    memprof__profile_free(back);
    free(gz);
}

static void test_writer_errors(void)
{
    CHECK(memprof__export_pprof(NULL, stdout) == -EINVAL);
    CHECK(memprof__export_pprof(fixture_rich(), NULL) == -EINVAL);
    FILE *full = fopen("/dev/full", "w");
    if (full) {
        setvbuf(full, NULL, _IONBF, 0);
        CHECK(memprof__export_pprof(fixture_rich(), full) == -EIO);
        fclose(full);
    }
    /* A frame index out of range is a bug in the caller, not a file with a dangling id. */
    static const uint32_t bad_frames[] = {0, 99};
    struct memprof_pstack st = {.frames = bad_frames, .nframes = 2};
    struct memprof_profile bad = *fixture_rich();
    bad.stacks = &st;
    bad.nstacks = 1;
    FILE *null = fopen("/dev/null", "w");
    if (null) {
        CHECK(memprof__export_pprof(&bad, null) == -EINVAL);
        fclose(null);
    }
}

/* ---- hand-crafted bad files ------------------------------------------------------------- */

/* A minimal memprof profile with one of everything; each field can be broken on its own. */
struct spec {
    uint64_t func_id, map_id, loc_id, loc_map_ref, line_func_ref, sample_loc_ref;
    uint64_t func_name; /* string index */
    int64_t inuse_space, line;
    int nvalues;
    const char *string0, *format, *inuse_unit;
    bool no_inuse_type, dup_func, wrong_wire;
    unsigned nlines, nrefs;
    int64_t live_label;
};

static struct spec base_spec(void)
{
    return (struct spec){.func_id = 1,
                         .map_id = 1,
                         .loc_id = 1,
                         .loc_map_ref = 1,
                         .line_func_ref = 1,
                         .sample_loc_ref = 1,
                         .func_name = 8,
                         .inuse_space = 4,
                         .line = 3,
                         .nvalues = 4,
                         .string0 = "",
                         .format = "memprof.format=1",
                         .inuse_unit = "bytes",
                         .nlines = 1,
                         .nrefs = 1,
                         .live_label = 1};
}

static void put_str(struct memprof_pb_buf *b, const char *s)
{
    memprof__pb_bytes(b, 6, s, strlen(s));
}

/* Strings: 0 "", 1 alloc_objects, 2 count, 3 alloc_space, 4 bytes, 5 inuse_objects,
 * 6 inuse_space, 7 <format>, 8 f, 9 file.c, 10 /bin/x, 11 live_samples, 12 <inuse unit>. */
static struct memprof_pb_buf build(const struct spec *s)
{
    struct memprof_pb_buf b = {0};
    const char *strs[] = {
        s->string0,   "alloc_objects", "count",       "alloc_space",
        "bytes",      "inuse_objects", "inuse_space", s->format ? s->format : "free text",
        "f",          "file.c",        "/bin/x",      "live_samples",
        s->inuse_unit};
    for (size_t i = 0; i < sizeof strs / sizeof *strs; i++)
        put_str(&b, strs[i]);
    const uint64_t types[4][2] = {{1, 2}, {3, 4}, {5, 2}, {6, 12}};
    for (int i = 0; i < (s->no_inuse_type ? 3 : 4); i++) {
        size_t m = memprof__pb_begin(&b, 1);
        memprof__pb_uint(&b, 1, types[i][0]);
        memprof__pb_uint(&b, 2, types[i][1]);
        memprof__pb_end(&b, m);
    }
    for (int k = 0; k < (s->dup_func ? 2 : 1); k++) {
        size_t m = memprof__pb_begin(&b, 5);
        memprof__pb_raw_varint(&b, 1 << 3); /* id, even when 0 */
        memprof__pb_raw_varint(&b, s->func_id);
        memprof__pb_uint(&b, 2, s->func_name);
        memprof__pb_uint(&b, 4, 9);
        memprof__pb_end(&b, m);
    }
    size_t m = memprof__pb_begin(&b, 3);
    memprof__pb_uint(&b, 1, s->map_id);
    memprof__pb_uint(&b, 2, 0x1000);
    memprof__pb_uint(&b, 3, 0x2000);
    memprof__pb_uint(&b, 5, 10);
    memprof__pb_end(&b, m);
    m = memprof__pb_begin(&b, 4);
    memprof__pb_uint(&b, 1, s->loc_id);
    memprof__pb_uint(&b, 2, s->loc_map_ref);
    memprof__pb_uint(&b, 3, 0x1100);
    for (unsigned i = 0; i < s->nlines; i++) {
        size_t l = memprof__pb_begin(&b, 4);
        memprof__pb_uint(&b, 1, s->line_func_ref);
        memprof__pb_int(&b, 2, s->line);
        memprof__pb_end(&b, l);
    }
    memprof__pb_end(&b, m);
    m = memprof__pb_begin(&b, 2);
    size_t packed = memprof__pb_begin(&b, 1);
    for (unsigned i = 0; i < s->nrefs; i++)
        memprof__pb_raw_varint(&b, s->sample_loc_ref);
    memprof__pb_end(&b, packed);
    packed = memprof__pb_begin(&b, 2);
    for (int i = 0; i < s->nvalues; i++)
        memprof__pb_raw_varint(&b, (uint64_t)(i == 3 ? s->inuse_space : i + 1));
    memprof__pb_end(&b, packed);
    size_t l = memprof__pb_begin(&b, 3);
    memprof__pb_uint(&b, 1, 11);
    memprof__pb_int(&b, 3, s->live_label);
    memprof__pb_end(&b, l);
    memprof__pb_end(&b, m);
    memprof__pb_uint(&b, 13, 7);    /* comment */
    memprof__pb_uint(&b, 12, 4096); /* period */
    if (s->wrong_wire)
        memprof__pb_bytes(&b, 12, "x", 1); /* period as a string */
    return b;
}

static void test_crafted(void)
{
    struct memprof_pb_buf b;
    char err[256];
    /* The base is valid. */
    struct spec s = base_spec();
    b = build(&s);
    struct memprof_profile *p = NULL;
    CHECK(memprof__pprof_read(b.data, b.len, &p, err, sizeof err) == 0);
    if (p) {
        CHECK(p->nstacks == 1 && p->nframes == 1 && p->sampling_rate == 4096);
        CHECK(p->stacks[0].inuse_space == 4 && p->stacks[0].live_samples == 1);
        CHECK(p->stacks[0].nframes == 1 && p->frames[0].function &&
              strcmp(p->frames[0].function, "f") == 0 && p->frames[0].line == 3);
        CHECK(p->frames[0].module && strcmp(p->frames[0].module, "/bin/x") == 0);
        memprof__profile_free(p);
    } else {
        fprintf(stderr, "base spec rejected: %s\n", err);
    }
    memprof__pb_buf_free(&b);

    static const struct {
        const char *name, *expect;
    } cases[] = {
        {"function id 0", "id 0"},
        {"duplicate function ids", "duplicate function id"},
        {"mapping id 0", "id 0"},
        {"location id 0", "id 0"},
        {"location -> missing mapping", "mapping id 7"},
        {"line -> missing function", "function id 7"},
        {"sample -> missing location", "location id 7"},
        {"string index out of range", "refers to string 99"},
        {"string_table[0] not empty", "string_table[0]"},
        {"negative sample value", "negative"},
        {"three values", "3 values for 4"},
        {"five values", "more values"},
        {"no memprof.format", "not written by memprof"},
        {"format 2", "format 2"},
        {"malformed format", "malformed comment"},
        {"no inuse_space type", "inuse_space"},
        {"inuse_space in count", "not in bytes"},
        {"negative line", "out of range"},
        {"1025 lines", "more than 1024 lines"},
        {"65537 locations in a stack", "more than 65536"},
        {"negative label", "negative value"},
        {"wrong wire type", "wire type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        s = base_spec();
        switch (i) {
        case 0:
            s.func_id = 0;
            break;
        case 1:
            s.dup_func = true;
            break;
        case 2:
            s.map_id = 0;
            s.loc_map_ref = 0;
            break;
        case 3:
            s.loc_id = 0;
            break;
        case 4:
            s.loc_map_ref = 7;
            break;
        case 5:
            s.line_func_ref = 7;
            break;
        case 6:
            s.sample_loc_ref = 7;
            break;
        case 7:
            s.func_name = 99;
            break;
        case 8:
            s.string0 = "x";
            break;
        case 9:
            s.inuse_space = -5;
            break;
        case 10:
            s.nvalues = 3;
            break;
        case 11:
            s.nvalues = 5;
            break;
        case 12:
            s.format = NULL;
            break;
        case 13:
            s.format = "memprof.format=2";
            break;
        case 14:
            s.format = "memprof.format=1x";
            break;
        case 15:
            s.no_inuse_type = true;
            break;
        case 16:
            s.inuse_unit = "count";
            break;
        case 17:
            s.line = -1;
            break;
        case 18:
            s.nlines = 1025;
            break;
        case 19:
            s.nrefs = 65537;
            break;
        case 20:
            s.live_label = -1;
            break;
        case 21:
            s.wrong_wire = true;
            break;
        }
        b = build(&s);
        CHECK(!b.oom);
        expect_reject(b.data, b.len, cases[i].expect, cases[i].name);
        /* And the same gzip-compressed. */
        size_t gzlen = 0;
        unsigned char *gz = gzip_buf(b.data, b.len, &gzlen);
        CHECK(gz != NULL);
        if (gz)
            expect_reject(gz, gzlen, cases[i].expect, cases[i].name);
        free(gz);
        memprof__pb_buf_free(&b);
    }

    /* A mapping without id, then one with id 0 explicitly encoded, is id 0 as well; and a
     * location whose stack expands past the frame cap through its lines. */
    s = base_spec();
    s.nlines = 1000;
    s.nrefs = 100; /* 100 * 1000 frames > 65536 */
    b = build(&s);
    expect_reject(b.data, b.len, "more than 65536 frames", "lines times locations");
    memprof__pb_buf_free(&b);
}

/* ---- corrupt files ---------------------------------------------------------------------- */

static void test_garbage(void)
{
    char err[256];
    expect_reject("", 0, "empty", "empty input");
    expect_reject(NULL, 0, "empty", "NULL empty input");
    expect_reject("\x1f", 1, NULL, "one byte");
    expect_reject("\x1f\x8b", 2, "gzip", "gzip magic only");
    expect_reject("hello, world: this is not a profile\n", 36, "not a pprof profile", "text");
    static const char html[] = "<html><body>nope</body></html>";
    expect_reject(html, sizeof html - 1, "not a pprof profile", "html");

    /* Random bytes, raw and behind a gzip magic. */
    unsigned char buf[600];
    for (int iter = 0; iter < 3000; iter++) {
        size_t len = (size_t)(rnd() % sizeof buf);
        for (size_t i = 0; i < len; i++)
            buf[i] = (unsigned char)rnd();
        if (iter & 1 && len >= 2) {
            buf[0] = 0x1f;
            buf[1] = 0x8b;
        }
        try_read(buf, len, err, sizeof err);
    }

    /* gzip of garbage: decompresses fine, then is no profile. */
    for (int iter = 0; iter < 200; iter++) {
        size_t len = 1 + (size_t)(rnd() % sizeof buf), gzlen;
        for (size_t i = 0; i < len; i++)
            buf[i] = (unsigned char)rnd();
        unsigned char *gz = gzip_buf(buf, len, &gzlen);
        CHECK(gz != NULL);
        if (gz)
            CHECK(try_read(gz, gzlen, err, sizeof err) == -EINVAL);
        free(gz);
    }
    static const char text[] = "this is text, compressed";
    size_t gzlen;
    unsigned char *gz = gzip_buf(text, sizeof text, &gzlen);
    if (gz)
        expect_reject(gz, gzlen, "after decompression", "gzip of text");
    free(gz);

    /* An error message fits any buffer, and no buffer is fine. */
    struct memprof_profile *p;
    char tiny[4] = "abc";
    CHECK(memprof__pprof_read("xyz", 3, &p, tiny, sizeof tiny) == -EINVAL && strlen(tiny) == 3);
    CHECK(memprof__pprof_read("xyz", 3, &p, NULL, 0) == -EINVAL);
    CHECK(memprof__pprof_read("xyz", 3, NULL, err, sizeof err) == -EINVAL);
}

static void test_corruptions(void)
{
    unsigned char *gz = NULL;
    size_t len = 0, rawlen = 0;
    char err[256];
    CHECK(fixture_write(fixture_rich(), &gz, &len) == 0);
    unsigned char *raw = gz ? gunzip_buf(gz, len, &rawlen) : NULL;
    CHECK(raw != NULL);
    if (!raw) {
        free(gz);
        return;
    }
    unsigned char *copy = malloc(len > rawlen ? len : rawlen);

    /* Every truncation of the gzip file is rejected (the trailer holds CRC and length). */
    for (size_t cut = 0; cut < len; cut++) {
        memcpy(copy, gz, cut);
        if (try_read(copy, cut, err, sizeof err) != -EINVAL) {
            fprintf(stderr, "gzip file cut at %zu of %zu accepted\n", cut, len);
            failures++;
        }
    }
    /* Trailing bytes after the gzip stream. */
    unsigned char *longer = malloc(len + 3);
    memcpy(longer, gz, len);
    memcpy(longer + len, "abc", 3);
    expect_reject(longer, len + 3, "trailing garbage", "trailing garbage");
    free(longer);

    /* Truncations of the raw message: a cut at a field boundary may still be a valid file
     * (the last fields are optional); either way nothing breaks. */
    int accepted = 0;
    for (size_t cut = 0; cut < rawlen; cut++) {
        memcpy(copy, raw, cut);
        accepted += try_read(copy, cut, err, sizeof err) == 0;
    }
    CHECK(accepted < (int)rawlen / 4);

    /* Random flips, 1 to 4 bytes at a time, in the raw message (exercising the parser) and
     * in the gzip file (mostly caught by the CRC). */
    int ok_raw = 0, ok_gz = 0;
    for (int iter = 0; iter < 20000; iter++) {
        memcpy(copy, raw, rawlen);
        int nflips = 1 + (int)(rnd() % 4);
        for (int k = 0; k < nflips; k++)
            copy[rnd() % rawlen] ^= (unsigned char)(1 + rnd() % 255);
        ok_raw += try_read(copy, rawlen, err, sizeof err) == 0;
    }
    for (int iter = 0; iter < 3000; iter++) {
        memcpy(copy, gz, len);
        copy[rnd() % len] ^= (unsigned char)(1 + rnd() % 255);
        ok_gz += try_read(copy, len, err, sizeof err) == 0;
    }
    printf("corruptions: %d of 20000 flipped raw files and %d of 3000 flipped gzip files "
           "still read as profiles; %d of %zu raw truncations\n",
           ok_raw, ok_gz, accepted, rawlen);
    free(copy);
    free(raw);
    free(gz);
}

static void test_bomb(void)
{
    /* A small file that inflates past the limit stops at the limit (lowered here: the real
     * one is 1 GiB). */
    size_t saved = memprof__pprof_read_limit;
    memprof__pprof_read_limit = 1 << 16;
    size_t n = 1 << 20, gzlen = 0;
    unsigned char *zeros = calloc(1, n);
    unsigned char *gz = zeros ? gzip_buf(zeros, n, &gzlen) : NULL;
    CHECK(gz != NULL && gzlen < 4096);
    if (gz)
        expect_reject(gz, gzlen, "limit", "decompression bomb");
    /* The same limit holds for uncompressed input. */
    expect_reject(zeros, n, "limit", "raw input over the limit");
    memprof__pprof_read_limit = saved;
    free(gz);
    free(zeros);
    CHECK(MEMPROF_PPROF_MAX_SIZE == (size_t)1 << 30);
}

static void test_concatenated_gzip(void)
{
    /* gzip allows several members; the profile split across two reads as one. */
    unsigned char *gz = NULL;
    size_t len = 0, rawlen = 0;
    CHECK(fixture_write(fixture_rich(), &gz, &len) == 0);
    unsigned char *raw = gz ? gunzip_buf(gz, len, &rawlen) : NULL;
    if (!raw) {
        free(gz);
        return;
    }
    size_t half = rawlen / 2, l1, l2;
    unsigned char *a = gzip_buf(raw, half, &l1), *b = gzip_buf(raw + half, rawlen - half, &l2);
    unsigned char *both = malloc(l1 + l2);
    if (a && b && both) {
        memcpy(both, a, l1);
        memcpy(both + l1, b, l2);
        struct memprof_profile *p = NULL;
        char err[256];
        CHECK(memprof__pprof_read(both, l1 + l2, &p, err, sizeof err) == 0);
        if (p) {
            CHECK(fixture_compare(fixture_rich(), p, stderr) == 0);
            memprof__profile_free(p);
        }
    }
    free(a);
    free(b);
    free(both);
    free(raw);
    free(gz);
}

/* Whether the gzip member's first deflate block is a stored one (BTYPE 00). */
static bool first_block_stored(const unsigned char *gz, size_t len)
{
    /* The writers' members have no optional header fields: 10 bytes of header. */
    return len > 11 && gz[3] == 0 && (gz[10] & 6) == 0;
}

/* A raw profile (addresses only) of a few KiB, what memprof run's processes write, is stored
 * without compression (no zlib loaded in every process of a build); a named one is
 * compressed. Both read back the same. */
static void test_small_raw_profiles_are_stored(void)
{
    const struct memprof_profile *rich = fixture_rich();
    struct memprof_profile raw = *rich;
    struct memprof_pframe *frames = malloc(rich->nframes * sizeof *frames);
    CHECK(frames != NULL);
    if (!frames)
        return;
    memcpy(frames, rich->frames, rich->nframes * sizeof *frames);
    for (size_t i = 0; i < rich->nframes; i++)
        if (frames[i].module && frames[i].address)
            frames[i].function = NULL, frames[i].file = NULL, frames[i].line = 0;
    raw.frames = frames;
    CHECK(memprof__profile_unsymbolized(&raw));
    CHECK(!memprof__profile_unsymbolized(rich));

    unsigned char *gz = NULL;
    size_t len = 0, msglen = 0;
    CHECK(fixture_write(&raw, &gz, &len) == 0);
    CHECK(first_block_stored(gz, len));
    unsigned char *msg = gz ? gunzip_buf(gz, len, &msglen) : NULL;
    CHECK(msg != NULL && len > msglen); /* stored: the message and the framing */
    free(msg);
    char err[256];
    struct memprof_profile *back = NULL;
    CHECK(gz && memprof__pprof_read(gz, len, &back, err, sizeof err) == 0);
    CHECK(back && back->nframes == raw.nframes && back->nstacks == raw.nstacks);
    memprof__profile_free(back);
    free(gz);

    CHECK(fixture_write(rich, &gz, &len) == 0);
    CHECK(!first_block_stored(gz, len));
    free(gz);
    free(frames);
}

int main(void)
{
    test_varints();
    test_messages();
    test_round_trip("rich", fixture_rich());
    test_small_raw_profiles_are_stored();
    test_views_round_trip();
    test_totals_come_from_the_samples();
    test_reader_sorts();
    test_views_survive();
    test_empty_profile();
    test_engine_round_trip();
    test_writer_errors();
    test_crafted();
    test_garbage();
    test_corruptions();
    test_bomb();
    test_concatenated_gzip();
    if (failures)
        fprintf(stderr, "%d check(s) failed\n", failures);
    return failures ? 1 : 0;
}
