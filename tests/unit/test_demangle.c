/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the demangler (src/resolve/demangle.h): C++ names with templates, const
 * members, clone suffixes and symbol versions; Rust legacy names (hash dropped, escapes
 * decoded) and v0 names (crate disambiguators dropped, generics); and names it must leave
 * to the caller: C names, names already readable, interpreter frames, invalid manglings.
 * The mangled strings were made by g++ and rustc or written by hand, and checked against
 * c++filt.
 */
#include "resolve/demangle.h"
#include "test.h"

/* Whether name demangles to exactly want (want NULL: is left alone). */
static bool demangles_to(const char *name, const char *want)
{
    char *got = memprof__demangle(name);
    bool ok = want ? got && strcmp(got, want) == 0 : got == NULL;
    if (!ok)
        fprintf(stderr, "  %s -> %s, want %s\n", name ? name : "(null)", got ? got : "(null)",
                want ? want : "(null)");
    free(got);
    return ok;
}

static void test_cxx_plain_and_nested(void)
{
    EXPECT(demangles_to("_ZN3foo3barEv", "foo::bar()"));
    EXPECT(demangles_to("_Z7computeid", "compute(int, double)"));
}

static void test_cxx_templates_keep_parameters_and_const(void)
{
    EXPECT(demangles_to("_ZNK2ns5TableISt6vectorIiSaIiEElE4findERKS4_i",
                        "ns::Table<std::vector<int, std::allocator<int> >, long>::find("
                        "ns::Table<std::vector<int, std::allocator<int> >, long> const&, int) "
                        "const"));
}

static void test_cxx_clone_suffix(void)
{
    EXPECT(demangles_to("_ZN2ns4growIiEEvPT_m.cold",
                        "void ns::grow<int>(int*, unsigned long) [clone .cold]"));
    EXPECT(demangles_to("_ZN3foo3barEv.isra.0", "foo::bar() [clone .isra.0]"));
}

static void test_symbol_version_is_dropped(void)
{
    EXPECT(demangles_to("_ZN3foo3barEv@@LIB_1.0", "foo::bar()"));
    EXPECT(demangles_to("_ZN3foo3barEv@LIB_0.9", "foo::bar()"));
}

static void test_rust_legacy_drops_hash(void)
{
    EXPECT(demangles_to("_ZN3foo3bar17h0123456789abcdefE", "foo::bar"));
    EXPECT(demangles_to("_ZN5hello4main28_$u7b$$u7b$closure$u7d$$u7d$17h1a2b3c4d5e6f7a8bE",
                        "hello::main::{{closure}}"));
    EXPECT(demangles_to("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$.."
                        "$u7b$$u7b$closure$u7d$$u7d$$GT$17h0123456789abcdefE",
                        "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>"));
}

static void test_rust_v0(void)
{
    EXPECT(demangles_to("_RNvCs1a2b3c_5hello4main", "hello::main"));
    EXPECT(demangles_to("_RINvNtCs1a2b3c_5hello5alloc4growmEB4_", "hello::alloc::grow::<u32>"));
    EXPECT(demangles_to("_RNvMCs6GmmlP4bgsG_1rINtB2_4WrapmE4growB2_", "<r::Wrap<u32>>::grow"));
}

static void test_plain_names_are_left_alone(void)
{
    EXPECT(demangles_to(NULL, NULL));
    EXPECT(demangles_to("", NULL));
    EXPECT(demangles_to("malloc", NULL));
    EXPECT(demangles_to("_start", NULL));
    EXPECT(demangles_to("foo::bar()", NULL));
    EXPECT(demangles_to("<module>", NULL));
    EXPECT(demangles_to("memcpy@@GLIBC_2.14", NULL));
}

static void test_invalid_manglings_are_left_alone(void)
{
    EXPECT(demangles_to("_Z", NULL));
    EXPECT(demangles_to("_ZN3foo", NULL));
    EXPECT(demangles_to("_Zjunk", NULL));
    EXPECT(demangles_to("_R", NULL));
    EXPECT(demangles_to("_RNvC", NULL));
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_cxx_plain_and_nested),
        TEST_CASE(test_cxx_templates_keep_parameters_and_const),
        TEST_CASE(test_cxx_clone_suffix),
        TEST_CASE(test_symbol_version_is_dropped),
        TEST_CASE(test_rust_legacy_drops_hash),
        TEST_CASE(test_rust_v0),
        TEST_CASE(test_plain_names_are_left_alone),
        TEST_CASE(test_invalid_manglings_are_left_alone),
    };
    return TEST_MAIN(cases, false);
}
