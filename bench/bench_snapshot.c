/* SPDX-License-Identifier: MIT */
/*
 * bench_snapshot: what it costs to look at a big profile -- memprof_get_snapshot(),
 * memprof_resolve_symbols() and memprof_snapshot_write() in every format -- with 10,000
 * distinct 20-frame stacks and 1M live samples.
 *
 * Runs in-process on the static internal library (no interposition). The samples are
 * recorded with memprof__record() (the cold path after stack capture) under fake
 * addresses; the stacks' addresses lie in libc's code, drawn from a pool of 5,000 call
 * sites, so resolution does real work (libdw with file:line and inlined frames when libc's
 * debug information is installed, the ELF symbol table otherwise). Each step is timed once,
 * in CPU seconds of the process (CLOCK_PROCESS_CPUTIME_ID), in the order a user pays for
 * them: the first snapshot, the first resolution (cold caches), a second snapshot, then each
 * format written to a temporary directory (symbols already cached), with the file size.
 * --samples and --stacks change the sizes.
 *
 * Usage: bench_snapshot [--stacks N] [--samples N]   Prints a Markdown table on stdout.
 * A benchmark, not a test: it asserts nothing.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/engine.h"
#include "memprof/memprof.h"

#define DEPTH 20u
#define SITES 5000u

/* CPU time of the process (user + sys, the writes' system calls included), not wall time:
 * on a shared, busy machine the wall clock also counts the time spent waiting for a core. */
static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static uint64_t rng = 0x2545F4914F6CDD1Dull;
static uint64_t next_random(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
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

static void row(const char *what, double seconds, const char *extra)
{
    printf("| %s | %.3f | %s |\n", what, seconds, extra);
    fflush(stdout);
}

int main(int argc, char **argv)
{
    unsigned nstacks = 10000;
    uint64_t nsamples = 1000000;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--stacks") && i + 1 < argc)
            nstacks = (unsigned)strtoul(argv[++i], NULL, 10);
        else if (!strcmp(argv[i], "--samples") && i + 1 < argc)
            nsamples = strtoull(argv[++i], NULL, 10);
        else {
            fprintf(stderr, "usage: bench_snapshot [--stacks N] [--samples N]\n");
            return 2;
        }
    }
    if (nstacks < 1)
        nstacks = 1;

    uintptr_t range[2] = {0, 0};
    dl_iterate_phdr(find_libc, range);
    if (!range[0]) {
        fprintf(stderr, "bench_snapshot: libc not found\n");
        return 1;
    }
    uintptr_t *pool = malloc(SITES * sizeof *pool);
    uintptr_t *stacks = malloc((size_t)nstacks * DEPTH * sizeof *stacks);
    if (!pool || !stacks)
        return 1;
    for (unsigned i = 0; i < SITES; i++)
        pool[i] = range[0] + (uintptr_t)(next_random() % (range[1] - range[0]));
    /* Distinct stacks: the leaf frame alone makes each one unique. */
    for (unsigned s = 0; s < nstacks; s++) {
        stacks[(size_t)s * DEPTH] = pool[s % SITES] + s / SITES;
        for (unsigned f = 1; f < DEPTH; f++)
            stacks[(size_t)s * DEPTH + f] = pool[next_random() % SITES];
    }

    memprof_config cfg;
    memprof_config_init(&cfg);
    /* Room for the live samples below the heap map's load limit. */
    cfg.heap_map_capacity = nsamples * 2 > (1u << 20) ? nsamples * 2 : (1u << 20);
    int rc = memprof_init_config(&cfg);
    if (rc == 0) {
        memprof__backend_register(); /* start needs a backend; samples come from here */
        rc = memprof_start();
    }
    if (rc != 0) {
        fprintf(stderr, "bench_snapshot: cannot start the engine: %s\n", memprof_strerror(rc));
        return 1;
    }

    double t0 = now_s();
    const uint64_t key_base = 0x7f0000000000ull;
    for (uint64_t i = 0; i < nsamples; i++)
        memprof__record(key_base + i * 64, 16 + (size_t)(next_random() % 4081),
                        stacks + (size_t)(i % nstacks) * DEPTH, DEPTH, false);
    double record_s = now_s() - t0;

    memprof_stats st;
    memset(&st, 0, sizeof st);
    st.size = sizeof st;
    memprof_get_stats(&st);

    printf("| step | CPU seconds | notes |\n|---|---:|---|\n");
    char note[160];
    snprintf(note, sizeof note,
             "%" PRIu64 " live samples, %" PRIu64 " distinct stacks "
             "(set-up, not a user-visible step)",
             st.live_samples, st.unique_stacks);
    row("recording the samples (memprof__record)", record_s, note);

    memprof_snapshot *snap = NULL;
    t0 = now_s();
    rc = memprof_get_snapshot(&snap);
    double snap_s = now_s() - t0;
    if (rc != 0) {
        fprintf(stderr, "bench_snapshot: memprof_get_snapshot: %s\n", memprof_strerror(rc));
        return 1;
    }
    snprintf(note, sizeof note, "%zu samples, %zu sites", memprof_snapshot_live_samples(snap),
             memprof_snapshot_site_count(snap));
    row("memprof_get_snapshot (first)", snap_s, note);
    memprof_free_snapshot(snap);

    t0 = now_s();
    int resolved = memprof_resolve_symbols();
    double resolve_s = now_s() - t0;
    snprintf(note, sizeof note, "%d addresses newly resolved (cold caches)", resolved);
    row("memprof_resolve_symbols", resolve_s, note);

    t0 = now_s();
    rc = memprof_get_snapshot(&snap);
    snap_s = now_s() - t0;
    if (rc != 0)
        return 1;
    row("memprof_get_snapshot (again)", snap_s, "");

    char dir[] = "/tmp/memprof-bench-snapshot-XXXXXX";
    if (!mkdtemp(dir)) {
        perror("bench_snapshot: mkdtemp");
        return 1;
    }
    static const struct {
        memprof_format fmt;
        const char *name, *ext;
    } formats[] = {
        {MEMPROF_FORMAT_PPROF, "pprof", "pb.gz"},
        {MEMPROF_FORMAT_SPEEDSCOPE, "speedscope", "json"},
        {MEMPROF_FORMAT_COLLAPSED, "collapsed", "folded"},
        {MEMPROF_FORMAT_TEXT, "text", "txt"},
        {MEMPROF_FORMAT_HTML, "html", "html"},
    };
    for (size_t i = 0; i < sizeof formats / sizeof *formats; i++) {
        char path[128], what[96];
        snprintf(path, sizeof path, "%s/profile.%s", dir, formats[i].ext);
        t0 = now_s();
        rc = memprof_snapshot_write(snap, path, formats[i].fmt);
        double w = now_s() - t0;
        struct stat sb;
        if (rc == 0 && stat(path, &sb) == 0)
            snprintf(note, sizeof note, "%.2f MiB written", (double)sb.st_size / 1048576.0);
        else
            snprintf(note, sizeof note, "failed: %s", memprof_strerror(rc));
        snprintf(what, sizeof what, "memprof_snapshot_write, %s", formats[i].name);
        row(what, w, note);
        unlink(path);
    }
    rmdir(dir);
    memprof_free_snapshot(snap);
    free(stacks);
    free(pool);
    return 0;
}
