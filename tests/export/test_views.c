/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the pieces under the speedscope and HTML writers: the JSON string escaper
 * (exact output for quotes, control characters, HTML-sensitive characters and every kind of
 * malformed UTF-8, replaced the way Unicode recommends), the frame merging and root-first
 * paths both writers share, and the writers' error on a failing stream. The files
 * themselves are parsed and checked by check_views.py.
 */
#include <errno.h>

#include "export/export.h"
#include "export/interval.h"
#include "export/json.h"
#include "profiles.h"
#include "test.h"

/* The escaper's output for `s`, in a static buffer. */
static const char *esc(const char *s, bool html)
{
    static char out[512];
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    if (!f)
        return "(open_memstream failed)";
    memprof__json_string(f, s, html);
    fclose(f);
    snprintf(out, sizeof out, "%s", buf ? buf : "");
    free(buf);
    return out;
}

#define EXPECT_ESC(in, html, want)                                                                 \
    do {                                                                                           \
        const char *got_ = esc(in, html);                                                          \
        if (!EXPECT(strcmp(got_, want) == 0))                                                      \
            fprintf(stderr, "  escaped: %s\n  wanted:  %s\n", got_, want);                         \
    } while (0)

static void test_escape_ascii(void)
{
    EXPECT_ESC("abc", false, "\"abc\"");
    EXPECT_ESC("", false, "\"\"");
    EXPECT_ESC(NULL, false, "\"\"");
    EXPECT_ESC("a\"b\\c/d", false, "\"a\\\"b\\\\c/d\"");
    EXPECT_ESC("\n\t\r\b\f\x01\x1f\x7f", false, "\"\\n\\t\\r\\u0008\\u000c\\u0001\\u001f\\u007f\"");
    /* Only HTML mode escapes the characters that matter inside <script>. */
    EXPECT_ESC("</script><!--&-->", false, "\"</script><!--&-->\"");
    EXPECT_ESC("</script><!--&-->", true, "\"\\u003c/script\\u003e\\u003c!--\\u0026--\\u003e\"");
}

static void test_escape_utf8(void)
{
    /* Well-formed sequences of each length pass through. */
    EXPECT_ESC("na\xc3\xafve \xe5\x87\xbd \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf", false,
               "\"na\xc3\xafve \xe5\x87\xbd \xf0\x9f\x98\x80 \xf4\x8f\xbf\xbf\"");
    /* U+2028 and U+2029 are JSON but end lines in old JavaScript: escaped for HTML only. */
    EXPECT_ESC("a\xe2\x80\xa8"
               "b\xe2\x80\xa9",
               false,
               "\"a\xe2\x80\xa8"
               "b\xe2\x80\xa9\"");
    EXPECT_ESC("a\xe2\x80\xa8"
               "b\xe2\x80\xa9",
               true, "\"a\\u2028b\\u2029\"");
}

static void test_escape_malformed(void)
{
    /* One U+FFFD per maximal ill-formed subsequence (Unicode 15, section 3.9, U+FFFD
     * substitution of maximal subparts). */
    EXPECT_ESC("\xff", false, "\"\\ufffd\"");
    EXPECT_ESC("\x80x", false, "\"\\ufffdx\"");
    EXPECT_ESC("\xc3(", false, "\"\\ufffd(\"");
    EXPECT_ESC("\xe2\x82", false, "\"\\ufffd\"");                              /* cut at the end */
    EXPECT_ESC("\xf0\x9f\x98x", false, "\"\\ufffdx\"");                        /* cut before 'x' */
    EXPECT_ESC("\xc0\xaf", false, "\"\\ufffd\\ufffd\"");                       /* overlong '/' */
    EXPECT_ESC("\xe0\x80\x80", false, "\"\\ufffd\\ufffd\\ufffd\"");            /* overlong NUL */
    EXPECT_ESC("\xed\xa0\x80", false, "\"\\ufffd\\ufffd\\ufffd\"");            /* surrogate D800 */
    EXPECT_ESC("\xf4\x90\x80\x80", false, "\"\\ufffd\\ufffd\\ufffd\\ufffd\""); /* > 10FFFF */
    EXPECT_ESC("\xf5\xfe", true, "\"\\ufffd\\ufffd\"");
}

