/* SPDX-License-Identifier: MIT */
/*
 * Full tables and stacks too deep to keep, with real allocations and real stack walks: the
 * program configures the engine itself (small tables through memprof_init_config) and
 * checks from inside that every sample it could not keep is counted in memprof_stats,
 * that nothing crashes, and that its own data is intact. argv: BACKEND MODE [ARGS]:
 * BACKEND is "preload" (run with LD_PRELOAD and MEMPROF_START=0) or "got" (no plugin:
 * memprof_start() patches the GOT). The rate is MEMPROF_RATE (a plain number; unset: the
 * default); block sizes scale with it so a sample is likely at any rate.
 *
 *   heap-map-full       heap map of 4096 entries, 3 x 4096 live blocks: the samples beyond
 *                       the capacity are dropped and counted (total = live + freed + drops),
 *                       a snapshot and a text profile report the drops; after the blocks are
 *                       freed the map takes new samples again without further drops.
 *   stack-table-full    stack table of 16 stacks, 300 distinct call stacks (recursion to
 *                       every depth from 1 to 300): at most 16 stacks are interned, the rest
 *                       is counted as overflows, and every live sample is still in some site
 *                       of the snapshot (the overflow site) and in the text profile's count.
 *   deep-recursion UNWIND [MAX_FRAMES]  allocations at every 1000th level of a 100,000-deep
 *                       recursion (UNWIND dwarf or fp): each such stack is cut at MAX_FRAMES
 *                       (default 64), counted as truncated, its leaf is the allocating
 *                       function and its last frame carries MEMPROF_FRAME_TRUNCATED.
 */
#include "limits.h"

#include <pthread.h>
#include <unistd.h>

enum { HM_CAP = 4096, N_STACKS = 16, STACK_DEPTHS = 300, DEEP = 100000, DEEP_EVERY = 1000 };

/* Bytes per block: at rate 1 small blocks, else twice the rate (sampled with p = 86 %). */
static size_t block_size(void)
{
    uint64_t rate = limits_stats().sampling_rate;
    return rate < 32 ? 64 : (size_t)(2 * rate);
}

/* A temporary directory for the profiles the program writes itself. */
static char tmpdir[256];
static void make_tmpdir(void)
{
    const char *base = getenv("TMPDIR");
    snprintf(tmpdir, sizeof tmpdir, "%s/memprof-limits-XXXXXX", base && *base ? base : "/tmp");
    CHECK(mkdtemp(tmpdir), "mkdtemp: %s", strerror(errno));
}

/* Writes `snap` as a text profile and returns its "Health:" line (static buffer). */
static const char *health_line(const memprof_snapshot *snap)
{
    static char line[1024];
    char path[300];
    snprintf(path, sizeof path, "%s/prof.txt", tmpdir);
    int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT);
    CHECK(rc == 0, "memprof_snapshot_write: %s", memprof_strerror(rc));
    FILE *f = fopen(path, "r");
    CHECK(f, "cannot read back %s", path);
    line[0] = 0;
    char buf[1024];
    while (fgets(buf, sizeof buf, f))
        if (!strncmp(buf, "Health:", 7))
            snprintf(line, sizeof line, "%s", buf);
    fclose(f);
    unlink(path);
    rmdir(tmpdir);
    CHECK(line[0], "no Health: line in the text profile");
    printf("%s", line);
    return line;
}

/* ---- heap-map-full ----------------------------------------------------------------------- */

void *limits_hold_block(size_t size, uint64_t tag);

__attribute__((noinline)) void *limits_hold_block(size_t size, uint64_t tag)
{
    uint64_t *p = malloc(size);
    CHECK(p, "malloc(%zu) failed", size);
    *p = tag; /* only the first page is touched: at the default rate blocks are 1 MiB */
    return p;
}

