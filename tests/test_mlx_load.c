/* test_mlx_load.c -- the engine reads MLX affine safetensors directories (issue 13 item 5).
 *
 * 1. tq_mlx_dequant_row() against this file's own bit-by-bit unpacking, every bits (2 3 4 5 6 8)
 *    x group (32 64 128) x scale dtype (F16 BF16 F32), random codes/scales/biases (seed printed).
 * 2. Directories written here from the tiny transformers models (tests/data/tiny): every matrix,
 *    the embedding and the lm_head quantized with the MLX rule (src/quant/affine.c), per-module
 *    bits/group overrides and a module marked `false`; a reference directory holds the same
 *    weights dequantized by this file (f32). The engine's logits on both are bit-identical
 *    (f32 weights: the same numbers go into the same forward pass).
 * 3. A directory written by tq_quantize(--format mlx) loads and matches its own dequantized
 *    reference the same way, for every bits at group 32.
 * 4. Refusals, each naming the file: U32 codes without a quantization entry, bits 7, mode
 *    "mxfp4", scales of the wrong shape, a missing .biases, scales/biases dtypes that differ. */
#include <sys/stat.h>
#include <unistd.h>

#include "core/half.h"
#include "io/mlx.h"
#include "quant/quant_internal.h"
#include "t.h"
#include "turboquant.h"

static char base[256];

static uint32_t rng_state;
static uint32_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* bit-by-bit: element i's code is bits [i*b, (i+1)*b) of the row's little-endian bit stream */
static uint32_t code_at(const uint8_t *codes, int64_t i, int bits)
{
    uint32_t q = 0;
    for (int k = 0; k < bits; k++) {
        const uint64_t bit = (uint64_t)i * (uint64_t)bits + (uint64_t)k;
        q |= (uint32_t)((codes[bit / 8] >> (bit % 8)) & 1u) << k;
    }
    return q;
}

static float sb_value(const uint8_t *p, int dt, int64_t i)
{
    if (dt == TQ_ST_F32) {
        float f;
        memcpy(&f, p + 4 * i, 4);
        return f;
    }
    const uint16_t h = (uint16_t)(p[2 * i] | (p[2 * i + 1] << 8));
    return dt == TQ_ST_F16 ? tq_f16_to_f32(h) : tq_bf16_to_f32(h);
}

static void check_rows(void)
{
    static const int bitsv[] = {2, 3, 4, 5, 6, 8}, groups[] = {32, 64, 128};
    static const int dts[] = {TQ_ST_F16, TQ_ST_BF16, TQ_ST_F32};
    rng_state = t_seed | 1u;
    int bad = 0, n = 0;
    for (int bi = 0; bi < 6; bi++)
        for (int gi = 0; gi < 3; gi++)
            for (int di = 0; di < 3; di++) {
                const int bits = bitsv[bi], group = groups[gi], dt = dts[di];
                const int64_t cols = group * (1 + (int64_t)(rnd() % 5));
                const size_t cb = (size_t)(cols * bits / 8), ng = (size_t)(cols / group);
                const size_t ssz = dt == TQ_ST_F32 ? 4 : 2;
                uint8_t *codes = malloc(cb), *sc = malloc(ng * ssz), *bs = malloc(ng * ssz);
                float *got = malloc(sizeof(float) * (size_t)cols);
                for (size_t i = 0; i < cb; i++)
                    codes[i] = (uint8_t)rnd();
                for (size_t g = 0; g < ng; g++) {
                    const float s = ((float)(rnd() % 2001) - 1000.0f) * 1e-4f;
                    const float b = ((float)(rnd() % 2001) - 1000.0f) * 1e-3f;
                    if (dt == TQ_ST_F32) {
                        memcpy(sc + 4 * g, &s, 4);
                        memcpy(bs + 4 * g, &b, 4);
                    } else {
                        const uint16_t hs = dt == TQ_ST_F16 ? tq_f32_to_f16(s) : tq_f32_to_bf16(s);
                        const uint16_t hb = dt == TQ_ST_F16 ? tq_f32_to_f16(b) : tq_f32_to_bf16(b);
                        sc[2 * g] = (uint8_t)hs, sc[2 * g + 1] = (uint8_t)(hs >> 8);
                        bs[2 * g] = (uint8_t)hb, bs[2 * g + 1] = (uint8_t)(hb >> 8);
                    }
                }
                tq_mlx_dequant_row(codes, sc, bs, dt, cols, bits, group, got);
                for (int64_t i = 0; i < cols; i++) {
                    const float s = sb_value(sc, dt, i / group), b = sb_value(bs, dt, i / group);
                    const float want = s * (float)code_at(codes, i, bits) + b;
                    if (memcmp(&want, &got[i], 4)) {
                        if (bad++ < 5)
                            fprintf(stderr, "bits %d group %d dt %d i %lld: %g != %g\n", bits,
                                    group, dt, (long long)i, got[i], want);
                    }
                }
                n++;
                free(codes), free(sc), free(bs), free(got);
            }
    CHECK(bad == 0, "tq_mlx_dequant_row: %d values differ from the bit-by-bit reference over "
          "%d bits x group x dtype cases", bad, n);
    printf("dequant rows: %d cases (bits x group x scale dtype), %d mismatches\n", n, bad);
}

