/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the platform layer's stack-bounds lookup (src/core/platform.h,
 * memprof__pf_mapping_of()), which bounds frame-pointer walks: it names the mapping that
 * holds an address -- a thread's stack, the main stack, a mapping of the test's own, also
 * one whose line in /proc/self/maps is longer than the reader's buffer -- and nothing for
 * an address no mapping holds. The sample heap's window (memprof__pf_window()) is a place
 * where nothing is mapped, and none is given where everything is. And the profiler's own mappings
 * (memprof__pf_map()) are neither faulted in nor locked whole once the program asked
 * mlockall(MCL_FUTURE) for every later mapping: they are locked as they are touched.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "core/platform.h"
#include "test.h"

static size_t page_size(void)
{
    return (size_t)sysconf(_SC_PAGESIZE);
}

static void test_the_main_stack_holds_a_local_variable(void)
{
    int local = 0;
    uintptr_t lo = 0, hi = 0;
    CHECK(memprof__pf_mapping_of((uintptr_t)&local, &lo, &hi));
    EXPECT(lo <= (uintptr_t)&local && (uintptr_t)&local < hi);
    EXPECT_EQ_U(lo % page_size(), 0);
    EXPECT_EQ_U(hi % page_size(), 0);
}

static void *thread_bounds(void *arg)
{
    uintptr_t *b = arg;
    int local = 0;
    b[2] = (uintptr_t)&local;
    b[3] = memprof__pf_mapping_of(b[2], &b[0], &b[1]);
    return NULL;
}

static void test_a_threads_stack_holds_its_local_variable_and_not_the_main_stack(void)
{
    uintptr_t b[4] = {0}, mlo = 0, mhi = 0;
    int local = 0;
    pthread_t t;
    CHECK(pthread_create(&t, NULL, thread_bounds, b) == 0);
    pthread_join(t, NULL);
    CHECK(b[3]);
    EXPECT(b[0] <= b[2] && b[2] < b[1]);
    CHECK(memprof__pf_mapping_of((uintptr_t)&local, &mlo, &mhi));
    EXPECT(b[1] <= mlo || b[0] >= mhi);
}