static void test_unique_frames(void)
{
    const struct memprof_profile *p = &basic_profile;
    struct memprof_uframes u;
    CHECK_EQ(memprof__uframes_build(p, &u), 0);
    /* 9 frames, two of them the same (function, file, line), plus both synthetic frames. */
    EXPECT_EQ(u.n, 10);
    EXPECT_EQ(u.of[0], u.of[3]);
    EXPECT(u.of[1] != u.of[8]); /* compute at two lines */
    EXPECT(u.truncated != UINT32_MAX && u.no_stack != UINT32_MAX && u.truncated != u.no_stack);
    char buf[256];
    const char *file;
    uint32_t line;
    EXPECT(strcmp(memprof__uframe_label(p, &u, u.of[4], buf, sizeof buf, &file, &line),
                  "libfoo.so.1+0x1234") == 0);
    EXPECT(file == NULL && line == 0);
    EXPECT(strcmp(memprof__uframe_label(p, &u, u.of[5], buf, sizeof buf, &file, &line),
                  "build_index") == 0);
    EXPECT(file && strcmp(file, "script.py") == 0 && line == 42);
    EXPECT(strcmp(memprof__uframe_label(p, &u, u.truncated, buf, sizeof buf, &file, &line),
                  MEMPROF_UFRAME_TRUNCATED_LABEL) == 0);

    uint32_t path[8];
    /* Root first. */
    CHECK_EQ(memprof__uframes_path(p, &u, &p->stacks[0], path), 3);
    EXPECT(path[0] == u.of[2] && path[1] == u.of[1] && path[2] == u.of[0]);
    /* Truncated: the synthetic root above the outermost captured frame. */
    CHECK_EQ(memprof__uframes_path(p, &u, &p->stacks[3], path), 3);
    EXPECT(path[0] == u.truncated && path[1] == u.of[7] && path[2] == u.of[0]);
    /* No stack. */
    CHECK_EQ(memprof__uframes_path(p, &u, &p->stacks[4], path), 1);
    EXPECT(path[0] == u.no_stack);
    memprof__uframes_free(&u);

    /* Without truncated or empty stacks there are no synthetic frames. */
    CHECK_EQ(memprof__uframes_build(&special_profile, &u), 0);
    EXPECT_EQ(u.n, special_profile.nframes);
    EXPECT(u.truncated == UINT32_MAX && u.no_stack == UINT32_MAX);
    memprof__uframes_free(&u);
    CHECK_EQ(memprof__uframes_build(&empty_profile, &u), 0);
    EXPECT_EQ(u.n, 0);
    memprof__uframes_free(&u);
}

/* A stream whose every write fails: both writers report -EIO. */
static void test_write_error(void)
{
    FILE *f = fopen("/dev/full", "w");
    if (!f)
        SKIP("no /dev/full");
    setvbuf(f, NULL, _IONBF, 0);
    EXPECT_EQ(memprof__export_speedscope(&basic_profile, f, MEMPROF_VIEW_LIVE), -EIO);
    fclose(f);
    f = fopen("/dev/full", "w");
    CHECK(f != NULL);
    setvbuf(f, NULL, _IONBF, 0);
    EXPECT_EQ(memprof__export_html(&basic_profile, f, MEMPROF_VIEW_LIVE), -EIO);
    fclose(f);
}

