/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the sample heap (src/core/sampleheap.h), where the preload plugin puts sampled
 * blocks by default: blocks are inside the range and nothing else is,
 * aligned to their class (and to any power-of-two alignment asked for), at least as large as
 * asked, zeroed when asked even after reuse, recycled after a free, unmapped when large and
 * freed, resized in place within their class; requests it cannot serve get NULL; and threads
 * allocating and freeing at once never get the same block twice. With chunk framing (the
 * GOT start's heap), blocks carry glibc's mmap()ed-chunk header, which glibc's own free(),
 * realloc() and malloc_usable_size() accept, and a block whose header is not the heap's is
 * not taken for one. Nothing of the window is mapped but what blocks use (small classes an
 * eighth ahead, large blocks their pages), so a limited address space keeps its budget;
 * someone else's mapping in the window stops a class or costs a slot, never is taken for a
 * block; threads growing classes at once only touch mapped slots; blocks go into core dumps.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "core/sampleheap.h"
#include "test.h"

/* Under a sanitizer, the process's address space is the sanitizer's (shadow memory reserved
 * up front), and under ThreadSanitizer the window is an inaccessible reservation where
 * nothing else can be mapped and what blocks do not use is still a mapping (platform.h):
 * the cases about address space and limits cannot run there. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__) || MEMPROF_WINDOW_RESERVED
#define SANITIZED 1
#else
#define SANITIZED 0
#endif

static bool setup(struct memprof_sheap *h)
{
    *h = (struct memprof_sheap){0};
    return memprof__sheap_init(h, 0) == 0;
}

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static bool setup_framed(struct memprof_sheap *h)
{
    *h = (struct memprof_sheap){0};
    return memprof__sheap_init(h, page_size()) == 0;
}

/* glibc's own functions, not whatever the test is linked with (ASan's under -fsanitize). */
struct libc_allocator {
    void (*free)(void *);
    void *(*realloc)(void *, size_t);
    size_t (*usable)(void *);
};

static bool find_libc(struct libc_allocator *a)
{
    void *libc = dlopen("libc.so.6", RTLD_NOLOAD | RTLD_LAZY);
    if (!libc)
        return false;
    a->free = (void (*)(void *))dlsym(libc, "free");
    a->realloc = (void *(*)(void *, size_t))dlsym(libc, "realloc");
    a->usable = (size_t(*)(void *))dlsym(libc, "malloc_usable_size");
    dlclose(libc);
    return a->free && a->realloc && a->usable;
}

static void test_blocks_are_owned_and_nothing_else_is(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    void *p = memprof__sheap_alloc(&h, 100, 0, false);
    CHECK(p != NULL);
    EXPECT(memprof__sheap_owns(&h, p));
    EXPECT(!memprof__sheap_owns(&h, NULL));
    int local;
    EXPECT(!memprof__sheap_owns(&h, &local));
    EXPECT(!memprof__sheap_owns(&h, (void *)(h.base - 16)));
    EXPECT(!memprof__sheap_owns(&h, (void *)(h.base + h.size)));
    EXPECT(!memprof__sheap_owns(&h, h.classes)); /* the headers are not blocks */
    memprof__sheap_free(&h, p);
    memprof__sheap_destroy(&h);
}

static void test_an_empty_heap_owns_nothing_and_serves_nothing(void)
{
    struct memprof_sheap h = {0};
    int local;
    EXPECT(!memprof__sheap_owns(&h, &local));
    EXPECT(!memprof__sheap_owns(&h, NULL));
    EXPECT(memprof__sheap_alloc(&h, 16, 0, false) == NULL);
}

static void test_blocks_are_large_enough_and_aligned_to_their_class(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t sizes[] = {1, 15, 16, 17, 100, 1000, 4096, 4097, 100000, (size_t)3 << 20};
    for (size_t i = 0; i < MEMPROF_ARRAY_SIZE(sizes); i++) {
        size_t n = sizes[i];
        char *p = memprof__sheap_alloc(&h, n, 0, false);
        CHECK(p != NULL);
        size_t usable = memprof__sheap_usable(&h, p);
        EXPECT(usable >= n);
        EXPECT(usable < 2 * n || usable == 16); /* one power of two, no more */
        size_t slot = 16;
        while (slot < usable)
            slot <<= 1;
        EXPECT((uintptr_t)p % slot == 0);
        if (slot >= MEMPROF_SHEAP_LARGE_MIN) /* large: the request in whole pages */
            EXPECT(usable == ((n + page_size() - 1) & ~(page_size() - 1)));
        else
            EXPECT(usable == slot);
        memset(p, 0xab, n); /* writable throughout */
        EXPECT(memprof__sheap_resize(&h, p, n));
        EXPECT(!memprof__sheap_resize(&h, p, 2 * slot));
        memprof__sheap_free(&h, p);
    }
    memprof__sheap_destroy(&h);
}

static void test_power_of_two_alignments_are_kept(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    for (size_t align = 1; align <= ((size_t)1 << 22); align <<= 1) {
        char *p = memprof__sheap_alloc(&h, 24, align, false);
        CHECK(p != NULL);
        EXPECT((uintptr_t)p % align == 0);
        EXPECT((uintptr_t)p % 16 == 0);
        EXPECT(memprof__sheap_usable(&h, p) >= 24);
        memprof__sheap_free(&h, p);
    }
    memprof__sheap_destroy(&h);
}

static void test_zeroed_blocks_are_zero_after_reuse(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t sizes[] = {48, 5000, MEMPROF_SHEAP_LARGE_MIN, 3 * MEMPROF_SHEAP_LARGE_MIN};
    for (size_t i = 0; i < MEMPROF_ARRAY_SIZE(sizes); i++) {
        size_t n = sizes[i];
        unsigned char *p = memprof__sheap_alloc(&h, n, 0, false);
        CHECK(p != NULL);
        memset(p, 0xff, memprof__sheap_usable(&h, p));
        memprof__sheap_free(&h, p);
        unsigned char *q = memprof__sheap_alloc(&h, n, 0, true);
        EXPECT(q == p); /* the freed block is the next one handed out */
        size_t nonzero = 0;
        for (size_t j = 0; j < n; j++)
            nonzero += q[j] != 0;
        EXPECT_EQ_U(nonzero, 0);
        memprof__sheap_free(&h, q);
    }
    memprof__sheap_destroy(&h);
}

static bool is_power_of_two_or_zero(uintptr_t v)
{
    return (v & (v - 1)) == 0;
}

static void test_framed_blocks_carry_glibc_mmapped_chunk_headers(void)
{
    struct memprof_sheap h;
    CHECK(setup_framed(&h));
    size_t page = page_size();
    size_t sizes[] = {1, 100, 4000, 4080, 4081, 100000, (size_t)3 << 20};
    size_t aligns[] = {0, 16, 32, 64, 4096, 16384};
    for (size_t i = 0; i < MEMPROF_ARRAY_SIZE(sizes); i++) {
        for (size_t j = 0; j < MEMPROF_ARRAY_SIZE(aligns); j++) {
            size_t n = sizes[i], align = aligns[j];
            char *p = memprof__sheap_alloc(&h, n, align, false);
            CHECK(p != NULL);
            const uint64_t *w = (const uint64_t *)p;
            uint64_t prev = w[-2], size = w[-1] & ~(uint64_t)7;
            uintptr_t mapping = (uintptr_t)p - 16 - prev;
            EXPECT(w[-1] & 2);                                        /* IS_MMAPPED */
            EXPECT(mapping % page == 0 && (prev + size) % page == 0); /* glibc's munmap_chunk */
            EXPECT(is_power_of_two_or_zero((uintptr_t)p & (page - 1)));
            EXPECT(align == 0 || (uintptr_t)p % align == 0);
            EXPECT((uintptr_t)p % 16 == 0);
            EXPECT_EQ_U(memprof__sheap_usable(&h, p), size - 16); /* glibc's usable size */
            EXPECT(size - 16 >= n);
            EXPECT(memprof__sheap_holds(&h, p));
            EXPECT(memprof__sheap_resize(&h, p, n));
            EXPECT(!memprof__sheap_resize(&h, p, 2 * size));
            memset(p, 0xab, n);
            memprof__sheap_free(&h, p);
        }
    }
    memprof__sheap_destroy(&h);
}

static void test_glibc_frees_reallocs_and_sizes_framed_blocks(void)
{
    struct libc_allocator libc;
    CHECK(find_libc(&libc));
    struct memprof_sheap h;
    CHECK(setup_framed(&h));
    char *p = memprof__sheap_alloc(&h, 100, 0, false);
    CHECK(p != NULL);
    EXPECT_EQ_U(libc.usable(p), memprof__sheap_usable(&h, p));
    libc.free(p); /* unmaps the slot; the heap never hands it out again */
    char *q = memprof__sheap_alloc(&h, 100, 0, false);
    EXPECT(q != NULL && q != p);
    memset(q, 7, 100);
    char *r = libc.realloc(q, (size_t)1 << 20); /* mremap()s the slot away */
    CHECK(r != NULL);
    size_t same = 0;
    for (size_t i = 0; i < 100; i++)
        same += r[i] == 7;
    EXPECT_EQ_U(same, 100);
    libc.free(r);
    char *aligned = memprof__sheap_alloc(&h, 24, 256, false);
    CHECK(aligned != NULL);
    EXPECT_EQ_U(libc.usable(aligned), memprof__sheap_usable(&h, aligned));
    libc.free(aligned);
    memprof__sheap_destroy(&h);
}

static void test_only_blocks_with_the_heaps_header_are_held(void)
{
    struct memprof_sheap h;
    CHECK(setup_framed(&h));
    char *p = memprof__sheap_alloc(&h, 100, 0, false);
    CHECK(p != NULL);
    uint64_t *w = (uint64_t *)p;
    EXPECT(memprof__sheap_holds(&h, p));
    EXPECT(!memprof__sheap_holds(&h, p + 16)); /* not where the heap puts blocks */
    uint64_t size = w[-1];
    w[-1] = (size & ~(uint64_t)7) * 2 | 2; /* someone else's chunk, twice the size */
    EXPECT(!memprof__sheap_holds(&h, p));
    w[-1] = size;
    w[-2] = 4096;
    EXPECT(!memprof__sheap_holds(&h, p));
    w[-2] = 0;
    EXPECT(memprof__sheap_holds(&h, p));
    memprof__sheap_free(&h, p);
    memprof__sheap_destroy(&h);

    struct memprof_sheap plain;
    CHECK(setup(&plain));
    char *b = memprof__sheap_alloc(&plain, 100, 0, false);
    EXPECT(memprof__sheap_holds(&plain, b)); /* without framing, the range decides */
    memprof__sheap_free(&plain, b);
    memprof__sheap_destroy(&plain);
}

/* Whether [p, p + len) is mapped at all (every page of it). */
static bool mapped(const void *p, size_t len)
{
    unsigned char vec[1024];
    return len / page_size() <= sizeof vec && mincore((void *)p, len, vec) == 0;
}

/* Whether any page of [p, p + len) is mapped. */
static bool any_mapped(const void *p, size_t len)
{
    for (size_t off = 0; off < len; off += page_size())
        if (mapped((const char *)p + off, page_size()))
            return true;
    return false;
}

static void test_large_blocks_are_unmapped_when_freed(void)
{
    if (SANITIZED)
        SKIP("the address space is the sanitizer's");
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t n = 2 * MEMPROF_SHEAP_LARGE_MIN;
    char *p = memprof__sheap_alloc(&h, n, 0, false);
    CHECK(p != NULL);
    memset(p, 1, n);
    errno = 1234;
    memprof__sheap_free(&h, p);
    EXPECT_EQ(errno, 1234);
    /* Memory, address space and any lock go with the mapping; the slot stays the heap's. */
    EXPECT(!any_mapped(p, n));
    EXPECT(memprof__sheap_owns(&h, p) && !memprof__sheap_used(&h, p));
    memprof__sheap_destroy(&h);
}

static void test_large_blocks_resize_in_place_within_their_class(void)
{
    if (SANITIZED)
        SKIP("the address space is the sanitizer's");
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t page = page_size(), n = (size_t)1 << 20;
    char *p = memprof__sheap_alloc(&h, n + 1, 0, false); /* a 2 MiB slot, 1 MiB + a page */
    CHECK(p != NULL);
    EXPECT_EQ_U(memprof__sheap_usable(&h, p), n + page);
    memset(p, 3, n + 1);
    EXPECT(memprof__sheap_resize(&h, p, 2 * n)); /* grows into the slot */
    EXPECT_EQ_U(memprof__sheap_usable(&h, p), 2 * n);
    EXPECT(p[n] == 3 && p[2 * n - 1] == 0);
    EXPECT(memprof__sheap_resize(&h, p, n + 100)); /* shrinks: the rest is unmapped */
    EXPECT_EQ_U(memprof__sheap_usable(&h, p), n + page);
    EXPECT(!any_mapped(p + n + page, n - page));
    EXPECT(!memprof__sheap_resize(&h, p, n)); /* another class */
    memprof__sheap_free(&h, p);
    memprof__sheap_destroy(&h);
}

static void test_requests_it_cannot_serve_get_null(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t max = (size_t)1 << MEMPROF_SHEAP_MAX_SHIFT;
    EXPECT(memprof__sheap_alloc(&h, max + 1, 0, false) == NULL);
    EXPECT(memprof__sheap_alloc(&h, 16, max * 2, false) == NULL);
    /* The largest class has one slot: the second request is refused until it is freed. */
    void *a = memprof__sheap_alloc(&h, max, 0, false);
    CHECK(a != NULL);
    EXPECT(memprof__sheap_alloc(&h, max, 0, false) == NULL);
    memprof__sheap_free(&h, a);
    void *b = memprof__sheap_alloc(&h, max, 0, false);
    EXPECT(b == a);
    memprof__sheap_free(&h, b);
    memprof__sheap_destroy(&h);
}

/* A field of /proc/self/status in bytes. */
static long status_bytes(const char *field)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    size_t len = strlen(field);
    long kib = -1;
    while (f && kib < 0 && fgets(line, sizeof line, f))
        if (!strncmp(line, field, len) && line[len] == ':')
            kib = strtol(line + len + 1, NULL, 10);
    if (f)
        fclose(f);
    return kib * 1024;
}

