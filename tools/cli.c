/* cli.c -- small helpers shared by the subcommands. */
#include <errno.h>
#include <stdarg.h>

#include "cli.h"

int cli_error(const char *cmd, tq_status st, const char *fmt, ...)
{
    va_list ap;
    fprintf(stderr, "tq %s: ", cmd);
    va_start(ap, fmt);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
    if (st != TQ_OK && tq_last_error()[0])
        fprintf(stderr, ": %s", tq_last_error());
    fputc('\n', stderr);
    return 1;
}

int cli_int(const char *cmd, const char *flag, const char *val, long *out)
{
    char *end = NULL;
    if (!val) {
        fprintf(stderr, "tq %s: %s needs a value\n", cmd, flag);
        return 2;
    }
    errno = 0;
    long v = strtol(val, &end, 0);
    if (errno || !end || *end || end == val) {
        fprintf(stderr, "tq %s: %s expects an integer, got '%s'\n", cmd, flag, val);
        return 2;
    }
    *out = v;
    return 0;
}

int cli_double(const char *cmd, const char *flag, const char *val, double *out)
{
    char *end = NULL;
    if (!val) {
        fprintf(stderr, "tq %s: %s needs a value\n", cmd, flag);
        return 2;
    }
    errno = 0;
    double v = strtod(val, &end);
    if (errno || !end || *end || end == val) {
        fprintf(stderr, "tq %s: %s expects a number, got '%s'\n", cmd, flag, val);
        return 2;
    }
    *out = v;
    return 0;
}

int cli_is_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}
