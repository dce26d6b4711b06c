/* chat_template.c -- the chat formats of the supported model families, written out in C rather
 * than interpreting Jinja: ChatML (Qwen2/3, SmolLM2) and Llama 3. The model's template text (GGUF
 * tokenizer.chat_template or tokenizer_config.json chat_template) only picks the format and
 * supplies SmolLM2's default system prompt. tests/test_tok_chat.c compares the output with
 * transformers' apply_chat_template() on the real templates.
 */
#include <string.h>

#include "tok_internal.h"

static const char *const format_names[TQ_CHAT_COUNT] = {"auto", "chatml", "llama3"};

tq_status tq_chat_format_parse(const char *name, tq_chat_format *out)
{
    for (int i = 0; name && i < TQ_CHAT_COUNT; i++)
        if (!strcmp(name, format_names[i])) {
            *out = (tq_chat_format)i;
            return TQ_OK;
        }
    return TQ_FAIL(TQ_E_ARG, "chat format '%s' is not known (choices: auto, chatml, llama3)",
                   name ? name : "(null)");
}

const char *tq_chat_format_name(tq_chat_format f)
{
    return f >= 0 && f < TQ_CHAT_COUNT ? format_names[f] : "?";
}

tq_status tq_chat_detect(const tq_tokenizer *t, tq_chat_format *out)
{
    const char *tmpl = tq_tokenizer_chat_template(t);
    if (strstr(tmpl, "<|start_header_id|>")) {
        *out = TQ_CHAT_LLAMA3;
        return TQ_OK;
    }
    if (strstr(tmpl, "<|im_start|>")) {
        *out = TQ_CHAT_CHATML;
        return TQ_OK;
    }
    if (!*tmpl && t && tok_find(t, "<|im_start|>", 12) >= 0) {
        *out = TQ_CHAT_CHATML; /* no template, but the vocabulary is ChatML's */
        return TQ_OK;
    }
    if (!*tmpl && t && tok_find(t, "<|start_header_id|>", 19) >= 0) {
        *out = TQ_CHAT_LLAMA3;
        return TQ_OK;
    }
    return TQ_FAIL(TQ_E_UNSUPPORTED,
                   "%s: chat template is neither ChatML nor Llama 3; pass a format explicitly "
                   "(chatml, llama3)",
                   t && t->name ? t->name : "tokenizer");
}

/* default_system() -- SmolLM2-style templates insert "<|im_start|>system\nTEXT<|im_end|>\n" when
 * the first message is not a system one; find TEXT in the template (escaped "\n" or a real
 * newline after "system"). Returns its length, 0 if there is none. */
static size_t default_system(const char *tmpl, const char **text)
{
    const char *p = tmpl;
    if (!strstr(tmpl, "!= 'system'") && !strstr(tmpl, "!= \"system\""))
        return 0;
    while ((p = strstr(p, "<|im_start|>system"))) {
        const char *s = p + 18, *e;
        if (*s == '\n')
            s++;
        else if (s[0] == '\\' && s[1] == 'n')
            s += 2;
        else {
            p = s;
            continue;
        }
        e = strstr(s, "<|im_end|>");
        if (e && e > s && !memchr(s, '\'', (size_t)(e - s)) && !memchr(s, '"', (size_t)(e - s)) &&
            !memchr(s, '{', (size_t)(e - s))) {
            *text = s;
            return (size_t)(e - s);
        }
        p = s;
    }
    return 0;
}

typedef struct out_buf {
    char *dst;
    size_t cap;
    size_t n;
} out_buf;

static void put(out_buf *o, const char *s, size_t n)
{
    if (o->n + n < o->cap)
        memcpy(o->dst + o->n, s, n);
    o->n += n;
}

static void puts_(out_buf *o, const char *s)
{
    put(o, s, strlen(s));
}