static int heap_map_full(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = limits_rate();
    c.heap_map_capacity = HM_CAP;
    limits_start(&c);
    size_t size = block_size();
    enum { N = 3 * HM_CAP };
    static uint64_t *blocks[N];
    for (uint64_t i = 0; i < N; i++)
        blocks[i] = limits_hold_block(size + i % 64, i * 2654435761u);

    memprof_stats s = limits_stats();
    memprof_snapshot *snap = NULL;
    CHECK(memprof_get_snapshot(&snap) == 0, "memprof_get_snapshot failed");
    limits_print_stats("all blocks live");
    CHECK(s.heap_map_capacity == HM_CAP, "capacity %llu", (unsigned long long)s.heap_map_capacity);
    CHECK(s.heap_map_full_drops > 0, "no sample dropped with %d blocks in a %d-entry map", N,
          HM_CAP);
    CHECK(s.live_samples <= HM_CAP, "%llu live samples in a %d-entry map",
          (unsigned long long)s.live_samples, HM_CAP);
    CHECK(s.total_samples == s.live_samples + s.freed_samples + s.heap_map_full_drops,
          "samples taken (%llu) are not live + freed + dropped",
          (unsigned long long)s.total_samples);
    CHECK(memprof_snapshot_live_samples(snap) == s.live_samples, "snapshot has %zu samples",
          memprof_snapshot_live_samples(snap));
    char want[64];
    snprintf(want, sizeof want, "Health: %llu samples dropped",
             (unsigned long long)s.heap_map_full_drops);
    make_tmpdir();
    CHECK(strstr(health_line(snap), want), "the text profile does not say '%s'", want);
    memprof_free_snapshot(snap);

    for (uint64_t i = 0; i < N; i++) {
        CHECK(*blocks[i] == i * 2654435761u, "block %llu was overwritten", (unsigned long long)i);
        free(blocks[i]);
    }
    memprof_stats after = limits_stats();
    limits_print_stats("all blocks freed");
    /* Frees of blocks whose samples were dropped must not remove anything (or wrap). */
    CHECK(after.live_samples < 64, "%llu samples still live after freeing every block",
          (unsigned long long)after.live_samples);

    /* The map has room again: new samples are kept, none dropped. */
    for (uint64_t i = 0; i < HM_CAP / 2; i++)
        blocks[i] = limits_hold_block(size, i);
    memprof_stats again = limits_stats();
    limits_print_stats("after refilling half");
    CHECK(again.heap_map_full_drops == after.heap_map_full_drops,
          "%llu more drops with the map half full",
          (unsigned long long)(again.heap_map_full_drops - after.heap_map_full_drops));
    CHECK(again.live_samples > after.live_samples, "the new blocks were not sampled");
    for (uint64_t i = 0; i < HM_CAP / 2; i++)
        free(blocks[i]);
    printf("heap-map-full: ok\n");
    return 0;
}

/* ---- stack-table-full -------------------------------------------------------------------- */

uint64_t limits_distinct_stack(unsigned depth, size_t size, void **out);

/* Recurses `depth` times, then allocates: each depth is its own call stack. Returns the
 * sum of the depths on the way, so the program can check its own result. */
__attribute__((noinline)) uint64_t limits_distinct_stack(unsigned depth, size_t size, void **out)
{
    if (depth == 0) {
        *out = malloc(size);
        limits_touch(*out, 1);
        return 0;
    }
    uint64_t r = limits_distinct_stack(depth - 1, size, out) + depth;
    __asm__ volatile("" ::: "memory"); /* no tail call: keep one frame per level */
    return r;
}

