/* SPDX-License-Identifier: MIT */
/*
 * A library that dlopen_search.c's loader looks for by bare name (built twice, into two
 * directories: one only the program's DT_RPATH names, one the loader's DT_RUNPATH names).
 * Its constructor allocates through libc while dlopen() runs: under the GOT start at rate 1
 * that sample's stack is unwound through the frame the profiler's dlopen hook gives glibc's
 * dlopen() (its return address inside the caller).
 */
#include <stdlib.h>
#include <string.h>

int dlopen_search_target(void);

static char *made_by_constructor;

__attribute__((constructor)) static void allocate_while_loaded(void)
{
    made_by_constructor = strdup("allocated by a constructor that dlopen() runs");
}

int dlopen_search_target(void)
{
    return made_by_constructor ? 42 : -1;
}
