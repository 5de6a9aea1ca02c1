/* SPDX-License-Identifier: MIT */
/*
 * Handing files over to a process in another mount namespace, for `memprof attach` into a
 * container. The process cannot open libmemprof.so.1 by a path of ours, and its file system
 * usually lacks what the library needs (libdw, libunwind, zlib...). So each object goes in as
 * a memory file: memfd_create() called in the process (an injected libc call), the file's
 * bytes written here through /proc/PID/fd/N, then dlopen("/proc/self/fd/N") there, which needs
 * the container to have /proc mounted (every container runtime does). Dependencies are loaded
 * before what needs them: the dynamic loader then finds each one already loaded under its
 * soname and looks for nothing on the container's disk. glibc's own libraries are never
 * handed over: they must be the process's own, of its libc's version. The memory files are
 * closed once loaded (the mappings keep them). The profile comes back the same way: written
 * by the process into a memory file, copied here to the user's path, as the user.
 */
#define _GNU_SOURCE
#include "handover.h"

#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "api/output.h"

#define MAX_OBJECTS 64
/* The module libmemprof loads at its first symbol lookup (src/resolve/symbolizer_load.c). */
#define SYMBOLIZER_MODULE "libmemprof-symbolize.so"

/* The libraries libmemprof dlopen()s by soname rather than links (src/export/zlib_load.c). */
static const char *const lazy[] = {"libz.so.1"};
#define PROC_MAGIC 0x9fa0 /* PROC_SUPER_MAGIC */

static void say(char *err, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static void say(char *err, size_t size, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, size, fmt, ap);
    va_end(ap);
}

bool memprof_handover_needed(pid_t pid)
{
    char theirs[64];
    struct stat a, b;
    snprintf(theirs, sizeof theirs, "/proc/%d/ns/mnt", (int)pid);
    if (stat("/proc/self/ns/mnt", &a) || stat(theirs, &b))
        return false;
    return a.st_ino != b.st_ino || a.st_dev != b.st_dev;
}

bool memprof_handover_has_proc(pid_t pid)
{
    char path[64];
    struct statfs st;
    snprintf(path, sizeof path, "/proc/%d/root/proc", (int)pid);
    return statfs(path, &st) == 0 && st.f_type == PROC_MAGIC;
}

/* glibc's own libraries: the process's must serve (they are tied to its libc's version). */
static bool is_glibc(const char *soname)
{
    static const char *const names[] = {
        "libc.so",  "libm.so",      "libmvec.so", "libpthread.so",  "libdl.so",
        "librt.so", "libresolv.so", "libutil.so", "libanl.so",      "ld-linux",
        "libnss_",  "libthread_db", "linux-vdso", "libBrokenLocale"};
    for (size_t i = 0; i < sizeof names / sizeof *names; i++)
        if (!strncmp(soname, names[i], strlen(names[i])))
            return true;
    return false;
}

/* ---- reading an object's dynamic section ----------------------------------------------------- */

/* The DT_NEEDED names (needed != NULL) and the DT_SONAME (soname != NULL) of the ELF file fd.
 * Returns the number of needed names, or -1 if it is not a 64-bit ELF object. */