static int stack_table_full(void)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = limits_rate();
    c.max_stacks = N_STACKS;
    limits_start(&c);
    size_t size = block_size();
    static void *blocks[STACK_DEPTHS];
    for (unsigned d = 0; d < STACK_DEPTHS; d++) {
        uint64_t sum = limits_distinct_stack(d + 1, size, &blocks[d]);
        CHECK(sum == (uint64_t)(d + 1) * (d + 2) / 2, "recursion to %u returned %llu", d + 1,
              (unsigned long long)sum);
        CHECK(blocks[d], "malloc failed");
    }
    memprof_stats s = limits_stats();
    memprof_snapshot *snap = NULL;
    CHECK(memprof_get_snapshot(&snap) == 0, "memprof_get_snapshot failed");
    limits_print_stats("300 distinct stacks");
    CHECK(s.stack_table_capacity == N_STACKS, "stack table capacity %llu",
          (unsigned long long)s.stack_table_capacity);
    CHECK(s.unique_stacks <= N_STACKS, "%llu stacks interned in a %d-stack table",
          (unsigned long long)s.unique_stacks, N_STACKS);
    CHECK(s.stack_table_overflows > 0, "no overflow with %d distinct stacks", STACK_DEPTHS);
    CHECK(s.heap_map_full_drops == 0, "samples dropped");
    size_t nsites = memprof_snapshot_site_count(snap);
    uint64_t in_sites = 0;
    for (size_t i = 0; i < nsites; i++) {
        memprof_site_info si = {.size = sizeof si};
        CHECK(memprof_snapshot_site(snap, i, &si) == 0, "site %zu", i);
        CHECK(memprof_snapshot_stack_depth(snap, si.stack_id) >= 0, "stack of site %zu", i);
        in_sites += si.live_samples;
    }
    printf("%zu sites hold %llu of %zu live samples\n", nsites, (unsigned long long)in_sites,
           memprof_snapshot_live_samples(snap));
    CHECK(nsites <= N_STACKS + 1, "%zu sites from a %d-stack table", nsites, N_STACKS);
    CHECK(in_sites == memprof_snapshot_live_samples(snap),
          "samples on the overflow stack are missing from the sites");
    char want[64];
    snprintf(want, sizeof want, " %llu stack-table overflows",
             (unsigned long long)s.stack_table_overflows);
    make_tmpdir();
    CHECK(strstr(health_line(snap), want), "the text profile does not say '%s'", want);
    memprof_free_snapshot(snap);
    for (unsigned d = 0; d < STACK_DEPTHS; d++)
        free(blocks[d]);
    limits_print_stats("all freed");
    CHECK(limits_stats().live_samples < 64, "samples left live after freeing");
    printf("stack-table-full: ok\n");
    return 0;
}

/* ---- deep-recursion ---------------------------------------------------------------------- */

struct deep {
    size_t size;
    unsigned nblocks;
    void *blocks[DEEP / DEEP_EVERY + 1];
};

void *limits_deep_alloc(size_t size);
uint64_t limits_deep(unsigned level, struct deep *d);

__attribute__((noinline)) void *limits_deep_alloc(size_t size)
{
    void *p = malloc(size);
    limits_touch(p, 2);
    __asm__ volatile("" ::: "memory"); /* no tail call into malloc: keep this frame */
    return p;
}

__attribute__((noinline)) uint64_t limits_deep(unsigned level, struct deep *d)
{
    if (level % DEEP_EVERY == 0)
        d->blocks[d->nblocks++] = limits_deep_alloc(d->size);
    uint64_t r = level == DEEP ? 0 : limits_deep(level + 1, d) + (level & 7);
    __asm__ volatile("" ::: "memory");
    return r;
}

static void *deep_thread(void *arg)
{
    struct deep *d = arg;
    uint64_t r = limits_deep(1, d);
    /* sum of (level & 7) for level 1 .. DEEP-1 */
    uint64_t want = 0;
    for (unsigned l = 1; l < DEEP; l++)
        want += l & 7;
    CHECK(r == want, "the recursion returned %llu, expected %llu", (unsigned long long)r,
          (unsigned long long)want);
    return NULL;
}

