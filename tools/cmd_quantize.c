/* cmd_quantize.c -- `tq quantize`: the streaming weights pipeline (include/turboquant/
 * quantize.h): optional rotation fold, GGUF block types or unquantized safetensors. */
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "cli.h"

static void usage(void)
{
    printf("usage: tq quantize -m SRC -o OUT --format gguf|safetensors|mlx [--type T]\n"
           "                   [--bits B --group G] [--rotate]\n"
           "                   [--mix pure|llama] [--ref-blocks] [--seed N] [--keep-embed]\n"
           "                   [--force]\n"
           "                   [--dequantize-source]\n"
           "                   [--stats] [-q]\n\n"
           "Stream SRC tensor by tensor into OUT (written under a temporary name, renamed at the\n"
           "end: an interrupted run leaves nothing at OUT). Provenance (version, this command,\n"
           "source fingerprint, transform, seed, deviations) goes into OUT's metadata.\n\n"
           "  -m SRC              GGUF file (for --format gguf) or Hugging Face safetensors\n"
           "                      directory (for --format safetensors)\n"
           "  -o OUT              output GGUF file or directory\n"
           "  --format F          gguf (metadata + tokenizer copied; llama.cpp loads it) or\n"
           "                      safetensors (HF directory, config/tokenizer files copied)\n"
           "  --format mlx        mlx-lm's affine layout from a safetensors or GGUF source (llama,\n"
           "                      mistral, qwen2, qwen3, gemma3): matrices as\n"
           "                      uint32 codes + bf16 scales/biases per group (--bits 2 3 4 5 6 8,\n"
           "                      default 4; --group 32 64 128, default 64), norms bf16\n"
           "  --type T            gguf: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 Q4_K Q5_K Q6_K\n"
           "                      IQ4_NL for the weight matrices (1-D tensors stay F32; rows\n"
           "                      that are not a block multiple fall back like llama-quantize:\n"
           "                      Q4_K->Q5_0,\n"
           "                      Q5_K->Q5_1, Q6_K->Q8_0); safetensors: F32 F16 BF16 (default\n"
           "                      Q8_0 / BF16); Q4_K_M Q5_K_M Q4_K_S Q5_K_S: llama-quantize's\n"
           "                      file types of those names (= --type Q4_K --mix llama, ...)\n"
           "  --mix M             gguf: pure (default: every matrix in --type) or llama: the\n"
           "                      per-tensor types llama-quantize picks for that file type\n"
           "                      without an imatrix (lm_head / tied embedding Q6_K, or Q8_0\n"
           "                      where rows are not a multiple of 256; Q4_K/Q5_K: attn_v and\n"
           "                      ffn_down of 1/8 + 1/8 + every third layer in Q6_K, = *_K_M;\n"
           "                      IQ4_NL: ffn_down of the first 1/8 and attn_v when heads /\n"
           "                      kv heads >= 4 in Q5_K)\n"
           "  --rotate            fold the rotation: untie embeddings, RMSNorm gains into the\n"
           "                      linears, R1 (Hadamard, hidden) on the residual stream, R2 per\n"
           "                      head on v/o (docs/FORMAT.md \"Rotation fold\"); gemma3: R1 is\n"
           "                      not exact and is skipped (R2 only)\n"
           "  --ref-blocks        Q4_0 Q5_0 Q4_1 Q5_1 by ggml's reference rules (llama-quantize's\n"
           "                      bytes without an imatrix) instead of our search of the block\n"
           "                      scale, which never has a larger weighted error per block\n"
           "  --seed N            rotation seed (default 42)\n"
           "  --keep-embed        embedding and lm_head as F16 (gguf)\n"
           "  --force             replace an existing OUT\n"
           "  --dequantize-source allow --rotate on a source quantized below 8 bits (folds the\n"
           "                      dequantized values)\n"
           "  --stats             per tensor: max|w| and excess kurtosis before/after the fold,\n"
           "                      relative RMS quantization error (stdout, one line each)\n"
           "  -q                  no progress bar\n");
}

