/* SPDX-License-Identifier: MIT */
/*
 * Caller-countdown sampling (memprof/runtime.h, since 1.1): a runtime keeps its own byte
 * countdown, drawn with memprof_sample_interval(), and reports the allocations it selects with
 * memprof_report_sampled(). These tests check each call's contract in every engine state, and
 * that a countdown following the protocol in runtime.h gives the engine's unbiased estimates.
 * Each case needs a fresh process-wide engine: meson.build runs each case as its own test.
 */
#include <errno.h>
#include <math.h>

#include "core/engine.h"
#include "memprof/memprof.h"
#include "memprof/runtime.h"
#include "engine_fixture.h"
#include "test.h"

/* One allocation of `size` bytes through the protocol of runtime.h; returns whether it was
 * sampled (and reported with id). */
static bool charge(uint64_t *c, uint64_t id, size_t size)
{
    if (size < *c) {
        *c -= size;
        return false;
    }
    bool sample = true;
    if (*c == 0) {
        *c = memprof_sample_interval();
        sample = *c != 0 && *c <= size;
        if (*c > size)
            *c -= size;
    }
    if (sample) {
        EXPECT_EQ(memprof_report_sampled(id, size), 1);
        *c = memprof_sample_interval();
    }
    return sample;
}

/* ---- memprof_sample_interval() ------------------------------------------------------------ */

static void interval_is_zero_until_started(void)
{
    CHECK_EQ_U(memprof_sample_interval(), 0); /* not initialised */
    memprof_config c;
    memprof_config_init(&c);
    CHECK_EQ(memprof_init_config(&c), 0);
    CHECK_EQ_U(memprof_sample_interval(), 0); /* initialised, not started */
}

static void interval_is_zero_when_stopped(void)
{
    CHECK_EQ(fixture_start_engine(4096, 0, 0, 1), 0);
    CHECK(memprof_sample_interval() >= 1);
    CHECK_EQ(memprof_stop(), 0);
    CHECK_EQ_U(memprof_sample_interval(), 0);
}

static void intervals_have_the_rate_as_mean(void)
{
    const uint64_t rate = 4096;
    const int n = 200000;
    CHECK_EQ(fixture_start_engine(rate, 0, 0, 7), 0);
    double sum = 0;
    uint64_t min = UINT64_MAX;
    for (int i = 0; i < n; i++) {
        uint64_t c = memprof_sample_interval();
        sum += (double)c;
        min = c < min ? c : min;
    }
    /* floor(Exp(rate)) + 1 has mean rate + 1/2; the mean of n draws has a standard
     * deviation of rate / sqrt(n), 0.22 % here: 2 % is ~9 sigma. */
    double mean = sum / n;
    EXPECT(min >= 1);
    EXPECT(fabs(mean / (double)rate - 1) < 0.02);
}

/* ---- memprof_report_sampled() ------------------------------------------------------------- */

static void report_sampled_records_a_live_sample(void)
{
    CHECK_EQ(fixture_start_engine(UINT64_C(1) << 30, 0, 0, 1), 0);
    CHECK_EQ(memprof_report_sampled(7, 1000), 1);
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.total_samples, 1);
    EXPECT_EQ_U(s.live_samples, 1);
    CHECK_EQ(memprof_report_free(7), 1);
    EXPECT_EQ_U(fixture_stats().live_samples, 0);
}

static void report_sampled_records_after_a_restart(void)
{
    /* The thread's own countdown then belongs to an older engine generation, which must not
     * make the engine decide the caller's sample afresh. */
    CHECK_EQ(fixture_start_engine(UINT64_C(1) << 30, 0, 0, 1), 0);
    CHECK(memprof_sample_interval() >= 1);
    CHECK_EQ(memprof_stop(), 0);
    CHECK_EQ(memprof_start(), 0);
    for (uint64_t id = 1; id <= 100; id++)
        EXPECT_EQ(memprof_report_sampled(id, 16), 1);
    EXPECT_EQ_U(fixture_stats().total_samples, 100);
}

static void report_sampled_records_nothing_when_stopped(void)
{
    CHECK_EQ(fixture_start_engine(4096, 0, 0, 1), 0);
    CHECK_EQ(memprof_stop(), 0);
    EXPECT_EQ(memprof_report_sampled(7, 1000), 0);
    EXPECT_EQ_U(fixture_stats().total_samples, 0);
}

static void report_sampled_ignores_empty_blocks(void)
{
    CHECK_EQ(fixture_start_engine(4096, 0, 0, 1), 0);
    EXPECT_EQ(memprof_report_sampled(7, 0), 0);
    EXPECT_EQ_U(fixture_stats().total_samples, 0);
}

static void report_sampled_rejects_reserved_ids(void)
{
    CHECK_EQ(fixture_start_engine(4096, 0, 0, 1), 0);
    EXPECT_EQ(memprof_report_sampled(UINT64_C(1) << 63, 16), -EINVAL);
    EXPECT_EQ_U(fixture_stats().total_samples, 0);
}

/* ---- the protocol ------------------------------------------------------------------------- */

static void caller_countdown_estimates_are_unbiased(void)
{
    /* Small and large blocks, so both the sampling probability and the s / p(s) weights are
     * exercised: 5.6 GB in 250,000 blocks, ~47,000 samples at 64 KiB (the estimate's
     * relative standard deviation is under 0.5 %; 4 % is over 8 sigma). */
    static const size_t sizes[] = {16, 100, 1000, 10000, 100000};
    CHECK_EQ(fixture_start_engine(65536, 0, 0, 12345), 0);
    uint64_t c = 0, id = 0, truth = 0, sampled = 0;
    for (int i = 0; i < 50000; i++)
        for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
            truth += sizes[k];
            sampled += charge(&c, ++id, sizes[k]);
        }
    memprof_stats s = fixture_stats();
    EXPECT_EQ_U(s.total_samples, sampled);
    double ratio = (double)s.estimated_live_bytes / (double)truth;
    printf("estimate / truth = %.4f (%" PRIu64 " samples)\n", ratio, sampled);
    EXPECT(fabs(ratio - 1) < 0.04);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(interval_is_zero_until_started),
        TEST_CASE(interval_is_zero_when_stopped),
        TEST_CASE(intervals_have_the_rate_as_mean),
        TEST_CASE(report_sampled_records_a_live_sample),
        TEST_CASE(report_sampled_records_after_a_restart),
        TEST_CASE(report_sampled_records_nothing_when_stopped),
        TEST_CASE(report_sampled_ignores_empty_blocks),
        TEST_CASE(report_sampled_rejects_reserved_ids),
        TEST_CASE(caller_countdown_estimates_are_unbiased),
    };
    return TEST_MAIN(cases, true);
}
