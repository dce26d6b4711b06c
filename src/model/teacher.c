/* teacher.c -- teacher logits dumps (turboquant/eval.h "Teacher logits dumps"; byte layout in
 * docs/FORMAT.md "Teacher logits dump"): tq_teacher_write() stores, per scored position of the
 * tq_eval_kl windows, the teacher's K largest logits (ids, values), the full-vocabulary
 * log-sum-exp and the next token; tq_eval_kl_teacher() scores candidates against such a file.
 * The windows, scored positions and logits come from the same code as tq_eval_kl
 * (model/eval_internal.h), so a candidate identical to the teacher scores KL exactly 0. */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/le.h"
#include "model/eval_internal.h"

#if !__has_include(<xxhash.h>)
#error "xxhash.h not found: install libxxhash-dev (Debian) / xxhash (the teacher dump checksum)"
#endif
#define XXH_INLINE_ALL
#include <xxhash.h>

#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "teacher dumps are written little-endian with host-order arrays: a big-endian port must swap"
#endif

#define TD_MAGIC "TQTEACHR"
#define TD_VERSION 1u
#define TD_HEADER 128u
#define TD_REC_FIXED 16u /* f64 lse, f32 logit of the next token, u32 next token id */

void tq_teacher_opts_default(tq_teacher_opts *o)
{
    memset(o, 0, sizeof(*o));
    o->ctx = 512;
    o->top_k = 2048;
    tq_kv_scheme_parse("f32", &o->kv);
}

uint64_t tq_text_hash(const void *bytes, size_t n)
{
    return XXH3_64bits(bytes, n);
}

uint64_t tq_tokenizer_fingerprint(const tq_tokenizer *t)
{
    if (!t)
        return 0;
    XXH3_state_t st;
    XXH3_64bits_reset(&st);
    const int32_t hdr[4] = {tq_tokenizer_vocab_size(t), tq_tokenizer_bos(t), tq_tokenizer_eos(t),
                            tq_tokenizer_add_bos(t)};
    XXH3_64bits_update(&st, hdr, sizeof(hdr));
    for (int32_t i = 0; i < hdr[0]; i++) {
        size_t len = 0;
        const char *p = tq_tokenizer_piece(t, i, &len);
        const uint32_t l32 = p ? (uint32_t)len : 0xffffffffu;
        XXH3_64bits_update(&st, &l32, sizeof(l32));
        if (p && len)
            XXH3_64bits_update(&st, p, len);
    }
    return XXH3_64bits_digest(&st);
}

static uint64_t rec_bytes(int k)
{
    return TD_REC_FIXED + 8u * (uint64_t)k;
}

/* ---- top-K selection: (logit desc, id asc), so the order is total and reproducible ---------- */

typedef struct td_pair {
    float v;
    int32_t id;
} td_pair;

static int better(const td_pair *a, const td_pair *b)
{
    return a->v > b->v || (a->v == b->v && a->id < b->id);
}

