/* SPDX-License-Identifier: MIT */
/*
 * Tests of the text and collapsed writers' views (doc/guide.md, "Views") on the known
 * profiles of profiles.h: the heading states the peak, the live heap and the bytes
 * allocated in total, never a bare "0 B"; each view ranks its own leader first, with
 * intervals where the view has a variance, the lifetimes of freed samples, the thread and a
 * mark on estimates from few samples; the leaks view ranks the suspects by rate and says
 * when there are none; the collapsed lines of a view sum to that view's total. The numbers
 * expected are those written into profiles.h, so a writer that reads the wrong field fails.
 */
#include <errno.h>

#include "export/export.h"
#include "export/interval.h"
#include "profiles.h"
#include "test.h"

/* What a writer wrote for a profile, as a string (freed by the caller). */
static char *text_of(const struct memprof_profile *p, enum memprof_view view, unsigned top)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int rc = memprof__export_text(p, f, view, top);
    fclose(f);
    if (rc != 0) {
        fprintf(stderr, "text writer: %d\n", rc);
        free(buf);
        return NULL;
    }
    return buf;
}

static char *collapsed_of(const struct memprof_profile *p, enum memprof_view view, bool objects)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int rc = memprof__export_collapsed(p, f, view, objects, false);
    fclose(f);
    if (rc != 0) {
        free(buf);
        return NULL;
    }
    return buf;
}

/* "(95% interval LO to HI" as the writers print an estimate at the profile's rate: the
 * interval of interval.h, the one every writer must use. */
static const char *interval_text(double est, double var, uint64_t samples, uint64_t rate, char *buf,
                                 size_t size)
{
    struct memprof_interval iv;
    char lo[32], hi[32];
    memprof__interval_at_rate(est, var, samples, rate, &iv);
    snprintf(buf, size, "(95%% interval %s to %s", memprof__export_bytes(iv.lo, lo, sizeof lo),
             memprof__export_bytes(iv.hi, hi, sizeof hi));
    return buf;
}

/* The line of rank `n` ("  1. ..."), copied into buf; "" when there is none. */
static const char *ranked_line(const char *text, unsigned n, char *buf, size_t size)
{
    char want[16];
    snprintf(want, sizeof want, "%3u. ", n);
    for (const char *line = text; line && *line;) {
        const char *end = strchr(line, '\n');
        size_t len = end ? (size_t)(end - line) : strlen(line);
        if (len >= 5 && strncmp(line, want, 5) == 0) {
            snprintf(buf, size, "%.*s", (int)len, line);
            return buf;
        }
        line = end ? end + 1 : NULL;
    }
    buf[0] = 0;
    return buf;
}

static bool ends_with(const char *s, const char *tail)
{
    size_t a = strlen(s), b = strlen(tail);
    return a >= b && strcmp(s + a - b, tail) == 0;
}

#define EXPECT_RANK(text, n, site)                                                                 \
    do {                                                                                           \
        char line_[512];                                                                           \
        ranked_line(text, n, line_, sizeof line_);                                                 \
        if (!EXPECT(ends_with(line_, "  " site)))                                                  \
            fprintf(stderr, "  rank %u is '%s', expected site %s\n", n, line_, site);              \
    } while (0)

static void test_heading_states_peak_live_and_total(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_LIVE, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "Estimated live heap: 11.6 MiB (95% interval ");
    EXPECT_HAS(t, "Peak: 24.0 MiB (95% interval ");
    EXPECT_HAS(t, ") at 3.25 s; live at the snapshot (10.0 s): 11.6 MiB; allocated in total: "
                  "442.5 MiB\n");
    free(t);
}

static void test_zero_live_heap_names_peak_and_allocated(void)
{
    struct memprof_profile p = views_profile;
    p.inuse_space = 0;
    p.inuse_objects = 0;
    p.live_samples = 0;
    p.inuse_space_var = 0;
    char *t = text_of(&p, MEMPROF_VIEW_LIVE, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "Estimated live heap: 0 B live at the snapshot; peak 24.0 MiB (95% interval ");
    EXPECT_HAS(t, ") at 3.25 s; allocated in total: 442.5 MiB\n");
    EXPECT_LACKS(t, "Estimated live heap: 0 B (");
    free(t);
}

static void test_profile_without_peak_says_so(void)
{
    char *t = text_of(&basic_profile, MEMPROF_VIEW_LIVE, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "Peak: not recorded in this profile; allocated in total: 14.5 KiB\n");
    free(t);
}

