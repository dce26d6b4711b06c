/* amx_probe.c -- does AMX int8 work on this machine, and what would it buy the batched decode?
 * (issue 15; an executable only, never a test, not part of the library).
 *
 *   build/release/tests/amx_probe [ROWS K REPS]        (default 1536 576 300)
 *
 * 1. Availability: CPUID.7.0:EDX AMX-TILE/AMX-INT8, XCR0 bits 17-18 (the OS saves tile state),
 *    Linux arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) (without it the first tile
 *    instruction raises SIGILL), then one 16x16x64 tdpbssd compared with the scalar sums. Every
 *    missing piece is printed by name and the program stops before any tile instruction.
 * 2. A prototype, not the library's kernel: ROWS x K Q4_1 weights (GGUF blocks, 20 bytes per 32)
 *    times 8 tokens of q8 activations under a PER-BLOCK spec (P = the exact int32 sum of a
 *    block's 32 products; acc = fmaf((float)P, d_w * d_a, acc); accm = fmaf(m_w, s_a, accm);
 *    y = acc + accm) -- not qdot.h's per-lane spec, which AMX cannot serve (its int32 tile sums
 *    a whole row of K, so per-4-element sums would need a block-diagonal B at 1/8 of its rate
 *    and the float work of the 8 lanes stays). 16 rows x 8 tokens per tile: the weight nibbles
 *    of a block unpacked to a 16 x 32 u8 A tile (the next block's while the current tdpbusd
 *    runs), B = the block's 8 tokens in the VNNI layout (prepacked once), C = 16 x 8 int32, then
 *    one cvt + mul + fma per 16 lanes. Checked bit for bit against its scalar reference; the
 *    time (minimum thread CPU over REPS, weights from cache) is to be compared with the
 *    library's per-lane tile on the same shape: `qdot_bench -n 8 -s ROWS,K -t 1` (the Q4_1
 *    avx512vnni q8 row; it also quantizes the activations inside its timed region).
 *    2026-12-03 (serve helper, loaded 2-vCPU Xeon): AMX works here; 1536 x 576: 75 us vs the
 *    per-lane tile's 151 us. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#if defined(__x86_64__) && defined(__linux__) && defined(__AMX_INT8__)
#include <cpuid.h>
#include <immintrin.h>
#include <math.h>
#include <sys/syscall.h>
#include <unistd.h>

#define NT 8 /* tokens per tile */
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

typedef struct tilecfg {
    uint8_t palette, start;
    uint8_t res[14];
    uint16_t colsb[16];
    uint8_t rows[16];
} tilecfg;

typedef struct q8a {
    float d, s;
    int8_t qs[32];
} q8a;

static double cpu_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static float f16(const uint8_t *p)
{
    return _cvtsh_ss((unsigned short)(p[0] | p[1] << 8));
}

static int available(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1) || !((d >> 25) & 1)) {
        printf("AMX: the CPU does not report AMX-TILE and AMX-INT8 (CPUID.7.0:EDX bits 24, 25)\n");
        return 0;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) {
        printf("AMX: XCR0 = 0x%x: the OS does not enable the tile state (bits 17, 18)\n", lo);
        return 0;
    }
    if (syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) != 0) {
        printf("AMX: arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) refused (kernel < 5.16?)\n");
        return 0;
    }
    return 1;
}

static void config(int k_rows_b)
{
    tilecfg cfg;
    memset(&cfg, 0, sizeof(cfg));
    cfg.palette = 1;
    /* tile 0: C 16 x 8 int32; 1: A 16 x 32 u8; 2: B (K/4) x 32; 3-5: the 16x16x64 self-check */
    cfg.rows[0] = 16, cfg.colsb[0] = 32;
    cfg.rows[1] = 16, cfg.colsb[1] = 32;
    cfg.rows[2] = (uint8_t)k_rows_b, cfg.colsb[2] = 32;
    for (int i = 3; i < 6; i++)
        cfg.rows[i] = 16, cfg.colsb[i] = 64;
    _tile_loadconfig(&cfg);
}

static int self_check(void)
{
    static int8_t A[16 * 64], B[16 * 64];
    static int32_t C[16 * 16];
    for (int i = 0; i < 16 * 64; i++) {
        A[i] = (int8_t)(i % 7 - 3);
        B[i] = (int8_t)(i % 5 - 2);
    }
    _tile_zero(3);
    _tile_loadd(4, A, 64);
    _tile_loadd(5, B, 64);
    _tile_dpbssd(3, 4, 5);
    _tile_stored(3, C, 64);
    int bad = 0;
    for (int m = 0; m < 16; m++)
        for (int n = 0; n < 16; n++) {
            int32_t s = 0;
            for (int k = 0; k < 64; k++)
                s += A[m * 64 + k] * B[(k / 4) * 64 + n * 4 + k % 4];
            bad += s != C[m * 16 + n];
        }
    return bad;
}

