/* test_tok_edge.c -- tokenizer edge cases and bad input.
 * 1. Edge strings (empty, spaces, CRLF, digits, emoji ZWJ sequences, CJK, accents, special tokens
 * in the text, 3000-char words, ...) against tests/data/tokenizer/<name>.edge.txt, written by
 *    scripts/tok_ref/make_ref.py with Hugging Face tokenizers (qwen3, llama3) and llama.cpp
 *    (smollm2, gemma3; only when models/ has them).
 * 2. Chat templates against Jinja2 renderings of the real templates (chat.txt).
 * 3. Facts from the tokenizer files (ids of special tokens), flags, invalid UTF-8 round trips,
 *    streaming decode, overflow handling, no per-token allocation, two threads.
 * 4. A hand-made tokenizer.json whose expected ids are worked out by hand (merge ranks,
 *    ignore_merges, added tokens).
 * 5. Bad tokenizer.json / GGUF input: status code and a message naming the file. */
#include <pthread.h>
#include <unistd.h>

#include "t.h"
#include "test_tok_common.h"

#define QWEN3_JSON "../shared/assets/tokenizers/qwen3/tokenizer.json"
#define LLAMA3_JSON "../shared/assets/tokenizers/llama3/tokenizer.json"
#define SMOLLM2_GGUF "models/SmolLM2-135M-Instruct.Q4_1.gguf"
#define GEMMA3_GGUF "models/gemma-3-270m-q4_k_m.gguf"

static int hexval(int c)
{
    return c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
}

/* unhex() -- decode n hex chars into out; returns bytes written. */
static size_t unhex(const char *h, size_t n, char *out)
{
    for (size_t i = 0; i + 1 < n + 1 && i < n; i += 2)
        out[i / 2] = (char)(hexval(h[i]) << 4 | hexval(h[i + 1]));
    return n / 2;
}

static int64_t encode(const tq_tokenizer *t, const char *s, size_t n, unsigned flags, int32_t *ids)
{
    int64_t got = -1;
    tq_status st = tq_tokenizer_encode(t, s, n, flags, ids, tq_tokenizer_encode_bound(n), &got);
    CHECK(st == TQ_OK, "encode: %s", tq_last_error());
    return got;
}

static int roundtrip(const tq_tokenizer *t, const char *s, size_t n, unsigned flags)
{
    int32_t *ids = malloc((size_t)tq_tokenizer_encode_bound(n) * sizeof(int32_t));
    char *back = malloc(n + 64);
    size_t nb = 0;
    int64_t k = encode(t, s, n, flags, ids);
    tq_status st = tq_tokenizer_decode(t, ids, k, 0, back, n + 64, &nb);
    int ok = st == TQ_OK && nb == n && !memcmp(back, s, n);
    free(ids);
    free(back);
    return ok;
}

static void check_edge_file(const tq_tokenizer *t, const char *name, const char *kind)
{
    char path[256];
    size_t n = 0;
    char *f;
    int lines = 0;
    snprintf(path, sizeof(path), "tests/data/tokenizer/%s.%s.txt", name, kind);
    f = tc_read(tc_path(path), &n);
    CHECK(f != NULL, "cannot read %s", path);
    if (!f)
        return;
    for (char *line = f, *next; line && *line; line = next) {
        char *tab = strchr(line, '\t'), *nl = strchr(line, '\n'), *tab2;
        size_t hex_n, text_n, back_n, dec_n = 0;
        char *text, *back, *dec;
        int32_t want[8192], *got;
        int64_t n_want = 0, n_got;
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = 0;
        if (!tab)
            continue;
        hex_n = (size_t)(tab - line);
        text = malloc(hex_n / 2 + 1);
        text_n = unhex(line, hex_n, text);
        text[text_n] = 0;
        tab2 = strchr(tab + 1, '\t');
        if (tab2)
            *tab2 = 0; /* ids end here */
        for (char *p = tab + 1; *p && n_want < 8192;) {
            char *end;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            want[n_want++] = (int32_t)v;
            p = end;
        }
        CHECK(tab2 != NULL, "%s %s line %d: no decode column", name, kind, lines + 1);
        if (!tab2) {
            free(text);
            continue;
        }
        back = malloc(strlen(tab2 + 1) / 2 + 1);
        back_n = unhex(tab2 + 1, strlen(tab2 + 1), back);
        got = malloc((size_t)tq_tokenizer_encode_bound(text_n) * sizeof(int32_t));
        n_got = encode(t, text, text_n, TQ_TOK_PARSE_SPECIAL, got);
        CHECK(n_got == n_want && !memcmp(got, want, (size_t)n_want * sizeof(int32_t)),
              "%s %s line %d (\"%.40s\"): %lld ids, reference %lld", name, kind, lines + 1, text,
              (long long)n_got, (long long)n_want);
        /* decode equals the reference's decode (the text itself unless NFC changed it) */
        dec = malloc(text_n * 4 + 64);
        CHECK(tq_tokenizer_decode(t, got, n_got, 0, dec, text_n * 4 + 64, &dec_n) == TQ_OK &&
                  dec_n == back_n && !memcmp(dec, back, back_n),
              "%s %s line %d: decode differs from the reference decode", name, kind, lines + 1);
        free(dec);
        free(back);
        free(got);
        free(text);
        lines++;
    }
    CHECK(lines >= 20, "%s: only %d edge cases read", name, lines);
    printf("%s: %d %s cases\n", name, lines, kind);
    free(f);
}

