/*
 * opencsd_etmv3.c - reference timing of the OpenCSD (C++) ETMv3 decoder, output muted.
 *
 * Decodes the ETMv3 trace sources of a CoreSight snapshot directory to generic trace
 * elements through OpenCSD's C API, with an element callback that only counts (no text
 * formatting), so that the library's decode speed can be compared with cputrace's
 * Python ETMv3 decoder on the same machine.  See README.md in this directory.
 *
 * Build (from the repository root; needs the Debian packages libopencsd1 + libopencsd-dev):
 *
 *   mkdir -p benchmarks/out && \
 *   gcc -O2 -Wall -o benchmarks/out/opencsd_etmv3 benchmarks/reference/opencsd_etmv3.c \
 *       -lopencsd_c_api -lopencsd
 *
 * Run:
 *
 *   benchmarks/out/opencsd_etmv3 SNAPSHOT_DIR [runs] [--with-ptm] [--with-etmv4]
 *
 * The snapshot is read the way OpenCSD's snapshot format describes it: snapshot.ini
 * [device_list] names the device files; every trace_source device whose type starts with
 * "ETM3" (or "PTM" with --with-ptm) gets a decoder configured from its ETMCR, ETMIDR,
 * ETMCCER and ETMTRACEIDR registers, and with --with-etmv4 every "ETM4" one from its
 * TRCCONFIGR, TRCIDR0/1/2/8 and TRCTRACEIDR; trace.ini names the trace buffer file and the
 * core of each source ([core_trace_sources]); the cores' [dump*] sections give the memory
 * images.
 * The buffer is taken as CoreSight formatted frames, 16-byte memory aligned (ETB).
 *
 * Timing: trace buffer and memory images are read into memory before timing.  Each run
 * creates a fresh decode tree (decoders, memory accessors, callback), decodes the whole
 * buffer, sends end-of-trace, and stops the clock (CLOCK_MONOTONIC); tree destruction is
 * outside the timed region.
 *
 * Links the OpenCSD library (BSD-3-Clause, Copyright ARM Limited and contributors) as
 * installed by Debian; no OpenCSD source is included here.
 */
#define _POSIX_C_SOURCE 200809L
#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <opencsd/c_api/opencsd_c_api.h>

#define MAX_SOURCES 16
#define MAX_DUMPS 16
#define MAX_LINE 512
#define MAX_KEYS 64 /* keys read from one ini section */
#define N_ELEM_TYPES 32

/* ------------------------------------------------------------------------------------ */
/* minimal INI reader for the snapshot dialect: [section], key=value, ';'/'#' comments   */

/* copy SRC into DST (size SZ), truncating */
static void copy_str(char *dst, size_t sz, const char *src)
{
    size_t n = strlen(src);
    if (n >= sz)
        n = sz - 1;
    memcpy(dst, src, n);
    dst[n] = '\0';
}

static void trim(char *s)
{
    char *p = s;
    size_t n;
    while (*p && isspace((unsigned char)*p))
        p++;
    if (p != s)
        memmove(s, p, strlen(p) + 1);
    n = strlen(s);
    while (n && isspace((unsigned char)s[n - 1]))
        s[--n] = '\0';
}

/* All "key=value" pairs of [SECTION], in file order; returns the count (at most MAXN). */
static int ini_section(const char *dir, const char *file, const char *section,
                       char keys[][128], char vals[][256], int maxn)
{
    char path[1024], line[MAX_LINE], cur[128] = "";
    FILE *f;
    int n = 0;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    f = fopen(path, "r");
    if (!f)
        return 0;
    while (n < maxn && fgets(line, sizeof line, f)) {
        char *eq;
        trim(line);
        if (!line[0] || line[0] == ';' || line[0] == '#')
            continue;
        if (line[0] == '[') {
            char *e = strchr(line, ']');
            if (e)
                *e = '\0';
            copy_str(cur, sizeof cur, line + 1);
            trim(cur);
            continue;
        }
        if (strcmp(cur, section) != 0 || !(eq = strchr(line, '=')))
            continue;
        *eq = '\0';
        copy_str(keys[n], 128, line);
        trim(keys[n]);
        copy_str(vals[n], 256, eq + 1);
        trim(vals[n]);
        n++;
    }
    fclose(f);
    return n;
}