/* ---- writing MLX directories ------------------------------------------------------------- */
typedef struct mod_spec {
    const char *module; /* NULL: the default */
    int bits, group;    /* bits 0: not quantized (config.json says false) */
} mod_spec;

typedef struct dir_spec {
    int bits, group, sdtype;
    const mod_spec *over;
    int n_over;
    int quant_embed; /* embedding and lm_head too */
    /* corruptions for the refusal tests */
    int no_quant_entry, bad_scales_shape, no_biases, mixed_dtypes;
    const char *extra_quant_json; /* replaces the quantization object's inside */
} dir_spec;

static int spec_of(const dir_spec *d, const char *module, int *bits, int *group)
{
    *bits = d->bits;
    *group = d->group;
    for (int i = 0; i < d->n_over; i++)
        if (!strcmp(d->over[i].module, module)) {
            *bits = d->over[i].bits;
            *group = d->over[i].group;
        }
    return *bits != 0;
}

static int is_matrix(const char *name)
{
    static const char *const sfx[] = {"q_proj.weight", "k_proj.weight", "v_proj.weight",
                                      "o_proj.weight", "gate_proj.weight", "up_proj.weight",
                                      "down_proj.weight"};
    for (size_t i = 0; i < sizeof(sfx) / sizeof(sfx[0]); i++) {
        const size_t a = strlen(name), b = strlen(sfx[i]);
        if (a > b && !strcmp(name + a - b, sfx[i]))
            return 1;
    }
    return 0;
}

static uint16_t sb_store(float v, int dt, uint8_t *p, int64_t i)
{
    if (dt == TQ_ST_F32) {
        memcpy(p + 4 * i, &v, 4);
        return 0;
    }
    const uint16_t h = dt == TQ_ST_F16 ? tq_f32_to_f16(v) : tq_f32_to_bf16(v);
    p[2 * i] = (uint8_t)h;
    p[2 * i + 1] = (uint8_t)(h >> 8);
    return h;
}

static int write_config(const char *src, const char *out, const char *quant)
{
    char p[600];
    snprintf(p, sizeof(p), "%s/config.json", src);
    FILE *f = fopen(p, "rb");
    if (!f)
        return -1;
    char text[8192];
    const size_t n = fread(text, 1, sizeof(text) - 1, f);
    fclose(f);
    text[n] = 0;
    snprintf(p, sizeof(p), "%s/config.json", out);
    mkdir(out, 0777);
    if (!(f = fopen(p, "wb")))
        return -1;
    const char *brace = strchr(text, '{');
    if (quant)
        fprintf(f, "{\n  \"quantization\": {%s},\n%s", quant, brace + 1);
    else
        fputs(text, f);
    fclose(f);
    return 0;
}

