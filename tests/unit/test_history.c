/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the heap's history (core/history.h) and the leak statistic (core/leaks.h):
 * the peak picture the engine records from sampled events, the bounded heap-over-time
 * series, lifetimes and temporary counters at free, and the steady-window
 * Kolmogorov-Smirnov test that separates a leak from a start-up cache and from churn. The
 * engine cases run at rate 1 (every allocation sampled, each weighing its size), so the
 * expected numbers are exact.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "core/engine.h"
#include "core/history.h"
#include "core/leaks.h"
#include "core/snapshot.h"
#include "engine_fixture.h"
#include "memprof/memprof.h"
#include "test.h"

static void site_a(void) {}
static void site_b(void) {}

static const uintptr_t stack_a[] = {(uintptr_t)site_a};
static const uintptr_t stack_b[] = {(uintptr_t)site_b};

/* Fake, distinct block addresses (never dereferenced). */
static uint64_t block(unsigned i)
{
    return 0x10000000u + (uint64_t)i * 4096;
}

static struct memprof_snapshot *snap(void)
{
    struct memprof_snapshot *s = NULL;
    EXPECT_EQ(memprof__snapshot_take(&s), 0);
    return s;
}

static const struct memprof_snap_site *site_with(const struct memprof_snapshot *s,
                                                 const uintptr_t *frames)
{
    for (size_t i = 0; i < s->nsites; i++) {
        unsigned depth;
        const uintptr_t *f = memprof__snapshot_site_frames(s, &s->sites[i], &depth);
        if (depth == 1 && f[0] == frames[0])
            return &s->sites[i];
    }
    return NULL;
}

/* ---- engine: peak, series, lifetimes ---- */

static void test_peak_keeps_the_picture_at_the_high_water_mark(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 1), 0);
    for (unsigned i = 0; i < 100; i++)
        memprof__record(block(i), 1000, stack_a, 1, false);
    for (unsigned i = 0; i < 100; i++)
        memprof__on_free((void *)(uintptr_t)block(i));
    for (unsigned i = 0; i < 10; i++)
        memprof__record(block(200 + i), 1000, stack_b, 1, false);
    struct memprof_snapshot *s = snap();
    CHECK(s);
    /* The last recording is within 1/64 of the high-water mark (100,000 B). */
    EXPECT(s->peak.bytes >= 100000.0 * 64 / 65 && s->peak.bytes <= 100000.0);
    const struct memprof_snap_site *a = site_with(s, stack_a), *b = site_with(s, stack_b);
    CHECK(a && b);
    EXPECT(a->peak.bytes == s->peak.bytes); /* b held nothing then */
    EXPECT(b->peak.samples == 0);
    EXPECT_EQ_U(a->live.samples, 0);
    EXPECT_EQ_U(b->live.samples, 10);
    memprof__snapshot_free(s);
}

static void test_live_heap_above_the_recorded_peak_is_the_peak(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 1), 0);
    for (unsigned i = 0; i < 50; i++)
        memprof__record(block(i), 1000, stack_a, 1, false);
    struct memprof_snapshot *s = snap();
    CHECK(s);
    EXPECT(s->peak.bytes == s->total.bytes);
    EXPECT(s->peak.bytes == 50000.0);
    EXPECT_EQ_U(s->peak_t_ns, s->duration_ns);
    memprof__snapshot_free(s);
}

static void test_series_stays_bounded_and_keeps_the_highest_point(void)
{
    /* Feed the history directly: 100,000 events 1 ms apart, one spike in the middle. */
    static struct memprof_history h;
    struct memprof_stacktab st;
    CHECK_EQ(memprof__st_init(&st, 1024), 0);
    uint64_t alloc = 0;
    for (uint64_t i = 0; i < 100000; i++) {
        int64_t live = i == 54321 ? 1000000 : (int64_t)(i % 100);
        alloc += 10;
        struct memprof_hist_now now = {i * 1000000, live, alloc, i};
        memprof__hist_sampled(&h, &st, &now, false);
    }
    static struct memprof_hist_point pts[MEMPROF_SERIES_CAP + 1];
    size_t n = memprof__hist_read_series(&h, pts);
    EXPECT(n >= MEMPROF_SERIES_CAP / 2 && n <= MEMPROF_SERIES_CAP + 1);
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        if (i) {
            EXPECT(pts[i].t_ns > pts[i - 1].t_ns);
            EXPECT(pts[i].alloc >= pts[i - 1].alloc);
        }
        if (pts[i].live > top)
            top = pts[i].live;
    }
    EXPECT_EQ_U(top, 1000000);
    EXPECT(pts[n - 1].t_ns >= 99000ull * 1000000); /* it reaches the end of the run */
    memprof__st_destroy(&st);
}

