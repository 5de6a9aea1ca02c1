/* SPDX-License-Identifier: MIT */
/*
 * Unit tests of the cache of decompressed debug files (src/resolve/debugcache.h), on small
 * ELF files made here with libelf: one section of DWARF-like bytes, compressed or not, and a
 * GNU build-id note. The cache lives in a temporary MEMPROF_CACHE_DIR.
 */
#define _GNU_SOURCE
#include "config.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"

#if HAVE_LIBDW
#include <gelf.h>
#include <libelf.h>

#include "resolve/debugcache.h"

static char dir[64];

static const unsigned char build_id[20] = {0xde, 0xca, 0xfb, 0xad, 1,  2,  3,  4,  5,  6,
                                           7,    8,    9,    10,   11, 12, 13, 14, 15, 16};
static const char hex_id[] = "decafbad0102030405060708090a0b0c0d0e0f10";

/* The section's contents: compressible, and recognisable after the round trip. */
static unsigned char payload[64 << 10];

/* A section named by offset `name` in the section-name table. */
static bool add_section(Elf *elf, size_t name, Elf64_Word type, const void *data, size_t size)
{
    Elf_Scn *scn = elf_newscn(elf);
    Elf_Data *d = scn ? elf_newdata(scn) : NULL;
    if (!d)
        return false;
    d->d_buf = (void *)data;
    d->d_size = size;
    d->d_align = 4;
    d->d_type = ELF_T_BYTE;
    GElf_Shdr sh;
    gelf_getshdr(scn, &sh);
    sh.sh_name = (Elf64_Word)name;
    sh.sh_type = type;
    sh.sh_addralign = 4;
    return gelf_update_shdr(scn, &sh) != 0;
}

/* Writes `path`: a relocatable ELF file with a build-id note and a .debug_info section of
 * `payload`, compressed with zlib when asked. */
static bool make_elf(const char *path, bool compressed)
{
    static const char names[] = "\0.shstrtab\0.note.gnu.build-id\0.debug_info";
    struct {
        Elf64_Nhdr h;
        char name[4];
        unsigned char id[sizeof build_id];
    } note = {{4, sizeof build_id, NT_GNU_BUILD_ID}, "GNU", {0}};
    memcpy(note.id, build_id, sizeof build_id);
    int fd = open(path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_WRITE, NULL) : NULL;
    bool ok = elf && gelf_newehdr(elf, ELFCLASS64);
    GElf_Ehdr eh;
    ok = ok && gelf_getehdr(elf, &eh);
    if (ok) {
        eh.e_ident[EI_DATA] = ELFDATA2LSB;
        eh.e_type = ET_REL;
        eh.e_machine = EM_X86_64;
        eh.e_version = EV_CURRENT;
        eh.e_shstrndx = 1;
        ok = gelf_update_ehdr(elf, &eh);
    }
    ok = ok && add_section(elf, 1, SHT_STRTAB, names, sizeof names);        /* .shstrtab */
    ok = ok && add_section(elf, 11, SHT_NOTE, &note, sizeof note);          /* build id */
    ok = ok && add_section(elf, 30, SHT_PROGBITS, payload, sizeof payload); /* .debug_info */
    if (ok && compressed)
        ok = elf_compress(elf_getscn(elf, 3), ELFCOMPRESS_ZLIB, 0) == 1;
    ok = ok && elf_update(elf, ELF_C_WRITE) >= 0;
    if (elf)
        elf_end(elf);
    if (fd >= 0)
        close(fd);
    return ok;
}

/* Whether the file at `path` holds `payload` uncompressed in its .debug_info. */
static bool holds_payload_plainly(const char *path)
{
    int fd = open(path, O_RDONLY);
    Elf *elf = fd >= 0 ? elf_begin(fd, ELF_C_READ, NULL) : NULL;
    Elf_Scn *scn = elf ? elf_getscn(elf, 3) : NULL;
    GElf_Shdr sh;
    Elf_Data *d = scn && gelf_getshdr(scn, &sh) ? elf_getdata(scn, NULL) : NULL;
    bool ok = d && !(sh.sh_flags & SHF_COMPRESSED) && d->d_size == sizeof payload &&
              memcmp(d->d_buf, payload, sizeof payload) == 0;
    if (elf)
        elf_end(elf);
    if (fd >= 0)
        close(fd);
    return ok;
}

static void setup(void)
{
    elf_version(EV_CURRENT);
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)("dwarf"[i % 5] + i / 4096);
    snprintf(dir, sizeof dir, "/tmp/memprof-debugcache-XXXXXX");
    if (!mkdtemp(dir))
        abort();
    char cache[128];
    snprintf(cache, sizeof cache, "%s/cache", dir);
    setenv("MEMPROF_CACHE_DIR", cache, 1);
}

