/* SPDX-License-Identifier: MIT */
/*
 * Whether a subcommand's arguments ask for the eBPF mode (ebpf_cli.h). Built with and
 * without the feature: `run` and `attach` ask before parsing their own options, so the
 * scan knows which of their options take a value and stops where the program's name or
 * "--" begins.
 */
#include <string.h>

#include "ebpf_cli.h"

/* Options of run and attach whose value is the next argument. */
static bool takes_value(const char *a)
{
    static const char *const with_value[] = {
        "-r", "--rate",           "-o", "--output",   "-f",        "--format",
        "-i", "--interval",       "-s", "--signal",   "-u",        "--unwind",
        "-T", "--temp-threshold", "-d", "--duration", "--wrapper",
    };
    for (size_t i = 0; i < sizeof with_value / sizeof *with_value; i++)
        if (strcmp(a, with_value[i]) == 0)
            return true;
    return false;
}

bool memprof_cli_ebpf_wanted(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (strcmp(a, "--") == 0 || a[0] != '-' || a[1] == 0)
            return false;
        if (strcmp(a, "--ebpf") == 0)
            return true;
        if (takes_value(a))
            i++;
    }
    return false;
}
