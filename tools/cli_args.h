/* cli_args.h -- the one parser of numeric flag values for every tq command (tools/cli_args.c).
 * Each value is checked against its range; a bad one is refused with a message that names the
 * command, the flag, the valid range and the value given, e.g.
 *   tq generate: -n 4294967300 is out of range (valid: -1 .. 2147483647)
 *   tq ppl: --chunks expects an integer, got '3x'
 * Integers are decimal only ("010" is ten, "0x10" is refused), with no trailing characters.
 * Every function returns 0 on success, else 2 (the usage-error exit code) after printing. */
#ifndef TQ_CLI_ARGS_H
#define TQ_CLI_ARGS_H

#include <stdint.h>

/* CLI_MAX_THREADS -- the most threads any command starts (-t, kv-bench --threads). Values above
 * the online CPU count are allowed with a warning (cli_threads_warn). */
#define CLI_MAX_THREADS 256

/* cli_i64() -- val as an integer in [lo, hi] into *out. */
int cli_i64(const char *cmd, const char *flag, const char *val, int64_t lo, int64_t hi,
            int64_t *out);
/* cli_long()/cli_int() -- the same for long and int destinations. */
int cli_long(const char *cmd, const char *flag, const char *val, long lo, long hi, long *out);
int cli_int(const char *cmd, const char *flag, const char *val, int lo, int hi, int *out);

/* Bounds of cli_f64(): the low and/or high end excluded. */
#define CLI_OPEN_LO 1u
#define CLI_OPEN_HI 2u
/* cli_f64() -- val as a finite number in [lo, hi] (ends excluded per open) into *out. */
int cli_f64(const char *cmd, const char *flag, const char *val, double lo, double hi,
            unsigned open, double *out);
/* cli_float() -- the same into a float. */
int cli_float(const char *cmd, const char *flag, const char *val, double lo, double hi,
              unsigned open, float *out);

/* cli_i64_list() -- "a,b,c": 1..cap integers, each in [lo, hi], into out[0..*n). An empty item
 * ("1,,2", ",", "") is refused. */
int cli_i64_list(const char *cmd, const char *flag, const char *val, int64_t lo, int64_t hi,
                 int64_t *out, int cap, int *n);
/* cli_str_list() -- split the comma list s in place into 1..cap non-empty items, out[0..*n);
 * an empty item or more than cap items is refused naming flag and orig (the unsplit text). */
int cli_str_list(const char *cmd, const char *flag, const char *orig, char *s, char **out,
                 int cap, int *n);

/* cli_threads() -- a thread count in [lo, CLI_MAX_THREADS] (lo is 0 where 0 = every core);
 * warns on stderr when it is more than the online CPUs. */
int cli_threads(const char *cmd, const char *flag, const char *val, int lo, int *out);
/* cli_ncpu() -- the online CPU count (>= 1). */
int cli_ncpu(void);
/* cli_threads_warn() -- the warning of cli_threads() for n threads. */
void cli_threads_warn(const char *cmd, const char *flag, long n);

/* cli_not_dir() -- 1 with "tq CMD: FLAG 'PATH' is a directory, not a file" printed when path
 * names a directory, else 0 (a missing or unreadable path is left to the caller's open). */
int cli_not_dir(const char *cmd, const char *flag, const char *path);

/* cli_flush() -- fflush(stdout); nonzero (the reason recorded for tq.c's exit message) when
 * stdout cannot be written. Long runs check it to stop early. */
int cli_flush(void);
/* cli_stdout_error() -- record why a write to stdout failed (errno), for the message tq.c
 * prints at exit; cli_stdout_errno() -- the first one recorded, 0 if none. */
void cli_stdout_error(int err);
int cli_stdout_errno(void);

#endif
