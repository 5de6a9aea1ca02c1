/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the sample heap (src/core/sampleheap.h), where the preload plugin puts sampled
 * blocks by default: blocks are inside the range and nothing else is,
 * aligned to their class (and to any power-of-two alignment asked for), at least as large as
 * asked, zeroed when asked even after reuse, recycled after a free, given back to the kernel
 * when large; requests it cannot serve get NULL; and threads allocating and freeing at once
 * never get the same block twice. With chunk framing (the GOT start's heap), blocks carry
 * glibc's mmap()ed-chunk header, which glibc's own free(), realloc() and malloc_usable_size()
 * accept, and a block whose header is not the heap's is not taken for one. A sealed heap
 * (the program limited its address space) serves no fresh slot, keeps its blocks and
 * recycled slots, gives back the address space above each class's last slot, and does not
 * take blocks someone maps there for its own, also while threads allocate as it is sealed.
 * Only the slots handed out go into core dumps.
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
        EXPECT((uintptr_t)p % usable == 0);
        memset(p, 0xab, n); /* writable throughout */
        EXPECT(memprof__sheap_fits(&h, p, n));
        EXPECT(!memprof__sheap_fits(&h, p, 2 * usable));
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
    size_t sizes[] = {48, 5000, MEMPROF_SHEAP_RELEASE_MIN, 3 * MEMPROF_SHEAP_RELEASE_MIN};
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
            EXPECT(memprof__sheap_fits(&h, p, n));
            EXPECT(!memprof__sheap_fits(&h, p, 2 * size));
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

static size_t resident_pages(const void *p, size_t len)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE), n = len / page, count = 0;
    unsigned char vec[1024];
    if (n > sizeof vec || mincore((void *)p, len, vec) != 0)
        return (size_t)-1;
    for (size_t i = 0; i < n; i++)
        count += vec[i] & 1;
    return count;
}