static void check_chats(const tq_tokenizer *t, const char *name)
{
    size_t n = 0;
    char *f = tc_read(tc_path("tests/data/tokenizer/chat.txt"), &n);
    int count = 0;
    CHECK(f != NULL, "cannot read chat.txt");
    if (!f)
        return;
    for (char *line = f, *next; line && *line; line = next) {
        char *nl = strchr(line, '\n'), *col[64];
        int nc = 0;
        next = nl ? nl + 1 : NULL;
        if (nl)
            *nl = 0;
        for (char *p = line; p && nc < 64;) {
            col[nc++] = p;
            p = strchr(p, '\t');
            if (p)
                *p++ = 0;
        }
        if (nc < 4 || strcmp(col[0], name))
            continue;
        {
            int gen = atoi(col[1]), nm = atoi(col[2]);
            tq_chat_msg msgs[16];
            char *buf[16], *want, got[4096];
            size_t want_n, got_n = 0;
            tq_status st;
            CHECK(nm <= 16 && nc == 4 + 2 * nm, "chat.txt: bad line for %s", name);
            if (nm > 16 || nc != 4 + 2 * nm)
                continue;
            for (int i = 0; i < nm; i++) {
                msgs[i].role = col[3 + 2 * i];
                buf[i] = calloc(strlen(col[4 + 2 * i]) / 2 + 1, 1);
                unhex(col[4 + 2 * i], strlen(col[4 + 2 * i]), buf[i]);
                msgs[i].content = buf[i];
            }
            want = calloc(strlen(col[nc - 1]) / 2 + 1, 1);
            want_n = unhex(col[nc - 1], strlen(col[nc - 1]), want);
            st = tq_chat_render(t, TQ_CHAT_AUTO, msgs, nm, gen, got, sizeof(got), &got_n);
            CHECK(st == TQ_OK && got_n == want_n && !memcmp(got, want, want_n),
                  "%s chat %d (gen %d):\n got  [%s]\n want [%s]", name, count, gen, got, want);
            for (int i = 0; i < nm; i++)
                free(buf[i]);
            free(want);
            count++;
        }
    }
    CHECK(count >= 10, "%s: only %d chats", name, count);
    printf("%s: %d chat renderings\n", name, count);
    free(f);
}

/* ---- facts and behaviour on the real Qwen3 / Llama 3 files -------------------------------- */
typedef struct thread_job {
    const tq_tokenizer *t;
    const char *text;
    size_t n;
    int32_t *ids;
    int64_t n_ids;
} thread_job;

static void *thread_encode(void *arg)
{
    thread_job *j = arg;
    tq_tokenizer_encode(j->t, j->text, j->n, 0, j->ids, tq_tokenizer_encode_bound(j->n), &j->n_ids);
    return NULL;
}

