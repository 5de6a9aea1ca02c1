/* SPDX-License-Identifier: MIT */
/*
 * Reading another process for `memprof attach`: /proc/PID/maps, /proc/PID/status, and
 * exported symbols of its shared objects. Symbols are read from the object's file, not from
 * the target's memory: the file's section headers lead to .dynsym, .dynstr and the symbol
 * versions, none of which the loader needs to keep mapped. The file is opened through
 * /proc/PID/root, which is the target's view of the file system, so a target in a container
 * is read from its own libc, and if that fails through /proc/PID/map_files, which names the
 * very file mapped (the path may have been replaced since). And its seccomp filters, judged
 * by the library's own interpreter on the system calls the attached library makes
 * (api/attach_check.h).
 */
#define _GNU_SOURCE
#include "target.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <linux/filter.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/attach_check.h"

ssize_t memprof_target_maps(pid_t pid, struct target_map **out)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/maps", (int)pid);
    FILE *f = fopen(name, "re");
    if (!f)
        return -1;
    size_t n = 0, cap = 0;
    struct target_map *m = NULL;
    char *line = NULL;
    size_t linecap = 0;
    while (getline(&line, &linecap, f) > 0) {
        if (n == cap) {
            size_t ncap = cap ? cap * 2 : 128;
            struct target_map *nm = realloc(m, ncap * sizeof *m);
            if (!nm) {
                free(m);
                free(line);
                fclose(f);
                errno = ENOMEM;
                return -1;
            }
            m = nm;
            cap = ncap;
        }
        struct target_map *e = &m[n];
        unsigned long long start, end, off, ino;
        int pathpos = 0;
        if (sscanf(line, "%llx-%llx %4s %llx %*x:%*x %llu %n", &start, &end, e->perms, &off, &ino,
                   &pathpos) < 5)
            continue;
        e->start = (uintptr_t)start;
        e->end = (uintptr_t)end;
        e->offset = off;
        e->inode = ino;
        size_t len = strcspn(line + pathpos, "\n");
        if (len >= sizeof e->path)
            len = sizeof e->path - 1;
        memcpy(e->path, line + pathpos, len);
        e->path[len] = 0;
        n++;
    }
    free(line);
    fclose(f);
    *out = m;
    return (ssize_t)n;
}

const char *memprof_target_file_name(const char *path)
{
    const char *b = strrchr(path, '/');
    b = b ? b + 1 : path;
    return strncmp(b, "memfd:", 6) ? b : b + 6;
}

const struct target_map *memprof_target_object(const struct target_map *m, size_t n,
                                               const char *prefix, uintptr_t *base)
{
    /* An object the loader mapped has executable code; a file mapped only to be read (the
     * profiler's symbol reader maps libc.so.6 too) has none, so start from the code and go
     * back to the same file's mapping at offset 0. */
    for (size_t i = 0; i < n; i++) {
        if (m[i].path[0] != '/' || m[i].perms[2] != 'x')
            continue;
        if (strncmp(memprof_target_file_name(m[i].path), prefix, strlen(prefix)))
            continue;
        for (size_t j = i + 1; j-- > 0;) {
            if (m[j].inode != m[i].inode || strcmp(m[j].path, m[i].path))
                break;
            if (m[j].offset == 0) {
                *base = m[j].start;
                return &m[j];
            }
        }
    }
    return NULL;
}

const struct target_map *memprof_target_map_at(const struct target_map *m, size_t n, uintptr_t addr)
{
    for (size_t i = 0; i < n; i++)
        if (addr >= m[i].start && addr < m[i].end)
            return &m[i];
    return NULL;
}

/* Opens the target's file at `path`: its own view first, then the mapped file itself. */
static int open_object(pid_t pid, const char *path, uintptr_t base)
{
    char name[PATH_MAX + 64];
    snprintf(name, sizeof name, "/proc/%d/root%s", (int)pid, path);
    int fd = open(name, O_RDONLY | O_CLOEXEC);
    if (fd >= 0)
        return fd;
    struct target_map *m;
    ssize_t n = memprof_target_maps(pid, &m);
    for (ssize_t i = 0; i < n && fd < 0; i++)
        if (m[i].start == base) {
            snprintf(name, sizeof name, "/proc/%d/map_files/%" PRIxPTR "-%" PRIxPTR, (int)pid,
                     m[i].start, m[i].end);
            fd = open(name, O_RDONLY | O_CLOEXEC);
        }
    if (n > 0)
        free(m);
    return fd;
}

