/* SPDX-License-Identifier: MIT */
/*
 * libunwind's readability probes without a file descriptor.
 *
 * When libunwind is unsure whether an address is readable (its unwinds validate the memory
 * they read), it writes one byte from that address into a pipe it opened at initialisation
 * and keeps for the life of the process. A program that lists its descriptors then sees two
 * it did not open (CPython's test_subprocess does), and one that closes them all and opens
 * files under the same numbers (ssh, daemons) gets libunwind's probe bytes written to and
 * read from its own files (libunwind issues #274 and #291). memprof__unwind_probes_install()
 * points libunwind's imports of pipe2, read, write, close and syscall at versions that know
 * one reserved descriptor number, never valid in the kernel: "opening the pipe" hands it
 * out, a "write" of one byte to it asks process_vm_readv() whether the byte is readable
 * (EFAULT instead of a fault, and no descriptor), a "read" from it finds nothing to drain,
 * closing it does nothing. Every other call passes through unchanged, and so do libunwind's
 * mincore, msync, sigprocmask and open, unless a seccomp filter the program installed
 * forbids them (sandbox.h): the probes then find the memory unreadable, the signal mask is
 * left as it is, no file is opened.
 */
#ifndef MEMPROF_CORE_UNWIND_PROBE_H
#define MEMPROF_CORE_UNWIND_PROBE_H

/* Rewrites the imports of the libunwind object containing `addr` (e.g. unw_backtrace).
 * Call it before libunwind's first use in the process; if libunwind already opened its pipe,
 * that pipe keeps working as before. Takes the loader's lock; not for allocation hooks. */
void memprof__unwind_probes_install(const void *addr);

#endif
