/* SPDX-License-Identifier: MIT */
/*
 * What `memprof run` prints after the program ended: the main program's summary (or why
 * there is none), the profiles the other processes of the run wrote, the summary of the
 * process with the largest heap when that is not the main program, and the exit status that
 * passes the program's own through. Each block is written to stderr in one write, so it does
 * not interleave with a child still printing.
 */
#define _GNU_SOURCE
#include "config.h"

#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>

#include "api/values.h"
#include "run.h"

#define LIST_CHILDREN 10

/* Names the profiles the other processes of this run (children) wrote, one line each with
 * its program and pid, in the order they started (pids). */
static void list_children(const struct run_files *r)
{
    unsigned found = 0;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (!mem)
        return;
    for (size_t i = 0; i < r->after.n; i++) {
        const struct pfile *f = &r->after.v[i];
        if (f->pid == (long)r->pid || memprof_cli_spool_existed(r->before, f))
            continue;
        if (found++ < LIST_CHILDREN)
            fprintf(mem, "  %s%s(pid %ld): %s\n", f->prog, f->prog[0] ? " " : "", f->pid, f->name);
    }
    if (found > LIST_CHILDREN)
        fprintf(mem, "  and %u more\n", found - LIST_CHILDREN);
    fclose(mem);
    if (found) {
        bool here = !strcmp(r->tp->dir, ".");
        memprof_cli_error("%u other process%s of this run wrote %s own profile%s%s%s:", found,
                          found == 1 ? "" : "es", found == 1 ? "its" : "their",
                          found == 1 ? "" : "s", here ? "" : " in ", here ? "" : r->tp->dir);
        fwrite(text, 1, len, stderr); /* one write, so it does not interleave */
    }
    free(text);
}

/* The summary of the main program's profile on stderr (memprof_cli_write_summary()). The
 * profile is read from r->read_from (a copy when r->profile is a stream or device); one
 * converted to another format was summarized when it was converted (r->converted). Returns
 * its peak, or UINT64_MAX when it was not read. */
static uint64_t print_summary(const struct run_options *o, const struct run_files *r)
{
    if (o->format != MEMPROF_FORMAT_PPROF) {
        memprof_cli_error("profile of %s (pid %d) written to %s", o->argv[0], (int)r->pid,
                          r->profile);
        if (r->converted && *r->converted)
            fputs(r->converted, stderr);
        else if (!memprof_cli_run_deferred(o))
            memprof_cli_error("no summary: the program wrote its %s profile itself (--interval, "
                              "--signal or MEMPROF_SYMBOLIZE); a pprof profile (-o "
                              "FILE.pb.gz) gives one",
                              memprof__format_name(o->format));
        return UINT64_MAX; /* not read: no child summary either */
    }
    struct memprof_profile *p = memprof_cli_read_profile(r->read_from);
    if (!p)
        return UINT64_MAX;
    uint64_t peak = p->peak_space > p->inuse_space ? p->peak_space : p->inuse_space;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem) {
        memprof_cli_write_summary(p, mem, MEMPROF_RUN_SUMMARY_TOP);
        fclose(mem);
    }
    memprof__profile_free(p);
    memprof_cli_error("profile of %s (pid %d) written to %s", o->argv[0], (int)r->pid, r->profile);
    if (text) /* one write, so it does not interleave with a child still printing */
        fwrite(text, 1, len, stderr);
    free(text);
    return peak;
}

/* When a child of the run had a larger heap than the main program (a compiler driver and its
 * cc1, make and its jobs, a shell script), the summary of the child with the largest peak:
 * its heading and its sites at the peak. At most MAX_CHILD_READS profiles are read. */
