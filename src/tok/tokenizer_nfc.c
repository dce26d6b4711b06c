/* tokenizer_nfc.c -- Unicode NFC normalization (the "NFC" normalizer of tokenizer.json, Qwen2/3).
 *
 * UAX #15: decompose every character canonically (tables in tok_nfc_data.h, Hangul syllables
 * algorithmically), put each run of non-starters in canonical order (stable sort by combining
 * class), then recompose: a character joins the last starter when no character between them is
 * a starter or has a combining class >= its own, and the pair is a primary composite.
 * Fast path: text whose code points are all below U+0300 is already NFC (nothing there decomposes
 * into something different or composes with a neighbour), and is copied.
 */
#include <string.h>

#include "tok_internal.h"
#include "tok_nfc_data.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))
enum { SBASE = 0xAC00, LBASE = 0x1100, VBASE = 0x1161, TBASE = 0x11A7 };
enum { LCOUNT = 19, VCOUNT = 21, TCOUNT = 28, NCOUNT = VCOUNT * TCOUNT, SCOUNT = LCOUNT * NCOUNT };

static int ccc_of(uint32_t cp)
{
    size_t lo = 0, hi = NELEM(nfc_ccc);
    if (cp < 0x300)
        return 0;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (cp < nfc_ccc[mid][0])
            hi = mid;
        else if (cp > nfc_ccc[mid][1])
            lo = mid + 1;
        else
            return (int)nfc_ccc[mid][2];
    }
    return 0;
}

/* decompose() -- canonical decomposition of cp into out (<= 4 code points); count returned. */
static int decompose(uint32_t cp, uint32_t *out)
{
    size_t lo = 0, hi = NELEM(nfc_dcp);
    if (cp >= SBASE && cp < SBASE + SCOUNT) {
        uint32_t s = cp - SBASE;
        out[0] = LBASE + s / NCOUNT;
        out[1] = VBASE + (s % NCOUNT) / TCOUNT;
        if (s % TCOUNT) {
            out[2] = TBASE + s % TCOUNT;
            return 3;
        }
        return 2;
    }
    if (cp >= 0xC0)
        while (lo < hi) {
            size_t mid = (lo + hi) / 2;
            if (cp < nfc_dcp[mid][0]) {
                hi = mid;
            } else if (cp > nfc_dcp[mid][0]) {
                lo = mid + 1;
            } else {
                uint32_t n = nfc_dcp[mid][2];
                memcpy(out, nfc_dseq + nfc_dcp[mid][1], n * sizeof(uint32_t));
                return (int)n;
            }
        }
    out[0] = cp;
    return 1;
}

static uint32_t compose(uint32_t a, uint32_t b)
{
    size_t lo = 0, hi = NELEM(nfc_comp);
    if (a >= LBASE && a < LBASE + LCOUNT && b >= VBASE && b < VBASE + VCOUNT)
        return SBASE + ((a - LBASE) * VCOUNT + (b - VBASE)) * TCOUNT;
    if (a >= SBASE && a < SBASE + SCOUNT && (a - SBASE) % TCOUNT == 0 && b > TBASE &&
        b < TBASE + TCOUNT)
        return a + (b - TBASE);
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (a < nfc_comp[mid][0] || (a == nfc_comp[mid][0] && b < nfc_comp[mid][1]))
            hi = mid;
        else if (a > nfc_comp[mid][0] || b > nfc_comp[mid][1])
            lo = mid + 1;
        else
            return nfc_comp[mid][2];
    }
    return 0;
}

static uint32_t utf8_get(const unsigned char *s, int len)
{
    switch (len) {
    case 1:
        return s[0];
    case 2:
        return (uint32_t)(s[0] & 0x1F) << 6 | (s[1] & 0x3F);
    case 3:
        return (uint32_t)(s[0] & 0x0F) << 12 | (uint32_t)(s[1] & 0x3F) << 6 | (s[2] & 0x3F);
    default:
        return (uint32_t)(s[0] & 0x07) << 18 | (uint32_t)(s[1] & 0x3F) << 12 |
               (uint32_t)(s[2] & 0x3F) << 6 | (s[3] & 0x3F);
    }
}