static void check_qwen3(const tq_tokenizer *t)
{
    int32_t ids[4096];
    int64_t n;
    size_t len = 0, nb;
    char out[256];
    tq_status st;
    /* ids from qwen3 tokenizer.json / tokenizer_config.json */
    CHECK(tq_tokenizer_vocab_size(t) == 151669, "vocab %d", tq_tokenizer_vocab_size(t));
    CHECK(tq_tokenizer_eos(t) == 151645, "eos %d (<|im_end|> per tokenizer_config)",
          tq_tokenizer_eos(t));
    CHECK(tq_tokenizer_eot(t) == 151645, "eot %d", tq_tokenizer_eot(t));
    CHECK(tq_tokenizer_bos(t) == -1 && !tq_tokenizer_add_bos(t), "qwen3 has no bos");
    CHECK(tq_tokenizer_lookup(t, "Hello", 5) == 9707, "lookup Hello");
    CHECK(tq_tokenizer_lookup(t, "<|im_start|>", 12) == 151644, "lookup <|im_start|>");
    CHECK(tq_tokenizer_is_special(t, 151644) && !tq_tokenizer_is_special(t, 9707), "special");
    CHECK(!tq_tokenizer_is_special(t, 151667), "<think> is an added, non-special token");
    {
        const char *p = tq_tokenizer_piece(t, 9707, &len);
        CHECK(p && len == 5 && !memcmp(p, "Hello", 5), "piece 9707");
        CHECK(tq_tokenizer_piece(t, 151669, &len) == NULL, "piece out of range");
    }
    /* empty text */
    n = encode(t, "", 0, TQ_TOK_PARSE_SPECIAL, ids);
    CHECK(n == 0, "empty text gives %lld tokens", (long long)n);
    /* special tokens parsed only with the flag; non-special added tokens always */
    n = encode(t, "<|im_start|>", 12, 0, ids);
    CHECK(n > 1, "<|im_start|> without PARSE_SPECIAL must be plain text (%lld ids)", (long long)n);
    for (int64_t i = 0; i < n; i++)
        CHECK(ids[i] != 151644, "special id without PARSE_SPECIAL");
    n = encode(t, "<|im_start|>", 12, TQ_TOK_PARSE_SPECIAL, ids);
    CHECK(n == 1 && ids[0] == 151644, "<|im_start|> with PARSE_SPECIAL");
    n = encode(t, "a<think>b", 9, 0, ids);
    CHECK(n == 3 && ids[1] == 151667, "<think> always matched (%lld ids)", (long long)n);
    /* skip special on decode */
    {
        int32_t seq[3] = {151644, 9707, 151645};
        st = tq_tokenizer_decode(t, seq, 3, TQ_TOK_SKIP_SPECIAL, out, sizeof(out), &nb);
        CHECK(st == TQ_OK && nb == 5 && !memcmp(out, "Hello", 5), "skip special");
        st = tq_tokenizer_decode(t, seq, 3, 0, out, sizeof(out), &nb);
        CHECK(st == TQ_OK && nb == 27 && !memcmp(out, "<|im_start|>Hello<|im_end|>", 27),
              "render special");
        st = tq_tokenizer_decode(t, seq, 3, 0, out, 4, &nb);
        CHECK(st == TQ_E_OVERFLOW && nb == 27, "decode overflow reports the size (%zu)", nb);
        seq[1] = 151669;
        st = tq_tokenizer_decode(t, seq, 3, 0, out, sizeof(out), &nb);
        CHECK(st == TQ_E_ARG, "decode of an id out of range");
    }
    /* encode overflow: the count needed comes back */
    st = tq_tokenizer_encode(t, "Hello world", 11, 0, ids, 1, &n);
    CHECK(st == TQ_E_OVERFLOW && n == 2 && ids[0] == 9707, "encode overflow (n=%lld)",
          (long long)n);
    /* invalid UTF-8 survives a round trip exactly */
    {
        static const char *bad[] = {"\xff",
                                    "a\xc3",
                                    "\xe2\x82",
                                    "x\xed\xa0\x80y",
                                    "\xc0\xaf",
                                    "caf\xe9 na\xefve",
                                    "\xf4\x90\x80\x80",
                                    "\x80\x80 \xbf",
                                    "ok \xf0\x9f\x98 cut emoji"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
            CHECK(roundtrip(t, bad[i], strlen(bad[i]), 0), "invalid UTF-8 case %zu", i);
        /* every byte value, and NUL inside the text */
        char all[512];
        for (int i = 0; i < 512; i++)
            all[i] = (char)(i * 7 + (i >> 8));
        CHECK(roundtrip(t, all, sizeof(all), 0), "all byte values");
    }
    /* very long words: no quadratic blow-up, exact round trip */
    {
        size_t big = 1 << 20;
        char *s = malloc(big);
        int64_t t0 = (int64_t)tq_alloc_count();
        struct timespec a, b;
        for (size_t i = 0; i < big; i++)
            s[i] = "abcab"[i % 5];
        clock_gettime(CLOCK_MONOTONIC, &a);
        CHECK(roundtrip(t, s, big, 0), "1 MiB single word");
        clock_gettime(CLOCK_MONOTONIC, &b);
        printf("1 MiB word: encode+decode %.0f ms\n",
               (b.tv_sec - a.tv_sec) * 1e3 + (b.tv_nsec - a.tv_nsec) / 1e6);
        (void)t0;
        free(s);
    }
    /* allocations do not grow with the number of tokens */
    {
        size_t small_n = 1000, big_n = 100000;
        char *s = malloc(big_n);
        int32_t *buf = malloc((size_t)tq_tokenizer_encode_bound(big_n) * sizeof(int32_t));
        uint64_t a0, a1, a2;
        for (size_t i = 0; i < big_n; i++)
            s[i] = "The quick brown fox, 12 jumps!\n"[i % 31];
        a0 = tq_alloc_count();
        tq_tokenizer_encode(t, s, small_n, 0, buf, tq_tokenizer_encode_bound(small_n), &n);
        a1 = tq_alloc_count();
        tq_tokenizer_encode(t, s, big_n, 0, buf, tq_tokenizer_encode_bound(big_n), &n);
        a2 = tq_alloc_count();
        CHECK(a1 - a0 <= 16 && a2 - a1 <= 16,
              "allocations per encode: %llu for 1 KB, %llu for 100 KB (%lld tokens)",
              (unsigned long long)(a1 - a0), (unsigned long long)(a2 - a1), (long long)n);
        /* two threads share the tokenizer */
        {
            thread_job j[2];
            pthread_t th[2];
            for (int k = 0; k < 2; k++) {
                j[k] = (thread_job){
                    t, s, big_n, malloc(sizeof(int32_t) * (size_t)tq_tokenizer_encode_bound(big_n)),
                    0};
                pthread_create(&th[k], NULL, thread_encode, &j[k]);
            }
            for (int k = 0; k < 2; k++)
                pthread_join(th[k], NULL);
            for (int k = 0; k < 2; k++) {
                CHECK(j[k].n_ids == n && !memcmp(j[k].ids, buf, (size_t)n * sizeof(int32_t)),
                      "thread %d result differs", k);
                free(j[k].ids);
            }
        }
        free(buf);
        free(s);
    }
}

static void check_llama3(const tq_tokenizer *t)
{
    int32_t ids[64];
    int64_t n;
    CHECK(tq_tokenizer_vocab_size(t) == 128256, "vocab %d", tq_tokenizer_vocab_size(t));
    CHECK(tq_tokenizer_bos(t) == 128000, "bos %d", tq_tokenizer_bos(t));
    CHECK(tq_tokenizer_eos(t) == 128001, "eos %d", tq_tokenizer_eos(t));
    CHECK(tq_tokenizer_eot(t) == 128009, "eot %d", tq_tokenizer_eot(t));
    /* this tokenizer.json has no TemplateProcessing and tokenizer_config no add_bos_token */
    CHECK(!tq_tokenizer_add_bos(t), "add_bos");
    n = encode(t, "Hi", 2, TQ_TOK_ADD_BOS, ids);
    CHECK(n == 2 && ids[0] == 128000, "ADD_BOS");
    n = encode(t, "Hi", 2, TQ_TOK_ADD_BOS_AUTO, ids);
    CHECK(n == 1, "ADD_BOS_AUTO follows the model (no BOS)");
    /* streaming: an emoji spread over several byte-level tokens comes out whole */
    {
        const char *e = "\xf0\x9f\x98\x80!";
        char out[64], all[64];
        size_t k, o = 0;
        int64_t m = encode(t, e, 5, 0, ids);
        tq_tok_stream s;
        int partial = 0;
        tq_tok_stream_init(&s, t, 0);
        for (int64_t i = 0; i < m; i++) {
            CHECK(tq_tok_stream_put(&s, ids[i], out, sizeof(out), &k) == TQ_OK, "put");
            if (k && k < 4 && (unsigned char)out[0] == 0xf0)
                partial++;
            memcpy(all + o, out, k);
            o += k;
        }
        tq_tok_stream_flush(&s, out, sizeof(out), &k);
        memcpy(all + o, out, k);
        o += k;
        CHECK(m >= 2 && partial == 0 && o == 5 && !memcmp(all, e, 5),
              "stream emoji (%lld tokens, %d partial chunks)", (long long)m, partial);
        /* a truncated character is held, then flushed as is */
        m = encode(t, "\xe6\xbc", 2, 0, ids);
        tq_tok_stream_init(&s, t, 0);
        o = 0;
        for (int64_t i = 0; i < m; i++) {
            tq_tok_stream_put(&s, ids[i], out, sizeof(out), &k);
            o += k;
        }
        CHECK(o == 0, "incomplete character held (%zu bytes out)", o);
        tq_tok_stream_flush(&s, out, sizeof(out), &k);
        CHECK(k == 2 && !memcmp(out, "\xe6\xbc", 2), "flush gives the held bytes");
    }
}

/* ---- hand-made tokenizer.json ------------------------------------------------------------- */
static tq_tokenizer *tiny(const char *merges, int ignore)
{
    char json[2048];
    tq_tokenizer *t = NULL;
    tq_status st;
    snprintf(json, sizeof(json),
             "{\"model\":{\"type\":\"BPE\",\"ignore_merges\":%s,\"vocab\":{\"a\":0,\"b\":1,"
             "\"c\":2,\"ab\":3,\"bc\":4,\"abc\":5,\"\\u0120\":6,\"\\u0120a\":7},\"merges\":[%s]},"
             "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
             "\"use_regex\":true},\"added_tokens\":[{\"id\":8,\"content\":\"<s>\",\"special\":true,"
             "\"lstrip\":false,\"rstrip\":false,\"normalized\":false}]}",
             ignore ? "true" : "false", merges);
    st = tq_tokenizer_from_json_memory(json, strlen(json), "tiny.json", &t);
    CHECK(st == TQ_OK, "tiny.json: %s", tq_last_error());
    return t;
}

static void expect(const tq_tokenizer *t, const char *s, unsigned flags, const int32_t *want,
                   int64_t n_want)
{
    int32_t ids[64];
    int64_t n = t ? encode(t, s, strlen(s), flags, ids) : -1;
    CHECK(n == n_want && !memcmp(ids, want, (size_t)n_want * sizeof(int32_t)),
          "tiny \"%s\": %lld ids (want %lld)", s, (long long)n, (long long)n_want);
}

static void check_tiny(void)
{
    tq_tokenizer *t = tiny("\"a b\",\"ab c\",\"\\u0120 a\",\"b c\"", 0);
    expect(t, "abc", 0, (int32_t[]){5}, 1);       /* a+b (rank 0), then ab+c (rank 1) */
    expect(t, "bc", 0, (int32_t[]){4}, 1);        /* b+c (rank 3) */
    expect(t, "abab", 0, (int32_t[]){3, 3}, 2);   /* two ab */
    expect(t, "ab a", 0, (int32_t[]){3, 7}, 2);   /* pieces "ab", " a" */
    expect(t, "c b", 0, (int32_t[]){2, 6, 1}, 3); /* " b" has no merge */
    expect(t, "a<s>b", TQ_TOK_PARSE_SPECIAL, (int32_t[]){0, 8, 1}, 3);
    expect(t, "a<s>b", 0, (int32_t[]){0, 1}, 2); /* '<' 's' '>' are not in this vocabulary */
    tq_tokenizer_free(t);
    t = tiny("\"b c\",\"a b\",\"ab c\"", 0);   /* b+c now ranks first */
    expect(t, "abc", 0, (int32_t[]){0, 4}, 2); /* a + bc: no rule */
    tq_tokenizer_free(t);
    t = tiny("\"a b\"", 0);
    expect(t, "abc", 0, (int32_t[]){3, 2}, 2);
    tq_tokenizer_free(t);
    t = tiny("\"a b\"", 1); /* ignore_merges: a whole-word vocabulary hit wins */
    expect(t, "abc", 0, (int32_t[]){5}, 1);
    tq_tokenizer_free(t);
}

/* ---- bad input ------------------------------------------------------------------------------ */
static void bad_json(const char *json, tq_status want, const char *what)
{
    tq_tokenizer *t = (tq_tokenizer *)1;
    tq_status st = tq_tokenizer_from_json_memory(json, strlen(json), "bad-tokenizer.json", &t);
    CHECK(st == want, "%s: status %s, want %s (%s)", what, tq_status_str(st), tq_status_str(want),
          tq_last_error());
    if (st == TQ_OK) {
        tq_tokenizer_free(t);
        return;
    }
    CHECK(t == NULL, "%s: *out must be NULL on failure", what);
    CHECK(strstr(tq_last_error(), "bad-tokenizer.json") != NULL, "%s: message '%s' names no file",
          what, tq_last_error());
}

#define V "\"vocab\":{\"a\":0,\"b\":1,\"ab\":2}"
static void check_bad(void)
{
    bad_json("", TQ_E_FORMAT, "empty file");
    bad_json("{\"model\":", TQ_E_FORMAT, "truncated");
    bad_json("[1,2]", TQ_E_FORMAT, "array at top level");
    bad_json("{}", TQ_E_FORMAT, "no model");
    bad_json("{\"model\":{\"type\":\"BPE\",\"merges\":[]}}", TQ_E_FORMAT, "no vocab");
    bad_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":\"0\"},\"merges\":[]}}", TQ_E_FORMAT,
             "string id");
    bad_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":-3},\"merges\":[]}}", TQ_E_FORMAT,
             "negative id");
    bad_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":99999999},\"merges\":[]}}", TQ_E_FORMAT,
             "huge id");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":{}}}", TQ_E_FORMAT, "merges object");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[5]}}", TQ_E_FORMAT, "merge number");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[\"ab\"]}}", TQ_E_FORMAT,
             "merge without space");
    bad_json("{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":0},\"merges\":[]}}",
             TQ_E_FORMAT, "id used twice");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[]},\"added_tokens\":[{\"id\":5}]}",
             TQ_E_FORMAT, "added token without content");
    bad_json("{\"model\":{\"type\":\"Unigram\"," V ",\"merges\":[]}}", TQ_E_UNSUPPORTED,
             "Unigram model");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[],\"byte_fallback\":true}}",
             TQ_E_UNSUPPORTED, "byte_fallback");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[]},\"pre_tokenizer\":{\"type\":"
             "\"Split\",\"pattern\":{\"Regex\":\"(\"},\"behavior\":\"Isolated\"}}",
             TQ_E_FORMAT, "regex that does not compile");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[]},\"pre_tokenizer\":{\"type\":"
             "\"Metaspace\"}}",
             TQ_E_UNSUPPORTED, "Metaspace pre-tokenizer");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[]},\"normalizer\":{\"type\":"
             "\"Lowercase\"}}",
             TQ_E_UNSUPPORTED, "Lowercase normalizer");
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[]},\"pre_tokenizer\":{\"type\":"
             "\"Split\",\"pattern\":{\"Regex\":\"a\"},\"behavior\":\"Removed\"}}",
             TQ_E_UNSUPPORTED, "Split behavior Removed");
    /* a good minimal one parses */
    bad_json("{\"model\":{\"type\":\"BPE\"," V ",\"merges\":[\"a b\"]}}", TQ_OK, "minimal");
    {
        tq_tokenizer *t = NULL;
        tq_status st = tq_tokenizer_from_json("/nonexistent-dir/tokenizer.json", &t);
        CHECK(st == TQ_E_IO && strstr(tq_last_error(), "/nonexistent-dir/tokenizer.json"),
              "missing file: %s %s", tq_status_str(st), tq_last_error());
        st = tq_tokenizer_load("/nonexistent-dir/model.gguf", &t);
        CHECK(st != TQ_OK && t == NULL, "missing gguf");
    }
    /* on disk: the message names the path */
    {
        char path[64];
        FILE *f;
        tq_tokenizer *t = NULL;
        tq_status st;
        snprintf(path, sizeof(path), "/tmp/tq_tok_bad_%d.json", (int)getpid());
        f = fopen(path, "wb");
        fputs("{\"model\": {\"type\": \"BPE\", \"vocab\": {\"a\": 0}, \"merges\": [", f);
        fclose(f);
        st = tq_tokenizer_load(path, &t);
        CHECK(st == TQ_E_FORMAT && strstr(tq_last_error(), path), "truncated file: %s",
              tq_last_error());
        remove(path);
    }
}

