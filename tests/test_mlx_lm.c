/* test_mlx_lm.c -- stock mlx-lm loads what `tq quantize --format mlx` writes from SmolLM2's own
 * GGUF, and its logits match tq's engine on the same files (issue 13 item 3's proof).
 *
 * For 4-bit g64 (plain) and 4-bit g64 --rotate --dequantize-source: tq_quantize() writes the MLX
 * directory; the first 20 prompts of tests/data/llamacpp/prompts.json (1..150 tokens) are
 * tokenized with tq's tokenizer; scripts/quant/mlx_lm_logits.py (mlx_lm.utils.load_model, model
 * cast to f32 so that bf16 arithmetic does not enter) writes mlx-lm's logits of every position;
 * tq's engine loads the same directory natively (MLX4g64 f32-act kernels) and computes its own.
 * Checked: last-position top-1 equal on every prompt, top-1 equal on >= 99% of all positions,
 * mean KL(mlx-lm || tq) over all positions < 1e-4. With --bf16, also printed (not checked):
 * the same for mlx-lm as it loads the files (bf16 compute; slow on CPU). Label `model`; skips
 * (77) without the model or without mlx / mlx-lm (pip install "mlx[cpu]" mlx-lm).
 * Args: [--model PATH] [--keep DIR] [--bf16]. */
#include <json-c/json.h>
#include <sys/stat.h>
#include <unistd.h>

#include "t.h"
#include "turboquant.h"
#include "logit_kl.h"

#define N_PROMPTS 20

static int32_t *toks[N_PROMPTS];
static int64_t ntok[N_PROMPTS];

static float *read_all(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    const long sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    float *b = malloc((size_t)sz + 4);
    *n = b ? fread(b, 1, (size_t)sz, f) / 4 : 0;
    fclose(f);
    return b;
}

static int argmax(const float *x, int V)
{
    int b = 0;
    for (int i = 1; i < V; i++)
        b = x[i] > x[b] ? i : b;
    return b;
}

/* compare mlx-lm's logits file against tq on dir; returns 0 if it could run */
static int compare(const char *tag, const char *dir, const char *lg_path, int strict)
{
    size_t nf = 0;
    float *ref = read_all(lg_path, &nf);
    CHECK(ref != NULL, "%s: read %s", tag, lg_path);
    if (!ref)
        return -1;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 2;
    tq_model *m = NULL;
    tq_status st = tq_model_load(dir, &mo, &m);
    CHECK(st == TQ_OK, "%s: tq loads %s: %s", tag, dir, tq_last_error());
    if (st) {
        free(ref);
        return -1;
    }
    tq_model_info info;
    tq_model_get_info(m, &info);
    const int V = info.vocab_size;
    size_t off = 0;
    int64_t pos = 0, agree = 0, last_agree = 0;
    double kl_sum = 0, kl_max = 0;
    for (int p = 0; p < N_PROMPTS && !st; p++) {
        tq_session_opts so;
        tq_session_opts_default(&so);
        tq_kv_scheme_parse("f32", &so.kv);
        so.n_ctx = 512;
        tq_session *s = NULL;
        float *lg = malloc(sizeof(float) * (size_t)ntok[p] * (size_t)V);
        if (!(st = tq_session_create(m, &so, &s)))
            st = tq_session_eval_all(s, toks[p], ntok[p], lg, ntok[p] * V);
        tq_session_free(s);
        CHECK(st == TQ_OK && off + (size_t)(ntok[p] * V) <= nf, "%s: prompt %d: %s", tag, p,
              st ? tq_last_error() : "mlx-lm logits file too short");
        if (st || off + (size_t)(ntok[p] * V) > nf) {
            free(lg);
            break;
        }
        for (int64_t t = 0; t < ntok[p]; t++) {
            const float *a = ref + off + (size_t)(t * V), *b = lg + t * V;
            const double k = logit_kl(a, b, V);
            kl_sum += k;
            kl_max = fmax(kl_max, k);
            const int same = argmax(a, V) == argmax(b, V);
            agree += same;
            if (t == ntok[p] - 1)
                last_agree += same;
            pos++;
        }
        off += (size_t)(ntok[p] * V);
        free(lg);
    }
    printf("%-28s tq native [%s] vs mlx-lm: %lld positions in %d prompts, top-1 %.4f "
           "(last position %lld/%d), KL mean %.3g max %.3g\n", tag, info.native_kernels,
           (long long)pos, N_PROMPTS, pos ? (double)agree / (double)pos : 0.0,
           (long long)last_agree, N_PROMPTS, pos ? kl_sum / (double)pos : 0.0, kl_max);
    if (strict) {
        CHECK(last_agree == N_PROMPTS, "%s: last-position top-1 equal on %lld of %d prompts", tag,
              (long long)last_agree, N_PROMPTS);
        CHECK(pos > 0 && (double)agree >= 0.99 * (double)pos, "%s: top-1 %lld of %lld", tag,
              (long long)agree, (long long)pos);
        CHECK(pos > 0 && kl_sum / (double)pos < 1e-4, "%s: mean KL %.3g (< 1e-4)", tag,
              pos ? kl_sum / (double)pos : 0.0);
    }
    tq_model_free(m);
    free(ref);
    return 0;
}

