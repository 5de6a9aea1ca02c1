/* SPDX-License-Identifier: MIT */
/*
 * demo_workload: a small program with a recognisable heap, for trying libmemprof on
 * (scripts/demo.sh runs it under the preload plugin by default).
 *
 * Four named functions allocate in four typical ways, so a profile should name each one:
 *   build_index        many small strings kept live in a hash index  (~20 MiB live)
 *   fill_cache         a cache of large buffers kept live            (32 MiB live)
 *   grow_history       a list that only grows, like a slow leak      (~16 MiB live)
 *   churn_temporaries  short-lived small blocks, freed at once       (~0 live, lots allocated)
 * and main frees nothing before it exits, so all but the churn is still live when the
 * profile is written at exit. The functions are global and the program is linked with
 * -rdynamic, so dladdr() can name them; it is built with frame pointers so a frame-pointer
 * walk sees every frame.
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
struct history_node *grow_history(size_t n);
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

/* A list that is appended to and never trimmed: the shape of a typical leak. */
NOINLINE struct history_node *grow_history(size_t n)
{
    struct history_node *head = NULL;
    for (size_t i = 0; i < n; i++) {
        struct history_node *node = check(malloc(sizeof *node));
        snprintf(node->payload, sizeof node->payload, "event %zu", i);
        node->next = head;
        head = node;
    }
    return head;
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
    struct history_node *history = grow_history(4000 * scale);
    uint64_t churned = churn_temporaries(2000000 * scale);

    printf("demo_workload: indexed %zu strings (%.1f MiB), cached %lu x 1 MiB buffers, "
           "grew a list to %lu x 4 KiB nodes, churned %lu temporaries (%.0f MiB allocated "
           "and freed)\n",
           ix->count, (double)ix->bytes / (1 << 20), 32 * scale, 4000 * scale, 2000000 * scale,
           (double)churned / (1 << 20));
    sink = (uint64_t)(uintptr_t)cache ^ (uint64_t)(uintptr_t)history;
    /* Everything but the temporaries is still live here: that is what the profile shows. */
    return 0;
}
