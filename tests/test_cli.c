/* test_cli.c -- the `tq` binary end to end, no model needed (issue 10: items 5, 6, 9 and the
 * directory messages). Every bad numeric flag is refused with exit 2 and a message naming the
 * flag, its range and the value; a failed write to stdout exits nonzero with a message; a +rk
 * scheme is refused by kv-bench before anything runs; a directory given as a file says so; `tq
 * bench` runs with fewer tokens than its warm-up (on the tiny model of tests/data/tiny). */
#include <stdlib.h>
#include <sys/stat.h>

#include "cli_run.h"

static cli_res r; /* 128 KiB: static, not on the stack */

/* a flag value refused before any file is opened: exit 2 and this text in stderr */
#define REFUSED(want, ...)                                                                    \
    do {                                                                                      \
        cli_run(&r, OUT_CAPTURE, NULL, __VA_ARGS__, (const char *)NULL);                      \
        CHECK_RUN(&r, 2, want, #__VA_ARGS__);                                                 \
    } while (0)

static void numeric_flags(void)
{
    /* the cases of the issue */
    REFUSED("-n 4294967300 is out of range (valid: -1 .. 2147483647)", "generate", "-p", "x",
            "-n", "4294967300");
    REFUSED("--seed -2 is out of range (valid: -1 .. 9223372036854775807)", "generate", "-p", "x",
            "--seed", "-2");
    REFUSED("--chunks -3 is out of range (valid: 0 .. 2147483647)", "ppl", "-f", "x", "--chunks",
            "-3");
    REFUSED("--kv ',' has an empty item", "kl", "-f", "x", "--kv", ",");
    REFUSED("--kv 'kv8,' has an empty item", "kl", "-f", "x", "--kv", "kv8,");
    REFUSED("-t 1000 is out of range (valid: 0 .. 256)", "generate", "-p", "x", "-t", "1000");
    REFUSED("-t 1000 is out of range (valid: 0 .. 256)", "ppl", "-f", "x", "-t", "1000");
    /* the other flags of every command */
    REFUSED("-n expects an integer in -1 .. 2147483647, got '0x10'", "generate", "-p", "x", "-n",
            "0x10");
    REFUSED("-n expects an integer", "generate", "-p", "x", "-n", "");
    REFUSED("-n 99999999999999999999 is out of range", "generate", "-p", "x", "-n",
            "99999999999999999999");
    REFUSED("-c -1 is out of range (valid: 0 .. 16777216)", "generate", "-p", "x", "-c", "-1");
    REFUSED("--top-k -1 is out of range (valid: 0 .. 2147483647)", "chat", "--top-k", "-1");
    REFUSED("--repeat-last-n -5 is out of range", "chat", "--repeat-last-n", "-5");
    REFUSED("--top-p 0 is out of range (valid: 0 < value <= 1)", "generate", "-p", "x", "--top-p",
            "0");
    REFUSED("--min-p 1 is out of range (valid: 0 <= value < 1)", "generate", "-p", "x", "--min-p",
            "1");
    REFUSED("--temp nan is out of range (valid: 0 <= value <= 1000)", "generate", "-p", "x",
            "--temp", "nan");
    REFUSED("--temp -0.5 is out of range", "bench", "--temp", "-0.5");
    REFUSED("--repeat-penalty 0 is out of range (valid: 0 < value <= 1000)", "generate", "-p", "x",
            "--repeat-penalty", "0");
    REFUSED("--runs 0 is out of range (valid: 1 .. 100)", "bench", "--runs", "0");
    REFUSED("--prefill -4 is out of range (valid: 1 .. 16777216)", "bench", "--prefill", "-4");
    REFUSED("--depths '1,,2' has an empty item", "bench", "--depths", "1,,2");
    REFUSED("--depths -1 is out of range (valid: 0 .. 16777216)", "bench", "--depths", "0,-1");
    REFUSED("--ctx 2 is out of range (valid: 4 .. 1048576)", "ppl", "-f", "x", "--ctx", "2");
    REFUSED("--ctx 7 must be even", "kl", "-f", "x", "--kv", "kv8", "--ctx", "7");
    REFUSED("--chunks -1 is out of range", "kl", "-f", "x", "--kv", "kv8", "--chunks", "-1");
    REFUSED("--rows 0 is out of range (valid: 1 .. 16777216)", "kv-bench", "--rows", "0");
    REFUSED("--runs 4 is out of range (valid: 5 .. 1000)", "kv-bench", "--runs", "4");
    REFUSED("--threads 0 is out of range (valid: 1 .. 256)", "kv-bench", "--threads", "1,0");
    REFUSED("--head-dim '64,,128' has an empty item", "kv-bench", "--head-dim", "64,,128");
    REFUSED("--schemes ',' has an empty item", "kv-bench", "--schemes", ",");
    REFUSED("--decode 0 is out of range (valid: 1 .. 100000)", "bench", "--cuda", "--decode", "0");
    REFUSED("--reps 0 is out of range (valid: 1 .. 10000)", "kv-bench", "--cuda", "--reps", "0");
    REFUSED("--ctx '4096,' has an empty item", "kv-bench", "--cuda", "--ctx", "4096,");

    /* -n -1 is llama.cpp's "until EOS or the context is full": accepted, and --help says so */
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-p", "x", "-n", "-1", "-m", "/nonexistent/m.gguf",
            (const char *)NULL);
    CHECK_RUN(&r, 1, "cannot read model '/nonexistent/m.gguf'", "-n -1 accepted");
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "--help", (const char *)NULL);
    CHECK(r.rc == 0 && strstr(r.out, "-1 or 0 =") && strstr(r.out, "until EOS or the context"),
          "generate --help documents -n -1:\n%s", r.out);

    /* -t above the CPU count: a warning, not a refusal */
    char t[32];
    snprintf(t, sizeof(t), "%ld", sysconf(_SC_NPROCESSORS_ONLN) + 1);
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-p", "x", "-t", t, "-m", "/nonexistent/m.gguf",
            (const char *)NULL);
    char want[96];
    snprintf(want, sizeof(want), "warning: -t %s is more than the %ld online CPUs", t,
             sysconf(_SC_NPROCESSORS_ONLN));
    CHECK_RUN(&r, 1, want, "-t above the CPU count");
}