/* Reads `size` bytes at `off` into a new buffer, or NULL. Refuses absurd sizes. */
static void *read_at(int fd, uint64_t off, uint64_t size)
{
    if (size == 0 || size > (256u << 20))
        return NULL;
    void *p = malloc(size);
    if (p && pread(fd, p, size, (off_t)off) != (ssize_t)size) {
        free(p);
        p = NULL;
    }
    return p;
}

/* Reads a 64-bit ELF file's header and program headers (malloc'ed into *ph) and the page
 * of its lowest loaded address, where `base` (its mapping at file offset 0) was put: an
 * address of the file is then base + (vaddr - *first_vaddr). Returns false if it is not one. */
static bool read_headers(int fd, Elf64_Ehdr *eh, Elf64_Phdr **ph, uint64_t *first_vaddr)
{
    *ph = NULL;
    if (pread(fd, eh, sizeof *eh, 0) != sizeof *eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) ||
        eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_phentsize != sizeof(Elf64_Phdr))
        return false;
    *ph = read_at(fd, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof **ph);
    *first_vaddr = UINT64_MAX;
    for (unsigned i = 0; *ph && i < eh->e_phnum; i++)
        if ((*ph)[i].p_type == PT_LOAD && (*ph)[i].p_vaddr < *first_vaddr)
            *first_vaddr = (*ph)[i].p_vaddr & ~(uint64_t)0xfff;
    return *first_vaddr != UINT64_MAX;
}

uintptr_t memprof_target_symbol(pid_t pid, const char *path, uintptr_t base, const char *name)
{
    int fd = open_object(pid, path, base);
    if (fd < 0)
        return 0;
    uintptr_t addr = 0;
    Elf64_Ehdr eh;
    Elf64_Shdr *sh = NULL;
    Elf64_Sym *syms = NULL;
    Elf64_Phdr *ph = NULL;
    char *str = NULL;
    uint16_t *ver = NULL;
    uint64_t first_vaddr;
    if (!read_headers(fd, &eh, &ph, &first_vaddr) || eh.e_shentsize != sizeof(Elf64_Shdr))
        goto out;
    sh = read_at(fd, eh.e_shoff, (uint64_t)eh.e_shnum * sizeof *sh);
    if (!sh)
        goto out;
    const Elf64_Shdr *dynsym = NULL, *versym = NULL;
    for (unsigned i = 0; i < eh.e_shnum; i++) {
        if (sh[i].sh_type == SHT_DYNSYM)
            dynsym = &sh[i];
        else if (sh[i].sh_type == SHT_GNU_versym)
            versym = &sh[i];
    }
    if (!dynsym || dynsym->sh_link >= eh.e_shnum || dynsym->sh_entsize != sizeof(Elf64_Sym))
        goto out;
    const Elf64_Shdr *strsh = &sh[dynsym->sh_link];
    syms = read_at(fd, dynsym->sh_offset, dynsym->sh_size);
    str = read_at(fd, strsh->sh_offset, strsh->sh_size + 1);
    size_t nsyms = dynsym->sh_size / sizeof *syms;
    if (versym && versym->sh_size == nsyms * sizeof *ver)
        ver = read_at(fd, versym->sh_offset, versym->sh_size);
    if (!syms || !str)
        goto out;
    str[strsh->sh_size] = 0;
    for (size_t i = 1; i < nsyms; i++) {
        const Elf64_Sym *s = &syms[i];
        if (s->st_shndx == SHN_UNDEF || s->st_name >= strsh->sh_size ||
            ELF64_ST_TYPE(s->st_info) != STT_FUNC || strcmp(str + s->st_name, name))
            continue;
        /* Several versions (dlopen@GLIBC_2.2.5 and dlopen@@GLIBC_2.34): the default one,
         * whose version index has the hidden bit clear. */
        uintptr_t a = base + (uintptr_t)(s->st_value - first_vaddr);
        if (!addr || (ver && !(ver[i] & 0x8000)))
            addr = a;
    }
out:
    free(sh);
    free(ph);
    free(syms);
    free(str);
    free(ver);
    close(fd);
    return addr;
}

