/* test_io_gguf.c -- GGUF and safetensors readers, config, tq_weights on small committed fixtures
 * (tests/data/io, made by scripts/io_ref/make_fixtures.py with the `gguf` and `safetensors`
 * packages): every metadata type, dequant of every type against gguf-py's hashes on every ISA,
 * hand-computed blocks, the q/k un-permutation (GGUF and safetensors copies agree), every bad
 * file class, and every truncation of a good file. Label: fast. */
#include <stdlib.h>
#include <time.h>

#include "t.h"
#include "io_sha256.h"
#include "turboquant.h"

static void *slurp(const char *path, size_t *n)
{
    FILE *f = fopen(path, "rb");
    void *p = NULL;
    long sz;
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    sz = ftell(f);
    fseek(f, 0, SEEK_SET);
    p = malloc(sz > 0 ? (size_t)sz : 1);
    if (p && fread(p, 1, (size_t)sz, f) != (size_t)sz) {
        free(p);
        p = NULL;
    }
    fclose(f);
    *n = (size_t)sz;
    return p;
}

static void test_sha256(void)
{
    sha256 s;
    char hex[65];
    sha256_init(&s);
    sha256_update(&s, "abc", 3);
    sha256_hex(&s, hex);
    CHECK(!strcmp(hex, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"), "%s",
          hex);
}

static void test_metadata(const tq_gguf *g)
{
    int64_t i64 = 0;
    uint32_t u32 = 0;
    float f = 0;
    int b = 0, t = -1;
    int64_t n = 0;
    const char *s = NULL;
    size_t len = 0;
    int32_t arr[8];
    float farr[4];

    CHECK(tq_gguf_version(g) == 3 && tq_gguf_alignment(g) == 32, "version/alignment");
    CHECK(tq_gguf_get_i64(g, "test.u8", &i64) == TQ_OK && i64 == 200, "u8 %lld", (long long)i64);
    CHECK(tq_gguf_get_i64(g, "test.i8", &i64) == TQ_OK && i64 == -100, "i8");
    CHECK(tq_gguf_get_i64(g, "test.u16", &i64) == TQ_OK && i64 == 60000, "u16");
    CHECK(tq_gguf_get_i64(g, "test.i16", &i64) == TQ_OK && i64 == -30000, "i16");
    CHECK(tq_gguf_get_u32(g, "test.u32", &u32) == TQ_OK && u32 == 4000000000u, "u32");
    CHECK(tq_gguf_get_i64(g, "test.i32", &i64) == TQ_OK && i64 == -2000000000, "i32");
    CHECK(tq_gguf_get_u32(g, "test.i32", &u32) == TQ_E_FORMAT, "negative into u32 must fail");
    CHECK(tq_gguf_get_f32(g, "test.f32", &f) == TQ_OK && f == 1.5f, "f32");
    CHECK(tq_gguf_get_bool(g, "test.bool", &b) == TQ_OK && b == 1, "bool");
    CHECK(tq_gguf_get_str(g, "test.string", &s, &len) == TQ_OK && len == 6 &&
              !strcmp(s, "h\xc3\xa9llo"),
          "string");
    CHECK(tq_gguf_get_i64(g, "test.u64", &i64) == TQ_E_FORMAT, "u64 above INT64_MAX must fail");
    CHECK(tq_gguf_get_i64(g, "test.i64", &i64) == TQ_OK && i64 == -(1ll << 40), "i64");
    CHECK(tq_gguf_get_f32(g, "test.f64", &f) == TQ_OK && f == 0.1f, "f64");
    CHECK(tq_gguf_get_str(g, "test.f32", &s, &len) == TQ_E_FORMAT, "type mismatch");
    CHECK(tq_gguf_get_i64(g, "no.such.key", &i64) == TQ_E_ARG &&
              strstr(tq_last_error(), "no.such.key"),
          "missing key names it: %s", tq_last_error());
    CHECK(tq_gguf_get_arr(g, "test.arr_i32", &t, &n) == TQ_OK && t == TQ_GGUF_I32 && n == 3, "arr");
    CHECK(tq_gguf_get_arr_i32(g, "test.arr_i32", arr, 8) == TQ_OK && arr[0] == 1 && arr[1] == -2 &&
              arr[2] == 3,
          "arr_i32");
    CHECK(tq_gguf_get_arr_i32(g, "test.arr_i32", arr, 2) == TQ_E_OVERFLOW, "small buffer");
    CHECK(tq_gguf_get_arr_f32(g, "test.arr_f32", farr, 4) == TQ_OK && farr[0] == 0.5f &&
              farr[1] == -0.25f,
          "arr_f32");
    CHECK(tq_gguf_get_arr(g, "test.nested", &t, &n) == TQ_OK && t == TQ_GGUF_ARRAY && n == 2,
          "nested array: type %d n %lld", t, (long long)n);
    const int64_t ki = tq_gguf_find_key(g, "test.nested");
    CHECK(tq_gguf_kv_type(g, ki) == TQ_GGUF_ARRAY && tq_gguf_kv_arr_len(g, ki) == 2, "kv by index");
    CHECK(tq_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 3, &s, &len) == TQ_OK && len == 2 &&
              !memcmp(s, "bc", 2),
          "string array element");
    CHECK(tq_gguf_get_arr_str(g, "tokenizer.ggml.merges", 1, &s, &len) == TQ_OK && len == 3 &&
              !memcmp(s, "b c", 3),
          "merges");
    CHECK(tq_gguf_get_arr_str(g, "tokenizer.ggml.tokens", 4, &s, &len) == TQ_E_ARG, "index range");
}

