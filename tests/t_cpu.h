/* t_cpu.h -- `--cpu ISA` on a test's command line: run the library's kernels at that level
 * (tq_cpu_select; the library reads no environment). The ctest entries of tests/<area>.cmake
 * pass it to run the same checks on the portable kernels. */
#ifndef TQ_T_CPU_H
#define TQ_T_CPU_H
#include <stdio.h>
#include <string.h>

#include "turboquant.h"

/* t_cpu_args() -- 0 if no --cpu was given or the level is in use now; 77 (ctest SKIP, reason
 * printed) when this CPU cannot run it; 2 for a name that is not a level. */
static inline int t_cpu_args(int argc, char **argv)
{
    for (int i = 1; i + 1 < argc; i++) {
        if (strcmp(argv[i], "--cpu"))
            continue;
        for (int l = 0; l < TQ_ISA_COUNT; l++)
            if (!strcmp(argv[i + 1], tq_isa_name((tq_isa)l))) {
                if (tq_cpu_select((tq_isa)l) == TQ_OK) {
                    printf("cpu kernels: %s (--cpu)\n", tq_isa_name(tq_cpu_isa()));
                    return 0;
                }
                printf("SKIP: --cpu %s: this CPU cannot run it\n", argv[i + 1]);
                return 77;
            }
        printf("FAIL: --cpu %s is not one of scalar, avx2, avx512\n", argv[i + 1]);
        return 2;
    }
    return 0;
}
#endif
