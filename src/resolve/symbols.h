/* SPDX-License-Identifier: MIT */
/*
 * Native symbolization: a return address -> function, module, offset (and, where known,
 * source file and line). Runs only on user threads at snapshot/export time, never in a
 * hook, with results cached per address for the life of the process.
 */
#ifndef MEMPROF_RESOLVE_SYMBOLS_H
#define MEMPROF_RESOLVE_SYMBOLS_H

#include <stdint.h>

struct memprof_frame_info {
    const char *function; /* symbol name, or NULL when unknown */
    const char *module;   /* path of the loaded object, or NULL */
    const char *file;     /* source file, or NULL */
    uint32_t line;        /* source line, 0 when unknown */
    uintptr_t pc;         /* the address that was resolved */
    uintptr_t sym_offset; /* pc - start of the function (valid when function != NULL) */
    uintptr_t module_offset; /* pc - load address of the module */
};

/* Resolves a return address (the call site pc - 1 is what gets looked up). The returned
 * strings stay valid for the life of the process. Thread-safe. Returns 1 if this call
 * resolved the address for the first time, 0 if it came from the cache. */
int memprof__sym_lookup(uintptr_t pc, struct memprof_frame_info *out);

/* Writes a display label for a frame into buf: "function" if known, else
 * "module+0xoffset", else "0xaddress". Returns buf. */
const char *memprof__sym_label(const struct memprof_frame_info *fi, char *buf, unsigned size);

#endif
