/* SPDX-License-Identifier: MIT */
/*
 * Lifecycle tests through the public API (include/memprof/memprof.h): the state machine
 * init -> start <-> stop -> shutdown and its wrong-state errors (-ENOTCONN before init,
 * -EALREADY for a second init, -ENOTSUP to start without an interposition backend, -EBUSY
 * for start/stop in the wrong state, -ESHUTDOWN after shutdown), reads (snapshot, stats,
 * symbol resolution) in every initialised state, concurrent init, memprof_strerror(), a
 * program's calls joining a profile that a command (`memprof run`, `memprof attach`) owns,
 * and memprof_write_exit_profile() reaching the command's writer.
 * The engine is a process-wide singleton, so every case needs a fresh process: meson.build
 * runs each case as its own test, passing its name.
 */
#include <errno.h>
#include <limits.h>
#include <pthread.h>

#include "api/owner.h"
#include "config.h"
#include "core/engine.h"
#include "memprof/memprof.h"
#include "memprof/runtime.h"
#include "test.h"

static memprof_stats stats(void)
{
    memprof_stats s;
    memset(&s, 0xA5, sizeof s);
    s.size = sizeof s;
    EXPECT_EQ(memprof_get_stats(&s), 0);
    return s;
}

static uint32_t state(void)
{
    return stats().state;
}

/* Snapshot, stats and resolve all work; the snapshot is empty (nothing was allocated). */
static void expect_reads_work(void)
{
    memprof_snapshot *snap = (memprof_snapshot *)1;
    EXPECT_EQ(memprof_get_snapshot(&snap), 0);
    EXPECT(snap != NULL && snap != (memprof_snapshot *)1);
    EXPECT_EQ_U(memprof_snapshot_live_samples(snap), 0);
    EXPECT_EQ_U(memprof_snapshot_estimated_bytes(snap), 0);
    memprof_free_snapshot(snap);
    memprof_stats s = {.size = sizeof s};
    EXPECT_EQ(memprof_get_stats(&s), 0);
    EXPECT(memprof_resolve_symbols() >= 0);
}

static void expect_everything_shut_down(void)
{
    EXPECT_EQ(memprof_start(), -ESHUTDOWN);
    EXPECT_EQ(memprof_stop(), -ESHUTDOWN);
    memprof_snapshot *snap = (memprof_snapshot *)1;
    EXPECT_EQ(memprof_get_snapshot(&snap), -ESHUTDOWN);
    EXPECT(snap == NULL);
    EXPECT_EQ(memprof_resolve_symbols(), -ESHUTDOWN);
    EXPECT_EQ(memprof_init(0), -ESHUTDOWN);
    EXPECT_EQ(memprof_init(4096), -ESHUTDOWN);
    EXPECT_EQ(memprof_init_config(NULL), -ESHUTDOWN);
    /* Statistics stay readable and say why. */
    EXPECT_EQ(state(), MEMPROF_STATE_SHUTDOWN);
}

static void test_calls_before_init_return_enotconn(void)
{
    EXPECT_EQ(memprof_start(), -ENOTCONN);
    EXPECT_EQ(memprof_stop(), -ENOTCONN);
    memprof_snapshot *snap = (memprof_snapshot *)1;
    EXPECT_EQ(memprof_get_snapshot(&snap), -ENOTCONN);
    EXPECT(snap == NULL);
    EXPECT_EQ(memprof_resolve_symbols(), -ENOTCONN);
    /* NULL snapshots are accepted by the accessors and the destructor. */
    memprof_free_snapshot(NULL);
    EXPECT_EQ_U(memprof_snapshot_live_samples(NULL), 0);
    EXPECT_EQ_U(memprof_snapshot_estimated_bytes(NULL), 0);
}

static void test_get_stats_before_init_reports_uninitialized(void)
{
    memprof_stats s = stats();
    EXPECT_EQ(s.state, MEMPROF_STATE_UNINITIALIZED);
    EXPECT_EQ_U(s.size, sizeof s);
    /* Everything but size and state is zero. */
    memprof_stats zero;
    memset(&zero, 0, sizeof zero);
    zero.size = sizeof zero;
    EXPECT(memcmp(&s, &zero, sizeof s) == 0);
}

static void test_init_twice_returns_ealready_and_keeps_the_rate(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_INITIALIZED);
    EXPECT_EQ(memprof_init(8192), -EALREADY);
    EXPECT_EQ(memprof_init(0), -EALREADY);
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = 100;
    EXPECT_EQ(memprof_init_config(&c), -EALREADY);
    memprof_stats s = stats();
    EXPECT_EQ_U(s.sampling_rate, 4096);
    EXPECT_EQ(s.state, MEMPROF_STATE_INITIALIZED);
}

