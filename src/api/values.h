/* SPDX-License-Identifier: MIT */
/*
 * The values users type -- sampling rates, signal names, profile path templates -- parsed
 * once for the environment (the preload plugin's MEMPROF_RATE, MEMPROF_SIGNAL,
 * MEMPROF_OUTPUT; MEMPROF_SAMPLE_HEAP, which the GOT start reads too) and the memprof
 * command's options, so both accept and expand exactly the same spellings.
 */
#ifndef MEMPROF_API_VALUES_H
#define MEMPROF_API_VALUES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/compiler.h"
#include "memprof/memprof.h"

/* A rate in bytes: digits with an optional K, M or G suffix (binary; "Ki", "KiB" also
 * accepted), from 1 to 2^40. Returns 0 if invalid. */
MEMPROF_INTERNAL uint64_t memprof__parse_rate(const char *v);
/* A duration in nanoseconds: a decimal number (fractions allowed) with a unit ns, us, ms or
 * s (none: seconds), e.g. "1ms", "250us", "0.5s". From 1 ns to one day. Returns 0 if
 * invalid. */
MEMPROF_INTERNAL uint64_t memprof__parse_duration(const char *v);
/* A switch: 1, yes, true or on gives 1; 0, no, false or off gives 0 (words in any case);
 * anything else -1. */
MEMPROF_INTERNAL int memprof__parse_bool(const char *v);
/* A catchable signal by name (with or without "SIG", any case) or number; signals that
 * cannot be caught or mean a crash (KILL, STOP, SEGV, BUS, FPE, ILL) are refused.
 * Returns 0 if invalid. */
MEMPROF_INTERNAL int memprof__parse_signal(const char *v);

/* The output formats' names and file extensions (doc/architecture.md, Decisions: Format
 * names), for the API, the plugin's MEMPROF_FORMAT, memprof_attach_start()'s configuration
 * and the command. The format named `name`, or MEMPROF_FORMAT_AUTO for no format's name. */
MEMPROF_INTERNAL memprof_format memprof__format_by_name(const char *name);
/* A format's name ("auto" for MEMPROF_FORMAT_AUTO or an unknown value). */
MEMPROF_INTERNAL const char *memprof__format_name(memprof_format f);
/* The extension files of a format are written with (".pb.gz", ".json", ".folded", ".txt",
 * ".html"); "" for MEMPROF_FORMAT_AUTO or an unknown value. */
MEMPROF_INTERNAL const char *memprof__format_extension(memprof_format f);
/* The format a path's extension names (any of a format's extensions: also ".pprof",
 * ".collapsed", ".htm"), or MEMPROF_FORMAT_AUTO when it names none. */
MEMPROF_INTERNAL memprof_format memprof__format_by_path(const char *path);

/* Expands a profile path template: "%p" becomes `pid`, "%%" a single "%". Sets *had_pid
 * (if not NULL) when the template contains "%p". Returns false if the result does not fit
 * in `size` bytes. */
MEMPROF_INTERNAL bool memprof__expand_path(const char *tmpl, pid_t pid, char *out, size_t size,
                                           bool *had_pid);

/* The name "%e" stands for in a profile path template: the base name of the file this
 * process executed (AT_EXECFN: "cc1" for gcc's compiler, the script for a script), or of
 * argv[0] when that file was a descriptor (/proc/self/exe, fexecve). Not sanitized. */
MEMPROF_INTERNAL const char *memprof__program_name(void);
/* Replaces every "%e" of a path template by `name` made safe for a file name (letters,
 * digits and . _ + - kept, anything else '_', at most 64 characters, "program" when empty),
 * leaving "%p" and "%%" for memprof__expand_path(). Returns false if the result does not
 * fit in `size` bytes. */
MEMPROF_INTERNAL bool memprof__expand_program(const char *tmpl, const char *name, char *out,
                                              size_t size);
/* Whether c may appear in the name memprof__expand_program() puts for "%e". */
MEMPROF_INTERNAL bool memprof__program_name_char(char c);

#endif
