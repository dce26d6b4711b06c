/* formats_cpu.h -- the CPU backend's registration into the format table (common/formats.h).
 *
 * tq_cpu_formats() fills every row's kernel slots once (thread-safe, on first use) for the ISA
 * tq_cpu_isa() selects (TQ_CPU is read in that one place): each slot takes the highest ISA whose
 * kernel array provides it (dequant: scalar reference < tq_dequant_avx2; q8/f32 dots and
 * matvecs: tq_qdot_scalar < avx2 < avx512). Callers above cpu/ use tq_cpu_format() instead of
 * tq_format_get() so the slots are filled before they read them. */
#ifndef TQ_FORMATS_CPU_H
#define TQ_FORMATS_CPU_H

#include "common/formats.h"

/* The ISA arrays, indexed by format id (NULL = that ISA has no kernel for the format). */
extern const tq_dequant_fn tq_dequant_avx2[TQ_FMT_LIMIT];

/* tq_cpu_formats() -- fill the kernel slots of every row (once). */
void tq_cpu_formats(void);
/* tq_cpu_format() -- the row of id with its kernels filled; NULL for an unknown id. */
const tq_format *tq_cpu_format(int id);
/* tq_cpu_dequant_kernel() -- the dequantizer of a runnable format at a given ISA (the highest
 * level <= isa that this CPU can run and that has one; the scalar reference otherwise). For
 * tests comparing ISAs; NULL for a format without a reference. */
tq_dequant_fn tq_cpu_dequant_kernel(tq_isa isa, int id);

#endif /* TQ_FORMATS_CPU_H */
