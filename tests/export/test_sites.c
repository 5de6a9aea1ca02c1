/* SPDX-License-Identifier: MIT */
/*
 * Tests of the sites' names (export/sites.c; doc/guide.md, "Site names") on profile-model
 * literals: a native site is named by the caller of its allocator wrappers (the default
 * list, the allocator's own internals inside them, and the user's MEMPROF_WRAPPERS); an
 * interpreted one by its innermost interpreter frame; the text, collapsed and HTML writers
 * show stacks from the site outward with the interpreter's C frames between two interpreter
 * frames folded, and every frame with MEMPROF_NATIVE=1; pprof-bound data is untouched. Also
 * the writers' two small fixes in this area: a profile with nothing live opens on its peak,
 * and a raw (MEMPROF_SYMBOLIZE=0) profile says so instead of "0 of N without symbols".
 * MEMPROF_GUIDE names doc/guide.md, which must list every default wrapper.
 */
#include <errno.h>

#include "export/export.h"
#include "export/profile.h"
#include "test.h"

/* ---- the profile ---------------------------------------------------------------------- */

#define RT MEMPROF_FRAME_RUNTIME
// clang-format off
static struct memprof_pframe frames[] = {
    /* 0 */ {.function = "xmalloc", .file = "wrap.c", .line = 4, .module = "/usr/bin/app", .address = 0x1010},
    /* 1 */ {.function = "build_table", .file = "app.c", .line = 7, .module = "/usr/bin/app", .address = 0x1020},
    /* 2 */ {.function = "main", .file = "app.c", .line = 11, .module = "/usr/bin/app", .address = 0x1030},
    /* 3 */ {.function = "my_alloc", .file = "app.c", .line = 6, .module = "/usr/bin/app", .address = 0x1040},
    /* 4 */ {.function = "build_other", .file = "app.c", .line = 8, .module = "/usr/bin/app", .address = 0x1050},
    /* 5: pymalloc's internals, inside its wrappers */
    {.function = "arena_map_get", .module = "/usr/bin/python3", .address = 0x2010, .flags = MEMPROF_FRAME_INLINED},
    /* 6 */ {.function = "new_arena", .module = "/usr/bin/python3", .address = 0x2010},
    /* 7 */ {.function = "_PyObject_Malloc", .module = "/usr/bin/python3", .address = 0x2020},
    /* 8 */ {.function = "list_resize", .module = "/usr/bin/python3", .address = 0x2030},
    /* 9: interpreter frames */
    {.function = "make_strings", .file = "app.py", .line = 2, .flags = RT},
    /* 10 */ {.function = "_PyEval_Vector", .module = "/usr/bin/python3", .address = 0x2040},
    /* 11 */ {.function = "method_vectorcall", .module = "/usr/bin/python3", .address = 0x2050},
    /* 12 */ {.function = "main", .file = "app.py", .line = 9, .flags = RT},
    /* 13 */ {.function = "Py_RunMain", .module = "/usr/bin/python3", .address = 0x2060},
    /* 14 */ {.function = "main", .module = "/usr/bin/python3", .address = 0x2070},
    /* 15: C++ */
    {.function = "operator new(unsigned long)", .system_name = "_Znwm", .module = "/usr/lib/libstdc++.so.6", .address = 0x3010},
    /* 16 */ {.function = "Parser::grow()", .file = "parser.cc", .line = 40, .module = "/usr/bin/app", .address = 0x1060},
    /* 17: a stack of wrappers only */
    {.function = "g_malloc", .module = "/usr/lib/libglib-2.0.so.0", .address = 0x4010},
    /* 18 */ {.function = "g_strdup", .module = "/usr/lib/libglib-2.0.so.0", .address = 0x4020},
};
// clang-format on

static const uint32_t s_wrapped[] = {0, 1, 2}, s_user[] = {0, 3, 4, 2},
                      s_py[] = {5, 6, 7, 8, 9, 10, 11, 12, 13, 14}, s_cxx[] = {15, 16, 2},
                      s_only[] = {17, 18};

