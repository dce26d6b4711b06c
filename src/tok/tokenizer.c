/* tokenizer.c -- vocabulary tables, encode and decode for byte-level BPE and SentencePiece-style
 * BPE.
 *
 * Encode: (1) added tokens are cut out of the text, leftmost-longest; (2) each remaining segment
 * is NFC-normalized if the model says so, split into valid-UTF-8 runs (an invalid byte is a piece
 * of its own), and (3) split by each pre-tokenizer regex in turn (matches and the gaps between
 * them both become pieces, Hugging Face's "Isolated" behaviour and llama.cpp's regex lists);
 * (4) each piece is merged: symbols start as single bytes (BPE) or UTF-8 characters (SPM), a
 * binary heap holds candidate pairs ordered by (merge rank, position) for BPE or (score desc,
 * position) for SPM, stale heap entries are skipped on pop. O(n log n) per piece: long runs in
 * WikiText never go quadratic. Pair ranks live in an open-addressing hash keyed by (left, right).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tok_internal.h"

/* ---- hashing --------------------------------------------------------------------------- */
static uint64_t hash_bytes(const char *s, size_t n)
{
    uint64_t h = 1469598103934665603ull; /* FNV-1a, then a final mix */
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    h ^= h >> 29;
    h *= 0xbf58476d1ce4e5b9ull;
    return h ^ (h >> 32);
}

static uint64_t hash_u64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint32_t pow2_at_least(uint64_t n)
{
    uint32_t c = 16;
    while (c < n)
        c <<= 1;
    return c;
}

/* ---- UTF-8 ------------------------------------------------------------------------------- */
int tok_utf8_valid(const unsigned char *s, size_t n)
{
    const unsigned c = s[0];
    if (c < 0x80)
        return 1;
    if (c < 0xC2)
        return 0;
    if (c < 0xE0)
        return n >= 2 && (s[1] & 0xC0) == 0x80 ? 2 : 0;
    if (c < 0xF0) {
        if (n < 3 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xE0 && s[1] < 0xA0) || (c == 0xED && s[1] >= 0xA0))
            return 0; /* overlong, surrogate */
        return 3;
    }
    if (c < 0xF5) {
        if (n < 4 || (s[1] & 0xC0) != 0x80 || (s[2] & 0xC0) != 0x80 || (s[3] & 0xC0) != 0x80)
            return 0;
        if ((c == 0xF0 && s[1] < 0x90) || (c == 0xF4 && s[1] >= 0x90))
            return 0;
        return 4;
    }
    return 0;
}

/* Byte-level alphabet (GPT-2's bytes_to_unicode): printable Latin-1 bytes stand for themselves,
 * the other 68 bytes (0-32, 127-160, 173) map in order to U+0100..U+0143. */
static int bl_byte_of_cp(uint32_t cp)
{
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp >= 256 && cp < 256 + 33)
        return (int)(cp - 256); /* 0..32 */
    if (cp >= 256 + 33 && cp < 256 + 67)
        return (int)(cp - 256 - 33 + 127); /* 127..160 */
    if (cp == 256 + 67)
        return 173;
    return -1;
}

bool tok_bl_decode(const char *s, size_t n, char *out, size_t *out_n)
{
    const unsigned char *u = (const unsigned char *)s;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        int len = tok_utf8_valid(u + i, n - i), b;
        uint32_t cp;
        if (len == 1)
            cp = u[i];
        else if (len == 2)
            cp = ((u[i] & 0x1Fu) << 6) | (u[i + 1] & 0x3Fu);
        else
            return false;
        if ((b = bl_byte_of_cp(cp)) < 0)
            return false;
        out[o++] = (char)b;
        i += (size_t)len;
    }
    *out_n = o;
    return true;
}

/* ---- building ---------------------------------------------------------------------------- */
tq_status tok_create(tok_kind kind, int32_t n_vocab, const char *name, tq_tokenizer **out)
{
    tq_tokenizer *t = tq_calloc(1, sizeof(*t));
    *out = NULL;
    if (!t)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", name);
    if (n_vocab <= 0 || n_vocab > (1 << 24)) {
        tq_free(t);
        return TQ_FAIL(TQ_E_FORMAT, "%s: vocabulary size %d outside [1, 16777216]", name,
                       (int)n_vocab);
    }
    t->kind = kind;
    t->n_vocab = n_vocab;
    t->bos = t->eos = t->eot = t->unk = -1;
    t->name = tq_strdup(name ? name : "tokenizer");
    t->off = tq_calloc((size_t)n_vocab + 1, sizeof(uint32_t));
    t->type = tq_calloc((size_t)n_vocab, 1);
    t->tflag = tq_calloc((size_t)n_vocab, 1);
    t->text_cap = (size_t)n_vocab * 8 + 64;
    t->text = tq_malloc(t->text_cap);
    if (kind == TOK_SPM)
        t->score = tq_calloc((size_t)n_vocab, sizeof(float));
    if (!t->name || !t->off || !t->type || !t->tflag || !t->text ||
        (kind == TOK_SPM && !t->score)) {
        tq_tokenizer_free(t);
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for %d tokens", name, (int)n_vocab);
    }
    /* off[i] is filled lazily: tokens arrive in any order, so text is appended and off[] is
     * rebuilt in tok_finish_vocab(); meanwhile off holds start and a parallel length array. */
    *out = t;
    return TQ_OK;
}

/* While building, token i's text is at text[start[i]] with length len[i]; tok_finish_vocab()
 * compacts into off[]. start/len are kept in t->poff (reused) and t->off. */
