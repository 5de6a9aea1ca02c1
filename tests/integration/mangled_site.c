/* SPDX-License-Identifier: MIT */
/*
 * A C program whose allocating functions carry C++ and Rust symbol names (asm labels), so
 * the tests can check that the profiler demangles them itself: the process loads no C++
 * runtime whose demangler it could borrow. main calls the Rust v0 name
 * _RNvCs1a2b3c_7mycrate5outer (mycrate::outer), which calls the Rust legacy name
 * _ZN7mycrate6middle17h0123456789abcdefE (mycrate::middle, hash dropped), which calls the
 * C++ name _ZN3foo3barEv (foo::bar()), which allocates 64 x 1 MiB and keeps them until exit.
 * Built without sibling-call optimisation so each keeps its frame.
 */
#include <stdlib.h>

#include "itest.h"

#define HELD 64

static void *held[HELD];

void cxx_hold(void) __asm__("_ZN3foo3barEv");
void rust_legacy_middle(void) __asm__("_ZN7mycrate6middle17h0123456789abcdefE");
void rust_v0_outer(void) __asm__("_RNvCs1a2b3c_7mycrate5outer");

__attribute__((noinline)) void cxx_hold(void)
{
    for (int i = 0; i < HELD; i++) {
        held[i] = malloc((size_t)1 << 20);
        CHECK(held[i] != NULL, "malloc(1 MiB) failed");
        itest_touch(held[i], (unsigned char)i);
    }
}

__attribute__((noinline)) void rust_legacy_middle(void)
{
    cxx_hold();
}

__attribute__((noinline)) void rust_v0_outer(void)
{
    rust_legacy_middle();
}

int main(void)
{
    rust_v0_outer();
    return 0; /* the blocks stay live: the profile is written after this */
}
