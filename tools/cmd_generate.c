/* cmd_generate.c -- `tq generate`: complete a prompt with a model, streaming the text; plus the
 * helpers `tq chat`, `tq bench` and the default job share (cmd_generate.h). */
#include <errno.h>
#include <time.h>
#include <unistd.h>

#include "cmd_generate.h"
#include "env_opts.h"
#include "model_opts.h"

void gen_args_default(gen_args *a)
{
    memset(a, 0, sizeof(*a));
    a->model = GEN_DEFAULT_MODEL;
    a->threads = 0;
    a->weights = TQ_DTYPE_BF16;
    a->kv = GEN_DEFAULT_KV;
    a->ctx = 4096;
    tq_gen_opts_default(&a->gen);
    a->gen.sampling.temperature = 0.7f;
    a->gen.sampling.top_k = 40;
    a->gen.sampling.top_p = 0.9f;
    a->gen.sampling.min_p = 0.05f;
    a->gen.sampling.repeat_penalty = 1.1f;
    a->gen.sampling.repeat_last_n = 64;
    a->seed = 42;
    a->gen.max_new_tokens = 256;
}

const char *gen_common_help(void)
{
    return "model and engine:\n"
           "  -m, --model PATH      GGUF file or Hugging Face directory\n"
           "                        (default " GEN_DEFAULT_MODEL ";\n"
           "                        get it with scripts/get-model.sh smollm2)\n"
           "  -t, --threads N       CPU threads, 0..256 (default 0 = every core; more than the\n"
           "                        online CPUs is allowed with a warning)\n"
           "  --weights MODE        native (default for quantized GGUF: block formats kept in\n"
           "                        memory, int8 activations), native-f32 (f32 activations),\n"
           "                        or bf16 (default otherwise), f16, f32: dequantized at load\n"
           "  --kv SCHEME           KV cache: " GEN_DEFAULT_KV " (default), bf16, f32, f16, kv8,\n"
           "                        kv4, turbo[:kXvY], rot:..., see README \"KV schemes\"\n"
           "  -c, --ctx N           context length in tokens, 0..16777216 (default 4096;\n"
           "                        0 = the model's own)\n"
           "sampling (temperature 0 = greedy; a filter's neutral value switches it off):\n"
           "  --temp T              temperature, 0..1000 (default 0.7)\n"
           "  --top-k K             keep the K most likely tokens, K >= 0 (default 40; 0 = off)\n"
           "  --top-p P             keep the smallest set with probability mass P, 0 < P <= 1\n"
           "                        (default 0.9; 1 = off)\n"
           "  --min-p P             drop tokens below P x the top probability, 0 <= P < 1\n"
           "                        (default 0.05; 0 = off)\n"
           "  --repeat-penalty R    penalise the last --repeat-last-n tokens, 0 < R <= 1000\n"
           "                        (default 1.1; 1 = off)\n"
           "  --repeat-last-n N     penalty window, 0..16777216 (default 64; 0 = off)\n"
           "  --seed S              random seed, 0..2^63-1 (default 42; -1 = from the clock,\n"
           "                        printed)\n"
           "  --greedy              same as --temp 0\n"
           "stopping:\n"
           "  -n, --max-tokens N    at most N new tokens, -1..2147483647 (default 256; -1 or 0 =\n"
           "                        until EOS or the context is full)\n"
           "  --stop TEXT           stop when TEXT appears (repeatable, up to 16; not printed)\n"
           "  --ignore-eos          keep going past end-of-sequence tokens\n"
           "  --show-special        print special tokens such as <|im_end|>\n"
           "  -q, --quiet           no statistics line on stderr\n";
}

static int need(const char *cmd, int argc, char **argv, int i)
{
    if (i + 1 >= argc) {
        fprintf(stderr, "tq %s: %s needs a value (see tq %s --help)\n", cmd, argv[i], cmd);
        return -1;
    }
    return 0;
}