static int cmp_pair(const void *a, const void *b)
{
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

/* put the k best of p[0..n) into p[0..k) (any order): quickselect, median of three */
static void select_top(td_pair *p, int64_t n, int64_t k)
{
    int64_t lo = 0, hi = n - 1;
    while (lo < hi) {
        const int64_t mid = lo + (hi - lo) / 2;
        td_pair a = p[lo], b = p[mid], c = p[hi], piv;
        if (better(&a, &b))
            piv = better(&b, &c) ? b : better(&a, &c) ? c : a;
        else
            piv = better(&a, &c) ? a : better(&b, &c) ? c : b;
        int64_t i = lo, j = hi;
        while (i <= j) {
            while (better(&p[i], &piv))
                i++;
            while (better(&piv, &p[j]))
                j--;
            if (i <= j) {
                const td_pair t = p[i];
                p[i++] = p[j];
                p[j--] = t;
            }
        }
        if (k - 1 <= j)
            hi = j;
        else if (k - 1 >= i)
            lo = i;
        else
            return;
    }
}

/* ---- writing ------------------------------------------------------------------------------- */

typedef struct td_out {
    FILE *f;
    XXH3_state_t h;
    int bad;
} td_out;

static void put(td_out *o, const void *p, size_t n)
{
    if (!n || o->bad)
        return;
    XXH3_64bits_update(&o->h, p, n);
    if (fwrite(p, 1, n, o->f) != n)
        o->bad = errno ? errno : EIO;
}

static void header(uint8_t *h, const tq_teacher_info *in)
{
    memset(h, 0, TD_HEADER);
    memcpy(h, TD_MAGIC, 8);
    tq_le_wr32(h + 8, TD_VERSION);
    tq_le_wr32(h + 12, TD_HEADER);
    tq_le_wr32(h + 16, (uint32_t)in->vocab);
    tq_le_wr32(h + 20, (uint32_t)in->top_k);
    tq_le_wr32(h + 24, (uint32_t)in->ctx);
    tq_le_wr32(h + 28, (uint32_t)in->bos);
    tq_le_wr64(h + 32, (uint64_t)in->n_windows);
    tq_le_wr64(h + 40, (uint64_t)in->n_windows * (uint64_t)in->ctx);
    tq_le_wr64(h + 48, in->model_fp);
    tq_le_wr64(h + 56, in->text_hash);
    tq_le_wr64(h + 64, in->tokenizer_fp);
    memcpy(h + 72, in->kv, strnlen(in->kv, 31));
    tq_le_wr32(h + 104, (uint32_t)(in->ctx / 2 - 1));
    tq_le_wr32(h + 108, (uint32_t)rec_bytes(in->top_k));
}

tq_status tq_teacher_write(tq_model *m, const int32_t *tokens, int64_t n_tokens, int32_t bos,
                           const tq_teacher_opts *o, const char *path,
                           tq_eval_progress_fn progress, void *user, tq_teacher_info *info)
{
    int64_t nw = 0;
    tq_status st;
    if (!m || !o || !path)
        return TQ_FAIL(TQ_E_ARG, "tq_teacher_write: NULL argument");
    if ((st = tq_evl_check("tq_teacher_write", tokens, n_tokens, o->ctx, o->max_windows, &nw)))
        return st;
    const int vocab = m->cfg.vocab, ctx = o->ctx, ns = ctx / 2 - 1;
    if (o->top_k < 1)
        return TQ_FAIL(TQ_E_ARG, "tq_teacher_write: top_k %d (valid: 1 .. the vocabulary, %d)",
                       o->top_k, vocab);
    const int k = o->top_k < vocab ? o->top_k : vocab;
    for (int64_t i = 0; i < nw * ctx; i++)
        if (tokens[i] < 0 || tokens[i] >= vocab)
            return TQ_FAIL(TQ_E_ARG, "tq_teacher_write: token %lld is id %d, outside the model's "
                                     "vocabulary of %d", (long long)i, tokens[i], vocab);
    tq_teacher_info in = {.vocab = vocab, .top_k = k, .ctx = ctx, .bos = bos < 0 ? -1 : bos,
                          .n_windows = nw, .n_scored = nw * ns,
                          .model_fp = tq_model_fingerprint(m), .text_hash = o->text_hash,
                          .tokenizer_fp = o->tokenizer_fp};
    tq_kv_scheme_name(o->kv, in.kv, sizeof(in.kv));
    tq_evl ev = {0};
    tq_atomic_file *af = NULL;
    int32_t *buf = tq_malloc((size_t)ctx * sizeof(int32_t));
    /* lg: the CPU session's window scratch; rows: the logits of positions ctx/2 .. ctx-1 */
    float *lg = o->cuda ? NULL : tq_malloc((size_t)ctx * (size_t)vocab * sizeof(float));
    float *rows = tq_malloc((size_t)(ctx - ctx / 2) * (size_t)vocab * sizeof(float));
    td_pair *pr = tq_malloc((size_t)vocab * sizeof(td_pair));
    int32_t *ids = tq_malloc((size_t)k * sizeof(int32_t));
    float *vals = tq_malloc((size_t)k * sizeof(float));
    if (!buf || (!lg && !o->cuda) || !rows || !pr || !ids || !vals) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_teacher_write: out of memory (%d x %d logits)", ctx, vocab);
        goto done;
    }
    if ((st = tq_evl_open(m, o->kv, ctx, o->cuda, &ev)))
        goto done;
    if ((st = tq_atomic_file_open(path, &af)))
        goto done;
    td_out out = {.f = tq_atomic_file_stream(af)};
    if (!out.f) {
        st = TQ_FAIL(TQ_E_IO, "%s: cannot open a stream to write the teacher dump", path);
        goto done;
    }
    XXH3_64bits_reset(&out.h);
    uint8_t h[TD_HEADER];
    header(h, &in);
    put(&out, h, TD_HEADER);
    put(&out, tokens, (size_t)(nw * ctx) * sizeof(int32_t));
    double nll = 0.0, tail_sum = 0.0, tail_max = 0.0;
    for (int64_t w = 0; w < nw; w++) {
        tq_evl_window_tokens(bos, tokens, w, ctx, buf);
        if ((st = tq_evl_score(&ev, buf, 0, lg, rows, NULL, 0, NULL, NULL, NULL)))
            goto done;
        for (int i = 0; i < ns; i++) {
            const float *row = rows + (size_t)i * vocab;
            const double lse = tq_evl_row_lse(row, vocab, NULL);
            const int32_t next = tokens[w * ctx + ctx / 2 + i + 1];
            for (int v = 0; v < vocab; v++)
                pr[v] = (td_pair){row[v], v};
            select_top(pr, vocab, k);
            qsort(pr, (size_t)k, sizeof(td_pair), cmp_pair);
            double sp = 0.0;
            for (int j = 0; j < k; j++) {
                ids[j] = pr[j].id;
                vals[j] = pr[j].v;
                sp += exp((double)pr[j].v - lse);
            }
            const double tail = sp < 1.0 ? 1.0 - sp : 0.0;
            tail_sum += tail;
            tail_max = tail > tail_max ? tail : tail_max;
            nll += lse - (double)row[next];
            const float tl = row[next];
            const uint32_t nx = (uint32_t)next;
            put(&out, &lse, 8);
            put(&out, &tl, 4);
            put(&out, &nx, 4);
            put(&out, ids, (size_t)k * sizeof(int32_t));
            put(&out, vals, (size_t)k * sizeof(float));
        }
        if (progress)
            progress(user, w + 1, nw);
    }
    const uint64_t sum = XXH3_64bits_digest(&out.h);
    uint8_t tr[8];
    tq_le_wr64(tr, sum);
    if (!out.bad && fwrite(tr, 1, 8, out.f) != 8)
        out.bad = errno ? errno : EIO;
    if (out.bad) {
        st = TQ_FAIL(TQ_E_IO, "%s: write failed: %s (any earlier file is kept)", path,
                     strerror(out.bad));
        goto done;
    }
    st = tq_atomic_file_commit(af);
    af = NULL;
    if (st)
        goto done;
    in.ppl = exp(nll / (double)in.n_scored);
    in.tail_mean = tail_sum / (double)in.n_scored;
    in.tail_max = tail_max;
    in.file_bytes = TD_HEADER + (uint64_t)(nw * ctx) * 4u + (uint64_t)in.n_scored * rec_bytes(k) + 8u;
    if (info)
        *info = in;
done:
    if (af)
        tq_atomic_file_abort(af);
    tq_evl_close(&ev);
    tq_free(buf);
    tq_free(lg);
    tq_free(rows);
    tq_free(pr);
    tq_free(ids);
    tq_free(vals);
    return st;
}

