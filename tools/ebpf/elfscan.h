/* SPDX-License-Identifier: MIT */
/*
 * What the eBPF mode reads from a target's ELF files (elfscan.c): the allocator entry points
 * to put uprobes on (libc's malloc family where a file defines it, the Rust allocator shims
 * in every spelling rustc has used) as file offsets, the GNU build id, and whether a
 * function sets up a frame pointer, which the kernel's user-stack walk needs.
 */
#ifndef MEMPROF_TOOLS_EBPF_ELFSCAN_H
#define MEMPROF_TOOLS_EBPF_ELFSCAN_H

#include <libelf.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* How a probed function's arguments are read (which BPF program serves it). */
enum memprof_ebpf_probe_kind {
    MEMPROF_EBPF_PROBE_SIZE1,          /* malloc, valloc, pvalloc, __rust_alloc(_zeroed) */
    MEMPROF_EBPF_PROBE_CALLOC,         /* calloc(n, size) */
    MEMPROF_EBPF_PROBE_SIZE2,          /* aligned_alloc, memalign (align, size) */
    MEMPROF_EBPF_PROBE_POSIX_MEMALIGN, /* posix_memalign(memptr, align, size) */
    MEMPROF_EBPF_PROBE_REALLOC,        /* realloc(ptr, size) */
    MEMPROF_EBPF_PROBE_REALLOCARRAY,   /* reallocarray(ptr, n, size) */
    MEMPROF_EBPF_PROBE_RUST_REALLOC,   /* __rust_realloc(ptr, old, align, size) */
    MEMPROF_EBPF_PROBE_FREE,           /* free, __rust_dealloc: entry only */
    MEMPROF_EBPF_PROBE_GA_ALLOC,       /* <A as GlobalAlloc>::alloc(_zeroed)(&self, layout) */
    MEMPROF_EBPF_PROBE_GA_REALLOC,     /* <A as GlobalAlloc>::realloc(&self, p, layout, n) */
    MEMPROF_EBPF_PROBE_GA_DEALLOC,     /* <A as GlobalAlloc>::dealloc(&self, p, layout) */
};

/* One entry point found in a file. */
struct memprof_ebpf_probe {
    const char *name; /* the plain name (malloc, __rust_alloc), static storage */
    enum memprof_ebpf_probe_kind kind;
    bool rust;       /* a Rust allocator shim or GlobalAlloc method */
    uint64_t offset; /* in the file, where the uprobe goes */
};

#define MEMPROF_EBPF_MAX_PROBES 64

/* What elfscan found in one file. */
struct memprof_ebpf_elf {
    struct memprof_ebpf_probe probes[MEMPROF_EBPF_MAX_PROBES];
    size_t nprobes;
    char build_id[41]; /* hex; empty when the file has none */
    bool static_exec;  /* an executable without a program interpreter */
    /* Rust: whether a Layout argument comes as (align, size), as in the rustc that built
     * the file (its .comment; rustc 1.67 and later put the alignment, the field with a
     * niche, first). */
    bool layout_align_first;
    bool rustc; /* .comment names rustc: a Rust program or library */
};

/* `path` opened for reading with libelf: the handle, with the file's descriptor in *fd for
 * memprof__ebpf_elf_close(); NULL with errno set when it cannot be opened (ENOEXEC: not an
 * ELF file), nothing then left open. */
Elf *memprof__ebpf_elf_open(const char *path, int *fd);
void memprof__ebpf_elf_close(Elf *e, int fd);

/* Reads `path`: with `libc`, the malloc family it defines; the Rust shims (__rust_alloc &
 * co., __rg_* and __rdl_* of older rustc) and the methods of GlobalAlloc implementations
 * always (rustc inlines the shims into the crate that defines the global allocator). One
 * probe per address (aliases such as memalign and aligned_alloc share one). Returns 0 or
 * a negative errno (not an ELF file: -ENOEXEC). */
int memprof__ebpf_elf_scan(const char *path, bool libc, struct memprof_ebpf_elf *out);

/* Whether the function at virtual address `vaddr` of `path` starts by setting up a frame
 * pointer: 1 yes, 0 no, -1 not known (not x86-64, or the file unreadable). */
int memprof__ebpf_elf_fp_prologue(const char *path, uint64_t vaddr);

/* The hex GNU build id of `path` into out[41] (empty when none). Returns 0 or -errno. */
int memprof__ebpf_elf_build_id(const char *path, char out[41]);

/* The virtual address (as the file's program headers lay it out) of file offset `off` in
 * `path`'s PT_LOAD segments: a mapping of that offset at `start` has load bias
 * start - *vaddr. Returns false when no segment holds it. */
bool memprof__ebpf_elf_vaddr_of(const char *path, uint64_t off, uint64_t *vaddr);

/* Whether `path` has a program interpreter (a dynamically linked program). */
bool memprof__ebpf_elf_is_dynamic(const char *path);

#endif
