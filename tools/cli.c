/* cli.c -- small helpers shared by the subcommands. */
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

int cli_is_help(int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help"))
            return 1;
    return 0;
}