static void test_dequant_ref(const tq_gguf *g, const char *ref)
{
    FILE *f = fopen(ref, "r");
    char line[512];
    int n = 0;
    CHECK(f != NULL, "open %s", ref);
    while (f && fgets(line, sizeof(line), f)) {
        char name[128], type[16], want[80], got[65];
        long long ne;
        if (line[0] == '#' || sscanf(line, "%127s %15s %lld %79s", name, type, &ne, want) != 4)
            continue;
        const int64_t ti = tq_gguf_find_tensor(g, name);
        tq_gguf_tensor_info info;
        CHECK(ti >= 0 && tq_gguf_tensor(g, ti, &info) == TQ_OK, "%s", name);
        if (ti < 0)
            continue;
        float *x = malloc((size_t)ne * 4);
        for (int isa = 0; isa < TQ_ISA_COUNT; isa++) {
            sha256 s;
            memset(x, 0xff, (size_t)ne * 4);
            CHECK(tq_ggml_dequant_isa((tq_isa)isa, info.type, info.data, info.nbytes, x, ne) ==
                      TQ_OK,
                  "%s", tq_last_error());
            sha256_init(&s);
            sha256_update(&s, x, (size_t)ne * 4);
            sha256_hex(&s, got);
            CHECK(!strcmp(got, want), "%s %s isa %d: %s vs gguf-py %s", name, type, isa, got, want);
        }
        free(x);
        n++;
    }
    CHECK(n == 13, "%d reference tensors", n);
    if (f)
        fclose(f);
}

/* Blocks built by hand; expected values from the format definition, not from our code. */
static void test_dequant_hand(void)
{
    uint8_t q40[18], q80[34], q51[24];
    float y[32];
    q40[0] = 0x00, q40[1] = 0x38; /* f16 0.5 */
    for (int j = 0; j < 16; j++)
        q40[2 + j] = (uint8_t)(j | (15 - j) << 4);
    CHECK(tq_ggml_dequant(TQ_GGML_Q4_0, q40, sizeof(q40), y, 32) == TQ_OK, "q4_0");
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == 0.5f * (float)(j - 8), "q4_0 lo %d: %g", j, y[j]);
        CHECK(y[j + 16] == 0.5f * (float)(7 - j), "q4_0 hi %d: %g", j, y[j + 16]);
    }
    q80[0] = 0x00, q80[1] = 0x40; /* 2.0 */
    for (int j = 0; j < 32; j++)
        q80[2 + j] = (uint8_t)(int8_t)(j * 8 - 128);
    CHECK(tq_ggml_dequant(TQ_GGML_Q8_0, q80, sizeof(q80), y, 32) == TQ_OK, "q8_0");
    for (int j = 0; j < 32; j++)
        CHECK(y[j] == 2.0f * (float)(j * 8 - 128), "q8_0 %d", j);
    q51[0] = 0x00, q51[1] = 0x3c;                               /* d = 1 */
    q51[2] = 0x00, q51[3] = 0xbc;                               /* m = -1 */
    q51[4] = 0xff, q51[5] = 0x00, q51[6] = 0x00, q51[7] = 0x80; /* bits 0-7 and 31 set */
    for (int j = 0; j < 16; j++)
        q51[8 + j] = (uint8_t)(3 | 5 << 4);
    CHECK(tq_ggml_dequant(TQ_GGML_Q5_1, q51, sizeof(q51), y, 32) == TQ_OK, "q5_1");
    for (int j = 0; j < 16; j++) {
        CHECK(y[j] == (float)(3 + (j < 8 ? 16 : 0)) - 1.0f, "q5_1 lo %d: %g", j, y[j]);
        CHECK(y[j + 16] == (float)(5 + (j == 15 ? 16 : 0)) - 1.0f, "q5_1 hi %d: %g", j, y[j + 16]);
    }
    CHECK(tq_ggml_dequant(TQ_GGML_Q4_0, q40, sizeof(q40), y, 31) == TQ_E_FORMAT, "partial block");
    CHECK(tq_ggml_dequant(TQ_GGML_Q4_0, q40, 17, y, 32) == TQ_E_ARG, "short source");
    CHECK(tq_ggml_dequant(TQ_GGML_Q2_K, q40, 18, y, 256) == TQ_E_UNSUPPORTED &&
              strstr(tq_last_error(), "Q2_K"),
          "unsupported type named: %s", tq_last_error());
}

