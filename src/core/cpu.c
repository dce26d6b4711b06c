/* cpu.c -- CPU feature detection (once) and the level the kernels use (tq_cpu_select()). With
 * the log level and the pools' default spin, the only mutable global state in the library. */
#include <pthread.h>
#include <stdatomic.h>

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