#define MiB (1024 * 1024)
static struct memprof_pstack stacks[] = {
    {.frames = s_wrapped,
     .nframes = 3,
     .inuse_space = 8 * MiB,
     .alloc_space = 8 * MiB,
     .live_samples = 16,
     .alloc_samples = 16,
     .inuse_objects = 8,
     .alloc_objects = 8,
     .peak_space = 8 * MiB,
     .peak_samples = 16},
    {.frames = s_user,
     .nframes = 4,
     .inuse_space = 4 * MiB,
     .alloc_space = 4 * MiB,
     .live_samples = 8,
     .alloc_samples = 8,
     .inuse_objects = 4,
     .alloc_objects = 4,
     .peak_space = 4 * MiB,
     .peak_samples = 8},
    {.frames = s_py,
     .nframes = 10,
     .inuse_space = 2 * MiB,
     .alloc_space = 2 * MiB,
     .live_samples = 4,
     .alloc_samples = 4,
     .inuse_objects = 2,
     .alloc_objects = 2,
     .peak_space = 2 * MiB,
     .peak_samples = 4},
    {.frames = s_cxx,
     .nframes = 3,
     .inuse_space = MiB,
     .alloc_space = MiB,
     .live_samples = 2,
     .alloc_samples = 2,
     .inuse_objects = 1,
     .alloc_objects = 1,
     .peak_space = MiB,
     .peak_samples = 2},
    {.frames = s_only,
     .nframes = 2,
     .inuse_space = MiB / 2,
     .alloc_space = MiB / 2,
     .live_samples = 1,
     .alloc_samples = 1,
     .inuse_objects = 1,
     .alloc_objects = 1,
     .peak_space = MiB / 2,
     .peak_samples = 1},
};

static struct memprof_profile profile = {
    .sampling_rate = 524288,
    .frames = frames,
    .nframes = sizeof frames / sizeof *frames,
    .stacks = stacks,
    .nstacks = sizeof stacks / sizeof *stacks,
    .inuse_space = 15 * MiB + MiB / 2,
    .live_samples = 31,
    .peak_space = 15 * MiB + MiB / 2,
    .peak_samples = 31,
    .total_addresses = 19,
};

/* ---- helpers -------------------------------------------------------------------------- */

enum writer { TEXT, COLLAPSED, HTML, SPEEDSCOPE };

static char *write_with(const struct memprof_profile *p, enum writer w, enum memprof_view view)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return NULL;
    int rc = w == TEXT        ? memprof__export_text(p, f, view, 20)
             : w == COLLAPSED ? memprof__export_collapsed(p, f, view, false, false)
             : w == HTML      ? memprof__export_html(p, f, view)
                              : memprof__export_speedscope(p, f, view);
    fclose(f);
    if (rc != 0) {
        fprintf(stderr, "writer %d: %d\n", (int)w, rc);
        free(buf);
        return NULL;
    }
    return buf;
}

static const char *site_name(size_t stack)
{
    const struct memprof_pstack *st = &stacks[stack];
    return frames[st->frames[memprof__pstack_site(&profile, st)]].function;
}

static void clean_env(void)
{
    unsetenv("MEMPROF_WRAPPERS");
    unsetenv("MEMPROF_NATIVE");
}

/* ---- the site's frame ----------------------------------------------------------------- */

static void test_wrapper_is_skipped(void)
{
    clean_env();
    EXPECT(!strcmp(site_name(0), "build_table"));
    /* my_alloc is the user's own wrapper: not known without a pattern. */
    EXPECT(!strcmp(site_name(1), "my_alloc"));
    /* C++: operator new by its demangled name. */
    EXPECT(!strcmp(site_name(3), "Parser::grow()"));
    /* Only wrappers: the outermost. */
    EXPECT(!strcmp(site_name(4), "g_strdup"));
    EXPECT(memprof__pframe_is_wrapper(&frames[0]) && !memprof__pframe_is_wrapper(&frames[1]));
    /* Interpreter frames are never wrappers, whatever their name. */
    struct memprof_pframe rt = {.function = "xmalloc", .flags = RT};
    EXPECT(!memprof__pframe_is_wrapper(&rt));
    /* A mangled spelling matches too. */
    struct memprof_pframe mangled = {.function = "new", .system_name = "_Znwm", .address = 1};
    EXPECT(memprof__pframe_is_wrapper(&mangled));
}