/* the per-block spec, scalar: y[t * R + r] */
static void ref(const uint8_t *w, size_t rb, int R, int nb, const q8a *a, float *y)
{
    for (int r = 0; r < R; r++)
        for (int t = 0; t < NT; t++) {
            float acc = 0.0f, accm = 0.0f;
            for (int b = 0; b < nb; b++) {
                const uint8_t *p = w + (size_t)r * rb + (size_t)b * 20;
                const q8a *at = a + t * nb + b;
                int32_t P = 0;
                for (int j = 0; j < 16; j++)
                    P += (p[4 + j] & 15) * at->qs[j] + (p[4 + j] >> 4) * at->qs[j + 16];
                acc = fmaf((float)P, f16(p) * at->d, acc);
                accm = fmaf(f16(p + 2), at->s, accm);
            }
            y[t * R + r] = acc + accm;
        }
}

/* 16 rows' nibbles of block b -> dst (16 x 32 u8: low nibbles, then high, per row) */
static inline void unpack16(const uint8_t *w0, size_t rb, int b, uint8_t *dst)
{
    const __m512i sh = _mm512_setr_epi32(0, 0, 0, 0, 4, 4, 4, 4, 0, 0, 0, 0, 4, 4, 4, 4);
    for (int q = 0; q < 8; q++) {
        const uint8_t *p0 = w0 + (size_t)(2 * q) * rb + (size_t)b * 20 + 4, *p1 = p0 + rb;
        const __m128i x0 = _mm_loadu_si128((const __m128i *)p0);
        const __m128i x1 = _mm_loadu_si128((const __m128i *)p1);
        __m512i v = _mm512_inserti32x4(_mm512_castsi128_si512(x0), x0, 1);
        v = _mm512_inserti32x4(_mm512_inserti32x4(v, x1, 2), x1, 3);
        v = _mm512_and_si512(_mm512_srlv_epi32(v, sh), _mm512_set1_epi8(15));
        _mm512_store_si512((__m512i *)(dst + 64 * q), v);
    }
}

static void amx8(const uint8_t *w, size_t rb, int R, int nb, const q8a *a, float *y, int8_t *B,
                 float *da, float *sa)
{
    for (int b = 0; b < nb; b++) { /* prepack: B[k4][t * 4 + j] = qs[4 k4 + j] of token t */
        for (int k4 = 0; k4 < 8; k4++)
            for (int t = 0; t < NT; t++)
                memcpy(B + b * 256 + k4 * 32 + t * 4, a[t * nb + b].qs + 4 * k4, 4);
        for (int t = 0; t < NT; t++) {
            da[b * 16 + t] = da[b * 16 + 8 + t] = a[t * nb + b].d;
            sa[b * 16 + t] = sa[b * 16 + 8 + t] = a[t * nb + b].s;
        }
    }
    _Alignas(64) uint8_t A[2][16 * 32];
    _Alignas(64) int32_t C[16 * 8];
    const __m512i idx = _mm512_mullo_epi32(
        _mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
        _mm512_set1_epi32((int)rb));
    for (int r0 = 0; r0 < R; r0 += 16) {
        const uint8_t *w0 = w + (size_t)r0 * rb;
        __m512 acc[8], accm[8];
        for (int q = 0; q < 8; q++)
            acc[q] = accm[q] = _mm512_setzero_ps();
        unpack16(w0, rb, 0, A[0]);
        for (int b = 0; b < nb; b++) {
            _tile_loadd(1, A[b & 1], 32);
            _tile_loadd(2, B + b * 256, 32);
            _tile_zero(0);
            _tile_dpbusd(0, 1, 2);
            if (b + 1 < nb)
                unpack16(w0, rb, b + 1, A[(b + 1) & 1]); /* while the tile multiplies */
            const __m512i dm = _mm512_i32gather_epi32(idx, (const int *)(w0 + (size_t)b * 20), 1);
            const __m512 dw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(dm));
            const __m512 mw = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(dm, 16)));
            const __m512 dav = _mm512_loadu_ps(da + b * 16), sav = _mm512_loadu_ps(sa + b * 16);
            _tile_stored(0, C, 32);
            for (int q = 0; q < 8; q++) { /* rows 2q (lanes 0-7) and 2q + 1 (8-15) x 8 tokens */
                const __m512i pi = _mm512_add_epi32(
                    _mm512_set1_epi32(2 * q),
                    _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1));
                const __m512 P = _mm512_cvtepi32_ps(_mm512_load_si512((const __m512i *)(C + 16 * q)));
                acc[q] = _mm512_fmadd_ps(P, _mm512_mul_ps(_mm512_permutexvar_ps(pi, dw), dav), acc[q]);
                accm[q] = _mm512_fmadd_ps(_mm512_permutexvar_ps(pi, mw), sav, accm[q]);
            }
        }
        for (int q = 0; q < 8; q++) {
            float o[16];
            _mm512_storeu_ps(o, _mm512_add_ps(acc[q], accm[q]));
            for (int t = 0; t < NT; t++) {
                y[t * R + r0 + 2 * q] = o[t];
                y[t * R + r0 + 2 * q + 1] = o[8 + t];
            }
        }
    }
}