/* ---- reading ------------------------------------------------------------------------------- */

typedef struct td_in {
    FILE *f;
    XXH3_state_t h;
    const char *path;
} td_in;

static tq_status get(td_in *r, void *p, size_t n, const char *what)
{
    if (fread(p, 1, n, r->f) != n)
        return TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump truncated while reading %s (re-make it "
                                    "with tq teacher)", r->path, what);
    XXH3_64bits_update(&r->h, p, n);
    return TQ_OK;
}

/* open path, parse and check the header against the file size; *f stays open after the header */
static tq_status open_dump(const char *path, td_in *r, tq_teacher_info *in)
{
    uint8_t h[TD_HEADER];
    struct stat sb;
    memset(in, 0, sizeof(*in));
    r->path = path;
    r->f = fopen(path, "rb");
    if (!r->f)
        return TQ_FAIL(TQ_E_IO, "%s: cannot open the teacher dump: %s", path, strerror(errno));
    XXH3_64bits_reset(&r->h);
    if (fstat(fileno(r->f), &sb) || !S_ISREG(sb.st_mode))
        return TQ_FAIL(TQ_E_IO, "%s: not a regular file (a teacher dump is one)", path);
    if (fread(h, 1, TD_HEADER, r->f) != TD_HEADER || memcmp(h, TD_MAGIC, 8))
        return TQ_FAIL(TQ_E_FORMAT, "%s: not a teacher dump (no '%s' header; make one with tq "
                                    "teacher)", path, TD_MAGIC);
    XXH3_64bits_update(&r->h, h, TD_HEADER);
    if (tq_le_rd32(h + 8) != TD_VERSION || tq_le_rd32(h + 12) != TD_HEADER)
        return TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump version %u (header %u bytes); this build "
                                    "reads version %u (%u bytes): re-make it with tq teacher",
                       path, tq_le_rd32(h + 8), tq_le_rd32(h + 12), TD_VERSION, TD_HEADER);
    in->vocab = (int)tq_le_rd32(h + 16);
    in->top_k = (int)tq_le_rd32(h + 20);
    in->ctx = (int)tq_le_rd32(h + 24);
    in->bos = (int32_t)tq_le_rd32(h + 28);
    in->n_windows = (int64_t)tq_le_rd64(h + 32);
    const uint64_t n_ids = tq_le_rd64(h + 40);
    in->model_fp = tq_le_rd64(h + 48);
    in->text_hash = tq_le_rd64(h + 56);
    in->tokenizer_fp = tq_le_rd64(h + 64);
    memcpy(in->kv, h + 72, 31);
    in->kv[31] = '\0';
    const uint32_t ns = tq_le_rd32(h + 104), rb = tq_le_rd32(h + 108);
    if (in->vocab < 1 || in->top_k < 1 || in->top_k > in->vocab || in->ctx < 4 || in->ctx % 2 ||
        in->ctx > (1 << 24) || in->bos < -1 || in->bos >= in->vocab || in->n_windows < 1 ||
        in->n_windows > (int64_t)1 << 32 || n_ids != (uint64_t)in->n_windows * (uint64_t)in->ctx ||
        ns != (uint32_t)(in->ctx / 2 - 1) || rb != rec_bytes(in->top_k))
        return TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump header is inconsistent (vocab %d, top-k %d, "
                                    "ctx %d, %lld windows, %llu ids, record %u bytes): the file "
                                    "is corrupt, re-make it with tq teacher", path, in->vocab,
                       in->top_k, in->ctx, (long long)in->n_windows, (unsigned long long)n_ids, rb);
    in->n_scored = in->n_windows * (int64_t)ns;
    in->file_bytes = TD_HEADER + n_ids * 4u + (uint64_t)in->n_scored * rb + 8u;
    if ((uint64_t)sb.st_size != in->file_bytes)
        return TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump is %llu bytes, its header says %llu: %s "
                                    "(re-make it with tq teacher)", path,
                       (unsigned long long)sb.st_size, (unsigned long long)in->file_bytes,
                       (uint64_t)sb.st_size < in->file_bytes ? "truncated" : "trailing bytes");
    return TQ_OK;
}