tq_status tok_set_token(tq_tokenizer *t, int32_t id, const char *s, size_t n, int type,
                        int decode_bl)
{
    size_t need;
    if (id < 0 || id >= t->n_vocab)
        return TQ_FAIL(TQ_E_FORMAT, "%s: token id %d outside [0, %d)", t->name, (int)id,
                       (int)t->n_vocab);
    if (n > (1u << 20))
        return TQ_FAIL(TQ_E_FORMAT, "%s: token %d is %zu bytes long (limit 1 MiB)", t->name,
                       (int)id, n);
    if (!t->poff) {
        t->poff = tq_calloc((size_t)t->n_vocab + 1, sizeof(uint32_t));
        if (!t->poff)
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
    }
    if (t->type[id] != TOKT_NONE)
        return TQ_FAIL(TQ_E_FORMAT, "%s: token id %d defined twice", t->name, (int)id);
    if (!tq_add_ok(t->off[t->n_vocab], n, &need) || need > UINT32_MAX - 16)
        return TQ_FAIL(TQ_E_FORMAT, "%s: vocabulary text exceeds 4 GiB", t->name);
    if (need > t->text_cap) {
        size_t cap = t->text_cap * 2 > need ? t->text_cap * 2 : need;
        char *p = tq_realloc(t->text, cap);
        if (!p)
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
        t->text = p;
        t->text_cap = cap;
    }
    {
        char *dst = t->text + t->off[t->n_vocab];
        size_t len = n;
        if (!(t->kind == TOK_BPE && decode_bl && tok_bl_decode(s, n, dst, &len))) {
            memcpy(dst, s, n);
            len = n;
        }
        t->poff[id] = t->off[t->n_vocab]; /* start */
        t->off[id] = (uint32_t)len;       /* length, until tok_finish_vocab */
        t->off[t->n_vocab] += (uint32_t)len;
    }
    t->type[id] = (uint8_t)(type > 0 && type <= TOKT_BYTE ? type : TOKT_NORMAL);
    return TQ_OK;
}

static int32_t vmap_find(const tq_tokenizer *t, const char *s, size_t n)
{
    uint32_t h = (uint32_t)hash_bytes(s, n) & t->vmask;
    for (;;) {
        int32_t v = t->vmap[h];
        if (!v)
            return -1;
        v--;
        if (t->off[v + 1] - t->off[v] == n && !memcmp(t->text + t->off[v], s, n))
            return v;
        h = (h + 1) & t->vmask;
    }
}

int32_t tok_find(const tq_tokenizer *t, const char *s, size_t n)
{
    return t->vmap ? vmap_find(t, s, n) : -1;
}

static void vmap_insert(tq_tokenizer *t, int32_t id)
{
    const char *s = t->text + t->off[id];
    size_t n = t->off[id + 1] - t->off[id];
    uint32_t h = (uint32_t)hash_bytes(s, n) & t->vmask;
    while (t->vmap[h]) {
        int32_t v = t->vmap[h] - 1;
        if (t->off[v + 1] - t->off[v] == n && !memcmp(t->text + t->off[v], s, n))
            return; /* duplicate text: the first inserted keeps it */
        h = (h + 1) & t->vmask;
    }
    t->vmap[h] = id + 1;
}

static uint8_t hexval(char c)
{
    return (uint8_t)(c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10);
}

tq_status tok_finish_vocab(tq_tokenizer *t)
{
    const int32_t n = t->n_vocab;
    char *text = tq_malloc(t->off[n] + 1);
    uint32_t pos = 0;
    if (!text)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
    for (int32_t i = 0; i < n; i++) { /* compact into id order; holes get empty text */
        uint32_t len = t->type[i] ? t->off[i] : 0;
        if (len)
            memcpy(text + pos, t->text + t->poff[i], len);
        t->off[i] = pos;
        pos += len;
    }
    t->off[n] = pos;
    tq_free(t->text);
    t->text = text;
    tq_free(t->poff);
    t->poff = NULL;

    t->vmask = pow2_at_least((uint64_t)n * 2) - 1;
    t->vmap = tq_calloc((size_t)t->vmask + 1, sizeof(int32_t));
    if (!t->vmap)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
    /* Normal tokens first so that they own their text; then the rest. */
    for (int pass = 0; pass < 2; pass++)
        for (int32_t i = 0; i < n; i++)
            if (t->type[i] && ((t->type[i] == TOKT_NORMAL) == (pass == 0)) &&
                t->off[i + 1] > t->off[i])
                vmap_insert(t, i);

    if (t->kind == TOK_BPE) {
        t->poff = t->off;
        t->ptext = t->text;
    } else {
        /* SPM pieces: U+2581 -> ' ', <0xXX> byte tokens -> the byte. */
        size_t cap = (size_t)t->off[n] + 1;
        uint32_t p = 0;
        t->poff = tq_malloc(((size_t)n + 1) * sizeof(uint32_t));
        t->ptext = tq_malloc(cap);
        if (!t->poff || !t->ptext)
            return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
        for (int32_t i = 0; i < n; i++) {
            const char *s = t->text + t->off[i];
            uint32_t len = t->off[i + 1] - t->off[i];
            t->poff[i] = p;
            if (t->type[i] == TOKT_BYTE && len == 6 && s[0] == '<' && s[1] == '0' && s[2] == 'x' &&
                s[5] == '>') {
                t->ptext[p++] = (char)(hexval(s[3]) << 4 | hexval(s[4]));
                continue;
            }
            for (uint32_t k = 0; k < len; k++) {
                if (k + 2 < len && (unsigned char)s[k] == 0xE2 && (unsigned char)s[k + 1] == 0x96 &&
                    (unsigned char)s[k + 2] == 0x81) {
                    t->ptext[p++] = ' ';
                    k += 2;
                } else {
                    t->ptext[p++] = s[k];
                }
            }
        }
        t->poff[n] = p;
    }
    return TQ_OK;
}

