/* SPDX-License-Identifier: MIT */
/*
 * The functions PHP code calls, in the shape php-memprof's users know: memprof_enable(),
 * memprof_disable(), memprof_enabled(), memprof_dump_pprof($stream); and libmemprof's
 * other formats and figures: memprof_dump($stream, $format), memprof_dump_file($path,
 * $format), memprof_top_sites($limit) and memprof_estimate(). Failures to start or write
 * are warnings with a false return, as PHP's own file functions report them; a bad
 * argument is a ValueError.
 *
 * memprof_top_sites() groups the live sites by the code location they are attributed to:
 * the innermost PHP frame with a file (the user function that allocated, at its line);
 * else the innermost PHP frame (an internal function run from outside any script); else the
 * first native frame. The Ruby binding's top_allocators() does the same.
 */
#include "binding.h"

#include <errno.h>
#include <string.h>

#include <main/php_streams.h>
#include <zend_exceptions.h>
#include <zend_smart_str.h>

static void warn(const char *what, int rc)
{
    php_error_docref(NULL, E_WARNING, "%s: %s", what, memprof_strerror(rc));
}

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_bool_void, 0, 0, _IS_BOOL, 0)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_dump_pprof, 0, 1, _IS_BOOL, 0)
ZEND_ARG_INFO(0, stream)
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_dump, 0, 1, _IS_BOOL, 0)
ZEND_ARG_INFO(0, stream)
ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, format, IS_STRING, 0, "\"text\"")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_dump_file, 0, 1, _IS_BOOL, 0)
ZEND_ARG_TYPE_INFO(0, path, IS_STRING, 0)
ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, format, IS_STRING, 1, "null")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_top_sites, 0, 0, IS_ARRAY, 0)
ZEND_ARG_TYPE_INFO_WITH_DEFAULT_VALUE(0, limit, IS_LONG, 0, "10")
ZEND_END_ARG_INFO()

ZEND_BEGIN_ARG_WITH_RETURN_TYPE_INFO_EX(arginfo_estimate, 0, 0, IS_ARRAY, 0)
ZEND_END_ARG_INFO()

/* bool memprof_enable(): starts sampling (idempotent). */
static PHP_FUNCTION(memprof_enable)
{
    ZEND_PARSE_PARAMETERS_NONE();
    int rc = mpphp_start(0);
    if (rc < 0) {
        warn("cannot start profiling", rc);
        RETURN_FALSE;
    }
    RETURN_TRUE;
}

/* bool memprof_disable(): stops sampling; what was sampled stays for the dumps. */
static PHP_FUNCTION(memprof_disable)
{
    ZEND_PARSE_PARAMETERS_NONE();
    int rc = mpphp_stop();
    if (rc < 0) {
        warn("cannot stop profiling", rc);
        RETURN_FALSE;
    }
    RETURN_TRUE;
}

static PHP_FUNCTION(memprof_enabled)
{
    ZEND_PARSE_PARAMETERS_NONE();
    RETURN_BOOL(mpphp_active());
}

static void dump_stream(zval *zstream, memprof_format format, zval *return_value)
{
    php_stream *stream;
    php_stream_from_zval(stream, zstream);
    int rc = mpphp_write_stream(stream, format);
    if (rc < 0) {
        warn("cannot write the profile", rc);
        RETURN_FALSE;
    }
    RETURN_TRUE;
}

/* bool memprof_dump_pprof(resource $stream): the profile in pprof's format (gzip'ed). */
static PHP_FUNCTION(memprof_dump_pprof)
{
    zval *zstream;
    ZEND_PARSE_PARAMETERS_START(1, 1)
    Z_PARAM_RESOURCE(zstream)
    ZEND_PARSE_PARAMETERS_END();
    dump_stream(zstream, MEMPROF_FORMAT_PPROF, return_value);
}

/* bool memprof_dump(resource $stream, string $format = "text"). */
static PHP_FUNCTION(memprof_dump)
{
    zval *zstream;
    zend_string *name = NULL;
    ZEND_PARSE_PARAMETERS_START(1, 2)
    Z_PARAM_RESOURCE(zstream)
    Z_PARAM_OPTIONAL
    Z_PARAM_STR(name)
    ZEND_PARSE_PARAMETERS_END();
    int format =
        name ? mpphp_format_from_name(ZSTR_VAL(name), ZSTR_LEN(name)) : (int)MEMPROF_FORMAT_TEXT;
    if (format < 0) {
        zend_argument_value_error(2, "must be one of \"pprof\", \"speedscope\", \"collapsed\", "
                                     "\"text\" or \"html\"");
        RETURN_THROWS();
    }
    dump_stream(zstream, (memprof_format)format, return_value);
}