typedef struct prog {
    double t0;
    int quiet;
    int tty;
} prog;

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static void on_progress(void *vp, const tq_quantize_progress *p)
{
    prog *g = vp;
    if (g->quiet)
        return;
    const double dt = now_s() - g->t0;
    const double mbs = dt > 0 ? (double)p->bytes_done / 1e6 / dt : 0;
    const double eta = p->bytes_done > 0 ? dt * ((double)p->bytes_in / (double)p->bytes_done - 1)
                                         : 0;
    const int width = 30;
    const int fill = p->total ? (int)(width * p->done / p->total) : width;
    char bar[64];
    for (int i = 0; i < width; i++)
        bar[i] = i < fill ? '#' : '.';
    bar[width] = 0;
    if (g->tty || p->done == p->total)
        fprintf(stderr, "%s[%s] %lld/%lld tensors  %.1f MB/s  ETA %.0f s  %-40.40s%s",
                g->tty ? "\r" : "", bar, (long long)p->done, (long long)p->total, mbs, eta,
                p->tensor, (g->tty && p->done < p->total) ? "" : "\n");
}

static void on_tensor(void *vp, const tq_quantize_tensor_stats *s)
{
    (void)vp;
    printf("stat %-48s %-5s -> %-5s n=%-9lld fold=%d maxabs %.4g -> %.4g  kurt %.3f -> %.3f  "
           "qerr %.4g\n",
           s->name, s->src_type, s->out_type, (long long)s->n, s->folded, s->maxabs_in,
           s->maxabs_out, s->kurt_in, s->kurt_out, s->rel_rmse);
}

static int parse_type(const char *v)
{
    static const char *const names[] = {"F32", "F16", "BF16", "Q8_0", "Q4_0", "Q4_1",
                                        "Q5_0", "Q5_1", "Q4_K", "Q5_K", "Q6_K", "IQ4_NL"};
    for (int t = 0; t < TQ_GGML_TYPE_LIMIT; t++)
        for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++)
            if (!strcasecmp(v, names[i]) && !strcmp(tq_ggml_type_name(t), names[i]))
                return t;
    return -1;
}