static void test_user_patterns(void)
{
    clean_env();
    setenv("MEMPROF_WRAPPERS", " nothing_here , my_*", 1);
    EXPECT(!strcmp(site_name(1), "build_other"));
    EXPECT(!strcmp(site_name(0), "build_table")); /* the defaults still hold */
    setenv("MEMPROF_WRAPPERS", "build_*", 1);
    EXPECT(!strcmp(site_name(0), "main"));
    setenv("MEMPROF_WRAPPERS", "", 1);
    EXPECT(!strcmp(site_name(1), "my_alloc"));
    clean_env();
}

static void test_runtime_frame_names_interpreted_sites(void)
{
    clean_env();
    /* Not list_resize (an interpreter internal), not _PyObject_Malloc: the script's. */
    EXPECT(!strcmp(site_name(2), "make_strings"));
    EXPECT(frames[stacks[2].frames[memprof__pstack_site(&profile, &stacks[2])]].flags & RT);
}

static void test_a_runtime_method_without_a_file_is_named_by_its_caller(void)
{
    clean_env();
    /* Ruby's String#+ (a C method: an interpreter frame without a file) called by the
     * script's Object#hold_strings: the site is String#+'s stack, named by the script. */
    static struct memprof_pframe rb[] = {
        {.function = "malloc", .module = "/usr/lib/libc.so.6", .address = 0x5010},
        {.function = "String#+", .flags = RT},
        {.function = "Object#hold_strings", .file = "app.rb", .line = 2, .flags = RT},
        {.function = "<main>", .file = "app.rb", .line = 7, .flags = RT},
    };
    static const uint32_t s[] = {0, 1, 2, 3};
    struct memprof_pstack st = {.frames = s, .nframes = 4};
    struct memprof_profile p = {.frames = rb, .nframes = 4, .stacks = &st, .nstacks = 1};
    uint32_t site = memprof__pstack_site(&p, &st);
    EXPECT(!strcmp(rb[s[site]].function, "String#+"));
    EXPECT(!strcmp(rb[s[memprof__pstack_label(&p, &st, site)]].function, "Object#hold_strings"));
    /* A runtime frame with its file names its own site. */
    EXPECT_EQ(
        memprof__pstack_label(&profile, &stacks[2], memprof__pstack_site(&profile, &stacks[2])),
        memprof__pstack_site(&profile, &stacks[2]));
}

static void test_allocator_internals_inside_a_wrapper(void)
{
    clean_env();
    /* A native stack like the Python one without its interpreter frames: arena_map_get is
     * pymalloc's, called by its wrapper new_arena, so the site is list_resize. */
    static const uint32_t s[] = {5, 6, 7, 8, 13, 14};
    struct memprof_pstack st = {.frames = s, .nframes = 6};
    EXPECT(!strcmp(frames[s[memprof__pstack_site(&profile, &st)]].function, "list_resize"));
}

/* ---- the stacks as shown ---------------------------------------------------------------- */

static void test_presented_stacks_start_at_the_site_and_fold(void)
{
    clean_env();
    struct memprof_profile *q;
    CHECK_EQ(memprof__profile_presented(&profile, false, &q), 0);
    CHECK_EQ(q->nstacks, profile.nstacks);
    EXPECT_EQ(q->stacks[0].nframes, 2); /* build_table, main */
    EXPECT_EQ(q->stacks[0].frames[0], 1);
    /* make_strings, main (app.py), Py_RunMain, main: the eval loop's frames between the two
     * interpreter frames folded, those that started the interpreter kept. */
    static const uint32_t want_py[] = {9, 12, 13, 14};
    CHECK_EQ(q->stacks[2].nframes, 4);
    EXPECT(!memcmp(q->stacks[2].frames, want_py, sizeof want_py));
    /* The values are the stack's own. */
    EXPECT_EQ_U(q->stacks[2].inuse_space, 2 * MiB);
    memprof__profile_presented_free(q);
    /* --native: every frame. */
    CHECK_EQ(memprof__profile_presented(&profile, true, &q), 0);
    EXPECT_EQ(q->stacks[2].nframes, 10);
    memprof__profile_presented_free(q);
}

