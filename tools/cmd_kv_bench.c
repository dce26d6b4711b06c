/* cmd_kv_bench.c -- `tq kv-bench`: KV codec encode/decode throughput per scheme, head_dim, ISA and
 * thread count, against a memcpy of the same fp32 bytes measured in the same run; then round-trip
 * MSE and cosine per scheme on Gaussian and on outlier-channel data. */
#include <math.h>
#include <stdint.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

#define MAX_LIST 32

static const char *default_schemes = "f16,bf16,kv8,kv4,turbo:k8v4,turbo:k8v3,turbo:k8v2,turbo:k4v3,turbo:k4v2";
static const char *quick_schemes = "f16,kv8,kv4,turbo:k8v3,turbo:k4v2";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tq kv-bench [options]\n\n"
            "KV codec throughput and round-trip quality on synthetic rows. A row is one (token,\n"
            "kv-head) pair: its K and its V vector of head_dim fp32 values. Encode = K and V rows\n"
            "from fp32 to the scheme's bytes; decode = back to fp32. Throughput is rows/s and GB/s\n"
            "of fp32 (2*head_dim*4 bytes per row, in for encode, out for decode), median of the runs,\n"
            "next to a memcpy of the same bytes on the same threads in the same run.\n\n"
            "options:\n"
            "  --quick            short run (head_dim 128, %s,\n"
            "                     2048 rows, 5 runs): a few seconds\n"
            "  --schemes LIST     comma-separated schemes (default %s)\n"
            "                     valid: %s\n"
            "                     but not the +rk variants: they exist in the engine's turbo\n"
            "                     cache only (measure them with tq kl / tq ppl --kv)\n"
            "  --head-dim LIST    comma-separated head_dims (default 128; turbo: 64,128,256,512)\n"
            "  --isa LIST         scalar,avx2,avx512 or all (default all this CPU runs)\n"
            "  --threads LIST     thread counts, 1..256 each (default 1 and the number of online\n"
            "                     CPUs; more than that is allowed with a warning)\n"
            "  --rows N           rows per run, 1..16777216 (default 16384)\n"
            "  --runs N           timed runs per case, 5..1000, median reported (default 7)\n"
            "  --no-quality       skip the MSE / cosine table\n"
            "  -h, --help         this text\n",
            quick_schemes, default_schemes, tq_kv_schemes_help());
}