static void stdout_errors(void)
{
    static const char *const full = "cannot write to standard output: No space left on device";
    static const char *const closed = "cannot write to standard output: Bad file descriptor";
    cli_run(&r, OUT_DEVFULL, NULL, "--help", (const char *)NULL);
    CHECK_RUN(&r, 1, full, "tq --help > /dev/full");
    cli_run(&r, OUT_CLOSED, NULL, "--help", (const char *)NULL);
    CHECK_RUN(&r, 1, closed, "tq --help >&-");
    cli_run(&r, OUT_DEVFULL, NULL, "version", (const char *)NULL);
    CHECK_RUN(&r, 1, full, "tq version > /dev/full");
    /* a command that runs and prints a table (no model needed) */
    cli_run(&r, OUT_DEVFULL, NULL, "kv-bench", "--schemes", "f16", "--rows", "64", "--runs", "5",
            "--threads", "1", "--isa", "scalar", "--no-quality", (const char *)NULL);
    CHECK_RUN(&r, 1, full, "tq kv-bench > /dev/full");
    cli_run(&r, OUT_CLOSED, NULL, "kv-bench", "--schemes", "f16", "--rows", "64", "--runs", "5",
            "--threads", "1", "--isa", "scalar", (const char *)NULL);
    CHECK_RUN(&r, 1, closed, "tq kv-bench >&-");
    /* the same command with a writable stdout still succeeds */
    cli_run(&r, OUT_CAPTURE, NULL, "kv-bench", "--schemes", "f16", "--rows", "64", "--runs", "5",
            "--threads", "1", "--isa", "scalar", "--no-quality", (const char *)NULL);
    CHECK(r.rc == 0 && strstr(r.out, "f16"), "kv-bench to a file: exit %d\n%s", r.rc, r.err);
}

static void kv_bench_rk(void)
{
    /* refused before anything is measured: no table row for f16 either */
    cli_run(&r, OUT_CAPTURE, NULL, "kv-bench", "--schemes", "f16,turbo:k4v3+rk", "--rows", "64",
            "--runs", "5", "--threads", "1", (const char *)NULL);
    CHECK_RUN(&r, 2, "--schemes 'turbo:k4v3+rk': +rk is a variant of the engine's turbo cache",
              "kv-bench +rk");
    CHECK(strstr(r.err, "benchmark turbo:k4v3 here") && strstr(r.err, "tq kl"),
          "the message names what to run instead:\n%s", r.err);
    CHECK(r.out[0] == 0, "nothing printed on stdout before the refusal:\n%s", r.out);
}

static void directories(void)
{
    char dir[] = "/tmp/tq_test_cli_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char want[128];
    snprintf(want, sizeof(want), "-f '%s' is a directory, not a file", dir);
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-f", dir, (const char *)NULL);
    CHECK_RUN(&r, 1, want, "generate -f DIR");
    cli_run(&r, OUT_CAPTURE, NULL, "ppl", "-f", dir, (const char *)NULL);
    CHECK_RUN(&r, 1, want, "ppl -f DIR");
    snprintf(want, sizeof(want), "--load-prompt-cache '%s' is a directory, not a file", dir);
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-p", "hello", "--load-prompt-cache", dir,
            (const char *)NULL);
    CHECK_RUN(&r, 1, want, "generate --load-prompt-cache DIR");
    rmdir(dir);
}

/* `tq bench` with fewer tokens than its 8-token warm-up (--prefill 1, one decode step at depth
 * 0): the warm-up read past the token buffer ("token 4 has id 1852795252, outside the
 * vocabulary"). The tiny random model of tests/data/tiny (256-token vocabulary) runs it. */
static void bench_short(void)
{
    static const char *const tiny = "tests/data/tiny/gemma3";
    if (access(tiny, R_OK) != 0) {
        CHECK(0, "%s not found (run from the source root)", tiny);
        return;
    }
    cli_run(&r, OUT_CAPTURE, NULL, "bench", "-m", tiny, "--prefill", "1", "--depths", "0",
            "--decode", "1", "--runs", "1", "-t", "1", (const char *)NULL);
    CHECK(r.rc == 0 && strstr(r.out, "prefill  1 tokens:") && strstr(r.out, "depth     0:"),
          "bench --prefill 1 --depths 0 --decode 1: exit %d\n%s%s", r.rc, r.out, r.err);
    cli_run(&r, OUT_CAPTURE, NULL, "bench", "-m", tiny, "--prefill", "3", "--depths", "0,2",
            "--decode", "2", "--runs", "1", "-t", "1", (const char *)NULL);
    CHECK(r.rc == 0 && strstr(r.out, "prefill  3 tokens:") && strstr(r.out, "depth     2:"),
          "bench --prefill 3 --depths 0,2 --decode 2: exit %d\n%s%s", r.rc, r.out, r.err);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cli");
    if (cli_init(argc, argv))
        return 1;
    numeric_flags();
    stdout_errors();
    kv_bench_rk();
    directories();
    bench_short();
    return t_done();
}