/* A GGUF v3 file with only string metadata pairs, built by hand. */
static size_t gguf_str_kv(unsigned char *p, const char *k, const char *v)
{
    size_t o = 0, kl = strlen(k), vl = strlen(v);
    memcpy(p + o, &(uint64_t){kl}, 8);
    memcpy(p + o + 8, k, kl);
    o += 8 + kl;
    memcpy(p + o, &(uint32_t){8}, 4);
    memcpy(p + o + 4, &(uint64_t){vl}, 8);
    memcpy(p + o + 12, v, vl);
    return o + 12 + vl;
}

static void bad_gguf(const char *model, tq_status want, const char *what)
{
    unsigned char buf[512];
    size_t o = 0;
    tq_gguf *g = NULL;
    tq_tokenizer *t = NULL;
    tq_status st;
    memcpy(buf, "GGUF", 4);
    memcpy(buf + 4, &(uint32_t){3}, 4);
    memcpy(buf + 8, &(uint64_t){0}, 8);              /* tensors */
    memcpy(buf + 16, &(uint64_t){model ? 2 : 1}, 8); /* kv pairs */
    o = 24;
    o += gguf_str_kv(buf + o, "general.architecture", "llama");
    if (model)
        o += gguf_str_kv(buf + o, "tokenizer.ggml.model", model);
    while (o % 32)
        buf[o++] = 0;
    st = tq_gguf_open_memory(buf, o, "bad-vocab.gguf", &g);
    CHECK(st == TQ_OK, "%s: hand-made GGUF does not open: %s", what, tq_last_error());
    if (st)
        return;
    st = tq_tokenizer_from_gguf(g, &t);
    CHECK(st == want && t == NULL, "%s: status %s want %s (%s)", what, tq_status_str(st),
          tq_status_str(want), tq_last_error());
    CHECK(strstr(tq_last_error(), "bad-vocab.gguf") || strstr(tq_last_error(), "tokenizer.ggml"),
          "%s: message '%s'", what, tq_last_error());
    tq_gguf_free(g);
}

