/* cmd_serve.c -- `tq serve`: an OpenAI-compatible HTTP server over the engine's sessions.
 * Options, startup (the HTTP listener first, so /health answers 503 while the model loads),
 * startup refusals, and shutdown on SIGINT/SIGTERM. The HTTP side is tools/serve_http.c, the
 * scheduler tools/serve_sched.c; README "Serving" shows the use. */
#include <errno.h>
#include <signal.h>
#include <time.h>

#include "cmd_generate.h"
#include "env_opts.h"
#include "model_opts.h"
#include "serve.h"

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tq serve -m MODEL [options]\n\n"
            "An OpenAI-compatible HTTP server: POST /v1/chat/completions, /v1/completions\n"
            "(\"stream\": true for server-sent events), GET /v1/models, /health (503 while\n"
            "loading), /metrics (Prometheus), POST /tokenize, /detokenize.\n\n"
            "  -m, --model PATH       GGUF file or Hugging Face directory (required)\n"
            "  --tokenizer PATH       tokenizer.json or GGUF (default: the model's own)\n"
            "  --alias NAME           model id for clients (default: the model's file name)\n"
            "  --chat-format F        chatml | llama3 (default: from the model's template)\n"
            "  --host ADDR            address to bind (default 127.0.0.1: this machine only)\n"
            "  --port N               TCP port (default 8080; 0 = any free one, printed)\n"
            "  --kv SCHEME            KV-cache scheme of every sequence (default " GEN_DEFAULT_KV ";\n"
            "                         bf16 = unquantized)\n"
            "  --ctx N                context per sequence in tokens (default min(model, 4096))\n"
            "  --parallel N           sequences decoded together (default: as many as fit, <= 8)\n"
            "  --kv-mem BYTES         KV-cache memory limit, K/M/G suffixes (default 90%% of\n"
            "                         MemAvailable); --parallel x --ctx above it is refused\n"
            "  -t, --threads N        compute threads (default: every core)\n"
            "  --weights MODE         native (default for quantized GGUF), native-f32, or\n"
            "                         bf16 | f16 | f32 (dequantize at load; default bf16)\n"
            "  --api-key KEY          require 'Authorization: Bearer KEY' (not on /health)\n"
            "  --max-queue N          requests waiting for a slot before 503 (default 64)\n"
            "  --max-body BYTES       request body limit, K/M suffixes (default 1M); above: 413\n"
            "  --timeout S            close a connection idle for S seconds (default 60)\n"
            "  --chunk N              prompt tokens per scheduler step (default 256)\n"
            "  --chunk-decoding N     ... while another sequence is decoding (default 32: a long\n"
            "                         prompt does not hold the decoding sequences for long)\n"
            "  --prompt-cache-dir DIR keep each slot's cache in DIR/slot-N.tqkv (KV snapshot\n"
            "                         format) after a request with a new prompt of at least\n"
            "                         --prompt-cache-min N tokens (default 64); restored at the\n"
            "                         next start (refused by name: other model or --kv)\n\n"
            "Sampling: temperature, top_p, seed, stop, presence_penalty, frequency_penalty\n"
            "(-2..2, over the generated tokens), and the extensions top_k, min_p,\n"
            "repeat_penalty, repeat_last_n, ignore_eos, return_tokens. logprobs (chat: true +\n"
            "top_logprobs 0..20; completions: 0..20) come from the raw logits of each step\n"
            "(log-softmax over the whole vocabulary, before penalties and filters).\n"
            "Not implemented (refused with 400 naming the field): n != 1, best_of != 1,\n"
            "tools/functions, logit_bias, suffix, echo, response_format other than text.\n");
}

static int parse_bytes(const char *s, size_t *out)
{
    char *end = NULL;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || v < 0)
        return -1;
    switch (*end) {
    case 'k': case 'K': v *= 1024; end++; break;
    case 'm': case 'M': v *= 1024 * 1024; end++; break;
    case 'g': case 'G': v *= 1024.0 * 1024 * 1024; end++; break;
    default: break;
    }
    if (*end || v > 1e18)
        return -1;
    *out = (size_t)v;
    return 0;
}

static size_t mem_available(void)
{
    FILE *f = fopen("/proc/meminfo", "r");
    char line[256];
    unsigned long long kb = 0;
    while (f && fgets(line, sizeof(line), f))
        if (sscanf(line, "MemAvailable: %llu kB", &kb) == 1)
            break;
    if (f)
        fclose(f);
    return (size_t)kb * 1024;
}

