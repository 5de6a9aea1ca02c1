/* SPDX-License-Identifier: MIT */
/*
 * ABI pins for the public headers (suite `abi`): the size and the offset of every member of
 * every public struct, the value of every public enum constant and flag, and the agreement
 * between the headers' version and the library's. A failure here means a change to
 * include/memprof/ moved something a compiled caller depends on.
 *
 * The public structs are size-stamped and may only grow by appending members
 * (doc/architecture.md, Decisions: ABI discipline): such a change adds OFF() lines for the
 * new members and updates the SIZE() line, and nothing else in this file may change. Any other difference is an ABI break,
 * which needs a new soname (abi/README.md). The numbers are for LP64 targets (x86_64,
 * aarch64, ppc64el, s390x, riscv64, ...); elsewhere the test is skipped.
 */
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <memprof/memprof.h>
#include <memprof/runtime.h>

static int failures;

static void check(const char *what, size_t got, size_t want)
{
    if (got != want) {
        printf("FAIL %s: %zu, pinned %zu\n", what, got, want);
        failures++;
    }
}

#define SIZE(type, n)        check("sizeof(" #type ")", sizeof(type), (n))
#define OFF(type, member, n) check("offsetof(" #type ", " #member ")", offsetof(type, member), (n))
#define VALUE(constant, n)   check(#constant, (size_t)(constant), (n))

