/* SPDX-License-Identifier: MIT */
/*
 * Programs with a known truth for the views beyond "live now", run under the LD_PRELOAD
 * plugin and checked from inside through the public API (memprof.h, MEMPROF_1.2). Each mode
 * (argv[1]) is one behaviour:
 *
 *   peak-names-the-peak-site   views_peak_site() allocates 64 MiB in 64 KiB blocks and frees
 *                              them; views_hold_site() then holds 8 MiB to the snapshot. The
 *                              peak view names the first (the peak within +-15 % of 64 MiB,
 *                              about 5 standard deviations at 64 KiB), the live view the
 *                              second, and the peak's time lies within the run.
 *   temporary-names-the-churn  views_churn_site() allocates and frees 4 KiB blocks at once
 *                              (80 MiB in all) among views_keep_site()'s long-lived ones:
 *                              the temporary view names the churn first, within +-20 % of
 *                              80 MiB, and the kept blocks are not temporary; the churn's
 *                              median lifetime is under the threshold.
 *   leaks-ranks-the-leaker     over ~1.5 s, views_cache_site() builds 8 MiB at start-up,
 *                              views_leak_site() leaks 64 KiB every 10 ms, and
 *                              views_churn_site() churns blocks that live ~5 ms: the leak
 *                              view ranks the leaker first, and neither the cache nor the
 *                              churn is a suspect.
 *   series-has-the-peak        the heap over time has at most 1,026 points, times that never
 *                              decrease, allocated bytes that never decrease, and a point
 *                              within 15 % of the peak.
 *   threads-label-each-site    threads named "views-a" and "views-b" hold 8 MiB and 4 MiB
 *                              from the same function: the live view has one site per thread
 *                              with its kernel thread id and name, and their bytes.
 *
 * Rates come from MEMPROF_RATE (set by meson.build). Every mode first checks that malloc is
 * the plugin's, so no test passes without the profiler.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <memprof/memprof.h>

#include "itest.h"

#define MIB ((size_t)1 << 20)

void views_peak_site(void);
void views_hold_site(void);
void views_churn_site(size_t n, unsigned lifetime_us);
void views_keep_site(size_t n);
void views_cache_site(void);
void views_leak_site(void);

static void *kept[4096];
static size_t nkept;

static void keep(void *p)
{
    CHECK(p != NULL && nkept < sizeof kept / sizeof *kept, "allocation failed or too many");
    itest_touch(p, (unsigned char)nkept);
    kept[nkept++] = p;
}

static void sleep_us(unsigned us)
{
    struct timespec ts = {us / 1000000, (long)(us % 1000000) * 1000};
    nanosleep(&ts, NULL);
}

__attribute__((noinline)) void views_peak_site(void)
{
    static void *blocks[1024];
    for (int i = 0; i < 1024; i++) {
        blocks[i] = malloc(64 * 1024);
        CHECK(blocks[i] != NULL, "malloc failed");
        itest_touch(blocks[i], (unsigned char)i);
    }
    for (int i = 0; i < 1024; i++)
        free(blocks[i]);
}

__attribute__((noinline)) void views_hold_site(void)
{
    for (int i = 0; i < 128; i++)
        keep(malloc(64 * 1024));
}

/* n blocks of 4 KiB, each freed `lifetime_us` after its allocation (0: at once). */
__attribute__((noinline)) void views_churn_site(size_t n, unsigned lifetime_us)
{
    for (size_t i = 0; i < n; i++) {
        void *p = malloc(4096);
        CHECK(p != NULL, "malloc failed");
        itest_touch(p, (unsigned char)i);
        if (lifetime_us)
            sleep_us(lifetime_us);
        free(p);
    }
}

__attribute__((noinline)) void views_keep_site(size_t n)
{
    for (size_t i = 0; i < n; i++)
        keep(malloc(4096));
}

__attribute__((noinline)) void views_cache_site(void)
{
    for (int i = 0; i < 128; i++)
        keep(malloc(64 * 1024));
}

__attribute__((noinline)) void views_leak_site(void)
{
    keep(malloc(64 * 1024));
}

__attribute__((noinline)) void views_thread_site(size_t blocks);

__attribute__((noinline)) void views_thread_site(size_t blocks)
{
    static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
    for (size_t i = 0; i < blocks; i++) {
        void *p = malloc(64 * 1024);
        pthread_mutex_lock(&lock);
        keep(p);
        pthread_mutex_unlock(&lock);
    }
}

struct named_thread {
    const char *name;
    size_t blocks;
    pid_t tid;
};

static void *named_thread_main(void *arg)
{
    struct named_thread *t = arg;
    CHECK(pthread_setname_np(pthread_self(), t->name) == 0, "pthread_setname_np failed");
    t->tid = gettid();
    views_thread_site(t->blocks);
    return NULL;
}

