/* SPDX-License-Identifier: MIT */
/*
 * The eBPF mode's entry points in a build without it (Meson feature `ebpf` disabled, or
 * clang, bpftool or libbpf missing when it was configured): one line and a distinct status,
 * while every other mode of the command works as usual.
 */
#include "cli.h"
#include "ebpf_cli.h"

static int absent(const char *cmd)
{
    memprof_cli_error("%s --ebpf: this memprof was built without the eBPF mode (Meson feature "
                      "'ebpf', which needs clang, bpftool and libbpf)",
                      cmd);
    return CLI_EXIT_NO_BPF;
}

int memprof_cli_ebpf_run(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return absent("run");
}

int memprof_cli_ebpf_attach(int argc, char **argv)
{
    (void)argc;
    (void)argv;
    return absent("attach");
}
