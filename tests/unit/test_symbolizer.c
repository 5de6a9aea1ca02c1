/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the symbolizer module's entry point (src/resolve/symbolizer.h), linked in
 * here as in the command: a host of another build (another MEMPROF_SYMBOLIZER_ABI) or
 * without a string pool is refused, so a stale libmemprof-symbolize.so is never called
 * with tables it does not know; the table a matching host gets demangles, and has the libdw
 * lookups exactly when the build has libdw.
 */
#include "resolve/strpool.h"
#include "resolve/symbolizer.h"
#include "test.h"

static void test_host_of_another_build_is_refused(void)
{
    struct memprof__symbolizer_host host = {MEMPROF_SYMBOLIZER_ABI + 1, memprof__strpool_intern};
    EXPECT(memprof__symbolizer_open(&host) == NULL);
    host.abi = MEMPROF_SYMBOLIZER_ABI;
    host.intern = NULL;
    EXPECT(memprof__symbolizer_open(&host) == NULL);
    EXPECT(memprof__symbolizer_open(NULL) == NULL);
}

static void test_matching_host_gets_the_table(void)
{
    const struct memprof__symbolizer_host host = {MEMPROF_SYMBOLIZER_ABI, memprof__strpool_intern};
    const struct memprof__symbolizer *t = memprof__symbolizer_open(&host);
    EXPECT(t != NULL);
    if (!t)
        return;
    EXPECT(t->abi == MEMPROF_SYMBOLIZER_ABI);
    EXPECT(t->demangle && t->forget);
    EXPECT((t->process_frames != NULL) == (HAVE_LIBDW != 0));
    EXPECT((t->module_frames != NULL) == (HAVE_LIBDW != 0));
    char *name = t->demangle("_ZN3foo3barEv");
    EXPECT(name && strcmp(name, "foo::bar()") == 0);
    free(name);
    EXPECT(memprof__symbolizer_get() != NULL); /* the linked table, as the command gets it */
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_host_of_another_build_is_refused),
        TEST_CASE(test_matching_host_gets_the_table),
    };
    return TEST_MAIN(cases, false);
}