static int32_t pair_find(const tq_tokenizer *t, int32_t a, int32_t b, int32_t *merged)
{
    const uint64_t key = ((uint64_t)(uint32_t)a << 32 | (uint32_t)b) + 1;
    uint32_t h = (uint32_t)hash_u64(key) & t->pmask;
    if (!t->pkey)
        return -1;
    for (;;) {
        uint64_t k = t->pkey[h];
        if (!k)
            return -1;
        if (k == key) {
            *merged = t->pmerged[h];
            return t->prank[h];
        }
        h = (h + 1) & t->pmask;
    }
}

static tq_status pair_grow(tq_tokenizer *t)
{
    uint32_t cap = t->pkey ? (t->pmask + 1) * 2 : 1u << 16;
    uint64_t *key = tq_calloc(cap, sizeof(uint64_t));
    int32_t *rank = tq_malloc((size_t)cap * sizeof(int32_t));
    int32_t *merged = tq_malloc((size_t)cap * sizeof(int32_t));
    if (!key || !rank || !merged) {
        tq_free(key);
        tq_free(rank);
        tq_free(merged);
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory for merges", t->name);
    }
    for (uint32_t i = 0; t->pkey && i <= t->pmask; i++) {
        if (!t->pkey[i])
            continue;
        uint32_t h = (uint32_t)hash_u64(t->pkey[i]) & (cap - 1);
        while (key[h])
            h = (h + 1) & (cap - 1);
        key[h] = t->pkey[i];
        rank[h] = t->prank[i];
        merged[h] = t->pmerged[i];
    }
    tq_free(t->pkey);
    tq_free(t->prank);
    tq_free(t->pmerged);
    t->pkey = key;
    t->prank = rank;
    t->pmerged = merged;
    t->pmask = cap - 1;
    t->merge_cap = (int32_t)(cap / 2);
    return TQ_OK;
}

tq_status tok_add_merge(tq_tokenizer *t, const char *a, size_t an, const char *b, size_t bn,
                        int64_t *skipped)
{
    char small[512], *buf = small;
    size_t la, lb;
    int32_t ia, ib, im, dummy;
    tq_status st = TQ_OK;
    if (an + bn > sizeof(small) && !(buf = tq_malloc(an + bn)))
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
    if (!tok_bl_decode(a, an, buf, &la) || !tok_bl_decode(b, bn, buf + la, &lb)) {
        /* not byte-level text: compare the strings as they are */
        memcpy(buf, a, an);
        memcpy(buf + an, b, bn);
        la = an;
        lb = bn;
    }
    ia = tok_find(t, buf, la);
    ib = tok_find(t, buf + la, lb);
    im = tok_find(t, buf, la + lb);
    if (buf != small)
        tq_free(buf);
    if (ia < 0 || ib < 0 || im < 0) {
        (*skipped)++;
        return TQ_OK;
    }
    if (pair_find(t, ia, ib, &dummy) >= 0)
        return TQ_OK; /* a repeated rule keeps its first (better) rank */
    if (t->n_merges >= t->merge_cap && (st = pair_grow(t)))
        return st;
    {
        const uint64_t key = ((uint64_t)(uint32_t)ia << 32 | (uint32_t)ib) + 1;
        uint32_t h = (uint32_t)hash_u64(key) & t->pmask;
        while (t->pkey[h])
            h = (h + 1) & t->pmask;
        t->pkey[h] = key;
        t->prank[h] = t->n_merges++;
        t->pmerged[h] = im;
    }
    return TQ_OK;
}

tq_status tok_add_regex(tq_tokenizer *t, const char *pattern)
{
    int err = 0;
    PCRE2_SIZE at = 0;
    pcre2_code *re;
    if (t->n_re >= TOK_MAX_RE)
        return TQ_FAIL(TQ_E_UNSUPPORTED, "%s: more than %d pre-tokenizer regexes", t->name,
                       TOK_MAX_RE);
    re = pcre2_compile((PCRE2_SPTR)pattern, PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP, &err, &at,
                       NULL);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof(msg));
        return TQ_FAIL(TQ_E_FORMAT, "%s: pre-tokenizer regex does not compile at offset %zu: %s",
                       t->name, (size_t)at, (const char *)msg);
    }
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE); /* optional: falls back to the interpreter */
    t->re[t->n_re++] = re;
    return TQ_OK;
}

/* Added tokens ordered by first byte, then longest first (leftmost-longest matching), then id:
 * one 64-bit key per token (first byte | 2^24 - 1 - length | id), sorted ascending. */