static void test_weights(void)
{
    tq_weights *wg = NULL, *ws = NULL;
    float qg[64], qs[64], kg[32], ks[32];
    uint16_t qb[64];
    tq_weights_tensor t;
    CHECK(tq_weights_open("tests/data/io/tiny.gguf", &wg) == TQ_OK, "%s", tq_last_error());
    CHECK(tq_weights_open("tests/data/io/tiny_st", &ws) == TQ_OK, "%s", tq_last_error());
    if (!wg || !ws)
        goto out;
    const tq_model_config *c = tq_weights_config(wg);
    CHECK(c->arch == TQ_ARCH_LLAMA && c->n_layers == 1 && c->hidden == 8 && c->n_heads == 2 &&
              c->n_kv_heads == 1 && c->head_dim == 4 && c->ffn_hidden == 16 && c->vocab == 4 &&
              c->rope_theta == 500000.0f && c->rms_eps == 1e-5f && c->bos_id == 0 &&
              c->eos_id == 1 && c->max_ctx == 128 && c->tied_embeddings == 1 &&
              c->rope_order == TQ_ROPE_NEOX,
          "gguf config");
    const tq_model_config *cs = tq_weights_config(ws);
    CHECK(cs->arch == TQ_ARCH_LLAMA && cs->head_dim == 4 && cs->n_kv_heads == 1 &&
              cs->rope_scaling == TQ_ROPE_SCALING_LLAMA3 && cs->rope_factor == 32.0f &&
              cs->rope_low_freq_factor == 1.0f && cs->rope_high_freq_factor == 4.0f &&
              cs->rope_orig_max_pos == 8192 && cs->eos_id == 1 && cs->bos_id == 0 &&
              cs->tied_embeddings == 1,
          "json config");
    CHECK(tq_weights_get(wg, "model.layers.0.self_attn.q_proj.weight", &t) == TQ_OK &&
              t.shape[0] == 8 && t.shape[1] == 8 && !strcmp(t.src_name, "blk.0.attn_q.weight"),
          "hf name of attn_q");
    CHECK(tq_weights_read(wg, "model.layers.0.self_attn.q_proj.weight", TQ_DTYPE_F32, qg,
                          sizeof(qg)) == TQ_OK,
          "%s", tq_last_error());
    CHECK(tq_weights_read(wg, "model.layers.0.self_attn.k_proj.weight", TQ_DTYPE_F32, kg,
                          sizeof(kg)) == TQ_OK,
          "%s", tq_last_error());
    CHECK(tq_weights_read(ws, "model.layers.0.self_attn.q_proj.weight", TQ_DTYPE_F32, qs,
                          sizeof(qs)) == TQ_OK,
          "%s", tq_last_error());
    CHECK(tq_weights_read(ws, "model.layers.0.self_attn.k_proj.weight", TQ_DTYPE_F32, ks,
                          sizeof(ks)) == TQ_OK,
          "%s", tq_last_error());
    for (int r = 0; r < 8; r++)
        for (int col = 0; col < 8; col++) {
            CHECK(qg[r * 8 + col] == (float)(100 * r + col), "gguf q[%d][%d] = %g", r, col,
                  qg[r * 8 + col]);
            CHECK(qs[r * 8 + col] == (float)(100 * r + col), "st q[%d][%d]", r, col);
        }
    for (int r = 0; r < 4; r++)
        for (int col = 0; col < 8; col++) {
            CHECK(kg[r * 8 + col] == (float)(100 * r + col) + 0.5f, "gguf k[%d][%d]", r, col);
            CHECK(ks[r * 8 + col] == kg[r * 8 + col], "st k (f16) == gguf k at [%d][%d]", r, col);
        }
    CHECK(tq_weights_read(wg, "model.layers.0.self_attn.q_proj.weight", TQ_DTYPE_BF16, qb,
                          sizeof(qb)) == TQ_OK,
          "bf16 out");
    for (int i = 0; i < 64; i++) {
        /* bf16 RNE of 100*r+c: values < 800 need <= 10 significant bits, so exact except rounding
         */
        uint32_t u;
        float v = (float)(100 * (i / 8) + i % 8);
        memcpy(&u, &v, 4);
        u = (u + 0x7fff + ((u >> 16) & 1)) >> 16;
        CHECK(qb[i] == (uint16_t)u, "bf16 q %d: %04x vs %04x", i, qb[i], (unsigned)u);
    }
    {
        uint16_t kh[32];
        CHECK(tq_weights_read(wg, "model.layers.0.self_attn.k_proj.weight", TQ_DTYPE_F16, kh,
                              sizeof(kh)) == TQ_OK,
              "f16 out");
        for (int i = 0; i < 32; i++) {
            /* 100*r + c + 0.5 < 2048 with one fractional bit: exact in fp16 */
            const float v = (float)(100 * (i / 8) + i % 8) + 0.5f;
            const int e = (int)floorf(log2f(v));
            const uint16_t want =
                (uint16_t)((e + 15) << 10 | (int)((v / ldexpf(1.0f, e) - 1.0f) * 1024));
            CHECK(kh[i] == want, "f16 k %d: %04x vs %04x", i, kh[i], want);
        }
    }
    CHECK(tq_weights_read(wg, "model.layers.0.self_attn.q_proj.weight", TQ_DTYPE_F32, qg, 10) ==
              TQ_E_ARG,
          "small buffer refused");
    CHECK(tq_weights_read(wg, "nope", TQ_DTYPE_F32, qg, sizeof(qg)) == TQ_E_ARG &&
              strstr(tq_last_error(), "nope"),
          "missing tensor named");
    {
        /* row reads: permuted q rows, f32 without allocating, bf16, safetensors rows, bounds */
        float r2[16];
        uint16_t rb[8];
        const uint64_t a0 = tq_alloc_count();
        CHECK(tq_weights_read_rows(wg, "model.layers.0.self_attn.q_proj.weight", 3, 2, TQ_DTYPE_F32,
                                   r2, sizeof(r2)) == TQ_OK,
              "%s", tq_last_error());
        CHECK(tq_alloc_count() == a0, "f32 row read allocated");
        for (int i = 0; i < 16; i++)
            CHECK(r2[i] == (float)(100 * (3 + i / 8) + i % 8), "q row %d col %d: %g", 3 + i / 8,
                  i % 8, r2[i]);
        CHECK(tq_weights_read_rows(wg, "model.layers.0.self_attn.k_proj.weight", 2, 1,
                                   TQ_DTYPE_BF16, rb, sizeof(rb)) == TQ_OK,
              "%s", tq_last_error());
        for (int i = 0; i < 8; i++) {
            float v = (float)(200 + i) + 0.5f;
            uint32_t u;
            memcpy(&u, &v, 4);
            CHECK(rb[i] == (uint16_t)((u + 0x7fff + ((u >> 16) & 1)) >> 16), "k bf16 row 2 %d", i);
        }
        CHECK(tq_weights_read_rows(ws, "model.layers.0.self_attn.k_proj.weight", 1, 2, TQ_DTYPE_F32,
                                   r2, sizeof(r2)) == TQ_OK,
              "%s", tq_last_error());
        for (int i = 0; i < 16; i++)
            CHECK(r2[i] == ks[8 + i], "st k rows 1-2, %d", i);
        CHECK(tq_weights_read_rows(wg, "model.layers.0.self_attn.q_proj.weight", 7, 2, TQ_DTYPE_F32,
                                   r2, sizeof(r2)) == TQ_E_ARG,
              "rows past the end refused");
        CHECK(tq_weights_read_rows(wg, "model.layers.0.self_attn.q_proj.weight", 0, 2, TQ_DTYPE_F32,
                                   r2, 8) == TQ_E_ARG,
              "small buffer refused");
    }
    {
        tq_weights *wo = NULL;
        float x[24 * 8];
        CHECK(tq_weights_open("tests/data/io/other_arch.gguf", &wo) == TQ_OK, "other arch: %s",
              tq_last_error());
        if (wo) {
            CHECK(tq_weights_config(wo)->arch == TQ_ARCH_UNKNOWN &&
                      !strcmp(tq_weights_config(wo)->arch_name, "phi3"),
                  "phi3 -> arch unknown");
            CHECK(tq_weights_read(wo, "blk.0.attn_qkv.weight", TQ_DTYPE_F32, x, sizeof(x)) ==
                          TQ_OK &&
                      x[5] == 5.0f && x[191] == 191.0f,
                  "unknown arch: tensors still readable, not permuted");
        }
        tq_weights_free(wo);
    }
out:
    tq_weights_free(wg);
    tq_weights_free(ws);
}