static int parse_args(srv_opts *o, int argc, char **argv)
{
    const char *cmd = "serve";
    for (int i = 1; i < argc; i++) {
        const char *f = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        long n = 0;
#define INT_ARG(lo, hi)                                                                        \
    do {                                                                                       \
        char *e_ = NULL;                                                                       \
        errno = 0;                                                                             \
        n = v ? strtol(v, &e_, 10) : 0;                                                        \
        if (!v || errno || *e_ || e_ == v || n < (lo) || n > (hi)) {                           \
            fprintf(stderr, "tq %s: %s needs an integer in [%ld, %ld]\n", cmd, f, (long)(lo),  \
                    (long)(hi));                                                               \
            return -1;                                                                         \
        }                                                                                      \
        i++;                                                                                   \
    } while (0)
        if ((!strcmp(f, "-m") || !strcmp(f, "--model")) && v) {
            o->model = v;
            i++;
        } else if (!strcmp(f, "--tokenizer") && v) {
            o->tokenizer = v;
            i++;
        } else if (!strcmp(f, "--alias") && v) {
            o->alias = v;
            i++;
        } else if (!strcmp(f, "--chat-format") && v) {
            o->chat_format = v;
            i++;
        } else if (!strcmp(f, "--host") && v) {
            o->host = v;
            i++;
        } else if (!strcmp(f, "--kv") && v) {
            o->kv = v;
            i++;
        } else if (!strcmp(f, "--api-key") && v) {
            if (!v[0]) {
                fprintf(stderr, "tq %s: --api-key must not be empty\n", cmd);
                return -1;
            }
            o->api_key = v;
            i++;
        } else if (!strcmp(f, "--prompt-cache-dir") && v) {
            o->cache_dir = v;
            i++;
        } else if (!strcmp(f, "--port")) {
            INT_ARG(0, 65535);
            o->port = (int)n;
        } else if (!strcmp(f, "--ctx") || !strcmp(f, "-c")) {
            INT_ARG(16, (1 << 24));
            o->ctx = n;
        } else if (!strcmp(f, "--parallel") || !strcmp(f, "-np")) {
            INT_ARG(1, 256);
            o->parallel = (int)n;
        } else if (!strcmp(f, "--threads") || !strcmp(f, "-t")) {
            INT_ARG(0, 1024);
            o->threads = (int)n;
        } else if (!strcmp(f, "--max-queue")) {
            INT_ARG(0, 100000);
            o->max_queue = (int)n;
        } else if (!strcmp(f, "--timeout")) {
            INT_ARG(1, 86400);
            o->timeout = (int)n;
        } else if (!strcmp(f, "--prompt-cache-min")) {
            INT_ARG(1, 1 << 24);
            o->cache_min = (int)n;
        } else if (!strcmp(f, "--chunk")) {
            INT_ARG(1, 4096);
            o->chunk = (int)n;
        } else if (!strcmp(f, "--chunk-decoding")) {
            INT_ARG(1, 4096);
            o->chunk_busy = (int)n;
        } else if (!strcmp(f, "--weights") && v) {
            if (cli_weights(cmd, v, &o->wopts))
                return -1;
            i++;
        } else if ((!strcmp(f, "--max-body") || !strcmp(f, "--kv-mem")) && v) {
            size_t b = 0;
            if (parse_bytes(v, &b) || b == 0) {
                fprintf(stderr, "tq %s: %s '%s' is not a byte count (e.g. 1M, 2G)\n", cmd, f, v);
                return -1;
            }
            if (!strcmp(f, "--max-body"))
                o->max_body = b;
            else
                o->kv_mem = b;
            i++;
        } else {
            fprintf(stderr, "tq %s: unknown or incomplete option '%s' (see tq serve --help)\n",
                    cmd, f);
            return -1;
        }
#undef INT_ARG
    }
    if (!o->model) {
        fprintf(stderr, "tq %s: -m MODEL is required (see tq serve --help)\n", cmd);
        return -1;
    }
    return 0;
}