static int u64_cmp(const void *a, const void *b)
{
    const uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static tq_status added_sort(const tq_tokenizer *t, int32_t *ids, int32_t n)
{
    uint64_t *key = tq_malloc(((size_t)n + 1) * sizeof(uint64_t));
    if (!key)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
    for (int32_t i = 0; i < n; i++) {
        const uint32_t len = t->off[ids[i] + 1] - t->off[ids[i]]; /* <= 1 MiB (tok_set_token) */
        key[i] = (uint64_t)(unsigned char)t->text[t->off[ids[i]]] << 56 |
                 (uint64_t)(0xFFFFFFu - len) << 32 | (uint32_t)ids[i];
    }
    qsort(key, (size_t)n, sizeof(uint64_t), u64_cmp);
    for (int32_t i = 0; i < n; i++)
        ids[i] = (int32_t)(uint32_t)key[i];
    tq_free(key);
    return TQ_OK;
}

tq_status tok_finish(tq_tokenizer *t)
{
    int32_t n = 0;
    tq_status st;
    for (int b = 0; b < 256; b++) {
        char c = (char)b;
        t->byte_id[b] = -1;
        if (t->kind == TOK_BPE) {
            t->byte_id[b] = tok_find(t, &c, 1);
        } else {
            char hex[7];
            snprintf(hex, sizeof(hex), "<0x%02X>", b);
            t->byte_id[b] = tok_find(t, hex, 6);
        }
    }
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->tflag[i] & TOKF_ADDED) && t->off[i + 1] > t->off[i])
            n++;
    t->added = tq_malloc(((size_t)n + 1) * sizeof(int32_t));
    if (!t->added)
        return TQ_FAIL(TQ_E_NOMEM, "%s: out of memory", t->name);
    t->n_added = 0;
    for (int32_t i = 0; i < t->n_vocab; i++)
        if ((t->tflag[i] & TOKF_ADDED) && t->off[i + 1] > t->off[i])
            t->added[t->n_added++] = i;
    if ((st = added_sort(t, t->added, t->n_added)))
        return st;
    for (int b = 0, k = 0; b <= 256; b++) {
        while (k < t->n_added && (unsigned char)t->text[t->off[t->added[k]]] < b)
            k++;
        t->added_first[b] = k;
    }
    if (t->kind == TOK_BPE) {
        int missing = 0;
        for (int b = 0; b < 256; b++)
            missing += t->byte_id[b] < 0;
        if (missing)
            tq_log(TQ_LOG_INFO, "%s: %d of 256 single-byte tokens missing; such bytes are dropped",
                   t->name, missing);
    }
    return TQ_OK;
}

void tq_tokenizer_free(tq_tokenizer *t)
{
    if (!t)
        return;
    if (t->poff != t->off) {
        tq_free(t->poff);
        tq_free(t->ptext);
    }
    tq_free(t->off);
    tq_free(t->text);
    tq_free(t->type);
    tq_free(t->tflag);
    tq_free(t->score);
    tq_free(t->vmap);
    tq_free(t->pkey);
    tq_free(t->prank);
    tq_free(t->pmerged);
    tq_free(t->added);
    for (int i = 0; i < t->n_re; i++)
        pcre2_code_free(t->re[i]);
    tq_free(t->chat_template);
    tq_free(t->name);
    tq_free(t);
}

/* ---- queries ----------------------------------------------------------------------------- */
int32_t tq_tokenizer_vocab_size(const tq_tokenizer *t)
{
    return t ? t->n_vocab : 0;
}
int32_t tq_tokenizer_bos(const tq_tokenizer *t)
{
    return t ? t->bos : -1;
}
int32_t tq_tokenizer_eos(const tq_tokenizer *t)
{
    return t ? t->eos : -1;
}
int32_t tq_tokenizer_eot(const tq_tokenizer *t)
{
    return t ? t->eot : -1;
}
int tq_tokenizer_add_bos(const tq_tokenizer *t)
{
    return t && t->add_bos && t->bos >= 0;
}
int tq_tokenizer_is_special(const tq_tokenizer *t, int32_t id)
{
    return t && id >= 0 && id < t->n_vocab && t->type[id] == TOKT_CONTROL;
}
int32_t tq_tokenizer_lookup(const tq_tokenizer *t, const char *text, size_t len)
{
    return t && (text || !len) ? tok_find(t, text, len) : -1;
}
const char *tq_tokenizer_piece(const tq_tokenizer *t, int32_t id, size_t *len)
{
    if (!t || id < 0 || id >= t->n_vocab)
        return NULL;
    *len = t->poff[id + 1] - t->poff[id];
    return t->ptext + t->poff[id];
}
const char *tq_tokenizer_kind(const tq_tokenizer *t)
{
    return !t ? "none" : t->kind == TOK_BPE ? "bpe" : "spm";
}
const char *tq_tokenizer_chat_template(const tq_tokenizer *t)
{
    return t && t->chat_template ? t->chat_template : "";
}

/* ---- encode ------------------------------------------------------------------------------ */
typedef struct heap_ent {
    float key;   /* BPE: rank; SPM: -score (smaller pops first) */
    int32_t pos; /* left symbol index */
    int32_t a;   /* BPE: left id;  SPM: byte size of the merged text */
    int32_t b;   /* BPE: right id; SPM: right symbol index */
} heap_ent;

typedef struct enc {
    const tq_tokenizer *t;
    int32_t *ids;
    int64_t cap;
    int64_t n;
    /* symbols of the piece being merged */
    int32_t *sid;  /* token id (BPE) */
    int32_t *soff; /* byte offset in the piece (SPM) */
    int32_t *slen; /* byte length (SPM), 0 = merged away */
    int32_t *prev;
    int32_t *next;
    heap_ent *heap;
    size_t hn;
    size_t wcap; /* symbols the arrays hold */
    pcre2_match_data *md[TOK_MAX_RE];
    char *buf; /* SPM escaped text / NFC output */
    size_t buf_cap;
    /* Cache of merged pieces for this call (long texts repeat most words): open addressing,
     * slots hold (hash, bytes, ids) in two fixed arenas; full arenas just stop caching. */
    struct pc_ent {
        uint64_t h;
        uint32_t boff, blen; /* piece bytes in pc_bytes; blen 0 = empty slot */
        uint32_t ioff, in;   /* its ids in pc_ids */
    } * pc;
    uint32_t pc_mask;
    char *pc_bytes;
    uint32_t pc_bytes_n, pc_bytes_cap;
    int32_t *pc_ids;
    uint32_t pc_ids_n, pc_ids_cap;
    tq_status st;
} enc;

enum { PC_MAX_PIECE = 64, PC_PROBES = 8 };

