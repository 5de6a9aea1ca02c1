/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of offline symbolization sessions (src/offline/offline.h), on this test
 * program's own file: a session names a function from the module's symbol table, and a
 * session started after another one ended names from the module as that session read it,
 * never from what the ended one kept (its symbol index holds names in the ended session's
 * ELF data until they are looked up: memprof__sym_module_gone()).
 */
#define _GNU_SOURCE
#include "config.h"

#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offline/offline.h"
#include "test.h"

__attribute__((noinline)) void offline_marker_first(void);
__attribute__((noinline)) void offline_marker_second(void);

__attribute__((noinline)) void offline_marker_first(void)
{
    __asm__ volatile("" ::: "memory");
}

__attribute__((noinline)) void offline_marker_second(void)
{
    __asm__ volatile("" ::: "memory");
}

static int main_program_bias(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    *(uintptr_t *)data = info->dlpi_addr; /* the first object is the program */
    return 1;
}

/* The function name the session gives for the start of function `fn` of this program. */
static const char *name_of(struct memprof_offline *o, void (*fn)(void))
{
    char path[4096];
    ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
    if (n <= 0)
        return NULL;
    path[n] = 0;
    uintptr_t bias = 0;
    dl_iterate_phdr(main_program_bias, &bias);
    struct memprof_sym_frame frames[8];
    uint64_t offset;
    /* A return address: the lookup is of pc - 1, here the function's first byte. */
    unsigned got =
        memprof__offline_frames(o, path, NULL, bias, (uintptr_t)fn + 1, frames, 8, &offset);
    return got ? frames[got - 1].function : NULL;
}

static void test_a_session_names_a_function_of_the_symbol_table(void)
{
    if (!memprof__offline_supported())
        SKIP("built without libdw");
    const struct memprof_offline_config c = {0};
    struct memprof_offline *o = memprof__offline_new(&c);
    CHECK(o != NULL);
    const char *name = name_of(o, offline_marker_first);
    EXPECT(name && strcmp(name, "offline_marker_first") == 0);
    memprof__offline_free(o);
}

static void test_a_new_session_does_not_use_what_an_ended_one_kept(void)
{
    if (!memprof__offline_supported())
        SKIP("built without libdw");
    const struct memprof_offline_config c = {0};
    struct memprof_offline *o = memprof__offline_new(&c);
    CHECK(o != NULL);
    const char *first = name_of(o, offline_marker_first);
    memprof__offline_free(o);
    /* Something else where the ended session's ELF data was, held while the next session
     * reads the file again (else it may read it into the same place, names and all). */
    void *filler[64];
    for (size_t i = 0; i < 64; i++)
        if ((filler[i] = malloc(4096 * (i + 1))) != NULL)
            memset(filler[i], 0x5a, 4096 * (i + 1));
    o = memprof__offline_new(&c);
    const char *second = o ? name_of(o, offline_marker_second) : NULL;
    memprof__offline_free(o);
    for (size_t i = 0; i < 64; i++)
        free(filler[i]);
    EXPECT(first && strcmp(first, "offline_marker_first") == 0);
    EXPECT(second && strcmp(second, "offline_marker_second") == 0);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_a_session_names_a_function_of_the_symbol_table),
        TEST_CASE(test_a_new_session_does_not_use_what_an_ended_one_kept),
    };
    return TEST_MAIN(cases, false);
}