static bool ws(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

/* ---- Qwen3: ChatML plus <think> handling of assistant turns and tool responses ------------ */
typedef struct span {
    const char *p;
    size_t n;
} span;

static span lstrip_nl(span x)
{
    while (x.n && *x.p == '\n') {
        x.p++;
        x.n--;
    }
    return x;
}

static span rstrip_nl(span x)
{
    while (x.n && x.p[x.n - 1] == '\n')
        x.n--;
    return x;
}

/* find() -- first (last = 0) or last (last = 1) occurrence of needle in x, or NULL. */
static const char *find(span x, const char *needle, int last)
{
    const size_t k = strlen(needle);
    const char *hit = NULL;
    for (size_t i = 0; i + k <= x.n; i++)
        if (!memcmp(x.p + i, needle, k)) {
            hit = x.p + i;
            if (!last)
                break;
        }
    return hit;
}

static bool is_tool_response(const char *c)
{
    size_t n = strlen(c);
    return n >= 15 && !strncmp(c, "<tool_response>", 15) && n >= 16 &&
           !strcmp(c + n - 16, "</tool_response>");
}

/* render_qwen3() -- what Qwen3's template does without tools: assistant turns lose the
 * <think>...</think> part, except after the last user query, where it is kept (rewritten as
 * "<think>\nR\n</think>\n\n") for the last message or when non-empty; "tool" messages are
 * grouped into one user turn of <tool_response> blocks. */
static void render_qwen3(out_buf *o, const tq_chat_msg *msgs, int64_t n)
{
    int64_t last_query = n - 1;
    for (int64_t i = n - 1; i >= 0; i--)
        if (!strcmp(msgs[i].role, "user") && !is_tool_response(msgs[i].content)) {
            last_query = i;
            break;
        }
    for (int64_t i = 0; i < n; i++) {
        const char *role = msgs[i].role;
        span c = {msgs[i].content, strlen(msgs[i].content)}, r = {"", 0};
        if (!strcmp(role, "assistant")) {
            const char *end = find(c, "</think>", 0);
            if (end) {
                span before = rstrip_nl((span){c.p, (size_t)(end - c.p)});
                const char *open = find(before, "<think>", 1);
                const char *last_end = find(c, "</think>", 1);
                if (open)
                    before = (span){open + 7, before.n - (size_t)(open + 7 - before.p)};
                r = lstrip_nl(before);
                c = lstrip_nl((span){last_end + 8, c.n - (size_t)(last_end + 8 - c.p)});
            }
            puts_(o, "<|im_start|>assistant\n");
            if (i > last_query && (i == n - 1 || r.n)) {
                r = rstrip_nl(lstrip_nl(r));
                puts_(o, "<think>\n");
                put(o, r.p, r.n);
                puts_(o, "\n</think>\n\n");
                c = lstrip_nl(c);
            }
            put(o, c.p, c.n);
            puts_(o, "<|im_end|>\n");
        } else if (!strcmp(role, "tool")) {
            if (i == 0 || strcmp(msgs[i - 1].role, "tool"))
                puts_(o, "<|im_start|>user");
            puts_(o, "\n<tool_response>\n");
            put(o, c.p, c.n);
            puts_(o, "\n</tool_response>");
            if (i == n - 1 || strcmp(msgs[i + 1].role, "tool"))
                puts_(o, "<|im_end|>\n");
        } else {
            puts_(o, "<|im_start|>");
            puts_(o, role);
            puts_(o, "\n");
            put(o, c.p, c.n);
            puts_(o, "<|im_end|>\n");
        }
    }
}

tq_status tq_chat_render(const tq_tokenizer *t, tq_chat_format fmt, const tq_chat_msg *msgs,
                         int64_t n, int add_generation_prompt, char *dst, size_t cap, size_t *n_out)
{
    out_buf o = {dst, cap, 0};
    tq_status st;
    if (n_out)
        *n_out = 0;
    if (!n_out || (!msgs && n > 0) || n < 0 || (!dst && cap))
        return TQ_FAIL(TQ_E_ARG, "tq_chat_render: NULL messages/dst/n_out or n < 0");
    for (int64_t i = 0; i < n; i++)
        if (!msgs[i].role || !msgs[i].content)
            return TQ_FAIL(TQ_E_ARG, "tq_chat_render: message %lld has a NULL role or content",
                           (long long)i);
    if (fmt == TQ_CHAT_AUTO && (st = tq_chat_detect(t, &fmt)))
        return st;
    if (fmt == TQ_CHAT_CHATML) {
        const char *sys = NULL;
        size_t sys_n = t ? default_system(tq_tokenizer_chat_template(t), &sys) : 0;
        if (sys_n && (n == 0 || strcmp(msgs[0].role, "system"))) {
            puts_(&o, "<|im_start|>system\n");
            for (size_t k = 0; k < sys_n; k++) { /* the template may spell newlines as \n */
                if (sys[k] == '\\' && k + 1 < sys_n && sys[k + 1] == 'n') {
                    put(&o, "\n", 1);
                    k++;
                } else {
                    put(&o, sys + k, 1);
                }
            }
            puts_(&o, "<|im_end|>\n");
        }
        if (t && strstr(tq_tokenizer_chat_template(t), "reasoning_content"))
            render_qwen3(&o, msgs, n);
        else
            for (int64_t i = 0; i < n; i++) {
                puts_(&o, "<|im_start|>");
                puts_(&o, msgs[i].role);
                puts_(&o, "\n");
                puts_(&o, msgs[i].content);
                puts_(&o, "<|im_end|>\n");
            }
        if (add_generation_prompt)
            puts_(&o, "<|im_start|>assistant\n");
        if (add_generation_prompt == TQ_CHAT_GEN_NO_THINK && t &&
            strstr(tq_tokenizer_chat_template(t), "enable_thinking"))
            puts_(&o, "<think>\n\n</think>\n\n");
    } else if (fmt == TQ_CHAT_LLAMA3) {
        /* Some Llama 3 templates append the assistant header unconditionally. */
        const char *tmpl = tq_tokenizer_chat_template(t);
        if (*tmpl && strstr(tmpl, "<|start_header_id|>") && !strstr(tmpl, "add_generation_prompt"))
            add_generation_prompt = 1;
        puts_(&o, "<|begin_of_text|>");
        for (int64_t i = 0; i < n; i++) {
            const char *c = msgs[i].content;
            size_t len = strlen(c);
            while (len && ws(*c)) { /* Jinja `trim` */
                c++;
                len--;
            }
            while (len && ws(c[len - 1]))
                len--;
            puts_(&o, "<|start_header_id|>");
            puts_(&o, msgs[i].role);
            puts_(&o, "<|end_header_id|>\n\n");
            put(&o, c, len);
            puts_(&o, "<|eot_id|>");
        }
        if (add_generation_prompt)
            puts_(&o, "<|start_header_id|>assistant<|end_header_id|>\n\n");
    } else {
        return TQ_FAIL(TQ_E_ARG, "tq_chat_render: chat format %d is not known", (int)fmt);
    }
    *n_out = o.n;
    if (o.n >= cap)
        return TQ_FAIL(TQ_E_OVERFLOW, "tq_chat_render: %zu bytes (+ NUL) do not fit in cap %zu",
                       o.n, cap);
    dst[o.n] = 0;
    return TQ_OK;
}