/* pc_init() -- size the piece cache from the text length (none for short texts). */
static void pc_init(enc *e, size_t len)
{
    uint32_t entries = 256;
    if (e->t->kind != TOK_BPE || len < 1024)
        return;
    while (entries < 16384 && entries < len / 8)
        entries *= 2;
    e->pc = tq_calloc(entries, sizeof(*e->pc));
    e->pc_bytes = tq_malloc((size_t)entries * 12);
    e->pc_ids = tq_malloc((size_t)entries * 3 * sizeof(int32_t));
    if (!e->pc || !e->pc_bytes || !e->pc_ids) { /* no cache, no failure */
        tq_free(e->pc);
        tq_free(e->pc_bytes);
        tq_free(e->pc_ids);
        e->pc = NULL;
        e->pc_bytes = NULL;
        e->pc_ids = NULL;
        return;
    }
    e->pc_mask = entries - 1;
    e->pc_bytes_cap = entries * 12;
    e->pc_ids_cap = entries * 3;
}

static inline void emit(enc *e, int32_t id)
{
    if (id < 0)
        return;
    if (e->n < e->cap)
        e->ids[e->n] = id;
    e->n++;
}

static bool heap_less(const heap_ent *x, const heap_ent *y)
{
    return x->key < y->key || (x->key == y->key && x->pos < y->pos);
}

static void heap_push(enc *e, heap_ent v)
{
    size_t i = e->hn++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!heap_less(&v, &e->heap[p]))
            break;
        e->heap[i] = e->heap[p];
        i = p;
    }
    e->heap[i] = v;
}

static heap_ent heap_pop(enc *e)
{
    heap_ent top = e->heap[0], last = e->heap[--e->hn];
    size_t i = 0;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= e->hn)
            break;
        if (c + 1 < e->hn && heap_less(&e->heap[c + 1], &e->heap[c]))
            c++;
        if (!heap_less(&e->heap[c], &last))
            break;
        e->heap[i] = e->heap[c];
        i = c;
    }
    if (e->hn)
        e->heap[i] = last;
    return top;
}

/* reserve() -- make the symbol arrays hold n symbols (doubling; a long piece grows them once). */
static bool reserve(enc *e, size_t n)
{
    size_t cap = e->wcap ? e->wcap : 256;
    size_t hbytes;
    if (n <= e->wcap)
        return true;
    while (cap < n)
        cap *= 2;
    tq_free(e->sid);
    tq_free(e->soff);
    tq_free(e->slen);
    tq_free(e->prev);
    tq_free(e->next);
    tq_free(e->heap);
    e->wcap = 0;
    e->sid = tq_malloc(cap * sizeof(int32_t));
    e->soff = tq_malloc(cap * sizeof(int32_t));
    e->slen = tq_malloc(cap * sizeof(int32_t));
    e->prev = tq_malloc(cap * sizeof(int32_t));
    e->next = tq_malloc(cap * sizeof(int32_t));
    e->heap = tq_mul_ok(cap * 3 + 4, sizeof(heap_ent), &hbytes) ? tq_malloc(hbytes) : NULL;
    if (!e->sid || !e->soff || !e->slen || !e->prev || !e->next || !e->heap) {
        e->st = TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory for a %zu-byte piece", n);
        return false;
    }
    e->wcap = cap;
    return true;
}

static void bpe_push_pair(enc *e, int32_t l)
{
    int32_t r = e->next[l], merged;
    int32_t rank;
    if (r < 0)
        return;
    rank = pair_find(e->t, e->sid[l], e->sid[r], &merged);
    if (rank < 0)
        return;
    heap_push(e, (heap_ent){(float)rank, l, e->sid[l], e->sid[r]});
}

/* bpe_piece() -- byte-level BPE of one pre-token. */
static void bpe_piece(enc *e, const unsigned char *s, size_t n)
{
    const tq_tokenizer *t = e->t;
    uint64_t h = 0;
    struct pc_ent *slot = NULL;
    if (n == 1) {
        emit(e, t->byte_id[s[0]]);
        return;
    }
    if (t->ignore_merges) {
        int32_t id = tok_find(t, (const char *)s, n);
        if (id >= 0 && t->type[id] == TOKT_NORMAL) {
            emit(e, id);
            return;
        }
    }
    if (e->pc && n <= PC_MAX_PIECE) {
        h = hash_bytes((const char *)s, n);
        for (uint32_t k = 0; k < PC_PROBES; k++) {
            struct pc_ent *c = &e->pc[(h + k) & e->pc_mask];
            if (!c->blen) {
                slot = c;
                break;
            }
            if (c->h == h && c->blen == n && !memcmp(e->pc_bytes + c->boff, s, n)) {
                for (uint32_t i = 0; i < c->in; i++)
                    emit(e, e->pc_ids[c->ioff + i]);
                return;
            }
        }
    }
    if (!reserve(e, n))
        return;
    for (size_t i = 0; i < n; i++) {
        e->sid[i] = t->byte_id[s[i]];
        e->prev[i] = (int32_t)i - 1;
        e->next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
    }
    e->hn = 0;
    for (size_t i = 0; i + 1 < n; i++)
        bpe_push_pair(e, (int32_t)i);
    while (e->hn) {
        heap_ent hp = heap_pop(e);
        int32_t l = hp.pos, r = e->next[l], merged;
        if (e->sid[l] != hp.a || r < 0 || e->sid[r] != hp.b)
            continue; /* stale: one side changed since the pair was queued */
        if (pair_find(t, hp.a, hp.b, &merged) < 0)
            continue;
        e->sid[l] = merged;
        e->sid[r] = -2; /* dead */
        e->next[l] = e->next[r];
        if (e->next[r] >= 0)
            e->prev[e->next[r]] = l;
        if (e->prev[l] >= 0)
            bpe_push_pair(e, e->prev[l]);
        bpe_push_pair(e, l);
    }
    if (slot && e->pc_bytes_n + n <= e->pc_bytes_cap && e->pc_ids_n + n <= e->pc_ids_cap) {
        slot->h = h;
        slot->boff = e->pc_bytes_n;
        slot->blen = (uint32_t)n;
        slot->ioff = e->pc_ids_n;
        slot->in = 0;
        memcpy(e->pc_bytes + e->pc_bytes_n, s, n);
        e->pc_bytes_n += (uint32_t)n;
        for (int32_t i = 0; i >= 0; i = e->next[i])
            if (e->sid[i] >= 0)
                e->pc_ids[e->pc_ids_n + slot->in++] = e->sid[i];
        e->pc_ids_n += slot->in;
    }
    for (int32_t i = 0; i >= 0; i = e->next[i])
        emit(e, e->sid[i]);
}