static void test_init_zero_selects_the_default_rate(void)
{
    CHECK_EQ(memprof_init(0), 0);
    EXPECT_EQ_U(stats().sampling_rate, MEMPROF_DEFAULT_RATE);
    EXPECT_EQ_U(stats().heap_map_capacity, MEMPROF_DEFAULT_HEAP_MAP_CAPACITY);
    EXPECT_EQ_U(stats().stack_table_capacity, MEMPROF_DEFAULT_MAX_STACKS);
}

static void test_init_rejects_a_rate_above_the_maximum(void)
{
    EXPECT_EQ(memprof_init(((uint64_t)1 << 40) + 1), -EINVAL);
    EXPECT_EQ(memprof_init(UINT64_MAX), -EINVAL);
    /* A rejected init leaves the engine uninitialised. */
    EXPECT_EQ(state(), MEMPROF_STATE_UNINITIALIZED);
    EXPECT_EQ(memprof_start(), -ENOTCONN);
    CHECK_EQ(memprof_init((uint64_t)1 << 40), 0);
    EXPECT_EQ_U(stats().sampling_rate, (uint64_t)1 << 40);
}

static void test_rate_one_is_accepted(void)
{
    CHECK_EQ(memprof_init(1), 0);
    EXPECT_EQ_U(stats().sampling_rate, 1);
}

