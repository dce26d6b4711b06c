/* test_gen.c -- the generation loop on the tiny random Llama of tests/data/tiny/llama (vocab 256,
 * EOS id 2) with a byte-level tokenizer built here (token i = byte i), so that random tokens are
 * random bytes: invalid and split UTF-8 included.
 * Checked: greedy tokens equal the transformers reference (ref.txt) with ignore_eos; EOS stops a
 * run and is not streamed; the streamed text always equals the tokenizer's decode of the streamed
 * tokens (nothing lost or duplicated by the UTF-8 hold-back); a stop string cuts the text exactly
 * at its first occurrence and is never streamed, not even in part; max_new_tokens; a full context
 * stops generation (not an error); prompts that do not fit and bad ids are refused with nothing
 * evaluated; the callback can stop a run; the same seed replays a sampled run; no allocation
 * while generating. */
#include "t.h"
#include "turboquant.h"

#define MODEL_DIR "tests/data/tiny/llama"

#include "byte_tokenizer.h"

typedef struct capture {
    char text[8192];
    size_t n_text;
    int32_t toks[512];
    int n_toks;
    int stop_after; /* return 1 after this many tokens (0 = never) */
    size_t stop_pos; /* bytes that may be streamed (SIZE_MAX = any) */
    int overrun;     /* streamed past stop_pos */
} capture;

static int cap_fn(void *user, int32_t token, const char *text, size_t len)
{
    capture *c = user;
    if (token >= 0 && c->n_toks < 512)
        c->toks[c->n_toks++] = token;
    if (c->n_text + len <= sizeof(c->text)) {
        memcpy(c->text + c->n_text, text, len);
        c->n_text += len;
    }
    if (c->n_text > c->stop_pos)
        c->overrun = 1;
    return c->stop_after && c->n_toks >= c->stop_after;
}

static void cap_init(capture *c)
{
    memset(c, 0, sizeof(*c));
    c->stop_pos = (size_t)-1;
}