/* mlx dir `out` and its dequantized f32 reference `ref` from the tiny model at src */
static tq_status make_dirs(const char *src, const char *out, const char *ref, const dir_spec *d)
{
    tq_weights *w = NULL;
    tq_st_writer *wo = NULL, *wr = NULL;
    char q[2048] = "", p[600];
    int pos = 0;
    tq_status st = tq_weights_open(src, &w);
    if (st)
        return st;
    if (d->extra_quant_json)
        snprintf(q, sizeof(q), "%s", d->extra_quant_json);
    else {
        pos = snprintf(q, sizeof(q), "\"group_size\": %d, \"bits\": %d, \"mode\": \"affine\"",
                       d->group, d->bits);
        for (int i = 0; i < d->n_over; i++) {
            if (d->over[i].bits)
                pos += snprintf(q + pos, sizeof(q) - (size_t)pos,
                                ", \"%s\": {\"group_size\": %d, \"bits\": %d}", d->over[i].module,
                                d->over[i].group, d->over[i].bits);
            else
                pos += snprintf(q + pos, sizeof(q) - (size_t)pos, ", \"%s\": false",
                                d->over[i].module);
        }
    }
    if (write_config(src, out, d->no_quant_entry ? NULL : q) || write_config(src, ref, NULL)) {
        tq_weights_free(w);
        return TQ_FAIL(TQ_E_IO, "config");
    }
    snprintf(p, sizeof(p), "%s/model.safetensors", out);
    if ((st = tq_st_writer_create(p, 0, &wo)))
        goto out;
    snprintf(p, sizeof(p), "%s/model.safetensors", ref);
    if ((st = tq_st_writer_create(p, 0, &wr)))
        goto out;
    for (int64_t i = 0; i < tq_weights_count(w) && !st; i++) {
        tq_weights_tensor ti;
        tq_weights_tensor_at(w, i, &ti);
        float *x = malloc(sizeof(float) * (size_t)ti.n_elem);
        if ((st = tq_weights_read(w, ti.name, TQ_DTYPE_F32, x, sizeof(float) * ti.n_elem))) {
            free(x);
            break;
        }
        char mod[256];
        snprintf(mod, sizeof(mod), "%.*s", (int)(strlen(ti.name) - 7), ti.name);
        int bits = 0, group = 0;
        const int emb = strstr(ti.name, "embed_tokens") || strstr(ti.name, "lm_head");
        const int quant = ti.n_dims == 2 && (is_matrix(ti.name) || (emb && d->quant_embed)) &&
                          spec_of(d, mod, &bits, &group) && ti.shape[1] % group == 0;
        if (!quant) {
            st = tq_st_writer_add(wo, ti.name, TQ_ST_F32, ti.n_dims, ti.shape, x,
                                  sizeof(float) * ti.n_elem);
            if (!st)
                st = tq_st_writer_add(wr, ti.name, TQ_ST_F32, ti.n_dims, ti.shape, x,
                                      sizeof(float) * ti.n_elem);
            free(x);
            continue;
        }
        const int64_t rows = ti.shape[0], cols = ti.shape[1], ng = cols / group;
        uint32_t *codes = calloc((size_t)(rows * cols * bits / 32), 4);
        float *sc = malloc(sizeof(float) * rows * ng), *bi = malloc(sizeof(float) * rows * ng);
        const size_t ssz = d->sdtype == TQ_ST_F32 ? 4 : 2;
        uint8_t *scb = malloc(ssz * rows * ng), *bib = malloc(ssz * rows * ng);
        float *deq = malloc(sizeof(float) * rows * cols);
        st = tq_affine_quantize(x, rows, cols, bits, group, codes, sc, bi);
        const int bdt = d->mixed_dtypes ? (d->sdtype == TQ_ST_F32 ? TQ_ST_BF16 : TQ_ST_F32)
                                        : d->sdtype;
        uint8_t *bib2 = malloc(4 * rows * ng);
        for (int64_t g = 0; g < rows * ng; g++) {
            sb_store(sc[g], d->sdtype, scb, g);
            sb_store(bi[g], d->sdtype, bib, g);
            sb_store(bi[g], bdt, bib2, g);
        }
        for (int64_t r = 0; r < rows; r++)
            for (int64_t c = 0; c < cols; c++) {
                const uint8_t *row = (const uint8_t *)(codes + r * cols * bits / 32);
                const float s = sb_value(scb, d->sdtype, r * ng + c / group);
                const float b = sb_value(bib, d->sdtype, r * ng + c / group);
                deq[r * cols + c] = s * (float)code_at(row, c, bits) + b;
            }
        const int64_t cs[2] = {rows, cols * bits / 32};
        const int64_t ss[2] = {rows, ng + (d->bad_scales_shape ? 1 : 0)};
        const int64_t bs[2] = {rows, ng};
        uint8_t *scx = calloc(ssz, (size_t)(rows * (ng + 1)));
        memcpy(scx, scb, ssz * rows * ng);
        char nm[300];
        if (!st)
            st = tq_st_writer_add(wo, ti.name, TQ_ST_U32, 2, cs, codes,
                                  (size_t)(rows * cols * bits / 8));
        snprintf(nm, sizeof(nm), "%s.scales", mod);
        if (!st)
            st = tq_st_writer_add(wo, nm, d->sdtype, 2, ss, scx, ssz * ss[0] * ss[1]);
        snprintf(nm, sizeof(nm), "%s.biases", mod);
        if (!st && !d->no_biases)
            st = tq_st_writer_add(wo, nm, bdt, 2, bs, d->mixed_dtypes ? bib2 : bib,
                                  (bdt == TQ_ST_F32 ? 4 : 2) * rows * ng);
        if (!st)
            st = tq_st_writer_add(wr, ti.name, TQ_ST_F32, 2, ti.shape, deq,
                                  sizeof(float) * rows * cols);
        free(codes), free(sc), free(bi), free(scb), free(bib), free(bib2), free(deq), free(scx);
        free(x);
    }
    if (!st)
        st = tq_st_writer_finish(wo);
    if (!st)
        st = tq_st_writer_finish(wr);
out:
    tq_st_writer_free(wo);
    tq_st_writer_free(wr);
    tq_weights_free(w);
    return st;
}