/* The entry's path, as the cache names it. */
static void entry_path(char *out, size_t size)
{
    snprintf(out, size, "%s/cache/debug/%s.debug", dir, hex_id);
}

/* Calls the cache on the file at `path`; *result gets the name the caller is given. */
static int through_cache(const char *path, bool fill, char **result)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    *result = strdup(path);
    return memprof__debug_cache(fd, result, fill);
}

static void test_a_compressed_file_is_copied_decompressed_and_the_copy_returned(void)
{
    char path[128], entry[256], *got = NULL;
    snprintf(path, sizeof path, "%s/a.debug", dir);
    CHECK(make_elf(path, true));
    CHECK(!holds_payload_plainly(path));
    int fd = through_cache(path, true, &got);
    entry_path(entry, sizeof entry);
    EXPECT(fd >= 0);
    EXPECT(got && strcmp(got, entry) == 0);
    EXPECT(holds_payload_plainly(entry));
    EXPECT(access(path, F_OK) == 0); /* the original stays */
    if (fd >= 0)
        close(fd);
    free(got);
}

static void test_a_reader_finds_the_copy_and_never_writes_one(void)
{
    char path[128], entry[256], *got = NULL;
    snprintf(path, sizeof path, "%s/b.debug", dir);
    CHECK(make_elf(path, true));
    entry_path(entry, sizeof entry);
    unlink(entry);
    int fd = through_cache(path, false, &got); /* no copy yet: the file itself */
    EXPECT(got && strcmp(got, path) == 0);
    EXPECT(access(entry, F_OK) != 0);
    close(fd);
    free(got);
    fd = through_cache(path, true, &got); /* the command makes it */
    close(fd);
    free(got);
    fd = through_cache(path, false, &got); /* then a reader gets it */
    EXPECT(got && strcmp(got, entry) == 0);
    close(fd);
    free(got);
}

static void test_an_uncompressed_file_is_used_as_it_is(void)
{
    char path[128], *got = NULL;
    snprintf(path, sizeof path, "%s/c.debug", dir);
    CHECK(make_elf(path, false));
    int fd = through_cache(path, true, &got);
    EXPECT(fd >= 0 && got && strcmp(got, path) == 0);
    close(fd);
    free(got);
}

static void test_a_copy_whose_build_id_differs_is_not_used(void)
{
    char path[128], entry[256], *got = NULL;
    snprintf(path, sizeof path, "%s/d.debug", dir);
    entry_path(entry, sizeof entry);
    CHECK(make_elf(path, true));
    /* An entry of the right name holding another file (no build-id note at all). */
    FILE *f = fopen(entry, "w");
    CHECK(f != NULL);
    fputs("not an ELF file", f);
    fclose(f);
    int fd = through_cache(path, false, &got);
    EXPECT(got && strcmp(got, path) == 0);
    close(fd);
    free(got);
    fd = through_cache(path, true, &got); /* the command makes it again */
    EXPECT(got && strcmp(got, entry) == 0);
    EXPECT(holds_payload_plainly(entry));
    close(fd);
    free(got);
}

static void test_an_empty_cache_dir_variable_turns_the_cache_off(void)
{
    char path[128], *got = NULL, *saved = strdup(getenv("MEMPROF_CACHE_DIR"));
    snprintf(path, sizeof path, "%s/e.debug", dir);
    CHECK(make_elf(path, true));
    setenv("MEMPROF_CACHE_DIR", "", 1);
    int fd = through_cache(path, true, &got);
    EXPECT(fd >= 0 && got && strcmp(got, path) == 0);
    close(fd);
    free(got);
    setenv("MEMPROF_CACHE_DIR", saved, 1);
    free(saved);
}
#endif

int main(int argc, char **argv)
{
#if HAVE_LIBDW
    setup();
    static const struct test_case cases[] = {
        TEST_CASE(test_a_compressed_file_is_copied_decompressed_and_the_copy_returned),
        TEST_CASE(test_a_reader_finds_the_copy_and_never_writes_one),
        TEST_CASE(test_an_uncompressed_file_is_used_as_it_is),
        TEST_CASE(test_a_copy_whose_build_id_differs_is_not_used),
        TEST_CASE(test_an_empty_cache_dir_variable_turns_the_cache_off),
    };
    int rc = TEST_MAIN(cases, false);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
    if (system(cmd) != 0)
        rc = rc ? rc : 1;
    return rc;
#else
    (void)argc, (void)argv;
    return TEST_EXIT_SKIP;
#endif
}
