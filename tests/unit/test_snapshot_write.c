/* SPDX-License-Identifier: MIT */
/*
 * Tests of memprof_snapshot_write() (include/memprof/memprof.h): text and collapsed output
 * land in files of mode 0600 whatever the umask; MEMPROF_FORMAT_AUTO picks the format from
 * the extension; pprof, speedscope and HTML either write a file of their kind or, until
 * their writers exist, return -ENOTSUP and create nothing; bad arguments return -EINVAL;
 * failures (missing directory, a directory in the way) return a negative errno and leave no
 * temporary file; an existing file is replaced and a symlink at the path is replaced, not
 * followed. What is not a regular file is written in place (src/api/output.c): a FIFO (or
 * ENXIO without a reader), a descriptor by its names (/proc/self/fd/N, /dev/fd/N, a symlink
 * to one; EBADF when closed, the link kept), a character device (root), and paths longer
 * than PATH_MAX fail cleanly. All cases share one engine holding a few samples recorded with
 * explicit stacks.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>

#include "api/output.h"

#include "core/engine.h"
#include "memprof/memprof.h"
#include "test.h"

static char dir[256];
static memprof_snapshot *snap;

static void site_one(void) {}
static void site_two(void) {}
static void caller(void) {}

/* One engine with samples on two stacks, one snapshot, one scratch directory. */
static bool setup(void)
{
    if (snap)
        return true;
    const char *tmp = getenv("TMPDIR");
    snprintf(dir, sizeof dir, "%s/memprof-write-XXXXXX", tmp && *tmp ? tmp : "/tmp");
    if (!mkdtemp(dir))
        return false;
    if (memprof_init(1) != 0)
        return false;
    memprof__backend_register();
    if (memprof_start() != 0)
        return false;
    static char blocks[4][64] __attribute__((aligned(64)));
    const uintptr_t one[] = {(uintptr_t)site_one + 1, (uintptr_t)caller + 1};
    const uintptr_t two[] = {(uintptr_t)site_two + 1, (uintptr_t)caller + 1};
    memprof__record((uint64_t)(uintptr_t)blocks[0], 1000, one, 2, false);
    memprof__record((uint64_t)(uintptr_t)blocks[1], 3000, one, 2, false);
    memprof__record((uint64_t)(uintptr_t)blocks[2], 500, two, 2, false);
    return memprof_get_snapshot(&snap) == 0;
}

static const char *path_in_dir(const char *name)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

/* The whole file as a string (static buffer), or NULL. */
static const char *slurp(const char *path)
{
    static char buf[65536];
    FILE *f = fopen(path, "r");
    if (!f)
        return NULL;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = 0;
    return buf;
}

static bool exists(const char *path)
{
    struct stat st;
    return lstat(path, &st) == 0;
}

/* Entries of the scratch directory whose name contains `part`. */
static int entries_containing(const char *part)
{
    DIR *d = opendir(dir);
    if (!d)
        return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += strstr(e->d_name, part) != NULL;
    closedir(d);
    return n;
}

static bool is_text(const char *content)
{
    return content && strncmp(content, "libmemprof ", 11) == 0;
}

/* Every line is "frames value" with a positive decimal value; returns the sum, 0 if not. */
static uint64_t collapsed_total(const char *content)
{
    if (!content || !*content)
        return 0;
    uint64_t total = 0;
    for (const char *line = content; *line;) {
        const char *end = strchr(line, '\n');
        if (!end)
            return 0; /* every line ends with a newline */
        const char *sp = end;
        while (sp > line && sp[-1] != ' ')
            sp--;
        if (sp == line || sp == end)
            return 0;
        uint64_t v = 0;
        for (const char *p = sp; p < end; p++) {
            if (*p < '0' || *p > '9')
                return 0;
            v = v * 10 + (uint64_t)(*p - '0');
        }
        if (v == 0)
            return 0;
        total += v;
        line = end + 1;
    }
    return total;
}

