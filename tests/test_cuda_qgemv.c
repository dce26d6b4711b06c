/* test_cuda_qgemv.c -- the GPU quantized GEMV (src/cuda/qgemv.cu) against the CPU references
 * (label cuda; exits 77 without CUDA kernels or a device; the argument checks need no device):
 *  1. activations: the device-quantized x (int8 values and f32 scales) == the CPU's scalar
 *     quant_q8a / quant_q8k bytes (src/cpu/qdot.c), bit for bit;
 *  2. Q8_0, Q4_0, Q4_1, Q4_K, Q6_K: random blocks (random code bytes, random finite f16 scales and
 *     Q4_1 mins), rows
 *     with and without padding, 1 to 9 tokens: y == the CPU's scalar q8 dot (qdot.c dot_q8) within
 *     2e-5 of sum_j |w_j * xq_j| (w_j from the format's dequant reference, xq_j the quantized
 *     activation): the integer sums are exact on both sides, only the f32 rounding of the partial
 *     sums differs;
 *  3. MLX affine, bits 4 and 8, groups 32/64/128, bf16 and f16 scales/biases: weights quantized by
 *     the project's MLX quantizer (src/quant/affine.c); reference = sum_j (scale * q_j + bias) *
 *     xq_j in double (bf16: tq_affine_dequantize's values), same tolerance;
 *  4. refusals: formats without kernels, bad shapes, misaligned rows.
 * Usage: test_cuda_qgemv [-s SEED] [--quick] */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "core/rng.h"
#include "cpu/qdot.h"
#include "cuda/qgemv.h"
#include "quant/quant_internal.h"
#include "t.h"

static tq_rng rng; /* seeded from the printed test seed */

/* x: Gaussian, a few outliers, one all-zero 32-group (d = 0) */
static void fill_x(float *x, int64_t n)
{
    for (int64_t i = 0; i < n; i++)
        x[i] = tq_rng_normal(&rng);
    for (int k = 0; k < 3; k++)
        x[tq_rng_u64(&rng) % (uint64_t)n] *= 20.0f;
    if (n >= 64)
        memset(x + 32, 0, 32 * sizeof(float));
}

static void put_f16(uint8_t *p, float v)
{
    const uint16_t h = tq_f32_to_f16(v);
    p[0] = (uint8_t)h;
    p[1] = (uint8_t)(h >> 8);
}

/* a random f16 scale: magnitude 2^-10 .. 2^-5, random sign unless positive */
static float rnd_scale(int positive)
{
    const float v = ldexpf((float)(1.0 + tq_rng_uniform(&rng)), -10 + (int)(tq_rng_u64(&rng) % 5));
    return positive || (tq_rng_u64(&rng) & 1) ? v : -v;
}

static void fill_blocks(int fmt, uint8_t *row, int64_t cols)
{
    const tq_format *f = tq_format_get(fmt);
    const int64_t nb = cols / f->block;
    for (int64_t i = 0; i < nb * (int64_t)f->block_bytes; i++)
        row[i] = (uint8_t)tq_rng_u64(&rng);
    for (int64_t b = 0; b < nb; b++) {
        uint8_t *p = row + b * (int64_t)f->block_bytes;
        switch (fmt) {
        case TQ_GGML_Q8_0:
        case TQ_GGML_Q4_0: put_f16(p, rnd_scale(0)); break;
        case TQ_GGML_Q4_1: put_f16(p, rnd_scale(0)); put_f16(p + 2, rnd_scale(0)); break; /* d, min */
        case TQ_GGML_Q4_K: put_f16(p, rnd_scale(1)); put_f16(p + 2, rnd_scale(1)); break;
        case TQ_GGML_Q6_K: put_f16(p + 208, rnd_scale(0)); break;
        }
    }
}

/* the CPU's activation of one token: int8 values in element order and the block scales */
static void cpu_act(int fmt, const void *act, int64_t cols, int8_t *qs, float *d)
{
    if (tq_qdot_act_block(fmt) == TQ_QKK) {
        const tq_q8k *a = act;
        for (int64_t b = 0; b < cols / TQ_QKK; b++) {
            memcpy(qs + b * TQ_QKK, a[b].qs, TQ_QKK);
            d[b] = a[b].d;
        }
    } else {
        const tq_q8a *a = act;
        for (int64_t b = 0; b < cols / TQ_QK; b++) {
            memcpy(qs + b * TQ_QK, a[b].qs, TQ_QK);
            d[b] = a[b].d;
        }
    }
}