/* ---- SentencePiece-style ------------------------------------------------------------------ */
static void spm_try_pair(enc *e, const char *s, int32_t l, int32_t r)
{
    int32_t id;
    if (l < 0 || r < 0)
        return;
    id = tok_find(e->t, s + e->soff[l], (size_t)(e->slen[l] + e->slen[r]));
    if (id < 0)
        return;
    heap_push(e, (heap_ent){-e->t->score[id], l, e->slen[l] + e->slen[r], r});
}

static void spm_emit_symbol(enc *e, const char *s, int32_t i)
{
    const tq_tokenizer *t = e->t;
    int32_t id = tok_find(t, s + e->soff[i], (size_t)e->slen[i]);
    if (id >= 0) {
        emit(e, id);
        return;
    }
    for (int32_t k = 0; k < e->slen[i]; k++) { /* byte fallback, else unknown */
        int32_t b = t->byte_id[(unsigned char)s[e->soff[i] + k]];
        emit(e, b >= 0 ? b : t->unk);
    }
}

static void spm_text(enc *e, const char *s, size_t n)
{
    int32_t m = 0;
    if (!n || !reserve(e, n))
        return;
    for (size_t i = 0; i < n; m++) { /* symbols: UTF-8 characters (lead-byte length, clipped) */
        unsigned c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
        if ((c & 0xC0) == 0x80)
            len = 1;
        if (len > n - i)
            len = n - i;
        e->soff[m] = (int32_t)i;
        e->slen[m] = (int32_t)len;
        e->prev[m] = m - 1;
        e->next[m] = -1;
        if (m > 0)
            e->next[m - 1] = m;
        i += len;
    }
    e->hn = 0;
    for (int32_t i = 1; i < m; i++)
        spm_try_pair(e, s, i - 1, i);
    while (e->hn) {
        heap_ent h = heap_pop(e);
        int32_t l = h.pos, r = h.b;
        if (e->slen[l] == 0 || e->slen[r] == 0 || e->slen[l] + e->slen[r] != h.a)
            continue;
        e->slen[l] += e->slen[r];
        e->slen[r] = 0;
        e->next[l] = e->next[r];
        if (e->next[r] >= 0)
            e->prev[e->next[r]] = l;
        spm_try_pair(e, s, e->prev[l], l);
        spm_try_pair(e, s, l, e->next[l]);
    }
    for (int32_t i = 0; i >= 0; i = e->next[i])
        spm_emit_symbol(e, s, i);
}

static bool buf_reserve(enc *e, size_t n)
{
    if (n <= e->buf_cap)
        return true;
    tq_free(e->buf);
    e->buf = tq_malloc(n);
    e->buf_cap = e->buf ? n : 0;
    if (!e->buf)
        e->st = TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory for %zu bytes of text", n);
    return e->buf != NULL;
}

/* ---- pre-tokenization ---------------------------------------------------------------------- */
static void split_level(enc *e, int level, const char *s, size_t n)
{
    const tq_tokenizer *t = e->t;
    size_t pos = 0, search = 0;
    if (!n || e->st)
        return;
    if (level == t->n_re) {
        bpe_piece(e, (const unsigned char *)s, n);
        return;
    }
    while (search < n) {
        int rc = pcre2_match(t->re[level], (PCRE2_SPTR)s, n, search, PCRE2_NO_UTF_CHECK,
                             e->md[level], NULL);
        const PCRE2_SIZE *ov;
        if (rc == PCRE2_ERROR_NOMATCH)
            break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof(msg));
            e->st = TQ_FAIL(TQ_E_UNSUPPORTED, "%s: pre-tokenizer regex %d failed: %s", t->name,
                            level, (const char *)msg);
            return;
        }
        ov = pcre2_get_ovector_pointer(e->md[level]);
        if (ov[1] <= ov[0]) { /* an empty match is no piece: search again one character on */
            search = ov[0] + 1;
            while (search < n && ((unsigned char)s[search] & 0xC0) == 0x80)
                search++;
            continue;
        }
        if (ov[0] > pos)
            split_level(e, level + 1, s + pos, ov[0] - pos); /* the gap before the match */
        split_level(e, level + 1, s + ov[0], ov[1] - ov[0]);
        pos = search = ov[1];
    }
    if (pos < n)
        split_level(e, level + 1, s + pos, n - pos);
}