static void test_bad_files(void)
{
    FILE *m = fopen("tests/data/io/bad/MANIFEST", "r");
    char line[512];
    int n = 0;
    CHECK(m != NULL, "MANIFEST");
    while (m && fgets(line, sizeof(line), m)) {
        char *tab = strchr(line, '\t');
        char path[600];
        size_t sz;
        if (line[0] == '#' || !tab)
            continue;
        *tab = 0;
        tab[strcspn(tab + 1, "\n") + 1] = 0;
        snprintf(path, sizeof(path), "tests/data/io/bad/%s", line);
        const int is_gguf = strstr(line, ".gguf") != NULL;
        tq_status st;
        if (is_gguf) {
            tq_gguf *g = NULL;
            st = tq_gguf_open(path, &g);
            CHECK(g == NULL, "%s: no handle", line);
        } else {
            tq_st *s = NULL;
            st = tq_st_open(path, &s);
            CHECK(s == NULL, "%s: no handle", line);
        }
        CHECK(st == TQ_E_FORMAT || (st == TQ_E_UNSUPPORTED && strstr(line, "version")),
              "%s: status %s", line, tq_status_str(st));
        CHECK(strstr(tq_last_error(), path) != NULL, "%s: message names the file: %s", line,
              tq_last_error());
        CHECK(strstr(tq_last_error(), tab + 1) != NULL, "%s: message '%s' lacks '%s'", line,
              tq_last_error(), tab + 1);
        /* same bytes from memory, in an exact-size heap buffer (ASan sees any overread) */
        void *buf = slurp(path, &sz);
        if (buf) {
            if (is_gguf) {
                tq_gguf *g = NULL;
                CHECK(tq_gguf_open_memory(buf, sz, line, &g) != TQ_OK, "%s (memory)", line);
            } else {
                tq_st *s = NULL;
                CHECK(tq_st_open_memory(buf, sz, line, &s) != TQ_OK, "%s (memory)", line);
            }
            free(buf);
        }
        n++;
    }
    CHECK(n >= 30, "%d bad files", n);
    if (m)
        fclose(m);
}