static double worst_ratio; /* max |gpu - ref| / bound over every case */

/* compare one token's outputs; bound_r = sum |w_j xq_j| of row r */
static void compare(const char *what, const float *y, const float *ref, const double *bound, int64_t rows,
                    int t)
{
    int bad = 0;
    int64_t first = -1;
    for (int64_t r = 0; r < rows; r++) {
        const double err = fabs((double)y[r] - (double)ref[r]);
        const double tol = 2e-5 * bound[r] + 1e-30;
        if (bound[r] > 0 && err / bound[r] > worst_ratio)
            worst_ratio = err / bound[r];
        if (!(err <= tol) && bad++ == 0)
            first = r;
    }
    CHECK(bad == 0, "%s token %d: %d of %lld rows off (row %lld: gpu %.9g ref %.9g bound %.3g)", what, t, bad,
          (long long)rows, (long long)first, first >= 0 ? y[first] : 0.0, first >= 0 ? ref[first] : 0.0,
          first >= 0 ? bound[first] : 0.0);
}

static void check_act(const char *what, int fmt, const int8_t *gq, const float *gd, const void *cpu_act_buf,
                      int64_t cols)
{
    const int64_t blk = tq_qdot_act_block(fmt);
    int8_t *cq = malloc((size_t)cols);
    float *cd = malloc(sizeof(float) * (size_t)(cols / blk));
    cpu_act(fmt, cpu_act_buf, cols, cq, cd);
    CHECK_MEMEQ(gq, cq, (size_t)cols, "%s: device int8 activation != CPU quant_q8%s", what, blk == 32 ? "a" : "k");
    CHECK_MEMEQ(gd, cd, sizeof(float) * (size_t)(cols / blk), "%s: device activation scales != CPU's", what);
    free(cq);
    free(cd);
}

static void test_ggml(int fmt, int64_t rows, int64_t cols, int n, int pad)
{
    const tq_format *f = tq_format_get(fmt);
    const tq_qdot_kernels *K = tq_qdot_scalar();
    const size_t prb = tq_format_row_bytes(f, cols), rb = prb + (size_t)pad;
    char what[96];
    snprintf(what, sizeof what, "%s %lldx%lld n=%d pad=%d", f->name, (long long)rows, (long long)cols, n, pad);
    uint8_t *w = calloc((size_t)rows, rb);
    for (int64_t r = 0; r < rows; r++)
        fill_blocks(fmt, w + (size_t)r * rb, cols);
    float *x = malloc(sizeof(float) * (size_t)(n * cols));
    fill_x(x, n * cols);
    const size_t ab = tq_qdot_act_bytes(fmt, cols);
    uint8_t *act = malloc(ab * (size_t)n);
    for (int t = 0; t < n; t++)
        K->quant[fmt](x + t * cols, act + (size_t)t * ab, cols);
    float *ref = malloc(sizeof(float) * (size_t)(n * rows)), *y = malloc(sizeof(float) * (size_t)(n * rows));
    double *bound = malloc(sizeof(double) * (size_t)(n * rows));
    float *wd = malloc(sizeof(float) * (size_t)cols);
    int8_t *xq = malloc((size_t)cols);
    float *xd = malloc(sizeof(float) * (size_t)cols);
    const int64_t blk = tq_qdot_act_block(fmt);
    for (int t = 0; t < n; t++) {
        cpu_act(fmt, act + (size_t)t * ab, cols, xq, xd);
        for (int64_t r = 0; r < rows; r++) {
            ref[t * rows + r] = K->dot_q8[fmt](w + (size_t)r * rb, act + (size_t)t * ab, cols);
            f->dequant_ref(w + (size_t)r * rb, wd, cols);
            double s = 0;
            for (int64_t j = 0; j < cols; j++)
                s += fabs((double)wd[j] * (double)xd[j / blk] * (double)xq[j]);
            bound[t * rows + r] = s;
        }
    }
    tq_cuda_qmat m = {.fmt = fmt, .rows = rows, .cols = cols, .w = w, .row_bytes = rb};
    int8_t *gq = malloc((size_t)(n * cols));
    float *gd = malloc(sizeof(float) * (size_t)(n * cols / blk));
    tq_status st = tq_cuda_qgemv_host(&m, x, n, y, gq, gd);
    CHECK(st == TQ_OK, "%s: tq_cuda_qgemv_host: %s", what, tq_last_error());
    if (st == TQ_OK)
        for (int t = 0; t < n; t++) {
            check_act(what, fmt, gq + t * cols, gd + t * (cols / blk), act + (size_t)t * ab, cols);
            compare(what, y + t * rows, ref + t * rows, bound + t * rows, rows, t);
        }
    free(w), free(x), free(act), free(ref), free(y), free(bound), free(wd), free(xq), free(xd), free(gq), free(gd);
}

