/* SPDX-License-Identifier: MIT */
/*
 * Accuracy of the views' estimates over many seeds: the peak and the temporary bytes. The
 * engine is process-wide and its peak is the run's, so each seed runs in a forked child
 * with a fresh engine (fixed seed per child) that reports its estimates through a pipe.
 * Allocations are reported through memprof__on_alloc()/memprof__on_free() with fake block
 * addresses (never touched), as in test_estimate_engine.c.
 *
 * - peak: 2,000 x 50,000 B allocated, all freed, then 500 x 50,000 B held: the truth at the
 *   peak is 100,000,000 B. The recorded peak lies between the highest estimate reached and
 *   1/64 below it (history.h), so its mean over the seeds must lie in [1 - 1/64, 1] of the
 *   truth, give or take four standard errors.
 * - temporary: 20,000 x 4,096 B each freed at once among 1,000 kept: the temporary bytes'
 *   mean must be within four standard errors of 81,920,000 B (unbiased), and the kept blocks
 *   never count.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/engine.h"
#include "core/snapshot.h"
#include "engine_fixture.h"
#include "memprof/memprof.h"
#include "test.h"

#define SEEDS 100

static char *fake_blocks(size_t n)
{
    void *p = mmap(NULL, n * 64, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

/* The workloads, each in a fresh engine; write the estimate/truth ratio to fd. */
static double peak_workload(char *b)
{
    for (int i = 0; i < 2000; i++)
        memprof__on_alloc(b + i * 64, 50000);
    for (int i = 0; i < 2000; i++)
        memprof__on_free(b + i * 64);
    for (int i = 2000; i < 2500; i++)
        memprof__on_alloc(b + i * 64, 50000);
    memprof_snapshot *s = NULL;
    memprof_peak_info pk = {.size = sizeof pk};
    if (memprof_get_snapshot(&s) != 0 || memprof_snapshot_peak(s, &pk) != 0)
        return NAN;
    memprof_free_snapshot(s);
    return (double)pk.bytes / 100e6;
}

static double temporary_workload(char *b)
{
    for (int i = 0; i < 1000; i++)
        memprof__on_alloc(b + i * 64, 4096);
    for (int i = 0; i < 20000; i++) {
        memprof__on_alloc(b + (1000 + i % 1000) * 64, 4096);
        memprof__on_free(b + (1000 + i % 1000) * 64);
    }
    memprof_snapshot *s = NULL;
    if (memprof_get_snapshot(&s) != 0)
        return NAN;
    double temp = 0;
    size_t n = memprof_snapshot_view_site_count(s, MEMPROF_VIEW_TEMPORARY);
    for (size_t i = 0; i < n; i++) {
        memprof_view_site site = {.size = sizeof site};
        if (memprof_snapshot_view_site(s, MEMPROF_VIEW_TEMPORARY, i, &site) == 0)
            temp += (double)site.bytes;
    }
    memprof_free_snapshot(s);
    return temp / 81920000.0;
}

/* Runs `fn` in SEEDS children; mean and standard error of its ratios. */
static void over_seeds(double (*fn)(char *), uint64_t rate, double *mean, double *se)
{
    /* NaN until computed: a run cut short (no pipe) fails the callers' checks. */
    *mean = *se = NAN;
    double sum = 0, sum2 = 0;
    int n = 0;
    for (int seed = 1; seed <= SEEDS; seed++) {
        int fds[2];
        if (!EXPECT_EQ(pipe(fds), 0))
            return;
        fflush(NULL);
        pid_t pid = fork();
        if (pid == 0) {
            close(fds[0]);
            double r = NAN;
            char *b = fake_blocks(4096);
            if (b && fixture_start_engine(rate, 0, 0, (uint64_t)seed * 7919) == 0)
                r = fn(b);
            _exit(write(fds[1], &r, sizeof r) == sizeof r ? 0 : 1);
        }
        close(fds[1]);
        double r = NAN;
        int status;
        EXPECT(read(fds[0], &r, sizeof r) == sizeof r);
        close(fds[0]);
        EXPECT(waitpid(pid, &status, 0) == pid && WIFEXITED(status) && WEXITSTATUS(status) == 0);
        if (!EXPECT(isfinite(r)))
            continue;
        sum += r;
        sum2 += r * r;
        n++;
    }
    *mean = sum / n;
    *se = sqrt((sum2 - n * *mean * *mean) / (n - 1)) / sqrt((double)n);
}

static void test_peak_is_unbiased_within_its_margin(void)
{
    double mean, se;
    over_seeds(peak_workload, 64 * 1024, &mean, &se);
    printf("  %d seeds: mean peak/truth %.5f, SE %.5f (margin 1/64 = %.5f)\n", SEEDS, mean, se,
           1.0 / 64);
    EXPECT(mean >= 1 - 1.0 / 64 - 4 * se && mean <= 1 + 4 * se);
    EXPECT(se < 0.01);
}

static void test_temporary_bytes_are_unbiased(void)
{
    double mean, se;
    over_seeds(temporary_workload, 64 * 1024, &mean, &se);
    printf("  %d seeds: mean temporary/truth %.5f, SE %.5f\n", SEEDS, mean, se);
    EXPECT(fabs(mean - 1) <= 4 * se);
    EXPECT(se < 0.02);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_peak_is_unbiased_within_its_margin),
        TEST_CASE(test_temporary_bytes_are_unbiased),
    };
    return TEST_MAIN(cases, false);
}