/* one record: lse, next-token logit and id, k ids, k logits (ids checked against vocab) */
typedef struct td_rec {
    double lse;
    float next_logit;
    uint32_t next;
} td_rec;

static tq_status get_rec(td_in *r, const tq_teacher_info *in, td_rec *rec, int32_t *ids,
                         float *vals)
{
    uint8_t b[TD_REC_FIXED];
    tq_status st;
    if ((st = get(r, b, sizeof(b), "a record")) ||
        (st = get(r, ids, (size_t)in->top_k * 4u, "a record's ids")) ||
        (st = get(r, vals, (size_t)in->top_k * 4u, "a record's logits")))
        return st;
    memcpy(&rec->lse, b, 8);
    memcpy(&rec->next_logit, b + 8, 4);
    memcpy(&rec->next, b + 12, 4);
    if (rec->next >= (uint32_t)in->vocab || !isfinite(rec->lse))
        return TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump record is corrupt (next token %u, vocab "
                                    "%d)", r->path, rec->next, in->vocab);
    for (int j = 0; j < in->top_k; j++)
        if (ids[j] < 0 || ids[j] >= in->vocab)
            return TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump record holds token id %d outside the "
                                        "vocabulary of %d (corrupt)", r->path, ids[j], in->vocab);
    return TQ_OK;
}