/* Value of KEY in [SECTION] of DIR/FILE into OUT (size OUTSZ).  A key in the file matches
 * if it equals KEY, or if it is KEY followed by '(' (register keys: "ETMCR(0x000)").
 * Returns 1 if found. */
static int ini_get(const char *dir, const char *file, const char *section, const char *key,
                   char *out, size_t outsz)
{
    static char keys[MAX_KEYS][128], vals[MAX_KEYS][256];
    size_t klen = strlen(key);
    int n = ini_section(dir, file, section, keys, vals, MAX_KEYS), i;

    for (i = 0; i < n; i++) {
        if (strncmp(keys[i], key, klen) == 0 && (keys[i][klen] == '\0' || keys[i][klen] == '(')) {
            copy_str(out, outsz, vals[i]);
            return 1;
        }
    }
    return 0;
}

static int ini_get_u64(const char *dir, const char *file, const char *section, const char *key,
                       uint64_t *out)
{
    char v[256];
    if (!ini_get(dir, file, section, key, v, sizeof v))
        return 0;
    *out = strtoull(v, NULL, 0);
    return 1;
}

static uint8_t *read_file(const char *dir, const char *file, size_t *len)
{
    char path[1024];
    FILE *f;
    long n;
    uint8_t *buf;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    f = fopen(path, "rb");
    if (!f) {
        fprintf(stderr, "cannot open %s\n", path);
        exit(1);
    }
    fseek(f, 0, SEEK_END);
    n = ftell(f);
    fseek(f, 0, SEEK_SET);
    buf = malloc(n > 0 ? (size_t)n : 1);
    if (!buf || fread(buf, 1, (size_t)n, f) != (size_t)n) {
        fprintf(stderr, "cannot read %s\n", path);
        exit(1);
    }
    fclose(f);
    *len = (size_t)n;
    return buf;
}

/* ------------------------------------------------------------------------------------ */
/* snapshot description                                                                  */

typedef struct {
    char name[64];     /* ETM_0 ... */
    char core[64];     /* cpu_0 ... */
    int is_ptm, is_etmv4;
    uint32_t idr, ctrl, ccer, trcid;
    uint32_t configr, idr0, idr1, idr2, idr8; /* ETMv4 */
    ocsd_core_profile_t prof;
} source_t;

typedef struct {
    char file[256];
    uint64_t addr;
    uint8_t *data;
    size_t len;
} dump_t;

typedef struct {
    source_t src[MAX_SOURCES];
    int nsrc;
    dump_t dump[MAX_DUMPS];
    int ndump;
    uint8_t *trace;
    size_t trace_len;
} snapshot_t;

/* find the ini file of the device named NAME (snapshot.ini [device_list]) */
static int device_file(const char *dir, const char *name, char *file, size_t sz)
{
    static char keys[64][128], vals[64][256];
    int n = ini_section(dir, "snapshot.ini", "device_list", keys, vals, 64), i;
    char v[256];
    for (i = 0; i < n; i++)
        if (ini_get(dir, vals[i], "device", "name", v, sizeof v) && strcmp(v, name) == 0) {
            copy_str(file, sz, vals[i]);
            return 1;
        }
    return 0;
}

/* The names of the sections of DIR/FILE that start with PREFIX, in file order (at most MAXN). */
static int ini_sections(const char *dir, const char *file, const char *prefix, char names[][128], int maxn)
{
    char path[1024], line[MAX_LINE];
    FILE *f;
    int n = 0;

    snprintf(path, sizeof path, "%s/%s", dir, file);
    f = fopen(path, "r");
    if (!f)
        return 0;
    while (n < maxn && fgets(line, sizeof line, f)) {
        char *e;
        trim(line);
        if (line[0] != '[' || !(e = strchr(line, ']')))
            continue;
        *e = '\0';
        if (strncmp(line + 1, prefix, strlen(prefix)) == 0)
            copy_str(names[n++], 128, line + 1);
    }
    fclose(f);
    return n;
}