int gen_parse_common(const char *cmd, gen_args *a, int argc, char **argv, int *ip)
{
    const int i = *ip;
    const char *f = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    tq_sampler_params *sp = &a->gen.sampling;

    /* a flag with a value: parse it (range-checked, cli_args.h), consume it */
#define TAKE(parse)                                                                            \
    do {                                                                                       \
        if (parse)                                                                             \
            return -1;                                                                         \
        *ip = i + 1;                                                                           \
        return 1;                                                                              \
    } while (0)

    if (!strcmp(f, "-m") || !strcmp(f, "--model")) {
        if (need(cmd, argc, argv, i))
            return -1;
        a->model = argv[i + 1];
        *ip = i + 1;
        return 1;
    }
    if (!strcmp(f, "--kv")) {
        if (need(cmd, argc, argv, i))
            return -1;
        a->kv = argv[i + 1];
        *ip = i + 1;
        return 1;
    }
    if (!strcmp(f, "--weights")) {
        if (need(cmd, argc, argv, i))
            return -1;
        tq_model_opts w;
        tq_model_opts_default(&w);
        if (cli_weights(cmd, argv[i + 1], &w))
            return -1;
        a->weights = w.weight_type;
        a->weight_store = w.weight_store;
        a->native_f32_act = w.native_f32_act;
        *ip = i + 1;
        return 1;
    }
    if (!strcmp(f, "-t") || !strcmp(f, "--threads"))
        TAKE(cli_threads(cmd, f, v, 0, &a->threads));
    if (!strcmp(f, "-c") || !strcmp(f, "--ctx"))
        TAKE(cli_long(cmd, f, v, 0, GEN_MAX_CTX, &a->ctx));
    if (!strcmp(f, "-n") || !strcmp(f, "--max-tokens"))
        TAKE(cli_i64(cmd, f, v, -1, INT32_MAX, &a->gen.max_new_tokens));
    if (!strcmp(f, "--top-k"))
        TAKE(cli_int(cmd, f, v, 0, INT32_MAX, &sp->top_k));
    if (!strcmp(f, "--repeat-last-n"))
        TAKE(cli_int(cmd, f, v, 0, GEN_MAX_CTX, &sp->repeat_last_n));
    if (!strcmp(f, "--seed"))
        TAKE(cli_long(cmd, f, v, -1, INT64_MAX, &a->seed));
    if (!strcmp(f, "--temp") || !strcmp(f, "--temperature"))
        TAKE(cli_float(cmd, f, v, 0, 1000, 0, &sp->temperature));
    if (!strcmp(f, "--top-p"))
        TAKE(cli_float(cmd, f, v, 0, 1, CLI_OPEN_LO, &sp->top_p));
    if (!strcmp(f, "--min-p"))
        TAKE(cli_float(cmd, f, v, 0, 1, CLI_OPEN_HI, &sp->min_p));
    if (!strcmp(f, "--repeat-penalty"))
        TAKE(cli_float(cmd, f, v, 0, 1000, CLI_OPEN_LO, &sp->repeat_penalty));
    if (!strcmp(f, "--greedy")) {
        sp->temperature = 0.0f;
        return 1;
    }
    if (!strcmp(f, "--stop")) {
        if (need(cmd, argc, argv, i))
            return -1;
        if (a->gen.n_stop >= 16) {
            fprintf(stderr, "tq %s: at most 16 --stop strings\n", cmd);
            return -1;
        }
        if (!argv[i + 1][0]) {
            fprintf(stderr, "tq %s: --stop needs a non-empty string\n", cmd);
            return -1;
        }
        a->stop[a->gen.n_stop++] = argv[i + 1];
        *ip = i + 1;
        return 1;
    }
    if (!strcmp(f, "--ignore-eos")) {
        a->gen.ignore_eos = 1;
        return 1;
    }
    if (!strcmp(f, "--show-special")) {
        a->gen.show_special = 1;
        return 1;
    }
    if (!strcmp(f, "-q") || !strcmp(f, "--quiet")) {
        a->quiet = 1;
        return 1;
    }
    return 0;
#undef TAKE
}