static void test_frees_fill_lifetimes_and_temporary_counters(void)
{
    CHECK_EQ(fixture_start_engine(1, 0, 0, 1), 0);
    memprof_set_temporary_threshold(1000ull * 1000 * 1000 * 60); /* a minute: all are */
    for (unsigned i = 0; i < 20; i++) {
        memprof__record(block(i), 100, stack_a, 1, false);
        memprof__on_free((void *)(uintptr_t)block(i));
    }
    memprof_set_temporary_threshold(1); /* 1 ns: none is */
    for (unsigned i = 0; i < 5; i++) {
        memprof__record(block(i), 100, stack_b, 1, false);
        struct timespec ts = {0, 2000};
        nanosleep(&ts, NULL);
        memprof__on_free((void *)(uintptr_t)block(i));
    }
    struct memprof_snapshot *s = snap();
    CHECK(s);
    const struct memprof_snap_site *a = site_with(s, stack_a), *b = site_with(s, stack_b);
    CHECK(a && b);
    uint64_t freed_a = 0, freed_b = 0;
    for (unsigned k = 0; k < MEMPROF_LIFETIME_BUCKETS; k++) {
        freed_a += a->lifetimes[k];
        freed_b += b->lifetimes[k];
    }
    EXPECT_EQ_U(freed_a, 20);
    EXPECT_EQ_U(freed_b, 5);
    EXPECT_EQ_U(b->lifetimes[0], 0); /* each lived at least 2 us */
    EXPECT_EQ_U(a->temp_samples, 20);
    EXPECT_EQ_U(a->temp_est_bytes, 2000);
    EXPECT_EQ_U(b->temp_samples, 0);
    memprof_set_temporary_threshold(0);
    EXPECT_EQ_U(memprof__engine_temp_threshold(), MEMPROF_DEFAULT_TEMP_THRESHOLD_NS);
    memprof__snapshot_free(s);
}

static void test_lifetime_buckets_are_powers_of_four_microseconds(void)
{
    EXPECT_EQ_U(memprof__lifetime_bucket(0), 0);
    EXPECT_EQ_U(memprof__lifetime_bucket(999), 0);
    EXPECT_EQ_U(memprof__lifetime_bucket(1000), 1);
    EXPECT_EQ_U(memprof__lifetime_bucket(3999), 1);
    EXPECT_EQ_U(memprof__lifetime_bucket(4000), 2);
    EXPECT_EQ_U(memprof__lifetime_bucket(UINT64_MAX), MEMPROF_LIFETIME_BUCKETS - 1);
    for (unsigned b = 0; b + 1 < MEMPROF_LIFETIME_BUCKETS; b++)
        EXPECT_EQ_U(memprof__lifetime_bucket(memprof__lifetime_bucket_end_ns(b) - 1), b);
}

/* ---- the leak statistic ---- */

#define SEC 1000000000ull

static void leak_of(const uint64_t *ts, size_t n, uint64_t max_lifetime,
                    struct memprof_leak_stat *out)
{
    struct memprof_leak_sample s[256];
    for (size_t i = 0; i < n; i++)
        s[i] = (struct memprof_leak_sample){ts[i], 1000};
    memprof__leak_stat(s, n, memprof__leak_window(0, 100 * SEC, max_lifetime, ts[0]), out);
}

static void test_steady_survivors_make_a_suspect(void)
{
    uint64_t ts[100];
    for (int i = 0; i < 100; i++)
        ts[i] = (uint64_t)i * SEC; /* one per second over a 100 s run */
    struct memprof_leak_stat st;
    leak_of(ts, 100, 0, &st);
    EXPECT(st.suspect);
    EXPECT_EQ_U(st.samples, 80); /* [10 s, 90 s) */
    EXPECT(st.bytes == 80000.0);
    EXPECT(st.rate > 990 && st.rate < 1010); /* 1000 B a second */
}

static void test_leak_that_starts_after_a_warm_up_is_a_suspect(void)
{
    uint64_t ts[60];
    for (int i = 0; i < 60; i++)
        ts[i] = 40 * SEC + (uint64_t)i * SEC; /* from 40 s to the end of a 100 s run */
    struct memprof_leak_stat st;
    leak_of(ts, 60, 0, &st);
    EXPECT(st.suspect);
    EXPECT_EQ_U(st.samples, 50); /* [40 s, 90 s) */
}

