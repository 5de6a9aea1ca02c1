/* SPDX-License-Identifier: MIT */
/*
 * A shared module that the dlopen tests load at run time: itest_dso_hold() allocates
 * n blocks of 1 MiB for its caller, so the profile's call site lies in code that may be
 * unloaded (dlclose) before the profile is written at exit.
 */
#include <stdlib.h>

int itest_dso_hold(void **out, int n);

__attribute__((noinline)) int itest_dso_hold(void **out, int n)
{
    for (int i = 0; i < n; i++) {
        out[i] = malloc((size_t)1 << 20);
        if (!out[i])
            return -1;
        *(volatile char *)out[i] = (char)i;
    }
    return 0;
}
