/* SPDX-License-Identifier: MIT */
/*
 * The GOT start reads MEMPROF_SAMPLE_HEAP, and the library prints nothing of its own: a
 * value it does not understand reaches the log callback as one warning naming the variable
 * and the value, and the default (the sample heap on) is used. A valid value is taken
 * silently. The test runs with the variable set by meson and expects a warning exactly when
 * EXPECT_WARNING=1 in its environment; the sample heap's use is told, as in
 * got_libc_free.c, by small sampled blocks carrying glibc's IS_MMAPPED bit.
 * Self-checking: exit 0 on success.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>
#include "../check.h"

#define N_SMALL    200000
#define SMALL_SIZE 64

static int warnings, naming_it;

static void log_cb(void *ctx, int level, const char *msg)
{
    (void)ctx;
    printf("log %d: %s\n", level, msg);
    if (level == MEMPROF_LOG_WARN) {
        warnings++;
        const char *value = getenv("MEMPROF_SAMPLE_HEAP");
        naming_it += strstr(msg, "MEMPROF_SAMPLE_HEAP") && value && strstr(msg, value);
    }
}

/* glibc's chunk header: the size word before a block, IS_MMAPPED its bit 1. */
static int chunk_is_mmapped(const void *p)
{
    return (int)(((const size_t *)p)[-1] & 2);
}

int main(void)
{
    const char *expect_s = getenv("EXPECT_WARNING");
    const char *heap_s = getenv("MEMPROF_SAMPLE_HEAP");
    int expect_warning = expect_s && strcmp(expect_s, "1") == 0;
    int expect_heap = !(heap_s && (!strcmp(heap_s, "0") || !strcasecmp(heap_s, "off") ||
                                   !strcasecmp(heap_s, "no") || !strcasecmp(heap_s, "false")));

    memprof_config cfg;
    memprof_config_init(&cfg);
    cfg.log_fn = log_cb;
    CHECK(memprof_init_config(&cfg) == 0); /* the default rate, 512 KiB */
    CHECK(memprof_start() == 0);
    CHECK(memprof_stop() == 0);
    CHECK(memprof_start() == 0); /* the variable is read once, at the first start */

    CHECK(warnings == (expect_warning ? 1 : 0));
    CHECK(naming_it == warnings);

    /* About one in 8,000 small blocks is sampled (64 B of 512 KiB). */
    static char *small[N_SMALL];
    size_t mmapped = 0;
    for (int i = 0; i < N_SMALL; i++) {
        small[i] = malloc(SMALL_SIZE);
        CHECK(small[i] != NULL);
        mmapped += small[i] && chunk_is_mmapped(small[i]) != 0;
    }
    printf("%zu of %d small blocks are mmap()ed chunks\n", mmapped, N_SMALL);
    CHECK(expect_heap ? mmapped > 0 : mmapped == 0);
    for (int i = 0; i < N_SMALL; i++)
        free(small[i]);
    memprof_shutdown();
    return failures ? 1 : 0;
}