static int read_dynamic(int fd, char needed[][256], int max_needed, char *soname)
{
    Elf64_Ehdr eh;
    if (pread(fd, &eh, sizeof eh, 0) != sizeof eh || memcmp(eh.e_ident, ELFMAG, SELFMAG) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_phentsize != sizeof(Elf64_Phdr) ||
        eh.e_phnum == 0 || eh.e_phnum > 256)
        return -1;
    Elf64_Phdr ph[256];
    size_t phlen = (size_t)eh.e_phnum * sizeof *ph;
    if (pread(fd, ph, phlen, (off_t)eh.e_phoff) != (ssize_t)phlen)
        return -1;
    const Elf64_Phdr *dyn = NULL;
    for (unsigned i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_DYNAMIC)
            dyn = &ph[i];
    if (!dyn || dyn->p_filesz > (1u << 20))
        return -1;
    Elf64_Dyn *d = malloc(dyn->p_filesz);
    if (!d || pread(fd, d, dyn->p_filesz, (off_t)dyn->p_offset) != (ssize_t)dyn->p_filesz) {
        free(d);
        return -1;
    }
    size_t nd = dyn->p_filesz / sizeof *d;
    uint64_t strtab = 0, strsz = 0;
    for (size_t i = 0; i < nd && d[i].d_tag != DT_NULL; i++) {
        if (d[i].d_tag == DT_STRTAB)
            strtab = d[i].d_un.d_ptr;
        else if (d[i].d_tag == DT_STRSZ)
            strsz = d[i].d_un.d_val;
    }
    /* DT_STRTAB is an address: find the file offset through the segment holding it. */
    uint64_t off = UINT64_MAX;
    for (unsigned i = 0; i < eh.e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && strtab >= ph[i].p_vaddr &&
            strtab < ph[i].p_vaddr + ph[i].p_filesz)
            off = strtab - ph[i].p_vaddr + ph[i].p_offset;
    char *str = NULL;
    if (off != UINT64_MAX && strsz && strsz < (16u << 20) && (str = malloc(strsz + 1)) &&
        pread(fd, str, strsz, (off_t)off) == (ssize_t)strsz) {
        str[strsz] = 0;
    } else {
        free(str);
        free(d);
        return -1;
    }
    int n = 0;
    if (soname)
        soname[0] = 0;
    for (size_t i = 0; i < nd && d[i].d_tag != DT_NULL; i++) {
        if (d[i].d_un.d_val >= strsz)
            continue;
        const char *s = str + d[i].d_un.d_val;
        if (d[i].d_tag == DT_NEEDED && needed && n < max_needed)
            snprintf(needed[n++], 256, "%s", s);
        else if (d[i].d_tag == DT_SONAME && soname)
            snprintf(soname, 256, "%s", s);
    }
    free(str);
    free(d);
    return n;
}

/* ---- what to hand over ----------------------------------------------------------------------- */

struct dep_set {
    struct handover_object all[MAX_OBJECTS]; /* soname -> path, from ld.so --list */
    size_t nall;
    char loaded[MAX_OBJECTS * 4][256]; /* sonames the process has */
    size_t nloaded;
    struct handover_object *order; /* the result, dependencies first */
    size_t norder;
    char *err;
    size_t errsize;
};

/* The path of this system's dynamic loader: the one this command runs under. */
static bool own_loader(char *out)
{
    struct target_map *maps;
    ssize_t n = memprof_target_maps(getpid(), &maps);
    uintptr_t base;
    const struct target_map *m =
        n > 0 ? memprof_target_object(maps, (size_t)n, "ld-linux", &base) : NULL;
    if (m)
        snprintf(out, PATH_MAX, "%s", m->path);
    if (n > 0)
        free(maps);
    return m != NULL;
}

/* Fills set->all from `ld.so --list library` ("\tlibz.so.1 => /lib/.../libz.so.1 (0x...)"),
 * which resolves names as the loader here does (RUNPATH, LD_LIBRARY_PATH, ld.so.cache). */
static bool list_dependencies(const char *library, struct dep_set *set)
{
    char loader[PATH_MAX];
    if (!own_loader(loader)) {
        say(set->err, set->errsize, "cannot find this system's dynamic loader");
        return false;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) < 0)
        return false;
    pid_t child = fork();
    if (child == 0) {
        dup2(p[1], 1);
        int devnull = open("/dev/null", O_WRONLY);
        if (devnull >= 0)
            dup2(devnull, 2);
        execl(loader, loader, "--list", library, (char *)NULL);
        _exit(127);
    }
    close(p[1]);
    FILE *f = child > 0 ? fdopen(p[0], "r") : NULL;
    if (!f) {
        close(p[0]);
        say(set->err, set->errsize, "cannot run %s: %s", loader, strerror(errno));
        return false;
    }
    char line[PATH_MAX + 300], name[256], path[PATH_MAX];
    bool ok = true;
    while (fgets(line, sizeof line, f)) {
        char *arrow = strstr(line, " => ");
        if (!arrow || sscanf(line, " %255s", name) != 1)
            continue;
        if (sscanf(arrow + 4, "%4095s", path) != 1 || path[0] != '/') {
            say(set->err, set->errsize, "%s needs %s, which this system does not have", library,
                name);
            ok = false;
            continue;
        }
        if (set->nall < MAX_OBJECTS) {
            snprintf(set->all[set->nall].soname, sizeof set->all[0].soname, "%s", name);
            snprintf(set->all[set->nall].path, sizeof set->all[0].path, "%s", path);
            set->nall++;
        }
    }
    fclose(f);
    int st;
    waitpid(child, &st, 0);
    if (ok && !(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
        say(set->err, set->errsize, "%s --list %s failed", loader, library);
        ok = false;
    }
    return ok;
}

