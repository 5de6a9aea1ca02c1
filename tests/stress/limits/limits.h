/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the limits programs (tests/stress/limits/): a CHECK macro that names
 * the failed condition and exits 1, the skip exit code, a check that the program really
 * runs under the backend the test says (the LD_PRELOAD plugin or the run-time GOT start),
 * the rate a test asks for (MEMPROF_RATE, read by the program itself so the GOT variant,
 * which no environment variable configures, gets the same rate), and small wrappers
 * around the API. Every program here is built with frame pointers and -rdynamic, and its
 * allocating functions are noinline, so stacks and symbols name them.
 */
#ifndef MEMPROF_TESTS_LIMITS_H
#define MEMPROF_TESTS_LIMITS_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>

#define LIMITS_SKIP 77

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

/* Writes one byte through a volatile pointer: GCC removes malloc/free pairs it sees through. */
static inline void limits_touch(void *p, unsigned char v)
{
    if (p)
        *(volatile unsigned char *)p = v;
}

/* True if the malloc this program calls is the preload plugin's. */
static inline int limits_preloaded(void)
{
    void *(*volatile m)(size_t) = malloc;
    Dl_info info;
    /* The file, also when loaded through a link (secure.c's); into a buffer, not allocated:
     * a thread's first allocation before the program's memprof_init() would draw its first
     * sampling countdown at the plugin's default rate. */
    char path[4096]; /* PATH_MAX, which this header's name keeps <limits.h> from giving */
    return dladdr((void *)m, &info) && info.dli_fname && realpath(info.dli_fname, path) &&
           strstr(path, "libmemprof-preload") != NULL;
}

/* Checks that the program runs under `backend` ("preload": the plugin, idle or started;
 * "got": no plugin, so memprof_start() patches the GOT). A test must not pass by running
 * without the profiler, or under the other backend than it claims. */
static inline void limits_expect_backend(const char *backend)
{
    if (!strcmp(backend, "preload"))
        CHECK(limits_preloaded(), "malloc is not the preload plugin's (LD_PRELOAD missing?)");
    else if (!strcmp(backend, "got"))
        CHECK(!limits_preloaded(), "the preload plugin is loaded in a GOT test");
    else
        CHECK(0, "unknown backend '%s' (preload or got)", backend);
}

/* limits_expect_backend(), or for "plain" a check that no profiler is loaded at all (a run
 * to compare with). Returns whether the run is plain. */
static inline bool limits_expect_backend_or_plain(const char *backend)
{
    bool plain = !strcmp(backend, "plain");
    if (plain)
        CHECK(!limits_preloaded(), "the preload plugin is loaded in a plain run");
    else
        limits_expect_backend(backend);
    return plain;
}

/* The rate the test asks for: MEMPROF_RATE as a plain number, 0 (the default) if unset. */
static inline uint64_t limits_rate(void)
{
    const char *s = getenv("MEMPROF_RATE");
    return s ? strtoull(s, NULL, 10) : 0;
}

static inline memprof_stats limits_stats(void)
{
    memprof_stats s = {.size = sizeof s};
    CHECK(memprof_get_stats(&s) == 0, "memprof_get_stats failed");
    return s;
}

/* memprof_init_config + memprof_start, both of which must succeed (under the plugin the
 * test runs with MEMPROF_START=0, so the program's own configuration is the one used). */
static inline void limits_start(const memprof_config *c)
{
    int rc = memprof_init_config(c);
    CHECK(rc == 0, "memprof_init_config: %s (under the plugin, set MEMPROF_START=0)",
          memprof_strerror(rc));
    rc = memprof_start();
    CHECK(rc == 0, "memprof_start: %s", memprof_strerror(rc));
}

/* limits_start() with the default configuration at the test's rate. */
static inline void limits_start_at_rate(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = limits_rate();
    limits_start(&c);
}

static inline void limits_print_stats(const char *when)
{
    memprof_stats s = limits_stats();
    printf("%s: state %u, rate %llu, samples %llu (live %llu, freed %llu), heap map %llu/%llu, "
           "full drops %llu, stacks %llu/%llu, overflows %llu, truncated %llu, "
           "write failures %llu, reentrant skips %llu\n",
           when, s.state, (unsigned long long)s.sampling_rate, (unsigned long long)s.total_samples,
           (unsigned long long)s.live_samples, (unsigned long long)s.freed_samples,
           (unsigned long long)s.heap_map_used, (unsigned long long)s.heap_map_capacity,
           (unsigned long long)s.heap_map_full_drops, (unsigned long long)s.unique_stacks,
           (unsigned long long)s.stack_table_capacity, (unsigned long long)s.stack_table_overflows,
           (unsigned long long)s.truncated_stacks, (unsigned long long)s.write_failures,
           (unsigned long long)s.reentrant_skips);
    fflush(stdout);
}

#endif /* MEMPROF_TESTS_LIMITS_H */
