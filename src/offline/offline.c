/* SPDX-License-Identifier: MIT */
/*
 * Offline symbolization (offline.h): one libdwfl session per module of the profile, the
 * module reported from the file found for its build id at load bias 0, so that a file
 * address (return address - load bias) is a Dwfl address; the frames then come from
 * symbols.c's DWARF and symbol-table code, exactly as in the process. Files are looked up
 * once per module; a module not found is remembered, and said once by the command.
 */
#define _GNU_SOURCE
#include "offline/offline.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "resolve/demangle.h"
#include "resolve/strpool.h"

#if HAVE_LIBDW
#include <elfutils/libdwfl.h>

#include "resolve/debugcache.h"
#include "resolve/debugfind.h"
#if HAVE_DEBUGINFOD
#include <dlfcn.h>
#include <elfutils/debuginfod.h>

/* libdebuginfod, opened when a client is first wanted: linked, it brought libcurl, GnuTLS,
 * Kerberos and LDAP with it, ~30 libraries and ~10 ms of loading into every run of the
 * command, which asks a server only when DEBUGINFOD_URLS names one. */
static struct {
    debuginfod_client *(*begin)(void);
    void (*end)(debuginfod_client *);
    int (*find_debuginfo)(debuginfod_client *, const unsigned char *, int, char **);
    int (*find_executable)(debuginfod_client *, const unsigned char *, int, char **);
} dfd;

static bool load_debuginfod(void)
{
    static int loaded; /* 0 not tried, 1 loaded, -1 not available */
    if (!loaded) {
        void *h = dlopen("libdebuginfod.so.1", RTLD_NOW | RTLD_LOCAL);
        if (h) {
            *(void **)&dfd.begin = dlsym(h, "debuginfod_begin");
            *(void **)&dfd.end = dlsym(h, "debuginfod_end");
            *(void **)&dfd.find_debuginfo = dlsym(h, "debuginfod_find_debuginfo");
            *(void **)&dfd.find_executable = dlsym(h, "debuginfod_find_executable");
        }
        loaded = dfd.begin && dfd.end && dfd.find_debuginfo && dfd.find_executable ? 1 : -1;
    }
    return loaded > 0;
}
#endif

struct module {
    const char *path, *build_id; /* as recorded (interned) */
    const char *key;             /* interned "path\nbuild id": the symbol-table cache's key */
    Dwfl *dwfl;
    Dwfl_Module *mod; /* NULL when no file was found */
    struct module *next;
};

struct memprof_offline {
    struct memprof_offline_config c;
    struct module *modules;
#if HAVE_DEBUGINFOD
    debuginfod_client *client;
    bool client_tried;
#endif
};

bool memprof__offline_supported(void)
{
    return true;
}

bool memprof__offline_has_debuginfod(void)
{
    return HAVE_DEBUGINFOD;
}

struct memprof_offline *memprof__offline_new(const struct memprof_offline_config *c)
{
    struct memprof_offline *o = calloc(1, sizeof *o);
    if (o)
        o->c = *c;
    return o;
}

void memprof__offline_free(struct memprof_offline *o)
{
    if (!o)
        return;
    for (struct module *m = o->modules, *next; m; m = next) {
        next = m->next;
        if (m->mod)
            memprof__sym_module_gone(m->mod);
        if (m->dwfl)
            dwfl_end(m->dwfl);
        free(m);
    }
#if HAVE_DEBUGINFOD
    if (o->client)
        dfd.end(o->client);
#endif
    free(o);
}

/* The bytes of a hex build id; its length, 0 when malformed. */
static size_t unhex(const char *hex, unsigned char *out, size_t max)
{
    size_t n = 0;
    for (; hex && hex[0] && hex[1] && n < max; hex += 2) {
        unsigned v;
        if (sscanf(hex, "%2x", &v) != 1)
            return 0;
        out[n++] = (unsigned char)v;
    }
    return hex && *hex ? 0 : n;
}

