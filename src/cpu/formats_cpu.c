/* formats_cpu.c -- fills the format table's kernel slots from the ISA arrays (formats_cpu.h). */
#include <pthread.h>

#include "cpu/formats_cpu.h"
#include "cpu/qdot.h"
#include "cpu/qdot_affine.h"
#include "cpu/qdot_amx.h"
#include "cpu/qdot_iq4nl.h"

tq_dequant_fn tq_cpu_dequant_kernel(tq_isa isa, int id)
{
    const tq_format *f = tq_format_get(id);
    if (!f || !f->dequant_ref)
        return NULL;
    if (isa >= TQ_ISA_AVX2 && tq_cpu_supports(TQ_ISA_AVX2) && tq_dequant_avx2[id])
        return tq_dequant_avx2[id];
    return f->dequant_ref;
}

static void fill(void)
{
    const tq_isa isa = tq_cpu_isa();
    const tq_qdot_kernels *tabs[4];
    int nt = tq_qdot_all(tabs, 4); /* scalar first, then each ISA this CPU runs, ascending */
    for (int i = 0; i < tq_format_count(); i++) {
        const tq_format *f = tq_format_at(i);
        const int id = f->id;
        tq_format_kernels k = {0};
        if (!f->dequant_ref)
            continue;
        k.dequant = tq_cpu_dequant_kernel(isa, id);
        k.isa_dequant = k.dequant == f->dequant_ref ? "scalar" : "avx2";
        for (int t = 0; t < nt && id < TQ_FMT_LIMIT; t++) {
            if (tabs[t]->level > isa)
                break;
            if (tabs[t]->dot_q8[id]) {
                k.quant_act = tabs[t]->quant[id];
                k.dot_q8 = tabs[t]->dot_q8[id];
                k.mv_q8 = tabs[t]->mv_q8[id];
                k.isa_q8 = tabs[t]->isa;
                k.gemm_q8 = tabs[t]->gemm_q8[id]; /* NULL: this table's mv_q8 does prefill */
            }
            if (tabs[t]->dot_f32[id]) {
                k.dot_f32 = tabs[t]->dot_f32[id];
                k.mv_f32 = tabs[t]->mv_f32[id];
                k.isa_f32 = tabs[t]->isa;
            }
            if (tabs[t]->gemm_f32[id])
                k.gemm_f32 = tabs[t]->gemm_f32[id];
        }
        tq_affine_register(isa, id, &k); /* the MLX affine rows (cpu/qdot_affine.h) */
        tq_iq4nl_register(isa, id, &k);  /* IQ4_NL (cpu/qdot_iq4nl.h) */
        tq_qdot_amx_register(isa, id, &k); /* AMX int8 tiles over the above (cpu/qdot_amx.h) */
        tq_format_set_kernels(id, &k);
    }
}

static pthread_once_t once = PTHREAD_ONCE_INIT;

void tq_cpu_formats(void)
{
    pthread_once(&once, fill);
}

const tq_format *tq_cpu_format(int id)
{
    tq_cpu_formats();
    return tq_format_get(id);
}
