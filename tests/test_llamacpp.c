/* test_llamacpp.c -- tq against llama.cpp on the same weights (SmolLM2-135M-Instruct, F16 GGUF
 * written by scripts/llamacpp/make_f16_gguf.py). The reference (scripts/llamacpp/ref_logits.py,
 * data in tests/data/llamacpp/, README there) holds, for 24 fixed prompts of 1..1810 tokens,
 * llama.cpp's token ids, final-position top-512 logits + logsumexp, and 48-token greedy
 * continuations. Checked here:
 *   - tq's tokenizer gives llama.cpp's ids for every prompt text;
 *   - final-position top-1 equal on every prompt;
 *   - mean KL(llama.cpp || tq) < 1e-3 (top-512 + one tail bucket: a lower bound of the full KL
 *     that misses only the divergence inside the tail; see ref_logits.py);
 *   - greedy continuations (tq feeding its own tokens) equal for >= 32 tokens on most prompts
 *     (at least 3/4 of them; the count is printed).
 * Arguments: [--model PATH] [--data PATH] [--weights f16|bf16|f32] (defaults: the F16 pair;
 * test_llamacpp_bf16.c builds this file with the BF16 pair as defaults). */
#include <json-c/json.h>

#include "t.h"
#include "turboquant.h"

typedef struct ref_prompt {
    int32_t n_tokens;
    int32_t *tokens;
    double lse;
    int32_t *top_ids;
    float *top_logits;
    int32_t *cont;
} ref_prompt;