int gen_open(const char *cmd, gen_args *a, gen_ctx *g)
{
    tq_model_opts mo;
    tq_session_opts so;
    tq_status st;

    memset(g, 0, sizeof(*g));
    if (a->seed < 0) {
        a->seed = (long)(time(NULL) ^ (getpid() << 16)) & 0x7fffffff;
        fprintf(stderr, "tq %s: seed %ld (rerun with --seed %ld)\n", cmd, a->seed, a->seed);
    }
    a->gen.sampling.seed = (uint64_t)a->seed;
    a->gen.stop = a->stop;
    if (access(a->model, R_OK) != 0) {
        fprintf(stderr, "tq %s: cannot read model '%s': %s%s\n", cmd, a->model, strerror(errno),
                !strcmp(a->model, GEN_DEFAULT_MODEL)
                    ? " (fetch it with: scripts/get-model.sh smollm2, or run `tq` once)"
                    : " (give a GGUF file or a Hugging Face directory with -m)");
        return 1;
    }
    tq_model_opts_default(&mo);
    cli_model_env(&mo);
    mo.weight_type = a->weights;
    mo.weight_store = a->weight_store;
    mo.native_f32_act = a->native_f32_act;
    mo.n_threads = a->threads;
    if ((st = tq_model_load(a->model, &mo, &g->model)))
        return cli_error(cmd, st, "cannot load model '%s'", a->model);
    tq_model_get_info(g->model, &g->info);
    if ((st = tq_tokenizer_load(a->model, &g->tok))) {
        cli_error(cmd, st, "cannot load the tokenizer of '%s'", a->model);
        goto fail;
    }
    tq_session_opts_default(&so);
    cli_env_session(&so);
    if ((st = tq_kv_scheme_parse(a->kv, &so.kv))) {
        cli_error(cmd, st, "--kv '%s'", a->kv);
        fprintf(stderr, "%s\n", tq_kv_schemes_help());
        goto fail;
    }
    if (a->ctx > g->info.max_ctx && g->info.max_ctx > 0) {
        fprintf(stderr, "tq %s: --ctx %ld is more than the model's context (%d); using %d\n", cmd,
                a->ctx, g->info.max_ctx, g->info.max_ctx);
        a->ctx = g->info.max_ctx;
    }
    so.n_ctx = (int)a->ctx;
    if (a->cuda) { /* the GPU forward (tq_cuda_session) and the device greedy sampler */
        const int64_t n_ctx = a->ctx > 0 ? a->ctx : g->info.max_ctx > 0 ? g->info.max_ctx : 4096;
        if ((st = tq_cuda_session_create(g->model, so.kv, n_ctx, &g->cuda))) {
            cli_error(cmd, st, "cannot create a GPU session (kv %s, ctx %lld)", a->kv,
                      (long long)n_ctx);
            goto fail;
        }
        st = tq_generator_create_cuda(g->model, g->cuda, g->tok, &a->gen, &g->gen);
    } else if ((st = tq_session_create(g->model, &so, &g->session))) {
        cli_error(cmd, st, "cannot create a session (kv %s, ctx %ld)", a->kv, a->ctx);
        goto fail;
    } else {
        st = tq_generator_create(g->model, g->session, g->tok, &a->gen, &g->gen);
    }
    if (st) {
        cli_error(cmd, st, "bad generation settings");
        goto fail;
    }
    return 0;
fail:
    gen_close(g);
    return st == TQ_E_ARG ? 2 : 1;
}

void gen_close(gen_ctx *g)
{
    tq_generator_free(g->gen);
    tq_session_free(g->session);
    tq_cuda_session_free(g->cuda);
    tq_tokenizer_free(g->tok);
    tq_model_free(g->model);
    memset(g, 0, sizeof(*g));
}

int gen_encode(const char *cmd, gen_ctx *g, const char *text, int special, unsigned flags,
               int32_t **ids, int64_t *n)
{
    const size_t len = strlen(text);
    const int64_t cap = tq_tokenizer_encode_bound(len);
    tq_status st;

    *ids = malloc((size_t)cap * sizeof(int32_t));
    if (!*ids)
        return cli_error(cmd, TQ_E_NOMEM, "out of memory for a prompt of %zu bytes", len);
    if (special)
        flags |= TQ_TOK_PARSE_SPECIAL;
    if ((st = tq_tokenizer_encode(g->tok, text, len, flags, *ids, cap, n))) {
        free(*ids);
        *ids = NULL;
        return cli_error(cmd, st, "cannot tokenize the prompt");
    }
    return 0;
}

int gen_print_cb(void *user, int32_t token, const char *text, size_t len)
{
    (void)user;
    (void)token;
    errno = 0;
    if (len && fwrite(text, 1, len, stdout) != len) {
        cli_stdout_error(errno);
        return 1; /* stop generating: tq.c reports the write error and exits 1 */
    }
    return cli_flush();
}

void gen_print_stats(const tq_gen_stats *st, int64_t n_cached)
{
    static const char *why[] = {"max tokens", "end of sequence", "stop string", "context full",
                                "stopped"};
    char cached[64] = "";
    if (n_cached > 0)
        snprintf(cached, sizeof(cached), " (%lld from the prompt cache)", (long long)n_cached);
    fprintf(stderr, "[prompt %lld tokens%s, %.1f tok/s | generated %lld tokens, %.1f tok/s | "
                    "stop: %s]\n",
            (long long)(st->n_prompt + n_cached), cached,
            st->prefill_s > 0 ? st->n_prompt / st->prefill_s : 0.0, (long long)st->n_gen,
            st->decode_s > 0 ? st->n_gen / st->decode_s : 0.0,
            (unsigned)st->stop < 5 ? why[st->stop] : "?");
}

