/* cmd_default.c -- the main job: what `tq` with no arguments does (README quick start, `make run`).
 * Runs a real model on built-in defaults: SmolLM2-135M-Instruct (fetched on first use with
 * scripts/get-model.sh, which verifies its sha256), a built-in question through the model's chat
 * template, the answer streamed, then prompt and generation speed. */
#include <limits.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cmd_generate.h"

static const char *const default_question =
    "Explain in three short sentences why the sky is blue.";

static int exists(const char *p)
{
    struct stat sb;
    return stat(p, &sb) == 0;
}

/* The repository root: the current directory when it has scripts/get-model.sh, else three
 * levels above the executable (build/<preset>/tq). Empty string if neither. */
static void repo_root(char *out, size_t cap)
{
    char exe[PATH_MAX];
    ssize_t n;
    out[0] = 0;
    if (exists("scripts/get-model.sh")) {
        snprintf(out, cap, ".");
        return;
    }
    n = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
    if (n <= 0)
        return;
    exe[n] = 0;
    for (int up = 0; up < 3; up++) {
        char *slash = strrchr(exe, '/');
        if (!slash)
            return;
        *slash = 0;
    }
    char probe[PATH_MAX + 32];
    snprintf(probe, sizeof(probe), "%s/scripts/get-model.sh", exe);
    if (exists(probe))
        snprintf(out, cap, "%s", exe);
}

/* kv_compare() -- the same prompt through a bf16 cache, then KV bytes/token and KL per scheme
 * on a built-in text (tools/kv_compare.c). 0 or an exit code. */
int kv_compare(const char *cmd, gen_ctx *g, gen_args *a, const int32_t *ids, int64_t n_ids);

int cmd_default(int argc, char **argv)
{
    const char *cmd = "(main job)";
    char root[PATH_MAX], model[PATH_MAX + 64], shell[2 * PATH_MAX + 64];
    gen_args a;
    gen_ctx g;
    int rc;

    (void)argc;
    (void)argv;
    repo_root(root, sizeof(root));
    snprintf(model, sizeof(model), "%s%s" GEN_DEFAULT_MODEL, root, root[0] ? "/" : "");
    printf("tq: no command given; running the main job: chat with SmolLM2-135M-Instruct on CPU\n"
           "    (`tq --help` lists every command; `tq chat` talks with the model yourself)\n\n");
    if (!exists(model)) {
        if (!root[0]) {
            fprintf(stderr, "tq: the default model %s is missing and scripts/get-model.sh is not "
                            "here; run `tq` from the repository root, or fetch the model with "
                            "scripts/get-model.sh smollm2\n", GEN_DEFAULT_MODEL);
            return 1;
        }
        printf("tq: first run: fetching the model (about 100 MB, once) with "
               "scripts/get-model.sh smollm2 ...\n");
        cli_flush();
        snprintf(shell, sizeof(shell), "cd '%s' && sh scripts/get-model.sh smollm2", root);
        rc = system(shell);
        if (rc != 0 || !exists(model)) {
            fprintf(stderr, "tq: fetching the model failed (exit %d); see the messages above, or "
                            "put the file at %s\n", rc, model);
            return 1;
        }
    }
    gen_args_default(&a);
    a.model = model;
    a.ctx = 2048;
    a.gen.max_new_tokens = 160;
    if ((rc = gen_open(cmd, &a, &g)))
        return rc;

    tq_chat_msg msg = {"user", default_question};
    char prompt[4096];
    size_t n_prompt = 0;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    tq_gen_stats st;
    tq_status s =
        tq_chat_render(g.tok, TQ_CHAT_AUTO, &msg, 1, 1, prompt, sizeof(prompt), &n_prompt);
    if (s) {
        rc = cli_error(cmd, s, "cannot apply the chat template");
        goto out;
    }
    if ((rc = gen_encode(cmd, &g, prompt, 1, 0, &ids, &n_ids)))
        goto out;
    printf("model:  %s\n        %s, %d layers, weights %s (%s kernel), KV cache %s, %d threads\n",
           model, g.info.arch_name, g.info.n_layers,
           g.info.native ? "native" : tq_dtype_name(g.info.weight_type),
           g.info.native ? g.info.native_kernels : g.info.kernel ? g.info.kernel : "?", a.kv,
           g.info.n_threads);
    printf("sampling: temperature %.2f, top-k %d, top-p %.2f, min-p %.2f, seed %ld\n\n",
           (double)a.gen.sampling.temperature, a.gen.sampling.top_k,
           (double)a.gen.sampling.top_p, (double)a.gen.sampling.min_p, a.seed);
    printf("user:      %s\nassistant: ", default_question);
    cli_flush();
    s = tq_generator_run(g.gen, ids, n_ids, gen_print_cb, NULL, &st);
    printf("\n\n");
    if (s) {
        rc = cli_error(cmd, s, "generation failed");
        goto out;
    }
    printf("prompt %lld tokens at %.1f tok/s; %lld tokens generated at %.1f tok/s\n",
           (long long)st.n_prompt, st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0.0,
           (long long)st.n_gen, st.decode_s > 0 ? st.n_gen / st.decode_s : 0.0);
    if ((rc = kv_compare(cmd, &g, &a, ids, n_ids))) /* the unquantized KV side by side */
        goto out;
    printf("next: tq chat | tq generate -p 'Once upon a time' | tq bench | tq --help\n");
    rc = 0;
out:
    free(ids);
    gen_close(&g);
    return rc;
}