static void pin_structs(void)
{
    SIZE(memprof_config, 72);
    OFF(memprof_config, size, 0);
    OFF(memprof_config, sampling_rate, 8);
    OFF(memprof_config, heap_map_capacity, 16);
    OFF(memprof_config, max_stacks, 24);
    OFF(memprof_config, max_frames, 32);
    OFF(memprof_config, flags, 36);
    OFF(memprof_config, seed, 40);
    OFF(memprof_config, log_fn, 48);
    OFF(memprof_config, log_ctx, 56);
    OFF(memprof_config, unwinder, 64);
    OFF(memprof_config, reserved0, 68);

    SIZE(memprof_estimate, 88);
    OFF(memprof_estimate, size, 0);
    OFF(memprof_estimate, live_samples, 8);
    OFF(memprof_estimate, bytes, 16);
    OFF(memprof_estimate, bytes_low, 24);
    OFF(memprof_estimate, bytes_high, 32);
    OFF(memprof_estimate, count, 40);
    OFF(memprof_estimate, count_low, 48);
    OFF(memprof_estimate, count_high, 56);
    OFF(memprof_estimate, sampling_rate, 64);
    OFF(memprof_estimate, timestamp_ns, 72);
    OFF(memprof_estimate, low_confidence, 80);
    OFF(memprof_estimate, reserved, 84);

    SIZE(memprof_sample_info, 48);
    OFF(memprof_sample_info, size, 0);
    OFF(memprof_sample_info, bytes, 8);
    OFF(memprof_sample_info, estimated_bytes, 16);
    OFF(memprof_sample_info, estimated_count, 24);
    OFF(memprof_sample_info, timestamp_ns, 32);
    OFF(memprof_sample_info, stack_id, 40);
    OFF(memprof_sample_info, reserved, 44);

    SIZE(memprof_site_info, 80);
    OFF(memprof_site_info, size, 0);
    OFF(memprof_site_info, stack_id, 8);
    OFF(memprof_site_info, reserved, 12);
    OFF(memprof_site_info, live_samples, 16);
    OFF(memprof_site_info, live_bytes, 24);
    OFF(memprof_site_info, live_bytes_low, 32);
    OFF(memprof_site_info, live_bytes_high, 40);
    OFF(memprof_site_info, live_count, 48);
    OFF(memprof_site_info, alloc_samples, 56);
    OFF(memprof_site_info, alloc_bytes, 64);
    OFF(memprof_site_info, alloc_count, 72);

    SIZE(memprof_frame, 64);
    OFF(memprof_frame, size, 0);
    OFF(memprof_frame, function, 8);
    OFF(memprof_frame, file, 16);
    OFF(memprof_frame, line, 24);
    OFF(memprof_frame, flags, 28);
    OFF(memprof_frame, module, 32);
    OFF(memprof_frame, address, 40);
    OFF(memprof_frame, load_bias, 48);
    OFF(memprof_frame, build_id, 56);

    SIZE(memprof_stats, 216);
    OFF(memprof_stats, size, 0);
    OFF(memprof_stats, state, 8);
    OFF(memprof_stats, reserved, 12);
    OFF(memprof_stats, sampling_rate, 16);
    OFF(memprof_stats, total_samples, 24);
    OFF(memprof_stats, live_samples, 32);
    OFF(memprof_stats, freed_samples, 40);
    OFF(memprof_stats, unique_stacks, 48);
    OFF(memprof_stats, estimated_live_bytes, 56);
    OFF(memprof_stats, heap_map_capacity, 64);
    OFF(memprof_stats, heap_map_used, 72);
    OFF(memprof_stats, heap_map_full_drops, 80);
    OFF(memprof_stats, stack_table_capacity, 88);
    OFF(memprof_stats, stack_table_overflows, 96);
    OFF(memprof_stats, bloom_rebuilds, 104);
    OFF(memprof_stats, bloom_fill_permille, 112);
    OFF(memprof_stats, death_during_birth, 120);
    OFF(memprof_stats, tombstones_reused, 128);
    OFF(memprof_stats, reentrant_skips, 136);
    OFF(memprof_stats, truncated_stacks, 144);
    OFF(memprof_stats, profiler_bytes, 152);
    OFF(memprof_stats, unwinder, 160);
    OFF(memprof_stats, stack_depth_min, 164);
    OFF(memprof_stats, stack_depth_total, 168);
    OFF(memprof_stats, shallow_stacks, 176);
    OFF(memprof_stats, unwind_confidence_permille, 184);
    OFF(memprof_stats, resolved_addresses, 192);
    OFF(memprof_stats, unresolved_addresses, 200);
    OFF(memprof_stats, write_failures, 208);

    SIZE(memprof_runtime_frame, 32);
    OFF(memprof_runtime_frame, size, 0);
    OFF(memprof_runtime_frame, function, 8);
    OFF(memprof_runtime_frame, file, 16);
    OFF(memprof_runtime_frame, line, 24);
    OFF(memprof_runtime_frame, flags, 28);

    SIZE(memprof_frame_source, 48);
    OFF(memprof_frame_source, size, 0);
    OFF(memprof_frame_source, name, 8);
    OFF(memprof_frame_source, capture, 16);
    OFF(memprof_frame_source, resolve, 24);
    OFF(memprof_frame_source, is_eval_frame, 32);
    OFF(memprof_frame_source, ctx, 40);

    SIZE(memprof_peak_info, 80);
    OFF(memprof_peak_info, size, 0);
    OFF(memprof_peak_info, bytes, 8);
    OFF(memprof_peak_info, bytes_low, 16);
    OFF(memprof_peak_info, bytes_high, 24);
    OFF(memprof_peak_info, count, 32);
    OFF(memprof_peak_info, samples, 40);
    OFF(memprof_peak_info, time_ns, 48);
    OFF(memprof_peak_info, duration_ns, 56);
    OFF(memprof_peak_info, allocated_bytes, 64);
    OFF(memprof_peak_info, temporary_threshold_ns, 72);

    SIZE(memprof_heap_point, 24);
    OFF(memprof_heap_point, time_ns, 0);
    OFF(memprof_heap_point, live_bytes, 8);
    OFF(memprof_heap_point, allocated_bytes, 16);

    SIZE(memprof_view_site, 96);
    OFF(memprof_view_site, size, 0);
    OFF(memprof_view_site, stack_id, 8);
    OFF(memprof_view_site, flags, 12);
    OFF(memprof_view_site, bytes, 16);
    OFF(memprof_view_site, bytes_low, 24);
    OFF(memprof_view_site, bytes_high, 32);
    OFF(memprof_view_site, count, 40);
    OFF(memprof_view_site, samples, 48);
    OFF(memprof_view_site, lifetime_p50_ns, 56);
    OFF(memprof_view_site, lifetime_p90_ns, 64);
    OFF(memprof_view_site, leak_rate, 72);
    OFF(memprof_view_site, thread_id, 80);
    OFF(memprof_view_site, thread_name, 88);
}