static void test_large_blocks_give_their_pages_back(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t n = 2 * MEMPROF_SHEAP_RELEASE_MIN;
    char *p = memprof__sheap_alloc(&h, n, 0, false);
    CHECK(p != NULL);
    memset(p, 1, n);
    EXPECT_EQ_U(resident_pages(p, n), n / (size_t)sysconf(_SC_PAGESIZE));
    errno = 1234;
    memprof__sheap_free(&h, p);
    EXPECT_EQ(errno, 1234);
    /* Only the page holding the free-list link stays. */
    EXPECT(resident_pages(p, n) <= 1);
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

static void test_a_limited_address_space_gets_no_heap(void)
{
    /* RLIMIT_AS and RLIMIT_DATA count the reservation against the program's own budget:
     * none is made. In a child, so the limit stays there. */
    for (int resource = 0; resource < 2; resource++) {
        pid_t pid = fork();
        CHECK(pid >= 0);
        if (pid == 0) {
            struct rlimit lim = {(rlim_t)64 << 30, (rlim_t)64 << 30};
            if (setrlimit(resource ? RLIMIT_DATA : RLIMIT_AS, &lim) != 0)
                _exit(2);
            struct memprof_sheap h = {0};
            int rc = memprof__sheap_init(&h, 0);
            _exit(rc == -ENOMEM && h.size == 0 && memprof__sheap_alloc(&h, 16, 0, false) == NULL
                      ? 0
                      : 1);
        }
        int status;
        CHECK(waitpid(pid, &status, 0) == pid);
        EXPECT(WIFEXITED(status) && WEXITSTATUS(status) == 0);
    }
}

/* Whether [p, p + len) is mapped at all. */
static bool mapped(const void *p, size_t len)
{
    unsigned char vec[16];
    return len / page_size() <= sizeof vec && mincore((void *)p, len, vec) == 0;
}

static void test_a_sealed_heap_serves_no_fresh_slot_but_keeps_its_blocks(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    char *a = memprof__sheap_alloc(&h, 100, 0, false);  /* class 128 */
    char *b = memprof__sheap_alloc(&h, 5000, 0, false); /* class 8192 */
    char *c = memprof__sheap_alloc(&h, 5000, 0, false);
    CHECK(a && b && c);
    memset(a, 7, 100);
    memprof__sheap_free(&h, b); /* on its class's free list */

    size_t size = (size_t)MEMPROF_SHEAP_CLASSES << MEMPROF_SHEAP_RANGE_SHIFT;
    size_t released = memprof__sheap_seal(&h);
    EXPECT(released > size - ((size_t)64 << 20) && released < size);
    EXPECT_EQ_U(memprof__sheap_seal(&h), 0); /* once */

    EXPECT(memprof__sheap_owns(&h, a) && memprof__sheap_holds(&h, a) && a[99] == 7);
    EXPECT(memprof__sheap_alloc(&h, 100, 0, false) == NULL);     /* no fresh slot */
    EXPECT(memprof__sheap_alloc(&h, 1 << 20, 0, false) == NULL); /* a class never used */
    char *again = memprof__sheap_alloc(&h, 5000, 0, true);       /* recycled */
    EXPECT(again == b);
    EXPECT(again && again[0] == 0 && again[4999] == 0);
    memprof__sheap_free(&h, a);
    EXPECT(memprof__sheap_alloc(&h, 100, 0, false) == a);
    memprof__sheap_free(&h, a);
    memprof__sheap_free(&h, again);
    memprof__sheap_free(&h, c);
    memprof__sheap_destroy(&h);
}

static void test_a_sealed_heap_unmaps_above_each_class_and_holds_nothing_there(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    size_t page = page_size(), slot = 2 * page;
    char *last = NULL;
    for (int i = 0; i < 40; i++)
        last = memprof__sheap_alloc(&h, slot, 0, false);
    CHECK(last != NULL);
    memprof__sheap_seal(&h);
    EXPECT(mapped(last, slot));
    /* The class's first slots past the mark: unmapped, owned by range, not the heap's. */
    char *above = last + 32 * slot;
    EXPECT(!mapped(above, page));
    EXPECT(memprof__sheap_owns(&h, above));
    EXPECT(!memprof__sheap_used(&h, above) && !memprof__sheap_holds(&h, above));
    EXPECT(memprof__sheap_used(&h, last) && memprof__sheap_holds(&h, last));
    /* A class no block ever came from is wholly given back, and the kernel may map there. */
    char *empty = (char *)h.base + ((size_t)(20 - MEMPROF_SHEAP_MIN_SHIFT) << 30);
    EXPECT(!mapped(empty, page));
    void *theirs = mmap(empty, page, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
    EXPECT(theirs == empty);
    EXPECT(memprof__sheap_owns(&h, empty) && !memprof__sheap_holds(&h, empty));
    if (theirs != MAP_FAILED)
        munmap(theirs, page);
    memprof__sheap_destroy(&h);
}

/* Whether the mapping holding p goes into core dumps: no "dd" among its VmFlags in
 * /proc/self/smaps. -1 if it cannot be told. */
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

static void test_only_the_used_part_goes_into_core_dumps(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    char *far = (char *)h.base + ((size_t)(20 - MEMPROF_SHEAP_MIN_SHIFT) << 30) + (64u << 20);
    EXPECT_EQ(in_core_dumps(far), 0); /* reserved, not used: left out */
    char *a = memprof__sheap_alloc(&h, 100, 0, false);
    char *b = memprof__sheap_alloc(&h, (size_t)3 << 20, 0, false); /* a 4 MiB slot */
    CHECK(a && b);
    EXPECT_EQ(in_core_dumps(a), 1);
    EXPECT_EQ(in_core_dumps(b), 1);
    EXPECT_EQ(in_core_dumps(b + ((size_t)4 << 20) - 1), 1); /* the slot's last byte */
    EXPECT_EQ(in_core_dumps(b + ((size_t)4 << 20)), 0);     /* the next, unused slot */
    EXPECT_EQ(in_core_dumps(far), 0);
    memprof__sheap_free(&h, a);
    memprof__sheap_free(&h, b);
    memprof__sheap_destroy(&h);
}

/* Threads allocating blocks of several classes and writing every page of them, while the
 * heap is sealed under them: a slot handed out past a class's mark would be unmapped. */
struct seal_churn {
    struct memprof_sheap *h;
    uint64_t seed;
    _Atomic int *sealed, *stop;
    _Atomic unsigned long *rounds, *after_seal;
};

static void *seal_churn_thread(void *arg)
{
    struct seal_churn *c = arg;
    uint64_t rng = c->seed;
    enum { LIVE = 32 };
    char *live[LIVE] = {0};
    while (!atomic_load(c->stop)) {
        unsigned k = (unsigned)test_rand_below(&rng, LIVE);
        if (live[k])
            memprof__sheap_free(c->h, live[k]);
        size_t n = (size_t)16 << test_rand_below(&rng, 12);
        int sealed = atomic_load(c->sealed);
        live[k] = memprof__sheap_alloc(c->h, n, 0, false);
        if (live[k]) {
            /* A word on every page, relaxed atomics as in churn_thread(): a pop that lost its
             * race may still read a taken block's first word, by design. */
            for (size_t off = 0; off < n; off += 4096)
                __atomic_store_n((uint64_t *)(live[k] + off), 1, __ATOMIC_RELAXED);
            *c->after_seal += sealed != 0;
        }
        (*c->rounds)++;
    }
    for (unsigned k = 0; k < LIVE; k++)
        if (live[k])
            memprof__sheap_free(c->h, live[k]);
    return NULL;
}

/* Waits until *counter reaches `target`; false after 30 s. */
static bool wait_for(_Atomic unsigned long *counter, unsigned long target)
{
    for (int i = 0; i < 30000 && atomic_load(counter) < target; i++) {
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
    }
    return atomic_load(counter) >= target;
}

static void test_sealing_while_threads_allocate_hands_out_no_unmapped_slot(void)
{
    struct memprof_sheap h;
    CHECK(setup(&h));
    enum { THREADS = 4 };
    pthread_t t[THREADS];
    struct seal_churn c[THREADS];
    _Atomic int sealed = 0, stop = 0;
    _Atomic unsigned long rounds = 0, after_seal = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        c[i] = (struct seal_churn){&h, i + 1, &sealed, &stop, &rounds, &after_seal};
        CHECK(pthread_create(&t[i], NULL, seal_churn_thread, &c[i]) == 0);
    }
    EXPECT(wait_for(&rounds, 20000));
    EXPECT(memprof__sheap_seal(&h) > 0);
    atomic_store(&sealed, 1);
    /* Recycled slots still serve: the heap goes on working after the seal. */
    EXPECT(wait_for(&after_seal, 1000));
    atomic_store(&stop, 1);
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
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
    _Atomic unsigned long *errors;
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
        if (!p) {
            (*c->errors)++;
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
    _Atomic unsigned long errors = 0;
    for (unsigned i = 0; i < THREADS; i++) {
        c[i] = (struct churn){&h, i + 1, &errors};
        CHECK(pthread_create(&t[i], NULL, churn_thread, &c[i]) == 0);
    }
    for (unsigned i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    EXPECT_EQ_U(errors, 0);
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
        TEST_CASE(test_large_blocks_give_their_pages_back),
        TEST_CASE(test_requests_it_cannot_serve_get_null),
        TEST_CASE(test_a_limited_address_space_gets_no_heap),
        TEST_CASE(test_threads_never_share_a_block),
        TEST_CASE(test_framed_blocks_carry_glibc_mmapped_chunk_headers),
        TEST_CASE(test_glibc_frees_reallocs_and_sizes_framed_blocks),
        TEST_CASE(test_only_blocks_with_the_heaps_header_are_held),
        TEST_CASE(test_threads_never_share_a_framed_block),
        TEST_CASE(test_a_sealed_heap_serves_no_fresh_slot_but_keeps_its_blocks),
        TEST_CASE(test_a_sealed_heap_unmaps_above_each_class_and_holds_nothing_there),
        TEST_CASE(test_sealing_while_threads_allocate_hands_out_no_unmapped_slot),
        TEST_CASE(test_only_the_used_part_goes_into_core_dumps),
    };
    return TEST_MAIN(cases, false);
}