static const int32_t prompt[] = {1, 17, 200, 3, 99, 45, 45, 128, 7, 250, 11, 64, 33, 2, 180, 90};
#define NTOK ((int)(sizeof(prompt) / sizeof(prompt[0])))

static int logits_of(const char *dir, int store, float *out, char *kernels, size_t kcap)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.weight_store = store;
    mo.n_threads = 1;
    tq_model *m = NULL;
    if (tq_model_load(dir, &mo, &m)) {
        printf("load %s: %s\n", dir, tq_last_error());
        return -1;
    }
    tq_model_info info;
    tq_model_get_info(m, &info);
    if (kernels)
        snprintf(kernels, kcap, "%s", info.native ? info.native_kernels : "");
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = 64;
    tq_session *s = NULL;
    tq_status st = tq_session_create(m, &so, &s);
    if (!st)
        st = tq_session_eval_all(s, prompt, NTOK, out, (int64_t)NTOK * 256);
    if (st)
        printf("eval %s: %s\n", dir, tq_last_error());
    tq_session_free(s);
    tq_model_free(m);
    return st ? -1 : 0;
}

/* dequantized at load: bit-identical to the f32 reference; native (BF16 scales): the same
 * weights in another summation order, NMSE <= 1e-10 per position and the same argmax */