static void test_mlx(int bits, int group, int f16, int64_t rows, int64_t cols, int n)
{
    char what[96];
    snprintf(what, sizeof what, "MLX affine %d-bit g%d %s %lldx%lld n=%d", bits, group, f16 ? "f16" : "bf16",
             (long long)rows, (long long)cols, n);
    const tq_qdot_kernels *K = tq_qdot_scalar();
    const int64_t ng = cols / group, words = cols * bits / 32;
    float *wf = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++)
        wf[i] = tq_rng_normal(&rng) * 0.05f + (i % 97 == 0 ? 0.3f : 0.0f);
    uint32_t *codes = malloc(sizeof(uint32_t) * (size_t)(rows * words));
    float *sf = malloc(sizeof(float) * (size_t)(rows * ng)), *bf = malloc(sizeof(float) * (size_t)(rows * ng));
    CHECK(tq_affine_quantize(wf, rows, cols, bits, group, codes, sf, bf) == TQ_OK, "%s: quantize", what);
    uint16_t *s16 = malloc(2 * (size_t)(rows * ng)), *b16 = malloc(2 * (size_t)(rows * ng));
    for (int64_t i = 0; i < rows * ng; i++) {
        s16[i] = f16 ? tq_f32_to_f16(sf[i]) : tq_f32_to_bf16(sf[i]);
        b16[i] = f16 ? tq_f32_to_f16(bf[i]) : tq_f32_to_bf16(bf[i]);
    }
    /* reference weights: scale * q + bias in f32 */
    float *wd = malloc(sizeof(float) * (size_t)(rows * cols));
    if (!f16) {
        tq_affine_dequantize(codes, s16, b16, rows, cols, bits, group, wd);
    } else {
        for (int64_t r = 0; r < rows; r++)
            for (int64_t i = 0; i < cols; i++) {
                const uint64_t bit = (uint64_t)i * (uint64_t)bits;
                const uint32_t *c = codes + r * words;
                uint32_t q = c[bit / 32] >> (bit % 32);
                if (bit % 32 + (uint64_t)bits > 32)
                    q |= c[bit / 32 + 1] << (32 - bit % 32);
                q &= (1u << bits) - 1u;
                wd[r * cols + i] = tq_f16_to_f32(s16[r * ng + i / group]) * (float)q +
                                   tq_f16_to_f32(b16[r * ng + i / group]);
            }
    }
    float *x = malloc(sizeof(float) * (size_t)(n * cols));
    fill_x(x, n * cols);
    const size_t ab = (size_t)(cols / TQ_QK) * sizeof(tq_q8a);
    uint8_t *act = malloc(ab * (size_t)n);
    for (int t = 0; t < n; t++)
        K->quant_q8a(x + t * cols, act + (size_t)t * ab, cols);
    float *ref = malloc(sizeof(float) * (size_t)(n * rows)), *y = malloc(sizeof(float) * (size_t)(n * rows));
    double *bound = malloc(sizeof(double) * (size_t)(n * rows));
    for (int t = 0; t < n; t++) {
        const tq_q8a *a = (const tq_q8a *)(act + (size_t)t * ab);
        for (int64_t r = 0; r < rows; r++) {
            double s = 0, sa = 0;
            for (int64_t j = 0; j < cols; j++) {
                const double v = (double)wd[r * cols + j] * (double)a[j / 32].d * (double)a[j / 32].qs[j % 32];
                s += v;
                sa += fabs(v);
            }
            ref[t * rows + r] = (float)s;
            bound[t * rows + r] = sa;
        }
    }
    tq_cuda_qmat m = {.fmt = TQ_CUDA_QGEMV_MLX, .rows = rows, .cols = cols, .w = codes,
                      .row_bytes = (size_t)words * 4, .bits = bits, .group = group, .scales = s16,
                      .biases = b16, .sb_f16 = f16};
    int8_t *gq = malloc((size_t)(n * cols));
    float *gd = malloc(sizeof(float) * (size_t)(n * cols / 32));
    tq_status st = tq_cuda_qgemv_host(&m, x, n, y, gq, gd);
    CHECK(st == TQ_OK, "%s: tq_cuda_qgemv_host: %s", what, tq_last_error());
    if (st == TQ_OK)
        for (int t = 0; t < n; t++) {
            check_act(what, TQ_GGML_Q8_0 /* the q8a rule */, gq + t * cols, gd + t * (cols / 32),
                      act + (size_t)t * ab, cols);
            compare(what, y + t * rows, ref + t * rows, bound + t * rows, rows, t);
        }
    free(wf), free(codes), free(sf), free(bf), free(s16), free(b16), free(wd), free(x), free(act), free(ref);
    free(y), free(bound), free(gq), free(gd);
}

