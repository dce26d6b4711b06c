/* cmd_kv_bench_cuda.c -- `tq kv-bench --cuda`: time of one decode-attention call on the GPU per
 * scheme, head_dim, batch and context, with the achieved GB/s on the bytes the call must read
 * (K and V rows of every sequence and kv head, plus q and out) against a device-to-device copy
 * measured in the same run. CUDA events; warm-up; median of --reps calls. */
#include <math.h>
#include <stdint.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tq kv-bench --cuda [--schemes LIST] [--head-dim LIST] [--ctx LIST] [--batch LIST]\n"
            "                          [--heads N] [--kv-heads N] [--n-q N] [--reps N] [--splits LIST] [--timing T]\n"
            "                          [--merge M] [--csv FILE]\n"
            "  decode attention on GPU 0 over a device KV cache filled with Gaussian K/V.\n"
            "  --schemes   comma list (default bf16,kv8,turbo:k8v3,turbo:k4v3); GPU schemes: f16, bf16,\n"
            "              kv8, kv4, turbo:k8v3, k4v3, k8v4, k8v2, k4v2, k4v4\n"
            "  --head-dim  comma list of 64, 128, 256 (default 128)\n"
            "  --ctx       comma list of context lengths (default 1024,4096,16384,32768,65536,131072)\n"
            "  --batch     comma list (default 1,8)\n"
            "  --heads / --kv-heads  query heads and kv heads (default 32 / 8)\n"
            "  --n-q       query tokens per sequence (default 1; > 1 = speculative verification)\n"
            "  --reps      timed calls per point, median reported (default 20)\n"
            "  --splits    comma list of forced context splits per (batch, kv head), 0 = automatic\n"
            "              (default 0); one row per value (split-planning sweeps)\n"
            "  --timing    cold (default; the tables in docs/results.md): the GPU reads 256 MiB\n"
            "              before each call (no cached row in L2) and the events time the GPU's work\n"
            "              only; host: events around each call issued to an idle GPU (host launch\n"
            "              latency inside, the previous call's rows in L2 when they fit); both: one\n"
            "              row each\n"
            "  --merge M   how the splits are merged: auto (default), fused, kernel, cluster\n"
            "  --csv FILE  also write the rows as CSV\n"
            "  --quick     a few seconds: bf16 and turbo:k8v3 at ctx 4096,32768, batch 1, 5 calls\n");
}

/* a comma list of positive integers up to hi (cli_args.h) into out; -1 on a bad one */
static int parse_list(const char *cmd, const char *flag, const char *s, int64_t hi, int64_t *out,
                      int cap)
{
    int n = 0;
    return cli_i64_list(cmd, flag, s, 1, hi, out, cap, &n) ? -1 : n;
}

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