static void test_text_format_writes_a_0600_file(void)
{
    CHECK(setup());
    mode_t old = umask(0);
    const char *path = path_in_dir("profile.out");
    int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT);
    umask(old);
    CHECK_EQ(rc, 0);
    struct stat st;
    CHECK_EQ(lstat(path, &st), 0);
    EXPECT(S_ISREG(st.st_mode));
    EXPECT_EQ(st.st_mode & 07777, 0600);
    const char *c = slurp(path);
    EXPECT(is_text(c));
    EXPECT(c && strstr(c, "Estimated live heap") != NULL);
    EXPECT_EQ(entries_containing(".tmp"), 0);
    unlink(path);
}

static void test_collapsed_format_has_one_value_per_line(void)
{
    CHECK(setup());
    mode_t old = umask(0);
    const char *path = path_in_dir("profile.data");
    int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_COLLAPSED);
    umask(old);
    CHECK_EQ(rc, 0);
    struct stat st;
    CHECK_EQ(lstat(path, &st), 0);
    EXPECT_EQ(st.st_mode & 07777, 0600);
    const char *c = slurp(path);
    CHECK(c != NULL);
    /* Rate 1: the values are the exact live bytes, 4000 + 500. */
    EXPECT_EQ_U(collapsed_total(c), 4500);
    EXPECT(strchr(c, ';') != NULL); /* two-frame stacks */
    unlink(path);
}

static void test_auto_picks_the_format_by_extension(void)
{
    CHECK(setup());
    const char *text_names[] = {"p.txt", "noextension", "p.text.out"};
    for (int i = 0; i < 3; i++) {
        const char *path = path_in_dir(text_names[i]);
        CHECK_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_AUTO), 0);
        if (!EXPECT(is_text(slurp(path))))
            printf("  %s is not text\n", text_names[i]);
        unlink(path);
    }
    const char *collapsed_names[] = {"p.folded", "p.collapsed"};
    for (int i = 0; i < 2; i++) {
        const char *path = path_in_dir(collapsed_names[i]);
        CHECK_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_AUTO), 0);
        if (!EXPECT_EQ_U(collapsed_total(slurp(path)), 4500))
            printf("  %s is not collapsed stacks\n", collapsed_names[i]);
        unlink(path);
    }
}

/* A pprof, speedscope or HTML file: gzip magic, a JSON object, an HTML document. */
static bool looks_like(memprof_format f, const char *path)
{
    unsigned char head[512] = {0};
    FILE *fp = fopen(path, "rb");
    if (!fp)
        return false;
    size_t n = fread(head, 1, sizeof head - 1, fp);
    fclose(fp);
    if (f == MEMPROF_FORMAT_PPROF)
        return n >= 2 && head[0] == 0x1f && head[1] == 0x8b;
    if (f == MEMPROF_FORMAT_SPEEDSCOPE)
        return n >= 1 && head[0] == '{';
    return strcasestr((const char *)head, "<html") != NULL;
}