static void test_text_names_sites_and_folds(void)
{
    clean_env();
    char *t = write_with(&profile, TEXT, MEMPROF_VIEW_LIVE);
    CHECK(t);
    EXPECT_HAS(
        t, "samples  build_table\n        at build_table (app.c:7)\n        <- main (app.c:11)");
    EXPECT_HAS(t, "samples  make_strings\n        at make_strings (app.py:2)\n"
                  "        <- main (app.py:9)\n        <- Py_RunMain\n");
    EXPECT_HAS(t, "samples  Parser::grow()\n");
    EXPECT_LACKS(t, "xmalloc");
    EXPECT_LACKS(t, "_PyEval_Vector");
    EXPECT_LACKS(t, "list_resize");
    EXPECT_LACKS(t, "operator new");
    free(t);
    /* --native: the same names, every frame in the paths. */
    setenv("MEMPROF_NATIVE", "1", 1);
    t = write_with(&profile, TEXT, MEMPROF_VIEW_LIVE);
    CHECK(t);
    EXPECT_HAS(t, "samples  build_table\n        at xmalloc (wrap.c:4)\n        <- build_table");
    EXPECT_HAS(t, "samples  make_strings\n        at arena_map_get");
    EXPECT_HAS(t, "<- _PyEval_Vector");
    free(t);
    clean_env();
}

static void test_collapsed_leaf_is_the_site(void)
{
    clean_env();
    char *c = write_with(&profile, COLLAPSED, MEMPROF_VIEW_LIVE);
    CHECK(c);
    EXPECT_HAS(c, "main;build_table 8388608\n");
    EXPECT_HAS(c, "main;Py_RunMain;main;make_strings 2097152\n");
    EXPECT_HAS(c, "main;build_other;my_alloc 4194304\n");
    free(c);
    setenv("MEMPROF_WRAPPERS", "my_alloc", 1);
    c = write_with(&profile, COLLAPSED, MEMPROF_VIEW_LIVE);
    CHECK(c);
    EXPECT_HAS(c, "main;build_other 4194304\n");
    free(c);
    setenv("MEMPROF_NATIVE", "1", 1);
    c = write_with(&profile, COLLAPSED, MEMPROF_VIEW_LIVE);
    CHECK(c);
    EXPECT_HAS(c, "main;build_table;xmalloc 8388608\n");
    EXPECT_HAS(c, "method_vectorcall;_PyEval_Vector;make_strings;list_resize;_PyObject_Malloc;"
                  "new_arena;arena_map_get 2097152\n");
    free(c);
    clean_env();
}

/* The index of string `s` in the page's string table, or -1. */
static int html_string(const char *page, const char *s)
{
    const char *at = strstr(page, "\"strings\":[");
    const char *end = at ? strstr(at, "],\n\"frames\"") : NULL;
    if (!at || !end)
        return -1;
    char quoted[128];
    snprintf(quoted, sizeof quoted, "\"%s\"", s);
    int index = 0;
    for (const char *p = at + 11; p < end; p++) {
        if (*p == '\n' && p[-1] == ',')
            index++;
        if (!strncmp(p, quoted, strlen(quoted)))
            return index;
    }
    return -1;
}