static void test_each_view_ranks_its_own_leader_first(void)
{
    static const struct {
        enum memprof_view view;
        const char *first;
    } cases[] = {
        {MEMPROF_VIEW_LIVE, "grow_cache"},      {MEMPROF_VIEW_PEAK, "build_report"},
        {MEMPROF_VIEW_ALLOC, "parse_request"},  {MEMPROF_VIEW_TEMPORARY, "parse_request"},
        {MEMPROF_VIEW_LEAKS, "leaky_register"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *t = text_of(&views_profile, cases[i].view, 20);
        CHECK(t != NULL);
        char line[512];
        ranked_line(t, 1, line, sizeof line);
        if (!EXPECT(ends_with(line, cases[i].first)))
            fprintf(stderr, "  view %s: first site line '%s'\n", memprof__view_name(cases[i].view),
                    line);
        free(t);
    }
}

static void test_peak_view_shows_intervals_and_the_peak_time(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_PEAK, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "Top sites by estimated bytes live at the peak (24.0 MiB at 3.25 s):\n");
    /* build_report: 20 MiB from 40 samples, sd 3.16 MB */
    char iv[64], want[160];
    snprintf(want, sizeof want, "  1. 20.0 MiB %s), ~200 allocations, 40 samples  build_report\n",
             interval_text(20.0 * 1048576, 1e13, 40, views_profile.sampling_rate, iv, sizeof iv));
    EXPECT_HAS(t, want);
    /* Stacks that held nothing at the peak are not ranked. */
    EXPECT_LACKS(t, "cache_insert\n");
    free(t);
}

static void test_alloc_view_has_no_interval(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_ALLOC, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "Top sites by estimated bytes allocated since sampling began:\n");
    EXPECT_HAS(t, "  1. 400.0 MiB, ~409600 allocations, 800 samples  parse_request\n");
    free(t);
}

static void test_temporary_view_names_its_threshold(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_TEMPORARY, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "temporary allocations (freed within 1 ms):\n");
    EXPECT_HAS(t, "  1. 390.0 MiB, ~399360 allocations, 780 samples  parse_request\n");
    EXPECT_LACKS(t, "  2. ");
    free(t);
}

static void test_leaks_view_ranks_suspects_by_rate(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_LEAKS, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "  1. leaking ~100.0 KiB/s over the window, 3.0 MiB of survivors, 12 samples  "
                  "leaky_register\n");
    EXPECT_HAS(t, "  2. leaking ~10.0 KiB/s over the window (few samples), 1.0 MiB of survivors, "
                  "2 samples  cache_insert\n");
    /* grow_cache's second stack has a leak statistic but is no suspect. */
    EXPECT_LACKS(t, "  3. ");
    free(t);
}

static void test_leaks_view_without_suspects_says_so(void)
{
    char *t = text_of(&basic_profile, MEMPROF_VIEW_LEAKS, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "  No leak suspects: ");
    EXPECT_LACKS(t, "  1. ");
    free(t);
}

static void test_sites_show_lifetimes_and_thread(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_ALLOC, 20);
    CHECK(t != NULL);
    /* parse_request: 50 freed under 64 us, 30 more under 256 us, 10 under 1.02 ms, 5 more. */
    EXPECT_HAS(t, "parse_request\n        freed after: p50 < 64 us, p90 < 1.02 ms; thread "
                  "worker-1 (tid 1002)\n        at parse_request (/src/svc/parse.c:30)\n");
    /* grow_cache: freed after the last bucket's edge. */
    EXPECT_HAS(t, "freed after: p50 >= 268 s, p90 >= 268 s; thread main (tid 1001)\n");
    /* A thread without a name is shown by its id; a site that freed nothing has no lifetimes. */
    EXPECT_HAS(t, "leaky_register\n        thread tid 1003\n");
    free(t);
}

static void test_few_samples_are_marked(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_LIVE, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, ", few samples), ~4 allocations, 2 samples  tiny_site\n");
    free(t);
}

