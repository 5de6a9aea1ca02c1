/* SPDX-License-Identifier: MIT */
/*
 * The public API's lifecycle, configuration and statistics functions: argument and
 * size-stamp validation in front of the engine (src/core/engine.c). memprof_strerror() is
 * in errors.c.
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <string.h>

#include "api/owner.h"
#include "common/atomic.h"
#include "core/capture.h"
#include "core/engine.h"
#include "resolve/symbols.h"
#include "memprof/memprof.h"

/* Reads the fields of a size-stamped input struct that the caller's `size` covers. */
#define FIELD_END(type, field) (offsetof(type, field) + sizeof(((type *)0)->field))

unsigned memprof_version(void)
{
    return MEMPROF_VERSION_HEX;
}

const char *memprof_version_string(void)
{
    return MEMPROF_VERSION_STRING;
}

MEMPROF_START_TEXT void memprof_config_init(memprof_config *cfg)
{
    if (!cfg)
        return;
    memset(cfg, 0, sizeof *cfg);
    cfg->size = sizeof *cfg;
    cfg->sampling_rate = MEMPROF_DEFAULT_RATE;
    cfg->heap_map_capacity = MEMPROF_DEFAULT_HEAP_MAP_CAPACITY;
    cfg->max_stacks = MEMPROF_DEFAULT_MAX_STACKS;
    cfg->max_frames = MEMPROF_DEFAULT_FRAMES;
}

/* True if every byte of [from, to) in p is zero (fields from a newer header we don't know). */
static bool tail_is_zero(const void *p, size_t from, size_t to)
{
    for (size_t i = from; i < to; i++)
        if (((const unsigned char *)p)[i])
            return false;
    return true;
}

/* Set once, before the engine leaves UNINITIALIZED for good: an owned profile stays owned. */
static _Atomic int owned MEMPROF_START_DATA;

MEMPROF_START_TEXT static int init_config(const memprof_config *cfg)
{
    memprof_config c;
    memprof_config_init(&c);
    if (cfg) {
        if (cfg->size < FIELD_END(memprof_config, sampling_rate))
            return -EINVAL;
        if (cfg->size > sizeof c && !tail_is_zero(cfg, sizeof c, cfg->size))
            return -EINVAL;
        memcpy(&c, cfg, cfg->size < sizeof c ? cfg->size : sizeof c);
    }
    if (c.sampling_rate == 0)
        c.sampling_rate = MEMPROF_DEFAULT_RATE;
    if (c.heap_map_capacity == 0)
        c.heap_map_capacity = MEMPROF_DEFAULT_HEAP_MAP_CAPACITY;
    if (c.max_stacks == 0)
        c.max_stacks = MEMPROF_DEFAULT_MAX_STACKS;
    if (c.max_frames == 0)
        c.max_frames = MEMPROF_DEFAULT_FRAMES;
    if (c.sampling_rate > MEMPROF_MAX_RATE || c.heap_map_capacity > ((uint64_t)1 << 34) ||
        c.max_stacks > MEMPROF_HM_MAX_STACK - 1 || c.max_stacks < 16 ||
        c.max_frames > MEMPROF_CAPTURE_MAX || c.flags != 0 || c.unwinder > MEMPROF_UNWIND_DWARF ||
        c.reserved0 != 0)
        return -EINVAL;
    if (c.unwinder == MEMPROF_UNWIND_DEFAULT)
        c.unwinder = memprof__capture_have_dwarf() ? MEMPROF_UNWIND_DWARF : MEMPROF_UNWIND_FP;
    else if (c.unwinder == MEMPROF_UNWIND_DWARF && !memprof__capture_have_dwarf())
        return -ENOTSUP;
    struct memprof_engine_config ec = {
        .rate = c.sampling_rate,
        .heap_map_capacity = c.heap_map_capacity,
        .max_stacks = c.max_stacks,
        .seed = c.seed,
        .max_frames = c.max_frames,
        .unwinder = c.unwinder,
        .log_fn = c.log_fn,
        .log_ctx = c.log_ctx,
    };
    return memprof__engine_init(&ec);
}

MEMPROF_START_TEXT int memprof__init_owned(const memprof_config *cfg)
{
    int rc = init_config(cfg);
    if (rc == 0)
        memprof_atomic_store_seqcst(&owned, 1);
    return rc;
}

int memprof__owned(void)
{
    return memprof_atomic_load_seqcst(&owned);
}

int memprof_init_config(const memprof_config *cfg)
{
    int rc = init_config(cfg);
    /* The command's profile: the program joins it with the command's settings. Invalid
     * arguments are still reported, so a program's bug shows under `memprof run` too. */
    if (rc == -EALREADY && memprof__owned())
        return MEMPROF_JOINED;
    return rc;
}

int memprof_init(uint64_t sampling_rate)
{
    memprof_config c;
    memprof_config_init(&c);
    c.sampling_rate = sampling_rate;
    return memprof_init_config(&c);
}

/* The run-time GOT backend is linked into libmemprof.so only (src/interpose/got.c); the
 * static library the unit tests use and the preload plugin (itself the backend) have none,
 * and start then reports -ENOTSUP. Hidden: never looked up in another object at load. */
extern int memprof__got_install(void) __attribute__((weak, visibility("hidden")));

MEMPROF_START_TEXT int memprof_start(void)
{
    int rc = memprof__engine_start();
    if (rc == -ENOTSUP && memprof__got_install && memprof__got_install() == 0)
        rc = memprof__engine_start();
    if (rc == -EBUSY && memprof__owned())
        return MEMPROF_JOINED;
    return rc;
}

int memprof__stop_owned(void)
{
    return memprof__engine_stop();
}

int memprof_stop(void)
{
    /* The command stops its own profile (memprof__stop_owned()); the program's stop must not
     * cut the command's profile short, nor its later start fail. */
    if (memprof__owned() && memprof__engine_state() == MEMPROF_STATE_ACTIVE)
        return MEMPROF_JOINED;
    return memprof__engine_stop();
}

void memprof_shutdown(void)
{
    if (!memprof__owned())
        memprof__engine_shutdown();
}

int memprof_get_stats(memprof_stats *out)
{
    if (!out || out->size < FIELD_END(memprof_stats, state))
        return -EINVAL;
    memprof_stats s;
    memset(&s, 0, sizeof s);
    memprof__engine_stats(&s);
    if (s.state != MEMPROF_STATE_UNINITIALIZED)
        memprof__sym_counts(&s.resolved_addresses, &s.unresolved_addresses);
    size_t n = out->size < sizeof s ? out->size : sizeof s;
    s.size = out->size;
    memcpy(out, &s, n);
    return 0;
}
