/* SPDX-License-Identifier: MIT */
/*
 * Full native stacks on code built without frame pointers (-O2 -fomit-frame-pointer -g),
 * run under the preload plugin with the default (DWARF) unwinder: two call paths through
 * noinline functions and an always-inline wrapper must come out as collapsed stacks from
 * main through the inlined wrapper to the allocating function, in order, each with its
 * estimated bytes within 12 % of the truth; the snapshot API must give file:line for the
 * frames and mark the inlined one. Self-checking: exit 0 on success. Also built with clang,
 * which writes no .debug_aranges by default (the resolver must find the CU without them).
 */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include "../keep_frame.h"
#include "../check.h"

#define A_COUNT 1000
#define A_SIZE  40000 /* path a: 40 MB */
#define B_COUNT 3000
#define B_SIZE  5000 /* path b: 15 MB */

static void *blocks[A_COUNT + B_COUNT];
static int nblocks;

TEST_KEEP_FRAME static void *alloc_block(size_t n)
{
    void *p = malloc(n);
    memset(p, 0x5a, n);
    __asm__ volatile("" ::: "memory");
    return p;
}

static inline __attribute__((always_inline)) void fill_a(int count)
{
    for (int i = 0; i < count; i++)
        blocks[nblocks++] = alloc_block(A_SIZE);
}

TEST_KEEP_FRAME static void build_a(void)
{
    fill_a(A_COUNT);
    __asm__ volatile("" ::: "memory");
}

TEST_KEEP_FRAME static void build_b(void)
{
    for (int i = 0; i < B_COUNT; i++)
        blocks[nblocks++] = alloc_block(B_SIZE);
    __asm__ volatile("" ::: "memory");
}

/* The value of the collapsed line whose stack ends with `suffix` after ";main;". */
static double folded_value(const char *path, const char *suffix)
{
    FILE *f = fopen(path, "r");
    char line[8192];
    double total = 0;
    while (f && fgets(line, sizeof line, f)) {
        char *space = strrchr(line, ' ');
        if (!space)
            continue;
        *space = 0;
        const char *main_at = strstr(line, ";main;"); /* not __libc_start_main; */
        if (main_at && strcmp(main_at + 6, suffix) == 0)
            total += strtod(space + 1, NULL);
    }
    if (f)
        fclose(f);
    return total;
}

static void check_value(const char *path, const char *suffix, double truth)
{
    double v = folded_value(path, suffix);
    printf("main;%s: %.0f bytes (truth %.0f, %+.1f %%)\n", suffix, v, truth,
           100.0 * (v - truth) / truth);
    CHECK(v > truth * 0.88 && v < truth * 1.12);
}

/* In the stack of the largest site: alloc_block, fill_a (inlined), build_a, main, each
 * with this file and a line. */
static void check_frames(const memprof_snapshot *s)
{
    memprof_site_info site = {.size = sizeof site};
    CHECK(memprof_snapshot_site(s, 0, &site) == 0);
    int depth = memprof_snapshot_stack_depth(s, site.stack_id);
    CHECK(depth >= 4);
    const char *want[] = {"alloc_block", "fill_a", "build_a", "main"};
    int w = 0;
    for (int i = 0; i < depth && w < 4; i++) {
        memprof_frame f = {.size = sizeof f};
        CHECK(memprof_snapshot_frame(s, site.stack_id, (size_t)i, &f) == 0);
        if (!f.function || strcmp(f.function, want[w]) != 0)
            continue;
        printf("frame %d: %s at %s:%u%s\n", i, f.function, f.file ? f.file : "?", f.line,
               (f.flags & MEMPROF_FRAME_INLINED) ? " [inlined]" : "");
        CHECK(f.file && strstr(f.file, "stack_chain.c"));
        CHECK(f.line > 0);
        CHECK(!!(f.flags & MEMPROF_FRAME_INLINED) == (w == 1));
        CHECK(f.module && f.address);
        w++;
    }
    CHECK(w == 4); /* all four, in this order */
}

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s OUTPUT.folded (run under the preload plugin)\n", argv[0]);
        return 2;
    }
    memprof_stats st = {.size = sizeof st};
    if (memprof_get_stats(&st) != 0 || st.state != MEMPROF_STATE_ACTIVE) {
        fprintf(stderr, "not running under the preload plugin\n");
        return 77;
    }
    build_a();
    build_b();
    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0);
    CHECK(memprof_snapshot_write(s, argv[1], MEMPROF_FORMAT_COLLAPSED) == 0);
    check_value(argv[1], "build_a;fill_a;alloc_block", (double)A_COUNT * A_SIZE);
    check_value(argv[1], "build_b;alloc_block", (double)B_COUNT * B_SIZE);
    check_frames(s);
    memprof_free_snapshot(s);
    memprof_get_stats(&st);
    printf("unwinder %u, %lu samples, min depth %u, avg depth %.1f, confidence %lu permille\n",
           st.unwinder, (unsigned long)st.total_samples, st.stack_depth_min,
           st.total_samples ? (double)st.stack_depth_total / (double)st.total_samples : 0.0,
           (unsigned long)st.unwind_confidence_permille);
    CHECK(st.unwinder == MEMPROF_UNWIND_DWARF);
    CHECK(st.unwind_confidence_permille > 900);
    for (int i = 0; i < nblocks; i++)
        free(blocks[i]);
    return failures ? 1 : 0;
}
