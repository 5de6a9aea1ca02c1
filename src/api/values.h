/* SPDX-License-Identifier: MIT */
/*
 * Parsers for the values users type -- sampling rates and signal names -- shared by the
 * preload plugin's environment (MEMPROF_RATE, MEMPROF_SIGNAL) and the memprof command's
 * options, so both accept exactly the same spellings.
 */
#ifndef MEMPROF_API_VALUES_H
#define MEMPROF_API_VALUES_H

#include <stdint.h>

#include "common/compiler.h"

/* A rate in bytes: digits with an optional K, M or G suffix (binary; "Ki", "KiB" also
 * accepted), from 1 to 2^40. Returns 0 if invalid. */
MEMPROF_INTERNAL uint64_t memprof__parse_rate(const char *v);
/* A catchable signal by name (with or without "SIG", any case) or number; signals that
 * cannot be caught or mean a crash (KILL, STOP, SEGV, BUS, FPE, ILL) are refused.
 * Returns 0 if invalid. */
MEMPROF_INTERNAL int memprof__parse_signal(const char *v);

#endif
