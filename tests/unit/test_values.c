/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the public format-name table and rate grammar (memprof.h, since 1.4), which
 * the bindings use instead of copies of their own: every format's name and extension round
 * trip, unknown names and values are refused, every extension MEMPROF_FORMAT_AUTO knows is
 * read by memprof_format_from_path(), memprof_is_allocator_function() knows the default
 * wrappers and the user's MEMPROF_WRAPPERS, and memprof_parse_rate() accepts exactly the
 * spellings `memprof run -r` and MEMPROF_RATE accept (suffixes with and without "i"/"B", any
 * case; 1 byte to 2^40) and leaves its output alone on failure.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "memprof/memprof.h"
#include "test.h"

static void test_every_format_round_trips_through_its_name(void)
{
    static const char *const names[] = {"pprof", "speedscope", "collapsed", "text", "html"};
    static const char *const exts[] = {".pb.gz", ".json", ".folded", ".txt", ".html"};
    int n = 0;
    for (int f = 1; memprof_format_name((memprof_format)f); f++, n++) {
        CHECK(n < 5);
        EXPECT(strcmp(memprof_format_name((memprof_format)f), names[n]) == 0);
        EXPECT(strcmp(memprof_format_extension((memprof_format)f), exts[n]) == 0);
        EXPECT_EQ(memprof_format_from_name(names[n]), f);
    }
    EXPECT_EQ(n, 5);
}

static void test_auto_and_unknown_formats_have_no_name(void)
{
    EXPECT(memprof_format_name(MEMPROF_FORMAT_AUTO) == NULL);
    EXPECT(memprof_format_extension(MEMPROF_FORMAT_AUTO) == NULL);
    EXPECT(memprof_format_name((memprof_format)99) == NULL);
    EXPECT(memprof_format_extension((memprof_format)-1) == NULL);
}

static void test_format_from_name_refuses_other_names(void)
{
    EXPECT_EQ(memprof_format_from_name(NULL), -EINVAL);
    EXPECT_EQ(memprof_format_from_name(""), -EINVAL);
    EXPECT_EQ(memprof_format_from_name("auto"), -EINVAL);
    EXPECT_EQ(memprof_format_from_name("PPROF"), -EINVAL);
    EXPECT_EQ(memprof_format_from_name("pprof "), -EINVAL);
    EXPECT_EQ(memprof_format_from_name("json"), -EINVAL);
}

static void test_format_from_path_reads_every_extension(void)
{
    EXPECT_EQ(memprof_format_from_path("a/heap.pb.gz"), MEMPROF_FORMAT_PPROF);
    EXPECT_EQ(memprof_format_from_path("heap.pprof"), MEMPROF_FORMAT_PPROF);
    EXPECT_EQ(memprof_format_from_path("heap.json"), MEMPROF_FORMAT_SPEEDSCOPE);
    EXPECT_EQ(memprof_format_from_path("heap.folded"), MEMPROF_FORMAT_COLLAPSED);
    EXPECT_EQ(memprof_format_from_path("heap.collapsed"), MEMPROF_FORMAT_COLLAPSED);
    EXPECT_EQ(memprof_format_from_path("heap.txt"), MEMPROF_FORMAT_TEXT);
    EXPECT_EQ(memprof_format_from_path("heap.html"), MEMPROF_FORMAT_HTML);
    EXPECT_EQ(memprof_format_from_path("heap.htm"), MEMPROF_FORMAT_HTML);
    EXPECT_EQ(memprof_format_from_path("heap.bin"), MEMPROF_FORMAT_AUTO);
    EXPECT_EQ(memprof_format_from_path(""), MEMPROF_FORMAT_AUTO);
    EXPECT_EQ(memprof_format_from_path(NULL), -EINVAL);
}

static void test_allocator_functions_are_the_writers_wrappers(void)
{
    EXPECT_EQ(memprof_is_allocator_function("malloc"), 1);
    EXPECT_EQ(memprof_is_allocator_function("operator new(unsigned long)"), 1);
    EXPECT_EQ(memprof_is_allocator_function("xmalloc"), 1);
    EXPECT_EQ(memprof_is_allocator_function("PyMem_Malloc"), 1);
    EXPECT_EQ(memprof_is_allocator_function("ruby_xmalloc"), 1);
    EXPECT_EQ(memprof_is_allocator_function("main"), 0);
    EXPECT_EQ(memprof_is_allocator_function("build_index"), 0);
    EXPECT_EQ(memprof_is_allocator_function(NULL), -EINVAL);
    EXPECT_EQ(memprof_is_allocator_function("my_pool_get"), 0);
    setenv("MEMPROF_WRAPPERS", "other, my_pool_*", 1);
    EXPECT_EQ(memprof_is_allocator_function("my_pool_get"), 1);
    unsetenv("MEMPROF_WRAPPERS");
}

static uint64_t rate(const char *text)
{
    uint64_t r = 12345;
    int rc = memprof_parse_rate(text, &r);
    if (rc != 0) {
        EXPECT_EQ_U(r, 12345); /* untouched on failure */
        return 0;
    }
    return r;
}

static void test_parse_rate_accepts_the_commands_spellings(void)
{
    EXPECT_EQ_U(rate("1"), 1);
    EXPECT_EQ_U(rate("524288"), 524288);
    EXPECT_EQ_U(rate("512K"), 512u << 10);
    EXPECT_EQ_U(rate("64k"), 64u << 10);
    EXPECT_EQ_U(rate("64KiB"), 64u << 10);
    EXPECT_EQ_U(rate("64Ki"), 64u << 10);
    EXPECT_EQ_U(rate("64kb"), 64u << 10);
    EXPECT_EQ_U(rate("1M"), 1u << 20);
    EXPECT_EQ_U(rate("2MiB"), 2u << 20);
    EXPECT_EQ_U(rate("1G"), 1u << 30);
    EXPECT_EQ_U(rate("1024G"), (uint64_t)1 << 40);
    EXPECT_EQ_U(rate("1099511627776"), (uint64_t)1 << 40);
}

static void test_parse_rate_refuses_the_rest(void)
{
    EXPECT_EQ_U(rate(""), 0);
    EXPECT_EQ_U(rate("0"), 0);
    EXPECT_EQ_U(rate("0K"), 0);
    EXPECT_EQ_U(rate("-1"), 0);
    EXPECT_EQ_U(rate(" 64K"), 0);
    EXPECT_EQ_U(rate("64K "), 0);
    EXPECT_EQ_U(rate("64T"), 0);
    EXPECT_EQ_U(rate("1.5M"), 0);
    EXPECT_EQ_U(rate("K"), 0);
    EXPECT_EQ_U(rate("1025G"), 0);
    EXPECT_EQ_U(rate("1099511627777"), 0);
    EXPECT_EQ_U(rate("99999999999999999999999"), 0);
    uint64_t r = 7;
    EXPECT_EQ(memprof_parse_rate(NULL, &r), -EINVAL);
    EXPECT_EQ(memprof_parse_rate("64K", NULL), -EINVAL);
    EXPECT_EQ_U(r, 7);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_every_format_round_trips_through_its_name),
        TEST_CASE(test_auto_and_unknown_formats_have_no_name),
        TEST_CASE(test_format_from_name_refuses_other_names),
        TEST_CASE(test_format_from_path_reads_every_extension),
        TEST_CASE(test_allocator_functions_are_the_writers_wrappers),
        TEST_CASE(test_parse_rate_accepts_the_commands_spellings),
        TEST_CASE(test_parse_rate_refuses_the_rest),
    };
    return TEST_MAIN(cases, false);
}
