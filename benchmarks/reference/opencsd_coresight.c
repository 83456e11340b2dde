/*
 * opencsd_coresight.c - reference timing of the OpenCSD (C++) CoreSight decoders, output muted.
 *
 * Decodes the ETMv3, PTM and ETMv4 trace sources of a CoreSight snapshot directory to generic
 * trace elements through OpenCSD's C API, with an element callback that only counts (no text
 * formatting), so that the library's decode speed can be compared with cputrace's decoders
 * on the same machine.  See README.md in this directory.
 *
 * Build (from the repository root; needs the Debian packages libopencsd1 + libopencsd-dev):
 *
 *   mkdir -p benchmarks/out && \
 *   gcc -O2 -Wall -o benchmarks/out/opencsd_coresight benchmarks/reference/opencsd_coresight.c \
 *       -lopencsd_c_api -lopencsd
 *
 * Run:
 *
 *   benchmarks/out/opencsd_coresight SNAPSHOT_DIR [runs] [--only TRACE_ID] [--ranges FILE]
 *
 * The snapshot is read the way OpenCSD's snapshot format describes it: snapshot.ini
 * [device_list] names the device files; every trace_source device whose type starts with
 * "ETM3", "PTM", "PFT" or "ETM4" gets a decoder configured from its registers (ETMCR, ETMIDR,
 * ETMCCER, ETMTRACEIDR; for ETM4 TRCCONFIGR, TRCTRACEIDR and TRCIDR0-2, 8-13), or with
 * --only just the one whose trace ID is given; trace.ini names the trace buffer (the one the
 * sources are listed for in [source_buffers], else the first) and its format (coresight:
 * 16-byte memory aligned frames; dstream_coresight: frames with frame syncs; source_data:
 * one source's bytes, unformatted) and the core of each source ([core_trace_sources]); every
 * [dump...] section of the cores gives a memory image (file, address, optional offset and
 * length).
 *
 * Timing: trace buffer and memory images are read into memory before timing.  Each run
 * creates a fresh decode tree (decoders, memory accessors, callback), decodes the whole
 * buffer, sends end-of-trace, and stops the clock (CLOCK_MONOTONIC); tree destruction is
 * outside the timed region.
 *
 * --ranges FILE: after the timed runs, one more decode writes each instruction range to FILE,
 * a line each: trace ID, packet index, first address, end address (exclusive), instructions,
 * ISA (OpenCSD's ocsd_isa), whether the last one executed, and its size.
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
#define MAX_KEYS 256 /* keys read from one ini section (a PTM device lists 85 registers) */
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

/* DIR/FILE opened for reading, or NULL */
static FILE *open_in(const char *dir, const char *file)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, file);
    return fopen(path, "rb");
}

