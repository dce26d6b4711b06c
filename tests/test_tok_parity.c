/* test_tok_parity.c -- token ids identical to the reference tokenizers on the WHOLE WikiText-2 raw
 * test file (fed as one string), and decode(encode(text)) == text, plain and streaming.
 * Usage: test_tok_parity qwen3|llama3|smollm2|gemma3. References:
 * tests/data/tokenizer/<name>.wiki.tqid written by scripts/tok_ref/make_ref.py (Hugging Face
 * tokenizers for the tokenizer.json files, llama.cpp for the SmolLM2 and Gemma 3 GGUF files). */
#include <time.h>

#include "t.h"
#include "test_tok_common.h"

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
    const char *name = argc > 1 ? argv[1] : "qwen3";
    char src[256], ref[256];
    size_t n_text = 0;
    char *text;
    int64_t n_ref = 0, n_got = 0, t0;
    int32_t *want, *got;
    tq_tokenizer *tok = NULL;
    tq_status st;

    t_init(argc, argv, "test_tok_parity");
    if (!strcmp(name, "smollm2"))
        snprintf(src, sizeof(src), "%s", tc_path("models/SmolLM2-135M-Instruct.Q4_1.gguf"));
    else if (!strcmp(name, "gemma3"))
        snprintf(src, sizeof(src), "%s", tc_path("models/gemma-3-270m-q4_k_m.gguf"));
    else
        snprintf(src, sizeof(src), "%s",
                 tc_path(!strcmp(name, "qwen3")
                             ? "../shared/assets/tokenizers/qwen3/tokenizer.json"
                             : "../shared/assets/tokenizers/llama3/tokenizer.json"));
    snprintf(ref, sizeof(ref), "%s", tc_path("tests/data/tokenizer/"));
    strncat(ref, name, sizeof(ref) - strlen(ref) - 16);
    strcat(ref, ".wiki.tqid");
    text = tc_read(tc_path("../shared/assets/corpora/wikitext-2-raw-test.txt"), &n_text);
    if (!text)
        return t_skip("../shared/assets/corpora/wikitext-2-raw-test.txt not found");
    {
        FILE *f = fopen(src, "rb");
        if (!f)
            return t_skip("tokenizer source not found (models/ or ../shared/assets missing)");
        fclose(f);
    }
    want = tc_read_ids(ref, &n_ref);
    CHECK(want != NULL, "cannot read reference ids %s", ref);
    if (!want)
        return t_done();

    t0 = now_ms();
    st = tq_tokenizer_load(src, &tok);
    CHECK(st == TQ_OK, "load %s: %s", src, tq_last_error());
    if (st)
        return t_done();
    printf("%s: loaded %s in %lld ms (vocab %d, kind %s)\n", name, src, (long long)(now_ms() - t0),
           tq_tokenizer_vocab_size(tok), tq_tokenizer_kind(tok));

    got = malloc((size_t)tq_tokenizer_encode_bound(n_text) * sizeof(int32_t));
    t0 = now_ms();
    st = tq_tokenizer_encode(tok, text, n_text, 0, got, tq_tokenizer_encode_bound(n_text), &n_got);
    printf("%s: encoded %zu bytes -> %lld tokens in %lld ms (reference %lld tokens)\n", name,
           n_text, (long long)n_got, (long long)(now_ms() - t0), (long long)n_ref);
    CHECK(st == TQ_OK, "encode: %s", tq_last_error());
    CHECK(n_got == n_ref, "token count %lld, reference %lld", (long long)n_got, (long long)n_ref);
    {
        int64_t first = -1, n_diff = 0, m = n_got < n_ref ? n_got : n_ref;
        for (int64_t i = 0; i < m; i++)
            if (got[i] != want[i]) {
                if (first < 0)
                    first = i;
                n_diff++;
            }
        CHECK(first < 0 && n_got == n_ref, "first mismatch at token %lld of %lld (%lld differ)",
              (long long)first, (long long)m, (long long)n_diff);
        if (first >= 0) {
            int64_t a = first > 5 ? first - 5 : 0;
            for (int64_t i = a; i < first + 8 && i < m; i++) {
                size_t l1 = 0, l2 = 0;
                const char *p1 = tq_tokenizer_piece(tok, got[i], &l1);
                const char *p2 = tq_tokenizer_piece(tok, want[i], &l2);
                fprintf(stderr, "  [%lld] got %d '%.*s'  want %d '%.*s'\n", (long long)i, got[i],
                        (int)l1, p1 ? p1 : "", want[i], (int)l2, p2 ? p2 : "");
            }
        }
    }
    /* Round trip: decode(reference ids) == text, and decode(our ids) == text. */
    {
        char *back = malloc(n_text + 16);
        size_t n_back = 0;
        st = tq_tokenizer_decode(tok, want, n_ref, 0, back, n_text + 16, &n_back);
        CHECK(st == TQ_OK && n_back == n_text && !memcmp(back, text, n_text),
              "decode(reference ids) differs from the text (%zu vs %zu bytes)", n_back, n_text);
        st = tq_tokenizer_decode(tok, got, n_got, 0, back, n_text + 16, &n_back);
        CHECK(st == TQ_OK && n_back == n_text && !memcmp(back, text, n_text),
              "decode(encode(text)) differs from the text (%zu vs %zu bytes)", n_back, n_text);
        /* Streaming: concatenated output equals the text; every chunk is whole UTF-8. */
        {
            tq_tok_stream s;
            size_t o = 0, k;
            char chunk[512];
            int bad_chunks = 0;
            tq_tok_stream_init(&s, tok, 0);
            for (int64_t i = 0; i < n_got; i++) {
                st = tq_tok_stream_put(&s, got[i], chunk, sizeof(chunk), &k);
                if (st)
                    break;
                for (size_t j = 0; j < k; j++)
                    if (((unsigned char)chunk[0] & 0xC0) == 0x80)
                        bad_chunks += j == 0;
                memcpy(back + o, chunk, k);
                o += k;
            }
            CHECK(st == TQ_OK, "stream: %s", tq_last_error());
            tq_tok_stream_flush(&s, chunk, sizeof(chunk), &k);
            memcpy(back + o, chunk, k);
            o += k;
            CHECK(o == n_text && !memcmp(back, text, n_text), "stream decode differs (%zu bytes)",
                  o);
            CHECK(bad_chunks == 0, "%d stream chunks start with a continuation byte", bad_chunks);
        }
        free(back);
    }
    free(got);
    free(want);
    free(text);
    tq_tokenizer_free(tok);
    return t_done();
}