static void test_html_shows_sites(void)
{
    clean_env();
    char *h = write_with(&profile, HTML, MEMPROF_VIEW_LIVE);
    CHECK(h);
    /* Every frame's name is in the table (the page's frames are the profile's)... */
    EXPECT(html_string(h, "make_strings") >= 0);
    EXPECT_HAS(h, "\"view\":\"live\"");
    EXPECT_HAS(h, "\"opened_on_peak\":0");
    EXPECT_HAS(h, "\"raw\":0");
    /* ...and the page's table groups by the site column. */
    EXPECT_HAS(h, "leaf = T[o + C.site]");
    free(h);
}

/* ---- the output fixes ------------------------------------------------------------------- */

static void test_nothing_live_opens_on_the_peak(void)
{
    clean_env();
    struct memprof_pstack freed[sizeof stacks / sizeof *stacks];
    memcpy(freed, stacks, sizeof freed);
    for (size_t i = 0; i < sizeof freed / sizeof *freed; i++)
        freed[i].inuse_space = freed[i].inuse_objects = freed[i].live_samples = 0;
    struct memprof_profile p = profile;
    p.stacks = freed;
    p.inuse_space = p.live_samples = 0;
    char *h = write_with(&p, HTML, MEMPROF_VIEW_LIVE);
    CHECK(h);
    EXPECT_HAS(h, "\"view\":\"peak\"");
    EXPECT_HAS(h, "\"opened_on_peak\":1");
    EXPECT_HAS(h, "so the page opened on the peak");
    free(h);
    /* Asked for another view, it opens there. */
    h = write_with(&p, HTML, MEMPROF_VIEW_ALLOC);
    CHECK(h);
    EXPECT_HAS(h, "\"view\":\"alloc\"");
    EXPECT_HAS(h, "\"opened_on_peak\":0");
    free(h);
    char *t = write_with(&p, TEXT, MEMPROF_VIEW_LIVE);
    CHECK(t);
    EXPECT_HAS(t, "Nothing sampled was live at the snapshot");
    EXPECT_HAS(t, "Top sites by estimated bytes live at the peak");
    EXPECT_HAS(t, "samples  build_table\n");
    EXPECT_LACKS(t, "(no live samples)");
    free(t);
    /* speedscope opens its first profile: the peak, the live one after it. */
    char *s = write_with(&p, SPEEDSCOPE, MEMPROF_VIEW_LIVE);
    CHECK(s);
    EXPECT_HAS(s, "\"profiles\":[\n{\"type\":\"sampled\",\"name\":\"peak\"");
    EXPECT_HAS(s, "\"name\":\"live\"");
    free(s);
    s = write_with(&profile, SPEEDSCOPE, MEMPROF_VIEW_LIVE);
    CHECK(s);
    EXPECT_HAS(s, "\"profiles\":[\n{\"type\":\"sampled\",\"name\":\"live\"");
    free(s);
}

static void test_little_live_opens_on_the_peak(void)
{
    clean_env();
    struct memprof_pstack some[sizeof stacks / sizeof *stacks];
    memcpy(some, stacks, sizeof some);
    struct memprof_profile p = profile;
    p.stacks = some;
    /* A 32nd of the peak live: the peak. */
    for (size_t i = 0; i < sizeof some / sizeof *some; i++)
        some[i].inuse_space = stacks[i].peak_space / 32;
    EXPECT(memprof__prefer_peak(&p));
    char *h = write_with(&p, HTML, MEMPROF_VIEW_LIVE);
    CHECK(h);
    EXPECT_HAS(h, "\"view\":\"peak\"");
    EXPECT_HAS(h, "Little was live at the snapshot");
    free(h);
    char *t = write_with(&p, TEXT, MEMPROF_VIEW_LIVE);
    CHECK(t);
    EXPECT_HAS(t, "Little was live at the snapshot (under 1/16 of the peak)");
    free(t);
    /* Half of it: the live view, as asked. */
    for (size_t i = 0; i < sizeof some / sizeof *some; i++)
        some[i].inuse_space = stacks[i].peak_space / 2;
    EXPECT(!memprof__prefer_peak(&p));
    h = write_with(&p, HTML, MEMPROF_VIEW_LIVE);
    CHECK(h);
    EXPECT_HAS(h, "\"view\":\"live\"");
    EXPECT_HAS(h, "\"opened_on_peak\":0");
    free(h);
    /* No peak recorded (an old or merged profile): the live view. */
    for (size_t i = 0; i < sizeof some / sizeof *some; i++)
        some[i].peak_space = 0;
    EXPECT(!memprof__prefer_peak(&p));
}

