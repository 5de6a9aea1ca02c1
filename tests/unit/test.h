/* SPDX-License-Identifier: MIT */
/*
 * A tiny harness shared by the unit, stress and statistics tests. A test is a `static void`
 * function that checks one behaviour with CHECK (stop the test on failure) or EXPECT
 * (record the failure and go on; also usable from helper threads). test_main() runs every
 * case of a table, or only the one named on the command line; with `isolate` set (tests of
 * the process-wide engine) each case needs a fresh process, so without an argument every
 * case runs in its own forked child. Exit status: 0 all passed, 1 a failure, 77 all skipped
 * (Meson's "skip"). Also: a deterministic splitmix64 generator and a monotonic clock.
 */
#ifndef MEMPROF_TESTS_TEST_H
#define MEMPROF_TESTS_TEST_H

#include <inttypes.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define TEST_EXIT_SKIP 77

struct test_case {
    const char *name;
    void (*fn)(void);
};
#define TEST_CASE(fn) {#fn, fn}

static _Atomic int test_failures_; /* in the running case */
static int test_skipped_;          /* the running case called SKIP() */

static inline double test_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline bool test_check_(bool ok, const char *file, int line, const char *expr)
{
    if (!ok) {
        fprintf(stderr, "%s:%d: check failed: %s\n", file, line, expr);
        atomic_fetch_add(&test_failures_, 1);
    }
    return ok;
}

static inline bool test_check_eq_(int64_t a, int64_t b, const char *file, int line,
                                  const char *ea, const char *eb)
{
    if (a != b) {
        fprintf(stderr, "%s:%d: check failed: %s == %s (%" PRId64 " != %" PRId64 ")\n", file,
                line, ea, eb, a, b);
        atomic_fetch_add(&test_failures_, 1);
    }
    return a == b;
}

static inline bool test_check_eq_u_(uint64_t a, uint64_t b, const char *file, int line,
                                    const char *ea, const char *eb)
{
    if (a != b) {
        fprintf(stderr, "%s:%d: check failed: %s == %s (%" PRIu64 " != %" PRIu64 ")\n", file,
                line, ea, eb, a, b);
        atomic_fetch_add(&test_failures_, 1);
    }
    return a == b;
}

/* EXPECT*: record a failure and continue; they return whether the check held. */
#define EXPECT(cond)       test_check_(!!(cond), __FILE__, __LINE__, #cond)
#define EXPECT_EQ(a, b)    test_check_eq_((int64_t)(a), (int64_t)(b), __FILE__, __LINE__, #a, #b)
#define EXPECT_EQ_U(a, b)  test_check_eq_u_((uint64_t)(a), (uint64_t)(b), __FILE__, __LINE__, #a, #b)
/* CHECK*: record a failure and return from the (void) test function. */
#define CHECK(cond)        do { if (!EXPECT(cond)) return; } while (0)
#define CHECK_EQ(a, b)     do { if (!EXPECT_EQ(a, b)) return; } while (0)
#define CHECK_EQ_U(a, b)   do { if (!EXPECT_EQ_U(a, b)) return; } while (0)
/* A written text contains (or lacks) a string; on failure the text is shown. */
#define EXPECT_HAS(text, needle)                                                                   \
    do {                                                                                           \
        if (!EXPECT(strstr(text, needle) != NULL))                                                 \
            fprintf(stderr, "  missing: %s\n  in:\n%s\n", needle, text);                           \
    } while (0)
#define EXPECT_LACKS(text, needle)                                                                 \
    do {                                                                                           \
        if (!EXPECT(strstr(text, needle) == NULL))                                                 \
            fprintf(stderr, "  unexpected: %s\n  in:\n%s\n", needle, text);                        \
    } while (0)
/* Marks the running case as skipped (it cannot run here) and returns from it. */
#define SKIP(reason)                                                   \
    do {                                                               \
        fprintf(stderr, "skipped: %s\n", reason);                      \
        test_skipped_ = 1;                                             \
        return;                                                        \
    } while (0)

/* Runs one case in this process: 0 passed, 1 failed, TEST_EXIT_SKIP skipped. */
static inline int test_run_one_(const struct test_case *c)
{
    atomic_store(&test_failures_, 0);
    test_skipped_ = 0;
    /* Named up front, so a crash shows which case it was in. */
    printf("---- %s\n", c->name);
    fflush(stdout);
    double t0 = test_now();
    c->fn();
    double dt = test_now() - t0;
    int failures = atomic_load(&test_failures_);
    const char *verdict = failures ? "FAIL" : test_skipped_ ? "SKIP" : "ok";
    printf("%-4s %s (%.3f s)\n", verdict, c->name, dt);
    fflush(stdout);
    return failures ? 1 : test_skipped_ ? TEST_EXIT_SKIP : 0;
}

/* Runs one case in a forked child (a fresh process-wide engine). */
static inline int test_run_forked_(const struct test_case *c)
{
    fflush(NULL);
    pid_t pid = fork();
    if (pid < 0) {
        perror("fork");
        return 1;
    }
    if (pid == 0)
        _exit(test_run_one_(c));
    int status;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status)) {
        printf("FAIL %s (crashed)\n", c->name);
        return 1;
    }
    return WEXITSTATUS(status);
}

/* The main function of a test program: argv[1] names one case, else all cases run (each in
 * its own process if `isolate`). Unknown names fail, so a typo in meson.build is caught. */
static inline int test_main(int argc, char **argv, const struct test_case *cases, size_t n,
                            bool isolate)
{
    if (argc > 1) {
        for (size_t i = 0; i < n; i++)
            if (strcmp(argv[1], cases[i].name) == 0)
                return test_run_one_(&cases[i]);
        fprintf(stderr, "%s: unknown test case '%s'; cases:\n", argv[0], argv[1]);
        for (size_t i = 0; i < n; i++)
            fprintf(stderr, "  %s\n", cases[i].name);
        return 1;
    }
    int failed = 0, skipped = 0;
    for (size_t i = 0; i < n; i++) {
        int rc = isolate ? test_run_forked_(&cases[i]) : test_run_one_(&cases[i]);
        failed += rc != 0 && rc != TEST_EXIT_SKIP;
        skipped += rc == TEST_EXIT_SKIP;
    }
    printf("%zu cases: %zu passed, %d failed, %d skipped\n", n, n - (size_t)failed - (size_t)skipped,
           failed, skipped);
    return failed ? 1 : (n > 0 && (size_t)skipped == n) ? TEST_EXIT_SKIP : 0;
}

#define TEST_MAIN(cases, isolate) \
    test_main(argc, argv, cases, sizeof(cases) / sizeof((cases)[0]), isolate)

/* splitmix64: a deterministic test-data generator (not the sampler's PRNG). */
static inline uint64_t test_rand(uint64_t *state)
{
    uint64_t z = (*state += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Uniform in [0, n) (n > 0; the tiny modulo bias is irrelevant for test data). */
static inline uint64_t test_rand_below(uint64_t *state, uint64_t n)
{
    return test_rand(state) % n;
}

/* Uniform double in [0, 1). */
static inline double test_rand_unit(uint64_t *state)
{
    return (double)(test_rand(state) >> 11) * 0x1.0p-53;
}

#endif
