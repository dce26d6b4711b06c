/* test_cli_model.c -- the `tq` binary end to end on a real model (issue 10: items 6, 7, 10):
 * generate to /dev/full or a closed stdout exits 1 with a message; chat exits nonzero when no
 * message could be answered (and 0 when one was); the stats line after --save-prompt-cache /
 * --load-prompt-cache counts the whole prompt, the count taken from `tq tokenize --count`;
 * (item 11) greedy text with the default repeat penalty is the same never cached, saved and
 * loaded, for --kv f32 and turbo.
 * Skips (77) without models/SmolLM2-135M-Instruct.Q4_1.gguf. */
#include <stdlib.h>

#include "cli_run.h"

#define MODEL "models/SmolLM2-135M-Instruct.Q4_1.gguf"

static cli_res r;

static void write_failures(void)
{
    cli_run(&r, OUT_DEVFULL, NULL, "generate", "-m", MODEL, "-p", "Hello", "-n", "8", "--greedy",
            "-t", "1", (const char *)NULL);
    CHECK_RUN(&r, 1, "cannot write to standard output: No space left on device",
              "generate > /dev/full");
    CHECK(strstr(r.err, "stop: stopped"), "generation stopped at the first failed write:\n%s",
          r.err);
    cli_run(&r, OUT_CLOSED, NULL, "generate", "-m", MODEL, "-p", "Hello", "-n", "8", "--greedy",
            "-t", "1", (const char *)NULL);
    CHECK_RUN(&r, 1, "cannot write to standard output: Bad file descriptor", "generate >&-");
    cli_run(&r, OUT_DEVFULL, "Hi!\n", "chat", "-m", MODEL, "-n", "4", "--greedy", "-t", "1",
            (const char *)NULL);
    CHECK_RUN(&r, 1, "cannot write to standard output: No space left on device",
              "chat > /dev/full");
}

static void chat_refused(void)
{
    /* --ctx 16: the rendered conversation alone is longer than the context */
    cli_run(&r, OUT_CAPTURE, "Tell me a long story about the sea and the ships on it, please.\n",
            "chat", "-m", MODEL, "--ctx", "16", "-n", "4", "--greedy", "-t", "1",
            (const char *)NULL);
    CHECK_RUN(&r, 1, "tq chat: none of the 1 message could be answered", "chat, all refused");
    CHECK(strstr(r.err, "longer than the context"), "the refusal says why:\n%s", r.err);
    /* two messages, both refused */
    cli_run(&r, OUT_CAPTURE, "Tell me a long story about the sea and the ships on it.\n"
                             "And another long story about mountains and rivers, please.\n",
            "chat", "-m", MODEL, "--ctx", "16", "-n", "4", "--greedy", "-t", "1",
            (const char *)NULL);
    CHECK_RUN(&r, 1, "none of the 2 messages could be answered", "chat, two refused");
    /* the same message with room: answered, exit 0 */
    cli_run(&r, OUT_CAPTURE, "Hi!\n", "chat", "-m", MODEL, "--ctx", "256", "-n", "4", "--greedy",
            "-t", "1", (const char *)NULL);
    CHECK(r.rc == 0, "chat with room: exit %d\n%s", r.rc, r.err);
}

