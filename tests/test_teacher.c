/* test_teacher.c -- teacher logits dumps (src/model/teacher.c, issue 13 item 6), on the tiny
 * random Llama of tests/data/tiny/llama (f32 weights, vocabulary 256) and random token ids:
 *  - the header records what was asked (vocab, top-k clamped to the vocab, ctx, windows, bos,
 *    text hash, tokenizer fingerprint, the model's fingerprint, the teacher KV scheme);
 *  - self-KL: the teacher scored against its own dump gives KL exactly 0 at every position, top-1
 *    1 and the dump's own perplexity, bit for bit;
 *  - with top-K = the whole vocabulary the dump's KL of a bf16 / kv4 cache equals tq_eval_kl's
 *    full-vocabulary KL (other code: float probabilities, its own sums) to 1e-6 relative, and a
 *    small K gives a lower bound (merging tokens cannot raise a KL);
 *  - refusals, nothing evaluated: another text hash, another tokenizer fingerprint, a truncated
 *    file (1 byte and a whole record short), trailing bytes, one flipped payload byte (checksum),
 *    another magic, a missing file;
 *  - tokenizer fingerprints: equal for the same tokenizer.json, different when one piece differs;
 *  - a write that cannot happen (directory missing) leaves no file. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "model/engine.h"
#include "t.h"

#define SRC "tests/data/tiny/llama"
#define CTX 32
#define NWIN 3

static long slurp(const char *path, unsigned char **out)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    fseek(f, 0, SEEK_END);
    const long n = ftell(f);
    fseek(f, 0, SEEK_SET);
    *out = malloc((size_t)n + 1);
    if (fread(*out, 1, (size_t)n, f) != (size_t)n) {
        fclose(f);
        free(*out);
        return -1;
    }
    fclose(f);
    return n;
}

static int spit(const char *path, const unsigned char *b, long n)
{
    FILE *f = fopen(path, "wb");
    if (!f)
        return -1;
    const int ok = fwrite(b, 1, (size_t)n, f) == (size_t)n;
    return fclose(f) == 0 && ok ? 0 : -1;
}

static tq_tokenizer *tok_json(const char *piece)
{
    char json[1024];
    tq_tokenizer *t = NULL;
    snprintf(json, sizeof(json),
             "{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0,\"b\":1,\"%s\":2},\"merges\":[]},"
             "\"pre_tokenizer\":{\"type\":\"ByteLevel\",\"add_prefix_space\":false,"
             "\"use_regex\":true},\"added_tokens\":[]}", piece);
    const tq_status st = tq_tokenizer_from_json_memory(json, strlen(json), "t.json", &t);
    CHECK(st == TQ_OK, "tokenizer json: %s", tq_last_error());
    return t;
}

/* expect a refusal with status want and a message containing what */
static void refused(tq_model *m, const char *path, uint64_t th, uint64_t tf, tq_status want,
                    const char *what)
{
    tq_kv_scheme f32;
    tq_kv_scheme_parse("f32", &f32);
    tq_kl_stats r;
    const tq_status st = tq_eval_kl_teacher(m, path, th, tf, &f32, 1, NULL, NULL, &r, NULL);
    CHECK(st == want, "%s: status %s, want %s (%s)", what, tq_status_str(st), tq_status_str(want),
          tq_last_error());
    CHECK(st == TQ_OK || strstr(tq_last_error(), what), "message '%s' lacks '%s'",
          tq_last_error(), what);
    printf("%s (%s): %s\n", st ? "refused" : "accepted", what, st ? tq_last_error() : "");
}

