/* cli_args.c -- range-checked parsing of numeric flag values (cli_args.h). */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cli_args.h"

static int missing(const char *cmd, const char *flag)
{
    fprintf(stderr, "tq %s: %s needs a value (see tq %s --help)\n", cmd, flag, cmd);
    return 2;
}

/* decimal digits with an optional sign, nothing else (strtoll alone takes spaces, "0x", "") */
static int is_decimal(const char *s)
{
    if (*s == '-' || *s == '+')
        s++;
    if (!*s)
        return 0;
    for (; *s; s++)
        if (*s < '0' || *s > '9')
            return 0;
    return 1;
}

int cli_i64(const char *cmd, const char *flag, const char *val, int64_t lo, int64_t hi,
            int64_t *out)
{
    if (!val)
        return missing(cmd, flag);
    if (!is_decimal(val)) {
        fprintf(stderr, "tq %s: %s expects an integer in %lld .. %lld, got '%s'\n", cmd, flag,
                (long long)lo, (long long)hi, val);
        return 2;
    }
    errno = 0;
    const long long v = strtoll(val, NULL, 10);
    if (errno == ERANGE || v < lo || v > hi) {
        fprintf(stderr, "tq %s: %s %s is out of range (valid: %lld .. %lld)\n", cmd, flag, val,
                (long long)lo, (long long)hi);
        return 2;
    }
    *out = v;
    return 0;
}

int cli_long(const char *cmd, const char *flag, const char *val, long lo, long hi, long *out)
{
    int64_t v;
    const int r = cli_i64(cmd, flag, val, lo, hi, &v);
    if (!r)
        *out = (long)v;
    return r;
}

int cli_int(const char *cmd, const char *flag, const char *val, int lo, int hi, int *out)
{
    int64_t v;
    const int r = cli_i64(cmd, flag, val, lo, hi, &v);
    if (!r)
        *out = (int)v;
    return r;
}

int cli_f64(const char *cmd, const char *flag, const char *val, double lo, double hi,
            unsigned open, double *out)
{
    char *end = NULL;
    if (!val)
        return missing(cmd, flag);
    errno = 0;
    const double v = strtod(val, &end);
    const char *lo_op = open & CLI_OPEN_LO ? "<" : "<=", *hi_op = open & CLI_OPEN_HI ? "<" : "<=";
    if (end == val || *end) {
        fprintf(stderr, "tq %s: %s expects a number (%g %s value %s %g), got '%s'\n", cmd, flag, lo,
                lo_op, hi_op, hi, val);
        return 2;
    }
    const int ok_lo = open & CLI_OPEN_LO ? v > lo : v >= lo;
    const int ok_hi = open & CLI_OPEN_HI ? v < hi : v <= hi;
    if (!isfinite(v) || !ok_lo || !ok_hi) { /* NaN fails both comparisons */
        fprintf(stderr, "tq %s: %s %s is out of range (valid: %g %s value %s %g)\n", cmd, flag, val,
                lo, lo_op, hi_op, hi);
        return 2;
    }
    *out = v;
    return 0;
}

int cli_float(const char *cmd, const char *flag, const char *val, double lo, double hi,
              unsigned open, float *out)
{
    double v;
    const int r = cli_f64(cmd, flag, val, lo, hi, open, &v);
    if (!r)
        *out = (float)v;
    return r;
}

int cli_str_list(const char *cmd, const char *flag, const char *orig, char *s, char **out,
                 int cap, int *n)
{
    *n = 0;
    for (char *p = s;;) {
        char *comma = strchr(p, ',');
        if (comma)
            *comma = 0;
        if (!*p) {
            fprintf(stderr, "tq %s: %s '%s' has an empty item (give a comma-separated list such "
                            "as a,b)\n", cmd, flag, orig);
            return 2;
        }
        if (*n == cap) {
            fprintf(stderr, "tq %s: %s '%s' has more than %d items\n", cmd, flag, orig, cap);
            return 2;
        }
        out[(*n)++] = p;
        if (!comma)
            return 0;
        p = comma + 1;
    }
}

int cli_i64_list(const char *cmd, const char *flag, const char *val, int64_t lo, int64_t hi,
                 int64_t *out, int cap, int *n)
{
    char buf[1024], *items[64];
    int k = 0;
    *n = 0;
    if (!val)
        return missing(cmd, flag);
    if (snprintf(buf, sizeof(buf), "%s", val) >= (int)sizeof(buf)) {
        fprintf(stderr, "tq %s: %s '%.40s...' is too long\n", cmd, flag, val);
        return 2;
    }
    if (cli_str_list(cmd, flag, val, buf, items, cap < 64 ? cap : 64, &k))
        return 2;
    for (int i = 0; i < k; i++)
        if (cli_i64(cmd, flag, items[i], lo, hi, &out[i]))
            return 2;
    *n = k;
    return 0;
}

int cli_ncpu(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

void cli_threads_warn(const char *cmd, const char *flag, long n)
{
    const int ncpu = cli_ncpu();
    if (n > ncpu)
        fprintf(stderr, "tq %s: warning: %s %ld is more than the %d online CPUs; the threads will "
                        "share them and run slower than %s %d\n", cmd, flag, n, ncpu, flag, ncpu);
}

int cli_threads(const char *cmd, const char *flag, const char *val, int lo, int *out)
{
    if (cli_int(cmd, flag, val, lo, CLI_MAX_THREADS, out))
        return 2;
    cli_threads_warn(cmd, flag, *out);
    return 0;
}

int cli_not_dir(const char *cmd, const char *flag, const char *path)
{
    struct stat sb;
    if (path && strcmp(path, "-") && stat(path, &sb) == 0 && S_ISDIR(sb.st_mode)) {
        fprintf(stderr, "tq %s: %s '%s' is a directory, not a file\n", cmd, flag, path);
        return 1;
    }
    return 0;
}

static int stdout_errno; /* the process's one stdout: the first write error on it */

void cli_stdout_error(int err)
{
    if (!stdout_errno)
        stdout_errno = err ? err : EIO;
}

int cli_stdout_errno(void)
{
    return stdout_errno;
}

int cli_flush(void)
{
    errno = 0;
    if (fflush(stdout) != 0 || ferror(stdout)) {
        cli_stdout_error(errno);
        return 1;
    }
    return 0;
}