static int etmv4_regs(const char *dir, const char *f, source_t *s)
{
    uint64_t v[6];
    const char *names[6] = {"TRCCONFIGR", "TRCIDR0", "TRCIDR1", "TRCIDR2", "TRCIDR8", "TRCTRACEIDR"};
    for (int r = 0; r < 6; r++)
        if (!ini_get_u64(dir, f, "regs", names[r], &v[r]))
            return 0;
    s->configr = (uint32_t)v[0], s->idr0 = (uint32_t)v[1], s->idr1 = (uint32_t)v[2];
    s->idr2 = (uint32_t)v[3], s->idr8 = (uint32_t)v[4], s->trcid = (uint32_t)v[5];
    return 1;
}

static void load_snapshot(const char *dir, int with_ptm, int with_etmv4, snapshot_t *ss)
{
    static char keys[64][128], vals[64][256];
    static char ckeys[64][128], cvals[64][256];
    char meta[256] = "trace.ini", bufs[256], bufname[128], trfile[256];
    int n, nc, i, j, k;

    memset(ss, 0, sizeof *ss);
    ini_get(dir, "snapshot.ini", "trace", "metadata", meta, sizeof meta);

    /* trace buffer: first one listed in [trace_buffers] buffers= */
    if (!ini_get(dir, meta, "trace_buffers", "buffers", bufs, sizeof bufs)) {
        fprintf(stderr, "%s/%s: no [trace_buffers] buffers=\n", dir, meta);
        exit(1);
    }
    snprintf(bufname, sizeof bufname, "%.*s", (int)strcspn(bufs, ", "), bufs);
    if (!ini_get(dir, meta, bufname, "file", trfile, sizeof trfile)) {
        fprintf(stderr, "%s/%s: no file= in [%s]\n", dir, meta, bufname);
        exit(1);
    }
    ss->trace = read_file(dir, trfile, &ss->trace_len);

    /* sources: trace_source devices of type ETM3* (and PTM* if asked) */
    n = ini_section(dir, "snapshot.ini", "device_list", keys, vals, 64);
    nc = ini_section(dir, meta, "core_trace_sources", ckeys, cvals, 64);
    for (i = 0; i < n && ss->nsrc < MAX_SOURCES; i++) {
        char cls[64], type[64], name[64], ctype[64] = "", cfile[256];
        uint64_t v;
        source_t *s = &ss->src[ss->nsrc];
        const char *f = vals[i];
        if (!ini_get(dir, f, "device", "class", cls, sizeof cls) || strcmp(cls, "trace_source"))
            continue;
        if (!ini_get(dir, f, "device", "type", type, sizeof type) ||
            !ini_get(dir, f, "device", "name", name, sizeof name))
            continue;
        if (strncmp(type, "ETM3", 4) == 0)
            s->is_ptm = 0;
        else if (with_ptm && strncmp(type, "PTM", 3) == 0)
            s->is_ptm = 1;
        else if (with_etmv4 && strncmp(type, "ETM4", 4) == 0)
            s->is_etmv4 = 1;
        else
            continue;
        copy_str(s->name, sizeof s->name, name);
        if (s->is_etmv4) {
            if (!etmv4_regs(dir, f, s))
                goto bad;
        } else if (!ini_get_u64(dir, f, "regs", "ETMCR", &v))
            goto bad;
        if (!s->is_etmv4) {
            s->ctrl = (uint32_t)v;
            if (!ini_get_u64(dir, f, "regs", "ETMIDR", &v))
                goto bad;
            s->idr = (uint32_t)v;
            if (!ini_get_u64(dir, f, "regs", "ETMCCER", &v))
                goto bad;
            s->ccer = (uint32_t)v;
            if (!ini_get_u64(dir, f, "regs", "ETMTRACEIDR", &v))
                goto bad;
            s->trcid = (uint32_t)v;
        }

        /* the core traced by this source, its profile and memory dump */
        s->core[0] = '\0';
        for (j = 0; j < nc; j++)
            if (strcmp(cvals[j], name) == 0)
                copy_str(s->core, sizeof s->core, ckeys[j]);
        s->prof = profile_CortexA;
        if (s->core[0] && device_file(dir, s->core, cfile, sizeof cfile)) {
            dump_t d;
            ini_get(dir, cfile, "device", "type", ctype, sizeof ctype);
            if (strncmp(ctype, "Cortex-R", 8) == 0)
                s->prof = profile_CortexR;
            else if (strncmp(ctype, "Cortex-M", 8) == 0)
                s->prof = profile_CortexM;
            static char dumps[MAX_DUMPS][128];
            int nd = ini_sections(dir, cfile, "dump", dumps, MAX_DUMPS);
            for (int di = 0; di < nd; di++) {
            memset(&d, 0, sizeof d);
            if (ini_get(dir, cfile, dumps[di], "file", d.file, sizeof d.file) &&
                ini_get_u64(dir, cfile, dumps[di], "address", &d.addr)) {
                for (k = 0; k < ss->ndump; k++)
                    if (ss->dump[k].addr == d.addr && strcmp(ss->dump[k].file, d.file) == 0)
                        break;
                if (k == ss->ndump && ss->ndump < MAX_DUMPS) {
                    uint64_t len = 0;
                    d.data = read_file(dir, d.file, &d.len);
                    if (ini_get_u64(dir, cfile, dumps[di], "length", &len) && len < d.len)
                        d.len = (size_t)len;
                    ss->dump[ss->ndump++] = d;
                }
            }
            }
        }
        printf("source %-6s %s trace ID 0x%02x  ETMCR=0x%08x ETMIDR=0x%08x ETMCCER=0x%08x"
               "  core %s (%s)\n", s->name, s->is_etmv4 ? "ETMv4" : s->is_ptm ? "PTM  " : "ETMv3", s->trcid & 0x7f,
               s->ctrl, s->idr, s->ccer, s->core[0] ? s->core : "?", ctype[0] ? ctype : "?");
        ss->nsrc++;
        continue;
bad:
        fprintf(stderr, "%s: missing ETMCR/ETMIDR/ETMCCER/ETMTRACEIDR in [regs]\n", f);
        exit(1);
    }
    if (!ss->nsrc) {
        fprintf(stderr, "%s: no ETMv3 trace sources found\n", dir);
        exit(1);
    }
    for (k = 0; k < ss->ndump; k++)
        printf("memory %s at 0x%llx, %zu bytes\n", ss->dump[k].file,
               (unsigned long long)ss->dump[k].addr, ss->dump[k].len);
    printf("trace  %s, %zu bytes (CoreSight frames, 16-byte memory aligned)\n", trfile,
           ss->trace_len);
}

