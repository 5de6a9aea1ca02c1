/* SPDX-License-Identifier: MIT */
/*
 * Freeing large blocks the program made read-only or inaccessible. JIT compilers write code
 * into a buffer and mprotect() it to PROT_READ | PROT_EXEC, programs seal tables they built
 * with PROT_READ, allocators of their own put PROT_NONE over blocks they hand back; later
 * they free() the buffer without giving write access back. glibc allows it for its large
 * blocks, which are mappings of their own: free() reads the chunk header (not protected
 * when the program protected only the block's pages, readable when it protected PROT_READ the
 * page the header shares with the block) and unmaps the mapping, and the next block of that
 * size is a fresh, writable mapping. (glibc's heap blocks are different: free() writes its
 * lists into them, so a protected small block crashes glibc itself.) A profiler that writes
 * into a freed block (a free list's link, a header) or hands out its memory again with the
 * old protection breaks such programs. argv: BACKEND (prog.h).
 *
 * glibc's mmap threshold is fixed at 128 KiB (M_MMAP_THRESHOLD; by default glibc raises it
 * to the size of each mapped block freed, and a block of that size would then be a heap
 * block). For each of 40 MiB, 1 MiB and 256 KiB, four rounds of: four blocks
 *   - from posix_memalign(page), written, the whole block made PROT_READ, then freed;
 *   - the same with PROT_NONE;
 *   - from malloc(), written, every page holding the block made PROT_READ (the first one
 *     holds glibc's header, or the sample heap's under the GOT start), then freed;
 * and after each, four blocks of the size from calloc(), which must read zero and be
 * writable (the same slots again where the profiler recycles them), and freed. Blocks are
 * written in their first 64 KiB and once in every 64 KiB after that, which is enough to see
 * stale contents and to fault on a protected page.
 * The 40 MiB blocks are sampled at every rate (256 KiB ones about 40 % of the time at the
 * default rate).
 */
#include "prog.h"

#include <malloc.h>
#include <sys/mman.h>
#include <unistd.h>

#define KIB    ((size_t)1 << 10)
#define MIB    ((size_t)1 << 20)
#define BLOCKS 4
#define ROUNDS 4

enum how { ALIGNED_READ, ALIGNED_NONE, HEADER_PAGE_READ };

static const char *const how_name[] = {"posix_memalign, PROT_READ", "posix_memalign, PROT_NONE",
                                       "malloc, its pages and the header's PROT_READ"};

static size_t page;

/* Writes v over the first 64 KiB of a block and once in every 64 KiB after them: enough to
 * see stale contents and to fault on a protected page, without the time of filling 40 MiB. */
static void fill(unsigned char *p, size_t n, unsigned char v)
{
    size_t head = n < 64 * KIB ? n : 64 * KIB;
    memset(p, v, head);
    for (size_t j = head; j < n; j += 64 * KIB)
        p[j] = v;
    p[n - 1] = v;
}

/* Allocates, fills, protects and frees BLOCKS blocks of n bytes. */
static void protect_and_free(size_t n, enum how how)
{
    unsigned char *b[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        if (how == HEADER_PAGE_READ) {
            b[i] = malloc(n);
            CHECK(b[i] != NULL, "malloc(%zu)", n);
        } else {
            void *p;
            int rc = posix_memalign(&p, page, n);
            b[i] = p;
            CHECK(rc == 0, "posix_memalign(%zu, %zu): %s", page, n, strerror(rc));
        }
        fill(b[i], n, 0x5a);
        uintptr_t lo = (uintptr_t)b[i], hi = lo + n;
        if (how == HEADER_PAGE_READ) { /* the pages that hold any of it */
            lo &= ~(page - 1);
            hi = (hi + page - 1) & ~(page - 1);
        }
        int prot = how == ALIGNED_NONE ? PROT_NONE : PROT_READ;
        CHECK(mprotect((void *)lo, hi - lo, prot) == 0, "mprotect(%zu bytes): %s", hi - lo,
              strerror(errno));
    }
    for (int i = 0; i < BLOCKS; i++)
        free(b[i]);
}

/* Blocks of n bytes after protected ones were freed: zero and writable. */
static void calloc_and_write(size_t n, enum how how)
{
    unsigned char *b[BLOCKS];
    for (int i = 0; i < BLOCKS; i++) {
        b[i] = calloc(1, n);
        CHECK(b[i] != NULL, "calloc(1, %zu)", n);
        for (size_t j = 0; j < n; j += j < 64 * KIB ? 1 : 64 * KIB)
            CHECK(b[i][j] == 0, "calloc(1, %zu) after freeing blocks (%s): byte %zu is %#x", n,
                  how_name[how], j, b[i][j]);
        CHECK(b[i][n - 1] == 0, "calloc(1, %zu): its last byte is not 0", n);
        fill(b[i], n, 0xa5); /* faults if the block kept its old protection */
    }
    for (int i = 0; i < BLOCKS; i++)
        free(b[i]);
}

int main(int argc, char **argv)
{
    CHECK(argc == 2, "usage: %s BACKEND", argv[0]);
    CHECK(mallopt(M_MMAP_THRESHOLD, 128 * 1024) == 1, "mallopt failed");
    prog_setup(argv[1]);
    page = (size_t)sysconf(_SC_PAGESIZE);
    static const size_t sizes[] = {40 * MIB, MIB, 256 * KIB};
    uint64_t before = prog_profiled() ? prog_stats().total_samples : 0;
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++)
        for (int round = 0; round < ROUNDS; round++)
            for (enum how how = ALIGNED_READ; how <= HEADER_PAGE_READ; how++) {
                protect_and_free(sizes[s], how);
                calloc_and_write(sizes[s], how);
            }
    if (prog_profiled()) {
        uint64_t after = prog_stats().total_samples;
        CHECK(after > before, "nothing was sampled");
        printf("%" PRIu64 " samples\n", after - before);
    }
    return 0;
}
