/* test_kv_api.c -- scheme strings, names, checks, row sizes, and bad input: every invalid scheme,
 * head_dim, NULL pointer, negative count, bad dtype or small buffer gets a status code and a
 * message naming the problem and the valid choices, never a crash. */
#include "core/core.h"
#include "t.h"

static int msg_has(const char *needle)
{
    return strstr(tq_last_error(), needle) != NULL;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_kv_api");
    tq_kv_scheme s;
    char buf[64];

    /* valid strings and canonical names */
    static const struct {
        const char *str, *name, *key;
        int kind, kb, vb;
    } ok[] = {
        {"f32", "f32", "f32", TQ_KV_F32, 0, 0},
        {"f16", "f16", "f16", TQ_KV_F16, 0, 0},
        {"bf16", "bf16", "bf16", TQ_KV_BF16, 0, 0},
        {"kv8", "kv8", "kv8", TQ_KV_KV8, 0, 0},
        {"kv4", "kv4", "kv4", TQ_KV_KV4, 0, 0},
        {"turbo", "turbo:k8v3", "turbo-k8v3", TQ_KV_TURBO, 8, 3},
        {"turbo:k8v3", "turbo:k8v3", "turbo-k8v3", TQ_KV_TURBO, 8, 3},
        {"turbo:k4v2", "turbo:k4v2", "turbo-k4v2", TQ_KV_TURBO, 4, 2},
        {"turbo:k2v5", "turbo:k2v5", "turbo-k2v5", TQ_KV_TURBO, 2, 5},
        {"turbo:k5v8", "turbo:k5v8", "turbo-k5v8", TQ_KV_TURBO, 5, 8},
    };
    for (size_t i = 0; i < sizeof(ok) / sizeof(ok[0]); i++) {
        memset(&s, 0xff, sizeof(s));
        CHECK(tq_kv_scheme_parse(ok[i].str, &s) == TQ_OK, "parse %s", ok[i].str);
        CHECK(s.kind == (tq_kv_kind)ok[i].kind && s.flags == 0, "%s kind", ok[i].str);
        if (ok[i].kind == TQ_KV_TURBO)
            CHECK(s.k_bits == ok[i].kb && s.v_bits == ok[i].vb, "%s bits", ok[i].str);
        CHECK(!strcmp(tq_kv_scheme_name(s, buf, sizeof(buf)), ok[i].name), "name %s", buf);
        CHECK(!strcmp(tq_kv_scheme_key(s, buf, sizeof(buf)), ok[i].key), "key %s", buf);
    }
    /* every turbo combination parses; every other width is refused */
    for (int k = 0; k <= 9; k++)
        for (int v = 0; v <= 9; v++) {
            snprintf(buf, sizeof(buf), "turbo:k%dv%d", k, v);
            const int valid = (k == 2 || k == 4 || k == 5 || k == 8) &&
                              (v == 2 || v == 3 || v == 4 || v == 5 || v == 8);
            tq_status st = tq_kv_scheme_parse(buf, &s);
            CHECK((st == TQ_OK) == valid, "%s -> %d", buf, st);
            if (!valid)
                CHECK(st == TQ_E_ARG && msg_has("valid"), "%s message: %s", buf, tq_last_error());
        }
    static const char *bad[] = {"", "turbo:", "turbo:k", "turbo:k8", "turbo:k8v", "turbo:k8v3x",
                                "turbo:v3k8", "kv16", "KV8", "turbo ", " f16", "f32:k8v3",
                                "turbo:k-8v3", "turbo:k8v3:", "turbo:k1234v3"};
    for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
        CHECK(tq_kv_scheme_parse(bad[i], &s) == TQ_E_ARG, "'%s' refused", bad[i]);
        CHECK(msg_has("valid") && msg_has("kv4") && msg_has("turbo:k<K>v<V>"),
              "'%s' message lists choices: %s", bad[i], tq_last_error());
    }
    CHECK(tq_kv_scheme_parse(NULL, &s) == TQ_E_ARG && msg_has("NULL"), "NULL string");
    CHECK(tq_kv_scheme_parse("f32", NULL) == TQ_E_ARG && msg_has("NULL"), "NULL out");
    CHECK(strstr(tq_kv_schemes_help(), "turbo:k<K>v<V>") != NULL, "help");

    /* head_dim checks */
    tq_kv_scheme turbo, kv8, f16;
    tq_kv_scheme_parse("turbo", &turbo);
    tq_kv_scheme_parse("kv8", &kv8);
    tq_kv_scheme_parse("f16", &f16);
    const int tdims_ok[] = {64, 128, 256, 512};
    for (int i = 0; i < 4; i++)
        CHECK(tq_kv_check(turbo, tdims_ok[i]) == TQ_OK, "turbo d=%d", tdims_ok[i]);
    const int tdims_bad[] = {0, -64, 32, 96, 100, 192, 1024, 4096};
    for (int i = 0; i < 8; i++) {
        CHECK(tq_kv_check(turbo, tdims_bad[i]) == TQ_E_UNSUPPORTED, "turbo d=%d", tdims_bad[i]);
        CHECK(msg_has("head_dim") && msg_has("64, 128, 256, 512"), "msg %s", tq_last_error());
    }
    CHECK(tq_kv_check(kv8, 192) == TQ_OK && tq_kv_check(f16, 4096) == TQ_OK, "base dims");
    CHECK(tq_kv_check(kv8, 96) == TQ_E_UNSUPPORTED && msg_has("multiple of 64"), "kv8 d=96");
    CHECK(tq_kv_check(f16, 0) == TQ_E_UNSUPPORTED, "f16 d=0");
    tq_kv_scheme weird = turbo;
    weird.flags = 1;
    CHECK(tq_kv_check(weird, 128) == TQ_E_ARG && msg_has("valid"), "flags");
    weird = turbo;
    weird.k_bits = 3;
    CHECK(tq_kv_check(weird, 128) == TQ_E_ARG, "k_bits 3");
    weird.kind = (tq_kv_kind)99;
    CHECK(tq_kv_check(weird, 128) == TQ_E_ARG, "kind 99");
    size_t kb = 0, vb = 0;
    CHECK(tq_kv_row_bytes(turbo, 100, &kb, &vb) == TQ_E_UNSUPPORTED, "row bytes bad dim");

    /* encode/decode bad input */
    float x[2 * 128] = {0}, out[2 * 128];
    uint8_t dst[1024];
    CHECK(tq_kv_row_bytes(turbo, 128, &kb, &vb) == TQ_OK && kb == 128 + 16 && vb == 48 + 8, "rb");
    CHECK(tq_kv_encode_k(turbo, 128, TQ_DTYPE_F32, NULL, 2, dst, sizeof(dst), NULL) == TQ_E_ARG &&
              msg_has("src is NULL"),
          "NULL src: %s", tq_last_error());
    CHECK(tq_kv_encode_v(turbo, 128, TQ_DTYPE_F32, x, 2, NULL, 0, NULL) == TQ_E_ARG &&
              msg_has("dst is NULL"),
          "NULL dst");
    CHECK(tq_kv_encode_k(turbo, 128, TQ_DTYPE_F32, x, 2, dst, 2 * kb - 1, NULL) == TQ_E_OVERFLOW &&
              msg_has("too small"),
          "small dst: %s", tq_last_error());
    CHECK(tq_kv_encode_k(turbo, 128, TQ_DTYPE_F32, x, 2, dst, 2 * kb, NULL) == TQ_OK, "exact cap");
    CHECK(tq_kv_encode_k(turbo, 128, TQ_DTYPE_F32, x, -1, dst, sizeof(dst), NULL) == TQ_E_ARG &&
              msg_has("negative"),
          "negative rows");
    CHECK(tq_kv_encode_k(turbo, 128, (tq_dtype)7, x, 1, dst, sizeof(dst), NULL) == TQ_E_ARG &&
              msg_has("f32, f16, bf16"),
          "bad dtype: %s", tq_last_error());
    CHECK(tq_kv_encode_k(turbo, 120, TQ_DTYPE_F32, x, 1, dst, sizeof(dst), NULL) ==
              TQ_E_UNSUPPORTED,
          "bad head_dim on encode");
    CHECK(tq_kv_encode_k(turbo, 128, TQ_DTYPE_F32, NULL, 0, NULL, 0, NULL) == TQ_OK, "0 rows");
    CHECK(tq_kv_encode_k(turbo, 128, TQ_DTYPE_F32, x, INT64_MAX / 2, dst, sizeof(dst), NULL) ==
              TQ_E_OVERFLOW,
          "huge n_rows");
    CHECK(tq_kv_decode_k(turbo, 128, dst, 2, out, 255, NULL) == TQ_E_OVERFLOW &&
              msg_has("too small"),
          "small decode dst: %s", tq_last_error());
    CHECK(tq_kv_decode_v(turbo, 128, NULL, 2, out, 256, NULL) == TQ_E_ARG && msg_has("NULL"),
          "NULL decode src");
    CHECK(tq_kv_decode_v(turbo, 128, dst, 2, NULL, 256, NULL) == TQ_E_ARG, "NULL decode dst");
    CHECK(tq_kv_decode_k(turbo, 128, dst, -3, out, 256, NULL) == TQ_E_ARG, "neg decode rows");
    CHECK(tq_kv_decode_k(turbo, 128, dst, 2, out, 256, NULL) == TQ_OK, "decode ok");
    CHECK(tq_kv_encode_isa(turbo, 0, 128, TQ_DTYPE_F32, x, 1, dst, sizeof(dst), NULL,
                           (tq_isa)9) == TQ_E_ARG &&
              msg_has("scalar, avx2, avx512"),
          "bad isa");
    /* cache-level variants (+rk, +e8) parse, but the row codec refuses them by name */
    {
        tq_kv_scheme v;
        CHECK(tq_kv_scheme_parse("turbo:k4v3+rk", &v) == TQ_OK && v.flags != 0, "+rk parses");
        CHECK(tq_kv_encode_k(v, 128, TQ_DTYPE_F32, x, 1, dst, sizeof(dst), NULL) ==
                      TQ_E_UNSUPPORTED && msg_has("+rk"),
              "row codec refuses +rk: %s", tq_last_error());
        CHECK(tq_kv_decode_v(v, 128, dst, 1, out, 256, NULL) == TQ_E_UNSUPPORTED, "decode +rk");
        CHECK(tq_kv_scheme_parse("kv8+rk", &v) == TQ_E_ARG, "+rk only on turbo");
        CHECK(tq_kv_scheme_parse("turbo+zz", &v) == TQ_E_ARG, "unknown variant");
    }
    return t_done();
}