static void check_pair(const char *tag, const char *mlx, const char *ref, int native)
{
    float *a = malloc(sizeof(float) * NTOK * 256), *b = malloc(sizeof(float) * NTOK * 256);
    float *c = malloc(sizeof(float) * NTOK * 256);
    char kn[256] = "";
    const int ok = logits_of(mlx, TQ_STORE_DEQUANT, a, NULL, 0) == 0 &&
                   logits_of(ref, TQ_STORE_AUTO, b, NULL, 0) == 0 &&
                   logits_of(mlx, TQ_STORE_AUTO, c, kn, sizeof(kn)) == 0;
    CHECK(ok, "%s: both load and run", tag);
    if (ok) {
        int same = !memcmp(a, b, sizeof(float) * NTOK * 256);
        double md = 0, worst = 0;
        int amax = 1;
        for (int i = 0; i < NTOK * 256; i++)
            md = fmax(md, fabs((double)a[i] - b[i]));
        for (int t = 0; t < NTOK; t++) {
            double num = 0, den = 0;
            int ib = 0, ic = 0;
            for (int v = 0; v < 256; v++) {
                const double d = (double)c[t * 256 + v] - b[t * 256 + v];
                num += d * d;
                den += (double)b[t * 256 + v] * b[t * 256 + v];
                ib = b[t * 256 + v] > b[t * 256 + ib] ? v : ib;
                ic = c[t * 256 + v] > c[t * 256 + ic] ? v : ic;
            }
            worst = fmax(worst, num / den);
            amax &= ib == ic;
        }
        CHECK(same, "%s: MLX logits (dequantized at load) differ from the dequantized reference "
              "(max |diff| %g)", tag, md);
        CHECK(worst <= 1e-10 && amax, "%s: native logits NMSE %.3g (<= 1e-10), argmax same %d",
              tag, worst, amax);
        CHECK(native == (kn[0] != 0) && (!native || strstr(kn, "MLX")),
              "%s: native kernels '%s' (expected %s)", tag, kn, native ? "MLX rows" : "none");
        printf("%-34s dequant-at-load: %s; native [%s]: NMSE %.2g\n", tag,
               same ? "bit-identical" : "DIFFER", kn, worst);
    }
    free(a);
    free(b);
    free(c);
}

static void check_handmade(void)
{
    static const char *const archs[] = {"llama", "qwen2", "qwen3", "gemma3"};
    static const int bitsv[] = {2, 3, 4, 5, 6, 8};
    static const int dts[] = {TQ_ST_BF16, TQ_ST_F16, TQ_ST_F32};
    for (int a = 0; a < 4; a++) {
        char src[256], out[512], ref[512], tag[64];
        snprintf(src, sizeof(src), "tests/data/tiny/%s", archs[a]);
        /* per-module overrides: o_proj in = heads * head_dim (multiple of 128), down_proj in = 64 */
        const mod_spec over[] = {
            {"model.layers.0.mlp.down_proj", 8, 64},
            {"model.layers.1.self_attn.o_proj", 3, 128},
            {"model.layers.1.mlp.gate_proj", 0, 0},
            {"model.embed_tokens", 6, 32},
            {"lm_head", 5, 32},
        };
        dir_spec d = {.bits = 4, .group = 32, .sdtype = TQ_ST_BF16, .over = over, .n_over = 5,
                      .quant_embed = 1};
        snprintf(out, sizeof(out), "%s/%s_mixed_mlx", base, archs[a]);
        snprintf(ref, sizeof(ref), "%s/%s_mixed_ref", base, archs[a]);
        tq_status st = make_dirs(src, out, ref, &d);
        CHECK(st == TQ_OK, "%s: write mixed dirs: %s", archs[a], tq_last_error());
        snprintf(tag, sizeof(tag), "%s mixed bits/groups", archs[a]);
        if (!st)
            check_pair(tag, out, ref, 1);
        for (int b = 0; b < 6; b++) {
            dir_spec u = {.bits = bitsv[b], .group = 32, .sdtype = dts[(a + b) % 3],
                          .quant_embed = b % 2};
            snprintf(out, sizeof(out), "%s/%s_b%d_mlx", base, archs[a], bitsv[b]);
            snprintf(ref, sizeof(ref), "%s/%s_b%d_ref", base, archs[a], bitsv[b]);
            st = make_dirs(src, out, ref, &u);
            CHECK(st == TQ_OK, "%s b%d: write dirs: %s", archs[a], bitsv[b], tq_last_error());
            snprintf(tag, sizeof(tag), "%s %d-bit g32 %s%s", archs[a], bitsv[b],
                     tq_st_dtype_name(u.sdtype), u.quant_embed ? " +embed" : "");
            if (!st)
                check_pair(tag, out, ref, u.sdtype == TQ_ST_BF16);
        }
    }
    /* the info names the MLX type */
    char out[512];
    snprintf(out, sizeof(out), "%s/llama_mixed_mlx", base);
    tq_weights *w = NULL;
    tq_weights_tensor ti;
    if (!tq_weights_open(out, &w) &&
        !tq_weights_get(w, "model.layers.1.self_attn.o_proj.weight", &ti)) {
        CHECK(!strcmp(ti.src_type, "MLX3g128 (BF16)") && ti.shape[1] == 256 && ti.n_dims == 2,
              "o_proj info: %s [%lld, %lld]", ti.src_type, (long long)ti.shape[0],
              (long long)ti.shape[1]);
        CHECK(tq_weights_find(w, "model.layers.1.self_attn.o_proj.scales") < 0,
              "scales are not listed as tensors of their own");
    } else {
        CHECK(0, "reopen %s: %s", out, tq_last_error());
    }
    tq_weights_free(w);
}

