/* SPDX-License-Identifier: MIT */
/*
 * A program that defines its own malloc family (own_alloc.h), as programs with custom or
 * static allocators do: the dynamic loader binds every object's allocator calls to it,
 * libc's own included, so the blocks libc hands out (strdup, getline, fopen's buffers,
 * asprintf, open_memstream's growing buffer) are the program's, and the program's free()
 * receives only its own blocks. Under the GOT start (memprof_start() with no plugin) the
 * profiler must route libc's patched calls there too, not to glibc's allocator, and take
 * its samples from the program's allocator. Under the plugin the program's definitions come
 * first and the plugin sees none of these calls (doc/guarantees.md), which must not change
 * anything either. argv: BACKEND [ROUNDS] (prog.h's backends; the preload check looks at
 * LD_PRELOAD, since malloc here is the program's own).
 *
 * Each round: strdup, getline on an fmemopen() stream, fopen/fgets/fclose of
 * /proc/self/stat, asprintf, and an open_memstream() written past its first buffer, each
 * freed by the program. Afterwards the program's allocator must have handed out at least
 * four blocks per round and received no foreign block; at rate 1 under the GOT start every
 * one of those calls is sampled.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>

#include "own_alloc.h"

OWN_ALLOC_DEFINE_ENTRY_POINTS()

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "FAIL: " __VA_ARGS__);                                                     \
        fputc('\n', stderr);                                                                       \
        exit(1);                                                                                   \
    } while (0)

/* One round of libc calls that allocate inside libc; everything freed again. */
static void libc_round(int i)
{
    char text[96];
    snprintf(text, sizeof text, "round %d of blocks that libc allocates for the program", i);
    char *s = strdup(text);
    if (!s || strcmp(s, text) != 0)
        FAIL("strdup");
    free(s);

    char lines[] = "first line\nsecond line\n";
    FILE *m = fmemopen(lines, strlen(lines), "r");
    if (!m)
        FAIL("fmemopen");
    char *line = NULL;
    size_t cap = 0;
    if (getline(&line, &cap, m) != 11 || strcmp(line, "first line\n") != 0)
        FAIL("getline");
    free(line);
    fclose(m);

    FILE *f = fopen("/proc/self/stat", "r");
    char buf[64];
    if (!f || !fgets(buf, sizeof buf, f))
        FAIL("fopen/fgets /proc/self/stat");
    fclose(f);

    char *a = NULL;
    if (asprintf(&a, "%s %d", text, i) < 0 || !a)
        FAIL("asprintf");
    free(a);

    char *ms = NULL;
    size_t ms_len = 0;
    FILE *w = open_memstream(&ms, &ms_len);
    if (!w)
        FAIL("open_memstream");
    for (int k = 0; k < 40; k++)
        fputs(text, w);
    fclose(w);
    if (!ms || ms_len != 40 * strlen(text))
        FAIL("open_memstream's buffer");
    free(ms);
}

int main(int argc, char **argv)
{
    if (argc < 2)
        FAIL("usage: %s BACKEND [ROUNDS]", argv[0]);
    const char *backend = argv[1];
    int rounds = argc > 2 ? atoi(argv[2]) : 1500;
    const char *rate_s = getenv("MEMPROF_RATE");
    uint64_t rate = rate_s ? strtoull(rate_s, NULL, 10) : 0;
    const char *preload = getenv("LD_PRELOAD");
    bool preloaded = preload && strstr(preload, "libmemprof-preload");
    if (!strcmp(backend, "got")) {
        if (preloaded)
            FAIL("the preload plugin is loaded in a GOT run");
        int rc = memprof_init(rate);
        if (rc == 0)
            rc = memprof_start();
        if (rc != 0)
            FAIL("memprof_init/memprof_start: %s", memprof_strerror(rc));
    } else if (!strcmp(backend, "preload")) {
        if (!preloaded)
            FAIL("LD_PRELOAD does not name the plugin");
    } else if (strcmp(backend, "plain") != 0 || preloaded) {
        FAIL("backend '%s' (plain, preload or got) does not match the environment", backend);
    }
    if (malloc_usable_size(malloc(1)) != 1)
        FAIL("malloc is not the program's own");

    uint64_t allocs = atomic_load(&own_allocs);
    for (int i = 0; i < rounds; i++)
        libc_round(i);
    uint64_t mine = atomic_load(&own_allocs) - allocs, foreign = atomic_load(&own_foreign);
    printf("%s: %d rounds, %" PRIu64 " blocks from the program's allocator, %" PRIu64
           " foreign blocks freed\n",
           backend, rounds, mine, foreign);
    if (foreign != 0)
        FAIL("the program's free() received %" PRIu64 " blocks its allocator did not make",
             foreign);
    if (mine < 4 * (uint64_t)rounds)
        FAIL("libc's blocks did not come from the program's allocator (%" PRIu64 " of %d)", mine,
             4 * rounds);
    if (!strcmp(backend, "got")) {
        memprof_stats st;
        memset(&st, 0, sizeof st);
        st.size = sizeof st;
        if (memprof_get_stats(&st) != 0 || st.state != MEMPROF_STATE_ACTIVE)
            FAIL("the engine is not active");
        printf("%" PRIu64 " samples\n", st.total_samples);
        if (rate == 1 && st.total_samples < 4 * (uint64_t)rounds)
            FAIL("at rate 1 every allocation libc makes is sampled: %" PRIu64 " samples",
                 st.total_samples);
    }
    return 0;
}
