/* status.c -- status names, the thread-local last-error message, version. */
#include <stdio.h>
#include <string.h>

#include "core/core.h"

static _Thread_local char last_error[1024];

const char *tq_status_str(tq_status st)
{
    switch (st) {
    case TQ_OK: return "TQ_OK";
    case TQ_E_ARG: return "TQ_E_ARG";
    case TQ_E_NOMEM: return "TQ_E_NOMEM";
    case TQ_E_IO: return "TQ_E_IO";
    case TQ_E_FORMAT: return "TQ_E_FORMAT";
    case TQ_E_UNSUPPORTED: return "TQ_E_UNSUPPORTED";
    case TQ_E_CUDA: return "TQ_E_CUDA";
    case TQ_E_MISMATCH: return "TQ_E_MISMATCH";
    case TQ_E_OVERFLOW: return "TQ_E_OVERFLOW";
    }
    return "TQ_E_UNKNOWN";
}

const char *tq_last_error(void)
{
    return last_error;
}

void tq_clear_error(void)
{
    last_error[0] = 0;
}

tq_status tq_fail_(tq_status st, const char *file, int line, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof(last_error), fmt, ap);
    va_end(ap);
    if (tq_log_enabled(TQ_LOG_DEBUG))
        tq_log(TQ_LOG_DEBUG, "%s:%d: %s: %s", file, line, tq_status_str(st), last_error);
    return st;
}

unsigned tq_version(void)
{
    return TQ_VERSION_NUMBER;
}

const char *tq_version_string(void)
{
    return "0.1.0";
}

size_t tq_dtype_size(tq_dtype t)
{
    switch (t) {
    case TQ_DTYPE_F32: return 4;
    case TQ_DTYPE_F16: return 2;
    case TQ_DTYPE_BF16: return 2;
    default: return 0;
    }
}

const char *tq_dtype_name(tq_dtype t)
{
    switch (t) {
    case TQ_DTYPE_F32: return "f32";
    case TQ_DTYPE_F16: return "f16";
    case TQ_DTYPE_BF16: return "bf16";
    default: return "invalid";
    }
}