static void test_refusals(void)
{
    static uint8_t buf[4096] __attribute__((aligned(16)));
    tq_cuda_qmat m = {.fmt = TQ_GGML_Q5_K, .rows = 4, .cols = 256, .w = buf, .row_bytes = 176};
    CHECK(tq_cuda_qgemv_check(&m) == TQ_E_UNSUPPORTED, "Q5_K has no GPU kernel: %s", tq_last_error());
    m = (tq_cuda_qmat){.fmt = TQ_GGML_Q4_0, .rows = 4, .cols = 100, .w = buf, .row_bytes = 64};
    CHECK(tq_cuda_qgemv_check(&m) == TQ_E_ARG, "100 columns: %s", tq_last_error());
    CHECK(strstr(tq_last_error(), "multiple of 32") != NULL, "message names the block: %s", tq_last_error());
    m = (tq_cuda_qmat){.fmt = TQ_GGML_Q4_K, .rows = 4, .cols = 256, .w = buf, .row_bytes = 146};
    CHECK(tq_cuda_qgemv_check(&m) == TQ_E_ARG, "Q4_K rows 146 bytes apart: %s", tq_last_error());
    m = (tq_cuda_qmat){.fmt = TQ_GGML_Q4_0, .rows = 4, .cols = 64, .w = buf, .row_bytes = 30};
    CHECK(tq_cuda_qgemv_check(&m) == TQ_E_ARG, "rows shorter than the packed row: %s", tq_last_error());
    m = (tq_cuda_qmat){.fmt = TQ_CUDA_QGEMV_MLX, .rows = 4, .cols = 64, .w = buf, .row_bytes = 32, .bits = 3,
                       .group = 64, .scales = buf, .biases = buf};
    CHECK(tq_cuda_qgemv_check(&m) == TQ_E_UNSUPPORTED, "MLX 3-bit: %s", tq_last_error());
    m.bits = 4;
    m.group = 48;
    CHECK(tq_cuda_qgemv_check(&m) == TQ_E_UNSUPPORTED, "MLX group 48: %s", tq_last_error());
    m.group = 64;
    CHECK(tq_cuda_qgemv_check(&m) == TQ_OK, "MLX 4-bit g64 64 columns: %s", tq_last_error());
    m.scales = NULL;
    CHECK(tq_cuda_qgemv_check(&m) == TQ_E_ARG, "MLX without scales: %s", tq_last_error());
}

/* the bf16 rows of prefill (tq_cuda_qgemv_dequant_bf16) against the CPU's scalar dequantizer's
 * f32 values rounded to bf16: the same f32 operations in the same order, so the bits must match
 * (one bf16 step allowed only where the CPU build fuses a multiply-add; counted) */