int cmd_quantize(int argc, char **argv)
{
    const char *cmd = "quantize";
    if (cli_is_help(argc, argv)) {
        usage();
        return 0;
    }
    tq_quantize_opts o;
    tq_quantize_opts_default(&o);
    const char *type = NULL, *format = NULL, *mix = NULL;
    int quiet = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!strcmp(a, "--rotate"))
            o.rotate = 1;
        else if (!strcmp(a, "--keep-embed"))
            o.keep_embed = 1;
        else if (!strcmp(a, "--force"))
            o.force = 1;
        else if (!strcmp(a, "--dequantize-source"))
            o.dequantize_source = 1;
        else if (!strcmp(a, "--stats"))
            o.stats = 1;
        else if (!strcmp(a, "--ref-blocks"))
            o.ref_blocks = 1;
        else if (!strcmp(a, "-q"))
            quiet = 1;
        else if (!strcmp(a, "-m") || !strcmp(a, "-o") || !strcmp(a, "--format") ||
                 !strcmp(a, "--type") || !strcmp(a, "--seed") || !strcmp(a, "--bits") ||
                 !strcmp(a, "--group") || !strcmp(a, "--mix")) {
            if (!v) {
                fprintf(stderr, "tq quantize: '%s' needs a value (see tq quantize --help)\n", a);
                return 2;
            }
            i++;
            if (!strcmp(a, "-m"))
                o.src = v;
            else if (!strcmp(a, "-o"))
                o.out = v;
            else if (!strcmp(a, "--format"))
                format = v;
            else if (!strcmp(a, "--type"))
                type = v;
            else if (!strcmp(a, "--mix")) {
                if (strcmp(v, "pure") && strcmp(v, "llama")) {
                    fprintf(stderr, "tq quantize: --mix '%s': valid: pure, llama\n", v);
                    return 2;
                }
                mix = v;
            }
            else if (!strcmp(a, "--bits")) {
                if (cli_int(cmd, a, v, 2, 8, &o.bits))
                    return 2;
            } else if (!strcmp(a, "--group")) {
                if (cli_int(cmd, a, v, 32, 128, &o.group))
                    return 2;
            } else {
                int64_t s;
                if (cli_i64(cmd, a, v, 0, INT64_MAX, &s))
                    return 2;
                o.seed = (uint64_t)s;
            }
        } else {
            fprintf(stderr, "tq quantize: unknown flag '%s' (see tq quantize --help)\n", a);
            return 2;
        }
    }
    if (!o.src || !o.out || !format) {
        fprintf(stderr, "tq quantize: -m SRC, -o OUT and --format are required (see tq quantize "
                        "--help)\n");
        return 2;
    }
    if (!strcmp(format, "gguf"))
        o.format = TQ_QFORMAT_GGUF;
    else if (!strcmp(format, "safetensors"))
        o.format = TQ_QFORMAT_SAFETENSORS;
    else if (!strcmp(format, "mlx"))
        o.format = TQ_QFORMAT_MLX;
    else {
        fprintf(stderr, "tq quantize: --format '%s': valid: gguf, safetensors, mlx\n",
                format);
        return 2;
    }
    o.type = o.format == TQ_QFORMAT_GGUF ? TQ_GGML_Q8_0 : TQ_GGML_BF16;
    o.mix = mix && !strcmp(mix, "llama") ? TQ_QMIX_LLAMA : TQ_QMIX_PURE;
    if (type && strlen(type) == 6 && (type[5] == 'M' || type[5] == 'S' || type[5] == 'm' ||
                                      type[5] == 's') && type[4] == '_') {
        char base[8];
        snprintf(base, sizeof(base), "%.4s", type);
        if (mix && !strcmp(mix, "pure")) {
            fprintf(stderr, "tq quantize: --type %s is a llama-quantize mix; --mix pure "
                            "contradicts it\n", type);
            return 2;
        }
        if ((o.type = parse_type(base)) == TQ_GGML_Q4_K || o.type == TQ_GGML_Q5_K) {
            o.mix = type[5] == 'S' || type[5] == 's' ? TQ_QMIX_LLAMA_S : TQ_QMIX_LLAMA;
            type = NULL;
        } else
            o.type = -1;
    }
    if (o.type < 0 || (type && (o.type = parse_type(type)) < 0)) {
        fprintf(stderr, "tq quantize: --type '%s': valid: F32 F16 BF16 Q8_0 Q4_0 Q4_1 Q5_0 Q5_1 "
                        "Q4_K Q5_K Q6_K IQ4_NL, and the mixes Q4_K_M Q5_K_M Q4_K_S Q5_K_S\n", type);
        return 2;
    }
    if (o.mix != TQ_QMIX_PURE && o.format != TQ_QFORMAT_GGUF) {
        fprintf(stderr, "tq quantize: --mix llama / *_K_M / *_K_S: GGUF output only\n");
        return 2;
    }
    /* the command line, for the provenance */
    size_t len = 3;
    for (int i = 0; i < argc; i++)
        len += strlen(argv[i]) + 1;
    char *line = malloc(len);
    if (!line)
        return cli_error(cmd, TQ_E_NOMEM, "out of memory"), 1;
    snprintf(line, len, "tq");
    for (int i = 0; i < argc; i++) {
        strcat(line, " ");
        strcat(line, argv[i]);
    }
    o.command_line = line;
    prog g = {now_s(), quiet, isatty(2)};
    o.on_progress = on_progress;
    o.on_tensor = o.stats ? on_tensor : NULL;
    o.ctx = &g;
    tq_quantize_result r;
    const tq_status st = tq_quantize(&o, &r);
    free(line);
    if (st)
        return cli_error(cmd, st, "%s -> %s failed (no new output at %s)", o.src, o.out, o.out),
               1;
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    const double dt = now_s() - g.t0;
    fprintf(stderr, "tq quantize: %s: %lld tensors, %.1f MB -> %.1f MB in %.1f s (%.1f MB/s), "
                    "%lld in a fallback type, peak RSS %.1f MB\n"
                    "transform: %s\n",
            o.out, (long long)r.n_tensors, r.bytes_in / 1e6, r.bytes_out / 1e6, dt,
            dt > 0 ? r.bytes_in / 1e6 / dt : 0, (long long)r.n_fallback, ru.ru_maxrss / 1024.0,
            r.transform);
    return 0;
}