#if HAVE_DEBUGINFOD
/* The debuginfod client, made once when enabled and DEBUGINFOD_URLS names a server (and
 * libdebuginfod can be loaded). */
static debuginfod_client *client(struct memprof_offline *o)
{
    if (!o->client_tried) {
        o->client_tried = true;
        const char *urls = getenv("DEBUGINFOD_URLS");
        if (o->c.debuginfod && urls && *urls && load_debuginfod())
            o->client = dfd.begin();
    }
    return o->client;
}
#endif

/* find_debuginfo for a module reported offline: the local search with the configured
 * directories, then debuginfod; a file with compressed DWARF is read from (and if need be
 * first written to) the cache of decompressed copies. */
static int find_debuginfo(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                          const char *file_name, const char *debuglink, GElf_Word crc,
                          char **debuginfo_file_name)
{
    (void)modname, (void)base, (void)crc;
    struct memprof_offline *o = *userdata;
    int fd = memprof__debug_find(mod, file_name, debuglink, o->c.debug_dirs, o->c.ndebug_dirs,
                                 debuginfo_file_name);
#if HAVE_DEBUGINFOD
    const unsigned char *bits = NULL;
    GElf_Addr vaddr;
    int len = dwfl_module_build_id(mod, &bits, &vaddr);
    if (fd < 0 && len > 0 && !(debuglink && strchr(debuglink, '/')) && client(o)) {
        char *path = NULL;
        fd = dfd.find_debuginfo(client(o), bits, len, &path);
        if (fd >= 0)
            *debuginfo_file_name = path;
        else
            free(path);
    }
#endif
    return fd < 0 ? -1 : memprof__debug_cache(fd, debuginfo_file_name, true);
}

static int no_find_elf(Dwfl_Module *mod, void **userdata, const char *modname, Dwarf_Addr base,
                       char **file_name, Elf **elfp)
{
    (void)mod, (void)userdata, (void)modname, (void)base, (void)file_name, (void)elfp;
    return -1; /* modules are reported with their file (dwfl_report_elf) */
}

