/* SPDX-License-Identifier: MIT */
/*
 * `memprof run` and interpreters (runtimes.c): which interpreter a program is, and the
 * environment that makes that interpreter load its libmemprof binding at start-up, so its
 * frames and its own allocator are profiled with no change to the user's code.
 */
#ifndef MEMPROF_TOOLS_RUNTIMES_H
#define MEMPROF_TOOLS_RUNTIMES_H

#include <stdbool.h>
#include <stddef.h>

/* The interpreters memprof run knows. */
enum memprof_cli_runtime {
    MEMPROF_CLI_RUNTIME_NONE,
    MEMPROF_CLI_RUNTIME_PYTHON,
    MEMPROF_CLI_RUNTIME_RUBY,
    MEMPROF_CLI_RUNTIME_PHP,
};

/* The interpreter `argv` runs: the program itself (python3, /usr/bin/python3.11, ruby,
 * php8.2, or a link to one), `env [OPTIONS] [NAME=VALUE...] INTERPRETER ...`, or a script
 * whose "#!" line names one of those. `name` (of `size` bytes) receives the interpreter's
 * name as found ("python3.12"), for messages. Reads the script's first line, nothing else. */
enum memprof_cli_runtime memprof_cli_runtime_of(char *const *argv, char *name, size_t size);

/* In the forked child, before the exec: sets the environment variables that load the
 * binding of `rt` into the interpreter (PYTHONPATH, RUBYOPT, PHP_INI_SCAN_DIR and
 * MEMPROF_PHP), or prints one line saying that no binding was found and what the profile
 * misses without it (unless `quiet`). Returns false only if the environment cannot be set
 * (no memory). */
bool memprof_cli_runtime_setup(enum memprof_cli_runtime rt, const char *name, bool quiet);

/* The bootstrap file `file` of runtime directory `sub` ("python"): installed relative to this
 * executable, in the build tree (`build_sub`, only if this is one), or at the configured
 * absolute path. Its canonical path goes to `out` (PATH_MAX). For `memprof run` and for
 * `memprof attach`, which runs the Python bootstrap's join in the target. */
bool memprof_cli_find_bootstrap(const char *sub, const char *build_sub, const char *file,
                                char *out);

#endif
