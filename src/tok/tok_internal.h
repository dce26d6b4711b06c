/* tok_internal.h -- the tokenizer object shared by tokenizer.c (core: vocabulary, hashing, encode,
 * decode), tokenizer_json.c (tokenizer.json loader), tokenizer_gguf.c (GGUF loader) and
 * chat_template.c. Loaders build a tokenizer with tok_create() + tok_set_token() + tok_add_merge()
 * + tok_add_regex() + tok_mark_added(), then tok_finish() builds the lookup tables. */
#ifndef TQ_TOK_INTERNAL_H
#define TQ_TOK_INTERNAL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include "core/core.h"

#define TOK_MAX_RE 8 /* pre-tokenizer regexes applied one after another */

typedef enum tok_kind { TOK_BPE = 0, TOK_SPM = 1 } tok_kind;

/* Token types: the GGUF tokenizer.ggml.token_type values (llama.cpp's). */
enum {
    TOKT_NONE = 0, /* a hole in the id space (never produced)            */
    TOKT_NORMAL = 1,
    TOKT_UNKNOWN = 2,
    TOKT_CONTROL = 3, /* special: matched only with TQ_TOK_PARSE_SPECIAL */
    TOKT_USER = 4,    /* added, non-special: always matched in the text   */
    TOKT_UNUSED = 5,
    TOKT_BYTE = 6, /* SentencePiece <0xXX>                               */
};
/* Per-token flag bits beside the type. */
enum { TOKF_ADDED = 1, TOKF_LSTRIP = 2, TOKF_RSTRIP = 4 };

struct tq_tokenizer {
    tok_kind kind;
    int32_t n_vocab;
    char *name; /* file name, for messages */
    /* Lookup text of each token: raw bytes for byte-level BPE (the byte-level alphabet undone),
     * the vocabulary string (with U+2581) for SentencePiece. text[off[i] .. off[i+1]). */
    uint32_t *off;   /* (n_vocab + 1)                */
    char *text;      /* (off[n_vocab])               */
    size_t text_cap; /* bytes allocated while building */
    /* What each token decodes to. Same arrays as off/text for BPE; own arrays for SPM. */
    uint32_t *poff;
    char *ptext;
    uint8_t *type;  /* (n_vocab) TOKT_*            */
    uint8_t *tflag; /* (n_vocab) TOKF_*            */
    float *score;   /* (n_vocab) SPM scores, or NULL */
    /* text -> id: open addressing, slots hold id + 1 (0 = empty). */
    int32_t *vmap;
    uint32_t vmask;
    /* merges: (left id, right id) -> rank and merged id. Key 0 never occurs (slots store key+1). */
    uint64_t *pkey;
    int32_t *prank;
    int32_t *pmerged;
    uint32_t pmask;
    int32_t n_merges;
    int32_t merge_cap;
    int32_t byte_id[256]; /* BPE: the single-byte token; SPM: <0xXX> (-1 if absent) */
    /* Added tokens sorted by first byte, longest first; added_first[b] .. added_first[b+1]. */
    int32_t *added;
    int32_t n_added;
    int32_t added_first[257];
    pcre2_code *re[TOK_MAX_RE];
    int n_re;
    int ignore_merges;    /* BPE: a pre-token that is a whole vocab entry is not merged */
    int prefix_space;     /* BPE ByteLevel add_prefix_space                              */
    int spm_space_prefix; /* SPM: ' ' in front of text at start / after a special token  */
    int nfc;              /* NFC normalizer                                               */
    int add_bos;
    int32_t bos, eos, eot, unk;
    char *chat_template;
};

/* Building (loaders). All return TQ_OK or a failure recorded with TQ_FAIL naming t->name. */
tq_status tok_create(tok_kind kind, int32_t n_vocab, const char *name, tq_tokenizer **out);
/* tok_set_token() -- token id has vocabulary string s[0..n) of `type`. For BPE, NORMAL tokens
 * are converted from the byte-level alphabet when every character belongs to it (decode_bl). */
tq_status tok_set_token(tq_tokenizer *t, int32_t id, const char *s, size_t n, int type,
                        int decode_bl);
/* tok_add_merge() -- merge rule of rank = insertion order: byte-level strings a and b. Rules
 * whose parts or result are not in the vocabulary are skipped (counted in *skipped). */
tq_status tok_add_merge(tq_tokenizer *t, const char *a, size_t an, const char *b, size_t bn,
                        int64_t *skipped);
tq_status tok_add_regex(tq_tokenizer *t, const char *pattern);
/* tok_finish_vocab() -- build the text->id map (call after all tok_set_token, before merges). */
tq_status tok_finish_vocab(tq_tokenizer *t);
/* tok_finish() -- build byte table and added-token index. */
tq_status tok_finish(tq_tokenizer *t);
/* tok_find() -- id of exact text among all tokens (normal tokens win over added ones), or -1. */
int32_t tok_find(const tq_tokenizer *t, const char *s, size_t n);
/* tok_bl_decode() -- byte-level alphabet string -> raw bytes; false if a character is outside
 * the alphabet. out needs n bytes. */
bool tok_bl_decode(const char *s, size_t n, char *out, size_t *out_n);
/* tok_regex_for_pre() -- llama.cpp's regex list for a GGUF tokenizer.ggml.pre name; count in *n,
 * NULL for an unknown name. */
const char *const *tok_regex_for_pre(const char *pre, int *n);
/* tok_nfc() -- NFC normalization of valid UTF-8 s[0..n) into a new tq_malloc'ed buffer. */
tq_status tok_nfc(const char *s, size_t n, char **out, size_t *out_n);
/* tok_utf8_valid() -- length (1..4) of the valid UTF-8 character at s (n bytes left), 0 if
 * invalid (overlong, surrogate, > U+10FFFF, truncated, stray continuation byte). */
int tok_utf8_valid(const unsigned char *s, size_t n);

#endif
