/* SPDX-License-Identifier: MIT */
/*
 * A program whose symbols are stripped (the build strips a copy of it) must still profile
 * cleanly: its frames come out without a function, with the UNRESOLVED flag ("module+?" in
 * collapsed stacks) and are counted in the statistics, while frames in libc keep their names. Self-checking; run
 * under the preload plugin. It takes strcmp's address, so built without PIE its .dynsym
 * holds an undefined strcmp whose value is a PLT entry (a canonical PLT entry, as in the gcc
 * driver): no frame of the program may be named after such a symbol.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include "../keep_frame.h"
#include "../check.h"

TEST_KEEP_FRAME static void *hidden_alloc(size_t n)
{
    void *p = malloc(n);
    memset(p, 1, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

int main(int argc, char **argv)
{
    /* An absolute reference to strcmp in code: without PIE the linker answers it with a
     * canonical PLT entry (compilers load function addresses through the GOT otherwise). */
    int (*compare_names)(const char *, const char *) = strcmp;
#if defined(__x86_64__) && !defined(__PIE__)
    __asm__("movq $strcmp, %0" : "=r"(compare_names));
#endif
    if (argc > 1 && compare_names(argv[1], "") == 0)
        return 2;
    memprof_stats st = {.size = sizeof st};
    if (argc < 2 || memprof_get_stats(&st) != 0 || st.state != MEMPROF_STATE_ACTIVE)
        return 77;
    void *blocks[200];
    for (int i = 0; i < 200; i++)
        blocks[i] = hidden_alloc(100000);
    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0);
    memprof_site_info site = {.size = sizeof site};
    CHECK(memprof_snapshot_site(s, 0, &site) == 0);
    memprof_frame f = {.size = sizeof f};
    CHECK(memprof_snapshot_frame(s, site.stack_id, 0, &f) == 0);
    printf("leaf frame: %s in %s, flags %#x\n", f.function ? f.function : "(no symbol)",
           f.module ? f.module : "?", f.flags);
    CHECK(f.function == NULL);
    CHECK(f.flags & MEMPROF_FRAME_UNRESOLVED);
    CHECK(f.module && strstr(f.module, "stripped"));
    CHECK(memprof_snapshot_write(s, argv[1], MEMPROF_FORMAT_COLLAPSED) == 0);
    memprof_free_snapshot(s);
    /* The collapsed label of an unresolved frame is module+? (collapsed.c: merged per
     * module, so flame graphs merge). */
    FILE *in = fopen(argv[1], "r");
    char line[4096];
    int labelled = 0;
    while (in && fgets(line, sizeof line, in))
        labelled |= strstr(line, "stack_stripped") && strstr(line, "+?");
    if (in)
        fclose(in);
    CHECK(labelled);
    memprof_get_stats(&st);
    printf("%lu of %lu addresses without symbols\n", (unsigned long)st.unresolved_addresses,
           (unsigned long)st.resolved_addresses);
    CHECK(st.unresolved_addresses > 0);
    for (int i = 0; i < 200; i++)
        free(blocks[i]);
    return failures ? 1 : 0;
}
