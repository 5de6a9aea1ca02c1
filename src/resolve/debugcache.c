/* SPDX-License-Identifier: MIT */
/*
 * The cache of decompressed debug files (debugcache.h): finding an entry by the build id of
 * the file found, making one with libelf (the file copied, each compressed section
 * decompressed in place, the layout written anew), and keeping the directory under its
 * size limit.
 */
#define _GNU_SOURCE
#include "resolve/debugcache.h"

#if HAVE_LIBDW
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/sendfile.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <elfutils/libdwelf.h>

#include "resolve/debugfind.h"

#define CACHE_MAX ((off_t)1 << 30)
/* A temporary file this old was left by a command that died while writing it. */
#define STALE_TMP_S 3600

/* The entries' directory, false when the cache is off or there is no home. */
static bool cache_dir(char *out, size_t size)
{
    const char *d = getenv("MEMPROF_CACHE_DIR");
    int n;
    if (d) {
        if (!*d)
            return false;
        n = snprintf(out, size, "%s/debug", d);
    } else if ((d = getenv("XDG_CACHE_HOME")) && d[0] == '/') {
        n = snprintf(out, size, "%s/memprof/debug", d);
    } else if ((d = getenv("HOME")) && d[0] == '/') {
        n = snprintf(out, size, "%s/.cache/memprof/debug", d);
    } else {
        return false;
    }
    return n > 0 && (size_t)n < size;
}

/* What the cache needs to know of a debug file: its build id and whether any section is
 * compressed, with the size its sections take decompressed. */
struct debug_file {
    unsigned char id[64];
    size_t id_len;
    bool compressed;
    uint64_t size;
};

static bool inspect(int fd, struct debug_file *f)
{
    elf_version(EV_CURRENT);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!elf)
        return false;
    *f = (struct debug_file){.compressed = false};
    const void *id = NULL;
    ssize_t n = dwelf_elf_gnu_build_id(elf, &id);
    if (n > 0 && (size_t)n <= sizeof f->id) {
        memcpy(f->id, id, (size_t)n);
        f->id_len = (size_t)n;
    }
    for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        GElf_Chdr ch;
        if (!gelf_getshdr(scn, &sh))
            continue;
        if ((sh.sh_flags & SHF_COMPRESSED) && gelf_getchdr(scn, &ch)) {
            f->compressed = true;
            f->size += ch.ch_size;
        } else if (sh.sh_type != SHT_NOBITS) {
            f->size += sh.sh_size;
        }
    }
    elf_end(elf);
    return f->id_len > 0;
}

static void entry_path(char *out, size_t size, const char *dir, const struct debug_file *f)
{
    int k = snprintf(out, size, "%s/", dir);
    for (size_t i = 0; i < f->id_len && k > 0 && (size_t)k + 3 < size; i++)
        k += snprintf(out + k, size - (size_t)k, "%02x", f->id[i]);
    if (k > 0 && (size_t)k + 7 < size)
        strcpy(out + k, ".debug");
    else
        out[0] = 0;
}

/* mkdir -p, private to the user. */
static bool make_dirs(const char *dir)
{
    char p[4096];
    if (snprintf(p, sizeof p, "%s", dir) >= (int)sizeof p)
        return false;
    for (char *s = p + 1; *s; s++) {
        if (*s != '/')
            continue;
        *s = 0;
        if (mkdir(p, 0700) != 0 && errno != EEXIST)
            return false;
        *s = '/';
    }
    return mkdir(p, 0700) == 0 || errno == EEXIST;
}

/* Copies the file on `from` to `to`, then decompresses its compressed sections there. */
static bool write_decompressed(int from, int to)
{
    struct stat st;
    if (fstat(from, &st) != 0)
        return false;
    for (off_t off = 0; off < st.st_size;)
        if (sendfile(to, from, &off, (size_t)(st.st_size - off)) <= 0)
            return false;
    Elf *elf = elf_begin(to, ELF_C_RDWR, NULL);
    if (!elf)
        return false;
    bool ok = true;
    for (Elf_Scn *scn = NULL; ok && (scn = elf_nextscn(elf, scn));) {
        GElf_Shdr sh;
        if (gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_COMPRESSED))
            ok = elf_compress(scn, 0, 0) >= 0; /* type 0: decompress */
    }
    ok = ok && elf_update(elf, ELF_C_WRITE) >= 0;
    elf_end(elf);
    return ok;
}

