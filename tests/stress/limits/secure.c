/* SPDX-License-Identifier: MIT */
/*
 * A program with the preload plugin as a direct dependency (DT_NEEDED by absolute path,
 * before libc) instead of LD_PRELOAD, which the dynamic loader ignores in set-uid programs:
 * so the plugin is loaded, interposes malloc and reads MEMPROF_* even when the program runs
 * set-uid. runner.py's set-uid check runs a set-uid copy and a plain copy of it with
 * MEMPROF_OUTPUT set: only the plain one may write a profile. It allocates a little, checks
 * that its malloc is the plugin's, and prints the engine state and whether the process is
 * running with privileges different from its user's (AT_SECURE).
 */
#include "limits.h"

#include <sys/auxv.h>

void *limits_secure_alloc(size_t size);

__attribute__((noinline)) void *limits_secure_alloc(size_t size)
{
    void *p = malloc(size);
    limits_touch(p, 4);
    return p;
}

int main(void)
{
    CHECK(limits_preloaded(), "malloc is not the plugin's");
    void *keep[64];
    for (int i = 0; i < 64; i++)
        keep[i] = limits_secure_alloc(1 << 16);
    memprof_stats s = limits_stats();
    printf("secure=%lu state=%u\n", getauxval(AT_SECURE), s.state);
    for (int i = 0; i < 64; i++)
        free(keep[i]);
    return 0;
}
