/* SPDX-License-Identifier: MIT */
/*
 * Demangling (demangle.h) with libiberty, the demanglers of GCC and binutils (c++filt):
 * rust_demangle() for Rust's legacy and v0 schemes, and the Itanium C++ demangler through
 * its component interface. Why libiberty and why those two entry points is in
 * doc/architecture.md ("Demangling").
 */
#include "resolve/demangle.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include <libiberty/demangle.h>

/* Parameter types and cv-qualifiers are part of what tells C++ overloads apart. */
#define CXX_OPTIONS (DMGL_PARAMS | DMGL_ANSI)

static bool has_prefix(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

/* C++ through the component interface rather than cplus_demangle_v3(): that one puts two
 * arrays sized by the name's length on the stack (tens of KiB for a long template name, on
 * whatever thread asks for a snapshot), the component interface malloc()s them. */
static char *demangle_cxx(const char *name)
{
    void *mem = NULL;
    struct demangle_component *tree = cplus_demangle_v3_components(name, CXX_OPTIONS, &mem);
    char *out = NULL;
    if (tree) {
        size_t allocated = 0;
        size_t estimate = strlen(name) * 2;
        out = cplus_demangle_print(CXX_OPTIONS, tree, estimate < 1u << 20 ? (int)estimate : 0,
                                   &allocated);
    }
    free(mem);
    return out;
}

char *memprof__demangle(const char *name)
{
    /* Rust v0 names start with _R; Rust legacy names are C++-shaped (_ZN ... E) and end in
     * a hash component, which rust_demangle() checks before it accepts one. */
    if (!name || !(has_prefix(name, "_Z") || has_prefix(name, "_R")))
        return NULL;
    /* A mangled name never holds '@': one comes from a symbol version. */
    char *copy = NULL;
    const char *at = strchr(name, '@');
    if (at) {
        if (!(copy = strndup(name, (size_t)(at - name))))
            return NULL;
        name = copy;
    }
    /* Options 0: without DMGL_VERBOSE, legacy names lose their hash and v0 names their
     * crate disambiguators, as rustfilt prints them. */
    char *out = rust_demangle(name, 0);
    if (!out && has_prefix(name, "_Z"))
        out = demangle_cxx(name);
    free(copy);
    return out;
}