static uint32_t rd32(const unsigned char *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

int main(int argc, char **argv)
{
#ifdef LLAMACPP_BF16 /* test_llamacpp_bf16.c: the same on the BF16 pair */
    const char *model_path = "models/SmolLM2-135M-Instruct.BF16.gguf";
    const char *data_path = "tests/data/llamacpp/smollm2_bf16.bin";
    tq_dtype wt = TQ_DTYPE_BF16;
#else
    const char *model_path = "models/SmolLM2-135M-Instruct.F16.gguf";
    const char *data_path = "tests/data/llamacpp/smollm2_f16.bin";
    tq_dtype wt = TQ_DTYPE_F16;
#endif
    const char *prompts_path = "tests/data/llamacpp/prompts.json";
    t_init(argc, argv, "test_llamacpp");
    for (int i = 1; i + 1 < argc; i++) {
        if (!strcmp(argv[i], "--model"))
            model_path = argv[++i];
        else if (!strcmp(argv[i], "--data"))
            data_path = argv[++i];
        else if (!strcmp(argv[i], "--weights")) {
            i++;
            wt = !strcmp(argv[i], "bf16") ? TQ_DTYPE_BF16
                 : !strcmp(argv[i], "f32") ? TQ_DTYPE_F32 : TQ_DTYPE_F16;
        }
    }
    FILE *f = fopen(model_path, "rb");
    if (!f)
        return t_skip("no F16/BF16 model: run scripts/get-model.sh smollm2 && python3 "
                      "scripts/llamacpp/make_f16_gguf.py");
    fclose(f);

    /* ---- reference data ---- */
    f = fopen(data_path, "rb");
    CHECK(f != NULL, "cannot open %s", data_path);
    if (!f)
        return t_done();
    fseek(f, 0, SEEK_END);
    long fsz = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *buf = malloc((size_t)fsz);
    CHECK(buf && fread(buf, 1, (size_t)fsz, f) == (size_t)fsz, "read %s", data_path);
    fclose(f);
    CHECK(fsz > 24 && !memcmp(buf, "TQLC", 4) && rd32(buf + 4) == 1, "%s: bad header", data_path);
    const uint32_t n_prompts = rd32(buf + 8), n_vocab = rd32(buf + 12), top_k = rd32(buf + 16),
                   n_cont = rd32(buf + 20);
    ref_prompt *P = calloc(n_prompts, sizeof(*P));
    size_t off = 24;
    for (uint32_t i = 0; i < n_prompts; i++) {
        ref_prompt *p = &P[i];
        p->n_tokens = (int32_t)rd32(buf + off);
        off += 4;
        p->tokens = (int32_t *)(buf + off);
        off += 4 * (size_t)p->n_tokens;
        memcpy(&p->lse, buf + off, 8);
        off += 8;
        p->top_ids = (int32_t *)(buf + off);
        off += 4 * top_k;
        p->top_logits = (float *)(buf + off);
        off += 4 * top_k;
        p->cont = (int32_t *)(buf + off);
        off += 4 * n_cont;
        CHECK(off <= (size_t)fsz, "%s: truncated at prompt %u", data_path, i);
        if (off > (size_t)fsz)
            return t_done();
    }
    CHECK(off == (size_t)fsz, "%s: %zu trailing bytes", data_path, (size_t)fsz - off);

    /* ---- model ---- */
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.weight_type = wt;
    tq_model *m = NULL;
    tq_status st = tq_model_load(model_path, &mo, &m);
    CHECK(st == TQ_OK, "load %s: %s", model_path, tq_last_error());
    if (st)
        return t_done();
    tq_model_info mi;
    tq_model_get_info(m, &mi);
    CHECK(mi.vocab_size == (int)n_vocab, "vocab %d vs reference %u", mi.vocab_size, n_vocab);
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv); /* the reference ran llama.cpp with an F32 cache */
    so.n_ctx = 2048;
    tq_session *s = NULL;
    st = tq_session_create(m, &so, &s);
    CHECK(st == TQ_OK, "session: %s", tq_last_error());
    if (st)
        return t_done();
    printf("tq: weights %s, kernel %s, %d threads; reference: %u prompts, top-%u, %u-token "
           "greedy continuations\n", tq_dtype_name(mi.weight_type), mi.kernel, mi.n_threads,
           n_prompts, top_k, n_cont);

    /* ---- tokenizer: same ids as llama.cpp for every prompt text ---- */
    tq_tokenizer *tok = NULL;
    json_object *pj = json_object_from_file(prompts_path);
    CHECK(tq_tokenizer_load(model_path, &tok) == TQ_OK, "tokenizer: %s", tq_last_error());
    CHECK(pj && json_object_array_length(pj) == n_prompts, "%s: %u prompts expected",
          prompts_path, n_prompts);
    int tok_same = 0;
    for (uint32_t i = 0; tok && pj && i < n_prompts && i < json_object_array_length(pj); i++) {
        json_object *o = json_object_array_get_idx(pj, i), *t = NULL;
        json_object_object_get_ex(o, "text", &t);
        const char *txt = json_object_get_string(t);
        int64_t n = 0, cap = tq_tokenizer_encode_bound(strlen(txt));
        int32_t *ids = malloc((size_t)cap * sizeof(int32_t));
        tq_tokenizer_encode(tok, txt, strlen(txt), TQ_TOK_PARSE_SPECIAL, ids, cap, &n);
        int same = n == P[i].n_tokens && !memcmp(ids, P[i].tokens, (size_t)n * 4);
        tok_same += same;
        if (!same)
            printf("  tokenizer differs on prompt %u (%lld vs %d tokens)\n", i, (long long)n,
                   P[i].n_tokens);
        free(ids);
    }
    CHECK(tok_same == (int)n_prompts, "tokenizer: %d/%u prompts tokenized like llama.cpp", tok_same,
          n_prompts);

    /* ---- logits and greedy continuations ---- */
    float *lg = malloc(n_vocab * sizeof(float));
    double kl_sum = 0, kl_max = 0;
    int top1_same = 0, cont32 = 0;
    printf("  %-3s %6s %10s %6s %8s\n", "#", "tokens", "KL", "top1", "greedy");
    for (uint32_t i = 0; i < n_prompts; i++) {
        ref_prompt *p = &P[i];
        tq_session_reset(s);
        st = tq_session_eval(s, p->tokens, p->n_tokens, lg);
        CHECK(st == TQ_OK, "prompt %u: eval: %s", i, tq_last_error());
        if (st)
            continue;
        double mx = -INFINITY, z = 0;
        int32_t am = 0;
        for (uint32_t v = 0; v < n_vocab; v++) {
            if (lg[v] > mx) {
                mx = lg[v];
                am = (int32_t)v;
            }
        }
        for (uint32_t v = 0; v < n_vocab; v++)
            z += exp(lg[v] - mx);
        const double lse_q = mx + log(z);
        double kl = 0, pt = 0, qt = 0;
        for (uint32_t k = 0; k < top_k; k++) {
            const double lp = p->top_logits[k] - p->lse, lq = lg[p->top_ids[k]] - lse_q;
            kl += exp(lp) * (lp - lq);
            pt += exp(lp);
            qt += exp(lq);
        }
        const double ptail = 1 - pt, qtail = 1 - qt;
        if (ptail > 1e-12 && qtail > 1e-12)
            kl += ptail * log(ptail / qtail);
        kl_sum += kl;
        kl_max = kl > kl_max ? kl : kl_max;
        top1_same += am == p->top_ids[0];
        CHECK(am == p->top_ids[0], "prompt %u: top-1 %d, llama.cpp %d", i, am, p->top_ids[0]);
        /* greedy: tq feeds its own argmax back */
        uint32_t match = 0;
        int32_t t = am;
        for (uint32_t k = 0; k < n_cont; k++) {
            if (t != p->cont[k])
                break;
            match++;
            if (k + 1 == n_cont || tq_session_eval(s, &t, 1, lg) != TQ_OK)
                break;
            t = 0;
            for (uint32_t v = 1; v < n_vocab; v++)
                if (lg[v] > lg[t])
                    t = (int32_t)v;
        }
        cont32 += match >= 32;
        printf("  %-3u %6d %10.3g %6s %5u/%u\n", i, p->n_tokens, kl, am == p->top_ids[0] ? "same" :
               "DIFF", match, n_cont);
    }
    const double kl_mean = kl_sum / n_prompts;
    printf("summary: top-1 same %d/%u, mean KL(llama.cpp || tq) %.3g (max %.3g), greedy >= 32 "
           "tokens identical on %d/%u prompts, tokenizer same on %d/%u\n", top1_same, n_prompts,
           kl_mean, kl_max, cont32, n_prompts, tok_same, n_prompts);
    CHECK(kl_mean < 1e-3, "mean KL %.3g >= 1e-3", kl_mean);
    CHECK(cont32 * 4 >= (int)n_prompts * 3, "greedy 32-token match on only %d/%u prompts", cont32,
          n_prompts);
    free(lg);
    json_object_put(pj);
    tq_tokenizer_free(tok);
    tq_session_free(s);
    tq_model_free(m);
    free(P);
    free(buf);
    return t_done();
}