/* All "key=value" pairs of [SECTION], in file order; returns the count (at most MAXN). */
static int ini_section(const char *dir, const char *file, const char *section,
                       char keys[][128], char vals[][256], int maxn)
{
    char line[MAX_LINE], cur[128] = "";
    FILE *f = open_in(dir, file);
    int n = 0;

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

static int file_exists(const char *dir, const char *file)
{
    FILE *f = open_in(dir, file);
    if (f)
        fclose(f);
    return f != NULL;
}

/* Names of the sections of DIR/FILE that start with PREFIX, in file order (at most MAXN). */
static int ini_sections(const char *dir, const char *file, const char *prefix, char names[][128],
                        int maxn)
{
    char line[MAX_LINE];
    FILE *f = open_in(dir, file);
    int n = 0;

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

/* ------------------------------------------------------------------------------------ */
/* snapshot description                                                                  */

enum protocol { ETMV3, PTM, ETMV4 };

typedef struct {
    char name[64];     /* ETM_0 ... */
    char core[64];     /* cpu_0 ... */
    enum protocol protocol;
    uint32_t trcid;
    uint32_t idr, ctrl, ccer;            /* ETMv3 and PTM */
    uint32_t trcidr[14], configr;        /* ETMv4: TRCIDR0-2 and 8-13, by number */
    ocsd_core_profile_t prof;
    ocsd_arch_version_t arch;
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
    char format[64];   /* coresight, dstream_coresight or source_data */
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

static int reg(const char *dir, const char *f, const char *name, uint32_t *out)
{
    uint64_t v;
    if (!ini_get_u64(dir, f, "regs", name, &v))
        return 0;
    *out = (uint32_t)v;
    return 1;
}

/* The registers of source S (its protocol set) from its device file F; 0 if one is missing.
 * A PTM's ETMCCER may be absent (0). */
static int source_regs(const char *dir, const char *f, source_t *s)
{
    static const int etm4_ids[] = { 0, 1, 2, 8, 9, 10, 11, 12, 13 };
    char name[32];
    size_t i;
    if (s->protocol != ETMV4) {
        int ccer = reg(dir, f, "ETMCCER", &s->ccer);
        return reg(dir, f, "ETMCR", &s->ctrl) && reg(dir, f, "ETMIDR", &s->idr) &&
               reg(dir, f, "ETMTRACEIDR", &s->trcid) && (ccer || s->protocol == PTM);
    }
    for (i = 0; i < sizeof etm4_ids / sizeof etm4_ids[0]; i++) {
        snprintf(name, sizeof name, "TRCIDR%d", etm4_ids[i]);
        if (!reg(dir, f, name, &s->trcidr[etm4_ids[i]]))
            return 0;
    }
    return reg(dir, f, "TRCCONFIGR", &s->configr) && reg(dir, f, "TRCTRACEIDR", &s->trcid);
}

/* every [dump...] section of the core file CFILE, once each (cores share dumps) */
static void load_dumps(const char *dir, const char *cfile, snapshot_t *ss)
{
    static char names[MAX_DUMPS][128];
    int n = ini_sections(dir, cfile, "dump", names, MAX_DUMPS), i, k;
    for (i = 0; i < n && ss->ndump < MAX_DUMPS; i++) {
        dump_t d;
        uint64_t len = 0, offset = 0;
        size_t size;
        uint8_t *whole;
        memset(&d, 0, sizeof d);
        if (!ini_get(dir, cfile, names[i], "file", d.file, sizeof d.file) ||
            !ini_get_u64(dir, cfile, names[i], "address", &d.addr))
            continue;
        for (k = 0; k < ss->ndump; k++)
            if (ss->dump[k].addr == d.addr && strcmp(ss->dump[k].file, d.file) == 0)
                break;
        if (k < ss->ndump)
            continue;
        if (!file_exists(dir, d.file)) { /* as OpenCSD's own lister: decode without it */
            printf("memory %s at 0x%llx: no such file, left out\n", d.file,
                   (unsigned long long)d.addr);
            continue;
        }
        whole = read_file(dir, d.file, &size);
        ini_get_u64(dir, cfile, names[i], "offset", &offset);
        if (offset > size)
            offset = size;
        d.data = whole + offset;
        d.len = size - (size_t)offset;
        if (ini_get_u64(dir, cfile, names[i], "length", &len) && len < d.len)
            d.len = (size_t)len;
        ss->dump[ss->ndump++] = d;
    }
}

/* the section of trace.ini META whose name= is NAME, into SECTION; 0 if none */
static int buffer_section(const char *dir, const char *meta, const char *name, char *section,
                          size_t sz)
{
    char list[256], candidate[128], v[128];
    const char *p = list;
    if (!ini_get(dir, meta, "trace_buffers", "buffers", list, sizeof list))
        return 0;
    while (*p) {
        size_t len = strcspn(p, ", ");
        snprintf(candidate, sizeof candidate, "%.*s", (int)len, p);
        if (ini_get(dir, meta, candidate, "name", v, sizeof v) && strcmp(v, name) == 0) {
            copy_str(section, sz, candidate);
            return 1;
        }
        p += len;
        p += strspn(p, ", ");
    }
    return 0;
}

static void load_snapshot(const char *dir, int only, snapshot_t *ss)
{
    static char keys[64][128], vals[64][256];
    static char ckeys[64][128], cvals[64][256], bkeys[64][128], bvals[64][256];
    char meta[256] = "trace.ini", bufs[256], buffer[128] = "", section[128], trfile[256];
    int n, nc, nb, i, j, listed;

    memset(ss, 0, sizeof *ss);
    ini_get(dir, "snapshot.ini", "trace", "metadata", meta, sizeof meta);
    n = ini_section(dir, "snapshot.ini", "device_list", keys, vals, 64);
    nc = ini_section(dir, meta, "core_trace_sources", ckeys, cvals, 64);
    nb = ini_section(dir, meta, "source_buffers", bkeys, bvals, 64);

    /* sources: trace_source devices of a protocol decoded here */
    for (i = 0; i < n && ss->nsrc < MAX_SOURCES; i++) {
        char cls[64], type[64], name[64], ctype[64] = "", cfile[256];
        source_t *s = &ss->src[ss->nsrc];
        const char *f = vals[i];
        memset(s, 0, sizeof *s);
        if (!ini_get(dir, f, "device", "class", cls, sizeof cls) || strcmp(cls, "trace_source"))
            continue;
        if (!ini_get(dir, f, "device", "type", type, sizeof type) ||
            !ini_get(dir, f, "device", "name", name, sizeof name))
            continue;
        if (strncmp(type, "ETM3", 4) == 0)
            s->protocol = ETMV3;
        else if (strncmp(type, "PTM", 3) == 0 || strncmp(type, "PFT", 3) == 0)
            s->protocol = PTM;
        else if (strncmp(type, "ETM4", 4) == 0)
            s->protocol = ETMV4;
        else
            continue;
        for (listed = 0; listed < nb && strcmp(bkeys[listed], name) != 0; listed++)
            ; /* [source_buffers] lists the sources that traced into a buffer: the others did not */
        if (nb && (listed == nb || (buffer[0] && strcmp(bvals[listed], buffer) != 0)))
            continue; /* not traced, or into another buffer than the first source's */
        if (!source_regs(dir, f, s)) {
            fprintf(stderr, "%s: a register of a %s source is missing in [regs]\n", f, type);
            exit(1);
        }
        if (only >= 0 && (int)(s->trcid & 0x7f) != only)
            continue;
        if (nb)
            copy_str(buffer, sizeof buffer, bvals[listed]);
        copy_str(s->name, sizeof s->name, name);

        /* the core traced by this source, its profile and memory dumps */
        for (j = 0; j < nc; j++)
            if (strcmp(cvals[j], name) == 0)
                copy_str(s->core, sizeof s->core, ckeys[j]);
        s->prof = profile_CortexA;
        s->arch = s->protocol == ETMV4 ? ARCH_V8 : ARCH_V7;
        if (s->core[0] && device_file(dir, s->core, cfile, sizeof cfile)) {
            ini_get(dir, cfile, "device", "type", ctype, sizeof ctype);
            if (strncmp(ctype, "Cortex-R", 8) == 0)
                s->prof = profile_CortexR;
            else if (strncmp(ctype, "Cortex-M", 8) == 0)
                s->prof = profile_CortexM;
            if (s->protocol == ETMV4 && s->prof == profile_CortexM)
                s->arch = ARCH_V8r3; /* Armv8-M and Armv8.1-M */
            load_dumps(dir, cfile, ss);
        }
        printf("source %-6s %-5s trace ID 0x%02x  core %s (%s)\n", s->name,
               s->protocol == ETMV4 ? "ETMv4" : s->protocol == PTM ? "PTM" : "ETMv3",
               s->trcid & 0x7f, s->core[0] ? s->core : "?", ctype[0] ? ctype : "?");
        ss->nsrc++;
    }
    if (!ss->nsrc) {
        fprintf(stderr, "%s: no ETMv3, PTM or ETMv4 trace source found\n", dir);
        exit(1);
    }
    if (!ss->ndump) { /* OpenCSD decodes to instructions only through a memory accessor */
        fprintf(stderr, "%s: no memory image: no instructions to decode\n", dir);
        exit(1);
    }

    /* the trace buffer: the one [source_buffers] lists the sources for, else the first of
     * [trace_buffers] buffers= */
    if (!buffer[0] || !buffer_section(dir, meta, buffer, section, sizeof section)) {
        if (!ini_get(dir, meta, "trace_buffers", "buffers", bufs, sizeof bufs)) {
            fprintf(stderr, "%s/%s: no [trace_buffers] buffers=\n", dir, meta);
            exit(1);
        }
        snprintf(section, sizeof section, "%.*s", (int)strcspn(bufs, ", "), bufs);
    }
    if (!ini_get(dir, meta, section, "file", trfile, sizeof trfile)) {
        fprintf(stderr, "%s/%s: no file= in [%s]\n", dir, meta, section);
        exit(1);
    }
    if (!ini_get(dir, meta, section, "format", ss->format, sizeof ss->format))
        copy_str(ss->format, sizeof ss->format, "coresight");
    ss->trace = read_file(dir, trfile, &ss->trace_len);
    for (i = 0; i < ss->ndump; i++)
        printf("memory %s at 0x%llx, %zu bytes\n", ss->dump[i].file,
               (unsigned long long)ss->dump[i].addr, ss->dump[i].len);
    printf("trace  %s, %zu bytes (%s)\n", trfile, ss->trace_len, ss->format);
}

/* ------------------------------------------------------------------------------------ */
/* decode                                                                                */

typedef struct {
    uint64_t by_type[N_ELEM_TYPES];
    uint64_t ranges_by_id[128];
    uint64_t instrs_by_id[128];
    uint64_t ranges, instrs;
    uint64_t log_msgs;
    FILE *ranges_out;                    /* --ranges: where each range is listed, or NULL */
} counts_t;

static ocsd_datapath_resp_t on_elem(const void *ctx, const ocsd_trc_index_t index,
                                    const uint8_t chan_id, const ocsd_generic_trace_elem *el)
{
    counts_t *c = (counts_t *)ctx;
    c->by_type[(unsigned)el->elem_type & (N_ELEM_TYPES - 1)]++;
    if (el->elem_type == OCSD_GEN_TRC_ELEM_INSTR_RANGE && c->ranges_out)
        fprintf(c->ranges_out, "0x%02x %llu 0x%llx 0x%llx %u %d %u %u\n", chan_id, (unsigned long long)index,
                (unsigned long long)el->st_addr, (unsigned long long)el->en_addr, el->num_instr_range,
                (int)el->isa, (unsigned)el->last_instr_exec, (unsigned)el->last_instr_sz);
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

    FILE *ranges_out = c->ranges_out;

    memset(c, 0, sizeof *c);
    c->ranges_out = ranges_out;
    t0 = now_ms();
    if (strcmp(ss->format, "source_data") == 0)
        tree = ocsd_create_dcd_tree(OCSD_TRC_SRC_SINGLE, 0);
    else if (strcmp(ss->format, "dstream_coresight") == 0)
        tree = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_HAS_FSYNCS);
    else
        tree = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
    if (tree == C_API_INVALID_TREE_HANDLE) {
        fprintf(stderr, "ocsd_create_dcd_tree failed\n");
        exit(1);
    }
    ocsd_def_errlog_set_strprint_cb(tree, c, on_log);
    for (i = 0; i < ss->nsrc; i++) {
        const source_t *s = &ss->src[i];
        unsigned char csid;
        if (s->protocol == ETMV4) {
            ocsd_etmv4_cfg cfg = { s->trcidr[0], s->trcidr[1], s->trcidr[2], s->trcidr[8],
                                   s->trcidr[9], s->trcidr[10], s->trcidr[11], s->trcidr[12],
                                   s->trcidr[13], s->configr, s->trcid, s->arch, s->prof };
            err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV4I,
                                         OCSD_CREATE_FLG_FULL_DECODER, &cfg, &csid);
        } else if (s->protocol == PTM) {
            ocsd_ptm_cfg cfg = { s->idr, s->ctrl, s->ccer, s->trcid, s->arch, s->prof };
            err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_PTM,
                                         OCSD_CREATE_FLG_FULL_DECODER, &cfg, &csid);
        } else {
            ocsd_etmv3_cfg cfg = { s->idr, s->ctrl, s->ccer, s->trcid, s->arch, s->prof };
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
    const char *dir = NULL, *ranges = NULL;
    int runs = 9, only = -1, i, r;
    double *ms;

    for (i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--only") == 0 && i + 1 < argc)
            only = (int)strtol(argv[++i], NULL, 0);
        else if (strcmp(argv[i], "--ranges") == 0 && i + 1 < argc)
            ranges = argv[++i];
        else if (!dir)
            dir = argv[i];
        else
            runs = atoi(argv[i]);
    }
    if (!dir || runs < 1) {
        fprintf(stderr, "usage: %s SNAPSHOT_DIR [runs] [--only TRACE_ID] [--ranges FILE]\n", argv[0]);
        return 2;
    }

    printf("OpenCSD %s, muted decode (counting callback only)\n", ocsd_get_version_str());
    load_snapshot(dir, only, &ss);
    /* library messages go to the counting callback only */
    ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
    ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_NONE, NULL);

    memset(&c, 0, sizeof c);
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
    if (ranges) {
        if (!(c.ranges_out = fopen(ranges, "w"))) {
            perror(ranges);
            return 1;
        }
        decode_once(&ss, &c);
        fclose(c.ranges_out);
    }
    return 0;
}