/* Fills set->loaded with the sonames of the objects mapped in pid (read from the files as it
 * sees them; a file's name is not its soname: libdw.so.1 is libdw-0.188.so). */
static void list_loaded(pid_t pid, struct dep_set *set)
{
    struct target_map *maps;
    ssize_t n = memprof_target_maps(pid, &maps);
    for (ssize_t i = 0; i < n; i++) {
        if (maps[i].path[0] != '/' || maps[i].offset != 0 || set->nloaded >= MAX_OBJECTS * 4)
            continue;
        char name[PATH_MAX + 64], soname[256];
        snprintf(name, sizeof name, "/proc/%d/map_files/%lx-%lx", (int)pid,
                 (unsigned long)maps[i].start, (unsigned long)maps[i].end);
        int fd = open(name, O_RDONLY | O_CLOEXEC);
        if (fd < 0)
            continue;
        if (read_dynamic(fd, NULL, 0, soname) >= 0 && soname[0])
            snprintf(set->loaded[set->nloaded++], 256, "%s", soname);
        close(fd);
    }
    if (n > 0)
        free(maps);
}

static bool is_loaded(const struct dep_set *set, const char *soname)
{
    for (size_t i = 0; i < set->nloaded; i++)
        if (!strcmp(set->loaded[i], soname))
            return true;
    return false;
}

static bool in_order(const struct dep_set *set, const char *soname)
{
    for (size_t i = 0; i < set->norder; i++)
        if (!strcmp(set->order[i].soname, soname))
            return true;
    return false;
}

/* Depth first from `path`: its dependencies, then itself. */
static bool visit(struct dep_set *set, const char *soname, const char *path, int depth)
{
    if (depth > 32 || in_order(set, soname) || is_glibc(soname) || is_loaded(set, soname))
        return true;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    char needed[64][256];
    int n = fd >= 0 ? read_dynamic(fd, needed, 64, NULL) : -1;
    if (fd >= 0)
        close(fd);
    if (n < 0) {
        say(set->err, set->errsize, "cannot read %s", path);
        return false;
    }
    for (int i = 0; i < n; i++) {
        const char *dep_path = NULL;
        for (size_t k = 0; k < set->nall && !dep_path; k++)
            if (!strcmp(set->all[k].soname, needed[i]))
                dep_path = set->all[k].path;
        if (!dep_path) {
            if (is_glibc(needed[i]) || is_loaded(set, needed[i]))
                continue;
            say(set->err, set->errsize, "cannot find %s, which %s needs", needed[i], path);
            return false;
        }
        if (!visit(set, needed[i], dep_path, depth + 1))
            return false;
    }
    if (in_order(set, soname) || set->norder >= MAX_OBJECTS)
        return true;
    snprintf(set->order[set->norder].soname, sizeof set->order[0].soname, "%s", soname);
    snprintf(set->order[set->norder].path, sizeof set->order[0].path, "%s", path);
    set->norder++;
    return true;
}

ssize_t memprof_handover_list(pid_t pid, const char *library, struct handover_object **out,
                              char *err, size_t errsize)
{
    struct dep_set *set = calloc(1, sizeof *set);
    struct handover_object *order = calloc(MAX_OBJECTS, sizeof *order);
    if (!set || !order) {
        free(set);
        free(order);
        say(err, errsize, "out of memory");
        return -1;
    }
    set->order = order;
    set->err = err;
    set->errsize = errsize;
    char soname[256] = "";
    int fd = open(library, O_RDONLY | O_CLOEXEC);
    if (fd >= 0) {
        read_dynamic(fd, NULL, 0, soname);
        close(fd);
    }
    if (!soname[0]) {
        const char *b = strrchr(library, '/');
        snprintf(soname, sizeof soname, "%s", b ? b + 1 : library);
    }
    ssize_t n = -1;
    if (list_dependencies(library, set)) {
        /* What the library dlopen()s by soname when it needs it (zlib, to write pprof's
         * gzip), found as the symbolizer module beside it links it. */
        char module[PATH_MAX];
        const char *slash = strrchr(library, '/');
        int dirlen = slash ? (int)(slash - library) : 1;
        static const char *const where[] = {"/memprof/", "/"};
        for (size_t i = 0; i < sizeof where / sizeof *where; i++) {
            snprintf(module, sizeof module, "%.*s%s%s", dirlen, slash ? library : ".", where[i],
                     SYMBOLIZER_MODULE);
            if (access(module, R_OK) == 0) {
                list_dependencies(module, set);
                break;
            }
        }
        list_loaded(pid, set);
        bool ok = true;
        for (size_t i = 0; i < sizeof lazy / sizeof *lazy && ok; i++)
            for (size_t k = 0; k < set->nall; k++)
                if (!strcmp(set->all[k].soname, lazy[i]))
                    ok = visit(set, lazy[i], set->all[k].path, 0);
        if (ok && visit(set, soname, library, 0))
            n = (ssize_t)set->norder;
    }
    free(set);
    if (n < 0)
        free(order);
    else
        *out = order;
    return n;
}

