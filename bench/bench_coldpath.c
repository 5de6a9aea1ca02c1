/* SPDX-License-Identifier: MIT */
/*
 * Cold-path and symbolization costs (issue "Stacks and symbols"):
 *  1. ns per sample of the sampling cold path -- PRNG draw, stack capture, frame-source
 *     query, interning, Bloom filter and heap-map insert -- with a 20-frame stack, for each
 *     unwinder (frame pointers, DWARF). Every allocation is sampled (rate 1, 1 MiB blocks),
 *     so the loop measures nothing but the cold path; the blocks are freed again outside
 *     the timed region so the heap map never fills.
 *  2. the time memprof_resolve_symbols() takes for 10,000 distinct 20-frame stacks whose
 *     addresses lie in libc's code (with its debug information when installed): stacks
 *     made from 5,000 call sites, then stacks whose every address is new.
 * Targets: <= 1 us per sample with DWARF unwinding; <= 1 s for the 10,000 stacks. Times are
 * the thread's CPU time (CLOCK_THREAD_CPUTIME_ID).
 * Built against the static internal library; run it directly (bench/run.sh does).
 */
#define _GNU_SOURCE
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "config.h"

#include <memprof/memprof.h>
#include <memprof/runtime.h>

#include "core/engine.h"

#define DEPTH   20
#define SAMPLES 20000
#define ROUNDS  5

/* CPU time of this (single) thread, not wall time: on a shared, busy machine the wall
 * clock also counts the time the thread waited for a core. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return ts.tv_sec + ts.tv_nsec / 1e9;
}

static uint64_t next_id = 1;

/* Each level a real frame (gcc: noipa; clang has none, and needs no tail calls). */
#if defined(__clang__)
#define KEEP_FRAME __attribute__((noinline, disable_tail_calls))
#else
#define KEEP_FRAME __attribute__((noipa))
#endif

/* Recurses to DEPTH frames, then reports `n` sampled allocations from the leaf. */
KEEP_FRAME static double at_depth(int depth, int n)
{
    if (depth > 1) {
        double t = at_depth(depth - 1, n);
        __asm__ volatile("" ::: "memory");
        return t;
    }
    double t0 = now_s();
    for (int i = 0; i < n; i++)
        memprof_report_alloc(next_id++, 1 << 20);
    return now_s() - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* Mean native frames per sample over the last cold_path_ns() run, from the stats: a check
 * that the unwinder really walked the 20-frame chain (a broken frame-pointer chain would
 * make the frame-pointer row measure a one-frame walk). */
static double mean_depth;

static double cold_path_ns(uint32_t unwinder)
{
    memprof__engine.unwinder = unwinder;
    memprof_stats before = {.size = sizeof before}, after = {.size = sizeof after};
    memprof_get_stats(&before);
    double runs[ROUNDS];
    for (int r = 0; r < ROUNDS; r++) {
        uint64_t first = next_id;
        runs[r] = at_depth(DEPTH, SAMPLES) / SAMPLES * 1e9;
        for (uint64_t id = first; id < next_id; id++)
            memprof_report_free(id);
    }
    memprof_get_stats(&after);
    uint64_t n = after.total_samples - before.total_samples;
    mean_depth = n ? (double)(after.stack_depth_total - before.stack_depth_total) / (double)n : 0;
    qsort(runs, ROUNDS, sizeof *runs, cmp_double);
    return runs[ROUNDS / 2];
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *data)
{
    (void)size;
    uintptr_t *range = data;
    if (!strstr(info->dlpi_name, "libc.so"))
        return 0;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_LOAD && (info->dlpi_phdr[i].p_flags & PF_X)) {
            range[0] = info->dlpi_addr + info->dlpi_phdr[i].p_vaddr;
            range[1] = range[0] + info->dlpi_phdr[i].p_memsz;
            return 1;
        }
    return 0;
}

int main(void)
{
    memprof__backend_register(); /* this benchmark feeds the engine itself */
    memprof_config cfg;
    memprof_config_init(&cfg);
    cfg.sampling_rate = 1;
    if (memprof_init_config(&cfg) != 0 || memprof_start() != 0) {
        fprintf(stderr, "bench_coldpath: cannot start the engine\n");
        return 1;
    }
    printf("## Sampling cold path (capture + intern + insert), %d-frame stack\n\n", DEPTH);
    printf("| unwinder | ns per sample | frames captured (mean) | target |\n|---|---|---|---|\n");
    double ns = cold_path_ns(MEMPROF_UNWIND_FP);
    printf("| frame pointers | %.0f | %.1f | - |\n", ns, mean_depth);
#if HAVE_LIBUNWIND
    ns = cold_path_ns(MEMPROF_UNWIND_DWARF);
    printf("| DWARF | %.0f | %.1f | <= 1000 |\n", ns, mean_depth);
#else
    printf("| DWARF | not built (no libunwind) | - | <= 1000 |\n");
#endif

    /* 10,000 distinct stacks of 20 addresses in libc's code: first drawn from a pool of
     * 5,000 call sites (a big real profile), then with every address new (the worst case:
     * nothing shared, ~200,000 addresses, cold caches). */
    uintptr_t range[2] = {0, 0};
    dl_iterate_phdr(find_libc, range);
    if (!range[0]) {
        fprintf(stderr, "bench_coldpath: libc not found\n");
        return 1;
    }
    printf("\n## Symbolization of 10,000 distinct %d-frame stacks\n\n", DEPTH);
    printf("| addresses | new addresses resolved | CPU seconds | target |\n|---|---|---|---|\n");
    srand(42);
    uintptr_t pool[5000];
    for (int i = 0; i < 5000; i++)
        pool[i] = range[0] + ((uintptr_t)rand() * 7919u) % (range[1] - range[0]);
    for (int worst = 0; worst < 2; worst++) {
        uintptr_t frames[DEPTH];
        for (int s = 0; s < 10000; s++) {
            for (int i = 0; i < DEPTH; i++)
                frames[i] = worst ? range[0] + ((uintptr_t)rand() * 7919u) % (range[1] - range[0])
                                  : pool[rand() % 5000];
            memprof__record(next_id++ | MEMPROF_REPORT_KEY_BIT, 4096, frames, DEPTH, false);
        }
        double t0 = now_s();
        int resolved = memprof_resolve_symbols();
        printf("| %s | %d | %.3f | %s |\n",
               worst ? "all distinct (worst case)" : "5,000 call sites", resolved, now_s() - t0,
               worst ? "-" : "<= 1.0");
    }
    return 0;
}