/* streamed text == decode(streamed tokens) */
static void check_text(tq_tokenizer *tok, const capture *c, int n_tokens, const char *what)
{
    char dec[8192];
    size_t n = 0;
    tq_tokenizer_decode(tok, c->toks, n_tokens, TQ_TOK_SKIP_SPECIAL, dec, sizeof(dec), &n);
    CHECK(n == c->n_text && !memcmp(dec, c->text, n), "%s: streamed %zu bytes, decode gives %zu",
          what, c->n_text, n);
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_gen");
    FILE *rf = fopen(MODEL_DIR "/ref.txt", "r");
    if (!rf)
        return t_skip(MODEL_DIR " not found (run from the repository root)");
    int32_t prompt[64], ref[64];
    int n_prompt = 0, n_ref = 0;
    char word[32];
    int mode = 0, count_next = 0;
    while (fscanf(rf, "%31s", word) == 1) { /* "tokens N id..." then "greedy N id..." */
        if (!strcmp(word, "tokens") || !strcmp(word, "greedy")) {
            mode = word[0] == 't' ? 1 : 2;
            count_next = 1;
        } else if (count_next)
            count_next = 0;
        else if (mode == 1 && n_prompt < 64)
            prompt[n_prompt++] = atoi(word);
        else if (mode == 2 && n_ref < 64)
            ref[n_ref++] = atoi(word);
    }
    fclose(rf);
    CHECK(n_prompt > 8 && n_ref > 8, "ref.txt: %d prompt, %d greedy tokens", n_prompt, n_ref);

    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = TQ_DTYPE_F32;
    mo.n_threads = 1;
    tq_model *m = NULL;
    tq_status st = tq_model_load(MODEL_DIR, &mo, &m);
    CHECK(st == TQ_OK, "load: %s", tq_last_error());
    tq_tokenizer *tok = byte_tokenizer();
    if (!m || !tok)
        return t_done();
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = 128;
    tq_session *s = NULL;
    CHECK(tq_session_create(m, &so, &s) == TQ_OK, "session: %s", tq_last_error());

    tq_gen_opts go;
    tq_gen_opts_default(&go);
    go.ignore_eos = 1;
    go.max_new_tokens = 60;
    tq_generator *g = NULL;
    CHECK(tq_generator_create(m, s, tok, &go, &g) == TQ_OK, "generator: %s", tq_last_error());
    if (!s || !g)
        return t_done();

    /* 1. greedy = transformers' greedy; text = decode(tokens); no allocation while generating */
    capture full;
    cap_init(&full);
    tq_gen_stats gs;
    uint64_t a0 = tq_alloc_count();
    st = tq_generator_run(g, prompt, n_prompt, cap_fn, &full, &gs);
    CHECK(tq_alloc_count() == a0, "generation allocated %llu times",
          (unsigned long long)(tq_alloc_count() - a0));
    CHECK(st == TQ_OK, "run: %s", tq_last_error());
    CHECK(gs.n_gen == 60 && gs.stop == TQ_GEN_STOP_LENGTH && full.n_toks == 60,
          "max_new_tokens: n_gen %lld, stop %d, streamed %d", (long long)gs.n_gen, gs.stop,
          full.n_toks);
    CHECK(gs.n_prompt == n_prompt && gs.n_decode == 59, "stats: prompt %lld decode %lld",
          (long long)gs.n_prompt, (long long)gs.n_decode);
    CHECK(tq_session_n_past(s) == n_prompt + 59, "n_past %lld", (long long)tq_session_n_past(s));
    CHECK(!memcmp(full.toks, ref, (size_t)n_ref * sizeof(int32_t)),
          "greedy tokens differ from transformers' generate()");
    check_text(tok, &full, full.n_toks, "full run");

    /* 2. EOS (id 2 in config.json) stops the run, is counted but not streamed */
    tq_generator *ge = NULL;
    go.ignore_eos = 0;
    CHECK(tq_generator_create(m, s, tok, &go, &ge) == TQ_OK, "generator (eos)");
    tq_session_reset(s);
    capture ce;
    cap_init(&ce);
    st = tq_generator_run(ge, prompt, n_prompt, cap_fn, &ce, &gs);
    int first_eos = 0;
    while (first_eos < n_ref && ref[first_eos] != 2)
        first_eos++;
    CHECK(st == TQ_OK && gs.stop == TQ_GEN_STOP_EOS && gs.n_gen == first_eos + 1 &&
              ce.n_toks == first_eos,
          "eos: stop %d, n_gen %lld, streamed %d, want EOS after %d tokens", gs.stop,
          (long long)gs.n_gen, ce.n_toks, first_eos);
    check_text(tok, &ce, ce.n_toks, "eos run");
    tq_generator_free(ge);

    /* 3. stop strings: cut at the first occurrence, never streamed, not even partly */
    for (int at = 5; at + 3 < (int)full.n_text && at < 60; at += 9) {
        char stop[4] = {full.text[at], full.text[at + 1], full.text[at + 2], 0};
        if (!stop[0] || !stop[1] || !stop[2])
            continue;
        const char *stops[2] = {"\x01\x01\x01\x01never", stop};
        tq_gen_opts gso = go;
        gso.ignore_eos = 1;
        gso.stop = stops;
        gso.n_stop = 2;
        tq_generator *gst = NULL;
        CHECK(tq_generator_create(m, s, tok, &gso, &gst) == TQ_OK, "generator (stop)");
        const char *first = memmem(full.text, full.n_text, stop, 3);
        const size_t want = (size_t)(first - full.text);
        tq_session_reset(s);
        capture cs;
        cap_init(&cs);
        cs.stop_pos = want;
        st = tq_generator_run(gst, prompt, n_prompt, cap_fn, &cs, &gs);
        CHECK(st == TQ_OK && gs.stop == TQ_GEN_STOP_STRING && gs.stop_index == 1,
              "stop at byte %d: stop %d index %d", at, gs.stop, gs.stop_index);
        CHECK(cs.n_text == want && !memcmp(cs.text, full.text, want) && !cs.overrun,
              "stop at byte %d: streamed %zu bytes, want the %zu before the stop string", at,
              cs.n_text, want);
        tq_generator_free(gst);
    }

    /* 4. the callback stops a run */
    tq_session_reset(s);
    capture cu;
    cap_init(&cu);
    cu.stop_after = 5;
    st = tq_generator_run(g, prompt, n_prompt, cap_fn, &cu, &gs);
    CHECK(st == TQ_OK && gs.stop == TQ_GEN_STOP_USER && gs.n_gen == 5, "user stop: %d, %lld",
          gs.stop, (long long)gs.n_gen);

    /* 5. a full context ends generation without an error */
    tq_session_free(s);
    tq_generator_free(g);
    so.n_ctx = 32;
    CHECK(tq_session_create(m, &so, &s) == TQ_OK, "session ctx 32");
    go.ignore_eos = 1;
    go.max_new_tokens = 0;
    CHECK(tq_generator_create(m, s, tok, &go, &g) == TQ_OK, "generator ctx 32");
    capture cc;
    cap_init(&cc);
    st = tq_generator_run(g, prompt, 25, cap_fn, &cc, &gs);
    CHECK(st == TQ_OK && gs.stop == TQ_GEN_STOP_CTX && tq_session_n_past(s) == 32 &&
              gs.n_gen == 8,
          "context full: st %d stop %d n_past %lld n_gen %lld", st, gs.stop,
          (long long)tq_session_n_past(s), (long long)gs.n_gen);

    /* 6. prompts that do not fit, bad ids, empty prompts: refused, nothing evaluated */
    int32_t longp[40];
    for (int i = 0; i < 40; i++)
        longp[i] = prompt[i % n_prompt];
    tq_session_reset(s);
    st = tq_generator_run(g, longp, 32, cap_fn, &cc, &gs);
    CHECK(st == TQ_E_OVERFLOW && tq_session_n_past(s) == 0, "prompt = ctx: %d", st);
    CHECK(strstr(tq_last_error(), "32") != NULL, "message gives the sizes: %s", tq_last_error());
    st = tq_generator_run(g, longp, 40, cap_fn, &cc, &gs);
    CHECK(st == TQ_E_OVERFLOW && tq_session_n_past(s) == 0, "prompt > ctx: %d", st);
    st = tq_generator_run(g, longp, 31, cap_fn, &cc, &gs);
    CHECK(st == TQ_OK && gs.n_gen == 2 && gs.stop == TQ_GEN_STOP_CTX, "prompt = ctx-1: %d %lld",
          st, (long long)gs.n_gen);
    tq_session_reset(s);
    int32_t bad[3] = {5, 256, 7};
    CHECK(tq_generator_run(g, bad, 3, NULL, NULL, NULL) == TQ_E_ARG && tq_session_n_past(s) == 0,
          "id 256 accepted");
    bad[1] = -1;
    CHECK(tq_generator_run(g, bad, 3, NULL, NULL, NULL) == TQ_E_ARG, "id -1 accepted");
    CHECK(tq_generator_run(g, bad, 0, NULL, NULL, NULL) == TQ_E_ARG, "empty prompt accepted");
    CHECK(tq_generator_run(NULL, bad, 1, NULL, NULL, NULL) == TQ_E_ARG, "NULL generator");
    const char *empty_stop[1] = {""};
    tq_gen_opts bo = go;
    bo.stop = empty_stop;
    bo.n_stop = 1;
    tq_generator *gb = (tq_generator *)&bo;
    CHECK(tq_generator_create(m, s, tok, &bo, &gb) == TQ_E_ARG && gb == NULL, "empty stop string");
    bo = go;
    bo.sampling.top_p = 2.0f;
    CHECK(tq_generator_create(m, s, tok, &bo, &gb) == TQ_E_ARG, "top_p 2 accepted");

    /* 7. sampled generation: the same seed replays the same tokens */
    tq_generator_free(g);
    go.sampling.temperature = 1.0f;
    go.sampling.top_p = 0.95f;
    go.sampling.seed = t_seed;
    go.max_new_tokens = 20;
    CHECK(tq_generator_create(m, s, tok, &go, &g) == TQ_OK, "generator (sampled)");
    capture r1, r2;
    cap_init(&r1);
    cap_init(&r2);
    tq_session_reset(s);
    tq_generator_run(g, prompt, 8, cap_fn, &r1, NULL);
    tq_session_reset(s);
    tq_sampler_reset(tq_generator_sampler(g));
    tq_generator_run(g, prompt, 8, cap_fn, &r2, NULL);
    CHECK(r1.n_toks == 20 && r2.n_toks == 20 && !memcmp(r1.toks, r2.toks, sizeof(r1.toks)),
          "seeded runs differ");
    check_text(tok, &r1, r1.n_toks, "sampled run");

    tq_generator_free(g);
    tq_session_free(s);
    tq_tokenizer_free(tok);
    tq_model_free(m);
    return t_done();
}
