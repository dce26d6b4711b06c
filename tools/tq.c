/* tq.c -- the one command-line tool. `tq` alone runs the main job on built-in defaults;
 * `tq COMMAND --help` explains each command. The only caller of exit() in the project. */
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "cli.h"
#include "env_opts.h"

typedef struct command {
    const char *name;
    tq_cmd_fn fn;
    const char *summary;
} command;

static int cmd_version(int argc, char **argv);

/* One line per command; keep sorted by how often people need them. */
static const command commands[] = {
    {"generate", cmd_generate, "continue a prompt with a model, streaming the text"},
    {"chat", cmd_chat, "interactive chat with an instruct model (its chat template)"},
    {"serve", cmd_serve, "OpenAI-compatible HTTP server (chat, completions, streaming)"},
    {"bench", cmd_bench, "engine speed: prefill and decode tok/s, peak memory"},
    {"inspect", cmd_inspect, "model file: architecture, tokenizer, metadata, tensor table (--json)"},
    {"tokenize", cmd_tokenize, "text -> token ids with a tokenizer.json or GGUF vocabulary"},
    {"ppl", cmd_ppl, "perplexity of a text through a KV-cache scheme (llama.cpp windows)"},
    {"kl", cmd_kl, "teacher-forced KL of KV-cache schemes vs an unquantized cache"},
    {"teacher", cmd_teacher, "write a teacher logits dump (top-K logits per position) for tq kl"},
    {"quantize", cmd_quantize, "weights: rotation fold + GGUF block types (streaming)"},
    {"kv-bench", cmd_kv_bench, "KV codec throughput and round-trip quality per scheme and ISA"},
    {"version", cmd_version, "library version, CPU kernels in use, CUDA devices"},
};

static int cmd_version(int argc, char **argv)
{
    char dev[256] = "";
    printf("turboquant %s\n", tq_version_string());
    printf("cpu kernels: %s%s (override with tq --cpu ISA or "
           "TQ_CPU=scalar|avx2|avx512|avx512vnni)\n", tq_isa_name(tq_cpu_isa()),
           tq_cpu_amx() ? " + amx-int8" : "");
    printf("cuda: %s", tq_cuda_compiled() ? "compiled in" : "not compiled in");
    if (tq_cuda_available() > 0 && tq_cuda_device_name(dev, sizeof(dev)) == TQ_OK)
        printf(", device 0: %s", dev);
    printf("\n");
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: tq [GLOBAL OPTIONS] [COMMAND [ARGS...]]\n\n"
               "turboquant: rotation-based quantization for LLMs (KV-cache codec, weights).\n"
               "Run without a command to do the main job on built-in defaults.\n\ncommands:\n");
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        fprintf(f, "  %-12s %s\n", commands[i].name, commands[i].summary);
    fprintf(f, "\n" CLI_ENV_USAGE "\n`tq COMMAND --help` for a command's options.\n");
}

/* A closed standard descriptor would be taken by the next open() (a model file, a --json or
 * prompt-cache target) and what is meant for stdout would land in that file. Hold each closed
 * one with /dev/null: read-only for stdin and stdout, so a write to a closed stdout still fails
 * (and finish() reports it). */
static void hold_std_fds(void)
{
    for (int fd = 0; fd <= 2; fd++)
        if (fcntl(fd, F_GETFD) < 0 && errno == EBADF) {
            const int n = open("/dev/null", fd == 2 ? O_WRONLY : O_RDONLY);
            if (n >= 0 && n != fd) {
                dup2(n, fd);
                close(n);
            }
        }
}

/* finish() -- every command ends here: stdout is flushed and closed, and a write to it that
 * failed at any point (a full disk, /dev/full, a closed stdout) makes the exit code nonzero. */
static int finish(int rc)
{
    int err = 0, bad = 0;
    errno = 0;
    if (fflush(stdout) != 0) {
        bad = 1;
        err = errno;
    } else if (ferror(stdout)) {
        bad = 1; /* an earlier write failed */
    }
    if (fclose(stdout) != 0 && !bad) {
        bad = 1;
        err = errno;
    }
    if (!bad)
        return rc;
    if (!err)
        err = cli_stdout_errno(); /* fflush of a stream already in error sets no errno */
    fprintf(stderr, "tq: cannot write to standard output: %s; the output is incomplete\n",
            err ? strerror(err) : "a write failed");
    return rc ? rc : 1;
}

int main(int argc, char **argv)
{
    hold_std_fds();
    const int env_rc = cli_env_start(&argc, &argv);
    if (env_rc)
        exit(finish(env_rc));
    if (argc < 2)
        exit(finish(cmd_default(argc, argv)));
    if (!strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
        usage(stdout);
        exit(finish(0));
    }
    if (!strcmp(argv[1], "--version"))
        exit(finish(cmd_version(argc - 1, argv + 1)));
    for (size_t i = 0; i < sizeof(commands) / sizeof(commands[0]); i++)
        if (!strcmp(argv[1], commands[i].name))
            exit(finish(commands[i].fn(argc - 1, argv + 1)));
    fprintf(stderr, "tq: unknown command '%s'\n\n", argv[1]);
    usage(stderr);
    exit(finish(2));
}