/* bool memprof_dump_file(string $path, ?string $format = null): null = by the extension
 * (.pb.gz, .json, .folded, .txt, .html). The file is replaced atomically. */
static PHP_FUNCTION(memprof_dump_file)
{
    char *path;
    size_t path_len;
    zend_string *name = NULL;
    ZEND_PARSE_PARAMETERS_START(1, 2)
    Z_PARAM_PATH(path, path_len)
    Z_PARAM_OPTIONAL
    Z_PARAM_STR_OR_NULL(name)
    ZEND_PARSE_PARAMETERS_END();
    int format =
        name ? mpphp_format_from_name(ZSTR_VAL(name), ZSTR_LEN(name)) : (int)MEMPROF_FORMAT_AUTO;
    if (format < 0) {
        zend_argument_value_error(2, "must be one of \"pprof\", \"speedscope\", \"collapsed\", "
                                     "\"text\", \"html\" or null");
        RETURN_THROWS();
    }
    if (path_len == 0) {
        zend_argument_value_error(1, "cannot be empty");
        RETURN_THROWS();
    }
    int rc = mpphp_write_file(path, (memprof_format)format);
    if (rc < 0) {
        php_error_docref(NULL, E_WARNING, "cannot write the profile to %s: %s", path,
                         memprof_strerror(rc));
        RETURN_FALSE;
    }
    RETURN_TRUE;
}

/* ---- memprof_top_sites() ----------------------------------------------------------------- */

struct group {
    zend_string *function, *file;
    uint32_t line;
    uint64_t bytes, bytes_low, bytes_high, count, samples, sites;
};

/* Index of the frame a site is attributed to (see the top of the file); -1 if none. */
static int attributed_frame(const memprof_snapshot *snap, uint32_t stack_id, memprof_frame *out)
{
    int depth = memprof_snapshot_stack_depth(snap, stack_id);
    int runtime = -1, native = -1;
    for (int i = 0; i < depth; i++) {
        memprof_frame f = {.size = sizeof f};
        if (memprof_snapshot_frame(snap, stack_id, (size_t)i, &f) < 0)
            continue;
        if (f.flags & MEMPROF_FRAME_RUNTIME) {
            if (f.file) {
                *out = f;
                return i;
            }
            if (runtime < 0)
                runtime = i;
        } else if (native < 0 && f.function) {
            native = i;
        }
    }
    int at = runtime >= 0 ? runtime : native;
    if (at >= 0) {
        out->size = sizeof *out;
        memprof_snapshot_frame(snap, stack_id, (size_t)at, out);
    }
    return at;
}

static int by_bytes(const void *a, const void *b)
{
    const struct group *x = a, *y = b;
    return x->bytes < y->bytes ? 1 : x->bytes > y->bytes ? -1 : 0;
}

/* array memprof_top_sites(int $limit = 10): the code locations holding the most estimated
 * live bytes, largest first, each ['function', 'file', 'line', 'bytes', 'bytes_low',
 * 'bytes_high', 'count', 'samples', 'sites']. */