static const Dwfl_Callbacks callbacks = {
    .find_elf = no_find_elf,
    .find_debuginfo = find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

/* A readable file at `path` with the wanted build id (any when none was recorded). */
static bool usable(const char *path, const unsigned char *bits, size_t len)
{
    int fd = path && *path ? open(path, O_RDONLY | O_CLOEXEC) : -1;
    if (fd < 0)
        return false;
    bool ok = !len || memprof__debug_build_id_matches(fd, bits, len);
    close(fd);
    return ok;
}

/* The file to report for a module: see offline.h. Returns a malloc'ed path or NULL. */
static char *find_elf(struct memprof_offline *o, const char *path, const unsigned char *bits,
                      size_t len)
{
    if (usable(path, bits, len))
        return strdup(path);
    if (!len)
        return NULL; /* nothing else could tell the right build from another */
    char hex[2 * 64 + 1], buf[4096];
    for (size_t i = 0; i < len; i++)
        snprintf(hex + 2 * i, 3, "%02x", bits[i]);
    static const char *const suffixes[] = {"", ".debug"};
    for (size_t s = 0; s < 2; s++) {
        for (size_t i = 0; i <= o->c.ndebug_dirs; i++) {
            const char *dir = i < o->c.ndebug_dirs ? o->c.debug_dirs[i] : "/usr/lib/debug";
            snprintf(buf, sizeof buf, "%s/.build-id/%.2s/%s%s", dir, hex, hex + 2, suffixes[s]);
            if (usable(buf, bits, len))
                return strdup(buf);
        }
#if HAVE_DEBUGINFOD
        if (client(o)) {
            char *got = NULL;
            int fd = s == 0 ? dfd.find_executable(client(o), bits, (int)len, &got)
                            : dfd.find_debuginfo(client(o), bits, (int)len, &got);
            if (fd >= 0) {
                close(fd);
                return got;
            }
            free(got);
        }
#endif
    }
    return NULL;
}

static struct module *module_of(struct memprof_offline *o, const char *path, const char *build_id)
{
    path = memprof__strpool_intern(path);
    build_id = memprof__strpool_intern(build_id);
    for (struct module *m = o->modules; m; m = m->next)
        if (m->path == path && m->build_id == build_id)
            return m;
    struct module *m = calloc(1, sizeof *m);
    if (!m)
        return NULL;
    m->path = path;
    m->build_id = build_id;
    char key[8192];
    snprintf(key, sizeof key, "%s\n%s", path ? path : "", build_id ? build_id : "");
    m->key = memprof__strpool_intern(key);
    unsigned char bits[64];
    size_t len = unhex(build_id, bits, sizeof bits);
    char *file = find_elf(o, path, bits, len);
    if (file && (m->dwfl = dwfl_begin(&callbacks)) != NULL) {
        dwfl_report_begin(m->dwfl);
        /* Base 0 added to p_vaddr: Dwfl addresses are the file's own. */
        Dwfl_Module *mod = dwfl_report_elf(m->dwfl, path ? path : file, file, -1, 0, true);
        dwfl_report_end(m->dwfl, NULL, NULL);
        void **userdata = NULL;
        if (mod && dwfl_module_info(mod, &userdata, NULL, NULL, NULL, NULL, NULL, NULL) &&
            userdata) {
            *userdata = o;
            m->mod = mod;
        }
    }
    free(file);
    m->next = NULL;
    /* Appended: the missing list keeps the order modules were first asked for. */
    struct module **tail = &o->modules;
    while (*tail)
        tail = &(*tail)->next;
    *tail = m;
    return m;
}

unsigned memprof__offline_frames(struct memprof_offline *o, const char *path, const char *build_id,
                                 uint64_t load_bias, uint64_t pc, struct memprof_sym_frame *out,
                                 unsigned max, uint64_t *sym_offset)
{
    *sym_offset = 0;
    struct module *m = pc > load_bias ? module_of(o, path, build_id) : NULL;
    if (!m || !m->mod)
        return 0;
    uintptr_t off = 0;
    /* pc - 1: inside the call instruction, as symbols.c looks it up. */
    unsigned n =
        memprof__sym_module_frames(m->mod, m->key, (uintptr_t)(pc - load_bias - 1), out, max, &off);
    *sym_offset = off;
    return n;
}

const char *memprof__offline_missing(const struct memprof_offline *o, size_t i,
                                     const char **build_id)
{
    for (const struct module *m = o->modules; m; m = m->next)
        if (!m->mod && i-- == 0) {
            *build_id = m->build_id;
            return m->path;
        }
    return NULL;
}

#else /* !HAVE_LIBDW: the command cannot read DWARF; report --symbolize says so */

struct memprof_offline {
    int unused;
};

bool memprof__offline_supported(void)
{
    return false;
}

bool memprof__offline_has_debuginfod(void)
{
    return false;
}

struct memprof_offline *memprof__offline_new(const struct memprof_offline_config *c)
{
    (void)c;
    return calloc(1, sizeof(struct memprof_offline));
}

void memprof__offline_free(struct memprof_offline *o)
{
    free(o);
}

unsigned memprof__offline_frames(struct memprof_offline *o, const char *path, const char *build_id,
                                 uint64_t load_bias, uint64_t pc, struct memprof_sym_frame *out,
                                 unsigned max, uint64_t *sym_offset)
{
    (void)o, (void)path, (void)build_id, (void)load_bias, (void)pc, (void)out, (void)max;
    *sym_offset = 0;
    return 0;
}

const char *memprof__offline_missing(const struct memprof_offline *o, size_t i,
                                     const char **build_id)
{
    (void)o, (void)i;
    *build_id = NULL;
    return NULL;
}
#endif

char *memprof__offline_demangle(const char *name)
{
    return memprof__demangle(name);
}