/* a directory written by tq_quantize --format mlx: reference = its own tensors, dequantized here */
static void check_tq_written(void)
{
    static const int bitsv[] = {2, 3, 4, 5, 6, 8};
    for (int b = 0; b < 6; b++) {
        char out[512], ref[512], tag[64], p[600];
        snprintf(out, sizeof(out), "%s/tq_b%d", base, bitsv[b]);
        snprintf(ref, sizeof(ref), "%s/tq_b%d_ref", base, bitsv[b]);
        tq_quantize_opts o;
        tq_quantize_opts_default(&o);
        o.src = "tests/data/tiny/qwen3";
        o.out = out;
        o.format = TQ_QFORMAT_MLX;
        o.bits = bitsv[b];
        o.group = 32;
        o.rotate = b % 2;
        tq_quantize_result r;
        tq_status st = tq_quantize(&o, &r);
        CHECK(st == TQ_OK, "tq_quantize mlx %d-bit: %s", bitsv[b], tq_last_error());
        if (st)
            continue;
        /* reference: read the raw file with the safetensors API, dequantize here */
        tq_st *s = NULL;
        tq_st_writer *wr = NULL;
        snprintf(p, sizeof(p), "%s/model.safetensors", out);
        st = tq_st_open(p, &s);
        write_config(out, ref, NULL); /* the config with its quantization entry is harmless */
        snprintf(p, sizeof(p), "%s/model.safetensors", ref);
        if (!st)
            st = tq_st_writer_create(p, 0, &wr);
        int n_q = 0;
        for (int64_t i = 0; !st && i < tq_st_n_tensors(s); i++) {
            tq_st_tensor_info ti, sc, bi;
            tq_st_tensor(s, i, &ti);
            const size_t ln = strlen(ti.name);
            if (ln > 7 && (!strcmp(ti.name + ln - 7, ".scales") ||
                           !strcmp(ti.name + ln - 7, ".biases")))
                continue;
            if (ti.dtype != TQ_ST_U32) {
                float *x = malloc(sizeof(float) * ti.n_elem);
                for (int64_t k = 0; k < ti.n_elem; k++)
                    x[k] = sb_value(ti.data, ti.dtype, k);
                st = tq_st_writer_add(wr, ti.name, TQ_ST_F32, ti.n_dims, ti.shape, x,
                                      sizeof(float) * ti.n_elem);
                free(x);
                continue;
            }
            char nm[300];
            snprintf(nm, sizeof(nm), "%.*s.scales", (int)(ln - 7), ti.name);
            tq_st_tensor(s, tq_st_find(s, nm), &sc);
            snprintf(nm, sizeof(nm), "%.*s.biases", (int)(ln - 7), ti.name);
            tq_st_tensor(s, tq_st_find(s, nm), &bi);
            const int64_t rows = ti.shape[0], cols = ti.shape[1] * 32 / bitsv[b];
            const int64_t ng = sc.shape[1], group = cols / ng;
            float *x = malloc(sizeof(float) * rows * cols);
            for (int64_t r = 0; r < rows; r++)
                for (int64_t c = 0; c < cols; c++)
                    x[r * cols + c] =
                        sb_value(sc.data, sc.dtype, r * ng + c / group) *
                            (float)code_at((const uint8_t *)ti.data + r * ti.shape[1] * 4, c,
                                           bitsv[b]) +
                        sb_value(bi.data, bi.dtype, r * ng + c / group);
            const int64_t sh[2] = {rows, cols};
            st = tq_st_writer_add(wr, ti.name, TQ_ST_F32, 2, sh, x, sizeof(float) * rows * cols);
            free(x);
            n_q++;
        }
        if (!st)
            st = tq_st_writer_finish(wr);
        tq_st_writer_free(wr);
        tq_st_free(s);
        CHECK(st == TQ_OK && n_q > 0, "%d-bit reference of the tq-written dir (%d matrices): %s",
              bitsv[b], n_q, tq_last_error());
        snprintf(tag, sizeof(tag), "tq quantize qwen3 %d-bit g32%s", bitsv[b],
                 o.rotate ? " rot" : "");
        if (!st)
            check_pair(tag, out, ref, 1);
    }
}