static void test_startup_cache_is_not_a_suspect(void)
{
    uint64_t ts[50];
    for (int i = 0; i < 50; i++)
        ts[i] = (uint64_t)i * SEC / 10; /* all in the first 5 s */
    struct memprof_leak_stat st;
    leak_of(ts, 50, 0, &st);
    EXPECT(!st.suspect);
    EXPECT_EQ_U(st.samples, 0);
}

static void test_churn_survivors_younger_than_its_lifetimes_are_not_suspects(void)
{
    uint64_t ts[50];
    for (int i = 0; i < 50; i++)
        ts[i] = 70 * SEC + (uint64_t)i * SEC / 2; /* the last 30 s */
    struct memprof_leak_stat st;
    leak_of(ts, 50, 40 * SEC, &st); /* its frees show lifetimes up to 40 s */
    EXPECT(!st.suspect);
    EXPECT_EQ_U(st.samples, 0);
}

static void test_burst_in_mid_run_is_not_a_suspect(void)
{
    uint64_t ts[40];
    for (int i = 0; i < 40; i++)
        ts[i] = 50 * SEC + (uint64_t)i * SEC / 100; /* within 0.4 s */
    struct memprof_leak_stat st;
    leak_of(ts, 40, 0, &st);
    EXPECT_EQ_U(st.samples, 40);
    EXPECT(!st.suspect);
    EXPECT(st.ks > memprof__ks_critical(40));
}

static void test_too_few_survivors_are_not_a_suspect(void)
{
    uint64_t ts[] = {30 * SEC, 60 * SEC, 80 * SEC};
    struct memprof_leak_stat st;
    leak_of(ts, 3, 0, &st);
    EXPECT_EQ_U(st.samples, 3);
    EXPECT(!st.suspect);
}

static void test_no_window_in_a_run_dominated_by_lifetimes(void)
{
    struct memprof_leak_window w = memprof__leak_window(0, 100 * SEC, 85 * SEC, 0);
    EXPECT(w.lo_ns >= w.hi_ns);
    w = memprof__leak_window(5, 5, 0, 0);
    EXPECT(w.lo_ns >= w.hi_ns);
    /* A site that began at 85 s of a 100 s run has 5 s left: too short to judge. */
    w = memprof__leak_window(0, 100 * SEC, 0, 85 * SEC);
    EXPECT(w.lo_ns >= w.hi_ns);
}

static void test_ks_critical_values_match_the_tables(void)
{
    /* The 0.1 % point of the Kolmogorov distribution is 1.9495 (sqrt(-ln(0.0005) / 2)):
     * large samples reach it, small ones sit a little below it (Stephens), and the value
     * shrinks as n grows. */
    double limit = sqrt(-log(0.0005) / 2);
    double c = memprof__ks_critical(100000);
    EXPECT(fabs(c * sqrt(100000.0) / limit - 1) < 0.01);
    for (size_t n = 4; n < 1000; n++)
        EXPECT(memprof__ks_critical(n + 1) < memprof__ks_critical(n));
    EXPECT(memprof__ks_critical(10) > 0.55 && memprof__ks_critical(10) < 0.62);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_peak_keeps_the_picture_at_the_high_water_mark),
        TEST_CASE(test_live_heap_above_the_recorded_peak_is_the_peak),
        TEST_CASE(test_series_stays_bounded_and_keeps_the_highest_point),
        TEST_CASE(test_frees_fill_lifetimes_and_temporary_counters),
        TEST_CASE(test_lifetime_buckets_are_powers_of_four_microseconds),
        TEST_CASE(test_steady_survivors_make_a_suspect),
        TEST_CASE(test_leak_that_starts_after_a_warm_up_is_a_suspect),
        TEST_CASE(test_startup_cache_is_not_a_suspect),
        TEST_CASE(test_churn_survivors_younger_than_its_lifetimes_are_not_suspects),
        TEST_CASE(test_burst_in_mid_run_is_not_a_suspect),
        TEST_CASE(test_too_few_survivors_are_not_a_suspect),
        TEST_CASE(test_no_window_in_a_run_dominated_by_lifetimes),
        TEST_CASE(test_ks_critical_values_match_the_tables),
    };
    return TEST_MAIN(cases, true);
}
