/* log.c -- leveled logging to stderr; level from TQ_LOG (error|warn|info|debug). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/core.h"

static pthread_once_t level_once = PTHREAD_ONCE_INIT;
static int level = TQ_LOG_WARN;

static void read_level(void)
{
    const char *s = getenv("TQ_LOG");
    if (!s)
        return;
    if (!strcmp(s, "error"))
        level = TQ_LOG_ERROR;
    else if (!strcmp(s, "warn"))
        level = TQ_LOG_WARN;
    else if (!strcmp(s, "info"))
        level = TQ_LOG_INFO;
    else if (!strcmp(s, "debug"))
        level = TQ_LOG_DEBUG;
}

bool tq_log_enabled(tq_log_level lvl)
{
    pthread_once(&level_once, read_level);
    return (int)lvl <= level;
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