int main(int argc, char **argv)
{
    t_init(argc, argv, "test_teacher");
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 1;
    mo.weight_type = TQ_DTYPE_F32;
    tq_model *m = NULL;
    if (tq_model_load(SRC, &mo, &m)) {
        printf("load %s: %s\n", SRC, tq_last_error());
        return t_skip("tiny llama model missing");
    }
    const int vocab = m->cfg.vocab;
    const int64_t n = NWIN * CTX + 7; /* a partial window at the end is not used */
    int32_t *tok = malloc((size_t)n * sizeof(int32_t));
    srand(t_seed);
    for (int64_t i = 0; i < n; i++)
        tok[i] = rand() % vocab;
    char dir[] = "/tmp/tq_teacher_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    char p_full[256], p_small[256], p_bad[256];
    snprintf(p_full, sizeof p_full, "%s/full.tqt", dir);
    snprintf(p_small, sizeof p_small, "%s/small.tqt", dir);
    snprintf(p_bad, sizeof p_bad, "%s/bad.tqt", dir);
    const uint64_t th = 0x1234567890abcdefull, tf = 0xfedcba0987654321ull;
    const int32_t bos = 1;

    /* ---- write: whole vocabulary (top_k above it is clamped) and a small K ---- */
    tq_teacher_opts o;
    tq_teacher_opts_default(&o);
    CHECK(o.ctx == 512 && o.top_k == 2048 && o.kv.kind == TQ_KV_F32, "defaults");
    o.ctx = CTX;
    o.top_k = 100000;
    o.text_hash = th;
    o.tokenizer_fp = tf;
    tq_teacher_info wi, ri;
    tq_status st = tq_teacher_write(m, tok, n, bos, &o, p_full, NULL, NULL, &wi);
    CHECK(st == TQ_OK, "write full: %s", tq_last_error());
    st = tq_teacher_info_read(p_full, &ri);
    CHECK(st == TQ_OK, "read full: %s", tq_last_error());
    CHECK(ri.vocab == vocab && ri.top_k == vocab && ri.ctx == CTX && ri.bos == bos &&
              ri.n_windows == NWIN && ri.n_scored == NWIN * (CTX / 2 - 1),
          "header: vocab %d top_k %d ctx %d bos %d windows %lld scored %lld", ri.vocab, ri.top_k,
          ri.ctx, ri.bos, (long long)ri.n_windows, (long long)ri.n_scored);
    CHECK(ri.text_hash == th && ri.tokenizer_fp == tf && ri.model_fp == tq_model_fingerprint(m) &&
              !strcmp(ri.kv, "f32"),
          "header hashes / kv '%s'", ri.kv);
    CHECK(ri.ppl == wi.ppl && ri.file_bytes == wi.file_bytes && ri.tail_mean == wi.tail_mean,
          "writer and reader agree: ppl %.17g vs %.17g", wi.ppl, ri.ppl);
    CHECK(ri.file_bytes == 128 + 4ull * NWIN * CTX + (uint64_t)ri.n_scored * (16 + 8ull * vocab) + 8,
          "file bytes %llu", (unsigned long long)ri.file_bytes);
    CHECK(ri.tail_mean < 1e-12, "no mass outside the whole vocabulary: %g", ri.tail_mean);
    o.top_k = 5;
    tq_teacher_info si;
    st = tq_teacher_write(m, tok, n, bos, &o, p_small, NULL, NULL, &si);
    CHECK(st == TQ_OK && si.top_k == 5 && si.tail_mean > 0.0, "write small: %s",
          tq_last_error());

    /* ---- self-KL is exactly 0; candidates against the full-vocabulary KL of tq_eval_kl ---- */
    tq_kv_scheme sch[3];
    tq_kv_scheme_parse("f32", &sch[0]);
    tq_kv_scheme_parse("bf16", &sch[1]);
    tq_kv_scheme_parse("kv4", &sch[2]);
    tq_kl_stats r[3], rs[3], ref[2], tr;
    st = tq_eval_kl_teacher(m, p_full, th, tf, sch, 3, NULL, NULL, r, NULL);
    CHECK(st == TQ_OK, "score full: %s", tq_last_error());
    CHECK(r[0].mean == 0.0 && r[0].max == 0.0 && r[0].top1 == 1.0 && r[0].ppl == ri.ppl,
          "self-KL: mean %g max %g top1 %g ppl %.17g vs %.17g", r[0].mean, r[0].max, r[0].top1,
          r[0].ppl, ri.ppl);
    st = tq_eval_kl_teacher(m, p_small, th, tf, sch, 3, NULL, NULL, rs, NULL);
    CHECK(st == TQ_OK, "score small: %s", tq_last_error());
    CHECK(rs[0].mean == 0.0 && rs[0].max == 0.0 && rs[0].top1 == 1.0,
          "self-KL top-5: mean %g max %g", rs[0].mean, rs[0].max);
    st = tq_eval_kl(m, tok, n, bos, sch[0], sch + 1, 2, CTX, 0, NULL, NULL, ref, &tr);
    CHECK(st == TQ_OK, "tq_eval_kl: %s", tq_last_error());
    CHECK(tr.ppl == ri.ppl, "teacher ppl: eval_kl %.17g, dump %.17g", tr.ppl, ri.ppl);
    for (int k = 0; k < 2; k++) {
        printf("%s: dump KL %.9g (top-5 %.9g), tq_eval_kl %.9g; top-1 %.4f / %.4f; ppl %.6f / "
               "%.6f\n", k ? "kv4" : "bf16", r[k + 1].mean, rs[k + 1].mean, ref[k].mean,
               r[k + 1].top1, ref[k].top1, r[k + 1].ppl, ref[k].ppl);
        CHECK(ref[k].mean > 0.0 && fabs(r[k + 1].mean - ref[k].mean) <= 1e-6 * ref[k].mean + 1e-12,
              "full-vocab dump KL %.9g vs tq_eval_kl %.9g", r[k + 1].mean, ref[k].mean);
        CHECK(r[k + 1].top1 == ref[k].top1 && r[k + 1].ppl == ref[k].ppl,
              "top-1 %g/%g ppl %.17g/%.17g", r[k + 1].top1, ref[k].top1, r[k + 1].ppl, ref[k].ppl);
        CHECK(rs[k + 1].mean <= r[k + 1].mean * (1 + 1e-9) && rs[k + 1].mean > 0.0,
              "top-5 KL %.9g is a lower bound of %.9g", rs[k + 1].mean, r[k + 1].mean);
        CHECK(rs[k + 1].ppl == r[k + 1].ppl, "ppl does not depend on K");
    }

    /* ---- refusals ---- */
    refused(m, p_full, th ^ 1, tf, TQ_E_MISMATCH, "another text");
    refused(m, p_full, 0, tf, TQ_OK, "(no text given: accepted)");
    refused(m, p_full, th, tf ^ 1, TQ_E_MISMATCH, "another tokenizer");
    unsigned char *b = NULL;
    const long nb = slurp(p_small, &b);
    CHECK(nb > 200, "slurp");
    const long rec = 16 + 8 * 5;
    CHECK(spit(p_bad, b, nb - 1) == 0, "spit");
    refused(m, p_bad, th, tf, TQ_E_FORMAT, "truncated");
    CHECK(spit(p_bad, b, nb - rec) == 0, "spit");
    refused(m, p_bad, th, tf, TQ_E_FORMAT, "truncated");
    CHECK(spit(p_bad, b, 100) == 0, "spit");
    refused(m, p_bad, th, tf, TQ_E_FORMAT, "not a teacher dump");
    unsigned char *b2 = malloc((size_t)nb + 1);
    memcpy(b2, b, (size_t)nb);
    b2[nb] = 0;
    CHECK(spit(p_bad, b2, nb + 1) == 0, "spit");
    refused(m, p_bad, th, tf, TQ_E_FORMAT, "trailing bytes");
    b2[nb - 20] ^= 0x40; /* a logit of the last record */
    CHECK(spit(p_bad, b2, nb) == 0, "spit");
    refused(m, p_bad, th, tf, TQ_E_FORMAT, "checksum");
    memcpy(b2, b, (size_t)nb);
    b2[3] ^= 1;
    CHECK(spit(p_bad, b2, nb) == 0, "spit");
    refused(m, p_bad, th, tf, TQ_E_FORMAT, "not a teacher dump");
    unlink(p_bad);
    refused(m, p_bad, th, tf, TQ_E_IO, "cannot open");
    free(b);
    free(b2);

    /* ---- a write that cannot happen leaves nothing ---- */
    char p_nodir[300];
    snprintf(p_nodir, sizeof p_nodir, "%s/missing/x.tqt", dir);
    st = tq_teacher_write(m, tok, n, bos, &o, p_nodir, NULL, NULL, NULL);
    CHECK(st == TQ_E_IO && access(p_nodir, F_OK) != 0, "write into a missing directory: %s",
          tq_status_str(st));
    o.top_k = 0;
    st = tq_teacher_write(m, tok, n, bos, &o, p_small, NULL, NULL, NULL);
    CHECK(st == TQ_E_ARG, "top_k 0 refused: %s", tq_status_str(st));
    CHECK(tq_teacher_info_read(p_small, &si) == TQ_OK, "the earlier file is untouched");

    /* ---- tokenizer fingerprints ---- */
    tq_tokenizer *t1 = tok_json("ab"), *t2 = tok_json("ab"), *t3 = tok_json("ba");
    if (t1 && t2 && t3) {
        const uint64_t f1 = tq_tokenizer_fingerprint(t1), f2 = tq_tokenizer_fingerprint(t2),
                       f3 = tq_tokenizer_fingerprint(t3);
        CHECK(f1 == f2 && f1 != f3 && f1 != 0, "tokenizer fingerprints %016llx %016llx %016llx",
              (unsigned long long)f1, (unsigned long long)f2, (unsigned long long)f3);
    }
    tq_tokenizer_free(t1);
    tq_tokenizer_free(t2);
    tq_tokenizer_free(t3);
    CHECK(tq_text_hash("abc", 3) != tq_text_hash("abd", 3), "text hash");

    unlink(p_full);
    unlink(p_small);
    rmdir(dir);
    free(tok);
    tq_model_free(m);
    return t_done();
}
