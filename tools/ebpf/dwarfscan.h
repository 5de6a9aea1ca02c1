/* SPDX-License-Identifier: MIT */
/*
 * Allocator entry points only the debug information knows (dwarfscan.c): when a Rust
 * program's #[global_allocator] is defined in its own crate, rustc inlines the allocator
 * shims (__rust_alloc & co.) and the allocator's GlobalAlloc methods into every caller in
 * that crate, so no symbol marks the allocations. The DWARF still lists each inlined copy
 * (DW_TAG_inlined_subroutine) with its first address and where its arguments are there,
 * and each out-of-line GlobalAlloc method with where its arguments are at its entry (rustc
 * may have dropped or reordered them, so the ELF symbol alone cannot tell). Each such site
 * becomes a uprobe whose descriptor (events.h) says how the BPF program reads the size and
 * the pointer.
 */
#ifndef MEMPROF_TOOLS_EBPF_DWARFSCAN_H
#define MEMPROF_TOOLS_EBPF_DWARFSCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elfscan.h"
#include "events.h"

/* One probe site: where the uprobe goes (file offset) and what the program reads there. */
struct memprof_ebpf_dwsite {
    uint64_t offset;
    struct memprof_ebpf_site desc;
};

struct memprof_ebpf_dwarf {
    struct memprof_ebpf_dwsite *sites;
    size_t nsites;
    bool debug_info;    /* the file has DWARF this build can read */
    size_t inlined;     /* sites that are inlined copies (no return probe: no pointer) */
    size_t unreadable;  /* entry points found whose size could not be located: skipped */
    size_t over_budget; /* sites beyond `max_sites`: skipped */
    /* Inlined frees where the block's address is gone: an allocator whose dealloc ignores
     * it (a bump allocator) leaves no trace of it in the code, so no free is seen. */
    size_t frees_unseen;
};

/* Reads the DWARF of `path` (in the file itself; separate debug files are not looked up)
 * for Rust allocator entry points that `elf` (memprof__ebpf_elf_scan() of the same file)
 * did not already find by symbol, at most `max_sites`. Returns 0 (also when the file has
 * no debug information: out->debug_info false) or a negative errno; free with
 * memprof__ebpf_dwarf_free(). */
int memprof__ebpf_dwarf_scan(const char *path, const struct memprof_ebpf_elf *elf, size_t max_sites,
                             struct memprof_ebpf_dwarf *out);

void memprof__ebpf_dwarf_free(struct memprof_ebpf_dwarf *d);

/* Whether the function containing virtual address `vaddr` of `path` keeps a frame pointer
 * there, from the file's call frame information (.eh_frame): 1 yes, 0 no, -1 not known (no
 * CFI for the address, no libdw, not x86-64). */
int memprof__ebpf_dwarf_fp_at(const char *path, uint64_t vaddr);

#endif