static size_t utf8_put(uint32_t cp, char *o)
{
    if (cp < 0x80) {
        o[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (char)(0xC0 | cp >> 6);
        o[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (char)(0xE0 | cp >> 12);
        o[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (char)(0xF0 | cp >> 18);
    o[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

tq_status tok_nfc(const char *s, size_t n, char **out, size_t *out_n)
{
    const unsigned char *u = (const unsigned char *)s;
    uint32_t *cps = NULL;
    size_t m = 0, cap, bytes;
    bool simple = true;
    *out = NULL;
    for (size_t i = 0; i < n; i++)
        if (u[i] >= 0xCC) { /* lead bytes of U+0300 and above */
            simple = false;
            break;
        }
    if (simple) {
        *out = tq_malloc(n ? n : 1);
        if (!*out)
            return TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory for NFC");
        memcpy(*out, s, n);
        *out_n = n;
        return TQ_OK;
    }
    /* Each byte decomposes into at most 4 code points (the longest canonical decomposition is
     * 4, from a 3-byte character; Hangul gives 3 from 3 bytes). */
    if (!tq_mul_ok(n, 4 * sizeof(uint32_t), &cap) || !(cps = tq_malloc(cap)))
        return TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory for NFC of %zu bytes", n);
    for (size_t i = 0; i < n;) {
        int len = tok_utf8_valid(u + i, n - i);
        uint32_t d[8];
        int k;
        if (len <= 0) /* callers pass valid UTF-8 only; a stray byte is read as a code point */
            len = 1;
        k = decompose(utf8_get(u + i, len), d);
        memcpy(cps + m, d, (size_t)k * sizeof(uint32_t));
        m += (size_t)k;
        i += (size_t)len;
    }
    /* canonical ordering: stable sort of each run of non-starters by combining class (counting
     * sort, so a long run of marks stays linear) */
    for (size_t a = 0; a < m;) {
        size_t b = a;
        while (b < m && ccc_of(cps[b]) != 0)
            b++;
        if (b - a > 1) {
            uint32_t count[257] = {0};
            uint32_t *tmp = tq_malloc((b - a) * sizeof(uint32_t));
            if (!tmp) {
                tq_free(cps);
                return TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory for NFC");
            }
            for (size_t j = a; j < b; j++)
                count[ccc_of(cps[j]) + 1]++;
            for (int c = 1; c < 257; c++)
                count[c] += count[c - 1];
            for (size_t j = a; j < b; j++)
                tmp[count[ccc_of(cps[j])]++] = cps[j];
            memcpy(cps + a, tmp, (b - a) * sizeof(uint32_t));
            tq_free(tmp);
        }
        a = b + 1;
    }
    /* recompose in place */
    {
        size_t w = 0;
        long starter = -1;
        int last = -1; /* class of the last kept code point after the starter; -1 = adjacent */
        for (size_t r = 0; r < m; r++) {
            uint32_t cp = cps[r];
            int c = ccc_of(cp);
            if (starter >= 0 && (last == -1 || (last != 0 && last < c))) {
                uint32_t comp = compose(cps[starter], cp);
                if (comp) {
                    cps[starter] = comp;
                    continue;
                }
            }
            if (c == 0) {
                starter = (long)w;
                last = -1;
            } else {
                last = c;
            }
            cps[w++] = cp;
        }
        m = w;
    }
    if (!tq_mul_ok(m, 4, &bytes) || !(*out = tq_malloc(bytes + 1))) {
        tq_free(cps);
        return TQ_FAIL(TQ_E_NOMEM, "tokenizer: out of memory for NFC");
    }
    {
        size_t o = 0;
        for (size_t i = 0; i < m; i++)
            o += utf8_put(cps[i], *out + o);
        *out_n = o;
    }
    tq_free(cps);
    return TQ_OK;
}
