/* SPDX-License-Identifier: MIT */
/*
 * N allocations of SIZE bytes, each freed at once (arguments N and SIZE): the eBPF tests
 * count how many the kernel's sampler takes, which must follow p(s) = 1 - exp(-s/R).
 */
#include <stdlib.h>

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 0;
    size_t size = argc > 2 ? (size_t)atol(argv[2]) : 0;
    if (n <= 0 || size == 0)
        return 2;
    for (long i = 0; i < n; i++) {
        void *volatile p = malloc(size);
        if (!p)
            return 1;
        free(p);
    }
    return 0;
}
