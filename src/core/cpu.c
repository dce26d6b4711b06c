/* cpu.c -- CPU feature detection (once) and the TQ_CPU override. The only mutable global state
 * in the library besides the log level. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static pthread_once_t cpu_once = PTHREAD_ONCE_INIT;
static int cpu_has[TQ_ISA_COUNT];
static tq_isa cpu_chosen;

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
    cpu_chosen = TQ_ISA_SCALAR;
    for (int i = 0; i < TQ_ISA_COUNT; i++)
        if (cpu_has[i])
            cpu_chosen = (tq_isa)i;
    const char *want = getenv("TQ_CPU");
    if (want && *want) {
        int w = -1;
        for (int i = 0; i < TQ_ISA_COUNT; i++)
            if (!strcmp(want, tq_isa_name((tq_isa)i)))
                w = i;
        if (w < 0) {
            tq_log(TQ_LOG_WARN, "TQ_CPU=%s is not one of scalar, avx2, avx512; using %s", want,
                   tq_isa_name(cpu_chosen));
        } else if (!cpu_has[w]) {
            tq_log(TQ_LOG_WARN, "TQ_CPU=%s: this CPU cannot run it; using %s", want,
                   tq_isa_name(cpu_chosen));
        } else {
            cpu_chosen = (tq_isa)w;
        }
    }
}

tq_isa tq_cpu_isa(void)
{
    pthread_once(&cpu_once, detect);
    return cpu_chosen;
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