/* Every prefix of a good file shorter than its last tensor's end is refused cleanly; longer
 * ones (cutting only trailing padding) open. */
static void test_truncations(const char *path, int gguf)
{
    size_t n, need;
    uint8_t *full = slurp(path, &n);
    int bad = 0;
    CHECK(full != NULL, "%s", path);
    if (!full)
        return;
    need = n;
    if (gguf) {
        tq_gguf *g = NULL;
        CHECK(tq_gguf_open_memory(full, n, path, &g) == TQ_OK, "%s", tq_last_error());
        need = 0;
        for (int64_t i = 0; g && i < tq_gguf_n_tensors(g); i++) {
            tq_gguf_tensor_info ti;
            tq_gguf_tensor(g, i, &ti);
            if (tq_gguf_data_offset(g) + ti.offset + ti.nbytes > need)
                need = tq_gguf_data_offset(g) + ti.offset + ti.nbytes;
        }
        tq_gguf_free(g);
        CHECK(need > 5000 && need <= n, "last tensor ends at %zu of %zu", need, n);
    }
    for (size_t len = 0; len <= n; len++) {
        uint8_t *p = malloc(len ? len : 1);
        tq_status st;
        memcpy(p, full, len);
        if (gguf) {
            tq_gguf *g = NULL;
            st = tq_gguf_open_memory(p, len, path, &g);
            tq_gguf_free(g);
        } else {
            tq_st *s = NULL;
            st = tq_st_open_memory(p, len, path, &s);
            tq_st_free(s);
        }
        if ((len >= need) != (st == TQ_OK))
            bad++;
        free(p);
    }
    CHECK(bad == 0, "%s: %d prefixes misjudged", path, bad);
    free(full);
}