uintptr_t memprof_target_code_slack(pid_t pid, const char *path, uintptr_t base, size_t *len)
{
    *len = 0;
    int fd = open_object(pid, path, base);
    if (fd < 0)
        return 0;
    Elf64_Ehdr eh;
    Elf64_Phdr *ph;
    uint64_t first_vaddr;
    uintptr_t best = 0;
    if (read_headers(fd, &eh, &ph, &first_vaddr)) {
        for (unsigned i = 0; i < eh.e_phnum; i++) {
            if (ph[i].p_type != PT_LOAD || !(ph[i].p_flags & PF_X))
                continue;
            uint64_t end = ph[i].p_vaddr + ph[i].p_memsz;
            uint64_t page_end = (end + 0xfff) & ~(uint64_t)0xfff;
            /* No other segment may have a byte in that tail (a layout without separate
             * code pages can start the next one there). */
            for (unsigned j = 0; j < eh.e_phnum; j++)
                if (j != i && ph[j].p_type == PT_LOAD && ph[j].p_vaddr < page_end &&
                    ph[j].p_vaddr + ph[j].p_memsz > end)
                    page_end = end;
            if (page_end - end > *len) {
                *len = (size_t)(page_end - end);
                best = base + (uintptr_t)(end - first_vaddr);
            }
        }
    }
    free(ph);
    close(fd);
    return best;
}

bool memprof_target_status(pid_t pid, const char *key, char *value, size_t size)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/status", (int)pid);
    FILE *f = fopen(name, "re");
    if (!f)
        return false;
    char line[512];
    size_t klen = strlen(key);
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        if (strncmp(line, key, klen) || line[klen] != ':')
            continue;
        const char *v = line + klen + 1;
        v += strspn(v, " \t");
        snprintf(value, size, "%.*s", (int)strcspn(v, "\n"), v);
        found = true;
    }
    fclose(f);
    return found;
}

bool memprof_target_wait_stop(pid_t pid, int *st, unsigned timeout_ms)
{
    for (unsigned i = 0; i < timeout_ms; i++) {
        pid_t r = waitpid(pid, st, __WALL | WNOHANG);
        if (r == pid)
            return true;
        if (r < 0 && errno != EINTR)
            return false;
        usleep(1000);
    }
    errno = ETIMEDOUT;
    return false;
}

int memprof_target_seccomp(pid_t pid, bool *forbidden)
{
    char v[32];
    *forbidden = false;
    if (!memprof_target_status(pid, "Seccomp", v, sizeof v) || atoi(v) == 0)
        return 0;
    if (atoi(v) == 1) {
        *forbidden = memprof__attach_forbidden_by(true, NULL);
        return 1;
    }
    /* The filters can be read only from a stopped tracee. */
    if (ptrace(PTRACE_SEIZE, pid, 0, 0) < 0)
        return -1;
    int st = 0, rc = 2, err = 0;
    if (ptrace(PTRACE_INTERRUPT, pid, 0, 0) < 0 || !memprof_target_wait_stop(pid, &st, 2000) ||
        !WIFSTOPPED(st)) {
        err = errno ? errno : ESRCH;
        rc = -1;
    }
    /* A signal that stopped it first goes on to the program with the detach. */
    long pass = rc == 2 && st >> 16 == 0 ? WSTOPSIG(st) : 0;
    for (unsigned long i = 0; rc == 2; i++) {
        long n = ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)i, NULL);
        if (n < 0) {
            if (errno != ENOENT || i == 0) { /* ENOENT: past the last filter */
                err = errno;
                rc = -1;
            }
            break;
        }
        struct sock_filter *f = calloc((size_t)n, sizeof *f);
        if (!f || ptrace(PTRACE_SECCOMP_GET_FILTER, pid, (void *)i, f) != n) {
            err = f ? errno : ENOMEM;
            free(f);
            rc = -1;
            break;
        }
        struct sock_fprog prog = {(unsigned short)n, f};
        *forbidden |= memprof__attach_forbidden_by(false, &prog);
        free(f);
    }
    ptrace(PTRACE_DETACH, pid, 0, (void *)pass);
    errno = err;
    return rc;
}
