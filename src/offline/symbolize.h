/* SPDX-License-Identifier: MIT */
/*
 * A profile's unresolved native frames named after the fact (the `memprof` command's
 * `report --symbolize` and `run`): each frame the profiled process left as an address
 * (MEMPROF_SYMBOLIZE=0, or a module it could not read) becomes the frames offline
 * symbolization gives its address (offline/offline.h), inlined functions included, with
 * the module, build id and mapping kept, so every writer, pprof's too, shows the names.
 */
#ifndef MEMPROF_OFFLINE_SYMBOLIZE_H
#define MEMPROF_OFFLINE_SYMBOLIZE_H

#include "export/profile.h"
#include "offline/offline.h"

/* The symbolized copy of `in`: frames and stacks its own, everything else shared with `in`,
 * which must outlive it (free it with memprof__profile_symbolized_free()). Its health
 * counts the native addresses and those still without a function. *named is how many
 * addresses gained a name. Returns 0 or -ENOMEM. */
int memprof__profile_symbolize(const struct memprof_profile *in, struct memprof_offline *o,
                               struct memprof_profile **out, size_t *named);
void memprof__profile_symbolized_free(struct memprof_profile *p);

#endif
