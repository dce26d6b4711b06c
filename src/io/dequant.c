/* dequant.c -- the public ggml type API (io.h) over the one format table (common/formats.h):
 * names, block sizes and the dequantizers all come from its rows; the kernels are the ones the
 * CPU backend registered for this CPU (cpu/formats_cpu.c). No list of types is written here. */
#include <string.h>

#include "common/formats.h"
#include "cpu/formats_cpu.h"
#include "io/io_internal.h"

const char *tq_ggml_type_name(int type)
{
    const tq_format *f = type < TQ_GGML_TYPE_LIMIT ? tq_format_get(type) : NULL;
    return f ? f->name : "?";
}

int64_t tq_ggml_block_size(int type)
{
    const tq_format *f = type < TQ_GGML_TYPE_LIMIT ? tq_format_get(type) : NULL;
    return f ? f->block : 0;
}

size_t tq_ggml_type_size(int type)
{
    const tq_format *f = type < TQ_GGML_TYPE_LIMIT ? tq_format_get(type) : NULL;
    return f ? f->block_bytes : 0;
}

tq_status tq_ggml_nbytes(int type, int64_t n, size_t *out)
{
    const tq_format *f = type < TQ_GGML_TYPE_LIMIT ? tq_format_get(type) : NULL;
    size_t r;
    if (!f)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "ggml type %d is unknown", type);
    if (n < 0 || n % f->block)
        return TQ_FAIL(TQ_E_FORMAT, "%lld elements is not a multiple of the %s block (%lld)",
                       (long long)n, f->name, (long long)f->block);
    if (!tq_mul_ok((size_t)(n / f->block), f->block_bytes, &r))
        return TQ_FAIL(TQ_E_FORMAT, "%lld elements of %s overflow size_t", (long long)n, f->name);
    *out = r;
    return TQ_OK;
}

int tq_ggml_can_dequant(int type)
{
    return type < TQ_GGML_TYPE_LIMIT && tq_format_runnable(tq_format_get(type));
}

tq_status tq_ggml_unsupported(const char *file, const char *tensor, int type)
{
    char list[256];
    return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: tensor '%s' has type %s (%d), which tq does not run; "
                                     "supported: %s", file, tensor, tq_ggml_type_name(type),
                   type, tq_format_list(list, sizeof(list), NULL));
}

static tq_status check_args(int type, const void *src, size_t src_len, float *dst, int64_t n)
{
    size_t need;
    tq_status st;
    if (!tq_ggml_can_dequant(type)) {
        char list[256];
        return TQ_FAIL(TQ_E_UNSUPPORTED, "dequant: ggml type %s (%d) is not supported (%s)",
                       tq_ggml_type_name(type), type, tq_format_list(list, sizeof(list), NULL));
    }
    if ((st = tq_ggml_nbytes(type, n, &need)))
        return st;
    if ((n && (!src || !dst)) || src_len < need)
        return TQ_FAIL(TQ_E_ARG, "dequant: %s source has %zu bytes, %lld elements need %zu",
                       tq_ggml_type_name(type), src_len, (long long)n, need);
    return TQ_OK;
}

tq_status tq_ggml_dequant_ref(int type, const void *src, size_t src_len, float *dst, int64_t n)
{
    tq_status st = check_args(type, src, src_len, dst, n);
    if (st)
        return st;
    tq_format_get(type)->dequant_ref(src, dst, n);
    return TQ_OK;
}

tq_status tq_ggml_dequant_isa(tq_isa isa, int type, const void *src, size_t src_len, float *dst,
                              int64_t n)
{
    tq_status st = check_args(type, src, src_len, dst, n);
    if (st)
        return st;
    tq_cpu_dequant_kernel(isa, type)(src, dst, n);
    return TQ_OK;
}

tq_status tq_ggml_dequant(int type, const void *src, size_t src_len, float *dst, int64_t n)
{
    tq_status st = check_args(type, src, src_len, dst, n);
    if (st)
        return st;
    tq_cpu_format(type)->k.dequant(src, dst, n);
    return TQ_OK;
}
