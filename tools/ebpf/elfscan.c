/* SPDX-License-Identifier: MIT */
/*
 * Reading a target's ELF files for the eBPF mode (elfscan.h) with libelf: symbols from
 * .symtab and .dynsym (the Rust shims are local symbols, present only in .symtab), file
 * offsets through the PT_LOAD segment holding each symbol, the build id from the notes.
 *
 * Rust has spelled its allocator shims three ways: plain `__rust_alloc` (and the __rg_* and
 * __rdl_* functions behind it in older rustc), legacy-mangled, and v0-mangled under the
 * `__rustc` crate (_RNv...7___rustc12___rust_alloc). A symbol is a shim when its demangled
 * name is the shim's name or ends in "::" and that name, so `__rust_alloc_error_handler`
 * and `__rust_no_alloc_shim_is_unstable` never match. Recent rustc inlines the shims into
 * their callers in the crate that defines the #[global_allocator], where they become
 * direct calls of the allocator's GlobalAlloc methods: those are probed too, by their
 * demangled names "<A as core::alloc::global::GlobalAlloc>::alloc" and so on, when the
 * allocator comes from another crate (as allocator crates do), where they are global
 * symbols with the Rust ABI. An allocator in the program's own crate is inlined, or left
 * as local functions whose arguments rustc may have moved: only the debug information
 * shows those (dwarfscan.c).
 *
 * Frame pointers: on x86-64 a function that keeps one starts with `push %rbp; mov %rsp,%rbp`
 * (after an `endbr64` under CET). Where a file has no call frame information (which
 * dwarfscan.c reads first), the command reads the first bytes of the functions that called
 * the allocator, which says what the kernel's frame-pointer walk found above them.
 */
#define _GNU_SOURCE
#include "elfscan.h"

#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "offline/offline.h"

struct entry_name {
    const char *name;
    enum memprof_ebpf_probe_kind kind;
    bool rust;
};

static const struct entry_name entry_names[] = {
    {"malloc", MEMPROF_EBPF_PROBE_SIZE1, false},
    {"calloc", MEMPROF_EBPF_PROBE_CALLOC, false},
    {"realloc", MEMPROF_EBPF_PROBE_REALLOC, false},
    {"reallocarray", MEMPROF_EBPF_PROBE_REALLOCARRAY, false},
    {"free", MEMPROF_EBPF_PROBE_FREE, false},
    {"posix_memalign", MEMPROF_EBPF_PROBE_POSIX_MEMALIGN, false},
    {"aligned_alloc", MEMPROF_EBPF_PROBE_SIZE2, false},
    {"memalign", MEMPROF_EBPF_PROBE_SIZE2, false},
    {"valloc", MEMPROF_EBPF_PROBE_SIZE1, false},
    {"pvalloc", MEMPROF_EBPF_PROBE_SIZE1, false},
    {"__rust_alloc", MEMPROF_EBPF_PROBE_SIZE1, true},
    {"__rust_alloc_zeroed", MEMPROF_EBPF_PROBE_SIZE1, true},
    {"__rust_realloc", MEMPROF_EBPF_PROBE_RUST_REALLOC, true},
    {"__rust_dealloc", MEMPROF_EBPF_PROBE_FREE, true},
    {"__rg_alloc", MEMPROF_EBPF_PROBE_SIZE1, true},
    {"__rg_alloc_zeroed", MEMPROF_EBPF_PROBE_SIZE1, true},
    {"__rg_realloc", MEMPROF_EBPF_PROBE_RUST_REALLOC, true},
    {"__rg_dealloc", MEMPROF_EBPF_PROBE_FREE, true},
    {"__rdl_alloc", MEMPROF_EBPF_PROBE_SIZE1, true},
    {"__rdl_alloc_zeroed", MEMPROF_EBPF_PROBE_SIZE1, true},
    {"__rdl_realloc", MEMPROF_EBPF_PROBE_RUST_REALLOC, true},
    {"__rdl_dealloc", MEMPROF_EBPF_PROBE_FREE, true},
};

#define GLOBAL_ALLOC " as core::alloc::global::GlobalAlloc>::"
static const struct entry_name global_alloc_methods[] = {
    {"alloc", MEMPROF_EBPF_PROBE_GA_ALLOC, true},
    {"alloc_zeroed", MEMPROF_EBPF_PROBE_GA_ALLOC, true},
    {"realloc", MEMPROF_EBPF_PROBE_GA_REALLOC, true},
    {"dealloc", MEMPROF_EBPF_PROBE_GA_DEALLOC, true},
};
#define NENTRIES (sizeof entry_names / sizeof *entry_names)

/* The entry a symbol name stands for, or NULL. GlobalAlloc methods count only when the
 * symbol is global (`exported`): then they were compiled with the Rust ABI, the allocator
 * first and the layout next; a local one may have had its arguments rearranged by LLVM
 * (the allocator dropped, say), so its registers cannot be read. */
