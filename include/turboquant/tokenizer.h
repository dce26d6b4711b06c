/* turboquant/tokenizer.h -- text <-> token ids, and chat templates. Included by turboquant.h only.
 *
 * Two tokenizer families:
 * - byte-level BPE ("gpt2" style: GPT-2, SmolLM2, Qwen2/3, Llama 3), from a Hugging Face
 *   tokenizer.json or from GGUF metadata (tokenizer.ggml.model = "gpt2"). Text is split by the
 *   model's pre-tokenizer regexes (PCRE2, UTF + UCP), every piece is mapped byte by byte to the
 *   256 byte symbols and merged by merge rank. An invalid UTF-8 byte becomes a piece of its own
 *   and is never fed to the regex, so decode(encode(text)) == text for ANY bytes when the
 *   vocabulary holds all 256 byte tokens (Llama 3, Qwen; with Qwen's NFC normalizer the valid
 *   UTF-8 runs come back in NFC form). SmolLM2 lacks 21 bytes that cannot occur in valid
 *   UTF-8; like llama.cpp, such bytes are dropped.
 * - SentencePiece-style BPE (GGUF tokenizer.ggml.model = "llama": Llama 2, Gemma): spaces become
 *   U+2581, symbols are merged by score, characters missing from the vocabulary fall back to
 *   <0xXX> byte tokens.
 * Added tokens (tokenizer.json "added_tokens", GGUF control/user-defined tokens) are matched in
 * the text before pre-tokenization, leftmost-longest. "Special" ones (control tokens) only when
 * TQ_TOK_PARSE_SPECIAL is given; non-special added tokens (e.g. Qwen3's <think>) always, as in
 * Hugging Face tokenizers and llama.cpp.
 *
 * A tokenizer is immutable after creation and may be used from several threads at once. Encoding
 * allocates a fixed number of work buffers per call (regex match data, a cache of merged pieces
 * sized from the text length, symbol arrays grown by doubling only when a pre-token is longer
 * than any before); never per token.
 */