int cmd_kv_bench_cuda(int argc, char **argv)
{
    const char *cmd = "kv-bench --cuda";
    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *schemes = "bf16,kv8,turbo:k8v3,turbo:k4v3", *csv_path = NULL;
    int64_t dims[8], ctxs[32], batches[8], splits[16] = {0};
    int n_dims = 1, n_ctx = 6, n_b = 2, n_sp = 1;
    dims[0] = 128;
    const int64_t ctx_def[6] = {1024, 4096, 16384, 32768, 65536, 131072};
    for (int i = 0; i < 6; i++)
        ctxs[i] = ctx_def[i];
    batches[0] = 1;
    batches[1] = 8;
    long heads = 32, kv_heads = 8, n_q = 1, reps = 20;
    int time_cold = 1, time_host = 0;
    tq_cuda_kv_opts kopts = {0};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cuda"))
            continue;
        if (!strcmp(a, "--quick")) {
            schemes = "bf16,turbo:k8v3";
            ctxs[0] = 4096;
            ctxs[1] = 32768;
            n_ctx = 2;
            n_b = 1;
            reps = 5;
            continue;
        }
        if (!v) {
            cli_error(cmd, TQ_OK, "unknown or incomplete option '%s' (see --help)", a);
            return 2;
        }
        int r = 0;
        if (!strcmp(a, "--schemes"))
            schemes = v;
        else if (!strcmp(a, "--csv"))
            csv_path = v;
        else if (!strcmp(a, "--merge")) {
            tq_status ms = tq_cuda_merge_parse(v, &kopts.merge);
            if (ms)
                return cli_error(cmd, ms, "--merge"), 2;
        }
        else if (!strcmp(a, "--head-dim"))
            r = (n_dims = parse_list(cmd, a, v, 4096, dims, 8)) < 0;
        else if (!strcmp(a, "--ctx"))
            r = (n_ctx = parse_list(cmd, a, v, 1L << 30, ctxs, 32)) < 0;
        else if (!strcmp(a, "--batch"))
            r = (n_b = parse_list(cmd, a, v, 4096, batches, 8)) < 0;
        else if (!strcmp(a, "--heads"))
            r = cli_long(cmd, a, v, 1, 1024, &heads);
        else if (!strcmp(a, "--kv-heads"))
            r = cli_long(cmd, a, v, 1, 1024, &kv_heads);
        else if (!strcmp(a, "--n-q"))
            r = cli_long(cmd, a, v, 1, 1024, &n_q);
        else if (!strcmp(a, "--reps"))
            r = cli_long(cmd, a, v, 1, 10000, &reps);
        else if (!strcmp(a, "--splits"))
            r = cli_i64_list(cmd, a, v, 0, 1024, splits, 16, &n_sp) != 0;
        else if (!strcmp(a, "--timing")) {
            time_cold = !strcmp(v, "cold") || !strcmp(v, "both");
            time_host = !strcmp(v, "host") || !strcmp(v, "both");
            if (!time_cold && !time_host) {
                cli_error(cmd, TQ_OK, "--timing '%s' (valid: cold, host, both)", v);
                return 2;
            }
        }
        else {
            cli_error(cmd, TQ_OK, "unknown option '%s' (see --help)", a);
            return 2;
        }
        if (r)
            return 2;
        i++;
    }
    if (heads <= 0 || kv_heads <= 0 || heads % kv_heads || n_q <= 0 || reps <= 0 || reps > 10000) {
        cli_error(cmd, TQ_OK, "--heads %ld must be a positive multiple of --kv-heads %ld; --n-q, --reps > 0", heads,
                  kv_heads);
        return 2;
    }
    {   /* every scheme name checked before the device is touched */
        char buf[512], *items[32];
        int n = 0;
        snprintf(buf, sizeof(buf), "%s", schemes);
        if (cli_str_list(cmd, "--schemes", schemes, buf, items, 32, &n))
            return 2;
        for (int k = 0; k < n; k++) {
            tq_kv_scheme s;
            tq_status ps = tq_kv_scheme_parse(items[k], &s);
            if (ps != TQ_OK)
                return cli_error(cmd, ps, "--schemes '%s'", items[k]), 2;
        }
    }
    if (!tq_cuda_compiled())
        return cli_error(cmd, TQ_OK, "this build has no CUDA kernels (no nvcc at build time)");
    if (tq_cuda_available() <= 0)
        return cli_error(cmd, TQ_OK, "no CUDA device");
    char dev[128];
    tq_cuda_device_name(dev, sizeof(dev));
    double copy_gbps = 0, copy_read = 0;
    tq_status st = tq_cuda_copy_bandwidth((size_t)2 << 30, 20, &copy_gbps, &copy_read);
    if (st != TQ_OK)
        return cli_error(cmd, st, "copy bandwidth");
    printf("device: %s\n", dev);
    printf("copy (cudaMemcpy D2D 2 GiB, median of 20): %.0f GB/s (bytes read + written; %%copy below is against this)\n",
           copy_gbps);
    printf("heads %ld / kv heads %ld, n_q %ld, median of %ld calls after 3 warm-ups; timing %s\n", heads, kv_heads,
           n_q, reps, time_cold && time_host ? "cold and host" : time_cold ? "cold (L2 flushed, GPU time)" : "host");
    FILE *csv = NULL;
    if (csv_path) {
        csv = fopen(csv_path, "w");
        if (!csv)
            return cli_error(cmd, TQ_OK, "%s: cannot open for writing", csv_path);
        fprintf(csv, "device,scheme,head_dim,batch,ctx,heads,kv_heads,n_q,us_median,us_min,bytes,gbps,pct_copy,"
                     "copy_gbps,timing,splits\n");
    }
    printf("%-11s %4s %5s %7s %10s %10s %12s %8s %7s %s %s\n", "scheme", "d", "batch", "ctx", "us(med)", "us(min)",
           "bytes", "GB/s", "%copy", "timing", "splits");
    char sbuf[512];
    snprintf(sbuf, sizeof(sbuf), "%s", schemes);
    int rc = 0;
    float *times = malloc((size_t)reps * sizeof(float));
    for (char *save = NULL, *name = strtok_r(sbuf, ",", &save); name; name = strtok_r(NULL, ",", &save)) {
        tq_kv_scheme s;
        if ((st = tq_kv_scheme_parse(name, &s)) != TQ_OK) {
            rc = cli_error(cmd, st, "--schemes");
            break;
        }
        for (int di = 0; di < n_dims; di++)
            for (int bi = 0; bi < n_b; bi++)
                for (int ci = 0; ci < n_ctx; ci++) {
                    const int d = (int)dims[di], batch = (int)batches[bi];
                    const long ctx = ctxs[ci];
                    tq_cuda_kv *c = NULL;
                    void *qd = NULL, *od = NULL;
                    const size_t qn = (size_t)batch * n_q * heads * d;
                    float *qh = malloc(qn * sizeof(float));
                    for (size_t i = 0; i < qn; i++)
                        qh[i] = (float)sin((double)i * 0.7) * 1.5f;
                    st = tq_cuda_kv_create(s, d, (int)kv_heads, ctx, batch, &c);
                    if (st == TQ_OK)
                        st = tq_cuda_kv_fill_random(c, ctx, 1234 + (uint64_t)ctx);
                    if (st == TQ_OK)
                        st = tq_cuda_malloc(&qd, qn * sizeof(float));
                    if (st == TQ_OK)
                        st = tq_cuda_malloc(&od, qn * sizeof(float));
                    if (st == TQ_OK)
                        st = tq_cuda_memcpy(qd, qh, qn * sizeof(float), 0);
                    for (int k = 0; k < 2 * n_sp; k++) {
                        const int tm = k % 2, sp = (int)splits[k / 2];
                        if (!(tm == 0 ? time_cold : time_host))
                            continue;
                        kopts.n_splits = sp;
                        if (st == TQ_OK)
                            st = tq_cuda_kv_set_opts(c, &kopts);
                        const char *tname = tm == 0 ? "cold" : "host";
                        if (st == TQ_OK)
                            st = tq_cuda_kv_time_attend(c, qd, (int)n_q, (int)heads, 1.0f / sqrtf((float)d), od, 3,
                                                        (int)reps, tm == 0 ? TQ_CUDA_TIME_COLD : TQ_CUDA_TIME_HOST,
                                                        times);
                        if (st != TQ_OK) {
                            cli_error(cmd, st, "%s d=%d batch=%d ctx=%ld", name, d, batch, ctx);
                            rc = 1;
                            break;
                        }
                        qsort(times, (size_t)reps, sizeof(float), cmp_float);
                        const double med = times[reps / 2] * 1e3, mn = times[0] * 1e3;
                        const size_t bytes = tq_cuda_kv_bytes_read(c, (int)n_q, (int)heads);
                        const double gbps = (double)bytes / (med * 1e-6) / 1e9;
                        char spn[16] = "auto";
                        if (sp)
                            snprintf(spn, sizeof(spn), "%d", sp);
                        printf("%-11s %4d %5d %7ld %10.2f %10.2f %12zu %8.0f %6.1f%% %s %s\n", name, d, batch, ctx,
                               med, mn, bytes, gbps, 100.0 * gbps / copy_gbps, tname, spn);
                        if (csv)
                            fprintf(csv, "%s,%s,%d,%d,%ld,%ld,%ld,%ld,%.3f,%.3f,%zu,%.1f,%.1f,%.1f,%s,%s\n", dev, name,
                                    d, batch, ctx, heads, kv_heads, n_q, med, mn, bytes, gbps,
                                    100.0 * gbps / copy_gbps, copy_gbps, tname, spn);
                        cli_flush();
                    }
                    if (st != TQ_OK && !rc) {
                        cli_error(cmd, st, "%s d=%d batch=%d ctx=%ld", name, d, batch, ctx);
                        rc = 1;
                    }
                    tq_cuda_free(qd);
                    tq_cuda_free(od);
                    tq_cuda_kv_free(c);
                    free(qh);
                }
    }
    free(times);
    if (csv)
        fclose(csv);
    return rc;
}
