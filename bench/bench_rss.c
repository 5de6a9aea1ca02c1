/* SPDX-License-Identifier: MIT */
/*
 * bench_rss: resident memory of the profiler's tables (heap map, Bloom filters, stack
 * table), idle and with 1k, 100k and 1M live samples, against the target of at most
 * 2 MiB plus 64 bytes per live sample; and beside it what the profiler adds to the
 * process's private writable memory (VmData: what RLIMIT_DATA counts and, under
 * vm.overcommit_memory=2, the commit charge, touched or not, in the process and in each
 * forked child) and to its address space (VmSize: what RLIMIT_AS counts), with the sample
 * heap set up as the preload plugin has it.
 *
 * Runs in-process on the engine itself (linked from the static internal library, no
 * interposition): resident pages from /proc/self/statm are read before memprof_init, after
 * init+start ("idle"), and after recording each number of samples with memprof__record()
 * (the cold path after stack capture) under fake, 16-byte-aligned addresses. Samples are
 * spread over a pool of distinct stacks (--stacks, default 1000, 16 frames each) so the
 * stack table is counted too. The heap map is configured for 2M entries (the default 1M
 * could not hold 1M samples below its load limit). Everything after the first reading is
 * profiler memory: the benchmark allocates nothing else after it.
 *
 * Usage: bench_rss [--stacks N] [--max N]   Prints a Markdown table on stdout.
 * A benchmark, not a test: it asserts nothing.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/engine.h"
#include "memprof/memprof.h"

#define DEPTH             16u
#define MIB               (1024.0 * 1024.0)
#define TARGET_FIXED      (2u * 1024u * 1024u)
#define TARGET_PER_SAMPLE 64u

/* A field of /proc/self/status ("VmData", "VmSize") in bytes. */
static uint64_t status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t len = strlen(field);
    unsigned long long kib = 0;
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, len) && line[len] == ':')
            kib = strtoull(line + len + 1, NULL, 10);
    if (f)
        fclose(f);
    return (uint64_t)kib * 1024;
}

static uint64_t data_base, size_base;

static uint64_t rss_bytes(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    unsigned long long size = 0, resident = 0;
    if (!f || fscanf(f, "%llu %llu", &size, &resident) != 2) {
        fprintf(stderr, "bench_rss: cannot read /proc/self/statm\n");
        exit(1);
    }
    fclose(f);
    return (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
}

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static void row(const char *what, uint64_t n, uint64_t bytes, uint64_t idle)
{
    uint64_t target = TARGET_FIXED + (uint64_t)TARGET_PER_SAMPLE * n;
    char per[32] = "";
    if (n)
        snprintf(per, sizeof per, "%.1f", (double)(bytes > idle ? bytes - idle : 0) / (double)n);
    printf("| %s | %" PRIu64 " | %.2f | %s | %.2f | %s | %.2f | %.2f |\n", what, n, bytes / MIB,
           n ? per : "–", target / MIB, bytes <= target ? "yes" : "**no**",
           (double)(status_bytes("VmData") - data_base) / MIB,
           (double)(status_bytes("VmSize") - size_base) / MIB);
}

int main(int argc, char **argv)
{
    unsigned nstacks = 1000;
    uint64_t max = 1000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--stacks") && i + 1 < argc)
            nstacks = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--max") && i + 1 < argc)
            max = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_rss [--stacks N] [--max N]\n");
            return 2;
        }
    }
    if (nstacks < 1)
        nstacks = 1;

    /* Fake stacks: code-like addresses, leaf first. */
    uintptr_t *stacks = malloc((size_t)nstacks * DEPTH * sizeof *stacks);
    if (!stacks)
        return 1;
    for (size_t i = 0; i < (size_t)nstacks * DEPTH; i++)
        stacks[i] = 0x555555554000u + (uintptr_t)(next_random() % (1u << 24));

    uint64_t base = rss_bytes();
    data_base = status_bytes("VmData");
    size_base = status_bytes("VmSize");

    memprof_config cfg;
    memprof_config_init(&cfg);
    cfg.heap_map_capacity = 2u << 20;
    memprof__engine_use_sample_heap(); /* as under the preload plugin */
    int rc = memprof_init_config(&cfg);
    if (rc == 0) {
        memprof__backend_register(); /* start needs a backend; samples come from here */
        rc = memprof_start();
    }
    if (rc != 0) {
        fprintf(stderr, "bench_rss: cannot start the engine: %s\n", memprof_strerror(rc));
        return 1;
    }
    uint64_t idle = rss_bytes() - base;

    printf("| state | live samples | RSS of the tables (MiB) | bytes per live sample above idle "
           "| target (MiB) | within target | VmData added (MiB) | VmSize added (MiB) |\n");
    printf("|---|---:|---:|---:|---:|---|---:|---:|\n");
    row("idle (after init and start)", 0, idle, idle);

    static const uint64_t checkpoints[] = {1000, 100000, 1000000, 4000000};
    uint64_t done = 0;
    const uint64_t key_base = 0x7f0000000000ull;
    for (size_t c = 0; c < sizeof checkpoints / sizeof *checkpoints && checkpoints[c] <= max; c++) {
        for (; done < checkpoints[c]; done++) {
            unsigned s = (unsigned)(done % nstacks);
            size_t size = 16 + (size_t)(next_random() % 4081);
            memprof__record(key_base + done * 4096 + (done % 7) * 16, size,
                            stacks + (size_t)s * DEPTH, DEPTH, false);
        }
        char what[64];
        if (done % 1000000 == 0)
            snprintf(what, sizeof what, "%" PRIu64 "M live samples", done / 1000000);
        else
            snprintf(what, sizeof what, "%" PRIu64 "k live samples", done / 1000);
        row(what, done, rss_bytes() - base, idle);
    }

    memprof_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    if (memprof_get_stats(&st) == 0)
        printf("\nEngine after the run: %" PRIu64 " live samples, %" PRIu64
               " heap-map slots used of %" PRIu64 " capacity, %" PRIu64 " dropped (map full), "
               "%" PRIu64 " distinct stacks (%u frames each), %" PRIu64 " Bloom filter rebuilds, "
               "%.1f MiB of address space mapped for the tables.\n",
               st.live_samples, st.heap_map_used, st.heap_map_capacity, st.heap_map_full_drops,
               st.unique_stacks, DEPTH, st.bloom_rebuilds, st.profiler_bytes / MIB);
    free(stacks);
    return 0;
}