static PHP_FUNCTION(memprof_top_sites)
{
    zend_long limit = 10;
    ZEND_PARSE_PARAMETERS_START(0, 1)
    Z_PARAM_OPTIONAL
    Z_PARAM_LONG(limit)
    ZEND_PARSE_PARAMETERS_END();
    if (limit < 1) {
        zend_argument_value_error(1, "must be greater than 0");
        RETURN_THROWS();
    }
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    if (rc < 0) {
        warn("cannot take a snapshot", rc);
        RETURN_EMPTY_ARRAY();
    }
    size_t nsites = memprof_snapshot_site_count(snap);
    struct group *groups = nsites ? safe_emalloc(nsites, sizeof *groups, 0) : NULL;
    size_t ngroups = 0;
    HashTable index; /* "function\0file\0line" -> group index */
    zend_hash_init(&index, 64, NULL, NULL, 0);
    for (size_t i = 0; i < nsites; i++) {
        memprof_site_info s = {.size = sizeof s};
        if (memprof_snapshot_site(snap, i, &s) < 0 || s.live_samples == 0)
            continue;
        memprof_frame f = {.size = sizeof f};
        const char *fn = NULL, *file = NULL;
        uint32_t line = 0;
        if (attributed_frame(snap, s.stack_id, &f) >= 0) {
            fn = f.function;
            file = f.file;
            line = f.line;
        }
        smart_str key = {0};
        smart_str_appends(&key, fn ? fn : "");
        smart_str_appendc(&key, '\0');
        smart_str_appends(&key, file ? file : "");
        smart_str_appendc(&key, '\0');
        smart_str_append_unsigned(&key, line);
        smart_str_0(&key);
        zval *found = zend_hash_find(&index, key.s);
        struct group *g;
        if (found) {
            g = &groups[Z_LVAL_P(found)];
        } else {
            zval at;
            ZVAL_LONG(&at, (zend_long)ngroups);
            zend_hash_add_new(&index, key.s, &at);
            g = &groups[ngroups++];
            memset(g, 0, sizeof *g);
            g->function = fn ? zend_string_init(fn, strlen(fn), 0) : NULL;
            g->file = file ? zend_string_init(file, strlen(file), 0) : NULL;
            g->line = line;
        }
        smart_str_free(&key);
        g->bytes += s.live_bytes;
        g->bytes_low += s.live_bytes_low;
        g->bytes_high += s.live_bytes_high;
        g->count += s.live_count;
        g->samples += s.live_samples;
        g->sites++;
    }
    zend_hash_destroy(&index);
    memprof_free_snapshot(snap);
    if (ngroups)
        qsort(groups, ngroups, sizeof *groups, by_bytes);
    array_init(return_value);
    for (size_t i = 0; i < ngroups; i++) {
        struct group *g = &groups[i];
        if ((zend_long)i < limit) {
            zval row;
            array_init(&row);
            if (g->function)
                add_assoc_str(&row, "function", g->function);
            else
                add_assoc_null(&row, "function");
            if (g->file)
                add_assoc_str(&row, "file", g->file);
            else
                add_assoc_null(&row, "file");
            add_assoc_long(&row, "line", (zend_long)g->line);
            add_assoc_long(&row, "bytes", (zend_long)g->bytes);
            add_assoc_long(&row, "bytes_low", (zend_long)g->bytes_low);
            add_assoc_long(&row, "bytes_high", (zend_long)g->bytes_high);
            add_assoc_long(&row, "count", (zend_long)g->count);
            add_assoc_long(&row, "samples", (zend_long)g->samples);
            add_assoc_long(&row, "sites", (zend_long)g->sites);
            add_next_index_zval(return_value, &row);
        } else {
            if (g->function)
                zend_string_release(g->function);
            if (g->file)
                zend_string_release(g->file);
        }
    }
    if (groups)
        efree(groups);
}

/* array memprof_estimate(): the whole live heap, ['bytes', 'bytes_low', 'bytes_high',
 * 'count', 'samples', 'sampling_rate']. */
static PHP_FUNCTION(memprof_estimate)
{
    ZEND_PARSE_PARAMETERS_NONE();
    memprof_snapshot *snap = NULL;
    int rc = memprof_get_snapshot(&snap);
    if (rc < 0) {
        warn("cannot take a snapshot", rc);
        RETURN_EMPTY_ARRAY();
    }
    memprof_estimate e = {.size = sizeof e};
    rc = memprof_snapshot_estimate(snap, &e);
    memprof_free_snapshot(snap);
    if (rc < 0) {
        warn("cannot estimate", rc);
        RETURN_EMPTY_ARRAY();
    }
    array_init(return_value);
    add_assoc_long(return_value, "bytes", (zend_long)e.bytes);
    add_assoc_long(return_value, "bytes_low", (zend_long)e.bytes_low);
    add_assoc_long(return_value, "bytes_high", (zend_long)e.bytes_high);
    add_assoc_long(return_value, "count", (zend_long)e.count);
    add_assoc_long(return_value, "samples", (zend_long)e.live_samples);
    add_assoc_long(return_value, "sampling_rate", (zend_long)e.sampling_rate);
}

/* One function per line, as PHP's own tables are written. */
/* clang-format off */
const zend_function_entry mpphp_functions[] = {
    PHP_FE(memprof_enable, arginfo_bool_void)
    PHP_FE(memprof_disable, arginfo_bool_void)
    PHP_FE(memprof_enabled, arginfo_bool_void)
    PHP_FE(memprof_dump_pprof, arginfo_dump_pprof)
    PHP_FE(memprof_dump, arginfo_dump)
    PHP_FE(memprof_dump_file, arginfo_dump_file)
    PHP_FE(memprof_top_sites, arginfo_top_sites)
    PHP_FE(memprof_estimate, arginfo_estimate)
    PHP_FE_END
};
/* clang-format on */
