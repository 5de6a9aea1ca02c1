/* SPDX-License-Identifier: MIT */
/*
 * Sampled blocks under the GOT start may reach libc's own free() and realloc() through
 * pointers taken before memprof_start() (here: a pthread key destructor, and free/realloc
 * stored in variables), and libc's malloc_usable_size() may be asked about them: the program
 * must go on as without the profiler. At the default rate sampled blocks come from the
 * framed sample heap (glibc's mmap()ed-chunk format), so some small sampled blocks carry
 * glibc's IS_MMAPPED bit; with MEMPROF_SAMPLE_HEAP=0 they are glibc's own and none does.
 * Frees through the patched free() still remove samples.
 * Self-checking: exit 0 on success.
 */
#define _GNU_SOURCE
#include <malloc.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include "../check.h"

#define N_SMALL    200000
#define SMALL_SIZE 64
#define N_LARGE    40
#define LARGE_SIZE ((size_t)4 << 20)
#define N_THREADS  8

/* Taken before start: these keep pointing at libc's functions after patching. */
static void (*volatile libc_free)(void *);
static void *(*volatile libc_realloc)(void *, size_t);
static pthread_key_t key;

/* glibc's chunk header: the size word before a block, IS_MMAPPED its bit 1. */
static int chunk_is_mmapped(const void *p)
{
    return (int)(((const size_t *)p)[-1] & 2);
}

static void *thread_main(void *arg)
{
    (void)arg;
    char *p = malloc(LARGE_SIZE);
    CHECK(p != NULL);
    if (p)
        memset(p, 5, 4096);
    pthread_setspecific(key, p); /* freed by the key's destructor, libc's free() */
    return NULL;
}

int main(void)
{
    if (getenv("LD_PRELOAD") && strstr(getenv("LD_PRELOAD"), "memprof")) {
        fprintf(stderr, "this test must run without the preload plugin\n");
        return 77;
    }
    const char *heap_env = getenv("MEMPROF_SAMPLE_HEAP");
    int framed = !(heap_env && strcmp(heap_env, "0") == 0);
    libc_free = free;
    libc_realloc = realloc;
    CHECK(pthread_key_create(&key, free) == 0);
    CHECK(memprof_init(0) == 0); /* the default rate, 512 KiB */
    CHECK(memprof_start() == 0);

    /* Small blocks: about one in 8,000 (64 B of 512 KiB) is sampled. */
    static char *small[N_SMALL];
    size_t mmapped = 0, too_small = 0;
    for (int i = 0; i < N_SMALL; i++) {
        small[i] = malloc(SMALL_SIZE);
        CHECK(small[i] != NULL);
        memset(small[i], 1, SMALL_SIZE);
        mmapped += chunk_is_mmapped(small[i]) != 0;
        too_small += malloc_usable_size(small[i]) < SMALL_SIZE;
    }
    printf("%zu of %d small blocks are mmap()ed chunks\n", mmapped, N_SMALL);
    CHECK(too_small == 0);
    CHECK(framed ? mmapped > 0 : mmapped == 0);

    /* Large blocks are all but certainly sampled. */
    static char *large[N_LARGE];
    for (int i = 0; i < N_LARGE; i++) {
        large[i] = malloc(LARGE_SIZE);
        CHECK(large[i] != NULL && malloc_usable_size(large[i]) >= LARGE_SIZE);
        memset(large[i], 2, 4096);
    }
    memprof_stats st = {.size = sizeof st};
    CHECK(memprof_get_stats(&st) == 0);
    uint64_t live_before = st.live_samples;
    printf("%lu live samples\n", (unsigned long)live_before);
    CHECK(live_before >= N_LARGE - 1);

    /* Half of everything through libc directly, the rest through the patched functions. */
    for (int i = 0; i < N_SMALL; i += 2) {
        small[i] = libc_realloc(small[i], 2 * SMALL_SIZE);
        CHECK(small[i] != NULL && small[i][SMALL_SIZE - 1] == 1);
        libc_free(small[i]);
    }
    for (int i = 0; i < N_LARGE; i += 2) {
        large[i] = libc_realloc(large[i], 2 * LARGE_SIZE);
        CHECK(large[i] != NULL && large[i][4095] == 2);
        libc_free(large[i]);
    }
    pthread_t t[N_THREADS];
    for (int i = 0; i < N_THREADS; i++)
        CHECK(pthread_create(&t[i], NULL, thread_main, NULL) == 0);
    for (int i = 0; i < N_THREADS; i++)
        pthread_join(t[i], NULL);

    CHECK(memprof_get_stats(&st) == 0);
    uint64_t freed_before = st.freed_samples;
    for (int i = 1; i < N_SMALL; i += 2)
        free(small[i]);
    for (int i = 1; i < N_LARGE; i += 2)
        free(large[i]);
    CHECK(memprof_get_stats(&st) == 0);
    printf("frees through the patched free() removed %lu samples\n",
           (unsigned long)(st.freed_samples - freed_before));
    CHECK(st.freed_samples - freed_before >= N_LARGE / 2 - 1);
    memprof_shutdown();
    return failures ? 1 : 0;
}
