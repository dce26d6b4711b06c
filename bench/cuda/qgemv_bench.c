/* qgemv_bench.c -- GPU quantized GEMV speed (issue 16 item 5): for each format, GPU time of one
 * call (activation quantize + GEMV) at batch 1 (and --n N) on a rows x cols matrix, against the
 * device-to-device copy rate (tq_cuda_copy_bandwidth: bytes read + written per second, the
 * "% of copy" of every CUDA table in docs/results.md) and against a plain 16-byte-load read of
 * the same packed bytes with the same timing (the practical floor at this size).
 * Usage: qgemv_bench [--shape RxC[,RxC...]] [--n N] [--reps R] [--timing cold|host] [--csv FILE]
 *                    [--split K[,K...]]   (warps per row at batch 1: 0 = automatic, 1, 2, 4)
 *                    [--staged 3,1,0]     (batch-1 kernel of the ggml formats, tq_cuda_qgemv_set_staged:
 *                                          3 = wide (default), 4 = wide with a plain activation copy,
 *                                          1 = staged per unit, 2 = 1 + Q4_K, 0 = direct)
 *                    [--fmt NAME]         (one format: Q8_0 Q4_0 Q4_1 Q4_K Q6_K MLX4g64 MLX8g64)
 * Default: 4096x14336 and 14336x4096, n 1, 50 reps, cold (L2 flushed before each call). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/qgemv.h"

int main(int argc, char **argv)
{
    const char *shapes = "4096x14336,14336x4096", *csv_path = NULL, *splits = "0", *stageds = "3", *only = NULL;
    int n = 1, reps = 50, cold = 1;
    for (int i = 1; i < argc; i++) {
        const char *v = i + 1 < argc ? argv[i + 1] : "";
        if (!strcmp(argv[i], "--shape"))
            shapes = v, i++;
        else if (!strcmp(argv[i], "--n"))
            n = atoi(v), i++;
        else if (!strcmp(argv[i], "--reps"))
            reps = atoi(v), i++;
        else if (!strcmp(argv[i], "--timing"))
            cold = strcmp(v, "host") != 0, i++;
        else if (!strcmp(argv[i], "--staged"))
            stageds = v, i++;
        else if (!strcmp(argv[i], "--split"))
            splits = v, i++;
        else if (!strcmp(argv[i], "--fmt"))
            only = v, i++;
        else if (!strcmp(argv[i], "--csv"))
            csv_path = v, i++;
        else {
            fprintf(stderr, "usage: qgemv_bench [--shape RxC,...] [--n N] [--reps R] [--timing cold|host] "
                            "[--csv FILE] [--split K,...] [--staged 3,4,1,2,0] [--fmt NAME]\n");
            return 2;
        }
    }
    if (!tq_cuda_available()) {
        printf("qgemv_bench: no CUDA device (or a build without CUDA): nothing measured\n");
        return 77;
    }
    char dev[128];
    tq_cuda_device_name(dev, sizeof dev);
    double copy = 0, copy_read = 0;
    if (tq_cuda_copy_bandwidth((size_t)2 << 30, 20, &copy, &copy_read) != TQ_OK) {
        fprintf(stderr, "copy bandwidth: %s\n", tq_last_error());
        return 1;
    }
    printf("device %s; copy (cudaMemcpy D2D 2 GiB, median of 20): %.0f GB/s read + written; timing %s; n %d; "
           "median of %d\n", dev, copy, cold ? "cold (L2 flushed, GPU time)" : "host (events, L2 warm)", n, reps);
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv)
        fprintf(csv, "device,format,rows,cols,n,split,staged,timing,bytes,us_median,us_min,us_nopdl,us_kernel,us_read,gbps,pct_copy,"
                     "pct_read,copy_gbps\n");
    static const struct { const char *name; int fmt, bits, group; } F[] = {
        {"Q8_0", TQ_GGML_Q8_0, 0, 0},        {"Q4_0", TQ_GGML_Q4_0, 0, 0},
        {"Q4_1", TQ_GGML_Q4_1, 0, 0},
        {"Q4_K", TQ_GGML_Q4_K, 0, 0},        {"Q6_K", TQ_GGML_Q6_K, 0, 0},
        {"MLX4g64", TQ_CUDA_QGEMV_MLX, 4, 64}, {"MLX8g64", TQ_CUDA_QGEMV_MLX, 8, 64},
    };
    printf("| format | rows x cols | split | staged | MB | call us (med) | min | no PDL | GEMV kernel us | read us | GB/s | %% of copy | "
           "%% of read |\n|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n");
    int rc = 0;
    char *list = strdup(shapes);
    for (char *tok = strtok(list, ","); tok; tok = strtok(NULL, ",")) {
        long long r = 0, c = 0;
        if (sscanf(tok, "%lldx%lld", &r, &c) != 2 || r < 1 || c < 1) {
            fprintf(stderr, "bad shape %s (RxC)\n", tok);
            return 2;
        }
        for (size_t i = 0; i < sizeof F / sizeof F[0]; i++)
        if (!only || !strcmp(only, F[i].name))
        for (const char *st = stageds; *st; st += strcspn(st, ",") + (st[strcspn(st, ",")] == ','))
        for (const char *sp = splits; *sp; sp += strcspn(sp, ",") + (sp[strcspn(sp, ",")] == ',')) {
            const int ks = atoi(sp);
            const int staged = atoi(st);
            if (!staged && (F[i].fmt == TQ_CUDA_QGEMV_MLX || n > 1) && st != stageds)
                continue; /* MLX and batches have one path */
            tq_cuda_qgemv_set_split(ks);
            tq_cuda_qgemv_set_staged(staged);
            tq_cuda_qgemv_timing t;
            if (tq_cuda_qgemv_bench(F[i].fmt, F[i].bits, F[i].group, r, c, n, reps, cold, &t) != TQ_OK) {
                printf("| %s | %lldx%lld | failed: %s |\n", F[i].name, r, c, tq_last_error());
                rc = 1;
                continue;
            }
            const double gbps = (double)t.bytes / (t.us_med * 1e-6) / 1e9;
            const double read_gbps = (double)t.bytes / (t.us_read * 1e-6) / 1e9;
            printf("| %s | %lldx%lld | %s | %s | %.1f | %.2f | %.2f | %.2f | %.2f | %.2f | %.0f | %.0f%% | %.0f%% |\n", F[i].name, r,
                   c, ks ? (ks == 1 ? "1" : ks == 2 ? "2" : "4") : "auto",
                   F[i].fmt == TQ_CUDA_QGEMV_MLX || n > 1 ? "-" : staged == 3 ? "wide" : staged == 4 ? "wide-sync" : staged == 2 ? "all" : staged ? "yes" : "no", (double)t.bytes / 1e6, t.us_med, t.us_min, t.us_nopdl, t.us_kernel, t.us_read, gbps,
                   100.0 * gbps / copy, 100.0 * gbps / read_gbps);
            if (csv)
                fprintf(csv, "%s,%s,%lld,%lld,%d,%d,%d,%s,%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.1f,%.1f,%.1f,%.1f\n", dev, F[i].name,
                        r, c, n, ks, staged, cold ? "cold" : "host", t.bytes, t.us_med, t.us_min, t.us_nopdl, t.us_kernel, t.us_read, gbps,
                        100.0 * gbps / copy, 100.0 * gbps / read_gbps, copy);
        }
    }
    free(list);
    if (csv)
        fclose(csv);
    return rc;
}