int main(int argc, char **argv)
{
    const int R = argc > 1 ? atoi(argv[1]) : 1536, K = argc > 2 ? atoi(argv[2]) : 576;
    const int reps = argc > 3 ? atoi(argv[3]) : 300;
    if (R < 16 || R % 16 || K < 32 || K % 32 || reps < 1) {
        fprintf(stderr, "usage: amx_probe [ROWS (a multiple of 16) K (of 32) REPS]\n");
        return 2;
    }
    if (!available())
        return 0;
    config(8);
    const int bad0 = self_check();
    printf("AMX: available (CPUID, XCR0, arch_prctl permission); 16x16x64 tdpbssd vs scalar: %d "
           "of 256 differ\n", bad0);
    const int nb = K / 32;
    const size_t rb = (size_t)nb * 20;
    uint8_t *w = malloc((size_t)R * rb);
    q8a *a = malloc(sizeof(q8a) * NT * (size_t)nb);
    float *y0 = malloc(sizeof(float) * NT * (size_t)R), *y1 = malloc(sizeof(float) * NT * (size_t)R);
    int8_t *B = aligned_alloc(64, 256 * (size_t)nb);
    float *da = aligned_alloc(64, 64 * (size_t)nb), *sa = aligned_alloc(64, 64 * (size_t)nb);
    if (!w || !a || !y0 || !y1 || !B || !da || !sa) {
        fprintf(stderr, "amx_probe: out of memory\n");
        return 1;
    }
    srand(7);
    for (size_t i = 0; i < (size_t)R * rb; i++)
        w[i] = (uint8_t)rand();
    for (int r = 0; r < R; r++)
        for (int b = 0; b < nb; b++) { /* finite f16 scale and min */
            uint8_t *p = w + (size_t)r * rb + (size_t)b * 20;
            const unsigned short d = _cvtss_sh((float)(rand() % 1000) * 1e-5f, 0);
            const unsigned short m = _cvtss_sh(-(float)(rand() % 1000) * 1e-4f, 0);
            p[0] = (uint8_t)d, p[1] = (uint8_t)(d >> 8), p[2] = (uint8_t)m, p[3] = (uint8_t)(m >> 8);
        }
    for (int i = 0; i < NT * nb; i++) {
        int s = 0;
        for (int j = 0; j < 32; j++)
            s += a[i].qs[j] = (int8_t)(rand() % 255 - 127);
        a[i].d = (float)(rand() % 1000) * 1e-5f;
        a[i].s = a[i].d * (float)s;
    }
    ref(w, rb, R, nb, a, y0);
    amx8(w, rb, R, nb, a, y1, B, da, sa);
    int bad = 0;
    for (int i = 0; i < NT * R; i++)
        bad += memcmp(&y0[i], &y1[i], sizeof(float)) != 0;
    double best = 1e30;
    for (int i = 0; i < reps; i++) {
        const double t0 = cpu_now();
        amx8(w, rb, R, nb, a, y1, B, da, sa);
        const double t = cpu_now() - t0;
        best = t < best ? t : best;
    }
    _tile_release();
    printf("per-block prototype, Q4_1 %d x %d x 8 tokens: %d of %d results differ from its scalar "
           "reference; %.1f us (minimum thread CPU of %d; compare: qdot_bench -n 8 -s %d,%d -t 1, "
           "Q4_1 avx512vnni q8)\n", R, K, bad, NT * R, best * 1e6, reps, R, K);
    free(w), free(a), free(y0), free(y1), free(B), free(da), free(sa);
    return bad0 || bad;
}
#else
int main(void)
{
    printf("AMX: not built (needs x86-64 Linux and a compiler with -mamx-int8)\n");
    return 0;
}
#endif