/* ------------------------------------------------------------------------------------ */
/* decode                                                                                */

typedef struct {
    uint64_t by_type[N_ELEM_TYPES];
    uint64_t ranges_by_id[128];
    uint64_t instrs_by_id[128];
    uint64_t ranges, instrs;
    uint64_t log_msgs;
} counts_t;

static ocsd_datapath_resp_t on_elem(const void *ctx, const ocsd_trc_index_t index,
                                    const uint8_t chan_id, const ocsd_generic_trace_elem *el)
{
    counts_t *c = (counts_t *)ctx;
    (void)index;
    c->by_type[(unsigned)el->elem_type & (N_ELEM_TYPES - 1)]++;
    if (el->elem_type == OCSD_GEN_TRC_ELEM_INSTR_RANGE) {
        c->ranges++;
        c->instrs += el->num_instr_range;
        c->ranges_by_id[chan_id & 0x7f]++;
        c->instrs_by_id[chan_id & 0x7f] += el->num_instr_range;
    }
    return OCSD_RESP_CONT;
}

/* library log strings (errors) are counted, not printed */
static void on_log(const void *ctx, const char *msg, const int len)
{
    counts_t *c = (counts_t *)ctx;
    (void)msg;
    (void)len;
    c->log_msgs++;
}

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void die_err(const char *what, ocsd_err_t err)
{
    char msg[256];
    ocsd_err_str(err, msg, sizeof msg);
    fprintf(stderr, "%s failed: %s\n", what, msg);
    exit(1);
}

