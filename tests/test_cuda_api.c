/* test_cuda_api.c -- the CUDA C API's contract in every build, no GPU needed (label fast):
 *  - without CUDA compiled in, every entry point returns TQ_E_UNSUPPORTED with a message and
 *    NULLs its output handle; tq_cuda_available() is 0;
 *  - with CUDA compiled in: scheme/head_dim support is answered without a device, bad arguments
 *    get TQ_E_ARG naming the argument, and with no device create/encode fail with TQ_E_CUDA;
 *    with a device, create/free of a small cache works (the kernels are tested by test_cuda_kv);
 *  - the GPU session entry points reject NULL handles (TQ_E_ARG; TQ_E_UNSUPPORTED without CUDA). */
#include <string.h>

#include "t.h"
#include "turboquant.h"

static tq_kv_scheme sch(const char *s)
{
    tq_kv_scheme x;
    memset(&x, 0, sizeof(x));
    CHECK(tq_kv_scheme_parse(s, &x) == TQ_OK, "parse %s", s);
    return x;
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cuda_api");
    const tq_kv_scheme turbo = sch("turbo"), k5v5 = sch("turbo:k5v5"), bf16 = sch("bf16");
    float buf[4 * 128];
    memset(buf, 0, sizeof(buf));
    tq_cuda_kv *c = (tq_cuda_kv *)buf; /* must be overwritten with NULL on failure */

    if (!tq_cuda_compiled()) {
        CHECK(tq_cuda_available() == 0, "no CUDA build: available() must be 0");
        CHECK(tq_cuda_kv_supported(turbo, 128) == TQ_E_UNSUPPORTED, "supported");
        CHECK(strstr(tq_last_error(), "no CUDA support") != NULL, "message names the cause: '%s'", tq_last_error());
        CHECK(tq_cuda_kv_create(turbo, 128, 8, 1024, 1, &c) == TQ_E_UNSUPPORTED && c == NULL, "create");
        CHECK(tq_cuda_kv_encode(turbo, 128, TQ_DTYPE_F32, buf, 1, buf, buf) == TQ_E_UNSUPPORTED, "encode");
        CHECK(tq_cuda_kv_attend(NULL, buf, 1, 8, 1.0f, buf, 0) == TQ_E_UNSUPPORTED, "attend");
        CHECK(tq_cuda_kv_append(NULL, TQ_DTYPE_F32, buf, buf, 1, 0) == TQ_E_UNSUPPORTED, "append");
        CHECK(tq_cuda_copy_bandwidth(1 << 20, 3, (double *)buf, (double *)buf + 1) == TQ_E_UNSUPPORTED, "copy bw");
        void *p = buf;
        CHECK(tq_cuda_malloc(&p, 16) == TQ_E_UNSUPPORTED && p == NULL, "malloc");
        CHECK(tq_cuda_kv_length(NULL) == 0, "length");
        tq_cuda_kv_free(NULL);
        tq_cuda_free(NULL);
        tq_cuda_session *gs = (tq_cuda_session *)buf;
        CHECK(tq_cuda_session_create(NULL, bf16, 128, &gs) == TQ_E_UNSUPPORTED && gs == NULL, "session create");
        const int32_t tok = 1;
        CHECK(tq_cuda_session_eval(NULL, &tok, 1, NULL) == TQ_E_UNSUPPORTED, "session eval");
        CHECK(tq_cuda_session_n_past(NULL) == 0, "session n_past");
        tq_cuda_session_free(NULL);
        return t_done();
    }

    /* support matrix: answered without a device */
    CHECK(tq_cuda_kv_supported(turbo, 128) == TQ_OK, "turbo d128: %s", tq_last_error());
    CHECK(tq_cuda_kv_supported(bf16, 64) == TQ_OK, "bf16 d64: %s", tq_last_error());
    CHECK(tq_cuda_kv_supported(sch("turbo:k4v3"), 256) == TQ_OK, "k4v3 d256: %s", tq_last_error());
    CHECK(tq_cuda_kv_supported(turbo, 512) == TQ_E_UNSUPPORTED, "turbo d512 attention is not on the GPU");
    CHECK(strstr(tq_last_error(), "head_dim 64, 128, 256") != NULL, "message lists the choices: '%s'",
          tq_last_error());
    CHECK(tq_cuda_kv_supported(k5v5, 128) == TQ_E_UNSUPPORTED, "k5v5 attention is not on the GPU");
    CHECK(tq_cuda_kv_supported(turbo, 96) == TQ_E_UNSUPPORTED, "head_dim 96 is not a turbo head_dim");
    CHECK(tq_cuda_kv_supported(sch("f32"), 128) == TQ_E_UNSUPPORTED, "f32 cache is not on the GPU");

    /* bad arguments: TQ_E_ARG before any device work */
    CHECK(tq_cuda_kv_create(turbo, 128, 8, 1024, 1, NULL) == TQ_E_ARG, "NULL out");
    CHECK(tq_cuda_kv_create(turbo, 128, 0, 1024, 1, &c) == TQ_E_ARG && c == NULL, "0 kv heads");
    CHECK(strstr(tq_last_error(), "n_kv_heads") != NULL, "message names the argument: '%s'", tq_last_error());
    c = (tq_cuda_kv *)buf;
    CHECK(tq_cuda_kv_create(turbo, 128, 8, 0, 1, &c) == TQ_E_ARG && c == NULL, "0 max tokens");
    CHECK(tq_cuda_kv_create(turbo, 128, 8, 1024, 0, &c) == TQ_E_ARG, "batch 0");
    CHECK(tq_cuda_kv_attend(NULL, buf, 1, 8, 1.0f, buf, 0) == TQ_E_ARG, "attend NULL handle");
    CHECK(tq_cuda_kv_append(NULL, TQ_DTYPE_F32, buf, buf, 1, 0) == TQ_E_ARG, "append NULL handle");
    CHECK(tq_cuda_kv_set_splits(NULL, 4) == TQ_E_ARG, "splits NULL handle");
    CHECK(tq_cuda_kv_set_length(NULL, 4) == TQ_E_ARG, "length NULL handle");
    CHECK(tq_cuda_kv_encode(turbo, 128, TQ_DTYPE_F32, NULL, 1, buf, buf) == TQ_E_ARG ||
              tq_cuda_available() == 0,
          "encode NULL src");
    CHECK(tq_cuda_kv_encode(turbo, 128, (tq_dtype)7, buf, 1, buf, buf) != TQ_OK, "encode bad dtype");
    CHECK(tq_cuda_copy_bandwidth(1 << 20, 0, (double *)buf, (double *)buf + 1) == TQ_E_ARG, "copy bw reps 0");
    CHECK(tq_cuda_kv_length(NULL) == 0, "length of NULL");
    tq_cuda_kv_free(NULL);

    /* the GPU session (tq_cuda_session_*): NULL handles are TQ_E_ARG, never a crash */
    {
        tq_cuda_session *gs = (tq_cuda_session *)buf;
        const tq_status want = TQ_E_ARG;
        CHECK(tq_cuda_session_create(NULL, bf16, 128, &gs) == want && gs == NULL, "session create(NULL model)");
        const int32_t tok = 1;
        CHECK(tq_cuda_session_eval(NULL, &tok, 1, NULL) == want, "session eval(NULL)");
        CHECK(tq_cuda_session_sync(NULL) == want, "session sync(NULL)");
        size_t wb = 1, kb = 1;
        CHECK(tq_cuda_session_bytes(NULL, &wb, &kb) == want, "session bytes(NULL)");
        CHECK(tq_cuda_session_debug(NULL, 0, NULL, NULL, NULL) == want, "session debug(NULL)");
        CHECK(tq_cuda_session_n_past(NULL) == 0, "session n_past(NULL)");
        CHECK(tq_cuda_session_n_ctx(NULL) == 0, "session n_ctx(NULL)");
        int32_t next = -5;
        CHECK(tq_cuda_session_eval_greedy(NULL, &tok, 1, NULL, 0, 1.0f, &next) == want,
              "session eval_greedy(NULL)");
        const float *dk = NULL, *dv = NULL;
        CHECK(tq_cuda_session_debug_kv(NULL, &dk, &dv) == want, "session debug_kv(NULL)");
        tq_generator *gen = (tq_generator *)buf;
        CHECK(tq_generator_create_cuda(NULL, NULL, NULL, NULL, &gen) == want && gen == NULL,
              "generator_create_cuda(NULL session)");
        tq_cuda_session_reset(NULL);
        tq_cuda_session_free(NULL);
    }

    if (tq_cuda_available() <= 0) {
        c = (tq_cuda_kv *)buf;
        CHECK(tq_cuda_kv_create(turbo, 128, 8, 1024, 1, &c) == TQ_E_CUDA && c == NULL, "no device: create");
        CHECK(tq_cuda_kv_encode(turbo, 128, TQ_DTYPE_F32, buf, 1, buf, buf) == TQ_E_CUDA, "no device: encode");
        CHECK(tq_last_error()[0] != 0, "no device: a message");
        printf("no CUDA device: checked the device-free contract only\n");
        return t_done();
    }
    CHECK(tq_cuda_kv_create(turbo, 128, 8, 1000, 2, &c) == TQ_OK && c != NULL, "create: %s", tq_last_error());
    CHECK(tq_cuda_kv_length(c) == 0, "empty");
    CHECK(tq_cuda_kv_set_length(c, 1001) == TQ_E_ARG, "length past max");
    CHECK(tq_cuda_kv_set_splits(c, 5000) == TQ_E_ARG, "splits 5000");
    CHECK(tq_cuda_kv_fill_random(c, 1001, 1) == TQ_E_OVERFLOW, "fill past max");
    CHECK(tq_cuda_kv_fill_random(c, 10, 1) == TQ_OK && tq_cuda_kv_length(c) == 10, "fill 10");
    CHECK(tq_cuda_kv_bytes_read(c, 1, 32) == 2u * 8u * 10u * 200u + 2u * 2u * 32u * 128u * 4u, "bytes read");
    tq_cuda_kv_free(c);
    return t_done();
}