/* ---- reading the views ---- */

/* Whether a stack's frames include `fn`. */
static int stack_has(const memprof_snapshot *s, uint32_t stack, const char *fn)
{
    int depth = memprof_snapshot_stack_depth(s, stack);
    for (int i = 0; i < depth; i++) {
        memprof_frame f = {.size = sizeof f};
        if (memprof_snapshot_frame(s, stack, (size_t)i, &f) == 0 && f.function &&
            strcmp(f.function, fn) == 0)
            return 1;
    }
    return 0;
}

static memprof_view_site view_site(const memprof_snapshot *s, memprof_view v, size_t i)
{
    memprof_view_site site = {.size = sizeof site};
    CHECK(memprof_snapshot_view_site(s, v, i, &site) == 0, "view %d site %zu unreadable", v, i);
    return site;
}

/* The rank of the first site of view v whose stack has fn, or -1. */
static long rank_of(const memprof_snapshot *s, memprof_view v, const char *fn)
{
    size_t n = memprof_snapshot_view_site_count(s, v);
    for (size_t i = 0; i < n; i++)
        if (stack_has(s, view_site(s, v, i).stack_id, fn))
            return (long)i;
    return -1;
}

static uint64_t view_bytes_of(const memprof_snapshot *s, memprof_view v, const char *fn)
{
    uint64_t total = 0;
    size_t n = memprof_snapshot_view_site_count(s, v);
    for (size_t i = 0; i < n; i++) {
        memprof_view_site site = view_site(s, v, i);
        if (stack_has(s, site.stack_id, fn))
            total += site.bytes;
    }
    return total;
}

static memprof_snapshot *snapshot(void)
{
    memprof_snapshot *s = NULL;
    CHECK(memprof_get_snapshot(&s) == 0, "memprof_get_snapshot failed");
    return s;
}

static void within(const char *what, double got, double want, double tol)
{
    printf("%s: %.0f (expected %.0f +- %.0f %%)\n", what, got, want, tol * 100);
    CHECK(got >= want * (1 - tol) && got <= want * (1 + tol), "%s: %.0f not within %.0f %% of %.0f",
          what, got, tol * 100, want);
}

static void peak_names_the_peak_site(void)
{
    views_peak_site();
    views_hold_site();
    memprof_snapshot *s = snapshot();
    memprof_peak_info pk = {.size = sizeof pk};
    CHECK(memprof_snapshot_peak(s, &pk) == 0, "memprof_snapshot_peak failed");
    printf("peak %" PRIu64 " B (%" PRIu64 " to %" PRIu64 ") at %.3f s of %.3f s\n", pk.bytes,
           pk.bytes_low, pk.bytes_high, pk.time_ns / 1e9, pk.duration_ns / 1e9);
    CHECK(pk.bytes_low <= pk.bytes && pk.bytes <= pk.bytes_high, "peak outside its interval");
    within("peak bytes", (double)pk.bytes, 64.0 * MIB, 0.15);
    CHECK(pk.time_ns <= pk.duration_ns, "peak time after the snapshot");
    CHECK(rank_of(s, MEMPROF_VIEW_PEAK, "views_peak_site") == 0, "peak view: peak site not first");
    CHECK(rank_of(s, MEMPROF_VIEW_LIVE, "views_hold_site") == 0, "live view: held site not first");
    CHECK(rank_of(s, MEMPROF_VIEW_LIVE, "views_peak_site") < 0, "live view: freed site is live");
    within("peak-site bytes at the peak",
           (double)view_bytes_of(s, MEMPROF_VIEW_PEAK, "views_peak_site"), 64.0 * MIB, 0.15);
    memprof_free_snapshot(s);
}

static void temporary_names_the_churn(void)
{
    views_keep_site(1024);
    views_churn_site(20480, 0);
    memprof_snapshot *s = snapshot();
    CHECK(rank_of(s, MEMPROF_VIEW_TEMPORARY, "views_churn_site") == 0,
          "temporary view: churn site not first");
    CHECK(rank_of(s, MEMPROF_VIEW_TEMPORARY, "views_keep_site") < 0,
          "temporary view: kept blocks counted as temporary");
    within("temporary bytes of the churn site",
           (double)view_bytes_of(s, MEMPROF_VIEW_TEMPORARY, "views_churn_site"), 80.0 * MIB, 0.2);
    memprof_view_site top = view_site(s, MEMPROF_VIEW_TEMPORARY, 0);
    memprof_peak_info pk = {.size = sizeof pk};
    CHECK(memprof_snapshot_peak(s, &pk) == 0, "memprof_snapshot_peak failed");
    CHECK(top.lifetime_p50_ns > 0 && top.lifetime_p50_ns <= pk.temporary_threshold_ns,
          "churn median lifetime %" PRIu64 " ns not under the threshold", top.lifetime_p50_ns);
    memprof_free_snapshot(s);
}

