/* cmd_bench_cuda.c -- `tq bench --cuda`: the engine's forward on GPU 0 (tq_cuda_session): for each
 * KV scheme and cache depth, fill the cache by a chunked GPU prefill of seeded random token ids
 * (prefill tok/s), then time single-token greedy decode steps, logits to the host included
 * (decode tok/s = 1 / median step time). --check N first compares the GPU logits with the CPU
 * engine's over N seeded prompts (same cache scheme; f32 for a bf16 GPU cache): top-1, KL. */
#include <math.h>
#include <stdint.h>
#include <time.h>

#include "cli.h"
#include "model_opts.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tq bench --cuda -m MODEL [--kv LIST] [--depths LIST] [--decode N] [--check N]\n"
            "                [--seed S] [--merge M] [--no-gemv] [--no-graph] [--no-pdl] [--enc-two]\n"
            "                [--no-wide-head]\n"
            "                [--weights native|bf16] [--prefill-qgemv] [--prefill-chunk N]\n"
            "                [--device-sampler] [--inputs kv|bf16|f32] [--csv FILE]\n"
            "  the forward pass on GPU 0: GEMV kernels for decode, cuBLAS / quantized GEMV for\n"
            "  prefill, the device KV cache.\n"
            "  -m, --model   GGUF file or safetensors directory (Llama-family blocks)\n"
            "  --kv LIST     comma list of cache schemes (default bf16,kv8,turbo:k8v3); GPU schemes:\n"
            "                f16, bf16, kv8, kv4, turbo:k8v3, k4v3, k8v4, k8v2, k4v2, k4v4\n"
            "  --depths LIST cache depths before decoding (default 1024,8192,32768; may exceed the\n"
            "                model's trained context: speed only)\n"
            "  --decode N    timed decode steps per depth (default 64)\n"
            "  --check N     first compare GPU and CPU logits on N prompts (default 0)\n"
            "  --seed S      seed of the random prompt tokens (default 1)\n"
            "  --merge M     split merge of the attention: auto (default), fused, kernel, cluster\n"
            "  --no-gemv     decode linears through cuBLAS + separate elementwise kernels (A/B)\n"
            "  --no-graph    decode steps launch kernel by kernel, not as one CUDA graph (A/B)\n"
            "  --no-pdl      no programmatic dependent launch (decode GEMVs, reduce) (A/B)\n"
            "  --enc-two     K and V rows encoded in two launches per append (before 4df7c24) (A/B)\n"
            "  --no-wide-head  a native head decodes through the fused decode job (one warp per\n"
            "                row) instead of the wide quantized GEMV (A/B)\n"
            "  --weights W   bf16 (default: everything dequantized to bf16 at load) or native (a\n"
            "                quantized GGUF's Q8_0/Q4_0/Q4_1/Q4_K/Q6_K matrices stay packed on the\n"
            "                GPU, quantized GEMV with q8 activations; other formats as bf16). bf16\n"
            "                is the default because it decodes faster on the H200 today (SmolLM2:\n"
            "                docs/results.md, native GPU weights); native uses ~1/3 the memory\n"
            "  --prefill-qgemv  native prefill products through the quantized GEMV (8 tokens per\n"
            "                launch) instead of dequantize-to-bf16 + cuBLAS (A/B)\n"
            "  --prefill-chunk N  tokens per forward call of the prefill, 1..256 (default 256;\n"
            "                64 / GQA group = the chunk before 2026-12-03) (A/B)\n"
            "  --device-sampler  decode picks the greedy token on the GPU (only the id is copied\n"
            "                back) instead of copying the logits and taking the argmax on the host\n"
            "  --inputs I    inputs of the bf16-weight products: kv (default: the K / V projections\n"
            "                take f32 activations, the rest bf16), bf16 (all; before 2026-12-03),\n"
            "                f32 (all f32; prefill: hi + lo bf16 GEMMs) (A/Bs of the cache drift)\n"
            "  --csv FILE    also write scheme,depth,prefill_tok_s,decode_tok_s,decode_ms rows\n");
}

/* the session options from the flags (one command per process) */
static tq_cuda_session_opts g_opts;
static int dev_sampler; /* --device-sampler */

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static uint64_t rng_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static int argmax(const float *x, int n)
{
    int b = 0;
    for (int i = 1; i < n; i++)
        if (x[i] > x[b])
            b = i;
    return b;
}

static double kl(const float *p, const float *q, int n)
{
    double mp = -INFINITY, mq = -INFINITY, zp = 0, zq = 0, k = 0;
    for (int i = 0; i < n; i++) {
        mp = p[i] > mp ? p[i] : mp;
        mq = q[i] > mq ? q[i] : mq;
    }
    for (int i = 0; i < n; i++) {
        zp += exp(p[i] - mp);
        zq += exp(q[i] - mq);
    }
    for (int i = 0; i < n; i++) {
        const double lp = p[i] - mp - log(zp), lq = q[i] - mq - log(zq);
        k += exp(lp) * (lp - lq);
    }
    return k;
}

