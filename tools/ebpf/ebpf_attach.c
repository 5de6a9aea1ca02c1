/* SPDX-License-Identifier: MIT */
/*
 * `memprof attach --ebpf PID`: profiles a running process from outside, with uprobes on
 * its allocator entry points, until the duration ends, Ctrl-C, or the process exits;
 * nothing is loaded into it and it is never stopped. The probed files are those the
 * process has mapped now: each executable mapping of a file, found in this process's view
 * or through /proc/PID/root or /proc/PID/map_files (a process in another mount namespace
 * is probed in its own files); libraries it loads later are probed when the maps are read
 * again, every half second. Allocations made before the attach are unknown, and their
 * frees are ignored (the summary says so).
 */
#define _GNU_SOURCE
#include "config.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "api/values.h"
#include "cli.h"
#include "ebpf_cli.h"
#include "procmaps.h"
#include "trace.h"

#define POLL_MS       100
#define MAX_FILES     256
#define RESCAN_ROUNDS 5 /* the maps are read again every 500 ms */

static volatile sig_atomic_t stop_requested;

static void on_stop(int signo)
{
    (void)signo;
    stop_requested = 1;
}

static bool alive(pid_t pid)
{
    char p[64];
    snprintf(p, sizeof p, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(p, "re");
    if (!f)
        return false;
    char buf[512];
    bool ok = fgets(buf, sizeof buf, f) != NULL;
    fclose(f);
    const char *rp = ok ? strrchr(buf, ')') : NULL;
    return rp && rp[1] == ' ' && rp[2] != 'Z' && rp[2] != 'X';
}

static uint64_t now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec;
}

int memprof_cli_ebpf_attach(int argc, char **argv)
{
    enum { OPT_EBPF = 256, OPT_OTHER };
    static const struct option longopts[] = {
        {"ebpf", no_argument, NULL, OPT_EBPF},
        {"duration", required_argument, NULL, 'd'},
        {"rate", required_argument, NULL, 'r'},
        {"output", required_argument, NULL, 'o'},
        {"format", required_argument, NULL, 'f'},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {"interval", required_argument, NULL, OPT_OTHER},
        {"stop", no_argument, NULL, OPT_OTHER},
        {"no-wait", no_argument, NULL, OPT_OTHER},
        {NULL, 0, NULL, 0},
    };
    uint64_t rate = (uint64_t)MEMPROF_DEFAULT_RATE;
    unsigned long duration = 0;
    const char *output = NULL;
    memprof_format format = MEMPROF_FORMAT_AUTO;
    bool quiet = false;
    int c;
    opterr = 0;
    optind = 1;
    while ((c = getopt_long(argc, argv, ":d:r:o:f:qh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_EBPF:
            break;
        case 'd':
            if (!memprof_cli_parse_uint(optarg, 86400 * 365, &duration) || !duration)
                return memprof_cli_usage_error("attach", "-d: expected whole seconds, not '%s'",
                                               optarg);
            break;
        case 'r':
            if (!(rate = memprof_cli_parse_rate(optarg)))
                return memprof_cli_usage_error("attach",
                                               "-r: expected bytes between 1 and 2^40 with an "
                                               "optional K, M or G suffix, not '%s'",
                                               optarg);
            break;
        case 'o':
            output = optarg;
            break;
        case 'f':
            if (!(format = memprof__format_by_name(optarg)))
                return memprof_cli_usage_error("attach",
                                               "-f: expected pprof, speedscope, collapsed, text "
                                               "or html, not '%s'",
                                               optarg);
            break;
        case 'q':
            quiet = true;
            break;
        case 'h':
            memprof_cli_help("attach", stdout);
            return fflush(stdout) == 0 ? CLI_EXIT_OK : CLI_EXIT_FAILURE;
        case OPT_OTHER:
            return memprof_cli_usage_error("attach", "%s: not available with --ebpf",
                                           argv[optind - 1]);
        default:
            return memprof_cli_bad_option("attach", c, argv);
        }
    }
    if (optind != argc - 1)
        return memprof_cli_usage_error("attach", "expected one process id");
    unsigned long pidv;
    if (!memprof_cli_parse_uint(argv[optind], INT32_MAX, &pidv) || pidv == 0)
        return memprof_cli_usage_error("attach", "expected a process id, not '%s'", argv[optind]);
    pid_t pid = (pid_t)pidv;
    if (!alive(pid)) {
        memprof_cli_error("attach --ebpf: no running process %d", (int)pid);
        return CLI_EXIT_FAILURE;
    }
    char comm[64] = "process", p[64];
    snprintf(p, sizeof p, "/proc/%d/comm", (int)pid);
    FILE *cf = fopen(p, "re");
    if (cf) {
        if (fgets(comm, sizeof comm, cf))
            comm[strcspn(comm, "\n")] = 0;
        fclose(cf);
    }

    static char paths[MAX_FILES][PATH_MAX];
    unsigned n = memprof__ebpf_mapped_files(pid, paths, MAX_FILES);
    struct memprof_ebpf_file files[MAX_FILES];
    for (unsigned i = 0; i < n; i++)
        files[i] = (struct memprof_ebpf_file){paths[i], true};

    char out[PATH_MAX];
    if (!format)
        format = output ? memprof__format_by_path(output) : MEMPROF_FORMAT_PPROF;
    if (!format)
        format = MEMPROF_FORMAT_PPROF;
    if (!memprof__ebpf_output_path(output, comm, format, pid, out))
        return memprof_cli_usage_error("attach", "-o: path too long");

    struct memprof_ebpf_trace *t;
    int rc = memprof__ebpf_trace_start("attach", pid, rate, files, n, &t);
    if (rc)
        return rc;
    struct sigaction sa = {.sa_handler = on_stop};
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    sigaction(SIGHUP, &sa, NULL);
    if (!quiet)
        memprof_cli_error("attached to process %d (%s) with eBPF probes; %s", (int)pid, comm,
                          duration ? "profiling for the duration given" : "Ctrl-C ends");
    uint64_t end = duration ? now_s() + duration : 0;
    bool exited = false;
    for (unsigned round = 1; !stop_requested && (!end || now_s() < end); round++) {
        memprof__ebpf_trace_poll(t, POLL_MS); /* an error shows at the end */
        if (!alive(pid)) {
            exited = true;
            break;
        }
        if (round % RESCAN_ROUNDS == 0)
            memprof__ebpf_trace_rescan(t, quiet); /* libraries dlopen()ed since */
    }
    if (exited && !quiet)
        memprof_cli_error("process %d (%s) exited", (int)pid, comm);
    struct memprof_ebpf_output eo = {
        .path = out, .format = format, .program = comm, .quiet = quiet, .attached = true};
    rc = memprof__ebpf_trace_finish(t, &eo);
    memprof__ebpf_trace_free(t);
    return rc;
}