int main(int argc, char **argv)
{
    const char *model = "models/SmolLM2-135M-Instruct.Q4_1.gguf";
    const char *keep = NULL;
    int bf16 = 0;
    setvbuf(stdout, NULL, _IONBF, 0);
    t_init(argc, argv, "test_mlx_lm");
    for (int i = 1; i < argc; i++)
        bf16 |= !strcmp(argv[i], "--bf16");
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--model"))
            model = argv[++i];
        else if (!strcmp(argv[i], "--keep"))
            keep = argv[++i];
    }
    if (access(model, R_OK) != 0)
        return t_skip("no models/SmolLM2-135M-Instruct.Q4_1.gguf (scripts/get-model.sh smollm2)");
    if (system("python3 -c 'import mlx.core, mlx_lm' >/dev/null 2>&1") != 0)
        return t_skip("mlx / mlx-lm not importable by python3 (pip install \"mlx[cpu]\" mlx-lm)");
    char base[256];
    snprintf(base, sizeof(base), "%s", keep ? keep : "/tmp/test_mlx_lm.XXXXXX");
    if (keep)
        mkdir(base, 0777);
    else if (!mkdtemp(base))
        return t_skip("cannot make a temporary directory");

    /* prompts -> tokens (tq's tokenizer from the GGUF) */
    tq_tokenizer *tk = NULL;
    CHECK(tq_tokenizer_load(model, &tk) == TQ_OK, "tokenizer: %s", tq_last_error());
    json_object *pj = json_object_from_file("tests/data/llamacpp/prompts.json");
    CHECK(pj && json_object_array_length(pj) >= N_PROMPTS, "prompts.json");
    if (!tk || !pj)
        return t_done();
    char tpath[512];
    snprintf(tpath, sizeof(tpath), "%s/tokens.txt", base);
    FILE *tf = fopen(tpath, "w");
    for (int p = 0; p < N_PROMPTS && tf; p++) {
        const char *text =
            json_object_get_string(json_object_object_get(json_object_array_get_idx(pj, p), "text"));
        const size_t len = strlen(text);
        const int64_t cap = tq_tokenizer_encode_bound(len);
        toks[p] = malloc(sizeof(int32_t) * (size_t)cap);
        CHECK(tq_tokenizer_encode(tk, text, len, TQ_TOK_ADD_BOS_AUTO, toks[p], cap, &ntok[p]) ==
                  TQ_OK && ntok[p] > 0, "encode prompt %d", p);
        for (int64_t i = 0; i < ntok[p]; i++)
            fprintf(tf, "%s%d", i ? " " : "", toks[p][i]);
        fprintf(tf, "\n");
    }
    if (tf)
        fclose(tf);
    json_object_put(pj);
    tq_tokenizer_free(tk);

    for (int rot = 0; rot < 2; rot++) {
        char dir[512], lg[600], cmd[2048], tag[64];
        snprintf(dir, sizeof(dir), "%s/smollm2_mlx4g64%s", base, rot ? "_rot" : "");
        tq_quantize_opts o;
        tq_quantize_opts_default(&o);
        o.src = model;
        o.out = dir;
        o.format = TQ_QFORMAT_MLX;
        o.bits = 4;
        o.group = 64;
        o.rotate = rot;
        o.dequantize_source = rot;
        o.force = 1;
        o.command_line = "test_mlx_lm";
        tq_quantize_result r;
        tq_status st = tq_quantize(&o, &r);
        CHECK(st == TQ_OK, "tq_quantize %s: %s", dir, tq_last_error());
        if (st)
            continue;
        for (int as_loaded = 0; as_loaded < 1 + bf16; as_loaded++) {
            snprintf(lg, sizeof(lg), "%s/mlx_lm_%s.bin", dir, as_loaded ? "bf16" : "f32");
            snprintf(cmd, sizeof(cmd), "python3 scripts/quant/mlx_lm_logits.py %s %s %s --dtype %s",
                     dir, tpath, lg, as_loaded ? "as-loaded" : "f32");
            const int rc = system(cmd);
            CHECK(rc == 0, "mlx-lm runs on %s (%s): rc %d", dir, cmd, rc);
            if (rc)
                continue;
            snprintf(tag, sizeof(tag), "4-bit g64%s, mlx-lm %s", rot ? " rotated" : "",
                     as_loaded ? "bf16" : "f32");
            compare(tag, dir, lg, !as_loaded);
        }
    }
    for (int p = 0; p < N_PROMPTS; p++)
        free(toks[p]);
    if (!keep) {
        char cmd[300];
        snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
        if (system(cmd) != 0)
            printf("could not remove %s\n", base);
    }
    return t_done();
}