/* ---- small helpers (the tool uses the public API only) ------------------------------------- */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static uint64_t rng_state;
static uint64_t rng_u64(void)
{
    uint64_t z = (rng_state += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
static float rng_normal(void)
{
    const double u1 = ((double)(rng_u64() >> 11) + 0.5) * (1.0 / 9007199254740992.0);
    const double u2 = (double)(rng_u64() >> 11) * (1.0 / 9007199254740992.0);
    return (float)(sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2));
}

/* Gaussian rows; outlier = also a few fixed channels x20 and 1% of elements x8 (the shape of
 * real K caches: a handful of large channels). */
static void fill(float *x, int64_t rows, int d, int outlier)
{
    for (int64_t r = 0; r < rows; r++)
        for (int j = 0; j < d; j++) {
            float v = rng_normal();
            if (outlier) {
                if (j == 3 || j == d / 2 + 7 || j == d - 5)
                    v *= 20.0f;
                else if (rng_u64() % 100 == 0)
                    v *= 8.0f;
            }
            x[r * d + j] = v;
        }
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}
static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof(double), cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/* the yardstick: copy the K and the V fp32 rows (n bytes each), split over the threads */
typedef struct memcpy_job {
    const uint8_t *src[2];
    uint8_t *dst;
    size_t n;
} memcpy_job;
static void memcpy_task(void *ctx, int ith, int nth)
{
    const memcpy_job *j = ctx;
    const size_t per = (j->n + (size_t)nth - 1) / (size_t)nth;
    const size_t a = per * (size_t)ith < j->n ? per * (size_t)ith : j->n;
    const size_t b = a + per < j->n ? a + per : j->n;
    memcpy(j->dst + a, j->src[0] + a, b - a);
    memcpy(j->dst + j->n + a, j->src[1] + a, b - a);
}

int cmd_kv_bench(int argc, char **argv)
{
    const char *cmd = "kv-bench";
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "--cuda"))
            return cmd_kv_bench_cuda(argc, argv);
    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    int quick = 0, quality = 1;
    long rows = 16384, runs = 7;
    const char *schemes_arg = NULL, *dims_arg = "128", *isa_arg = "all", *threads_arg = NULL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--quick")) {
            quick = 1;
        } else if (!strcmp(a, "--no-quality")) {
            quality = 0;
        } else if (!strcmp(a, "--schemes") && v) {
            schemes_arg = v;
            i++;
        } else if (!strcmp(a, "--head-dim") && v) {
            dims_arg = v;
            i++;
        } else if (!strcmp(a, "--isa") && v) {
            isa_arg = v;
            i++;
        } else if (!strcmp(a, "--threads") && v) {
            threads_arg = v;
            i++;
        } else if (!strcmp(a, "--rows")) {
            if (cli_long(cmd, a, v, 1, 1L << 24, &rows))
                return 2;
            i++;
        } else if (!strcmp(a, "--runs")) {
            if (cli_long(cmd, a, v, 5, 1000, &runs))
                return 2;
            i++;
        } else {
            fprintf(stderr, "tq %s: unknown or incomplete option '%s'\n\n", cmd, a);
            usage(stderr);
            return 2;
        }
    }
    int rows_set = 0, runs_set = 0;
    for (int i = 1; i < argc; i++) {
        rows_set |= !strcmp(argv[i], "--rows");
        runs_set |= !strcmp(argv[i], "--runs");
    }
    if (quick) {
        if (!schemes_arg)
            schemes_arg = quick_schemes;
        if (!rows_set)
            rows = 2048;
        if (!runs_set)
            runs = 5;
    }
    if (!schemes_arg)
        schemes_arg = default_schemes;

    /* parse lists */
    char sbuf[1024], dbuf[256], ibuf[256], tbuf[256];
    char *sl[MAX_LIST], *dl[MAX_LIST], *il[MAX_LIST], *tl[MAX_LIST];
    snprintf(sbuf, sizeof(sbuf), "%s", schemes_arg);
    snprintf(dbuf, sizeof(dbuf), "%s", dims_arg);
    snprintf(ibuf, sizeof(ibuf), "%s", isa_arg);
    const long ncpu = sysconf(_SC_NPROCESSORS_ONLN) > 0 ? sysconf(_SC_NPROCESSORS_ONLN) : 1;
    if (threads_arg)
        snprintf(tbuf, sizeof(tbuf), "%s", threads_arg);
    else if (ncpu > 1)
        snprintf(tbuf, sizeof(tbuf), "1,%ld", ncpu);
    else
        snprintf(tbuf, sizeof(tbuf), "1");
    int ns = 0, nd = 0, ni0 = 0, nt = 0;
    if (cli_str_list(cmd, "--schemes", schemes_arg, sbuf, sl, MAX_LIST, &ns) ||
        cli_str_list(cmd, "--head-dim", dims_arg, dbuf, dl, MAX_LIST, &nd) ||
        cli_str_list(cmd, "--isa", isa_arg, ibuf, il, MAX_LIST, &ni0) ||
        cli_str_list(cmd, "--threads", threads_arg ? threads_arg : tbuf, tbuf, tl, MAX_LIST, &nt))
        return 2;
    tq_kv_scheme schemes[MAX_LIST];
    int dims[MAX_LIST], threads[MAX_LIST];
    tq_isa isas[TQ_ISA_COUNT];
    int ni = 0;
    for (int i = 0; i < ns; i++) {
        tq_status st = tq_kv_scheme_parse(sl[i], &schemes[i]);
        if (st != TQ_OK)
            return cli_error(cmd, st, "--schemes '%s'", sl[i]), 2;
        if (schemes[i].flags) { /* refused before anything runs (the row codec has no +rk) */
            tq_kv_scheme base = schemes[i];
            char bn[32];
            base.flags = 0;
            tq_kv_scheme_name(base, bn, sizeof(bn));
            return cli_error(cmd, TQ_OK,
                             "--schemes '%s': +rk is a variant of the engine's turbo cache (keys "
                             "rotated inside the cache, queries at attention) that the row codec "
                             "timed here does not run; benchmark %s here and measure %s with "
                             "tq kl or tq ppl --kv %s", sl[i], bn, sl[i], sl[i]),
                   2;
        }
    }
    for (int i = 0; i < nd; i++) {
        if (cli_int(cmd, "--head-dim", dl[i], 1, 1 << 16, &dims[i]))
            return 2;
        for (int k = 0; k < ns; k++) {
            tq_status st = tq_kv_check(schemes[k], dims[i]);
            if (st != TQ_OK)
                return cli_error(cmd, st, "--head-dim %d", dims[i]), 2;
        }
    }
    for (int i = 0; i < nt; i++)
        if (cli_threads(cmd, "--threads", tl[i], 1, &threads[i]))
            return 2;
    for (int i = 0; i < ni0; i++) {
        if (!strcmp(il[i], "all")) {
            for (int k = 0; k < TQ_ISA_COUNT; k++)
                if (tq_cpu_supports((tq_isa)k))
                    isas[ni++] = (tq_isa)k;
            break;
        }
        int found = -1;
        for (int k = 0; k < TQ_ISA_COUNT; k++)
            if (!strcmp(il[i], tq_isa_name((tq_isa)k)))
                found = k;
        if (found < 0)
            return cli_error(cmd, TQ_OK, "--isa '%s' is not valid (valid: scalar, avx2, avx512, all)",
                             il[i]),
                   2;
        if (!tq_cpu_supports((tq_isa)found))
            return cli_error(cmd, TQ_OK, "--isa %s: this CPU cannot run it", il[i]), 1;
        if (ni < TQ_ISA_COUNT)
            isas[ni++] = (tq_isa)found;
    }

    int maxd = 0;
    for (int i = 0; i < nd; i++)
        maxd = dims[i] > maxd ? dims[i] : maxd;
    if ((double)rows * maxd > (double)(1 << 26))
        return cli_error(cmd, TQ_OK,
                         "--rows %ld x head_dim %d = %.3g values per buffer is too large "
                         "(at most 67108864: the bench keeps 7 buffers of that size)",
                         rows, maxd, (double)rows * maxd),
               2;

    /* machine line */
    char model[256] = "unknown CPU";
    FILE *ci = fopen("/proc/cpuinfo", "r");
    if (ci) {
        char line[512];
        while (fgets(line, sizeof(line), ci))
            if (!strncmp(line, "model name", 10)) {
                const char *p = strchr(line, ':');
                if (p) {
                    snprintf(model, sizeof(model), "%s", p + 2);
                    model[strcspn(model, "\n")] = 0;
                }
                break;
            }
        fclose(ci);
    }
    printf("tq kv-bench: %s, %ld online CPUs, default kernels %s; %ld rows x %ld runs (median)\n",
           model, ncpu, tq_isa_name(tq_cpu_isa()), rows, runs);
    printf("row = one (token, kv-head) K+V pair; GB/s = fp32 bytes (2*head_dim*4 per row) per "
           "second; xcpy = memcpy time / codec time for the same fp32 bytes, same threads, timed back to "
           "back in each run (median of the per-run ratios); >1 = faster than memcpy\n\n");

    const size_t nf = (size_t)rows * (size_t)maxd;
    float *xk = malloc(nf * 4), *xv = malloc(nf * 4), *ok = malloc(nf * 4), *ov = malloc(nf * 4);
    uint8_t *ek = malloc(nf * 4), *ev = malloc(nf * 4), *cpy = malloc(nf * 8);
    double *t_enc = malloc((size_t)runs * sizeof(double)), *t_dec = malloc((size_t)runs * sizeof(double)),
           *t_cpy = malloc((size_t)runs * sizeof(double)),
           *r_enc = malloc((size_t)runs * sizeof(double)), *r_dec = malloc((size_t)runs * sizeof(double));
    tq_pool *pools[MAX_LIST] = {0};
    int rc = 0;
    if (!xk || !xv || !ok || !ov || !ek || !ev || !cpy || !t_enc || !t_dec || !t_cpy || !r_enc ||
        !r_dec) {
        rc = cli_error(cmd, TQ_OK, "out of memory for %ld rows of head_dim %d", rows, maxd);
        goto done;
    }
    for (int i = 0; i < nt; i++) {
        tq_status st = tq_pool_create(threads[i], &pools[i]);
        if (st != TQ_OK) {
            rc = cli_error(cmd, st, "thread pool of %d", threads[i]);
            goto done;
        }
    }

    printf("%-12s %4s %-7s %3s | %9s %7s %5s | %9s %7s %5s | %7s | %6s\n", "scheme", "d", "isa", "thr",
           "enc row/s", "GB/s", "xcpy", "dec row/s", "GB/s", "xcpy", "cpyGB/s", "B/row");
    for (int di = 0; di < nd; di++) {
        const int d = dims[di];
        rng_state = 20261129u + (uint64_t)d;
        fill(xk, rows, d, 0);
        fill(xv, rows, d, 0);
        const double fbytes = (double)rows * 2.0 * d * 4.0;
        for (int si = 0; si < ns; si++) {
            const tq_kv_scheme s = schemes[si];
            size_t kb = 0, vb = 0;
            tq_kv_row_bytes(s, d, &kb, &vb);
            char name[32];
            tq_kv_scheme_name(s, name, sizeof(name));
            for (int ii = 0; ii < ni; ii++)
                for (int ti = 0; ti < nt; ti++) {
                    tq_pool *p = threads[ti] > 1 ? pools[ti] : NULL;
                    memcpy_job mj = {{(const uint8_t *)xk, (const uint8_t *)xv}, cpy,
                                     (size_t)rows * (size_t)d * 4};
                    tq_status st = TQ_OK;
                    for (int r = 0; r < runs && st == TQ_OK; r++) {
                        double t0 = now_s();
                        tq_pool_run(p, memcpy_task, &mj);
                        double t1 = now_s();
                        st = tq_kv_encode_isa(s, 0, d, TQ_DTYPE_F32, xk, rows, ek, nf * 4, p, isas[ii]);
                        if (st == TQ_OK)
                            st = tq_kv_encode_isa(s, 1, d, TQ_DTYPE_F32, xv, rows, ev, nf * 4, p,
                                                  isas[ii]);
                        double t2 = now_s();
                        if (st == TQ_OK)
                            st = tq_kv_decode_isa(s, 0, d, ek, rows, ok, (int64_t)nf, p, isas[ii]);
                        if (st == TQ_OK)
                            st = tq_kv_decode_isa(s, 1, d, ev, rows, ov, (int64_t)nf, p, isas[ii]);
                        double t3 = now_s();
                        t_cpy[r] = t1 - t0;
                        t_enc[r] = t2 - t1;
                        t_dec[r] = t3 - t2;
                    }
                    if (st != TQ_OK) {
                        rc = cli_error(cmd, st, "%s d=%d", name, d);
                        goto done;
                    }
                    /* xcpy: median over runs of the per-run ratio (memcpy and codec timed back
                     * to back), more robust on a shared machine than a ratio of medians */
                    for (int r = 0; r < runs; r++) {
                        r_enc[r] = t_cpy[r] / t_enc[r];
                        r_dec[r] = t_cpy[r] / t_dec[r];
                    }
                    const double tc = median(t_cpy, (int)runs), te = median(t_enc, (int)runs),
                                 td = median(t_dec, (int)runs);
                    const double xe = median(r_enc, (int)runs), xd = median(r_dec, (int)runs);
                    printf("%-12s %4d %-7s %3d | %9.3g %7.2f %5.2f | %9.3g %7.2f %5.2f | %7.2f | %6zu\n",
                           name, d, tq_isa_name(isas[ii]), threads[ti], rows / te, fbytes / te * 1e-9,
                           xe, rows / td, fbytes / td * 1e-9, xd, fbytes / tc * 1e-9,
                           kb + vb);
                    if (cli_flush()) { /* stdout is gone: stop (tq.c says why) */
                        rc = 1;
                        goto done;
                    }
                }
        }
    }

    if (quality) {
        printf("\nround trip (default kernels, %ld rows): MSE = mean (x - x')^2, cos = mean per-row "
               "cosine; ratio = 2*head_dim*2 (bf16) / bytes per row\n", rows);
        printf("%-12s %4s %6s | %-9s %9s %8s %9s %8s\n", "scheme", "d", "ratio", "data", "K MSE",
               "K cos", "V MSE", "V cos");
        for (int di = 0; di < nd; di++) {
            const int d = dims[di];
            for (int outl = 0; outl < 2; outl++) {
                rng_state = 7777u + (uint64_t)d * 2 + (uint64_t)outl;
                fill(xk, rows, d, outl);
                fill(xv, rows, d, outl);
                for (int si = 0; si < ns; si++) {
                    const tq_kv_scheme s = schemes[si];
                    size_t kb = 0, vb = 0;
                    char name[32];
                    tq_kv_row_bytes(s, d, &kb, &vb);
                    tq_kv_scheme_name(s, name, sizeof(name));
                    double mse[2] = {0, 0}, cs[2] = {0, 0};
                    for (int side = 0; side < 2; side++) {
                        const float *x = side ? xv : xk;
                        float *o = side ? ov : ok;
                        uint8_t *e = side ? ev : ek;
                        tq_status st = tq_kv_encode_isa(s, side, d, TQ_DTYPE_F32, x, rows, e, nf * 4,
                                                        pools[nt - 1], tq_cpu_isa());
                        if (st == TQ_OK)
                            st = tq_kv_decode_isa(s, side, d, e, rows, o, (int64_t)nf, pools[nt - 1],
                                                  tq_cpu_isa());
                        if (st != TQ_OK) {
                            rc = cli_error(cmd, st, "%s d=%d", name, d);
                            goto done;
                        }
                        double se = 0, csum = 0;
                        for (int64_t r = 0; r < rows; r++) {
                            double xx = 0, oo = 0, xo = 0;
                            for (int j = 0; j < d; j++) {
                                const double a = x[r * d + j], b = o[r * d + j];
                                se += (a - b) * (a - b);
                                xx += a * a;
                                oo += b * b;
                                xo += a * b;
                            }
                            csum += xo / (sqrt(xx * oo) + 1e-300);
                        }
                        mse[side] = se / ((double)rows * d);
                        cs[side] = csum / (double)rows;
                    }
                    printf("%-12s %4d %6.3f | %-9s %9.3g %8.5f %9.3g %8.5f\n", name, d,
                           (double)(2 * d * 2) / (double)(kb + vb), outl ? "outlier" : "gaussian",
                           mse[0], cs[0], mse[1], cs[1]);
                }
            }
        }
    }
done:
    for (int i = 0; i < nt; i++)
        tq_pool_free(pools[i]);
    free(xk);
    free(xv);
    free(ok);
    free(ov);
    free(ek);
    free(ev);
    free(cpy);
    free(t_enc);
    free(t_dec);
    free(t_cpy);
    free(r_enc);
    free(r_dec);
    return rc;
}