/* ---- the calls ------------------------------------------------------------------------------- */

int memprof_handover_memfd(pid_t pid, const char *name, int *fd, char *err, size_t errsize)
{
    struct inject_args a = {.str = name, .a1 = MFD_CLOEXEC};
    struct inject_result res;
    if (memprof_inject_call_args(pid, "libc.so.6", "memfd_create", &a, &res, err, errsize))
        return -1;
    if (res.value < 0) {
        say(err, errsize, "memfd_create() failed in the process");
        return -1;
    }
    *fd = (int)res.value;
    return 0;
}

int memprof_handover_close(pid_t pid, int fd, char *err, size_t errsize)
{
    struct inject_args a = {.a0 = fd};
    struct inject_result res;
    return memprof_inject_call_args(pid, "libc.so.6", "close", &a, &res, err, errsize);
}

/* Copies the file at `path` into pid's descriptor fd. */
static int fill_memfd(pid_t pid, int fd, const char *path)
{
    char name[64], buf[65536];
    snprintf(name, sizeof name, "/proc/%d/fd/%d", (int)pid, fd);
    int in = open(path, O_RDONLY | O_CLOEXEC), out = open(name, O_WRONLY | O_CLOEXEC);
    int rc = in >= 0 && out >= 0 ? 0 : -errno;
    for (ssize_t n; rc == 0 && (n = read(in, buf, sizeof buf)) != 0;) {
        if (n < 0 || write(out, buf, (size_t)n) != n)
            rc = -(errno ? errno : EIO);
    }
    if (in >= 0)
        close(in);
    if (out >= 0)
        close(out);
    return rc;
}

int memprof_handover_call(pid_t pid, const struct handover_object *objs, size_t n,
                          const char *function, const char *arg, struct inject_result *res,
                          char *err, size_t errsize)
{
    /* The memory files stay open until the end: dlopen() knows an object by the name it was
     * opened by, and /proc/self/fd/N of a descriptor closed and reused would be taken for
     * the object loaded through it before. */
    int fds[MAX_OBJECTS];
    size_t nfds = 0;
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        if (memprof_handover_memfd(pid, objs[i].soname, &fds[nfds], err, errsize)) {
            rc = -1;
            break;
        }
        int fd = fds[nfds++];
        int e = fill_memfd(pid, fd, objs[i].path);
        if (e) {
            say(err, errsize, "cannot write %s into the process: %s", objs[i].path, strerror(-e));
            rc = -1;
            break;
        }
        char path[64];
        snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
        bool last = i + 1 == n;
        rc = memprof_inject_call(pid, path, last ? function : "", last ? arg : "", res, err,
                                 errsize);
        if (rc && strstr(err, "dlopen()"))
            say(err, errsize,
                "%s, handed over as a memory file, could not be loaded there (its glibc may "
                "be older than this system's)",
                objs[i].soname);
    }
    char ignored[256];
    for (size_t i = 0; i < nfds; i++)
        memprof_handover_close(pid, fds[i], ignored, sizeof ignored);
    return rc;
}

struct fetch {
    int fd;
};

static int copy_out(FILE *out, void *ctx)
{
    const struct fetch *f = ctx;
    char buf[65536];
    off_t off = 0;
    for (ssize_t n; (n = pread(f->fd, buf, sizeof buf, off)) != 0; off += n) {
        if (n < 0)
            return -errno;
        if (fwrite(buf, 1, (size_t)n, out) != (size_t)n)
            return -EIO;
    }
    return 0;
}

int memprof_handover_fetch(pid_t pid, int fd, const char *path)
{
    char name[64];
    snprintf(name, sizeof name, "/proc/%d/fd/%d", (int)pid, fd);
    struct fetch f = {open(name, O_RDONLY | O_CLOEXEC)};
    if (f.fd < 0)
        return -errno;
    int rc = memprof__output_write(path, copy_out, &f, NULL);
    close(f.fd);
    return rc;
}