/* GPU vs CPU on n_prompts random prompts of 64 tokens + 16 greedy steps */
static int check(const char *cmd, tq_model *m, tq_kv_scheme kvs, const char *name, int n_prompts, uint64_t seed,
                 int vocab)
{
    int rc = 1;
    tq_session *cs = NULL;
    tq_cuda_session *gs = NULL;
    tq_session_opts so;
    tq_session_opts_default(&so);
    /* reference: the CPU engine with the same cache scheme; for a bf16 GPU cache the f32 CPU cache */
    if (kvs.kind == TQ_KV_BF16)
        tq_kv_scheme_parse("f32", &so.kv);
    else
        so.kv = kvs;
    so.n_ctx = 128;
    float *lc = malloc((size_t)vocab * 4), *lg = malloc((size_t)vocab * 4);
    int32_t prompt[64];
    tq_status st;
    if (!lc || !lg) {
        cli_error(cmd, TQ_E_NOMEM, "out of memory");
        goto done;
    }
    if ((st = tq_session_create(m, &so, &cs)) || (st = tq_cuda_session_create(m, kvs, 128, &gs)) ||
        (st = tq_cuda_session_set_opts(gs, &g_opts))) {
        cli_error(cmd, st, "check: session");
        goto done;
    }
    int n = 0, agree = 0;
    double sum = 0, worst = 0;
    for (int p = 0; p < n_prompts; p++) {
        uint64_t s = seed * 1000 + (uint64_t)p;
        for (int i = 0; i < 64; i++)
            prompt[i] = (int32_t)(rng_next(&s) % (uint64_t)vocab);
        tq_session_reset(cs);
        tq_cuda_session_reset(gs);
        const int32_t *tok = prompt;
        int len = 64;
        int32_t next;
        for (int step = 0; step < 16; step++) {
            if ((st = tq_session_eval(cs, tok, len, lc)) || (st = tq_cuda_session_eval(gs, tok, len, lg))) {
                cli_error(cmd, st, "check: eval");
                goto done;
            }
            const double k = kl(lc, lg, vocab);
            next = argmax(lc, vocab);
            agree += next == argmax(lg, vocab);
            sum += k;
            worst = k > worst ? k : worst;
            n++;
            tok = &next;
            len = 1;
        }
    }
    printf("check %-12s GPU vs CPU (%s cache): %d steps, top-1 equal %d/%d, KL mean %.3e max %.3e\n", name,
           kvs.kind == TQ_KV_BF16 ? "f32" : name, n, agree, n, sum / n, worst);
    rc = 0;
done:
    tq_cuda_session_free(gs);
    tq_session_free(cs);
    free(lc);
    free(lg);
    return rc;
}