/* one complete decode with a fresh tree; returns elapsed ms */
static double decode_once(const snapshot_t *ss, counts_t *c)
{
    dcd_tree_handle_t tree;
    ocsd_datapath_resp_t resp = OCSD_RESP_CONT;
    ocsd_err_t err;
    uint32_t done = 0, len = (uint32_t)ss->trace_len;
    double t0, t1;
    int i;

    memset(c, 0, sizeof *c);
    t0 = now_ms();
    tree = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
    if (tree == C_API_INVALID_TREE_HANDLE) {
        fprintf(stderr, "ocsd_create_dcd_tree failed\n");
        exit(1);
    }
    ocsd_def_errlog_set_strprint_cb(tree, c, on_log);
    for (i = 0; i < ss->nsrc; i++) {
        const source_t *s = &ss->src[i];
        unsigned char csid;
        if (s->is_etmv4) {
            ocsd_etmv4_cfg cfg;
            memset(&cfg, 0, sizeof cfg);
            cfg.reg_configr = s->configr, cfg.reg_traceidr = s->trcid, cfg.reg_idr0 = s->idr0;
            cfg.reg_idr1 = s->idr1, cfg.reg_idr2 = s->idr2, cfg.reg_idr8 = s->idr8;
            cfg.arch_ver = ARCH_V8, cfg.core_prof = s->prof;
            err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV4I,
                                         OCSD_CREATE_FLG_FULL_DECODER, &cfg, &csid);
        } else if (s->is_ptm) {
            ocsd_ptm_cfg cfg = { s->idr, s->ctrl, s->ccer, s->trcid, ARCH_V7, s->prof };
            err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_PTM,
                                         OCSD_CREATE_FLG_FULL_DECODER, &cfg, &csid);
        } else {
            ocsd_etmv3_cfg cfg = { s->idr, s->ctrl, s->ccer, s->trcid, ARCH_V7, s->prof };
            err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV3,
                                         OCSD_CREATE_FLG_FULL_DECODER, &cfg, &csid);
        }
        if (err != OCSD_OK)
            die_err("ocsd_dt_create_decoder", err);
    }
    for (i = 0; i < ss->ndump; i++) {
        err = ocsd_dt_add_buffer_mem_acc(tree, ss->dump[i].addr, OCSD_MEM_SPACE_ANY,
                                         ss->dump[i].data, (uint32_t)ss->dump[i].len);
        if (err != OCSD_OK)
            die_err("ocsd_dt_add_buffer_mem_acc", err);
    }
    err = ocsd_dt_set_gen_elem_outfn(tree, on_elem, c);
    if (err != OCSD_OK)
        die_err("ocsd_dt_set_gen_elem_outfn", err);

    /* push the whole buffer; on WAIT, flush until the decoders accept more data.
     * (The callback never asks for WAIT, so in practice this is a single call.) */
    while (done < len && !OCSD_DATA_RESP_IS_FATAL(resp)) {
        uint32_t used = 0;
        if (OCSD_DATA_RESP_IS_CONT(resp)) {
            resp = ocsd_dt_process_data(tree, OCSD_OP_DATA, done, len - done,
                                        ss->trace + done, &used);
            done += used;
        } else {
            resp = ocsd_dt_process_data(tree, OCSD_OP_FLUSH, 0, 0, NULL, NULL);
        }
    }
    if (!OCSD_DATA_RESP_IS_FATAL(resp))
        resp = ocsd_dt_process_data(tree, OCSD_OP_EOT, 0, 0, NULL, NULL);
    t1 = now_ms();
    ocsd_destroy_dcd_tree(tree);
    if (OCSD_DATA_RESP_IS_FATAL(resp)) {
        char msg[256] = "";
        ocsd_trc_index_t at = 0;
        uint8_t id = 0;
        ocsd_get_last_err(&at, &id, msg, sizeof msg);
        fprintf(stderr, "fatal datapath response %d after %u of %u bytes (%llu library "
                "messages); last error: %s\n", (int)resp, done, len,
                (unsigned long long)c->log_msgs, msg);
        exit(1);
    }
    return t1 - t0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static const char *elem_name(int t)
{
    static const char *names[] = {
        "UNKNOWN", "NO_SYNC", "TRACE_ON", "EO_TRACE", "PE_CONTEXT", "INSTR_RANGE",
        "I_RANGE_NOPATH", "ADDR_NACC", "ADDR_UNKNOWN", "EXCEPTION", "EXCEPTION_RET",
        "TIMESTAMP", "CYCLE_COUNT", "EVENT", "SWTRACE", "SYNC_MARKER", "MEMTRANS", "CUSTOM",
    };
    return t < (int)(sizeof names / sizeof names[0]) ? names[t] : "?";
}

