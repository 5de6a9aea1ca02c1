/* SPDX-License-Identifier: MIT */
/*
 * Helpers shared by the hardening programs (tests/stress/programs/): a CHECK macro that
 * names the failed condition and exits 1, and the backend a run asks for as argv[1]:
 * "plain" (no profiler at all: the same checks against bare glibc, so the suite shows the
 * profiled runs behave identically), "preload" (LD_PRELOAD=libmemprof-preload.so, started
 * by the plugin itself from MEMPROF_RATE) or "got" (no plugin; the program calls
 * memprof_init(MEMPROF_RATE) and memprof_start(), which patches the GOT). prog_setup()
 * checks that the run really is under the backend it claims, so a test cannot pass by
 * running without the profiler. Every program is built with frame pointers and -rdynamic.
 */
#ifndef MEMPROF_TESTS_PROG_H
#define MEMPROF_TESTS_PROG_H

#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <memprof/memprof.h>

#ifndef PROG_DEFAULT_RATE /* the build's default_sampling_rate option */
#define PROG_DEFAULT_RATE MEMPROF_DEFAULT_SAMPLING_RATE
#endif

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                        \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
            exit(1);                                                                               \
        }                                                                                          \
    } while (0)

enum prog_backend { PROG_PLAIN, PROG_PRELOAD, PROG_GOT };

static enum prog_backend prog_backend;

/* Writes one byte through a volatile pointer: GCC removes malloc/free pairs it sees through. */
static inline void prog_touch(void *p, unsigned char v)
{
    if (p)
        *(volatile unsigned char *)p = v;
}

/* True if the malloc this program calls is the preload plugin's. */
static inline int prog_preloaded(void)
{
    void *(*volatile m)(size_t) = malloc;
    Dl_info info;
    return dladdr((void *)m, &info) && info.dli_fname &&
           strstr(info.dli_fname, "libmemprof-preload") != NULL;
}

/* The rate the run asks for: MEMPROF_RATE as a plain number, 0 (the default) if unset. */
static inline uint64_t prog_rate(void)
{
    const char *s = getenv("MEMPROF_RATE");
    return s ? strtoull(s, NULL, 10) : 0;
}

static inline memprof_stats prog_stats(void)
{
    memprof_stats s;
    memset(&s, 0, sizeof s);
    s.size = sizeof s;
    int rc = memprof_get_stats(&s);
    CHECK(rc == 0, "memprof_get_stats: %s", memprof_strerror(rc));
    return s;
}

/* True if the profiler samples in this run (preload or got). */
static inline int prog_profiled(void)
{
    return prog_backend != PROG_PLAIN;
}

/* Sets the run up for the backend named by `name` and checks that it is the one in force. */
static inline void prog_setup(const char *name)
{
    uint64_t rate = prog_rate();
    if (!strcmp(name, "plain")) {
        prog_backend = PROG_PLAIN;
        CHECK(!prog_preloaded(), "the preload plugin is loaded in a plain run");
        return;
    }
    if (!strcmp(name, "preload")) {
        prog_backend = PROG_PRELOAD;
        CHECK(prog_preloaded(), "malloc is not the preload plugin's (LD_PRELOAD missing?)");
    } else if (!strcmp(name, "got")) {
        prog_backend = PROG_GOT;
        CHECK(!prog_preloaded(), "the preload plugin is loaded in a GOT run");
        int rc = memprof_init(rate);
        CHECK(rc == 0, "memprof_init(%" PRIu64 "): %s", rate, memprof_strerror(rc));
        rc = memprof_start();
        CHECK(rc == 0, "memprof_start: %s", memprof_strerror(rc));
    } else {
        CHECK(0, "unknown backend '%s' (plain, preload or got)", name);
    }
    memprof_stats s = prog_stats();
    uint64_t want = rate ? rate : PROG_DEFAULT_RATE;
    CHECK(s.state == MEMPROF_STATE_ACTIVE && s.sampling_rate == want,
          "expected an active engine at rate %" PRIu64 ", got state %" PRIu32 " rate %" PRIu64,
          want, s.state, s.sampling_rate);
}

#endif /* MEMPROF_TESTS_PROG_H */
