/* SPDX-License-Identifier: MIT */
/*
 * Building the writers' profile model from a snapshot (snapshot_profile.c).
 */
#ifndef MEMPROF_API_SNAPSHOT_PROFILE_H
#define MEMPROF_API_SNAPSHOT_PROFILE_H

#include "export/profile.h"

struct memprof_snapshot;

/* Builds the profile of a snapshot (resolving its stacks). Returns 0 or -ENOMEM. */
int memprof__profile_from_snapshot(const struct memprof_snapshot *s, struct memprof_profile **out);

#endif