/* a whole pass over the file: header, ids, records (teacher ppl, tail mass), checksum */
static tq_status read_all(const char *path, tq_teacher_info *in)
{
    td_in r = {0};
    tq_status st = open_dump(path, &r, in);
    int32_t *ids = NULL, *tok = NULL;
    float *vals = NULL;
    if (st)
        goto done;
    const uint64_t n_ids = (uint64_t)in->n_windows * (uint64_t)in->ctx;
    tok = tq_malloc((size_t)n_ids * 4u);
    ids = tq_malloc((size_t)in->top_k * 4u);
    vals = tq_malloc((size_t)in->top_k * 4u);
    if (!tok || !ids || !vals) {
        st = TQ_FAIL(TQ_E_NOMEM, "%s: out of memory reading the teacher dump", path);
        goto done;
    }
    if ((st = get(&r, tok, (size_t)n_ids * 4u, "the token ids")))
        goto done;
    for (uint64_t i = 0; i < n_ids; i++)
        if (tok[i] < 0 || tok[i] >= in->vocab) {
            st = TQ_FAIL(TQ_E_FORMAT, "%s: token %llu is id %d, outside the vocabulary of %d "
                                      "(corrupt dump)", path, (unsigned long long)i, tok[i],
                         in->vocab);
            goto done;
        }
    const int ns = in->ctx / 2 - 1;
    double nll = 0.0, tail_sum = 0.0, tail_max = 0.0;
    for (int64_t w = 0; w < in->n_windows; w++)
        for (int i = 0; i < ns; i++) {
            td_rec rec;
            if ((st = get_rec(&r, in, &rec, ids, vals)))
                goto done;
            if ((int32_t)rec.next != tok[w * in->ctx + in->ctx / 2 + i + 1]) {
                st = TQ_FAIL(TQ_E_FORMAT, "%s: record %lld names next token %u, the ids say %d "
                                          "(corrupt dump)", path,
                             (long long)(w * ns + i), rec.next, tok[w * in->ctx + in->ctx / 2 + i + 1]);
                goto done;
            }
            double sp = 0.0;
            for (int j = 0; j < in->top_k; j++)
                sp += exp((double)vals[j] - rec.lse);
            const double tail = sp < 1.0 ? 1.0 - sp : 0.0;
            tail_sum += tail;
            tail_max = tail > tail_max ? tail : tail_max;
            nll += rec.lse - (double)rec.next_logit;
        }
    const uint64_t want = XXH3_64bits_digest(&r.h);
    uint8_t tr[8];
    if (fread(tr, 1, 8, r.f) != 8) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump truncated (no checksum)", path);
        goto done;
    }
    if (tq_le_rd64(tr) != want) {
        st = TQ_FAIL(TQ_E_FORMAT, "%s: teacher dump checksum mismatch (file %016llx, content "
                                  "%016llx): the file is corrupt, re-make it with tq teacher",
                     path, (unsigned long long)tq_le_rd64(tr), (unsigned long long)want);
        goto done;
    }
    in->ppl = exp(nll / (double)in->n_scored);
    in->tail_mean = tail_sum / (double)in->n_scored;
    in->tail_max = tail_max;
done:
    if (r.f)
        fclose(r.f);
    tq_free(tok);
    tq_free(ids);
    tq_free(vals);
    return st;
}

tq_status tq_teacher_info_read(const char *path, tq_teacher_info *info)
{
    if (!path || !info)
        return TQ_FAIL(TQ_E_ARG, "tq_teacher_info_read: NULL argument");
    tq_teacher_info in;
    const tq_status st = read_all(path, &in);
    if (!st)
        *info = in;
    return st;
}

