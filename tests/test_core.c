/* test_core.c -- core helpers: fp16/bf16 conversions against the hardware (F16C) and exhaustive
 * round trips, checked math, range splitting, status names. */
#include <cpuid.h>
#include <immintrin.h>

#include "core/core.h"
#include "core/half.h"
#include "core/rng.h"
#include "t.h"

__attribute__((target("f16c"))) static uint16_t hw_f32_to_f16(float f)
{
    return (uint16_t)_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT);
}

__attribute__((target("f16c"))) static float hw_f16_to_f32(uint16_t h)
{
    return _cvtsh_ss(h);
}

/* F16C from CPUID leaf 1 (ECX bit 29), usable only with the OS saving AVX state (OSXSAVE,
 * XCR0 bits 1-2). Not __builtin_cpu_supports("f16c"): clang 14 rejects that feature name. */
static int cpu_has_f16c(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d) || !(c & (1u << 29)) || !(c & (1u << 27)))
        return 0;
    unsigned lo, hi;
    __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    return (lo & 6u) == 6u;
}

static int same_f32(float a, float b)
{
    return tq_f32_bits(a) == tq_f32_bits(b) || (isnan(a) && isnan(b));
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_core");
    const int have_f16c = cpu_has_f16c();

    /* every fp16 value: decode matches hardware, and encode(decode(h)) == h (NaN stays NaN) */
    int bad = 0;
    for (uint32_t h = 0; h < 65536; h++) {
        float f = tq_f16_to_f32((uint16_t)h);
        if (have_f16c && !same_f32(f, hw_f16_to_f32((uint16_t)h)))
            bad++;
        uint16_t back = tq_f32_to_f16(f);
        if (isnan(f) ? !isnan(tq_f16_to_f32(back)) : back != h)
            bad++;
    }
    CHECK(bad == 0, "%d fp16 values do not round-trip", bad);

    /* random fp32 bit patterns + tie cases: encode matches F16C hardware RNE */
    if (have_f16c) {
        tq_rng r;
        tq_rng_seed(&r, t_seed);
        bad = 0;
        for (int i = 0; i < 2000000; i++) {
            uint32_t u = (uint32_t)tq_rng_u64(&r);
            if (i & 1) /* bias towards the fp16 range, and exact ties */
                u = (u & 0x8fffffffu) | 0x30000000u;
            if (i % 7 == 0)
                u = (u & ~0xfffu) | 0x1000u;
            float f = tq_bits_f32(u);
            uint16_t a = tq_f32_to_f16(f), b = hw_f32_to_f16(f);
            if (a != b && !(isnan(f)))
                bad++;
        }
        CHECK(bad == 0, "%d fp32->fp16 conversions differ from F16C", bad);
    }
    CHECK(tq_f32_to_f16(65504.0f) == 0x7bff, "max half");
    CHECK(tq_f32_to_f16(65520.0f) == 0x7c00, "65520 rounds to inf");
    CHECK(tq_f32_to_f16(-1e30f) == 0xfc00, "-huge to -inf");
    CHECK(tq_f32_to_f16(2.9802322e-08f) == 0x0000, "2^-25 ties to even zero");
    CHECK(tq_f32_to_f16(5.9604645e-08f) == 0x0001, "2^-24 smallest subnormal");

    /* bf16 */
    CHECK(tq_f32_to_bf16(1.0f) == 0x3f80, "bf16 1.0");
    CHECK(tq_f32_to_bf16(tq_bits_f32(0x3f808000u)) == 0x3f80, "bf16 tie to even (down)");
    CHECK(tq_f32_to_bf16(tq_bits_f32(0x3f818000u)) == 0x3f82, "bf16 tie to even (up)");
    CHECK(isnan(tq_bf16_to_f32(tq_f32_to_bf16(NAN))), "bf16 NaN stays NaN");
    CHECK(tq_f32_to_bf16(tq_bits_f32(0x7f7fffffu)) == 0x7f80, "bf16 FLT_MAX rounds to inf");

    /* checked math */
    size_t out = 7;
    CHECK(!tq_mul_ok(SIZE_MAX / 2 + 1, 2, &out) && out == 7, "mul overflow detected");
    CHECK(tq_mul_ok(1u << 20, 1u << 10, &out) && out == (1u << 30), "mul ok");
    CHECK(!tq_add_ok(SIZE_MAX, 1, &out), "add overflow detected");

    /* split ranges cover [0,n) exactly once */
    for (int nth = 1; nth <= 16; nth++) {
        for (int64_t n = 0; n < 50; n++) {
            int64_t covered = 0, prev = 0;
            int ok = 1;
            for (int i = 0; i < nth; i++) {
                int64_t a, b;
                tq_split_range(n, i, nth, &a, &b);
                ok &= (a == prev || a == b) && a <= b;
                if (b > a)
                    prev = b;
                covered += b - a;
            }
            CHECK(ok && covered == n, "split n=%lld nth=%d", (long long)n, nth);
        }
    }

    /* statuses and errors */
    CHECK(!strcmp(tq_status_str(TQ_E_FORMAT), "TQ_E_FORMAT"), "status name");
    CHECK(TQ_FAIL(TQ_E_IO, "file %s missing", "x.gguf") == TQ_E_IO, "TQ_FAIL returns status");
    CHECK(!strcmp(tq_last_error(), "file x.gguf missing"), "last error text: %s", tq_last_error());
    CHECK(tq_dtype_size(TQ_DTYPE_BF16) == 2 && tq_dtype_size((tq_dtype)99) == 0, "dtype sizes");
    CHECK(tq_version() == TQ_VERSION_NUMBER, "version");
    CHECK(tq_cpu_supports(TQ_ISA_SCALAR), "scalar always supported");
    CHECK(tq_cpu_supports(tq_cpu_isa()), "chosen isa is supported (%s)", tq_isa_name(tq_cpu_isa()));
    return t_done();
}
