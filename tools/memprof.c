/* SPDX-License-Identifier: MIT */
/*
 * The `memprof` command: dispatches to its subcommands (run, report, diff, help) and
 * answers --help and --version. Each subcommand parses its own options (run.c, report.c,
 * diff.c); usage texts are in help.c. Messages go to stderr as one line starting with
 * "memprof:"; usage errors exit 2.
 */
#include <stdio.h>
#include <string.h>

#include "cli.h"

static const struct {
    const char *name;
    int (*fn)(int argc, char **argv);
} commands[] = {
    {"run", memprof_cli_run},
    {"report", memprof_cli_report},
    {"diff", memprof_cli_diff},
    {"attach", memprof_cli_attach},
};

int main(int argc, char **argv)
{
    if (argc < 2) {
        fputs("usage: memprof run [OPTIONS] -- PROGRAM [ARGS...]\n"
              "       memprof report [--format F] [-o FILE] [--top N] PROFILE\n"
              "       memprof diff [--top N] BASE NEW\n"
              "       memprof attach [OPTIONS] PID | memprof attach --stop PID\n"
              "       memprof help [COMMAND] | --help | --version\n",
              stderr);
        return CLI_EXIT_USAGE;
    }
    const char *cmd = argv[1];
    if (!strcmp(cmd, "--help") || !strcmp(cmd, "-h")) {
        memprof_cli_help(NULL, stdout);
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
    }
    if (!strcmp(cmd, "--version") || !strcmp(cmd, "-V")) {
        printf("memprof (libmemprof) %s\n", MEMPROF_VERSION_STRING);
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
    }
    if (!strcmp(cmd, "help")) {
        if (argc > 3)
            return memprof_cli_usage_error("help", "expected at most one command name");
        if (!memprof_cli_help(argc == 3 ? argv[2] : NULL, stdout))
            return memprof_cli_usage_error(NULL, "no such command '%s'", argv[2]);
        return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
    }
    for (size_t i = 0; i < sizeof commands / sizeof *commands; i++)
        if (!strcmp(cmd, commands[i].name))
            return commands[i].fn(argc - 1, argv + 1);
    if (cmd[0] == '-')
        return memprof_cli_usage_error(NULL, "unknown option '%s'", cmd);
    return memprof_cli_usage_error(NULL, "no such command '%s'", cmd);
}