static char *read_file(const char *cmd, const char *path)
{
    FILE *f = strcmp(path, "-") ? fopen(path, "rb") : stdin;
    size_t cap = 4096, n = 0;
    char *buf = NULL;
    if (!f) {
        fprintf(stderr, "tq %s: cannot open prompt file '%s': %s\n", cmd, path, strerror(errno));
        return NULL;
    }
    buf = malloc(cap);
    while (buf) {
        size_t r = fread(buf + n, 1, cap - n - 1, f);
        n += r;
        if (n + 1 < cap)
            break;
        char *nb = realloc(buf, cap * 2);
        if (!nb) {
            free(buf);
            buf = NULL;
            break;
        }
        buf = nb;
        cap *= 2;
    }
    const int bad = ferror(f);
    if (f != stdin)
        fclose(f);
    if (buf && bad) {
        fprintf(stderr, "tq %s: cannot read prompt file '%s'\n", cmd, path);
        free(buf);
        return NULL;
    }
    if (buf)
        buf[n] = 0;
    else
        fprintf(stderr, "tq %s: out of memory reading '%s'\n", cmd, path);
    return buf;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tq generate [-m MODEL] (-p PROMPT | -f FILE) [options]\n\n"
            "Continue a prompt with a language model, streaming the text to stdout as it is made.\n"
            "Statistics (prompt and generation speed, why it stopped) go to stderr.\n\n"
            "prompt:\n"
            "  -p, --prompt TEXT     the prompt\n"
            "  -f, --file PATH       read the prompt from a file ('-' = stdin)\n"
            "  --chat                wrap the prompt as a user message in the model's chat template\n"
            "                        (for instruct models; stops at the end of the reply)\n"
            "  --system TEXT         system message for --chat (default: the template's own)\n"
            "  --raw                 do not parse special tokens like <|im_start|> in the prompt\n"
            "  --echo                print the prompt before the continuation\n"
            "  --load-prompt-cache F restore the KV cache saved for a prefix of this prompt\n"
            "  --save-prompt-cache F save the prompt's KV cache to F (same --kv to reuse it)\n"
            "GPU:\n"
            "  --cuda                run the model on the GPU (the GPU forward; --kv default bf16,\n"
            "                        GPU schemes bf16, kv8, turbo[:kXvY]); greedy sampling picks\n"
            "                        the token on the GPU (only its id is copied back)\n"
            "  --host-sampler        with --cuda: copy the logits back and sample on the CPU also\n"
            "                        when greedy (for comparisons)\n"
            "%s\n"
            "examples:\n"
            "  tq generate -p 'The capital of France is' -n 20 --greedy\n"
            "  tq generate --chat -p 'Write a haiku about the sea.'\n"
            "  tq generate -m models/SmolLM2-135M-Instruct.F16.gguf --weights f16 -f story.txt\n",
            gen_common_help());
}