/* ---- scoring a candidate ------------------------------------------------------------------- */

tq_status tq_eval_kl_teacher(tq_model *m, const char *path, uint64_t text_hash,
                             uint64_t tokenizer_fp, const tq_kv_scheme *students, int n_students,
                             tq_eval_progress_fn progress, void *user, tq_kl_stats *out,
                             tq_teacher_info *info)
{
    return tq_eval_kl_teacher_dev(m, path, text_hash, tokenizer_fp, students, n_students, 0,
                                  progress, user, out, info);
}

tq_status tq_eval_kl_teacher_dev(tq_model *m, const char *path, uint64_t text_hash,
                                 uint64_t tokenizer_fp, const tq_kv_scheme *students,
                                 int n_students, int cuda, tq_eval_progress_fn progress,
                                 void *user, tq_kl_stats *out, tq_teacher_info *info)
{
    tq_teacher_info in;
    tq_status st;
    if (!m || !path || n_students < 1 || !students || !out)
        return TQ_FAIL(TQ_E_ARG, "tq_eval_kl_teacher: NULL argument or no candidate scheme");
    if ((st = read_all(path, &in)))
        return st;
    if (info)
        *info = in;
    if (text_hash && text_hash != in.text_hash)
        return TQ_FAIL(TQ_E_MISMATCH, "%s: the teacher dump was made from another text (text hash "
                                      "%016llx, this text %016llx): give the text it was made "
                                      "from, or none", path, (unsigned long long)in.text_hash,
                       (unsigned long long)text_hash);
    if (tokenizer_fp != in.tokenizer_fp)
        return TQ_FAIL(TQ_E_MISMATCH, "%s: the teacher dump was made with another tokenizer "
                                      "(fingerprint %016llx, this model's %016llx): its token ids "
                                      "would name other tokens", path,
                       (unsigned long long)in.tokenizer_fp, (unsigned long long)tokenizer_fp);
    if (m->cfg.vocab != in.vocab)
        return TQ_FAIL(TQ_E_MISMATCH, "%s: the teacher's vocabulary has %d entries, this model's "
                                      "%d", path, in.vocab, m->cfg.vocab);
    const int vocab = in.vocab, ctx = in.ctx, ns = ctx / 2 - 1, k = in.top_k;
    const int64_t nw = in.n_windows, n_all = in.n_scored;
    td_in r = {.path = path};
    const int k1 = k + 1; /* per row: the teacher's top-K ids, then the next token */
    tq_evl *ss = tq_calloc((size_t)n_students, sizeof(*ss));
    int32_t *tok = tq_malloc((size_t)(nw * ctx) * 4u), *buf = tq_malloc((size_t)ctx * 4u);
    float *lg = cuda ? NULL : tq_malloc((size_t)ctx * (size_t)vocab * sizeof(float));
    td_rec *recs = tq_malloc((size_t)ns * sizeof(td_rec));
    int32_t *ids = tq_malloc((size_t)ns * (size_t)k * 4u);
    float *vals = tq_malloc((size_t)ns * (size_t)k * 4u);
    int32_t *ids1 = tq_malloc((size_t)ns * (size_t)k1 * 4u), *ams = tq_malloc((size_t)ns * 4u);
    float *pk = tq_malloc((size_t)ns * (size_t)k1 * 4u);
    double *lses = tq_malloc((size_t)ns * 8u);
    float *kls = tq_malloc((size_t)n_students * (size_t)n_all * sizeof(float));
    double *sum_kl = tq_calloc((size_t)n_students, sizeof(double));
    double *nll = tq_calloc((size_t)n_students, sizeof(double));
    int64_t *agree = tq_calloc((size_t)n_students, sizeof(int64_t));
    if (!ss || !tok || !buf || (!lg && !cuda) || !recs || !ids || !vals || !ids1 || !ams || !pk ||
        !lses || !kls || !sum_kl || !nll || !agree) {
        st = TQ_FAIL(TQ_E_NOMEM, "tq_eval_kl_teacher: out of memory (%d x %d logits)", ctx, vocab);
        goto done;
    }
    for (int s = 0; s < n_students; s++)
        if ((st = tq_evl_open(m, students[s], ctx, cuda, &ss[s])))
            goto done;
    /* second pass over the file (read_all checked it whole): ids, then each window's records */
    tq_teacher_info again;
    if ((st = open_dump(path, &r, &again)))
        goto done;
    if (again.file_bytes != in.file_bytes) {
        st = TQ_FAIL(TQ_E_IO, "%s: the teacher dump changed while it was read", path);
        goto done;
    }
    if ((st = get(&r, tok, (size_t)(nw * ctx) * 4u, "the token ids")))
        goto done;
    for (int64_t w = 0; w < nw; w++) {
        for (int i = 0; i < ns; i++)
            if ((st = get_rec(&r, &in, &recs[i], ids + (size_t)i * k, vals + (size_t)i * k)))
                goto done;
        tq_evl_window_tokens(in.bos, tok, w, ctx, buf);
        for (int i = 0; i < ns; i++) {
            memcpy(ids1 + (size_t)i * k1, ids + (size_t)i * k, (size_t)k * 4u);
            ids1[(size_t)i * k1 + k] = (int32_t)recs[i].next;
        }
        for (int s = 0; s < n_students; s++) {
            if ((st = tq_evl_score(&ss[s], buf, ns, lg, NULL, ids1, k1, pk, lses, ams)))
                goto done;
            for (int i = 0; i < ns; i++) {
                const float *pv = pk + (size_t)i * k1; /* the row's logits of ids1 */
                const int am = ams[i];
                const double lse = lses[i];
                const int32_t *id = ids + (size_t)i * k;
                const float *tv = vals + (size_t)i * k;
                /* KL over the teacher's top K + one bucket for the rest; the teacher's and the
                 * candidate's terms are computed by the same expressions, so identical logits
                 * give exactly 0 */
                double kl = 0.0, st_ = 0.0, ss_ = 0.0;
                for (int j = 0; j < k; j++) {
                    const double lt = (double)tv[j] - recs[i].lse;
                    const double lq = (double)pv[j] - lse;
                    const double pt = exp(lt);
                    kl += pt * (lt - lq);
                    st_ += pt;
                    ss_ += exp(lq);
                }
                const double rt = 1.0 - st_, rq = 1.0 - ss_;
                if (rt > 0.0)
                    kl += rt * (log(rt) - log(rq > 1e-300 ? rq : 1e-300));
                if (kl < 0.0)
                    kl = 0.0; /* rounding at KL ~ 0 */
                kls[(size_t)s * n_all + w * ns + i] = (float)kl;
                sum_kl[s] += kl;
                agree[s] += am == id[0];
                nll[s] += lse - (double)pv[k];
            }
        }
        if (progress)
            progress(user, w + 1, nw);
    }
    for (int s = 0; s < n_students; s++) {
        float *a = kls + (size_t)s * n_all;
        qsort(a, (size_t)n_all, sizeof(float), tq_evl_cmp_f);
        out[s] = (tq_kl_stats){.mean = sum_kl[s] / (double)n_all,
                               .median = tq_evl_pct(a, n_all, 0.5),
                               .p95 = tq_evl_pct(a, n_all, 0.95),
                               .p99 = tq_evl_pct(a, n_all, 0.99),
                               .max = a[n_all - 1],
                               .top1 = (double)agree[s] / (double)n_all,
                               .ppl = exp(nll[s] / (double)n_all),
                               .n = n_all,
                               .kv_bytes_per_token = tq_evl_kv_bytes(&ss[s])};
    }
done:
    if (r.f)
        fclose(r.f);
    for (int s = 0; ss && s < n_students; s++)
        tq_evl_close(&ss[s]);
    tq_free(ss);
    tq_free(ids1);
    tq_free(ams);
    tq_free(pk);
    tq_free(lses);
    tq_free(tok);
    tq_free(buf);
    tq_free(lg);
    tq_free(recs);
    tq_free(ids);
    tq_free(vals);
    tq_free(kls);
    tq_free(sum_kl);
    tq_free(nll);
    tq_free(agree);
    return st;
}
