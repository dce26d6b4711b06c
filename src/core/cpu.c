/* cpu.c -- CPU feature detection (once) and the level the kernels use (tq_cpu_select()). With
 * the log level and the pools' default spin, the only mutable global state in the library. */
#include <pthread.h>
#include <stdatomic.h>
#if defined(TQ_HAVE_AMX) && defined(__x86_64__) && defined(__linux__)
#include <cpuid.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AMX_PROBE 1
#endif

#include "core/core.h"

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static int cpu_has[TQ_ISA_COUNT];
static _Atomic int cpu_chosen; /* a tq_isa */

static void detect(void)
{
    cpu_has[TQ_ISA_SCALAR] = 1;
#if defined(__x86_64__) || defined(__i386__)
    __builtin_cpu_init();
    cpu_has[TQ_ISA_AVX2] = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    cpu_has[TQ_ISA_AVX512] = cpu_has[TQ_ISA_AVX2] && __builtin_cpu_supports("avx512f") &&
                             __builtin_cpu_supports("avx512bw") &&
                             __builtin_cpu_supports("avx512vl") &&
                             __builtin_cpu_supports("avx512dq");
#endif
    int best = TQ_ISA_SCALAR;
    for (int i = 0; i < TQ_ISA_COUNT; i++)
        if (cpu_has[i])
            best = i;
    atomic_store_explicit(&cpu_chosen, best, memory_order_relaxed);
}

tq_isa tq_cpu_isa(void)
{
    pthread_once(&cpu_once, detect);
    return (tq_isa)atomic_load_explicit(&cpu_chosen, memory_order_relaxed);
}

tq_status tq_cpu_select(tq_isa isa)
{
    pthread_once(&cpu_once, detect);
    if ((unsigned)isa >= TQ_ISA_COUNT)
        return TQ_FAIL(TQ_E_ARG, "tq_cpu_select: %d is not a CPU level (scalar, avx2, avx512)",
                       (int)isa);
    if (!cpu_has[isa])
        return TQ_FAIL(TQ_E_UNSUPPORTED, "tq_cpu_select: this CPU cannot run %s kernels; "
                                         "staying at %s", tq_isa_name(isa),
                       tq_isa_name(tq_cpu_isa()));
    atomic_store_explicit(&cpu_chosen, (int)isa, memory_order_relaxed);
    return TQ_OK;
}

int tq_cpu_supports(tq_isa isa)
{
    pthread_once(&cpu_once, detect);
    return (unsigned)isa < TQ_ISA_COUNT ? cpu_has[isa] : 0;
}

const char *tq_isa_name(tq_isa isa)
{
    switch (isa) {
    case TQ_ISA_SCALAR: return "scalar";
    case TQ_ISA_AVX2: return "avx2";
    case TQ_ISA_AVX512: return "avx512";
    default: return "invalid";
    }
}

/* ---- AMX (an extension of the avx512 level: only the q8 matmuls use it) ------------------- */
static pthread_once_t amx_once = PTHREAD_ONCE_INIT;
static int amx_ok;                /* CPU + OS + permission, probed once */
static _Atomic int amx_allow = 1; /* tq_cpu_set_amx() */

static void amx_probe(void)
{
#if defined(AMX_PROBE)
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || !((d >> 24) & 1) || !((d >> 25) & 1)) {
        tq_log(TQ_LOG_INFO, "AMX: not used (the CPU reports no AMX-TILE/AMX-INT8)");
        return;
    }
    if (!__get_cpuid(1, &a, &b, &c, &d) || !((c >> 27) & 1)) {
        tq_log(TQ_LOG_INFO, "AMX: not used (no OSXSAVE)");
        return;
    }
    uint32_t lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if (((lo >> 17) & 3) != 3) {
        tq_log(TQ_LOG_INFO, "AMX: not used (XCR0 0x%x: the OS does not enable the tile state)", lo);
        return;
    }
    /* Linux >= 5.16: a process must ask for the tile data state before its first tile
     * instruction (ARCH_REQ_XCOMP_PERM = 0x1023, XFEATURE_XTILEDATA = 18) */
    if (syscall(SYS_arch_prctl, 0x1023, 18) != 0) {
        tq_log(TQ_LOG_INFO, "AMX: not used (arch_prctl(ARCH_REQ_XCOMP_PERM, XTILEDATA) refused)");
        return;
    }
    amx_ok = 1;
    tq_log(TQ_LOG_INFO, "AMX: int8 tiles in use for the q8 matmuls");
#else
    tq_log(TQ_LOG_INFO, "AMX: not used (not built in: compiler without -mamx-int8 or not x86-64 Linux)");
#endif
}

int tq_cpu_amx(void)
{
    if (!atomic_load_explicit(&amx_allow, memory_order_relaxed) || tq_cpu_isa() < TQ_ISA_AVX512)
        return 0;
    pthread_once(&amx_once, amx_probe);
    return amx_ok;
}

void tq_cpu_set_amx(int allow)
{
    atomic_store_explicit(&amx_allow, allow != 0, memory_order_relaxed);
}

static _Atomic int r16_allow = 1; /* tq_cpu_set_r16() */

int tq_cpu_r16(void)
{
    return atomic_load_explicit(&r16_allow, memory_order_relaxed);
}

void tq_cpu_set_r16(int allow)
{
    atomic_store_explicit(&r16_allow, allow != 0, memory_order_relaxed);
}