int cmd_generate(int argc, char **argv)
{
    const char *cmd = "generate";
    gen_args a;
    gen_ctx g;
    const char *prompt = NULL, *file = NULL, *system = NULL;
    const char *save_pc = NULL, *load_pc = NULL; /* --save/--load-prompt-cache (prompt_cache.c) */
    int chat = 0, raw = 0, echo = 0, rc;
    char *text = NULL, *rendered = NULL;
    int32_t *ids = NULL;
    int64_t n = 0;
    tq_gen_stats st;
    tq_status s;

    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    gen_args_default(&a);
    a.kv = NULL; /* given or not: the default depends on --cuda */
    for (int i = 1; i < argc; i++) {
        int r = gen_parse_common(cmd, &a, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if ((!strcmp(argv[i], "-p") || !strcmp(argv[i], "--prompt")) && i + 1 < argc)
            prompt = argv[++i];
        else if ((!strcmp(argv[i], "-f") || !strcmp(argv[i], "--file")) && i + 1 < argc)
            file = argv[++i];
        else if (!strcmp(argv[i], "--system") && i + 1 < argc)
            system = argv[++i];
        else if (!strcmp(argv[i], "--chat"))
            chat = 1;
        else if (!strcmp(argv[i], "--raw"))
            raw = 1;
        else if (!strcmp(argv[i], "--echo"))
            echo = 1;
        else if (!strcmp(argv[i], "--save-prompt-cache") && i + 1 < argc)
            save_pc = argv[++i];
        else if (!strcmp(argv[i], "--load-prompt-cache") && i + 1 < argc)
            load_pc = argv[++i];
        else if (!strcmp(argv[i], "--cuda"))
            a.cuda = 1;
        else if (!strcmp(argv[i], "--host-sampler"))
            a.gen.host_sampler = 1;
        else {
            fprintf(stderr, "tq %s: unknown or incomplete option '%s' (see tq %s --help)\n", cmd,
                    argv[i], cmd);
            return 2;
        }
    }
    if (!a.kv)
        a.kv = a.cuda ? "bf16" : GEN_DEFAULT_KV;
    if (a.cuda && (load_pc || save_pc)) {
        fprintf(stderr, "tq %s: --cuda does not take a prompt cache (--load/--save-prompt-cache)\n",
                cmd);
        return 2;
    }
    if (a.gen.host_sampler && !a.cuda) {
        fprintf(stderr, "tq %s: --host-sampler goes with --cuda\n", cmd);
        return 2;
    }
    if (!prompt == !file) {
        fprintf(stderr, "tq %s: give the prompt with -p TEXT or -f FILE (one of them)\n", cmd);
        return 2;
    }
    if (cli_not_dir(cmd, "-f", file) || cli_not_dir(cmd, "--load-prompt-cache", load_pc) ||
        cli_not_dir(cmd, "--save-prompt-cache", save_pc))
        return 1;
    if (file && !(text = read_file(cmd, file)))
        return 1;
    if ((rc = gen_open(cmd, &a, &g))) {
        free(text);
        return rc;
    }
    const char *ptext = text ? text : prompt;
    if (chat) {
        tq_chat_msg msgs[2];
        int nm = 0;
        size_t need_n = 0, cap = strlen(ptext) + (system ? strlen(system) : 0) + 4096;
        if (system)
            msgs[nm++] = (tq_chat_msg){"system", system};
        msgs[nm++] = (tq_chat_msg){"user", ptext};
        rendered = malloc(cap);
        s = rendered ? tq_chat_render(g.tok, TQ_CHAT_AUTO, msgs, nm, 1, rendered, cap, &need_n)
                     : TQ_E_NOMEM;
        if (s) {
            rc = cli_error(cmd, s, "cannot apply the chat template of '%s' (--chat)", a.model);
            goto out;
        }
        ptext = rendered;
    }
    if ((rc = gen_encode(cmd, &g, ptext, !raw, chat ? 0u : (unsigned)TQ_TOK_ADD_BOS_AUTO, &ids,
                         &n)))
        goto out;
    if (n == 0) {
        rc = 2;
        fprintf(stderr, "tq %s: the prompt is empty\n", cmd);
        goto out;
    }
    if (echo) {
        fputs(ptext, stdout);
        cli_flush();
    }
    int64_t skip = 0, n_eval = 0; /* prompt tokens in the cache, of them evaluated for --save */
    double eval_s = 0;
    if (!a.cuda &&
        (rc = prompt_cache(cmd, g.session, load_pc, save_pc, ids, n, &skip, &n_eval, &eval_s)))
        goto out;
    /* the cached part of the prompt enters the repetition penalty as in a never-cached run */
    if ((s = tq_generator_history(g.gen, ids, skip)) == TQ_OK)
        s = tq_generator_run(g.gen, ids + skip, n - skip, gen_print_cb, NULL, &st);
    if (s) {
        cli_flush();
        rc = cli_error(cmd, s, "cannot generate");
        if (s == TQ_E_OVERFLOW)
            fprintf(stderr, "tq %s: the context holds %lld tokens (--ctx; the model allows %d)\n",
                    cmd, (long long)(g.cuda ? tq_cuda_session_n_ctx(g.cuda)
                                                    : tq_session_n_ctx(g.session)),
                    g.info.max_ctx);
        goto out;
    }
    printf("\n");
    cli_flush();
    st.n_prompt += n_eval; /* the part of the prompt evaluated before the save */
    st.prefill_s += eval_s;
    if (!a.quiet)
        gen_print_stats(&st, skip - n_eval);
    rc = 0;
out:
    free(ids);
    free(rendered);
    free(text);
    gen_close(&g);
    return rc;
}
