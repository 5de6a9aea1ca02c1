/* SPDX-License-Identifier: MIT */
/*
 * The `--ebpf` mode of `memprof run` and `memprof attach` (tools/ebpf/): the subcommands
 * hand over to these when the option is given, before parsing anything themselves. A build
 * without the Meson feature `ebpf` has them too (absent.c), saying in one line that this
 * memprof was built without it.
 */
#ifndef MEMPROF_TOOLS_EBPF_CLI_H
#define MEMPROF_TOOLS_EBPF_CLI_H

#include <stdbool.h>

/* Exit status when this process may not load BPF programs (no CAP_BPF/CAP_SYS_ADMIN, or
 * the kernel refuses), and when this memprof was built without the eBPF mode. */
#define CLI_EXIT_NO_BPF 3

/* Whether argv (a subcommand's arguments, argv[0] its name) asks for --ebpf among the
 * options, before "--" or the program's name. */
bool memprof_cli_ebpf_wanted(int argc, char **argv);

/* `memprof run --ebpf [OPTIONS] -- PROGRAM [ARGS...]`: the program's exit status, or a
 * CLI_EXIT_* status when it could not be run. */
int memprof_cli_ebpf_run(int argc, char **argv);

/* `memprof attach --ebpf [OPTIONS] PID`. */
int memprof_cli_ebpf_attach(int argc, char **argv);

#endif