static void test_a_mapping_is_found_exactly_and_a_hole_is_not(void)
{
    size_t page = page_size();
    char *p = mmap(NULL, 3 * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    CHECK(p != MAP_FAILED);
    /* Three mappings of their own: different protections keep the kernel from merging. */
    CHECK(mprotect(p + page, page, PROT_READ) == 0);
    uintptr_t lo = 0, hi = 0;
    EXPECT(memprof__pf_mapping_of((uintptr_t)p + page + 8, &lo, &hi));
    EXPECT_EQ_U(lo, (uintptr_t)p + page);
    EXPECT_EQ_U(hi, (uintptr_t)p + 2 * page);
    munmap(p + page, page);
    EXPECT(!memprof__pf_mapping_of((uintptr_t)p + page + 8, &lo, &hi));
    munmap(p, page);
    munmap(p + 2 * page, page);
}

/* The sample heap's window (memprof__pf_window()) lies between an eighth and a quarter of
 * the address space; its end is the power of two above the stack. */
static void window_region(uintptr_t *lo, uintptr_t *hi)
{
    int local;
    uintptr_t top = (uintptr_t)1 << (64 - __builtin_clzll((unsigned long long)(uintptr_t)&local));
    *lo = top / 8;
    *hi = top / 4;
}

static void test_a_window_is_given_where_nothing_is_mapped(void)
{
    size_t size = (size_t)1 << 30;
    uintptr_t w = memprof__pf_window(size, size);
    CHECK(w != 0);
    EXPECT_EQ_U(w % size, 0);
    uintptr_t lo, hi;
    window_region(&lo, &hi);
    EXPECT(w >= lo && w + size <= hi);
    /* Nothing is left mapped there, and nothing was: the whole window can be taken. */
    void *p = mmap((void *)w, size, PROT_NONE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    EXPECT(p == (void *)w);
    if (p != MAP_FAILED)
        munmap(p, size);
}

static void test_no_window_is_given_where_everything_is_mapped(void)
{
    uintptr_t lo, hi;
    window_region(&lo, &hi);
    void *all = mmap((void *)lo, hi - lo, PROT_NONE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED_NOREPLACE, -1, 0);
    if (all != (void *)lo) { /* a sanitizer's shadow memory or an old kernel: nothing to prove */
        if (all != MAP_FAILED)
            munmap(all, hi - lo);
        printf("  (the window's region is not free in this process; skipped)\n");
        return;
    }
    EXPECT_EQ_U(memprof__pf_window((size_t)1 << 30, (size_t)1 << 30), 0);
    munmap(all, hi - lo);
}

static void test_a_mapping_with_a_path_longer_than_the_buffer_is_found(void)
{
    /* A file whose name takes more than the reader's 1 KiB, mapped: its line is judged by
     * its head, and the lines after it are still read. */
    char dir[] = "/tmp/memprof-platform-XXXXXX";
    CHECK(mkdtemp(dir) != NULL);
    char path[4096];
    size_t n = (size_t)snprintf(path, sizeof path, "%s/", dir);
    memset(path + n, 'x', 250);
    path[n + 250] = 0;
    /* Four directories of 250 bytes and the file: about 1.3 KiB. */
    for (int i = 0; i < 4; i++) {
        CHECK(mkdir(path, 0700) == 0);
        n = strlen(path);
        path[n] = '/';
        memset(path + n + 1, 'y', 250);
        path[n + 251] = 0;
    }
    int fd = open(path, O_RDWR | O_CREAT | O_EXCL, 0600);
    CHECK(fd >= 0);
    size_t page = page_size();
    CHECK(ftruncate(fd, (off_t)page) == 0);
    char *m = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
    close(fd);
    CHECK(m != MAP_FAILED);
    uintptr_t lo = 0, hi = 0;
    EXPECT(memprof__pf_mapping_of((uintptr_t)m + 1, &lo, &hi));
    EXPECT_EQ_U(lo, (uintptr_t)m);
    int local = 0; /* the main stack comes after it in the file */
    EXPECT(memprof__pf_mapping_of((uintptr_t)&local, &lo, &hi));
    EXPECT(lo <= (uintptr_t)&local && (uintptr_t)&local < hi);
    munmap(m, page);
    unlink(path);
    for (int i = 0; i < 5; i++) {
        *strrchr(path, '/') = 0;
        rmdir(path);
    }
}

/* Resident pages of [p, p + len). */
static size_t resident(const void *p, size_t len)
{
    unsigned char vec[4096];
    size_t n = len / page_size(), count = 0;
    if (n > sizeof vec || mincore((void *)p, len, vec) != 0)
        return (size_t)-1;
    for (size_t i = 0; i < n; i++)
        count += vec[i] & 1;
    return count;
}

/* VmLck of /proc/self/status in bytes. */
static long locked_bytes(void)
{
    FILE *f = fopen("/proc/self/status", "r");
    char line[256];
    long kib = -1;
    while (f && kib < 0 && fgets(line, sizeof line, f))
        if (sscanf(line, "VmLck: %ld kB", &kib) != 1)
            kib = -1;
    if (f)
        fclose(f);
    return kib * 1024;
}

static void test_the_profilers_mappings_are_locked_as_touched_under_mcl_future(void)
{
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
    SKIP("the sanitizer's own later mappings would be locked and faulted in whole");
#endif
    /* 2 MiB each: within an unprivileged 8 MiB RLIMIT_MEMLOCK. The case runs in a child of
     * its own, where the lock stays. */
    size_t size = (size_t)2 << 20, pages = size / page_size();
    if (mlockall(MCL_FUTURE) != 0)
        SKIP("mlockall(MCL_FUTURE) is not permitted");
    char *theirs = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    long before = locked_bytes();
    char *mine = memprof__pf_map(size);
    if (theirs == MAP_FAILED || !mine)
        SKIP("cannot lock 4 MiB");
    EXPECT_EQ_U(resident(theirs, size), pages); /* what MCL_FUTURE does to a mapping */
    EXPECT_EQ_U(resident(mine, size), 0);
    mine[0] = 1;
    mine[size - 1] = 1;
    EXPECT_EQ_U(resident(mine, size), 2);
    /* Locked all the same (the kernel counts a mapping locked on fault whole). */
    EXPECT(locked_bytes() >= before + (long)size);
    memprof__pf_unmap(mine, size);
    munmap(theirs, size);
    munlockall();
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_the_main_stack_holds_a_local_variable),
        TEST_CASE(test_a_threads_stack_holds_its_local_variable_and_not_the_main_stack),
        TEST_CASE(test_a_mapping_is_found_exactly_and_a_hole_is_not),
        TEST_CASE(test_a_window_is_given_where_nothing_is_mapped),
        TEST_CASE(test_no_window_is_given_where_everything_is_mapped),
        TEST_CASE(test_a_mapping_with_a_path_longer_than_the_buffer_is_found),
        TEST_CASE(test_the_profilers_mappings_are_locked_as_touched_under_mcl_future),
    };
    return TEST_MAIN(cases, false);
}
