/* SPDX-License-Identifier: MIT */
/*
 * The leak statistic of one call site as the engine's snapshot uses it (snapshot.c). Its
 * arithmetic is in the common layer (common/leakstat.h), so the command's eBPF mode, which
 * may not include the engine, computes the same statistic; this header keeps the engine's
 * name for it.
 */
#ifndef MEMPROF_CORE_LEAKS_H
#define MEMPROF_CORE_LEAKS_H

#include "common/leakstat.h"

#endif