static void test_other_formats_write_a_file_or_return_enotsup(void)
{
    /* pprof, speedscope and HTML come with later writers: until then -ENOTSUP and no file;
     * once written, a 0600 file of the right kind. AUTO agrees with the explicit format. */
    CHECK(setup());
    const memprof_format formats[] = {MEMPROF_FORMAT_PPROF, MEMPROF_FORMAT_SPEEDSCOPE,
                                      MEMPROF_FORMAT_HTML};
    const char *names[] = {"p.pb.gz", "p.json", "p.html"};
    for (int i = 0; i < 3; i++) {
        const char *path = path_in_dir("p.any");
        int rc = memprof_snapshot_write(snap, path, formats[i]);
        printf("  format %d: %s\n", (int)formats[i], rc == 0 ? "written" : memprof_strerror(rc));
        if (rc == 0) {
            struct stat st;
            EXPECT(lstat(path, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0);
            EXPECT_EQ(st.st_mode & 07777, 0600);
            EXPECT(looks_like(formats[i], path));
            unlink(path);
        } else {
            EXPECT_EQ(rc, -ENOTSUP);
            EXPECT(!exists(path));
        }
        const char *auto_path = path_in_dir(names[i]);
        EXPECT_EQ(memprof_snapshot_write(snap, auto_path, MEMPROF_FORMAT_AUTO), rc);
        EXPECT(exists(auto_path) == (rc == 0));
        if (rc == 0)
            EXPECT(looks_like(formats[i], auto_path));
        unlink(auto_path);
    }
    EXPECT_EQ(entries_containing(".tmp"), 0);
}

static void test_bad_arguments_return_einval(void)
{
    CHECK(setup());
    const char *path = path_in_dir("bad.txt");
    EXPECT_EQ(memprof_snapshot_write(NULL, path, MEMPROF_FORMAT_TEXT), -EINVAL);
    EXPECT_EQ(memprof_snapshot_write(snap, NULL, MEMPROF_FORMAT_TEXT), -EINVAL);
    EXPECT_EQ(memprof_snapshot_write(snap, "", MEMPROF_FORMAT_TEXT), -EINVAL);
    EXPECT_EQ(memprof_snapshot_write(snap, path, (memprof_format)6), -EINVAL);
    EXPECT_EQ(memprof_snapshot_write(snap, path, (memprof_format)-1), -EINVAL);
    EXPECT_EQ(memprof_snapshot_write(snap, path, (memprof_format)1000), -EINVAL);
    EXPECT(!exists(path));
}

static void test_missing_directory_fails_cleanly(void)
{
    CHECK(setup());
    const char *path = path_in_dir("no/such/dir/p.txt");
    int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT);
    EXPECT(rc < 0);
    EXPECT_EQ(rc, -ENOENT);
    EXPECT(memprof_strerror(rc) != NULL);
    EXPECT_EQ(entries_containing(".tmp"), 0);
    EXPECT_EQ(entries_containing("no"), 0);
}

static void test_failed_rename_leaves_no_temporary_file(void)
{
    /* A non-empty directory is in the way: the file is written, the rename fails. */
    CHECK(setup());
    const char *path = path_in_dir("in-the-way.txt");
    CHECK_EQ(mkdir(path, 0700), 0);
    char inner[600];
    snprintf(inner, sizeof inner, "%s/keep", path);
    int fd = open(inner, O_CREAT | O_WRONLY, 0600);
    CHECK(fd >= 0);
    close(fd);
    int rc = memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT);
    EXPECT(rc < 0);
    EXPECT(rc == -EISDIR || rc == -ENOTEMPTY || rc == -EEXIST);
    EXPECT_EQ(entries_containing(".tmp"), 0);
    unlink(inner);
    rmdir(path);
}

static void test_existing_file_is_replaced(void)
{
    CHECK(setup());
    const char *path = path_in_dir("replace.out");
    CHECK_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT), 0);
    EXPECT(is_text(slurp(path)));
    CHECK_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_COLLAPSED), 0);
    EXPECT_EQ_U(collapsed_total(slurp(path)), 4500);
    EXPECT_EQ(entries_containing("replace.out"), 1);
    unlink(path);
}

static void test_symlink_at_the_path_is_replaced_not_followed(void)
{
    CHECK(setup());
    char victim[512];
    snprintf(victim, sizeof victim, "%s", path_in_dir("victim"));
    FILE *f = fopen(victim, "w");
    CHECK(f != NULL);
    fputs("keep me\n", f);
    fclose(f);
    const char *path = path_in_dir("link.txt");
    CHECK_EQ(symlink(victim, path), 0);
    CHECK_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT), 0);
    const char *c = slurp(victim);
    EXPECT(c && strcmp(c, "keep me\n") == 0);
    struct stat st;
    CHECK_EQ(lstat(path, &st), 0);
    EXPECT(S_ISREG(st.st_mode));
    EXPECT(is_text(slurp(path)));
    unlink(path);
    unlink(victim);
}

