/* SPDX-License-Identifier: MIT */
/*
 * Writing profiles: to a file by name (memprof_snapshot_write(), which chooses the format by
 * the extension and replaces the file atomically), or to a PHP stream (a file opened with
 * fopen(), php://output, php://memory, a socket). The library writes to paths only, so a
 * stream gets the profile through an anonymous memory file: the library writes it through
 * the descriptor's /proc name (written in place), and we copy it into the stream. No
 * temporary file is left anywhere, whatever happens.
 */
#define _GNU_SOURCE
#include "binding.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include <main/php_streams.h>

int mpphp_format_from_name(const char *name, size_t len)
{
    /* The library's one table of names (memprof_format_from_name()); PHP strings are
     * counted, not terminated. */
    char z[16];
    if (len >= sizeof z || memchr(name, 0, len))
        return -1;
    memcpy(z, name, len);
    z[len] = 0;
    int f = memprof_format_from_name(z);
    return f > 0 ? f : -1;
}

int mpphp_write_file(const char *path, memprof_format format)
{
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    if (rc < 0)
        return rc;
    rc = memprof_snapshot_write(snap, path, format);
    memprof_free_snapshot(snap);
    return rc;
}

int mpphp_write_stream(php_stream *stream, memprof_format format)
{
    if (format == MEMPROF_FORMAT_AUTO)
        format = MEMPROF_FORMAT_TEXT;
    int fd = memfd_create("memprof-php", MFD_CLOEXEC);
    if (fd < 0)
        return -errno;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int rc = mpphp_write_file(path, format);
    if (rc == 0 && lseek(fd, 0, SEEK_SET) < 0)
        rc = -errno;
    char buf[16384];
    while (rc == 0) {
        ssize_t got = read(fd, buf, sizeof buf);
        if (got < 0 && errno == EINTR)
            continue;
        if (got < 0) {
            rc = -errno;
            break;
        }
        if (got == 0)
            break;
        for (ssize_t off = 0; off < got;) {
            ssize_t put = php_stream_write(stream, buf + off, (size_t)(got - off));
            if (put <= 0) {
                rc = -EIO;
                break;
            }
            off += put;
        }
    }
    close(fd);
    return rc;
}