#define MAX_CHILD_READS 256
static void print_largest_child(const struct run_files *r, uint64_t main_peak)
{
    struct memprof_profile *best = NULL;
    char best_path[PATH_MAX + NAME_MAX + 2] = "";
    long best_pid = 0;
    const char *best_prog = "";
    uint64_t best_peak = main_peak;
    for (size_t i = 0, read = 0; i < r->after.n && read < MAX_CHILD_READS; i++) {
        const struct pfile *f = &r->after.v[i];
        if (f->pid == (long)r->pid || memprof_cli_spool_existed(r->before, f))
            continue;
        char path[PATH_MAX + NAME_MAX + 2];
        snprintf(path, sizeof path, "%s/%s", r->tp->dir, f->name);
        read++;
        struct memprof_profile *p = memprof_cli_read_profile(path);
        if (!p)
            continue;
        uint64_t peak = p->peak_space > p->inuse_space ? p->peak_space : p->inuse_space;
        if (peak > best_peak) {
            memprof__profile_free(best);
            best = p;
            best_peak = peak;
            best_pid = f->pid;
            best_prog = f->prog;
            snprintf(best_path, sizeof best_path, "%s", path);
        } else {
            memprof__profile_free(p);
        }
    }
    if (!best)
        return;
    char *text = NULL;
    size_t len = 0;
    FILE *mem = open_memstream(&text, &len);
    if (mem) {
        memprof__export_summary(best, mem);
        fputc('\n', mem);
        memprof__export_text_sites(best, mem, MEMPROF_VIEW_PEAK, MEMPROF_RUN_SUMMARY_TOP);
        fclose(mem);
    }
    memprof_cli_error("the largest heap of this run was in process %ld (%s%s%s):", best_pid,
                      best_prog, best_prog[0] ? ", " : "", best_path);
    if (text)
        fwrite(text, 1, len, stderr);
    free(text);
    memprof__profile_free(best);
}

/* The peak children are compared with when the main program wrote no profile: any child's
 * (a shell script whose shell ends with _exit(), as dash does: its children's heaps are
 * what the user is after). Only pprof profiles are read back. */
static uint64_t no_main_peak(const struct run_options *o)
{
    return o->format == MEMPROF_FORMAT_PPROF ? 0 : UINT64_MAX;
}

/* The other processes' profiles, and the largest of their heaps when the main program's
 * peak (UINT64_MAX: unknown) was smaller. */
static void print_children(const struct run_files *r, uint64_t main_peak)
{
    list_children(r);
    if (main_peak != UINT64_MAX)
        print_largest_child(r, main_peak);
}

/* The program was killed: what it left, and which profile is the last one. */
static int report_killed(const struct run_options *o, const struct run_files *r, int sig)
{
    char name[32];
    memprof_cli_signal_name(sig, name, sizeof name);
    uint64_t main_peak = no_main_peak(o);
    if (r->profile && !o->quiet)
        main_peak = print_summary(o, r);
    if (!o->quiet)
        print_children(r, main_peak);
    if (r->profile)
        memprof_cli_error("%s was killed by signal %d (%s); the last profile written is %s",
                          o->argv[0], sig, name, r->profile);
    else
        memprof_cli_error("%s was killed by signal %d (%s); no profile was written (use "
                          "--interval or --signal for profiles during the run)",
                          o->argv[0], sig, name);
    return 128 + sig;
}

/* The program exited with `code`: its summary, or why it wrote no profile. */
static void report_exited(const struct run_options *o, const struct run_files *r, int code)
{
    uint64_t main_peak = no_main_peak(o);
    if (r->profile)
        main_peak = print_summary(o, r);
    else if (code == CLI_EXIT_NOTFOUND)
        memprof_cli_error("no profile was written for %s (pid %d): it exited with status "
                          "127, so it (or the plugin) could probably not be loaded; see the "
                          "message above",
                          o->argv[0], (int)r->pid);
    else
        memprof_cli_error("no profile was written for %s (pid %d): the plugin writes it "
                          "at exit(), not after _exit(), and cannot load into statically "
                          "linked or set-uid programs",
                          o->argv[0], (int)r->pid);
    print_children(r, main_peak);
}

int memprof_cli_run_report(const struct run_options *o, const struct run_files *r, int status)
{
    if (WIFSIGNALED(status))
        return report_killed(o, r, WTERMSIG(status));
    int code = WIFEXITED(status) ? WEXITSTATUS(status) : CLI_EXIT_FAILURE;
    if (!o->quiet)
        report_exited(o, r, code);
    return code;
}