static void test_unwritable_directory_returns_eacces(void)
{
    CHECK(setup());
    if (geteuid() == 0)
        SKIP("running as root: permissions are not enforced");
    const char *sub = path_in_dir("readonly");
    CHECK_EQ(mkdir(sub, 0500), 0);
    char path[600];
    snprintf(path, sizeof path, "%s/p.txt", sub);
    EXPECT_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT), -EACCES);
    EXPECT(!exists(path));
    rmdir(sub);
}

/* Reads what is waiting in `fd` (non-blocking) into a static buffer. */
static const char *drain(int fd)
{
    static char buf[65536];
    size_t n = 0;
    ssize_t r;
    while (n < sizeof buf - 1 && (r = read(fd, buf + n, sizeof buf - 1 - n)) > 0)
        n += (size_t)r;
    buf[n] = 0;
    return buf;
}

static void test_fifo_is_written_in_place_or_fails_without_a_reader(void)
{
    CHECK(setup());
    const char *path = path_in_dir("fifo");
    CHECK_EQ(mkfifo(path, 0600), 0);
    EXPECT(memprof__output_in_place(path));
    EXPECT_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT), -ENXIO);
    /* A reader that has it open: the profile (far below a pipe's 64 KiB) waits in it. */
    int r = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    CHECK(r >= 0);
    EXPECT_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT), 0);
    EXPECT(is_text(drain(r)));
    close(r);
    struct stat st;
    EXPECT(lstat(path, &st) == 0 && S_ISFIFO(st.st_mode));
    EXPECT_EQ(entries_containing(".tmp"), 0);
    unlink(path);
}

static void test_descriptor_names_write_to_the_descriptor(void)
{
    CHECK(setup());
    int p[2];
    CHECK_EQ(pipe2(p, O_CLOEXEC | O_NONBLOCK), 0);
    char names[3][600];
    snprintf(names[0], sizeof names[0], "/proc/self/fd/%d", p[1]);
    snprintf(names[1], sizeof names[1], "/dev/fd/%d", p[1]);
    snprintf(names[2], sizeof names[2], "%s", path_in_dir("link-to-fd"));
    CHECK_EQ(symlink(names[0], names[2]), 0);
    for (int i = 0; i < 3; i++) {
        EXPECT(memprof__output_in_place(names[i]));
        EXPECT_EQ(memprof_snapshot_write(snap, names[i], MEMPROF_FORMAT_TEXT), 0);
        EXPECT(is_text(drain(p[0])));
    }
    struct stat st;
    EXPECT(lstat(names[2], &st) == 0 && S_ISLNK(st.st_mode));
    close(p[1]);
    /* Closed: EBADF, and the symlink to its name is kept (not a dangling link to replace). */
    EXPECT_EQ(memprof_snapshot_write(snap, names[0], MEMPROF_FORMAT_TEXT), -EBADF);
    EXPECT_EQ(memprof_snapshot_write(snap, names[2], MEMPROF_FORMAT_TEXT), -EBADF);
    EXPECT(lstat(names[2], &st) == 0 && S_ISLNK(st.st_mode));
    EXPECT_EQ(entries_containing(".tmp"), 0);
    close(p[0]);
    unlink(names[2]);
}

static void test_regular_file_descriptor_is_written_at_its_offset(void)
{
    CHECK(setup());
    const char *path = path_in_dir("by-descriptor.txt");
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    CHECK(fd >= 0);
    struct stat before, after;
    CHECK(fstat(fd, &before) == 0 && write(fd, "HEAD\n", 5) == 5);
    char name[64];
    snprintf(name, sizeof name, "/proc/self/fd/%d", fd);
    EXPECT_EQ(memprof_snapshot_write(snap, name, MEMPROF_FORMAT_TEXT), 0);
    CHECK(write(fd, "TAIL\n", 5) == 5);
    close(fd);
    CHECK_EQ(stat(path, &after), 0);
    EXPECT(after.st_ino == before.st_ino);
    const char *c = slurp(path);
    CHECK(c != NULL);
    EXPECT(strncmp(c, "HEAD\n", 5) == 0 && is_text(c + 5));
    EXPECT(strlen(c) > 10 && strcmp(c + strlen(c) - 5, "TAIL\n") == 0);
    unlink(path);
}