static void refuse(const char *tag, const dir_spec *d, tq_status want, const char *const *needles)
{
    char out[512], ref[512];
    snprintf(out, sizeof(out), "%s/bad_%s", base, tag);
    snprintf(ref, sizeof(ref), "%s/bad_%s_ref", base, tag);
    tq_status st = make_dirs("tests/data/tiny/llama", out, ref, d);
    CHECK(st == TQ_OK, "%s: write: %s", tag, tq_last_error());
    tq_model *m = NULL;
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 1;
    st = tq_model_load(out, &mo, &m);
    const char *e = tq_last_error();
    int ok = st == want && !m;
    for (int i = 0; needles[i]; i++)
        ok = ok && strstr(e, needles[i]);
    CHECK(ok, "%s: want status %d naming the problem, got %d: %s", tag, (int)want, (int)st, e);
    printf("refused %-14s %s\n", tag, e);
    tq_model_free(m);
}

static void check_refusals(void)
{
    dir_spec d = {.bits = 4, .group = 32, .sdtype = TQ_ST_BF16};
    d.no_quant_entry = 1;
    refuse("no_entry", &d, TQ_E_FORMAT,
           (const char *const[]){"config.json", "quantization", ".weight is MLX affine", NULL});
    d.no_quant_entry = 0;
    d.extra_quant_json = "\"group_size\": 32, \"bits\": 7";
    refuse("bits7", &d, TQ_E_UNSUPPORTED,
           (const char *const[]){"config.json", "bits 7", "2 3 4 5 6 8", NULL});
    d.extra_quant_json = "\"group_size\": 32, \"bits\": 4, \"mode\": \"mxfp4\"";
    refuse("mode", &d, TQ_E_UNSUPPORTED, (const char *const[]){"config.json", "mxfp4", NULL});
    d.extra_quant_json = NULL;
    d.bad_scales_shape = 1;
    refuse("scales_shape", &d, TQ_E_FORMAT,
           (const char *const[]){"model.safetensors", "do not agree", "bits 4", NULL});
    d.bad_scales_shape = 0;
    d.no_biases = 1;
    refuse("no_biases", &d, TQ_E_FORMAT,
           (const char *const[]){"model.safetensors", ".biases", "missing", NULL});
    d.no_biases = 0;
    d.mixed_dtypes = 1;
    refuse("mixed_dtypes", &d, TQ_E_FORMAT,
           (const char *const[]){"model.safetensors", "scales is BF16", "biases is F32", NULL});
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_mlx_load");
    snprintf(base, sizeof(base), "/tmp/test_mlx_load.%d", (int)getpid());
    mkdir(base, 0777);
    check_rows();
    check_handmade();
    check_tq_written();
    check_refusals();
    char cmd[300];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", base);
    if (system(cmd) != 0)
        printf("could not remove %s\n", base);
    return t_done();
}
