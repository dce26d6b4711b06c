/* test_formats.c -- the one format table (src/common/formats.h, issue 12 item 2).
 *
 * This test compiles the table with ONE extra row (TQ_TEST_DUMMY_FORMAT below: a made-up format
 * "DUMMY", 4 elements in 5 bytes, y = scale * q) and links it in place of the library's copy
 * (static archive: our definitions of the formats.c symbols win). Nothing else is changed, and:
 *  1. the GGUF type API (name, block, byte sizes) knows DUMMY;
 *  2. tq_ggml_dequant() runs it through the kernel the CPU backend registered (its reference);
 *  3. the supported-types list in a refusal message names it;
 *  4. the real rows: every runnable format's registered dequant kernel equals its scalar
 *     reference bit for bit on random blocks (seed printed), ids are unique, and the supported
 *     list is exactly the rows with a reference. */
#include "core/rng.h"
#include "t.h"
#include "turboquant.h"

/* the dummy format's scalar reference: byte 0 = int8 scale s, then 4 int8 q; y = s * q */
static void dq_dummy(const void *src, float *y, int64_t n);
#define TQ_TEST_DUMMY_FORMAT(X) X(TQ_FMT_TEST_DUMMY, "DUMMY", 4, 5, TQ_ACT_NONE, dq_dummy, NULL)
#include "common/formats.c"

static void dq_dummy(const void *src, float *y, int64_t n)
{
    const int8_t *b = src;
    for (int64_t i = 0; i < n / 4; i++, b += 5)
        for (int j = 0; j < 4; j++)
            y[4 * i + j] = (float)b[0] * (float)b[1 + j];
}

#include "cpu/formats_cpu.h"

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_formats");
    tq_rng rng;
    tq_rng_seed(&rng, t_seed);

    /* 1. the GGUF type API */
    CHECK(!strcmp(tq_ggml_type_name(TQ_FMT_TEST_DUMMY), "DUMMY"), "name %s",
          tq_ggml_type_name(TQ_FMT_TEST_DUMMY));
    CHECK(tq_ggml_block_size(TQ_FMT_TEST_DUMMY) == 4, "block");
    CHECK(tq_ggml_type_size(TQ_FMT_TEST_DUMMY) == 5, "bytes");
    size_t nb = 0;
    CHECK(tq_ggml_nbytes(TQ_FMT_TEST_DUMMY, 12, &nb) == TQ_OK && nb == 15, "nbytes %zu", nb);
    CHECK(tq_ggml_nbytes(TQ_FMT_TEST_DUMMY, 13, &nb) == TQ_E_FORMAT, "partial block refused");
    CHECK(tq_ggml_can_dequant(TQ_FMT_TEST_DUMMY), "runnable");

    /* 2. dequant through the registered kernel */
    const int8_t blk[10] = {3, 1, -2, 5, 0, -1, 7, 8, -9, 127};
    float y[8];
    CHECK(tq_ggml_dequant(TQ_FMT_TEST_DUMMY, blk, sizeof(blk), y, 8) == TQ_OK, "dequant: %s",
          tq_last_error());
    const float want[8] = {3, -6, 15, 0, -7, -8, 9, -127};
    CHECK(!memcmp(y, want, sizeof(want)), "values %g %g .. %g", y[0], y[1], y[7]);
    CHECK(tq_cpu_format(TQ_FMT_TEST_DUMMY)->k.dequant == dq_dummy, "registered kernel");

    /* 3. the supported list in a refusal names it */
    CHECK(tq_ggml_dequant(TQ_GGML_Q2_K, blk, sizeof(blk), y, 256) == TQ_E_UNSUPPORTED, "Q2_K");
    CHECK(strstr(tq_last_error(), "DUMMY") && strstr(tq_last_error(), "Q6_K"), "message: %s",
          tq_last_error());
    printf("refusal: %s\n", tq_last_error());

    /* 4. the real rows */
    char list[256];
    printf("runnable: %s\n", tq_format_list(list, sizeof(list), NULL));
    CHECK(!strcmp(list, "F32 F16 BF16 Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q4_K Q5_K Q6_K IQ4_NL DUMMY"),
          "list %s", list);
    for (int i = 0; i < tq_format_count(); i++)
        for (int j = i + 1; j < tq_format_count(); j++)
            CHECK(tq_format_at(i)->id != tq_format_at(j)->id, "duplicate id %d",
                  tq_format_at(i)->id);
    for (int i = 0; i < tq_format_count(); i++) {
        const tq_format *f = tq_cpu_format(tq_format_at(i)->id);
        if (!tq_format_runnable(f))
            continue;
        const int64_t n = f->block * 8;
        const size_t bytes = tq_format_row_bytes(f, n);
        uint8_t *src = malloc(bytes);
        float *a = malloc((size_t)n * 4), *b = malloc((size_t)n * 4);
        for (size_t j = 0; j < bytes; j++)
            src[j] = (uint8_t)tq_rng_u64(&rng);
        /* finite scales: f16 scale bytes of random data may be inf/NaN; compare bit patterns */
        f->dequant_ref(src, a, n);
        f->k.dequant(src, b, n);
        CHECK(!memcmp(a, b, (size_t)n * 4), "%s: %s kernel differs from the reference", f->name,
              f->k.isa_dequant);
        free(src);
        free(a);
        free(b);
    }
    return t_done();
}