static void leaks_ranks_the_leaker(void)
{
    views_cache_site();
    for (int tick = 0; tick < 150; tick++) {
        views_leak_site();
        views_churn_site(2, 5000);
    }
    memprof_snapshot *s = snapshot();
    size_t n = memprof_snapshot_view_site_count(s, MEMPROF_VIEW_LEAKS);
    printf("%zu leak suspect(s)\n", n);
    CHECK(rank_of(s, MEMPROF_VIEW_LEAKS, "views_leak_site") == 0, "leaks view: leaker not first");
    CHECK(rank_of(s, MEMPROF_VIEW_LEAKS, "views_cache_site") < 0, "start-up cache is a suspect");
    CHECK(rank_of(s, MEMPROF_VIEW_LEAKS, "views_churn_site") < 0, "churn is a suspect");
    memprof_view_site top = view_site(s, MEMPROF_VIEW_LEAKS, 0);
    CHECK(top.flags & MEMPROF_SITE_LEAK_SUSPECT, "the leaker is not flagged a suspect");
    CHECK(top.leak_rate > 0, "no leak rate");
    memprof_free_snapshot(s);
}

static void series_has_the_peak(void)
{
    views_peak_site();
    views_hold_site();
    memprof_snapshot *s = snapshot();
    size_t n = memprof_snapshot_series(s, NULL, 0);
    CHECK(n >= 2 && n <= 1026, "series of %zu points", n);
    memprof_heap_point *pts = calloc(n, sizeof *pts);
    CHECK(pts && memprof_snapshot_series(s, pts, n) == n, "series copy failed");
    memprof_peak_info pk = {.size = sizeof pk};
    CHECK(memprof_snapshot_peak(s, &pk) == 0, "memprof_snapshot_peak failed");
    uint64_t top = 0;
    for (size_t i = 0; i < n; i++) {
        CHECK(i == 0 || pts[i].time_ns >= pts[i - 1].time_ns, "time goes back at point %zu", i);
        CHECK(i == 0 || pts[i].allocated_bytes >= pts[i - 1].allocated_bytes,
              "allocated bytes decrease at point %zu", i);
        if (pts[i].live_bytes > top)
            top = pts[i].live_bytes;
    }
    within("highest point of the series against the peak", (double)top, (double)pk.bytes, 0.15);
    free(pts);
    memprof_free_snapshot(s);
}

static void threads_label_each_site(void)
{
    struct named_thread ts[2] = {{"views-a", 128, 0}, {"views-b", 64, 0}};
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        CHECK(pthread_create(&th[i], NULL, named_thread_main, &ts[i]) == 0, "pthread_create");
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    memprof_snapshot *s = snapshot();
    size_t n = memprof_snapshot_view_site_count(s, MEMPROF_VIEW_LIVE);
    uint64_t bytes[2] = {0, 0};
    for (size_t i = 0; i < n; i++) {
        memprof_view_site site = view_site(s, MEMPROF_VIEW_LIVE, i);
        if (!stack_has(s, site.stack_id, "views_thread_site"))
            continue;
        int which = -1;
        for (int k = 0; k < 2; k++)
            if ((pid_t)site.thread_id == ts[k].tid)
                which = k;
        CHECK(which >= 0, "a site of views_thread_site with thread id %" PRIu64 ", not a worker's",
              site.thread_id);
        CHECK(site.thread_name && strcmp(site.thread_name, ts[which].name) == 0,
              "thread %d named %s, expected %s", (int)ts[which].tid,
              site.thread_name ? site.thread_name : "(none)", ts[which].name);
        bytes[which] += site.bytes;
    }
    within("views-a bytes", (double)bytes[0], 8.0 * MIB, 0.25);
    within("views-b bytes", (double)bytes[1], 4.0 * MIB, 0.35);
    memprof_free_snapshot(s);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: views MODE");
    Dl_info info;
    void *(*volatile m)(size_t) = malloc;
    CHECK(dladdr((void *)m, &info) && info.dli_fname &&
              strstr(info.dli_fname, "libmemprof-preload"),
          "malloc is not the plugin's: not running under the profiler");
    static const struct {
        const char *name;
        void (*fn)(void);
    } modes[] = {
        {"peak-names-the-peak-site", peak_names_the_peak_site},
        {"temporary-names-the-churn", temporary_names_the_churn},
        {"leaks-ranks-the-leaker", leaks_ranks_the_leaker},
        {"series-has-the-peak", series_has_the_peak},
        {"threads-label-each-site", threads_label_each_site},
    };
    for (size_t i = 0; i < sizeof modes / sizeof *modes; i++)
        if (strcmp(argv[1], modes[i].name) == 0) {
            modes[i].fn();
            return 0;
        }
    CHECK(0, "unknown mode %s", argv[1]);
    return 1;
}