int cmd_bench_cuda(int argc, char **argv)
{
    const char *cmd = "bench --cuda";
    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    const char *model_path = NULL, *kv_list = "bf16,kv8,turbo:k8v3", *depth_list = "1024,8192,32768", *csv_path = NULL;
    long decode = 64, n_check = 0, seed = 1;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_BF16; /* dense matrices: the GPU forward takes bf16 */
    /* bf16 by default: on the H200 the packed-weight GEMVs decode 10-20% slower than bf16 on
     * SmolLM2 (docs/results.md "native quantized weights in the GPU forward"); --weights native */
    const char *weights = "bf16";
    if (cli_weights(cmd, weights, &mo))
        return 2;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--cuda"))
            continue;
        if ((!strcmp(a, "-m") || !strcmp(a, "--model")) && v)
            model_path = argv[++i];
        else if (!strcmp(a, "--kv") && v)
            kv_list = argv[++i];
        else if (!strcmp(a, "--depths") && v)
            depth_list = argv[++i];
        else if (!strcmp(a, "--csv") && v)
            csv_path = argv[++i];
        else if (!strcmp(a, "--weights") && v) {
            weights = argv[++i];
            if (strcmp(weights, "native") && strcmp(weights, "bf16")) {
                fprintf(stderr, "tq %s: --weights %s (the GPU forward runs native or bf16)\n", cmd, weights);
                return 2;
            }
            if (cli_weights(cmd, weights, &mo))
                return 2;
            if (!strcmp(weights, "native"))
                mo.weight_store = TQ_STORE_AUTO; /* a bf16 safetensors model stays runnable */
        } else if (!strcmp(a, "--no-gemv"))
            g_opts.no_gemv = 1;
        else if (!strcmp(a, "--no-graph"))
            g_opts.no_graph = 1;
        else if (!strcmp(a, "--no-pdl"))
            g_opts.kv.no_pdl = 1;
        else if (!strcmp(a, "--enc-two"))
            g_opts.kv.enc_two = 1;
        else if (!strcmp(a, "--no-wide-head"))
            g_opts.no_wide_head = 1;
        else if (!strcmp(a, "--prefill-qgemv"))
            g_opts.prefill_qgemv = 1;
        else if (!strcmp(a, "--device-sampler"))
            dev_sampler = 1;
        else if (!strcmp(a, "--inputs") && v) {
            const char *in = argv[++i];
            if (!strcmp(in, "kv"))
                g_opts.inputs = TQ_CUDA_IN_KV_F32;
            else if (!strcmp(in, "bf16"))
                g_opts.inputs = TQ_CUDA_IN_BF16;
            else if (!strcmp(in, "f32"))
                g_opts.inputs = TQ_CUDA_IN_F32;
            else {
                fprintf(stderr, "tq %s: --inputs %s (kv, bf16 or f32)\n", cmd, in);
                return 2;
            }
        } else if (!strcmp(a, "--prefill-chunk")) {
            long pc = 0;
            if (cli_long(cmd, a, v, 1, TQ_CUDA_PREFILL_CHUNK, &pc))
                return 2;
            g_opts.prefill_chunk = (int)pc;
            i++;
        }
        else if (!strcmp(a, "--merge") && v) {
            tq_status ms = tq_cuda_merge_parse(argv[++i], &g_opts.kv.merge);
            if (ms)
                return cli_error(cmd, ms, "--merge"), 2;
        } else if (!strcmp(a, "--decode")) {
            if (cli_long(cmd, a, v, 1, 100000, &decode))
                return 2;
            i++;
        } else if (!strcmp(a, "--check")) {
            if (cli_long(cmd, a, v, 0, 1000, &n_check))
                return 2;
            i++;
        } else if (!strcmp(a, "--seed")) {
            if (cli_long(cmd, a, v, 0, INT64_MAX, &seed))
                return 2;
            i++;
        } else {
            fprintf(stderr, "tq %s: unknown or incomplete option '%s' (see tq bench --cuda --help)\n", cmd, a);
            return 2;
        }
    }
    if (!model_path) {
        fprintf(stderr, "tq %s: -m MODEL is required (see tq bench --cuda --help)\n", cmd);
        return 2;
    }
    int64_t depths[16];
    int n_depths = 0;
    if (cli_i64_list(cmd, "--depths", depth_list, 0, 1L << 30, depths, 16, &n_depths))
        return 2;
    if (!tq_cuda_compiled() || tq_cuda_available() < 1) {
        fprintf(stderr, "tq %s: %s\n", cmd,
                !tq_cuda_compiled() ? "this build has no CUDA support" : "no CUDA device found");
        return 1;
    }
    char dev[128];
    tq_cuda_device_name(dev, sizeof(dev));
    tq_model *m = NULL;
    tq_status st = tq_model_load(model_path, &mo, &m);
    if (st)
        return cli_error(cmd, st, "cannot load %s", model_path);
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    long max_depth = 0;
    for (int i = 0; i < n_depths; i++)
        max_depth = depths[i] > max_depth ? depths[i] : max_depth;
    const int64_t n_ctx = max_depth + decode + 3; /* + 2 untimed warm-up steps */
    printf("model %s: %s, %d layers, dim %d, %d/%d heads, head_dim %d, vocab %d (trained context %d)\n", model_path,
           mi.arch_name, mi.n_layers, mi.dim, mi.n_heads, mi.n_kv_heads, mi.head_dim, mi.vocab_size, mi.max_ctx);
    printf("device %s; decode = 1 token per step, batch 1, %s; prefill chunk %d tokens; single-token "
           "linears: %s; step: %s%s; split merge %d (0 auto, 1 fused, 2 kernel, 3 cluster); bf16 products' "
           "inputs: %s\n", dev,
           dev_sampler ? "greedy token picked on the GPU (--device-sampler)" : "logits copied to the host every step",
           g_opts.prefill_chunk ? g_opts.prefill_chunk : TQ_CUDA_PREFILL_CHUNK,
           g_opts.no_gemv ? "cuBLAS (--no-gemv)" : "GEMV kernel",
           g_opts.no_graph ? "kernel by kernel (--no-graph)" : "one CUDA graph",
           g_opts.kv.no_pdl ? ", no PDL (--no-pdl)" : "", (int)g_opts.kv.merge,
           g_opts.inputs == TQ_CUDA_IN_BF16 ? "bf16 (--inputs bf16)"
           : g_opts.inputs == TQ_CUDA_IN_F32 ? "f32 (--inputs f32)" : "f32 for K / V, bf16 otherwise");
    if (!strcmp(weights, "native"))
        printf("native prefill products: %s\n", g_opts.prefill_qgemv ? "quantized GEMV, 8 tokens per launch "
               "(--prefill-qgemv)" : "dequantized to bf16 + cuBLAS");
    FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
    if (csv_path && !csv) {
        tq_model_free(m);
        return cli_error(cmd, TQ_E_IO, "cannot write %s", csv_path);
    }
    if (csv)
        fprintf(csv, "scheme,depth,prefill_tok_s,decode_tok_s,decode_ms_median,decode_ms_mean,weights\n");
    int rc = 0;
    int32_t *toks = malloc((size_t)(max_depth + 1) * sizeof(int32_t));
    float *logits = malloc((size_t)mi.vocab_size * sizeof(float));
    double *ts = malloc((size_t)decode * sizeof(double));
    if (!toks || !logits || !ts) {
        rc = cli_error(cmd, TQ_E_NOMEM, "out of memory");
        goto done;
    }
    char buf[512];
    snprintf(buf, sizeof(buf), "%s", kv_list);
    for (char *name = strtok(buf, ","); name && !rc; name = strtok(NULL, ",")) {
        tq_kv_scheme kvs;
        if ((st = tq_kv_scheme_parse(name, &kvs))) {
            rc = cli_error(cmd, st, "--kv '%s'", name);
            break;
        }
        if (n_check && check(cmd, m, kvs, name, (int)n_check, (uint64_t)seed, mi.vocab_size)) {
            rc = 1;
            break;
        }
        tq_cuda_session *gs = NULL;
        if ((st = tq_cuda_session_create(m, kvs, n_ctx, &gs)) || (st = tq_cuda_session_set_opts(gs, &g_opts))) {
            rc = cli_error(cmd, st, "GPU session for --kv %s", name);
            break;
        }
        size_t wb = 0, kb = 0;
        tq_cuda_session_bytes(gs, &wb, &kb);
        printf("-- kv %s: weights %.1f MB (--weights %s: %s), KV cache %.1f MB for %lld tokens\n", name, wb / 1e6,
               weights, tq_cuda_session_kernels(gs), kb / 1e6, (long long)n_ctx);
        for (int di = 0; di < n_depths && !rc; di++) {
            tq_cuda_session_reset(gs);
            uint64_t s = (uint64_t)seed * 7919 + (uint64_t)di;
            for (long i = 0; i <= depths[di]; i++)
                toks[i] = (int32_t)(rng_next(&s) % (uint64_t)mi.vocab_size);
            double pf = 0.0;
            if (depths[di] > 0) {
                const double t0 = now_s();
                if ((st = tq_cuda_session_eval(gs, toks, depths[di], NULL)) || (st = tq_cuda_session_sync(gs))) {
                    rc = cli_error(cmd, st, "prefill to depth %ld", depths[di]);
                    break;
                }
                pf = (double)depths[di] / (now_s() - t0);
            }
            int32_t tok = toks[depths[di]];
            for (long k = 0; k < decode + 2 && !rc; k++) { /* 2 untimed warm-up steps */
                const double t0 = now_s();
                int32_t next = 0;
                st = dev_sampler ? tq_cuda_session_eval_greedy(gs, &tok, 1, NULL, 0, 1.0f, &next)
                                 : tq_cuda_session_eval(gs, &tok, 1, logits);
                if (st) {
                    rc = cli_error(cmd, st, "decode at depth %ld", depths[di]);
                    break;
                }
                const double dt = now_s() - t0;
                if (k >= 2)
                    ts[k - 2] = dt;
                tok = dev_sampler ? next : argmax(logits, mi.vocab_size);
            }
            if (rc)
                break;
            double mean = 0;
            for (long k = 0; k < decode; k++)
                mean += ts[k] / (double)decode;
            qsort(ts, (size_t)decode, sizeof(double), cmp_double);
            const double med = ts[decode / 2];
            printf("kv %-12s depth %7ld: prefill %9.0f tok/s | decode %8.1f tok/s (median %.3f ms/step, mean %.3f, "
                   "%ld steps)\n",
                   name, depths[di], pf, 1.0 / med, med * 1e3, mean * 1e3, decode);
            if (csv)
                fprintf(csv, "%s,%ld,%.1f,%.2f,%.4f,%.4f,%s\n", name, depths[di], pf, 1.0 / med, med * 1e3, mean * 1e3,
                        weights);
            cli_flush();
        }
        long ng = 0, ne = 0, ni = 0;
        tq_cuda_session_graph_stats(gs, &ng, &ne, &ni);
        printf("kv %-12s decode steps: %ld as a CUDA graph (%ld instantiations), %ld eager\n", name, ng, ni, ne);
        tq_cuda_session_free(gs);
    }
done:
    if (csv)
        fclose(csv);
    free(toks);
    free(logits);
    free(ts);
    tq_model_free(m);
    return rc;
}