/* bpe_text() -- a segment without added tokens: NFC, UTF-8 runs, regexes, merges. */
static void bpe_text(enc *e, const char *s, size_t n)
{
    const tq_tokenizer *t = e->t;
    char *norm = NULL;
    size_t i = 0;
    if (!n)
        return;
    if (t->prefix_space && s[0] != ' ') {
        if (!buf_reserve(e, n + 1))
            return;
        e->buf[0] = ' ';
        memcpy(e->buf + 1, s, n);
        s = e->buf;
        n++;
    }
    while (i < n && !e->st) {
        size_t j = i;
        int len;
        while (j < n && (len = tok_utf8_valid((const unsigned char *)s + j, n - j)) > 0)
            j += (size_t)len;
        if (j > i) {
            const char *run = s + i;
            size_t rn = j - i;
            if (t->nfc) {
                size_t nn;
                tq_status st = tok_nfc(run, rn, &norm, &nn);
                if (st) {
                    e->st = st;
                    return;
                }
                split_level(e, 0, norm, nn);
                tq_free(norm);
                norm = NULL;
            } else {
                split_level(e, 0, run, rn);
            }
        }
        if (j < n) /* an invalid byte: its own piece */
            bpe_piece(e, (const unsigned char *)s + j, 1);
        i = j + 1;
    }
}

static void spm_segment(enc *e, const char *s, size_t n, bool space_prefix)
{
    size_t need, o = 0;
    if (!n && !space_prefix)
        return;
    if (!tq_mul_ok(n + 1, 3, &need) || !buf_reserve(e, need))
        return;
    if (space_prefix) {
        memcpy(e->buf, "\xE2\x96\x81", 3);
        o = 3;
    }
    for (size_t i = 0; i < n; i++) {
        if (s[i] == ' ') {
            memcpy(e->buf + o, "\xE2\x96\x81", 3);
            o += 3;
        } else {
            e->buf[o++] = s[i];
        }
    }
    spm_text(e, e->buf, o);
}

/* added_at() -- id of the longest usable added token starting at s (n bytes left), or -1. */
static int32_t added_at(const tq_tokenizer *t, const char *s, size_t n, unsigned flags)
{
    const unsigned char c = (unsigned char)s[0];
    for (int32_t k = t->added_first[c]; k < t->added_first[c + 1]; k++) {
        int32_t id = t->added[k];
        uint32_t len = t->off[id + 1] - t->off[id];
        if (t->type[id] == TOKT_CONTROL && !(flags & TQ_TOK_PARSE_SPECIAL))
            continue;
        if (len <= n && !memcmp(s, t->text + t->off[id], len))
            return id;
    }
    return -1;
}

static bool is_ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

static void segment(enc *e, const char *s, size_t n, bool after_special)
{
    if (e->t->kind == TOK_BPE)
        bpe_text(e, s, n);
    else if (n)
        spm_segment(e, s, n, e->t->spm_space_prefix && after_special);
}

tq_status tq_tokenizer_encode(const tq_tokenizer *t, const char *text, size_t len, unsigned flags,
                              int32_t *ids, int64_t cap, int64_t *n_out)
{
    enc e;
    size_t pos = 0, seg = 0;
    bool after_special = true;
    if (n_out)
        *n_out = 0;
    if (!t || (!text && len) || (!ids && cap > 0) || cap < 0 || !n_out)
        return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_encode: NULL tokenizer/text/ids/n_out or cap < 0");
    if (len > (1u << 30))
        return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_encode: %zu bytes of text (limit 1 GiB per call)",
                       len);
    memset(&e, 0, sizeof(e));
    e.t = t;
    e.ids = ids;
    e.cap = cap;
    for (int i = 0; i < t->n_re; i++)
        if (!(e.md[i] = pcre2_match_data_create_from_pattern(t->re[i], NULL))) {
            e.st = TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory");
            goto out;
        }
    pc_init(&e, len);
    if ((flags & TQ_TOK_ADD_BOS) || ((flags & TQ_TOK_ADD_BOS_AUTO) && tq_tokenizer_add_bos(t)))
        emit(&e, t->bos);
    while (pos < len && !e.st) {
        int32_t id = -1;
        size_t start = pos, end;
        if (t->added_first[(unsigned char)text[pos]] < t->added_first[(unsigned char)text[pos] + 1])
            id = added_at(t, text + pos, len - pos, flags);
        if (id < 0) {
            pos++;
            continue;
        }
        end = pos + (t->off[id + 1] - t->off[id]);
        if (t->tflag[id] & TOKF_LSTRIP)
            while (start > seg && is_ws(text[start - 1]))
                start--;
        if (t->tflag[id] & TOKF_RSTRIP)
            while (end < len && is_ws(text[end]))
                end++;
        segment(&e, text + seg, start - seg, after_special);
        emit(&e, id);
        after_special = t->type[id] == TOKT_CONTROL || t->type[id] == TOKT_USER;
        pos = seg = end;
    }
    if (!e.st)
        segment(&e, text + seg, len - seg, after_special || seg == 0);
out:
    for (int i = 0; i < t->n_re; i++)
        pcre2_match_data_free(e.md[i]);
    tq_free(e.sid);
    tq_free(e.soff);
    tq_free(e.slen);
    tq_free(e.prev);
    tq_free(e.next);
    tq_free(e.heap);
    tq_free(e.buf);
    tq_free(e.pc);
    tq_free(e.pc_bytes);
    tq_free(e.pc_ids);
    if (e.st)
        return e.st;
    *n_out = e.n;
    if (e.n > cap)
        return TQ_FAIL(TQ_E_OVERFLOW, "tq_tokenizer_encode: %lld tokens do not fit in cap %lld",
                       (long long)e.n, (long long)cap);
    return TQ_OK;
}

/* ---- decode ------------------------------------------------------------------------------ */
/* piece_for() -- bytes of one token in a decode stream (index = position in the stream). */
static const char *piece_for(const tq_tokenizer *t, int32_t id, int64_t index, unsigned flags,
                             size_t *len)
{
    const char *p = t->ptext + t->poff[id];
    *len = t->poff[id + 1] - t->poff[id];
    if ((flags & TQ_TOK_SKIP_SPECIAL) && t->type[id] == TOKT_CONTROL) {
        *len = 0;
        return p;
    }
    if (t->kind == TOK_SPM && index == 0 && t->spm_space_prefix && *len && p[0] == ' ' &&
        t->type[id] == TOKT_NORMAL) {
        p++;
        (*len)--;
    }
    return p;
}