static void test_a_limited_address_space_keeps_its_budget(void)
{
    if (SANITIZED)
        SKIP("the address space is the sanitizer's");
    /* Nothing is reserved: under a limit of 256 MiB more than the process has, the heap
     * serves what fits, refuses what does not, and serves again once blocks are freed. In a
     * child, so the limit stays there. */
    for (int resource = 0; resource < 2; resource++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            long have = status_bytes(resource ? "VmData" : "VmSize");
            rlim_t limit = (rlim_t)have + ((rlim_t)256 << 20);
            struct rlimit lim = {limit, limit};
            if (have < 0 || setrlimit(resource ? RLIMIT_DATA : RLIMIT_AS, &lim) != 0)
                _exit(2);
            struct memprof_sheap h = {0};
            if (memprof__sheap_init(&h, 0) != 0)
                _exit(3);
            char *small = memprof__sheap_alloc(&h, 100, 0, false);
            char *big = memprof__sheap_alloc(&h, (size_t)160 << 20, 0, false);
            char *more = memprof__sheap_alloc(&h, (size_t)160 << 20, 0, false);
            if (!small || !big || more)
                _exit(4);
            memprof__sheap_free(&h, big);
            more = memprof__sheap_alloc(&h, (size_t)200 << 20, 0, false);
            _exit(more ? 0 : 5);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

static void test_the_window_maps_only_what_blocks_use(void)
{
    if (SANITIZED)
        SKIP("the address space is the sanitizer's");
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t page = page_size();
    EXPECT(!any_mapped((void *)h.base, 16 * page));
    char *a = memprof__sheap_alloc(&h, 100, 0, false); /* class 128 */
    CHECK(a != NULL);
    /* A small class maps 64 KiB at first, an eighth more each time later. */
    EXPECT(mapped(a, (size_t)64 << 10) && !any_mapped(a + (64 << 10), 16 * page));
    char *b = memprof__sheap_alloc(&h, ((size_t)3 << 20) + 1, 0, false); /* a 4 MiB slot */
    CHECK(b != NULL);
    EXPECT(mapped(b, ((size_t)3 << 20) + page));
    EXPECT(!any_mapped(b + ((size_t)3 << 20) + page, 16 * page));
    /* Classes no block came from: nothing. */
    char *empty = (char *)h.base + ((size_t)(20 - MEMPROF_SHEAP_MIN_SHIFT) << 30);
    EXPECT(!any_mapped(empty, 16 * page));
    memprof__sheap_free(&h, a);
    memprof__sheap_free(&h, b);
    memprof__sheap_destroy(&h);
}

static void test_someone_elses_mapping_in_the_window_is_never_a_block(void)
{
    if (SANITIZED)
        SKIP("the address space is the sanitizer's");
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t page = page_size();
    /* In a large class: its first slot cannot be mapped, the next one serves. */
    char *slot0 = (char *)h.base + ((size_t)(20 - MEMPROF_SHEAP_MIN_SHIFT) << 30);
    void *theirs = mmap(slot0 + page, page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(theirs == slot0 + page);
    char *p = memprof__sheap_alloc(&h, (size_t)1 << 20, 0, false);
    if (!p)
        p = memprof__sheap_alloc(&h, (size_t)1 << 20, 0, false);
    EXPECT(p == slot0 + ((size_t)1 << 20));
    EXPECT(!memprof__sheap_used(&h, theirs) && !memprof__sheap_holds(&h, theirs));
    memprof__sheap_free(&h, p);
    munmap(theirs, page);
    /* In a small class: it grows up to the mapping and no further. */
    char *start = (char *)h.base + ((size_t)(12 - MEMPROF_SHEAP_MIN_SHIFT) << 30);
    theirs = mmap(start + (128 << 10), page, PROT_READ | PROT_WRITE,
                  MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    CHECK(theirs == start + (128 << 10));
    size_t served = 0;
    while (served < 100 && memprof__sheap_alloc(&h, 4096, 0, false))
        served++;
    EXPECT_EQ_U(served, 32); /* 128 KiB of 4 KiB slots */
    EXPECT(!memprof__sheap_used(&h, theirs) && !memprof__sheap_holds(&h, theirs));
    EXPECT(*(volatile char *)theirs == 0); /* untouched */
    munmap(theirs, page);
    memprof__sheap_destroy(&h);
}

/* Whether the mapping holding p goes into core dumps: no "dd" among its VmFlags in
 * /proc/self/smaps. -1 if it cannot be told (not mapped). */
static int in_core_dumps(const void *p)
{
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f)
        return -1;
    char line[512];
    int found = 0, result = -1;
    while (result < 0 && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            found = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (found && !strncmp(line, "VmFlags:", 8))
            result = strstr(line, " dd") == NULL;
    }
    fclose(f);
    return result;
}

static void test_blocks_go_into_core_dumps_and_nothing_else_is_mapped(void)
{
    if (SANITIZED)
        SKIP("the address space is the sanitizer's");
    struct memprof_sheap h;
    CHECK(setup(&h));
    char *far = (char *)h.base + ((size_t)(20 - MEMPROF_SHEAP_MIN_SHIFT) << 30) + (64u << 20);
    EXPECT_EQ(in_core_dumps(far), -1); /* not mapped at all: nothing to dump */
    char *a = memprof__sheap_alloc(&h, 100, 0, false);
    char *b = memprof__sheap_alloc(&h, (size_t)3 << 20, 0, false); /* a 4 MiB slot */
    CHECK(a && b);
    EXPECT_EQ(in_core_dumps(a), 1);
    EXPECT_EQ(in_core_dumps(b), 1);
    EXPECT_EQ(in_core_dumps(b + ((size_t)3 << 20) - 1), 1); /* the block's last byte */
    EXPECT_EQ(in_core_dumps(b + ((size_t)4 << 20)), -1);    /* the next, unused slot */
    EXPECT_EQ(in_core_dumps(far), -1);
    memprof__sheap_free(&h, a);
    memprof__sheap_free(&h, b);
    memprof__sheap_destroy(&h);
}

/* Threads allocating blocks of small and large classes, keeping many live so that classes
 * grow while others allocate, and writing every page of them: a slot handed out before its
 * class mapped it would fault. */
struct grow_churn {
    struct memprof_sheap *h;
    uint64_t seed;
    _Atomic unsigned long *served;
};

static void *grow_churn_thread(void *arg)
{
    struct grow_churn *c = arg;
    uint64_t rng = c->seed;
    enum { LIVE = 1024 };
    static _Thread_local char *live[LIVE];
    for (int round = 0; round < 40000; round++) {
        unsigned k = (unsigned)test_rand_below(&rng, LIVE);
        if (live[k])
            memprof__sheap_free(c->h, live[k]);
        size_t n = (size_t)16 << test_rand_below(&rng, round % 64 == 0 ? 16 : 10);
        live[k] = memprof__sheap_alloc(c->h, n, 0, test_rand_below(&rng, 2));
        if (live[k]) {
            /* A word on every page, relaxed atomics as in churn_thread(): a pop that lost its
             * race may still read a taken block's first word, by design. */
            for (size_t off = 0; off < n; off += 4096)
                __atomic_store_n((uint64_t *)(live[k] + off), 1, __ATOMIC_RELAXED);
            (*c->served)++;
        }
    }
    for (unsigned k = 0; k < LIVE; k++)
        if (live[k])
            memprof__sheap_free(c->h, live[k]);
    return NULL;
}

static void test_threads_growing_classes_touch_only_mapped_slots(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    struct grow_churn c[THREADS];
    _Atomic unsigned long served = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        c[i] = (struct grow_churn){&h, i + 1, &served};
        CHECK(pthread_create(&t[i], NULL, grow_churn_thread, &c[i]) == 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    /* Refused only while another thread grew the class (see threads_never_share_a_block). */
    EXPECT(served > 0);
    printf("%lu of %d allocations served\n", (unsigned long)served, THREADS * 40000);
    memprof__sheap_destroy(&h);
}

/* Threads allocating and freeing at once: each writes its id into its blocks and checks it
 * is still there before the free, so a block handed out twice shows up. The writes are
 * relaxed atomics: a thread popping a free list reads the first word of a block another
 * thread may just have taken and be writing (the tagged CAS then fails); with plain writes
 * ThreadSanitizer would report that by-design race instead of checking the heap's own. */
struct churn {
    struct memprof_sheap *h;
    unsigned id;
    _Atomic unsigned long *errors, *refused;
};

static void *churn_thread(void *arg)
{
    struct churn *c = arg;
    uint64_t rng = c->id + 1;
    enum { LIVE = 64 };
    struct {
        unsigned *p;
        size_t n;
    } live[LIVE] = {{0}};
    for (int i = 0; i < 200000; i++) {
        unsigned k = (unsigned)test_rand_below(&rng, LIVE);
        if (live[k].p) {
            for (size_t j = 0; j < live[k].n; j++)
                if (__atomic_load_n(&live[k].p[j], __ATOMIC_RELAXED) != c->id)
                    (*c->errors)++;
            memprof__sheap_free(c->h, live[k].p);
            live[k].p = NULL;
        }
        size_t n = 1 + test_rand_below(&rng, 64);
        unsigned *p = memprof__sheap_alloc(c->h, n * sizeof *p, 0, test_rand_below(&rng, 2));
        if (!p) { /* a class growing under another thread: its sample would go elsewhere */
            (*c->refused)++;
            continue;
        }
        for (size_t j = 0; j < n; j++)
            __atomic_store_n(&p[j], c->id, __ATOMIC_RELAXED);
        live[k].p = p;
        live[k].n = n;
    }
    for (unsigned k = 0; k < LIVE; k++)
        if (live[k].p)
            memprof__sheap_free(c->h, live[k].p);
    return NULL;
}

static void threads_never_share_a_block(bool framed)
{
    struct memprof_sheap h;
    CHECK(framed ? setup_framed(&h) : setup(&h));
    enum { THREADS = 8 };
    pthread_t t[THREADS];
    struct churn c[THREADS];
    _Atomic unsigned long errors = 0, refused = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        c[i] = (struct churn){&h, i + 1, &errors, &refused};
        CHECK(pthread_create(&t[i], NULL, churn_thread, &c[i]) == 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    EXPECT_EQ_U(errors, 0);
    /* Refused only while another thread grows the class: then as many as the others can
     * ask for while the grower is off the CPU, which on a busy machine can be most. */
    printf("%lu of %d allocations refused while a class grew\n", (unsigned long)refused,
           THREADS * 200000);
    memprof__sheap_destroy(&h);
}

static void test_threads_never_share_a_block(void)
{
    threads_never_share_a_block(false);
}

static void test_threads_never_share_a_framed_block(void)
{
    threads_never_share_a_block(true);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_blocks_are_owned_and_nothing_else_is),
        TEST_CASE(test_an_empty_heap_owns_nothing_and_serves_nothing),
        TEST_CASE(test_blocks_are_large_enough_and_aligned_to_their_class),
        TEST_CASE(test_power_of_two_alignments_are_kept),
        TEST_CASE(test_zeroed_blocks_are_zero_after_reuse),
        TEST_CASE(test_large_blocks_are_unmapped_when_freed),
        TEST_CASE(test_large_blocks_resize_in_place_within_their_class),
        TEST_CASE(test_requests_it_cannot_serve_get_null),
        TEST_CASE(test_a_limited_address_space_keeps_its_budget),
        TEST_CASE(test_threads_never_share_a_block),
        TEST_CASE(test_framed_blocks_carry_glibc_mmapped_chunk_headers),
        TEST_CASE(test_glibc_frees_reallocs_and_sizes_framed_blocks),
        TEST_CASE(test_only_blocks_with_the_heaps_header_are_held),
        TEST_CASE(test_threads_never_share_a_framed_block),
        TEST_CASE(test_the_window_maps_only_what_blocks_use),
        TEST_CASE(test_someone_elses_mapping_in_the_window_is_never_a_block),
        TEST_CASE(test_threads_growing_classes_touch_only_mapped_slots),
        TEST_CASE(test_blocks_go_into_core_dumps_and_nothing_else_is_mapped),
    };
    return TEST_MAIN(cases, false);
}