/* The writers are deterministic: the same profile gives the same bytes. */
static void test_deterministic(void)
{
    char *a = NULL, *b = NULL;
    size_t na = 0, nb = 0;
    for (int html = 0; html < 2; html++) {
        FILE *fa = open_memstream(&a, &na), *fb = open_memstream(&b, &nb);
        CHECK(fa && fb);
        int ra = html ? memprof__export_html(&views_profile, fa, MEMPROF_VIEW_PEAK)
                      : memprof__export_speedscope(&views_profile, fa, MEMPROF_VIEW_PEAK);
        int rb = html ? memprof__export_html(&views_profile, fb, MEMPROF_VIEW_PEAK)
                      : memprof__export_speedscope(&views_profile, fb, MEMPROF_VIEW_PEAK);
        fclose(fa);
        fclose(fb);
        EXPECT(ra == 0 && rb == 0);
        EXPECT(na == nb && na > 0 && memcmp(a, b, na) == 0);
        free(a);
        free(b);
        a = b = NULL;
    }
}

/* The page's intervals and marks are interval.h's, as the text report's are: the heap, the
 * peak and a site. */
static void test_html_intervals_come_from_interval_h(void)
{
    char *buf = NULL, want[256];
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    CHECK(memprof__export_html(&views_profile, f, MEMPROF_VIEW_LIVE) == 0);
    fclose(f);
    const struct memprof_profile *p = &views_profile;
    struct memprof_interval heap, peak, site;
    memprof__interval_at_rate((double)p->inuse_space, p->inuse_space_var, p->live_samples,
                              p->sampling_rate, &heap);
    memprof__interval_at_rate((double)p->peak_space, p->peak_space_var, p->peak_samples,
                              p->sampling_rate, &peak);
    snprintf(want, sizeof want,
             "\"heap\":{\"bytes\":%" PRIu64 ",\"lo\":%" PRIu64 ",\"hi\":%" PRIu64 ",\"low\":%d,",
             p->inuse_space, heap.lo, heap.hi, heap.low_information);
    if (!EXPECT(strstr(buf, want) != NULL))
        fprintf(stderr, "  missing %s\n", want);
    snprintf(want, sizeof want,
             "\"peak\":{\"bytes\":%" PRIu64 ",\"lo\":%" PRIu64 ",\"hi\":%" PRIu64 ",\"low\":%d,",
             p->peak_space, peak.lo, peak.hi, peak.low_information);
    if (!EXPECT(strstr(buf, want) != NULL))
        fprintf(stderr, "  missing %s\n", want);
    /* The first stack (grow_cache, live view columns: bytes, lo, hi). */
    const struct memprof_pstack *st = &p->stacks[0];
    memprof__interval_at_rate((double)st->inuse_space, st->inuse_space_var, st->live_samples,
                              p->sampling_rate, &site);
    snprintf(want, sizeof want, ",%" PRIu64 ",%" PRIu64 ",%" PRIu64 ",", st->inuse_space, site.lo,
             site.hi);
    if (!EXPECT(strstr(buf, want) != NULL))
        fprintf(stderr, "  missing %s\n", want);
    free(buf);
}

/* A view number out of range is refused before anything is written. */
static void test_unknown_view_is_refused(void)
{
    char *buf = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&buf, &len);
    CHECK(f != NULL);
    EXPECT_EQ(memprof__export_speedscope(&basic_profile, f, (enum memprof_view)MEMPROF_VIEW_COUNT),
              -EINVAL);
    EXPECT_EQ(memprof__export_html(&basic_profile, f, (enum memprof_view)MEMPROF_VIEW_COUNT),
              -EINVAL);
    fclose(f);
    EXPECT_EQ(len, 0);
    free(buf);
}

static const struct test_case cases[] = {
    TEST_CASE(test_escape_ascii),
    TEST_CASE(test_escape_utf8),
    TEST_CASE(test_escape_malformed),
    TEST_CASE(test_unique_frames),
    TEST_CASE(test_write_error),
    TEST_CASE(test_deterministic),
    TEST_CASE(test_unknown_view_is_refused),
    TEST_CASE(test_html_intervals_come_from_interval_h),
};

int main(int argc, char **argv)
{
    return TEST_MAIN(cases, false);
}