struct entry {
    char name[96];
    off_t size;
    time_t used;
};

static int by_use(const void *a, const void *b)
{
    time_t x = ((const struct entry *)a)->used, y = ((const struct entry *)b)->used;
    return x < y ? -1 : x > y;
}

/* Removes the least recently used entries while the cache takes more than CACHE_MAX, never
 * `keep`; and temporary files left by commands that died. */
static void evict(const char *dir, const char *keep)
{
    DIR *d = opendir(dir);
    if (!d)
        return;
    struct entry *e = NULL;
    size_t n = 0, cap = 0;
    off_t total = 0;
    time_t now = time(NULL);
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        if (de->d_name[0] == '.' && strncmp(de->d_name, ".tmp-", 5) != 0)
            continue;
        if (fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(st.st_mode))
            continue;
        if (!strncmp(de->d_name, ".tmp-", 5)) {
            if (now - st.st_mtime > STALE_TMP_S)
                unlinkat(dirfd(d), de->d_name, 0);
            continue;
        }
        total += st.st_size;
        if (!strcmp(de->d_name, keep) || strlen(de->d_name) >= sizeof e->name)
            continue;
        if (n == cap) {
            struct entry *ne = realloc(e, (cap = cap ? 2 * cap : 16) * sizeof *e);
            if (!ne)
                break;
            e = ne;
        }
        snprintf(e[n].name, sizeof e[n].name, "%s", de->d_name);
        e[n].size = st.st_size;
        e[n++].used = st.st_mtime;
    }
    if (n)
        qsort(e, n, sizeof *e, by_use);
    for (size_t i = 0; i < n && total > CACHE_MAX; i++)
        if (unlinkat(dirfd(d), e[i].name, 0) == 0)
            total -= e[i].size;
    free(e);
    closedir(d);
}

/* Makes the entry for the file on `fd`; its descriptor, or -1. */
static int fill_entry(int fd, const char *dir, const char *entry)
{
    char tmp[4200];
    if (!make_dirs(dir) || snprintf(tmp, sizeof tmp, "%s/.tmp-XXXXXX", dir) >= (int)sizeof tmp)
        return -1;
    int out = mkostemp(tmp, O_CLOEXEC);
    if (out < 0)
        return -1;
    bool ok = write_decompressed(fd, out);
    ok = close(out) == 0 && ok;
    if (!ok || rename(tmp, entry) != 0) {
        unlink(tmp);
        return -1;
    }
    evict(dir, strrchr(entry, '/') + 1);
    return open(entry, O_RDONLY | O_CLOEXEC);
}

int memprof__debug_cache(int fd, char **path, bool fill)
{
    char dir[4096], entry[4300];
    struct debug_file f;
    if (fd < 0 || !cache_dir(dir, sizeof dir) || !inspect(fd, &f) || !f.compressed)
        return fd;
    entry_path(entry, sizeof entry, dir, &f);
    if (!entry[0])
        return fd;
    int cached = open(entry, O_RDONLY | O_CLOEXEC);
    if (cached >= 0 && !memprof__debug_build_id_matches(cached, f.id, f.id_len)) {
        close(cached); /* not what its name says: made again below */
        cached = -1;
    }
    if (cached >= 0 && fill)
        (void)futimens(cached, NULL); /* used now: evicted last */
    if (cached < 0 && fill && f.size <= (uint64_t)CACHE_MAX / 2)
        cached = fill_entry(fd, dir, entry);
    char *name = cached >= 0 ? strdup(entry) : NULL;
    if (!name) {
        if (cached >= 0)
            close(cached);
        return fd;
    }
    close(fd);
    free(*path);
    *path = name;
    return cached;
}
#endif