tq_status tq_tokenizer_decode(const tq_tokenizer *t, const int32_t *ids, int64_t n, unsigned flags,
                              char *dst, size_t cap, size_t *n_out)
{
    size_t o = 0;
    int64_t index = 0;
    if (n_out)
        *n_out = 0;
    if (!t || (!ids && n > 0) || (!dst && cap) || !n_out)
        return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_decode: NULL tokenizer/ids/dst/n_out");
    for (int64_t i = 0; i < n; i++) {
        size_t len;
        const char *p;
        if (ids[i] < 0 || ids[i] >= t->n_vocab)
            return TQ_FAIL(TQ_E_ARG, "tq_tokenizer_decode: token %lld is id %d, outside [0, %d)",
                           (long long)i, (int)ids[i], (int)t->n_vocab);
        p = piece_for(t, ids[i], index, flags, &len);
        if (t->kind == TOK_SPM && t->type[ids[i]] == TOKT_CONTROL)
            ; /* a leading BOS does not consume the leading-space rule */
        else
            index++;
        if (o + len <= cap)
            memcpy(dst + o, p, len);
        o += len;
    }
    *n_out = o;
    if (o > cap)
        return TQ_FAIL(TQ_E_OVERFLOW, "tq_tokenizer_decode: %zu bytes do not fit in cap %zu", o,
                       cap);
    return TQ_OK;
}

void tq_tok_stream_init(tq_tok_stream *s, const tq_tokenizer *t, unsigned flags)
{
    memset(s, 0, sizeof(*s));
    s->tok = t;
    s->flags = flags;
}

/* utf8_need() -- total length announced by lead byte c (1 for bytes that cannot lead). */
static int utf8_need(unsigned c)
{
    return c >= 0xC2 && c < 0xE0 ? 2 : c >= 0xE0 && c < 0xF0 ? 3 : c >= 0xF0 && c < 0xF5 ? 4 : 1;
}

/* cont_ok() -- may byte c be the k-th byte (k >= 1) of a character led by `lead`? */
static bool cont_ok(unsigned lead, int k, unsigned c)
{
    if (k == 1 && lead == 0xE0)
        return c >= 0xA0 && c <= 0xBF;
    if (k == 1 && lead == 0xED)
        return c >= 0x80 && c <= 0x9F;
    if (k == 1 && lead == 0xF0)
        return c >= 0x90 && c <= 0xBF;
    if (k == 1 && lead == 0xF4)
        return c >= 0x80 && c <= 0x8F;
    return (c & 0xC0) == 0x80;
}

/* drain() -- move complete characters (and bytes that cannot start one) from held to dst. */
static size_t drain(tq_tok_stream *s, char *dst)
{
    size_t o = 0;
    while (s->n_held > 0) {
        int need = utf8_need(s->held[0]), k = 1, out;
        while (k < s->n_held && k < need && cont_ok(s->held[0], k, s->held[k]))
            k++;
        if (k == need)
            out = need; /* a complete character */
        else if (k < s->n_held)
            out = 1; /* broken by a byte that cannot continue it: the lead byte goes alone */
        else
            break; /* a valid prefix: wait for more */
        memcpy(dst + o, s->held, (size_t)out);
        o += (size_t)out;
        memmove(s->held, s->held + out, (size_t)(s->n_held - out));
        s->n_held -= out;
    }
    return o;
}

tq_status tq_tok_stream_put(tq_tok_stream *s, int32_t id, char *dst, size_t cap, size_t *n_out)
{
    const tq_tokenizer *t = s ? s->tok : NULL;
    size_t len, o = 0;
    const char *p;
    if (n_out)
        *n_out = 0;
    if (!t || !n_out || (!dst && cap))
        return TQ_FAIL(TQ_E_ARG, "tq_tok_stream_put: NULL stream/dst/n_out");
    if (id < 0 || id >= t->n_vocab)
        return TQ_FAIL(TQ_E_ARG, "tq_tok_stream_put: id %d outside [0, %d)", (int)id,
                       (int)t->n_vocab);
    p = piece_for(t, id, s->n_tokens, s->flags, &len);
    if (len + (size_t)s->n_held > cap)
        return TQ_FAIL(TQ_E_OVERFLOW, "tq_tok_stream_put: %zu bytes do not fit in cap %zu",
                       len + (size_t)s->n_held, cap);
    if (!(t->kind == TOK_SPM && t->type[id] == TOKT_CONTROL))
        s->n_tokens++;
    for (size_t i = 0; i < len; i++) {
        s->held[s->n_held++] = (unsigned char)p[i];
        if (s->n_held == 4 || i + 1 == len)
            o += drain(s, dst + o);
    }
    *n_out = o;
    return TQ_OK;
}

tq_status tq_tok_stream_flush(tq_tok_stream *s, char *dst, size_t cap, size_t *n_out)
{
    if (n_out)
        *n_out = 0;
    if (!s || !n_out || (!dst && cap))
        return TQ_FAIL(TQ_E_ARG, "tq_tok_stream_flush: NULL stream/dst/n_out");
    if ((size_t)s->n_held > cap)
        return TQ_FAIL(TQ_E_OVERFLOW, "tq_tok_stream_flush: %d bytes do not fit in cap %zu",
                       s->n_held, cap);
    memcpy(dst, s->held, (size_t)s->n_held);
    *n_out = (size_t)s->n_held;
    s->n_held = 0;
    return TQ_OK;
}
