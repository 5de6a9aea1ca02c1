/* SPDX-License-Identifier: MIT */
/*
 * Where the preload plugin puts the blocks it samples: argv[1] "heap" expects them in its
 * sample heap, "glibc" with glibc's allocator. Run at MEMPROF_RATE=1, where every block of
 * 1000 bytes is sampled (p = 1 - e^-1000). The sign is the block itself: a sample-heap block
 * has its power-of-two slot as usable size (1024) and is aligned to it; glibc's has 1000
 * usable bytes. Built twice, position-independent and not, since the plugin's test that
 * free() reaches it must accept a non-PIE program's PLT stub (Debian's python3 and cc1). The
 * blocks are freed through a pointer to free, as those programs do somewhere: in a non-PIE
 * program that makes the PLT stub free's canonical address, the one dlsym() returns.
 */
#include <malloc.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv)
{
    if (argc != 2 || (strcmp(argv[1], "heap") && strcmp(argv[1], "glibc"))) {
        fprintf(stderr, "usage: %s heap|glibc\n", argv[0]);
        return 2;
    }
    enum { N = 200 };
    void *blocks[N];
    int in_heap = 0;
    for (int i = 0; i < N; i++) {
        blocks[i] = malloc(1000);
        if (!blocks[i])
            return 1;
        memset(blocks[i], i, 1000);
        in_heap += malloc_usable_size(blocks[i]) == 1024 && (uintptr_t)blocks[i] % 1024 == 0;
    }
    void (*volatile release)(void *) = free;
    for (int i = 0; i < N; i++)
        release(blocks[i]);
    printf("%d of %d sampled blocks of 1000 B in the sample heap\n", in_heap, N);
    bool want_heap = strcmp(argv[1], "heap") == 0;
    if (want_heap ? in_heap < N : in_heap > 0) {
        printf("FAIL: expected %s\n", want_heap ? "all of them" : "none");
        return 1;
    }
    return 0;
}