static const struct entry_name *match_entry(const char *sym, bool libc, bool exported)
{
    for (size_t i = 0; i < NENTRIES; i++)
        if (strcmp(sym, entry_names[i].name) == 0)
            return entry_names[i].rust || libc ? &entry_names[i] : NULL;
    bool global_alloc = strstr(sym, "GlobalAlloc") != NULL;
    if (!strstr(sym, "__r") && !global_alloc)
        return NULL;
    char *d = memprof__offline_demangle(sym);
    const struct entry_name *found = NULL;
    const char *ga = d && d[0] == '<' ? strstr(d, GLOBAL_ALLOC) : NULL;
    if (ga && !exported) {
        found = NULL;
    } else if (ga) {
        const char *method = ga + strlen(GLOBAL_ALLOC);
        for (size_t i = 0; i < sizeof global_alloc_methods / sizeof *global_alloc_methods; i++)
            if (strcmp(method, global_alloc_methods[i].name) == 0)
                found = &global_alloc_methods[i];
    } else if (d) {
        const char *last = strrchr(d, ':');
        last = last && last > d && last[-1] == ':' ? last + 1 : NULL;
        for (size_t i = 0; last && i < NENTRIES && !found; i++)
            if (entry_names[i].rust && strcmp(last, entry_names[i].name) == 0)
                found = &entry_names[i];
        free(d);
    }
    return found;
}

/* The file offset of virtual address `addr`, through the PT_LOAD segment holding it. */
static bool file_offset(Elf *e, size_t nphdr, uint64_t addr, uint64_t *off)
{
    for (size_t i = 0; i < nphdr; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
            continue;
        if (addr >= ph.p_vaddr && addr < ph.p_vaddr + ph.p_filesz) {
            *off = addr - ph.p_vaddr + ph.p_offset;
            return true;
        }
    }
    return false;
}

static void add_probe(struct memprof_ebpf_elf *out, const struct entry_name *en, uint64_t off)
{
    for (size_t i = 0; i < out->nprobes; i++)
        if (out->probes[i].offset == off)
            return; /* an alias of an entry point already there */
    if (out->nprobes == MEMPROF_EBPF_MAX_PROBES)
        return;
    out->probes[out->nprobes++] = (struct memprof_ebpf_probe){
        .name = en->name, .kind = en->kind, .rust = en->rust, .offset = off};
}

#if defined(__x86_64__)
/* Whether the bytes at a function's start set up a frame pointer (x86-64). */
static bool fp_prologue(const unsigned char *b)
{
    static const unsigned char endbr64[] = {0xf3, 0x0f, 0x1e, 0xfa};
    if (memcmp(b, endbr64, sizeof endbr64) == 0)
        b += sizeof endbr64;
    /* push %rbp; mov %rsp,%rbp (48 89 e5 or 48 8b ec) */
    return b[0] == 0x55 && b[1] == 0x48 &&
           ((b[2] == 0x89 && b[3] == 0xe5) || (b[2] == 0x8b && b[3] == 0xec));
}
#endif

/* Layout's order from the rustc named in .comment ("rustc version 1.NN.P"); alignment first
 * when no rustc is named (the order of every rustc of recent years). */
static void read_rustc_layout(Elf *e, size_t shstrndx, struct memprof_ebpf_elf *out)
{
    out->layout_align_first = true;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        const char *name;
        if (!gelf_getshdr(scn, &sh) || !(name = elf_strptr(e, shstrndx, sh.sh_name)) ||
            strcmp(name, ".comment") != 0)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t off = 0; d && off < d->d_size;) {
            const char *str = (const char *)d->d_buf + off;
            size_t len = strnlen(str, d->d_size - off);
            unsigned minor;
            if (sscanf(str, "rustc version 1.%u", &minor) == 1) {
                out->layout_align_first = minor >= 67;
                out->rustc = true;
            }
            off += len + 1;
        }
    }
}

static void read_build_id(Elf *e, struct memprof_ebpf_elf *out)
{
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(e, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE)
            continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t off = 0, name_off, desc_off;
        GElf_Nhdr nh;
        while (d && (off = gelf_getnote(d, off, &nh, &name_off, &desc_off)) > 0) {
            if (nh.n_type != NT_GNU_BUILD_ID || nh.n_namesz != 4 ||
                memcmp((char *)d->d_buf + name_off, "GNU", 4) != 0 || nh.n_descsz > 20)
                continue;
            const unsigned char *id = (const unsigned char *)d->d_buf + desc_off;
            for (size_t i = 0; i < nh.n_descsz; i++)
                snprintf(out->build_id + 2 * i, 3, "%02x", id[i]);
            return;
        }
    }
}

Elf *memprof__ebpf_elf_open(const char *path, int *fd)
{
    elf_version(EV_CURRENT);
    *fd = open(path, O_RDONLY | O_CLOEXEC);
    if (*fd < 0)
        return NULL;
    Elf *e = elf_begin(*fd, ELF_C_READ, NULL);
    if (e && elf_kind(e) == ELF_K_ELF)
        return e;
    memprof__ebpf_elf_close(e, *fd);
    errno = ENOEXEC;
    return NULL;
}

void memprof__ebpf_elf_close(Elf *e, int fd)
{
    if (e)
        elf_end(e);
    close(fd);
}