static void test_dequant(int fmt, int64_t rows, int64_t cols)
{
    const tq_format *f = tq_format_get(fmt);
    const size_t rb = tq_format_row_bytes(f, cols);
    uint8_t *w = calloc((size_t)rows, rb);
    for (int64_t r = 0; r < rows; r++)
        fill_blocks(fmt, w + (size_t)r * rb, cols);
    uint16_t *g = malloc(2 * (size_t)(rows * cols));
    float *ref = malloc(sizeof(float) * (size_t)cols);
    tq_cuda_qmat m = {.fmt = fmt, .rows = rows, .cols = cols, .w = w, .row_bytes = rb};
    tq_status st = tq_cuda_qgemv_dequant_host(&m, g);
    CHECK(st == TQ_OK, "dequant %s %lldx%lld: %s", f->name, (long long)rows, (long long)cols, tq_last_error());
    long exact = 0, near = 0, bad = 0;
    for (int64_t r = 0; st == TQ_OK && r < rows; r++) {
        f->dequant_ref(w + (size_t)r * rb, ref, cols);
        for (int64_t j = 0; j < cols; j++) {
            const int a = (int16_t)g[r * cols + j], b = (int16_t)tq_f32_to_bf16(ref[j]);
            if (a == b)
                exact++;
            else if (abs(a - b) == 1)
                near++;
            else if (bad++ == 0)
                CHECK(0, "dequant %s row %lld col %lld: gpu bf16 %04x, cpu %04x (%.9g)", f->name, (long long)r,
                      (long long)j, (unsigned)g[r * cols + j], (unsigned)(uint16_t)b, ref[j]);
        }
    }
    CHECK(bad == 0, "dequant %s: %ld values off by more than one bf16 step", f->name, bad);
    printf("dequant bf16 %s %lldx%lld: %ld exact, %ld one step off\n", f->name, (long long)rows, (long long)cols,
           exact, near);
    free(w);
    free(g);
    free(ref);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cuda_qgemv");
    int quick = 0;
    for (int i = 1; i < argc; i++)
        quick |= !strcmp(argv[i], "--quick");
    tq_rng_seed(&rng, t_seed);
    if (!tq_cuda_compiled())
        return t_skip("this build has no CUDA kernels (no nvcc at build time)");
    test_refusals();
    if (!tq_cuda_available()) {
        printf("argument checks: %d passed, %d failed\n", t_pass, t_fail);
        return t_fail ? 1 : t_skip("no CUDA device (the argument checks above ran)");
    }
    static const int fmts[] = {TQ_GGML_Q8_0, TQ_GGML_Q4_0, TQ_GGML_Q4_1, TQ_GGML_Q4_K, TQ_GGML_Q6_K};
    static const int64_t shapes[][2] = {{1, 256}, {5, 512}, {37, 1024}, {130, 4096}, {64, 14336}};
    const int n_shapes = quick ? 3 : 5;
    /* the batch-1 paths: rows streamed through shared memory (16-byte aligned rows), direct, and
     * the wide kernel (persistent blocks, activation in shared memory; other formats / rows fall
     * back to the staged or direct kernel) */
    static const int paths[] = {2, 0, 3};
    for (int pi = 0; pi < 3; pi++) { /* 2: every staged format, 0: none, 3: wide */
        const int staged = paths[pi];
        tq_cuda_qgemv_set_staged(staged);
        for (int fi = 0; fi < 5; fi++) {
            const int pad = fmts[fi] == TQ_GGML_Q4_K ? 16 : fmts[fi] == TQ_GGML_Q4_1 ? 4 : 2;
            for (int s = 0; s < n_shapes; s++)
                test_ggml(fmts[fi], shapes[s][0], shapes[s][1], 1, s == 1 ? pad : 0);
            test_ggml(fmts[fi], 37, 1024, 3, pad);
            test_ggml(fmts[fi], 9, 512, 9, 0);
            if (fmts[fi] == TQ_GGML_Q6_K) /* 24 super-blocks: 3 chunks of the staged path */
                test_ggml(fmts[fi], 11, 6144, 1, 0);
            if (staged == 3) { /* more rows than resident warps: several rows per warp */
                test_ggml(fmts[fi], 4500, 256, 1, 0);
                test_ggml(fmts[fi], 3, 6144, 1, 0); /* Q4_K: 24 super-blocks = 1.5 chunks */
                if (fi < 3) { /* 576 columns (SmolLM2's head): packed rows of 612 / 324 / 360
                               * bytes padded to a 16-byte stride, which the wide kernel reads */
                    const size_t prb = tq_format_row_bytes(tq_format_get(fmts[fi]), 576);
                    test_ggml(fmts[fi], 4500, 576, 1, (int)((16 - prb % 16) % 16));
                }
            }
            printf("%s %s done (worst |gpu - ref| / sum|w xq| so far %.2e)\n", tq_format_get(fmts[fi])->name,
                   staged == 3 ? "wide" : staged ? "staged" : "direct", worst_ratio);
        }
    }
    tq_cuda_qgemv_set_staged(3); /* the default */
    for (int fi = 0; fi < 5; fi++)
        test_dequant(fmts[fi], 37, 1024);
    static const int groups[] = {32, 64, 128};
    for (int bits = 4; bits <= 8; bits += 4)
        for (int gi = 0; gi < 3; gi++) {
            test_mlx(bits, groups[gi], 0, 5, 512, 1);
            test_mlx(bits, groups[gi], gi == 1, 37, 1024, 3);
            if (!quick)
                test_mlx(bits, groups[gi], 0, 130, 4096, 1);
        }
    test_mlx(4, 64, 0, 9, 256, 9);
    printf("MLX done; worst |gpu - ref| / sum|w xq|: %.2e (tolerance 2e-5)\n", worst_ratio);
    return t_done();
}
