/* SPDX-License-Identifier: MIT */
/*
 * An append-only pool of interned strings for the resolver: names, files and module paths
 * are copied once and live for the life of the process, so resolved frames can hand out
 * plain `const char *` that outlive dlclose() and every snapshot. Not thread-safe; the
 * resolver calls it under its lock.
 */
#ifndef MEMPROF_RESOLVE_STRPOOL_H
#define MEMPROF_RESOLVE_STRPOOL_H

/* Returns the pooled copy of s (NULL for NULL, or if memory runs out). */
const char *memprof__strpool_intern(const char *s);

/* Starts an empty set in a fork() child whose parent was interning when it forked (the set
 * may be half grown). The strings handed out so far stay valid: they are never freed. */
void memprof__strpool_forget(void);

#endif