static void test_threads_section_sums_the_view(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_LIVE, 20);
    CHECK(t != NULL);
    /* main: 6 MiB + 512 KiB + 1 MiB; tid 1003: 3 MiB; worker-1: 1 MiB + 64 KiB; 4 KiB unknown */
    EXPECT_HAS(t, "\nThreads (estimated bytes, live view):\n"
                  "     7.5 MiB  main (tid 1001)\n"
                  "     3.0 MiB  tid 1003\n"
                  "     1.1 MiB  worker-1 (tid 1002)\n"
                  "     4.0 KiB  (thread not known)\n");
    free(t);
    /* A profile that knows no threads has no such section. */
    t = text_of(&basic_profile, MEMPROF_VIEW_LIVE, 20);
    CHECK(t != NULL);
    EXPECT_LACKS(t, "Threads");
    free(t);
}

static void test_a_stack_of_two_threads_is_one_site(void)
{
    /* basic: stacks a and g have the same frames (5000 + 100 bytes allocated). */
    char *t = text_of(&basic_profile, MEMPROF_VIEW_ALLOC, 20);
    CHECK(t != NULL);
    EXPECT_HAS(t, "  2. 5.0 KiB, ~51 allocations, 21 samples  leaf_alloc\n");
    EXPECT_RANK(t, 5, "[no stack: stack table full]");
    EXPECT_LACKS(t, "  6. ");
    free(t);
    t = collapsed_of(&basic_profile, MEMPROF_VIEW_ALLOC, false);
    CHECK(t != NULL);
    EXPECT_HAS(t, "main;compute;leaf_alloc 5100\n");
    free(t);
}

static void test_top_limits_the_sites(void)
{
    char *t = text_of(&views_profile, MEMPROF_VIEW_LIVE, 2);
    CHECK(t != NULL);
    EXPECT_RANK(t, 2, "leaky_register");
    EXPECT_LACKS(t, "  3. ");
    free(t);
}

/* The sum of a view's collapsed values, and its number of lines. */
static uint64_t collapsed_sum(const char *text, unsigned *lines)
{
    uint64_t sum = 0;
    *lines = 0;
    for (const char *line = text; *line;) {
        const char *end = strchr(line, '\n');
        const char *sp = line;
        for (const char *c = line; c < end; c++)
            if (*c == ' ')
                sp = c;
        sum += strtoull(sp + 1, NULL, 10);
        (*lines)++;
        line = end + 1;
    }
    return sum;
}

static void test_collapsed_view_sums_to_view_total(void)
{
    static const struct {
        enum memprof_view view;
        uint64_t total;
        unsigned lines;
    } cases[] = {
        {MEMPROF_VIEW_LIVE, 11 * 1048576ull + 580 * 1024, 7},
        {MEMPROF_VIEW_ALLOC, 442 * 1048576ull + 516 * 1024, 7},
        {MEMPROF_VIEW_PEAK, 24 * 1048576ull, 4},
        {MEMPROF_VIEW_TEMPORARY, 390 * 1048576ull, 1},
        {MEMPROF_VIEW_LEAKS, 4 * 1048576ull, 2},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        char *t = collapsed_of(&views_profile, cases[i].view, false);
        CHECK(t != NULL);
        unsigned lines;
        uint64_t sum = collapsed_sum(t, &lines);
        if (!EXPECT(sum == cases[i].total && lines == cases[i].lines))
            fprintf(stderr, "  view %s: %u lines summing to %" PRIu64 "\n%s",
                    memprof__view_name(cases[i].view), lines, sum, t);
        free(t);
    }
}

static void test_collapsed_counts_objects_of_the_view(void)
{
    char *t = collapsed_of(&views_profile, MEMPROF_VIEW_PEAK, true);
    CHECK(t != NULL);
    unsigned lines;
    EXPECT_EQ_U(collapsed_sum(t, &lines), 2448);
    EXPECT_HAS(t, "main;handle;build_report 200\n");
    free(t);
    /* The leaks view has bytes only. */
    t = collapsed_of(&views_profile, MEMPROF_VIEW_LEAKS, true);
    CHECK(t != NULL);
    EXPECT(t[0] == 0);
    free(t);
}

static void test_empty_profile_says_nothing_was_sampled(void)
{
    char *t = text_of(&empty_profile, MEMPROF_VIEW_PEAK, 20);
    CHECK(t != NULL);
    /* Even without a sample the heap may hold what left none (interval.h). */
    char iv[64], want[160];
    snprintf(want, sizeof want,
             "Estimated live heap: 0 B %s), ~0 allocations, from 0 live samples\n",
             interval_text(0, 0, 0, empty_profile.sampling_rate, iv, sizeof iv));
    EXPECT_HAS(t, want);
    EXPECT_LACKS(t, "Peak");
    EXPECT_HAS(t, "  (no samples in the peak view)\n");
    free(t);
}

