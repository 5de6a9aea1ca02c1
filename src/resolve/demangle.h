/* SPDX-License-Identifier: MIT */
/*
 * Demangling of C++ (Itanium ABI) and Rust (legacy and v0) symbol names into what a person
 * reads, done by the profiler itself with libiberty's demanglers (linked statically), so
 * names come out readable whatever the profiled process loaded, and the command demangles
 * names it reads back from old or foreign profiles the same way.
 */
#ifndef MEMPROF_RESOLVE_DEMANGLE_H
#define MEMPROF_RESOLVE_DEMANGLE_H

/* The readable form of a mangled C++ or Rust name, in a new malloc()ed string the caller
 * frees; NULL when `name` is NULL, not a mangled name (C names, names already demangled,
 * interpreter frames: the caller keeps `name`), not a valid one, or memory runs out.
 * A symbol-table version suffix after a mangled name ("_ZN3foo3barEv@@V1") is dropped.
 * Rust legacy names lose their "::h<16 hex digits>" hash, as rustfilt prints them; C++
 * names keep their parameter types and qualifiers ("foo::bar(int) const").
 *
 * Thread-safe (no state). It allocates with malloc(): the in-process resolver calls it
 * under the caller's re-entrancy guard, so those allocations are never sampled. The
 * demanglers recurse and keep per-name buffers on the stack in proportion to the name's
 * nesting, bounded by libiberty's recursion limit; never call it in a hook or a signal
 * handler. */
char *memprof__demangle(const char *name);

#endif