int main(int argc, char **argv)
{
    tq_tokenizer *q = NULL, *l = NULL, *g = NULL;
    t_init(argc, argv, "test_tok_edge");
    check_tiny();
    check_bad();
    bad_gguf(NULL, TQ_E_FORMAT, "no tokenizer.ggml.model");
    bad_gguf("bert", TQ_E_UNSUPPORTED, "WordPiece model");
    bad_gguf("gpt2", TQ_E_FORMAT, "gpt2 without tokens");
    if (tq_tokenizer_load(tc_path(QWEN3_JSON), &q) != TQ_OK ||
        tq_tokenizer_load(tc_path(LLAMA3_JSON), &l) != TQ_OK) {
        printf("shared tokenizers not loadable: %s\n", tq_last_error());
        tq_tokenizer_free(q);
        return t_pass + t_fail ? t_done() : t_skip("../shared/assets/tokenizers missing");
    }
    check_edge_file(q, "qwen3", "edge");
    check_edge_file(q, "qwen3", "rand");
    check_edge_file(l, "llama3", "edge");
    check_edge_file(l, "llama3", "rand");
    check_chats(q, "qwen3");
    check_chats(l, "llama3");
    check_qwen3(q);
    check_llama3(l);
    tq_tokenizer_free(q);
    tq_tokenizer_free(l);
    if (tq_tokenizer_load(tc_path(SMOLLM2_GGUF), &g) == TQ_OK) {
        check_edge_file(g, "smollm2", "edge");
        check_edge_file(g, "smollm2", "rand");
        check_chats(g, "smollm2");
        CHECK(tq_tokenizer_eot(g) == 2 && tq_tokenizer_bos(g) == 1, "smollm2 eot/bos");
        tq_tokenizer_free(g);
    } else {
        printf("note: %s not present, SmolLM2 cases not run\n", SMOLLM2_GGUF);
    }
    if (tq_tokenizer_load(tc_path(GEMMA3_GGUF), &g) == TQ_OK) {
        check_edge_file(g, "gemma3", "edge");
        check_edge_file(g, "gemma3", "rand");
        CHECK(tq_tokenizer_add_bos(g) && tq_tokenizer_bos(g) == 2, "gemma3 adds BOS 2");
        tq_tokenizer_free(g);
    } else {
        printf("note: %s not present, Gemma 3 cases not run\n", GEMMA3_GGUF);
    }
    return t_done();
}