static void prompt_cache_stats(void)
{
    char dir[] = "/tmp/tq_test_cli_model_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char prompt[512], snap[512], want[160];
    snprintf(prompt, sizeof(prompt), "%s/prompt.txt", dir);
    snprintf(snap, sizeof(snap), "%s/cache.tqkv", dir);
    FILE *f = fopen(prompt, "w");
    for (int i = 0; f && i < 40; i++)
        fprintf(f, "Sentence %d of a long prompt about the sea, the ships and the harbour. ", i);
    if (f)
        fclose(f);
    /* the prompt's length as the tokenizer command counts it, with generate's flags */
    cli_run(&r, OUT_CAPTURE, NULL, "tokenize", "-t", MODEL, "-f", prompt, "--special",
            "--bos-auto", "--count", (const char *)NULL);
    const long n = strtol(r.out, NULL, 10);
    CHECK(r.rc == 0 && n > 400, "tq tokenize --count: exit %d, '%s'", r.rc, r.out);

    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-m", MODEL, "-f", prompt, "-n", "2", "--greedy",
            "-t", "1", "--save-prompt-cache", snap, (const char *)NULL);
    snprintf(want, sizeof(want), "[prompt %ld tokens, ", n);
    CHECK_RUN(&r, 0, want, "stats after --save-prompt-cache");
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-m", MODEL, "-f", prompt, "-n", "2", "--greedy",
            "-t", "1", "--load-prompt-cache", snap, (const char *)NULL);
    snprintf(want, sizeof(want), "[prompt %ld tokens (%ld from the prompt cache), ", n, n - 1);
    CHECK_RUN(&r, 0, want, "stats after --load-prompt-cache");
    unlink(prompt);
    unlink(snap);
    rmdir(dir);
}

/* Issue 10 item 11, as a user sees it: greedy output with the default repeat penalty (1.1 over
 * the last 64 tokens) is the same text plain, with --save-prompt-cache and with
 * --load-prompt-cache. The tokens restored from (or evaluated for) the cache must enter the
 * penalty window like the prompt of a never-cached run; before that fix the cached runs
 * penalised only the prompt's last token and wrote a different continuation. */
static void prompt_cache_same_text(const char *kv)
{
    char dir[] = "/tmp/tq_test_cli_model_XXXXXX";
    if (!mkdtemp(dir)) {
        CHECK(0, "mkdtemp failed");
        return;
    }
    char prompt[512], snap[512];
    static char plain[65536];
    snprintf(prompt, sizeof(prompt), "%s/prompt.txt", dir);
    snprintf(snap, sizeof(snap), "%s/cache.tqkv", dir);
    FILE *f = fopen(prompt, "w");
    /* 495 tokens that invite repeating the pattern: without the prompt in the penalty window
     * the model continues it ("28 of a long prompt..."), with it, it does not */
    for (int i = 0; f && i < 28; i++)
        fprintf(f, "Sentence %d of a long prompt about the sea, the ships and the harbour. ", i);
    if (f)
        fclose(f);
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-m", MODEL, "-f", prompt, "-n", "32", "--greedy",
            "--kv", kv, "-q", (const char *)NULL);
    CHECK(r.rc == 0 && r.out[0], "--kv %s, never cached: exit %d\n%s", kv, r.rc, r.err);
    snprintf(plain, sizeof(plain), "%s", r.out);
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-m", MODEL, "-f", prompt, "-n", "32", "--greedy",
            "--kv", kv, "-q", "--save-prompt-cache", snap, (const char *)NULL);
    CHECK(r.rc == 0 && !strcmp(r.out, plain),
          "--kv %s --save-prompt-cache: exit %d, text\n'%s'\nnever cached:\n'%s'\n%s", kv, r.rc,
          r.out, plain, r.err);
    cli_run(&r, OUT_CAPTURE, NULL, "generate", "-m", MODEL, "-f", prompt, "-n", "32", "--greedy",
            "--kv", kv, "-q", "--load-prompt-cache", snap, (const char *)NULL);
    CHECK(r.rc == 0 && !strcmp(r.out, plain),
          "--kv %s --load-prompt-cache: exit %d, text\n'%s'\nnever cached:\n'%s'\n%s", kv, r.rc,
          r.out, plain, r.err);
    CHECK(strstr(r.err, "prompt tokens reused"), "--kv %s: the cache was used:\n%s", kv, r.err);
    unlink(prompt);
    unlink(snap);
    rmdir(dir);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_cli_model");
    if (cli_init(argc, argv))
        return 1;
    if (access(MODEL, R_OK) != 0)
        return t_skip(MODEL " not found (scripts/get-model.sh smollm2)");
    write_failures();
    chat_refused();
    prompt_cache_stats();
    prompt_cache_same_text("f32");
    prompt_cache_same_text("turbo");
    return t_done();
}