static void test_collapsed_keeps_one_line_per_stack_whatever_the_names(void)
{
    /* Newlines and semicolons in names would split a line or a frame. */
    char *t = collapsed_of(&special_profile, MEMPROF_VIEW_LIVE, false);
    CHECK(t != NULL);
    unsigned lines;
    EXPECT_EQ_U(collapsed_sum(t, &lines), 96);
    EXPECT_EQ(lines, 2);
    free(t);
}

/* Frames without symbols: two stacks through a stripped libfoo at different addresses (two
 * frames deep, then one), one through libbar, all from main to the allocating leaf. */
static struct memprof_pframe stripped_frames[] = {
    /* 0 */ {.function = "leaf_alloc", .address = 0x401000},
    /* 1 */
    {.module = "/usr/lib/libfoo.so.1", .address = 0x7f0000001010, .load_bias = 0x7f0000000000},
    /* 2 */
    {.module = "/usr/lib/libfoo.so.1", .address = 0x7f0000002020, .load_bias = 0x7f0000000000},
    /* 3 */
    {.module = "/usr/lib/libfoo.so.1", .address = 0x7f0000003030, .load_bias = 0x7f0000000000},
    /* 4 */
    {.module = "/usr/lib/libbar.so", .address = 0x7e0000000040, .load_bias = 0x7e0000000000},
    /* 5 */ {.function = "main", .address = 0x400100},
};

static const uint32_t stripped_a[] = {0, 1, 2, 5}, stripped_b[] = {0, 3, 5},
                      stripped_c[] = {0, 4, 5};

static struct memprof_pstack stripped_stacks[] = {
    {.frames = stripped_a, .nframes = 4, .inuse_objects = 1, .inuse_space = 400, .live_samples = 1},
    {.frames = stripped_b, .nframes = 3, .inuse_objects = 1, .inuse_space = 200, .live_samples = 1},
    {.frames = stripped_c, .nframes = 3, .inuse_objects = 1, .inuse_space = 100, .live_samples = 1},
};

static struct memprof_profile stripped_profile = {
    .sampling_rate = 4096,
    .frames = stripped_frames,
    .nframes = sizeof stripped_frames / sizeof *stripped_frames,
    .stacks = stripped_stacks,
    .nstacks = 3,
    .inuse_space = 700,
    .inuse_objects = 3,
    .live_samples = 3,
};

static void test_collapsed_merges_a_modules_unresolved_frames(void)
{
    char *t = collapsed_of(&stripped_profile, MEMPROF_VIEW_LIVE, false);
    CHECK(t != NULL);
    EXPECT_EQ(strcmp(t, "main;libfoo.so.1+?;leaf_alloc 600\n"
                        "main;libbar.so+?;leaf_alloc 100\n"),
              0);
    free(t);
}

static void test_collapsed_keeps_addresses_when_asked(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    EXPECT_EQ(memprof__export_collapsed(&stripped_profile, f, MEMPROF_VIEW_LIVE, false, true), 0);
    fclose(f);
    EXPECT_EQ(strcmp(buf, "main;libfoo.so.1+0x2020;libfoo.so.1+0x1010;leaf_alloc 400\n"
                          "main;libfoo.so.1+0x3030;leaf_alloc 200\n"
                          "main;libbar.so+0x40;leaf_alloc 100\n"),
              0);
    free(buf);
}

/* A profile where a quarter or more of the code addresses have no name says which modules
 * they are in and how to get names (text; the HTML page's data has the same modules); one
 * with few such addresses says nothing more. */
