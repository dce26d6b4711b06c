/* log.c -- leveled logging to stderr; level set by tq_log_set_level() (the tool maps TQ_LOG). */
#include <stdatomic.h>
#include <stdio.h>

#include "core/core.h"

static _Atomic int level = TQ_LOG_WARN;

void tq_log_set_level(tq_log_level lvl)
{
    atomic_store_explicit(&level, (int)lvl, memory_order_relaxed);
}

bool tq_log_enabled(tq_log_level lvl)
{
    return (int)lvl <= atomic_load_explicit(&level, memory_order_relaxed);
}

void tq_log(tq_log_level lvl, const char *fmt, ...)
{
    static const char *names[] = {"error", "warning", "info", "debug"};
    char buf[1024];
    va_list ap;
    if (!tq_log_enabled(lvl))
        return;
    va_start(ap, fmt);
    vsnprintf(buf, sizeof(buf), fmt, ap);
    va_end(ap);
    fprintf(stderr, "tq: %s: %s\n", names[lvl], buf);
}