static int deep_recursion(const char *unwind, unsigned max_frames)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = limits_rate();
    c.max_frames = max_frames;
    c.unwinder = !strcmp(unwind, "fp") ? MEMPROF_UNWIND_FP : MEMPROF_UNWIND_DWARF;
    if (memprof_init_config(&c) == -ENOTSUP) {
        printf("the DWARF unwinder is not in this build\n");
        return LIMITS_SKIP;
    }
    CHECK(memprof_start() == 0, "memprof_start failed");
    static struct deep d;
    d.size = block_size();
    /* 100,000 frames need a few MiB: a thread with a big stack, whatever ulimit -s says. */
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 128u << 20);
    pthread_t t;
    CHECK(pthread_create(&t, &attr, deep_thread, &d) == 0, "pthread_create failed");
    pthread_join(t, NULL);
    CHECK(d.nblocks == DEEP / DEEP_EVERY, "%u blocks", d.nblocks);

    memprof_stats s = limits_stats();
    limits_print_stats("deep recursion done");
    memprof_snapshot *snap = NULL;
    CHECK(memprof_get_snapshot(&snap) == 0, "memprof_get_snapshot failed");
    unsigned deep_samples = 0;
    for (size_t i = 0; i < memprof_snapshot_site_count(snap); i++) {
        memprof_site_info si = {.size = sizeof si};
        CHECK(memprof_snapshot_site(snap, i, &si) == 0, "site %zu", i);
        int n = memprof_snapshot_stack_depth(snap, si.stack_id);
        CHECK(n >= 0, "stack depth: %s", memprof_strerror(n));
        memprof_frame leaf = {.size = sizeof leaf}, root = {.size = sizeof root};
        if (n == 0 || memprof_snapshot_frame(snap, si.stack_id, 0, &leaf) != 0 || !leaf.function ||
            strcmp(leaf.function, "limits_deep_alloc"))
            continue;
        CHECK(memprof_snapshot_frame(snap, si.stack_id, (size_t)n - 1, &root) == 0, "root");
        printf("site %zu: %d frames, %llu live samples, last frame %s%s\n", i, n,
               (unsigned long long)si.live_samples, root.function ? root.function : "?",
               root.flags & MEMPROF_FRAME_TRUNCATED ? " [truncated]" : "");
        CHECK(n <= (int)max_frames, "a stack of %d frames, the maximum is %u", n, max_frames);
        CHECK(n >= (int)max_frames / 2, "a stack of only %d frames in a %d-deep recursion", n,
              DEEP);
        CHECK(root.flags & MEMPROF_FRAME_TRUNCATED, "the cut stack is not marked truncated");
        CHECK(root.function && !strcmp(root.function, "limits_deep"),
              "the cut stack ends in %s, not in the recursion", root.function);
        deep_samples += (unsigned)si.live_samples;
    }
    memprof_free_snapshot(snap);
    CHECK(deep_samples > 0, "no sample from the deep recursion");
    CHECK(s.truncated_stacks >= deep_samples, "%llu truncated stacks, %u deep samples",
          (unsigned long long)s.truncated_stacks, deep_samples);
    for (unsigned i = 0; i < d.nblocks; i++)
        free(d.blocks[i]);
    CHECK(limits_stats().live_samples < 64, "samples left live after freeing");
    printf("deep-recursion (%s, %u frames): ok, %u deep samples\n", unwind, max_frames,
           deep_samples);
    return 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    CHECK(argc >= 3, "usage: %s preload|got MODE [ARGS]", argv[0]);
    limits_expect_backend(argv[1]);
    const char *mode = argv[2];
    if (!strcmp(mode, "heap-map-full"))
        return heap_map_full();
    if (!strcmp(mode, "stack-table-full"))
        return stack_table_full();
    if (!strcmp(mode, "deep-recursion") && argc >= 4)
        return deep_recursion(argv[3], argc >= 5 ? (unsigned)atoi(argv[4]) : 64);
    CHECK(0, "unknown mode %s", mode);
}