static void test_raw_profile_says_it_is_unsymbolized(void)
{
    static struct memprof_pframe raw_frames[] = {
        {.module = "/usr/bin/app", .address = 0x1010, .flags = MEMPROF_FRAME_UNRESOLVED},
        {.module = "/usr/bin/app", .address = 0x1020, .flags = MEMPROF_FRAME_UNRESOLVED},
    };
    static const uint32_t raw_stack[] = {0, 1};
    static struct memprof_pstack raw_stacks[] = {{.frames = raw_stack,
                                                  .nframes = 2,
                                                  .inuse_space = MiB,
                                                  .alloc_space = MiB,
                                                  .live_samples = 2,
                                                  .alloc_samples = 2}};
    struct memprof_profile p = {.sampling_rate = 524288,
                                .frames = raw_frames,
                                .nframes = 2,
                                .stacks = raw_stacks,
                                .nstacks = 1,
                                .inuse_space = MiB,
                                .live_samples = 2,
                                .total_addresses = 11};
    clean_env();
    EXPECT(memprof__profile_unsymbolized(&p));
    EXPECT(!memprof__profile_unsymbolized(&profile));
    char *t = write_with(&p, TEXT, MEMPROF_VIEW_LIVE);
    CHECK(t);
    EXPECT_HAS(t, "the profile is unsymbolized (written with MEMPROF_SYMBOLIZE=0): memprof "
                  "report --symbolize names its frames");
    EXPECT_LACKS(t, "without symbols");
    free(t);
    char *h = write_with(&p, HTML, MEMPROF_VIEW_LIVE);
    CHECK(h);
    EXPECT_HAS(h, "\"raw\":1");
    free(h);
}

/* ---- the documentation ---------------------------------------------------------------- */

static void test_guide_lists_every_default_wrapper(void)
{
    const char *path = getenv("MEMPROF_GUIDE");
    if (!path)
        SKIP("MEMPROF_GUIDE not set");
    FILE *f = fopen(path, "r");
    CHECK(f);
    static char guide[1 << 20];
    size_t n = fread(guide, 1, sizeof guide - 1, f);
    fclose(f);
    guide[n] = 0;
    const char *section = strstr(guide, "## Site names {#guide_sites}");
    CHECK(section);
    size_t count;
    const char *const *list = memprof__wrappers_default(&count);
    CHECK(count > 50);
    for (size_t i = 0; i < count; i++) {
        char quoted[128];
        snprintf(quoted, sizeof quoted, "`%s`", list[i]);
        if (!EXPECT(strstr(section, quoted)))
            fprintf(stderr, "  doc/guide.md, Site names, does not list %s\n", quoted);
    }
}

static const struct test_case cases[] = {
    TEST_CASE(test_wrapper_is_skipped),
    TEST_CASE(test_user_patterns),
    TEST_CASE(test_runtime_frame_names_interpreted_sites),
    TEST_CASE(test_a_runtime_method_without_a_file_is_named_by_its_caller),
    TEST_CASE(test_allocator_internals_inside_a_wrapper),
    TEST_CASE(test_presented_stacks_start_at_the_site_and_fold),
    TEST_CASE(test_text_names_sites_and_folds),
    TEST_CASE(test_collapsed_leaf_is_the_site),
    TEST_CASE(test_html_shows_sites),
    TEST_CASE(test_nothing_live_opens_on_the_peak),
    TEST_CASE(test_little_live_opens_on_the_peak),
    TEST_CASE(test_raw_profile_says_it_is_unsymbolized),
    TEST_CASE(test_guide_lists_every_default_wrapper),
};

int main(int argc, char **argv)
{
    return TEST_MAIN(cases, false);
}