/* load the model, tokenizer, chat format; start the scheduler */
static int load(srv *s)
{
    const char *cmd = "serve";
    tq_model_opts mo;
    tq_status st;

    tq_model_opts_default(&mo);
    cli_model_env(&mo);
    mo.weight_type = s->o.wopts.weight_type;
    mo.weight_store = s->o.wopts.weight_store;
    mo.native_f32_act = s->o.wopts.native_f32_act;
    mo.n_threads = s->o.threads;
    if ((st = tq_kv_scheme_parse(s->o.kv, &s->kv))) {
        cli_error(cmd, st, "--kv '%s'", s->o.kv);
        fprintf(stderr, "%s\n", tq_kv_schemes_help());
        return 2;
    }
    if ((st = tq_model_load(s->o.model, &mo, &s->model)))
        return cli_error(cmd, st, "cannot load model '%s'", s->o.model);
    tq_model_get_info(s->model, &s->info);
    const char *tp = s->o.tokenizer ? s->o.tokenizer : s->o.model;
    if ((st = tq_tokenizer_load(tp, &s->tok)))
        return cli_error(cmd, st, "cannot load the tokenizer '%s'", tp);
    if (tq_tokenizer_vocab_size(s->tok) > s->info.vocab_size) {
        fprintf(stderr, "tq serve: the tokenizer has %d tokens, more than the model's %d\n",
                tq_tokenizer_vocab_size(s->tok), s->info.vocab_size);
        return 1;
    }
    if (s->o.chat_format) {
        if ((st = tq_chat_format_parse(s->o.chat_format, &s->chat_fmt)))
            return cli_error(cmd, st, "--chat-format '%s'", s->o.chat_format);
        s->has_chat = 1;
    }
    if (!s->has_chat || s->chat_fmt == TQ_CHAT_AUTO)
        s->has_chat = tq_chat_detect(s->tok, &s->chat_fmt) == TQ_OK;
    if (!s->has_chat)
        fprintf(stderr, "tq serve: the model has no chat template tq knows: /v1/chat/completions "
                        "will refuse requests (give --chat-format chatml|llama3)\n");
    const int32_t ids[3] = {tq_tokenizer_eos(s->tok), tq_tokenizer_eot(s->tok), s->info.eos_id};
    for (int i = 0; i < 3; i++)
        if (ids[i] >= 0)
            s->eos[s->n_eos++] = ids[i];
    long ctx = s->o.ctx;
    const long model_ctx = s->info.max_ctx > 0 ? s->info.max_ctx : 4096;
    if (!ctx)
        ctx = model_ctx < 4096 ? model_ctx : 4096;
    if (ctx > model_ctx) {
        fprintf(stderr, "tq serve: --ctx %ld is more than the model's context (%ld); using %ld\n",
                ctx, model_ctx, model_ctx);
        ctx = model_ctx;
    }
    s->n_ctx = (int)ctx;
    if (!s->o.kv_mem)
        s->o.kv_mem = mem_available() / 10 * 9;
    int rc = srv_sched_start(s);
    if (rc)
        return rc;
    fprintf(stderr, "tq serve: %s (%s, %d layers, vocab %d), kv %s, ctx %d x %d sequences, %d "
                    "threads (%s); chat: %s\n",
            s->model_id, s->info.arch_name, s->info.n_layers, s->info.vocab_size, s->o.kv,
            s->n_ctx, s->n_slots, s->info.n_threads, s->info.kernel,
            s->has_chat ? tq_chat_format_name(s->chat_fmt) : "none");
    return 0;
}

int cmd_serve(int argc, char **argv)
{
    srv s;
    int rc;

    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    memset(&s, 0, sizeof(s));
    s.o.host = "127.0.0.1";
    s.o.port = 8080;
    s.o.kv = GEN_DEFAULT_KV;
    tq_model_opts_default(&s.o.wopts);
    s.o.wopts.weight_type = TQ_DTYPE_BF16;
    s.o.max_queue = 64;
    s.o.timeout = 60;
    s.o.max_body = SRV_DEFAULT_BODY;
    s.o.chunk = 256;
    s.o.chunk_busy = 32;
    s.o.cache_min = 64;
    if (parse_args(&s.o, argc, argv))
        return 2;
    const char *base = strrchr(s.o.model, '/');
    base = base && base[1] ? base + 1 : s.o.model;
    snprintf(s.model_id, sizeof(s.model_id), "%s", s.o.alias ? s.o.alias : base);
    s.created = (long)time(NULL);
    pthread_mutex_init(&s.mu, NULL);
    pthread_cond_init(&s.wake, NULL);

    /* signals: SIGINT/SIGTERM are taken by sigwait() below, blocked in every thread */
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);

    if ((rc = srv_http_start(&s)))
        goto out;
    if ((rc = load(&s)))
        goto out_http;
    pthread_mutex_lock(&s.mu);
    s.ready = 1;
    pthread_mutex_unlock(&s.mu);
    fprintf(stderr, "tq serve: ready\n");
    int sig = 0;
    sigwait(&set, &sig);
    fprintf(stderr, "tq serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
out_http:
    srv_sched_stop(&s); /* ends waiting requests, so their connection threads can finish */
    srv_http_stop(&s);
out:
    srv_sched_stop(&s);
    tq_tokenizer_free(s.tok);
    tq_model_free(s.model);
    pthread_cond_destroy(&s.wake);
    pthread_mutex_destroy(&s.mu);
    return rc;
}