static void test_summary_names_the_modules_without_symbols(void)
{
    /* The named frames in a module too, as a symbolized profile has them (a profile whose
     * native frames all lack names is a raw one, which says so instead). */
    struct memprof_pframe frames[sizeof stripped_frames / sizeof *stripped_frames];
    memcpy(frames, stripped_frames, sizeof frames);
    frames[0].module = frames[5].module = "/usr/bin/prog";
    struct memprof_profile p = stripped_profile;
    p.frames = frames;
    p.unresolved_addresses = 4;
    p.total_addresses = 6;
    char *t = text_of(&p, MEMPROF_VIEW_LIVE, 5);
    CHECK(t != NULL);
    EXPECT_HAS(t, "4 of 6 code addresses without symbols\n"
                  "Note: the frames without a name are in libfoo.so.1, libbar.so (no symbols or "
                  "debug information found). Install their debug files (Debian: the -dbgsym "
                  "packages) and profile again, or name a pprof file later: memprof report "
                  "--symbolize --debug-dir DIR FILE.\n");
    free(t);
    /* The HTML page gets the same modules, for the same note under its health line. */
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    EXPECT_EQ(memprof__export_html(&p, f, MEMPROF_VIEW_LIVE), 0);
    fclose(f);
    EXPECT_HAS(buf, "\"unnamed\":[\"libfoo.so.1\",\"libbar.so\"],\"unnamed_more\":0}");
    free(buf);
    /* Four modules: the first three and "and others". */
    frames[2].module = "/opt/libbaz.so";
    frames[3].module = "/opt/libqux.so";
    t = text_of(&p, MEMPROF_VIEW_LIVE, 5);
    CHECK(t != NULL);
    EXPECT_HAS(t, "are in libfoo.so.1, libbaz.so, libqux.so and others (");
    free(t);
    p.total_addresses = 17; /* 4 of 17: under a quarter */
    t = text_of(&p, MEMPROF_VIEW_LIVE, 5);
    CHECK(t != NULL);
    EXPECT_HAS(t, "4 of 17 code addresses without symbols\n");
    EXPECT_LACKS(t, "Note: the frames without a name");
    free(t);
}

static void test_value_names_a_view_and_unit(void)
{
    bool objects;
    EXPECT_EQ(memprof__value_view(MEMPROF_VALUE_INUSE_SPACE, &objects), MEMPROF_VIEW_LIVE);
    EXPECT(!objects);
    EXPECT_EQ(memprof__value_view(MEMPROF_VALUE_ALLOC_OBJECTS, &objects), MEMPROF_VIEW_ALLOC);
    EXPECT(objects);
}

static void test_text_write_error_and_unknown_view(void)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        SKIP("no /dev/full");
    setvbuf(f, NULL, _IONBF, 0);
    EXPECT_EQ(memprof__export_text(&views_profile, f, MEMPROF_VIEW_PEAK, 20), -EIO);
    EXPECT_EQ(memprof__export_collapsed(&views_profile, f, MEMPROF_VIEW_PEAK, false, false), -EIO);
    EXPECT_EQ(memprof__export_text(&views_profile, f, (enum memprof_view)MEMPROF_VIEW_COUNT, 20),
              -EINVAL);
    fclose(f);
}

static const struct test_case cases[] = {
    TEST_CASE(test_heading_states_peak_live_and_total),
    TEST_CASE(test_zero_live_heap_names_peak_and_allocated),
    TEST_CASE(test_profile_without_peak_says_so),
    TEST_CASE(test_each_view_ranks_its_own_leader_first),
    TEST_CASE(test_peak_view_shows_intervals_and_the_peak_time),
    TEST_CASE(test_alloc_view_has_no_interval),
    TEST_CASE(test_temporary_view_names_its_threshold),
    TEST_CASE(test_leaks_view_ranks_suspects_by_rate),
    TEST_CASE(test_leaks_view_without_suspects_says_so),
    TEST_CASE(test_sites_show_lifetimes_and_thread),
    TEST_CASE(test_few_samples_are_marked),
    TEST_CASE(test_threads_section_sums_the_view),
    TEST_CASE(test_top_limits_the_sites),
    TEST_CASE(test_a_stack_of_two_threads_is_one_site),
    TEST_CASE(test_collapsed_view_sums_to_view_total),
    TEST_CASE(test_collapsed_counts_objects_of_the_view),
    TEST_CASE(test_collapsed_merges_a_modules_unresolved_frames),
    TEST_CASE(test_collapsed_keeps_addresses_when_asked),
    TEST_CASE(test_empty_profile_says_nothing_was_sampled),
    TEST_CASE(test_collapsed_keeps_one_line_per_stack_whatever_the_names),
    TEST_CASE(test_summary_names_the_modules_without_symbols),
    TEST_CASE(test_value_names_a_view_and_unit),
    TEST_CASE(test_text_write_error_and_unknown_view),
};

int main(int argc, char **argv)
{
    return TEST_MAIN(cases, false);
}