int memprof__ebpf_elf_scan(const char *path, bool libc, struct memprof_ebpf_elf *out)
{
    memset(out, 0, sizeof *out);
    int fd;
    Elf *e = memprof__ebpf_elf_open(path, &fd);
    if (!e)
        return -errno;
    GElf_Ehdr eh;
    size_t nphdr = 0;
    if (!gelf_getehdr(e, &eh) || elf_getphdrnum(e, &nphdr)) {
        memprof__ebpf_elf_close(e, fd);
        return -ENOEXEC;
    }
    bool interp = false;
    for (size_t i = 0; i < nphdr; i++) {
        GElf_Phdr ph;
        if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP)
            interp = true;
    }
    out->static_exec = eh.e_type == ET_EXEC && !interp;
    read_build_id(e, out);
    size_t shstrndx;
    if (elf_getshdrstrndx(e, &shstrndx) == 0)
        read_rustc_layout(e, shstrndx, out);
    /* .symtab first (it has the local Rust shims); .dynsym when the file is stripped. */
    for (int pass = 0; pass < 2; pass++) {
        Elf_Scn *scn = NULL;
        while ((scn = elf_nextscn(e, scn))) {
            GElf_Shdr sh;
            if (!gelf_getshdr(scn, &sh) || sh.sh_type != (pass == 0 ? SHT_SYMTAB : SHT_DYNSYM))
                continue;
            Elf_Data *d = elf_getdata(scn, NULL);
            size_t n = d && sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
            for (size_t i = 0; i < n; i++) {
                GElf_Sym s;
                if (!gelf_getsym(d, (int)i, &s) || GELF_ST_TYPE(s.st_info) != STT_FUNC ||
                    s.st_shndx == SHN_UNDEF || s.st_value == 0)
                    continue;
                const char *name = elf_strptr(e, sh.sh_link, s.st_name);
                uint64_t off;
                if (!name || !file_offset(e, nphdr, s.st_value, &off))
                    continue;
                const struct entry_name *en =
                    match_entry(name, libc, GELF_ST_BIND(s.st_info) != STB_LOCAL);
                if (en)
                    add_probe(out, en, off);
            }
        }
    }
    memprof__ebpf_elf_close(e, fd);
    return 0;
}

int memprof__ebpf_elf_build_id(const char *path, char out[41])
{
    out[0] = 0;
    int fd;
    Elf *e = memprof__ebpf_elf_open(path, &fd);
    if (!e)
        return errno == ENOEXEC ? 0 : -errno; /* not ELF: no build id */
    struct memprof_ebpf_elf tmp;
    memset(&tmp, 0, sizeof tmp);
    read_build_id(e, &tmp);
    memcpy(out, tmp.build_id, 41);
    memprof__ebpf_elf_close(e, fd);
    return 0;
}

bool memprof__ebpf_elf_is_dynamic(const char *path)
{
    int fd;
    Elf *e = memprof__ebpf_elf_open(path, &fd);
    if (!e)
        return false;
    size_t nphdr = 0;
    bool interp = false;
    if (elf_getphdrnum(e, &nphdr) == 0)
        for (size_t i = 0; i < nphdr; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP)
                interp = true;
        }
    memprof__ebpf_elf_close(e, fd);
    return interp;
}

bool memprof__ebpf_elf_vaddr_of(const char *path, uint64_t off, uint64_t *vaddr)
{
    int fd;
    Elf *e = memprof__ebpf_elf_open(path, &fd);
    if (!e)
        return false;
    size_t nphdr = 0;
    bool found = false;
    if (elf_getphdrnum(e, &nphdr) == 0)
        for (size_t i = 0; i < nphdr && !found; i++) {
            GElf_Phdr ph;
            /* Only code segments: the read-only one before the code may share its last page
             * with the code's first. */
            if (!gelf_getphdr(e, (int)i, &ph) || ph.p_type != PT_LOAD || !(ph.p_flags & PF_X))
                continue;
            /* A mapping starts at a page boundary at or below the segment's offset. */
            uint64_t page_off = ph.p_offset & ~(uint64_t)4095;
            if (off >= page_off && off < ph.p_offset + ph.p_filesz) {
                *vaddr = ph.p_vaddr - (ph.p_offset - off);
                found = true;
            }
        }
    memprof__ebpf_elf_close(e, fd);
    return found;
}

int memprof__ebpf_elf_fp_prologue(const char *path, uint64_t vaddr)
{
#if defined(__x86_64__)
    int fd;
    Elf *e = memprof__ebpf_elf_open(path, &fd);
    if (!e)
        return -1;
    size_t nphdr = 0;
    uint64_t off;
    int r = -1;
    unsigned char b[8];
    if (elf_getphdrnum(e, &nphdr) == 0 && file_offset(e, nphdr, vaddr, &off) &&
        pread(fd, b, sizeof b, (off_t)off) == sizeof b)
        r = fp_prologue(b);
    memprof__ebpf_elf_close(e, fd);
    return r;
#else
    (void)path;
    (void)vaddr;
    return -1;
#endif
}