static void test_start_without_a_backend_returns_enotsup(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    EXPECT_EQ(memprof_start(), -ENOTSUP);
    EXPECT_EQ(state(), MEMPROF_STATE_INITIALIZED);
    EXPECT_EQ(memprof_stop(), -EBUSY);
    /* Once a backend announces itself, start works. */
    memprof__backend_register();
    EXPECT_EQ(memprof_start(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
}

static void test_start_and_stop_transitions(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof__backend_register();
    EXPECT_EQ(memprof_start(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
    EXPECT_EQ(memprof_start(), -EBUSY);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
    EXPECT_EQ(memprof_stop(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_STOPPED);
    EXPECT_EQ(memprof_stop(), -EBUSY);
    EXPECT_EQ(state(), MEMPROF_STATE_STOPPED);
    EXPECT_EQ(memprof_start(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
    EXPECT_EQ(memprof_stop(), 0);
    EXPECT_EQ(memprof_start(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
}

static void test_reads_work_in_every_initialised_state(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof__backend_register();
    EXPECT_EQ(state(), MEMPROF_STATE_INITIALIZED);
    expect_reads_work();
    CHECK_EQ(memprof_start(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
    expect_reads_work();
    CHECK_EQ(memprof_stop(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_STOPPED);
    expect_reads_work();
}

static void test_get_snapshot_rejects_null(void)
{
    EXPECT_EQ(memprof_get_snapshot(NULL), -EINVAL);
    CHECK_EQ(memprof_init(4096), 0);
    EXPECT_EQ(memprof_get_snapshot(NULL), -EINVAL);
}

static void test_shutdown_while_active(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof__backend_register();
    CHECK_EQ(memprof_start(), 0);
    memprof_snapshot *before = NULL;
    CHECK_EQ(memprof_get_snapshot(&before), 0);
    memprof_shutdown();
    expect_everything_shut_down();
    /* A snapshot taken before shutdown stays valid until freed. */
    EXPECT_EQ_U(memprof_snapshot_live_samples(before), 0);
    memprof_estimate e = {.size = sizeof e};
    EXPECT_EQ(memprof_snapshot_estimate(before, &e), 0);
    EXPECT_EQ_U(e.sampling_rate, 4096);
    memprof_free_snapshot(before);
}

static void test_shutdown_while_initialized(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof_shutdown();
    expect_everything_shut_down();
}

static void test_shutdown_while_stopped(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof__backend_register();
    CHECK_EQ(memprof_start(), 0);
    CHECK_EQ(memprof_stop(), 0);
    memprof_shutdown();
    expect_everything_shut_down();
}

static void test_shutdown_twice_is_harmless(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof__backend_register();
    CHECK_EQ(memprof_start(), 0);
    memprof_shutdown();
    memprof_shutdown();
    memprof_shutdown();
    expect_everything_shut_down();
    memprof_shutdown();
    EXPECT_EQ(state(), MEMPROF_STATE_SHUTDOWN);
}

enum { RACERS = 8 };
static pthread_barrier_t race_barrier;
static int race_rc[RACERS];

static void *race_init(void *arg)
{
    int i = (int)(intptr_t)arg;
    pthread_barrier_wait(&race_barrier);
    race_rc[i] = memprof_init(1000 + (uint64_t)i);
    return NULL;
}

static void test_concurrent_init_has_exactly_one_winner(void)
{
    pthread_t t[RACERS];
    pthread_barrier_init(&race_barrier, NULL, RACERS);
    for (int i = 0; i < RACERS; i++)
        CHECK_EQ(pthread_create(&t[i], NULL, race_init, (void *)(intptr_t)i), 0);
    for (int i = 0; i < RACERS; i++)
        pthread_join(t[i], NULL);
    pthread_barrier_destroy(&race_barrier);
    int winners = 0, winner = -1;
    for (int i = 0; i < RACERS; i++) {
        if (race_rc[i] == 0) {
            winners++;
            winner = i;
        } else {
            EXPECT_EQ(race_rc[i], -EALREADY);
        }
    }
    CHECK_EQ(winners, 1);
    EXPECT_EQ_U(stats().sampling_rate, 1000 + (uint64_t)winner);
    EXPECT_EQ(state(), MEMPROF_STATE_INITIALIZED);
}

/* What the preload plugin does before main under `memprof run`. */
static void start_as_the_command(uint64_t rate)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = rate;
    CHECK_EQ(memprof__init_owned(&c), 0);
    memprof__backend_register();
    CHECK_EQ(memprof_start(), 0);
}

static void test_program_init_joins_the_commands_profile_and_keeps_its_rate(void)
{
    start_as_the_command(8192);
    EXPECT_EQ(memprof_init(64 * 1024), MEMPROF_JOINED);
    memprof_config c;
    memprof_config_init(&c);
    EXPECT_EQ(memprof_init_config(&c), MEMPROF_JOINED);
    EXPECT_EQ_U(stats().sampling_rate, 8192);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
}

static void test_program_init_with_invalid_arguments_still_fails_under_the_command(void)
{
    start_as_the_command(8192);
    EXPECT_EQ(memprof_init((uint64_t)1 << 41), -EINVAL);
}

static void test_program_start_joins_the_commands_active_profile(void)
{
    start_as_the_command(8192);
    EXPECT_EQ(memprof_start(), MEMPROF_JOINED);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
}

static void test_program_stop_and_shutdown_leave_the_commands_profile_sampling(void)
{
    start_as_the_command(8192);
    EXPECT_EQ(memprof_stop(), MEMPROF_JOINED);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
    memprof_shutdown();
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
    expect_reads_work();
    /* The command itself still ends its profile. */
    EXPECT_EQ(memprof__stop_owned(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_STOPPED);
}

static void test_program_start_after_the_command_stopped_starts_sampling_again(void)
{
    start_as_the_command(8192);
    CHECK_EQ(memprof__stop_owned(), 0);
    EXPECT_EQ(memprof_start(), 0);
    EXPECT_EQ(state(), MEMPROF_STATE_ACTIVE);
}

static void test_a_programs_own_engine_is_not_joined(void)
{
    CHECK_EQ(memprof_init(4096), 0);
    memprof__backend_register();
    CHECK_EQ(memprof_start(), 0);
    EXPECT_EQ(memprof_init(4096), -EALREADY);
    EXPECT_EQ(memprof_start(), -EBUSY);
    EXPECT_EQ(memprof_stop(), 0);
    memprof_shutdown();
    EXPECT_EQ(state(), MEMPROF_STATE_SHUTDOWN);
}

static void test_write_exit_profile_without_a_launcher_returns_enotsup(void)
{
    EXPECT_EQ(memprof_write_exit_profile(), -ENOTSUP);
    CHECK_EQ(memprof_init(4096), 0);
    memprof__backend_register();
    CHECK_EQ(memprof_start(), 0);
    EXPECT_EQ(memprof_write_exit_profile(), -ENOTSUP);
}

static int launcher_writes;

static int launcher_writer(void)
{
    return ++launcher_writes == 1 ? 0 : -EALREADY;
}

static void test_write_exit_profile_is_the_launchers_writer(void)
{
    start_as_the_command(8192);
    memprof__set_exit_profile_writer(launcher_writer);
    EXPECT_EQ(memprof_write_exit_profile(), 0);
    EXPECT_EQ(memprof_write_exit_profile(), -EALREADY);
    EXPECT_EQ(launcher_writes, 2);
}

static void test_strerror_never_returns_null(void)
{
    for (int err = -5000; err <= 5000; err++) {
        const char *m = memprof_strerror(err);
        if (!m || !*m) {
            EXPECT(m && *m);
            printf("  memprof_strerror(%d) is %s\n", err, m ? "empty" : "NULL");
            return;
        }
    }
    /* Extremes: -INT_MIN is not representable, so negating it would be undefined (UBSan
     * builds, halt_on_error, fail here if it is computed in int). */
    const int extremes[] = {INT_MAX, INT_MIN + 1, INT_MIN};
    for (int i = 0; i < 3; i++) {
        const char *m = memprof_strerror(extremes[i]);
        EXPECT(m && *m);
    }
}

static void test_strerror_describes_the_library_codes(void)
{
    const char *unknown = memprof_strerror(-4095);
    const int codes[] = {EINVAL, EALREADY, ENOTCONN, EBUSY, ESHUTDOWN, ENOMEM, ENOTSUP, EIO};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++) {
        const char *m = memprof_strerror(-codes[i]);
        EXPECT(m && strcmp(m, unknown) != 0);
        /* Positive values mean the same. */
        EXPECT(m == memprof_strerror(codes[i]) || strcmp(m, memprof_strerror(codes[i])) == 0);
        for (size_t j = 0; j < i; j++)
            EXPECT(strcmp(m, memprof_strerror(-codes[j])) != 0);
    }
    EXPECT(strcmp(memprof_strerror(0), unknown) != 0);
}

static void test_strerror_describes_file_errors(void)
{
    /* What writing a profile can meet besides the library's own codes: a profile over
     * RLIMIT_FSIZE, a read-only file system, a directory as the path. */
#if HAVE_STRERRORDESC_NP
    const char *unknown = memprof_strerror(-4095);
    const int codes[] = {EFBIG, EROFS, EISDIR, ENAMETOOLONG};
    for (size_t i = 0; i < sizeof codes / sizeof codes[0]; i++)
        EXPECT(strcmp(memprof_strerror(-codes[i]), unknown) != 0);
    EXPECT(strcmp(memprof_strerror(-EFBIG), "File too large") == 0);
#else
    SKIP("no strerrordesc_np() in this C library");
#endif
}

static void test_version_matches_the_header(void)
{
    EXPECT_EQ_U(memprof_version(), MEMPROF_VERSION_HEX);
    const char *v = memprof_version_string();
    CHECK(v != NULL);
    char want[32];
    snprintf(want, sizeof want, "%u.%u.%u", (MEMPROF_VERSION_HEX >> 16) & 0xff,
             (MEMPROF_VERSION_HEX >> 8) & 0xff, MEMPROF_VERSION_HEX & 0xff);
    EXPECT(strcmp(v, want) == 0);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_calls_before_init_return_enotconn),
        TEST_CASE(test_get_stats_before_init_reports_uninitialized),
        TEST_CASE(test_init_twice_returns_ealready_and_keeps_the_rate),
        TEST_CASE(test_init_zero_selects_the_default_rate),
        TEST_CASE(test_init_rejects_a_rate_above_the_maximum),
        TEST_CASE(test_rate_one_is_accepted),
        TEST_CASE(test_start_without_a_backend_returns_enotsup),
        TEST_CASE(test_start_and_stop_transitions),
        TEST_CASE(test_reads_work_in_every_initialised_state),
        TEST_CASE(test_get_snapshot_rejects_null),
        TEST_CASE(test_shutdown_while_active),
        TEST_CASE(test_shutdown_while_initialized),
        TEST_CASE(test_shutdown_while_stopped),
        TEST_CASE(test_shutdown_twice_is_harmless),
        TEST_CASE(test_concurrent_init_has_exactly_one_winner),
        TEST_CASE(test_program_init_joins_the_commands_profile_and_keeps_its_rate),
        TEST_CASE(test_program_init_with_invalid_arguments_still_fails_under_the_command),
        TEST_CASE(test_program_start_joins_the_commands_active_profile),
        TEST_CASE(test_program_stop_and_shutdown_leave_the_commands_profile_sampling),
        TEST_CASE(test_program_start_after_the_command_stopped_starts_sampling_again),
        TEST_CASE(test_a_programs_own_engine_is_not_joined),
        TEST_CASE(test_write_exit_profile_without_a_launcher_returns_enotsup),
        TEST_CASE(test_write_exit_profile_is_the_launchers_writer),
        TEST_CASE(test_strerror_never_returns_null),
        TEST_CASE(test_strerror_describes_the_library_codes),
        TEST_CASE(test_strerror_describes_file_errors),
        TEST_CASE(test_version_matches_the_header),
    };
    return TEST_MAIN(cases, true);
}