/* Every vector kernel equals the scalar specification on random blocks (any bytes: NaN and inf
 * scales included; two NaNs count as equal since x86 may pick either operand's payload), and its
 * speed relative to scalar is printed (median of 5, same run). */
static void test_vector_vs_scalar(void)
{
    static const int types[] = {TQ_GGML_F16,  TQ_GGML_BF16, TQ_GGML_Q4_0, TQ_GGML_Q4_1,
                                TQ_GGML_Q5_0, TQ_GGML_Q5_1, TQ_GGML_Q8_0, TQ_GGML_Q4_K,
                                TQ_GGML_Q5_K, TQ_GGML_Q6_K};
    const int64_t n = 256 * 1024;
    float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
    uint8_t *src = malloc((size_t)n * 4);
    uint64_t x = t_seed;
    if (!tq_cpu_supports(TQ_ISA_AVX2)) {
        printf("no AVX2 on this CPU: vector kernels not tested\n");
        goto out;
    }
    for (int64_t i = 0; i < n * 4; i++) {
        x = x * 6364136223846793005ull + 1442695040888963407ull;
        src[i] = (uint8_t)(x >> 56);
    }
    for (size_t k = 0; k < sizeof(types) / sizeof(types[0]); k++) {
        size_t nb;
        int diff = 0;
        double ts[2][5];
        tq_ggml_nbytes(types[k], n, &nb);
        for (int rep = 0; rep < 5; rep++) {
            struct timespec t0, t1, t2;
            clock_gettime(CLOCK_MONOTONIC, &t0);
            tq_ggml_dequant_isa(TQ_ISA_SCALAR, types[k], src, nb, a, n);
            clock_gettime(CLOCK_MONOTONIC, &t1);
            tq_ggml_dequant_isa(TQ_ISA_AVX2, types[k], src, nb, b, n);
            clock_gettime(CLOCK_MONOTONIC, &t2);
            ts[0][rep] = (t1.tv_sec - t0.tv_sec) * 1e9 + (t1.tv_nsec - t0.tv_nsec);
            ts[1][rep] = (t2.tv_sec - t1.tv_sec) * 1e9 + (t2.tv_nsec - t1.tv_nsec);
        }
        for (int64_t i = 0; i < n; i++) {
            uint32_t ua, ub;
            memcpy(&ua, &a[i], 4);
            memcpy(&ub, &b[i], 4);
            if (ua != ub && !(isnan(a[i]) && isnan(b[i])))
                diff++;
        }
        CHECK(diff == 0, "%s: %d of %lld values differ between avx2 and scalar",
              tq_ggml_type_name(types[k]), diff, (long long)n);
        for (int r = 0; r < 2; r++) /* median of 5 by insertion sort */
            for (int i = 1; i < 5; i++)
                for (int j = i; j > 0 && ts[r][j] < ts[r][j - 1]; j--) {
                    double t = ts[r][j];
                    ts[r][j] = ts[r][j - 1];
                    ts[r][j - 1] = t;
                }
        printf("dequant %-5s scalar %6.2f ns/elem, avx2 %6.2f ns/elem, speedup %.1fx\n",
               tq_ggml_type_name(types[k]), ts[0][2] / n, ts[1][2] / n, ts[0][2] / ts[1][2]);
    }
out:
    free(a);
    free(b);
    free(src);
}

int main(int argc, char **argv)
{
    tq_gguf *g = NULL;
    t_init(argc, argv, "test_io_gguf");
    test_sha256();
    CHECK(tq_gguf_open("tests/data/io/tiny.gguf", &g) == TQ_OK, "%s", tq_last_error());
    if (g) {
        test_metadata(g);
        test_dequant_ref(g, "tests/data/io/tiny_ref.txt");
        tq_gguf_free(g);
    }
    test_dequant_hand();
    test_vector_vs_scalar();
    test_weights();
    test_bad_files();
    test_truncations("tests/data/io/tiny.gguf", 1);
    test_truncations("tests/data/io/tiny_st/model-00001-of-00002.safetensors", 0);
    return t_done();
}
