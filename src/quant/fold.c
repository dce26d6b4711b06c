/* fold.c -- the rotation fold on f32 matrices (docs/FORMAT.md "Rotation fold").
 *
 * One operation everywhere: a vector v of length n (n = hidden for R1, head_dim for R2) becomes
 * R^T v with R = diag(s) H^T / sqrt(n), H = H_K (x) H_M the table's Hadamard matrix
 * (src/common/hadamard.h), i.e. R^T v = H diag(s) v / sqrt(n) = tq_hadamard_apply_f64(v, n, s,
 * NORMALIZE). A residual reader W (out, in) becomes W R (each row v -> R^T v), a writer R^T W
 * (each column), embeddings E R (each row). Computed in double, rounded to f32 once. */
#include <stdlib.h>

#include "common/hadamard.h"
#include "quant/quant_internal.h"

static tq_status need_n(int64_t n)
{
    if (!tq_hadamard_supported(n))
        return TQ_FAIL(TQ_E_UNSUPPORTED,
                       "rotation: no Hadamard construction for n = %lld (supported: n = K * 2^m "
                       "with K in 1 12 20 28 36 40 44 52 60 68 76 84 100 108 124 132 140 148 164)",
                       (long long)n);
    return TQ_OK;
}

tq_status tq_fold_rows(float *w, int64_t rows, int64_t cols, const float *gain,
                       const int8_t *signs)
{
    tq_status st = signs ? need_n(cols) : TQ_OK;
    if (st)
        return st;
    double *v = tq_malloc((size_t)cols * sizeof(double));
    if (!v)
        return TQ_FAIL(TQ_E_NOMEM, "rotation: out of memory");
    for (int64_t r = 0; r < rows; r++) {
        float *row = w + r * cols;
        for (int64_t c = 0; c < cols; c++)
            v[c] = gain ? (double)row[c] * (double)gain[c] : (double)row[c];
        if (signs)
            tq_hadamard_apply_f64(v, cols, signs, TQ_HADAMARD_NORMALIZE);
        for (int64_t c = 0; c < cols; c++)
            row[c] = (float)v[c];
    }
    tq_free(v);
    return TQ_OK;
}

tq_status tq_fold_cols(float *w, int64_t rows, int64_t cols, const int8_t *signs)
{
    tq_status st = need_n(rows);
    if (st)
        return st;
    double *v = tq_malloc((size_t)rows * sizeof(double));
    if (!v)
        return TQ_FAIL(TQ_E_NOMEM, "rotation: out of memory");
    for (int64_t c = 0; c < cols; c++) {
        for (int64_t r = 0; r < rows; r++)
            v[r] = w[r * cols + c];
        tq_hadamard_apply_f64(v, rows, signs, TQ_HADAMARD_NORMALIZE);
        for (int64_t r = 0; r < rows; r++)
            w[r * cols + c] = (float)v[r];
    }
    tq_free(v);
    return TQ_OK;
}

tq_status tq_fold_head_rows(float *w, int64_t rows, int64_t cols, int hd, const int8_t *signs)
{
    tq_status st = need_n(hd);
    if (st)
        return st;
    if (hd <= 0 || rows % hd)
        return TQ_FAIL(TQ_E_FORMAT, "rotation: %lld rows are not whole heads of %d", (long long)rows,
                       hd);
    double v[1024];
    if (hd > 1024)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "rotation: head_dim %d > 1024", hd);
    for (int64_t h = 0; h < rows / hd; h++)
        for (int64_t c = 0; c < cols; c++) {
            float *b = w + h * hd * cols + c;
            for (int i = 0; i < hd; i++)
                v[i] = b[i * cols];
            tq_hadamard_apply_f64(v, hd, signs, TQ_HADAMARD_NORMALIZE);
            for (int i = 0; i < hd; i++)
                b[i * cols] = (float)v[i];
        }
    return TQ_OK;
}

tq_status tq_fold_head_cols(float *w, int64_t rows, int64_t cols, int hd, const int8_t *signs)
{
    tq_status st = need_n(hd);
    if (st)
        return st;
    if (hd <= 0 || cols % hd)
        return TQ_FAIL(TQ_E_FORMAT, "rotation: %lld columns are not whole heads of %d",
                       (long long)cols, hd);
    double v[1024];
    if (hd > 1024)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "rotation: head_dim %d > 1024", hd);
    for (int64_t r = 0; r < rows; r++)
        for (int64_t h = 0; h < cols / hd; h++) {
            float *b = w + r * cols + h * hd;
            for (int i = 0; i < hd; i++)
                v[i] = b[i];
            tq_hadamard_apply_f64(v, hd, signs, TQ_HADAMARD_NORMALIZE);
            for (int i = 0; i < hd; i++)
                b[i] = (float)v[i];
        }
    return TQ_OK;
}

void tq_rotation_signs(uint64_t seed, uint64_t lane, int64_t n, int8_t *out)
{
    uint64_t x = seed ^ (lane * 0xd1b54a32d192ed03ull);
    for (int64_t i = 0; i < n; i++) {
        uint64_t z = (x += 0x9e3779b97f4a7c15ull);
        z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
        z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
        z ^= z >> 31;
        out[i] = (z >> 63) ? -1 : 1;
    }
}
