/* SPDX-License-Identifier: MIT */
/*
 * demo_workload: a small program with a recognisable heap, for trying libmemprof on
 * (scripts/demo.sh runs it under the preload plugin by default).
 *
 * Five named functions allocate in five typical ways, so each view of a profile names one:
 *   build_index        many small strings kept live in a hash index  (~20 MiB live; built at
 *                      start-up, like a cache)
 *   fill_cache         a cache of large buffers kept live            (32 MiB live)
 *   render_report      a 48 MiB report built and freed at once        (the peak, ~0 live)
 *   grow_history       a list appended to all through the run, never trimmed: the shape of
 *                      a steady leak                                  (~16 MiB live)
 *   churn_temporaries  short-lived small blocks, freed at once       (~0 live, lots allocated)
 * After start-up, main alternates rounds of request handling (temporaries) with appends to
 * the history, so the history grows at a steady rate (a leak suspect) while the index and
 * the cache, built first, do not. Main frees nothing before it exits, so the index, the cache
 * and the history are still live when the profile is written at exit; the report was the
 * peak. The functions are global and the program is linked with -rdynamic, so dladdr() can
 * name them; it is built with frame pointers so a frame-pointer walk sees every frame.
 *
 * Usage: demo_workload [SCALE]   (SCALE, default 1, multiplies every amount; 1..100)
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define NOINLINE __attribute__((noinline))

struct index_entry {
    struct index_entry *next;
    char *key;
    uint64_t value;
};

struct index {
    struct index_entry **buckets;
    size_t nbuckets;
    size_t count;
    size_t bytes;
};

struct history_node {
    struct history_node *next;
    char payload[4064];
};

/* Prototypes for -Wmissing-prototypes: these functions are global on purpose. */
char *copy_string(const char *s);
struct index *build_index(size_t n);
void **fill_cache(size_t n, size_t block);
struct history_node *grow_history(struct history_node *head, size_t n);
uint64_t render_report(size_t bytes);
uint64_t churn_temporaries(size_t n);

static volatile uint64_t sink; /* keeps the compiler from eliding the work */

static uint64_t rng_state = 0x9E3779B97F4A7C15ull;

static uint64_t next_random(void)
{
    /* xorshift64*: the workload is the same on every run. */
    rng_state ^= rng_state >> 12;
    rng_state ^= rng_state << 25;
    rng_state ^= rng_state >> 27;
    return rng_state * 0x2545F4914F6CDD1Dull;
}

/* Each named function calls malloc itself (no allocation wrapper), so that it is the leaf
 * frame of its samples and the profile's site labels say which one allocated. */
static void *check(void *p)
{
    if (!p) {
        fputs("demo_workload: out of memory\n", stderr);
        exit(1);
    }
    return p;
}

NOINLINE char *copy_string(const char *s)
{
    size_t n = strlen(s) + 1;
    char *p = check(malloc(n));
    memcpy(p, s, n);
    return p;
}

static uint64_t hash_string(const char *s)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a */
    while (*s)
        h = (h ^ (unsigned char)*s++) * 1099511628211ull;
    return h;
}

/* n keys like "user:000123:session:…" of 24 to 88 bytes in a chained hash table. */
NOINLINE struct index *build_index(size_t n)
{
    struct index *ix = check(malloc(sizeof *ix));
    ix->nbuckets = 1;
    while (ix->nbuckets < n)
        ix->nbuckets <<= 1;
    ix->buckets = check(calloc(ix->nbuckets, sizeof *ix->buckets));
    ix->count = 0;
    ix->bytes = ix->nbuckets * sizeof *ix->buckets;
    char key[128];
    for (size_t i = 0; i < n; i++) {
        int len = snprintf(key, sizeof key, "user:%08zu:session:", i);
        size_t extra = 4 + next_random() % 64;
        for (size_t j = 0; j < extra; j++)
            key[len + (int)j] = (char)('a' + next_random() % 26);
        key[len + (int)extra] = '\0';
        struct index_entry *e = check(malloc(sizeof *e));
        e->key = copy_string(key);
        e->value = i;
        size_t b = hash_string(e->key) & (ix->nbuckets - 1);
        e->next = ix->buckets[b];
        ix->buckets[b] = e;
        ix->count++;
        ix->bytes += sizeof *e + strlen(e->key) + 1;
    }
    return ix;
}

/* n buffers of `block` bytes each, filled (as a cache of decoded images or pages would be). */
NOINLINE void **fill_cache(size_t n, size_t block)
{
    void **cache = check(malloc(n * sizeof *cache));
    for (size_t i = 0; i < n; i++) {
        cache[i] = check(malloc(block));
        memset(cache[i], (int)i, block);
    }
    return cache;
}

/* Appends n nodes to a list that is never trimmed: the shape of a typical leak. */
NOINLINE struct history_node *grow_history(struct history_node *head, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        struct history_node *node = check(malloc(sizeof *node));
        snprintf(node->payload, sizeof node->payload, "event %zu", i);
        node->next = head;
        head = node;
    }
    return head;
}

/* A report of `bytes` in 256 KiB pages, built, summed and freed: the heap's high-water mark
 * comes from here although nothing of it is live at the end. */
NOINLINE uint64_t render_report(size_t bytes)
{
    size_t page = 256 * 1024, n = bytes / page;
    unsigned char **pages = check(malloc(n * sizeof *pages));
    uint64_t sum = 0;
    for (size_t i = 0; i < n; i++) {
        pages[i] = check(malloc(page));
        memset(pages[i], (int)i, page);
    }
    for (size_t i = 0; i < n; i++) {
        sum += pages[i][i % page];
        free(pages[i]);
    }
    free(pages);
    return sum;
}

/* n temporaries of 16 to 512 bytes, each freed right after use. Returns bytes allocated. */
NOINLINE uint64_t churn_temporaries(size_t n)
{
    uint64_t total = 0, sum = 0;
    for (size_t i = 0; i < n; i++) {
        size_t size = 16 + next_random() % 497;
        unsigned char *tmp = check(malloc(size));
        memset(tmp, (int)i, size);
        sum += tmp[size / 2];
        total += size;
        free(tmp);
    }
    sink = sum;
    return total;
}

int main(int argc, char **argv)
{
    unsigned long scale = 1;
    if (argc > 2 || (argc == 2 && ((scale = strtoul(argv[1], NULL, 10)) < 1 || scale > 100))) {
        fprintf(stderr, "usage: %s [SCALE]   (1..100, default 1)\n", argv[0]);
        return 2;
    }

    struct index *ix = build_index(200000 * scale);
    void **cache = fill_cache(32 * scale, 1 << 20);
    sink = render_report((size_t)48 * scale << 20);
    /* Requests: 40 rounds of temporaries, each leaving 100 history nodes behind. */
    struct history_node *history = NULL;
    uint64_t churned = 0;
    for (int round = 0; round < 40; round++) {
        churned += churn_temporaries(50000 * scale);
        history = grow_history(history, 100 * scale);
    }

    printf("demo_workload: indexed %zu strings (%.1f MiB), cached %lu x 1 MiB buffers, "
           "rendered a %lu MiB report, grew a list to %lu x 4 KiB nodes, churned %lu "
           "temporaries (%.0f MiB allocated and freed)\n",
           ix->count, (double)ix->bytes / (1 << 20), 32 * scale, 48 * scale, 4000 * scale,
           2000000 * scale, (double)churned / (1 << 20));
    sink ^= (uint64_t)(uintptr_t)cache ^ (uint64_t)(uintptr_t)history;
    /* The index, the cache and the history are still live here; the report was the peak. */
    return 0;
}