static void pin_constants(void)
{
    /* Enums travel by value (memprof_snapshot_write) and in uint32_t fields. */
    SIZE(memprof_format, sizeof(int));
    SIZE(memprof_log_level, sizeof(int));
    SIZE(memprof_unwinder, sizeof(int));
    SIZE(memprof_state, sizeof(int));
    SIZE(memprof_view, sizeof(int));

    VALUE(MEMPROF_LOG_ERROR, 0);
    VALUE(MEMPROF_LOG_WARN, 1);
    VALUE(MEMPROF_LOG_INFO, 2);
    VALUE(MEMPROF_LOG_DEBUG, 3);

    VALUE(MEMPROF_UNWIND_DEFAULT, 0);
    VALUE(MEMPROF_UNWIND_FP, 1);
    VALUE(MEMPROF_UNWIND_DWARF, 2);

    VALUE(MEMPROF_FORMAT_AUTO, 0);
    VALUE(MEMPROF_FORMAT_PPROF, 1);
    VALUE(MEMPROF_FORMAT_SPEEDSCOPE, 2);
    VALUE(MEMPROF_FORMAT_COLLAPSED, 3);
    VALUE(MEMPROF_FORMAT_TEXT, 4);
    VALUE(MEMPROF_FORMAT_HTML, 5);

    VALUE(MEMPROF_VIEW_LIVE, 0);
    VALUE(MEMPROF_VIEW_ALLOC, 1);
    VALUE(MEMPROF_VIEW_PEAK, 2);
    VALUE(MEMPROF_VIEW_TEMPORARY, 3);
    VALUE(MEMPROF_VIEW_LEAKS, 4);
    VALUE(MEMPROF_SITE_LOW_INFORMATION, 0x1);
    VALUE(MEMPROF_SITE_LEAK_SUSPECT, 0x2);

    VALUE(MEMPROF_STATE_UNINITIALIZED, 0);
    VALUE(MEMPROF_STATE_INITIALIZED, 1);
    VALUE(MEMPROF_STATE_ACTIVE, 2);
    VALUE(MEMPROF_STATE_STOPPED, 3);
    VALUE(MEMPROF_STATE_SHUTDOWN, 4);

    VALUE(MEMPROF_FRAME_INLINED, 0x1);
    VALUE(MEMPROF_FRAME_RUNTIME, 0x2);
    VALUE(MEMPROF_FRAME_UNRESOLVED, 0x4);
    VALUE(MEMPROF_FRAME_TRUNCATED, 0x8);
    VALUE(MEMPROF_RUNTIME_FRAME_ENTRY, 0x1);

    /* Limits a binding may size its arrays with. */
    VALUE(MEMPROF_MAX_FRAME_SOURCES, 4);
    VALUE(MEMPROF_MAX_RUNTIME_FRAMES, 128);
    VALUE(MEMPROF_DEFAULT_SAMPLING_RATE, 524288);
}

/* The headers a program was compiled with and the library it runs with must agree, or the
 * pins above describe the wrong library. */
static void check_version(void)
{
    check("memprof_version() == MEMPROF_VERSION_HEX", memprof_version(), MEMPROF_VERSION_HEX);
    if (strcmp(memprof_version_string(), MEMPROF_VERSION_STRING) != 0) {
        printf("FAIL memprof_version_string() \"%s\" != MEMPROF_VERSION_STRING \"%s\"\n",
               memprof_version_string(), MEMPROF_VERSION_STRING);
        failures++;
    }
    check("MEMPROF_VERSION_HEX layout", MEMPROF_VERSION_HEX,
          ((size_t)MEMPROF_VERSION_MAJOR << 16) | ((size_t)MEMPROF_VERSION_MINOR << 8) |
              (size_t)MEMPROF_VERSION_PATCH);
}

int main(void)
{
    if (sizeof(void *) != 8 || sizeof(long) != 8 || sizeof(size_t) != 8) {
        printf("SKIP: the pinned layouts are for LP64 targets\n");
        return 77;
    }
    pin_structs();
    pin_constants();
    check_version();
    if (failures) {
        printf("%d ABI pin(s) differ: see the comment at the top of %s\n", failures, __FILE__);
        return 1;
    }
    printf("OK: public struct layouts, constants and version match their pins\n");
    return 0;
}