static void test_character_device_is_written_in_place(void)
{
    CHECK(setup());
    const char *path = path_in_dir("null");
    if (mknod(path, S_IFCHR | 0600, makedev(1, 3)) != 0)
        SKIP("mknod needs root");
    EXPECT(memprof__output_in_place(path));
    EXPECT_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT), 0);
    struct stat st;
    EXPECT(lstat(path, &st) == 0 && S_ISCHR(st.st_mode) && st.st_rdev == makedev(1, 3));
    EXPECT_EQ(entries_containing(".tmp"), 0);
    unlink(path);
}

static void test_paths_longer_than_path_max_fail_cleanly(void)
{
    CHECK(setup());
    static char path[PATH_MAX + 64];
    int n = snprintf(path, sizeof path, "%s/", dir);
    memset(path + n, 'x', sizeof path - (size_t)n - 1);
    path[sizeof path - 1] = 0;
    EXPECT(!memprof__output_in_place(path));
    EXPECT(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_TEXT) < 0);
    /* A symlink whose target, joined to the link's directory, is longer than PATH_MAX:
     * followed as far as it goes, then replaced as a link to something else. */
    const char *link = path_in_dir("long-link");
    path[n + 4000] = 0;
    CHECK_EQ(symlink(path + n, link), 0);
    EXPECT(memprof_snapshot_write(snap, link, MEMPROF_FORMAT_TEXT) < 0 || is_text(slurp(link)));
    unlink(link);
    EXPECT_EQ(entries_containing(".tmp"), 0);
}

static void test_snapshot_stays_writable_after_shutdown(void)
{
    /* Last: shuts the shared engine down. Snapshots stay valid until freed. */
    CHECK(setup());
    memprof_shutdown();
    const char *path = path_in_dir("after.folded");
    CHECK_EQ(memprof_snapshot_write(snap, path, MEMPROF_FORMAT_AUTO), 0);
    EXPECT_EQ_U(collapsed_total(slurp(path)), 4500);
    unlink(path);
    memprof_free_snapshot(snap);
    snap = NULL;
    rmdir(dir);
}

int main(int argc, char **argv)
{
    static const struct test_case cases[] = {
        TEST_CASE(test_text_format_writes_a_0600_file),
        TEST_CASE(test_collapsed_format_has_one_value_per_line),
        TEST_CASE(test_auto_picks_the_format_by_extension),
        TEST_CASE(test_other_formats_write_a_file_or_return_enotsup),
        TEST_CASE(test_bad_arguments_return_einval),
        TEST_CASE(test_missing_directory_fails_cleanly),
        TEST_CASE(test_failed_rename_leaves_no_temporary_file),
        TEST_CASE(test_existing_file_is_replaced),
        TEST_CASE(test_symlink_at_the_path_is_replaced_not_followed),
        TEST_CASE(test_unwritable_directory_returns_eacces),
        TEST_CASE(test_fifo_is_written_in_place_or_fails_without_a_reader),
        TEST_CASE(test_descriptor_names_write_to_the_descriptor),
        TEST_CASE(test_regular_file_descriptor_is_written_at_its_offset),
        TEST_CASE(test_character_device_is_written_in_place),
        TEST_CASE(test_paths_longer_than_path_max_fail_cleanly),
        TEST_CASE(test_snapshot_stays_writable_after_shutdown),
    };
    return TEST_MAIN(cases, false);
}