int main(int argc, char **argv)
{
    static snapshot_t ss;
    counts_t c;
    const char *dir = NULL;
    int runs = 9, with_ptm = 0, with_etmv4 = 0, i, r;
    double *ms;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--with-ptm") == 0)
            with_ptm = 1;
        else if (strcmp(argv[i], "--with-etmv4") == 0)
            with_etmv4 = 1;
        else if (!dir)
            dir = argv[i];
        else
            runs = atoi(argv[i]);
    }
    if (!dir || runs < 1) {
        fprintf(stderr, "usage: %s SNAPSHOT_DIR [runs] [--with-ptm] [--with-etmv4]\n", argv[0]);
        return 2;
    }

    printf("OpenCSD %s, muted decode (counting callback only)\n", ocsd_get_version_str());
    load_snapshot(dir, with_ptm, with_etmv4, &ss);
    /* library messages go to the counting callback only */
    ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
    ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_NONE, NULL);

    ms = malloc(sizeof(double) * (size_t)runs);
    for (r = 0; r < runs; r++) {
        ms[r] = decode_once(&ss, &c);
        printf("run %d: %9.2f ms  %8llu instr-range elements  %8llu instructions  "
               "%7.2f M instr/s\n", r + 1, ms[r], (unsigned long long)c.ranges,
               (unsigned long long)c.instrs, c.instrs / (ms[r] * 1e3));
    }

    printf("elements by type:\n");
    for (i = 0; i < N_ELEM_TYPES; i++)
        if (c.by_type[i])
            printf("  %-16s %10llu\n", elem_name(i), (unsigned long long)c.by_type[i]);
    printf("instruction ranges / instructions by trace ID:\n");
    for (i = 0; i < 128; i++)
        if (c.ranges_by_id[i])
            printf("  0x%02x %10llu %10llu\n", i, (unsigned long long)c.ranges_by_id[i],
                   (unsigned long long)c.instrs_by_id[i]);
    printf("library error messages: %llu\n", (unsigned long long)c.log_msgs);

    qsort(ms, (size_t)runs, sizeof(double), cmp_double);
    {
        double best = ms[0];
        double med = runs % 2 ? ms[runs / 2] : (ms[runs / 2 - 1] + ms[runs / 2]) / 2;
        printf("best   %9.2f ms  %7.2f M instr/s\n", best, c.instrs / (best * 1e3));
        printf("median %9.2f ms  %7.2f M instr/s\n", med, c.instrs / (med * 1e3));
    }
    free(ms);
    return 0;
}
