/*
 * Reference: OpenCSD's ETMv4 packet processor on a formatted trace buffer, output muted.
 *
 * Times what cputrace's `formats/etmv4/packets.py` does: CoreSight frames split by trace ID
 * and each ETMv4 source's bytes made into packets, with no instruction decode. The packet
 * callback only counts packets. Each run creates a fresh decode tree (frames 16-byte memory
 * aligned, as an ETB holds them; one ETMv4 packet processor per source), processes the whole
 * buffer, sends end-of-trace and stops the clock (CLOCK_MONOTONIC; file reading excluded,
 * tree creation included, destruction excluded). It prints each run (ms, packets, M packets/s),
 * then the best and the median.
 *
 *   gcc -O2 -Wall -o benchmarks/out/opencsd_etmv4_packets \
 *       benchmarks/reference/opencsd_etmv4_packets.c -lopencsd_c_api -lopencsd
 *   benchmarks/out/opencsd_etmv4_packets BUFFER RUNS ID:CONFIGR:IDR0:IDR1:IDR2:IDR8 [...]
 *
 * Each source is its trace ID and registers in hex, as the snapshot's device file gives them.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <opencsd/c_api/opencsd_c_api.h>

#define MAX_SOURCES 16
#define MAX_RUNS 101

typedef struct {
    int count;
    ocsd_etmv4_cfg cfg[MAX_SOURCES];
} sources_t;

static long long packets;

static ocsd_datapath_resp_t on_packet(const void *ctx, const ocsd_datapath_op_t op,
                                      const ocsd_trc_index_t index, const void *pkt)
{
    (void)ctx; (void)index; (void)pkt;
    if (op == OCSD_OP_DATA)
        packets++;
    return OCSD_RESP_CONT;
}

static double now_ms(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e3 + t.tv_nsec / 1e6;
}

static int parse_source(const char *arg, ocsd_etmv4_cfg *cfg)
{
    unsigned int id, configr, idr0, idr1, idr2, idr8;
    if (sscanf(arg, "%x:%x:%x:%x:%x:%x", &id, &configr, &idr0, &idr1, &idr2, &idr8) != 6)
        return 0;
    memset(cfg, 0, sizeof *cfg);
    cfg->reg_traceidr = id;
    cfg->reg_configr = configr;
    cfg->reg_idr0 = idr0;
    cfg->reg_idr1 = idr1;
    cfg->reg_idr2 = idr2;
    cfg->reg_idr8 = idr8;
    cfg->arch_ver = ARCH_V8;
    cfg->core_prof = profile_CortexA;
    return 1;
}

static double run_once(const uint8_t *data, size_t len, const sources_t *s)
{
    double start = now_ms();
    dcd_tree_handle_t tree = ocsd_create_dcd_tree(OCSD_TRC_SRC_FRAME_FORMATTED, OCSD_DFRMTR_FRAME_MEM_ALIGN);
    if (tree == C_API_INVALID_TREE_HANDLE) {
        fprintf(stderr, "ocsd_create_dcd_tree failed\n");
        exit(1);
    }
    for (int i = 0; i < s->count; i++) {
        unsigned char csid = 0;
        ocsd_err_t err = ocsd_dt_create_decoder(tree, OCSD_BUILTIN_DCD_ETMV4I, OCSD_CREATE_FLG_PACKET_PROC,
                                                (void *)&s->cfg[i], &csid);
        if (err == OCSD_OK)
            err = ocsd_dt_attach_packet_callback(tree, csid, OCSD_C_API_CB_PKT_SINK, (void *)on_packet, NULL);
        if (err != OCSD_OK) {
            fprintf(stderr, "source 0x%02x: OpenCSD error %d\n", s->cfg[i].reg_traceidr, (int)err);
            exit(1);
        }
    }
    uint32_t done = 0;
    while (done < len) {
        uint32_t used = 0;
        ocsd_datapath_resp_t resp = ocsd_dt_process_data(tree, OCSD_OP_DATA, done, (uint32_t)(len - done),
                                                         data + done, &used);
        done += used;
        if (OCSD_DATA_RESP_IS_FATAL(resp))
            break;  /* OpenCSD stops at a fatal packet error; the packets before it are counted */
        if (OCSD_DATA_RESP_IS_WAIT(resp))
            ocsd_dt_process_data(tree, OCSD_OP_FLUSH, 0, 0, NULL, NULL);
    }
    ocsd_dt_process_data(tree, OCSD_OP_EOT, 0, 0, NULL, NULL);
    double elapsed = now_ms() - start;
    ocsd_destroy_dcd_tree(tree);
    return elapsed;
}

static int by_value(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv)
{
    static sources_t sources;
    if (argc < 4) {
        fprintf(stderr, "usage: %s BUFFER RUNS ID:CONFIGR:IDR0:IDR1:IDR2:IDR8 [...]\n", argv[0]);
        return 2;
    }
    int runs = atoi(argv[2]);
    if (runs < 1 || runs > MAX_RUNS) {
        fprintf(stderr, "RUNS: expected 1 to %d\n", MAX_RUNS);
        return 2;
    }
    for (int i = 3; i < argc && sources.count < MAX_SOURCES; i++) {
        if (!parse_source(argv[i], &sources.cfg[sources.count++])) {
            fprintf(stderr, "%s: expected ID:CONFIGR:IDR0:IDR1:IDR2:IDR8 in hex\n", argv[i]);
            return 2;
        }
    }
    FILE *f = fopen(argv[1], "rb");
    if (!f) {
        perror(argv[1]);
        return 1;
    }
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    uint8_t *data = malloc(len > 0 ? (size_t)len : 1);
    if (!data || fread(data, 1, (size_t)len, f) != (size_t)len) {
        fprintf(stderr, "%s: cannot read\n", argv[1]);
        return 1;
    }
    fclose(f);
    ocsd_def_errlog_init(OCSD_ERR_SEV_ERROR, 1);
    ocsd_def_errlog_config_output(C_API_MSGLOGOUT_FLG_NONE, NULL);
    printf("OpenCSD %s, ETMv4 packets only (counting callback)\n", ocsd_get_version_str());
    double times[MAX_RUNS];
    for (int r = 0; r < runs; r++) {
        packets = 0;
        times[r] = run_once(data, (size_t)len, &sources);
        printf("run %d: %.2f ms, %lld packets, %.2f M packets/s\n", r + 1, times[r], packets,
               packets / times[r] / 1e3);
    }
    qsort(times, runs, sizeof times[0], by_value);
    printf("best %.2f ms, median %.2f ms, %lld packets\n", times[0], times[runs / 2], packets);
    free(data);
    return 0;
}