#ifndef TURBOQUANT_TOKENIZER_H
#define TURBOQUANT_TOKENIZER_H
#ifdef __cplusplus
extern "C" {
#endif

typedef struct tq_tokenizer tq_tokenizer;

/* tq_tokenizer_from_json() -- load a Hugging Face tokenizer.json (model type BPE; pre-tokenizers
 * Split/ByteLevel/Sequence; normalizer NFC or none). A tokenizer_config.json in the same directory,
 * when present, supplies bos/eos tokens, add_bos_token and the chat template.
 * Errors: TQ_E_IO (cannot read), TQ_E_FORMAT (not JSON, missing or ill-typed fields; the message
 * names the file and the field), TQ_E_UNSUPPORTED (a model/normalizer/pre-tokenizer type this
 * library does not implement, named in the message). */
TQ_API tq_status tq_tokenizer_from_json(const char *path, tq_tokenizer **out);
/* tq_tokenizer_from_json_memory() -- the same from a buffer (NUL not required); `name` is used in
 * messages and no tokenizer_config.json is read. Used by fuzzing and tests. */
TQ_API tq_status tq_tokenizer_from_json_memory(const char *json, size_t len, const char *name,
                                               tq_tokenizer **out);
/* tq_tokenizer_from_gguf() -- build from the tokenizer.ggml.* keys of an open GGUF file:
 * model "gpt2" (byte-level BPE; tokenizer.ggml.pre picks the regexes llama.cpp uses: "default",
 * "gpt2", "smollm", "qwen2", "llama-bpe", "llama3", ...) or "llama" (SentencePiece-style).
 * Copies what it needs: g may be freed afterwards. Errors: TQ_E_FORMAT (missing/ill-typed keys),
 * TQ_E_UNSUPPORTED (other tokenizer models, unknown pre-tokenizer names). */
TQ_API tq_status tq_tokenizer_from_gguf(const tq_gguf *g, tq_tokenizer **out);
/* tq_tokenizer_load() -- by file name: *.gguf -> tq_tokenizer_from_gguf(); a directory, or a
 * *.safetensors / *.safetensors.index.json / config.json file inside one -> that directory's
 * tokenizer.json; anything else -> tq_tokenizer_from_json(). */
TQ_API tq_status tq_tokenizer_load(const char *path, tq_tokenizer **out);
TQ_API void tq_tokenizer_free(tq_tokenizer *t);

/* Vocabulary facts. Ids are in [0, tq_tokenizer_vocab_size()); the special ids are -1 when the
 * model has none. eot is the end-of-turn token of chat models (<|im_end|>, <|eot_id|>). */
TQ_API int32_t tq_tokenizer_vocab_size(const tq_tokenizer *t);
TQ_API int32_t tq_tokenizer_bos(const tq_tokenizer *t);
TQ_API int32_t tq_tokenizer_eos(const tq_tokenizer *t);
TQ_API int32_t tq_tokenizer_eot(const tq_tokenizer *t);
/* tq_tokenizer_add_bos() -- 1 if the model's configuration asks for BOS at the start of a
 * sequence (tokenizer.json TemplateProcessing, tokenizer_config add_bos_token, GGUF
 * tokenizer.ggml.add_bos_token); TQ_TOK_ADD_BOS_AUTO follows it. */
TQ_API int tq_tokenizer_add_bos(const tq_tokenizer *t);
/* tq_tokenizer_is_special() -- 1 for control/special tokens (skipped by TQ_TOK_SKIP_SPECIAL). */
TQ_API int tq_tokenizer_is_special(const tq_tokenizer *t, int32_t id);
/* tq_tokenizer_lookup() -- id of the token whose text (the decoded bytes for byte-level BPE, the
 * content for added tokens) is exactly text[0..len), or -1. */
TQ_API int32_t tq_tokenizer_lookup(const tq_tokenizer *t, const char *text, size_t len);
/* tq_tokenizer_piece() -- the bytes token `id` decodes to (not NUL-terminated; *len set), valid
 * while t lives; NULL for an id out of range. For SentencePiece tokens U+2581 is already a space
 * and <0xXX> a single byte. */
TQ_API const char *tq_tokenizer_piece(const tq_tokenizer *t, int32_t id, size_t *len);
/* tq_tokenizer_kind() -- "bpe" (byte-level) or "spm"; tq_tokenizer_chat_template() -- the
 * model's chat template text ("" if none), valid while t lives. */
TQ_API const char *tq_tokenizer_kind(const tq_tokenizer *t);
TQ_API const char *tq_tokenizer_chat_template(const tq_tokenizer *t);

/* Flags of tq_tokenizer_encode()/_decode(). */
enum {
    TQ_TOK_ADD_BOS = 1u << 0,       /* prepend BOS (if the model has one)                       */
    TQ_TOK_ADD_BOS_AUTO = 1u << 1,  /* prepend BOS iff tq_tokenizer_add_bos()                   */
    TQ_TOK_PARSE_SPECIAL = 1u << 2, /* match special/control tokens written in the text         */
    TQ_TOK_SKIP_SPECIAL = 1u << 3,  /* decode: leave special/control tokens out                 */
};

/* tq_tokenizer_encode_bound() -- a capacity that always suffices for len bytes of text: every
 * token covers at least one byte, except the U+2581 that SentencePiece models with
 * add_space_prefix put in front of each text segment after a special/added token (at most one
 * per byte), plus BOS. */
static inline int64_t tq_tokenizer_encode_bound(size_t len)
{
    return 2 * (int64_t)len + 3;
}
/* tq_tokenizer_encode() -- tokenize text[0..len) (any bytes; NUL allowed) into ids[0..cap).
 * *n_out gets the number of tokens. If cap is too small, returns TQ_E_OVERFLOW with *n_out set
 * to the number needed (ids holds the first cap). TQ_E_ARG above 1 GiB of text. Thread-safe. */
TQ_API tq_status tq_tokenizer_encode(const tq_tokenizer *t, const char *text, size_t len,
                                     unsigned flags, int32_t *ids, int64_t cap, int64_t *n_out);
/* tq_tokenizer_decode() -- concatenate the pieces of ids[0..n) into dst[0..cap) (not
 * NUL-terminated; the bytes may end inside a UTF-8 character). *n_out gets the byte count; if cap
 * is too small, TQ_E_OVERFLOW with *n_out = bytes needed. TQ_E_ARG for an id out of range.
 * For SentencePiece models with add_space_prefix, the leading space of the first (non-control)
 * token is removed, as llama.cpp and Hugging Face do. Spaces are never "cleaned up" (transformers'
 * clean_up_tokenization_spaces), as in the tokenizers library, so round trips stay exact. */
TQ_API tq_status tq_tokenizer_decode(const tq_tokenizer *t, const int32_t *ids, int64_t n,
                                     unsigned flags, char *dst, size_t cap, size_t *n_out);

/* Streaming decoder: feed tokens one at a time, get only complete UTF-8 characters back; the
 * bytes of a character split across tokens are held (at most 3) until it completes. Bytes that
 * can never form a valid character are passed through as they are, so the concatenated output of
 * tq_tok_stream_put() + tq_tok_stream_flush() equals tq_tokenizer_decode() of the same ids. */
typedef struct tq_tok_stream {
    const tq_tokenizer *tok; /* borrowed                                          */
    unsigned flags;          /* TQ_TOK_SKIP_SPECIAL or 0                          */
    int n_tokens;            /* tokens seen (for the SentencePiece leading space) */
    int n_held;              /* bytes in held[]                                   */
    unsigned char held[4];   /* an incomplete UTF-8 character                     */
} tq_tok_stream;
/* tq_tok_stream_init() -- start a stream over t (no allocation). */
TQ_API void tq_tok_stream_init(tq_tok_stream *s, const tq_tokenizer *t, unsigned flags);
/* tq_tok_stream_put() -- decode one token; write the newly complete bytes to dst[0..cap)
 * (*n_out). cap >= piece length + 4 always suffices; else TQ_E_OVERFLOW and nothing consumed. */
TQ_API tq_status tq_tok_stream_put(tq_tok_stream *s, int32_t id, char *dst, size_t cap,
                                   size_t *n_out);
/* tq_tok_stream_flush() -- emit the held bytes (an unfinished character at end of stream). */
TQ_API tq_status tq_tok_stream_flush(tq_tok_stream *s, char *dst, size_t cap, size_t *n_out);

/* ==== chat templates ======================================================================= */
typedef enum tq_chat_format {
    TQ_CHAT_AUTO = 0,   /* detect from the model's template (tq_chat_detect)          */
    TQ_CHAT_CHATML = 1, /* <|im_start|>role\ncontent<|im_end|>\n  (Qwen, SmolLM2)    */
    TQ_CHAT_LLAMA3 = 2, /* <|start_header_id|>role<|end_header_id|>\n\n...<|eot_id|> */
    TQ_CHAT_COUNT
} tq_chat_format;

/* One chat message. role is "system", "user", "assistant" (any string is rendered as given). */
typedef struct tq_chat_msg {
    const char *role;
    const char *content;
} tq_chat_msg;

/* tq_chat_format_parse() -- "chatml" | "llama3" | "auto" -> *out; TQ_E_ARG naming the choices. */
TQ_API tq_status tq_chat_format_parse(const char *name, tq_chat_format *out);
TQ_API const char *tq_chat_format_name(tq_chat_format f);
/* tq_chat_detect() -- the format of tokenizer t from its chat template text (ChatML if it uses
 * <|im_start|>, Llama 3 if <|start_header_id|>); TQ_E_UNSUPPORTED if none matches (the caller
 * then names a format explicitly). */
TQ_API tq_status tq_chat_detect(const tq_tokenizer *t, tq_chat_format *out);
/* Values of tq_chat_render()'s add_generation_prompt. */
enum {
    TQ_CHAT_GEN_NONE = 0,     /* no assistant header at the end                               */
    TQ_CHAT_GEN = 1,          /* the assistant header (the model answers next)                */
    TQ_CHAT_GEN_NO_THINK = 2, /* the header + an empty <think> block where the template has
                                 enable_thinking (Qwen3's enable_thinking=false); else as 1   */
};
/* tq_chat_render() -- render msgs[0..n) (+ the assistant header when add_generation_prompt) as
 * the model's template does, into dst[0..cap) NUL-terminated; *n_out = length without the NUL
 * (bytes needed, with TQ_E_OVERFLOW, when cap is too small). fmt TQ_CHAT_AUTO detects from t
 * (t may be NULL for an explicit format). Model details kept: Llama 3 puts the BOS text first and
 * strips each content like Jinja's `trim` (ASCII whitespace), and a Llama 3 template that adds
 * the assistant header unconditionally gets it whatever add_generation_prompt says; SmolLM2's
 * default system prompt is taken from its template when the first message is not a system one.
 * Qwen3 (a template using reasoning_content): assistant turns lose their <think> part before the
 * last user query and keep it, rewritten, after it; "tool" messages become <tool_response>
 * blocks. Not rendered: tool definitions (tools=).
 * Encode the result with TQ_TOK_PARSE_SPECIAL and without BOS flags. */
TQ_API tq_status tq_chat_render(const tq_tokenizer *t, tq_chat_format fmt, const tq_chat_msg *msgs,
                                int64_t n, int add_generation_prompt, char *dst, size_t cap,
                                size_t *n_out);

#ifdef __cplusplus
}
#endif
#endif
