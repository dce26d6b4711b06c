/* cuda_opts.c -- option parsing of the CUDA entry points that needs no device (every build). */
#include <string.h>

#include "core/core.h"

tq_status tq_cuda_merge_parse(const char *name, tq_cuda_merge *m)
{
    static const char *const names[] = {"auto", "fused", "kernel", "cluster"};
    if (!m)
        return TQ_FAIL(TQ_E_ARG, "tq_cuda_merge_parse: NULL out");
    for (int i = 0; name && i < 4; i++)
        if (!strcmp(name, names[i])) {
            *m = (tq_cuda_merge)i;
            return TQ_OK;
        }
    return TQ_FAIL(TQ_E_ARG, "split merge '%s': valid are auto, fused, kernel, cluster", name ? name : "(null)");
}
