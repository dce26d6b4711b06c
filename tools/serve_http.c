/* serve_http.c -- the HTTP side of `tq serve`: libmicrohttpd (one thread per connection) and
 * json-c. Routes, authentication, body limits, request validation, tokenization, and the
 * responses: JSON bodies, server-sent events for `stream`, OpenAI's error shape
 * {"error": {"message", "type", "param", "code"}} for every failure.
 *
 * A generation request is validated and tokenized here, then queued for the scheduler
 * (serve_sched.c). The connection's thread waits on the request's condition variable: for a
 * plain response until the request is finished, for a stream chunk by chunk from
 * libmicrohttpd's content-reader callback. While it waits it polls the socket; a client that
 * has hung up cancels its request, which frees the slot at the next step. */
#include <math.h>
#include <poll.h>
#include <sys/socket.h>
#include <arpa/inet.h>
#include <netinet/in.h>

#include "serve.h"

#ifdef TQ_HAVE_MHD
#include <json-c/json.h>
#include <microhttpd.h>

static struct MHD_Daemon *daemon_;

/* per-connection state */
typedef struct conn {
    srv *s;
    char *body;
    size_t n_body, cap_body;
    int too_big;        /* the body went over --max-body                                */
    int answered;       /* a response was queued in the first call                      */
    srv_req *req;
    int chat;           /* chat completion (else text completion)                       */
    int include_usage;  /* stream_options.include_usage                                 */
    int fd;
    char id[48];
    long created;
    /* stream state */
    int phase;          /* 0 role chunk pending, 1 content, 2 done chunk sent, 3 [DONE] sent */
    size_t n_sent;      /* bytes of req->text sent                                       */
    int64_t n_tok_sent; /* completion tokens whose logprobs were sent                    */
    int64_t lp_off;     /* completions' text_offset of the next token                     */
    char *out;          /* encoded SSE bytes not yet handed to libmicrohttpd            */
    size_t n_out, off_out, cap_out;
} conn;

/* ---- small helpers ----------------------------------------------------------------------- */

/* copy of p[0..n) with every byte that is not part of a valid UTF-8 character as U+FFFD */
static char *utf8_clean(const char *p, size_t n, size_t *n_out)
{
    char *o = malloc(3 * n + 1);
    size_t k = 0;
    if (!o)
        return NULL;
    const unsigned char *u = (const unsigned char *)p;
    for (size_t i = 0; i < n;) {
        unsigned c = u[i];
        size_t len = c < 0x80 ? 1 : (c >= 0xc2 && c <= 0xdf) ? 2 : (c >= 0xe0 && c <= 0xef) ? 3
                                : (c >= 0xf0 && c <= 0xf4)   ? 4
                                                             : 0;
        int ok = len > 0 && i + len <= n;
        for (size_t j = 1; ok && j < len; j++)
            ok = (u[i + j] & 0xc0) == 0x80;
        if (ok && len == 3) {
            unsigned c1 = u[i + 1];
            ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
        }
        if (ok && len == 4) {
            unsigned c1 = u[i + 1];
            ok = !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
        }
        if (ok) {
            memcpy(o + k, u + i, len);
            k += len;
            i += len;
        } else {
            memcpy(o + k, "\xef\xbf\xbd", 3);
            k += 3;
            i++;
        }
    }
    o[k] = 0;
    *n_out = k;
    return o;
}

static json_object *jstr(const char *p, size_t n)
{
    size_t m = 0;
    char *c = utf8_clean(p, n, &m);
    json_object *o = c ? json_object_new_string_len(c, (int)m) : NULL;
    free(c);
    return o;
}

static void count_status(srv *s, unsigned status)
{
    pthread_mutex_lock(&s->mu);
    s->m_http[status / 100 < 6 ? status / 100 : 5]++;
    pthread_mutex_unlock(&s->mu);
}

static enum MHD_Result send_text(struct MHD_Connection *mc, srv *s, unsigned status,
                                 const char *type, const char *text, size_t len)
{
    struct MHD_Response *rs =
        MHD_create_response_from_buffer(len, (void *)text, MHD_RESPMEM_MUST_COPY);
    if (!rs)
        return MHD_NO;
    MHD_add_response_header(rs, "Content-Type", type);
    if (status == 503)
        MHD_add_response_header(rs, "Retry-After", "1");
    if (status == 401)
        MHD_add_response_header(rs, "WWW-Authenticate", "Bearer");
    enum MHD_Result r = MHD_queue_response(mc, status, rs);
    MHD_destroy_response(rs);
    count_status(s, status);
    return r;
}

static enum MHD_Result send_json(struct MHD_Connection *mc, srv *s, unsigned status,
                                 json_object *o)
{
    size_t len = 0;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    enum MHD_Result r = send_text(mc, s, status, "application/json", t, len);
    json_object_put(o);
    return r;
}

static json_object *error_obj(unsigned status, const char *code, const char *param,
                              const char *msg)
{
    const char *type = status == 401   ? "authentication_error"
                       : status == 404 ? "not_found_error"
                       : status == 503 ? "server_overloaded"
                       : status >= 500 ? "server_error"
                                       : "invalid_request_error";
    json_object *e = json_object_new_object();
    json_object_object_add(e, "message", jstr(msg, strlen(msg)));
    json_object_object_add(e, "type", json_object_new_string(type));
    json_object_object_add(e, "param", param ? json_object_new_string(param) : NULL);
    json_object_object_add(e, "code", code ? json_object_new_string(code) : NULL);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "error", e);
    return o;
}

static enum MHD_Result send_error(struct MHD_Connection *mc, srv *s, unsigned status,
                                  const char *code, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 6, 7)));
static enum MHD_Result send_error(struct MHD_Connection *mc, srv *s, unsigned status,
                                  const char *code, const char *param, const char *fmt, ...)
{
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    return send_json(mc, s, status, error_obj(status, code, param, msg));
}

static int client_gone(const conn *c)
{
    struct pollfd p = {.fd = c->fd, .events = POLLRDHUP};
    return c->fd >= 0 && poll(&p, 1, 0) > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR));
}

static void cond_wait_ms(pthread_cond_t *cv, pthread_mutex_t *mu, int ms)
{
    struct timespec t;
    clock_gettime(CLOCK_REALTIME, &t);
    t.tv_nsec += (long)ms * 1000000L;
    t.tv_sec += t.tv_nsec / 1000000000L;
    t.tv_nsec %= 1000000000L;
    pthread_cond_timedwait(cv, mu, &t);
}

/* ---- request validation ------------------------------------------------------------------ */

typedef struct verr {
    unsigned status;
    const char *code;
    const char *param;
    char msg[512];
} verr;

static int fail(verr *e, unsigned status, const char *code, const char *param, const char *fmt,
                ...) __attribute__((format(printf, 5, 6)));
static int fail(verr *e, unsigned status, const char *code, const char *param, const char *fmt,
                ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(e->msg, sizeof(e->msg), fmt, ap);
    va_end(ap);
    e->status = status;
    e->code = code;
    e->param = param;
    return -1;
}

/* field `key` of o if present and not null */
static json_object *field(json_object *o, const char *key)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, key, &v))
        return NULL;
    return v;
}

static int get_number(json_object *o, const char *key, double *out, verr *e)
{
    json_object *v = field(o, key);
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return fail(e, 400, "invalid_type", key, "'%s' must be a number", key);
    *out = json_object_get_double(v);
    if (!isfinite(*out))
        return fail(e, 400, "invalid_value", key, "'%s' must be finite", key);
    return 1;
}

static int get_int(json_object *o, const char *key, int64_t *out, verr *e)
{
    json_object *v = field(o, key);
    if (!v)
        return 0;
    if (json_object_is_type(v, json_type_int)) {
        *out = json_object_get_int64(v);
        return 1;
    }
    if (json_object_is_type(v, json_type_double)) {
        const double d = json_object_get_double(v);
        if (isfinite(d) && d == floor(d) && fabs(d) < 9e18) {
            *out = (int64_t)d;
            return 1;
        }
    }
    return fail(e, 400, "invalid_type", key, "'%s' must be an integer", key);
}

static int get_bool(json_object *o, const char *key, int *out, verr *e)
{
    json_object *v = field(o, key);
    if (!v)
        return 0;
    if (!json_object_is_type(v, json_type_boolean))
        return fail(e, 400, "invalid_type", key, "'%s' must be true or false", key);
    *out = json_object_get_boolean(v);
    return 1;
}

/* fields we do not implement: refused by name when they ask for something */
static int refuse_unsupported(json_object *b, int chat, verr *e)
{
    int64_t i = 1;
    int flag = 0;
    if (get_int(b, "n", &i, e) < 0)
        return -1;
    if (i != 1)
        return fail(e, 400, "unsupported_value", "n",
                    "'n' = %lld: tq serve returns one choice per request (n = 1)", (long long)i);
    i = 1;
    if (get_int(b, "best_of", &i, e) < 0)
        return -1;
    if (i != 1)
        return fail(e, 400, "unsupported_value", "best_of", "'best_of' must be 1");
    const char *none[] = {"tools", "functions", "logit_bias", "suffix"};
    for (int k = 0; k < 4; k++) {
        json_object *v = field(b, none[k]);
        if (v && !(json_object_is_type(v, json_type_array) && !json_object_array_length(v)) &&
            !(json_object_is_type(v, json_type_object) && !json_object_object_length(v)))
            return fail(e, 400, "unsupported_value", none[k],
                        "'%s' is not supported by tq serve", none[k]);
    }
    json_object *rf = field(b, "response_format");
    if (rf) {
        json_object *t = field(rf, "type");
        if (!json_object_is_type(rf, json_type_object) || !t ||
            !json_object_is_type(t, json_type_string) ||
            strcmp(json_object_get_string(t), "text"))
            return fail(e, 400, "unsupported_value", "response_format",
                        "only response_format {\"type\": \"text\"} is supported");
    }
    if (!chat && get_bool(b, "echo", &flag, e) < 0)
        return -1;
    if (flag)
        return fail(e, 400, "unsupported_value", "echo", "'echo' is not supported by tq serve");
    return 0;
}

static int encode(srv *s, const char *text, size_t len, unsigned flags, int32_t **ids,
                  int64_t *n, verr *e)
{
    const int64_t cap = tq_tokenizer_encode_bound(len);
    *ids = malloc((size_t)cap * sizeof(int32_t));
    if (!*ids)
        return fail(e, 500, NULL, NULL, "out of memory");
    tq_status st = tq_tokenizer_encode(s->tok, text, len, flags, *ids, cap, n);
    if (st)
        return fail(e, 400, "invalid_value", NULL, "cannot tokenize the prompt: %s",
                    tq_last_error());
    return 0;
}

/* the text of one message's content: a string, null, or an array of {type: text} parts */
static int content_text(json_object *m, int idx, char **out, verr *e)
{
    json_object *c = field(m, "content");
    if (!c) {
        *out = strdup("");
        return *out ? 0 : fail(e, 500, NULL, NULL, "out of memory");
    }
    if (json_object_is_type(c, json_type_string)) {
        *out = strndup(json_object_get_string(c), (size_t)json_object_get_string_len(c));
        return *out ? 0 : fail(e, 500, NULL, NULL, "out of memory");
    }
    if (!json_object_is_type(c, json_type_array))
        return fail(e, 400, "invalid_type", "messages",
                    "messages[%d].content must be a string or an array of text parts", idx);
    size_t n = 0, cap = 64;
    char *t = malloc(cap);
    for (size_t k = 0; t && k < json_object_array_length(c); k++) {
        json_object *p = json_object_array_get_idx(c, k);
        json_object *ty = json_object_is_type(p, json_type_object) ? field(p, "type") : NULL;
        json_object *tx = json_object_is_type(p, json_type_object) ? field(p, "text") : NULL;
        if (!ty || !json_object_is_type(ty, json_type_string) ||
            strcmp(json_object_get_string(ty), "text") || !tx ||
            !json_object_is_type(tx, json_type_string)) {
            free(t);
            return fail(e, 400, "unsupported_value", "messages",
                        "messages[%d].content[%zu]: only {\"type\": \"text\", \"text\": ...} "
                        "parts are supported",
                        idx, k);
        }
        const size_t l = (size_t)json_object_get_string_len(tx);
        if (n + l + 1 > cap) {
            while (n + l + 1 > cap)
                cap *= 2;
            char *nt = realloc(t, cap);
            if (!nt) {
                free(t);
                t = NULL;
                break;
            }
            t = nt;
        }
        memcpy(t + n, json_object_get_string(tx), l);
        n += l;
    }
    if (!t)
        return fail(e, 500, NULL, NULL, "out of memory");
    t[n] = 0;
    *out = t;
    return 0;
}

/* messages -> rendered prompt -> tokens */
static int chat_prompt(srv *s, json_object *b, srv_req *r, verr *e)
{
    json_object *ms = field(b, "messages");
    if (!ms)
        return fail(e, 400, "missing_field", "messages", "'messages' is required");
    if (!json_object_is_type(ms, json_type_array))
        return fail(e, 400, "invalid_type", "messages", "'messages' must be an array");
    const int n = (int)json_object_array_length(ms);
    if (n == 0)
        return fail(e, 400, "invalid_value", "messages", "'messages' must not be empty");
    if (!s->has_chat)
        return fail(e, 400, "unsupported_value", "messages",
                    "the model has no chat template tq knows; restart tq serve with "
                    "--chat-format chatml|llama3, or use /v1/completions");
    tq_chat_msg *msgs = calloc((size_t)n, sizeof(*msgs));
    char *rendered = NULL;
    int rc = -1;
    size_t total = 4096;
    if (!msgs)
        return fail(e, 500, NULL, NULL, "out of memory");
    for (int i = 0; i < n; i++) {
        json_object *m = json_object_array_get_idx(ms, i);
        json_object *role = json_object_is_type(m, json_type_object) ? field(m, "role") : NULL;
        if (!json_object_is_type(m, json_type_object)) {
            fail(e, 400, "invalid_type", "messages", "messages[%d] must be an object", i);
            goto out;
        }
        if (!role || !json_object_is_type(role, json_type_string)) {
            fail(e, 400, "invalid_type", "messages", "messages[%d].role must be a string", i);
            goto out;
        }
        const char *rs = json_object_get_string(role);
        msgs[i].role = !strcmp(rs, "developer") ? "system" : rs;
        char *text = NULL;
        if (content_text(m, i, &text, e))
            goto out;
        msgs[i].content = text;
        total += strlen(text) + 64;
    }
    size_t need = 0;
    rendered = malloc(total);
    tq_status st = rendered ? tq_chat_render(s->tok, s->chat_fmt, msgs, n, TQ_CHAT_GEN, rendered,
                                             total, &need)
                            : TQ_E_NOMEM;
    if (st == TQ_E_OVERFLOW) {
        free(rendered);
        total = need + 1;
        rendered = malloc(total);
        st = rendered ? tq_chat_render(s->tok, s->chat_fmt, msgs, n, TQ_CHAT_GEN, rendered, total,
                                       &need)
                      : TQ_E_NOMEM;
    }
    if (st) {
        fail(e, 400, "invalid_value", "messages", "cannot render the messages: %s",
             tq_last_error());
        goto out;
    }
    rc = encode(s, rendered, need, TQ_TOK_PARSE_SPECIAL, &r->prompt, &r->n_prompt, e);
out:
    for (int i = 0; i < n; i++)
        free((char *)msgs[i].content);
    free(msgs);
    free(rendered);
    return rc;
}

static int completion_prompt(srv *s, json_object *b, srv_req *r, verr *e)
{
    json_object *p = field(b, "prompt");
    if (!p)
        return fail(e, 400, "missing_field", "prompt", "'prompt' is required");
    if (json_object_is_type(p, json_type_array) && json_object_array_length(p) == 1 &&
        json_object_is_type(json_object_array_get_idx(p, 0), json_type_string))
        p = json_object_array_get_idx(p, 0);
    if (json_object_is_type(p, json_type_string))
        return encode(s, json_object_get_string(p), (size_t)json_object_get_string_len(p),
                      TQ_TOK_PARSE_SPECIAL | TQ_TOK_ADD_BOS_AUTO, &r->prompt, &r->n_prompt, e);
    if (json_object_is_type(p, json_type_array)) { /* token ids */
        const size_t n = json_object_array_length(p);
        r->prompt = malloc((n ? n : 1) * sizeof(int32_t));
        if (!r->prompt)
            return fail(e, 500, NULL, NULL, "out of memory");
        for (size_t i = 0; i < n; i++) {
            json_object *v = json_object_array_get_idx(p, i);
            const int64_t t = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
            if (t < 0 || t >= s->info.vocab_size)
                return fail(e, 400, "invalid_value", "prompt",
                            "'prompt' must be a string, or an array of token ids in [0, %d) "
                            "(element %zu is not)",
                            s->info.vocab_size, i);
            r->prompt[i] = (int32_t)t;
        }
        r->n_prompt = (int64_t)n;
        return 0;
    }
    return fail(e, 400, "invalid_type", "prompt",
                "'prompt' must be a string, a one-string array, or an array of token ids");
}

static int sampling(srv *s, json_object *b, srv_req *r, verr *e)
{
    tq_sampler_params sp = tq_sampler_params_default();
    double d;
    int64_t i;
    static uint64_t seed_counter;
    sp.temperature = 1.0f; /* OpenAI's default */
    sp.repeat_last_n = 64;
    if ((d = sp.temperature, get_number(b, "temperature", &d, e)) < 0)
        return -1;
    sp.temperature = (float)d;
    if ((d = 1, get_number(b, "top_p", &d, e)) < 0)
        return -1;
    sp.top_p = (float)d;
    if ((d = 0, get_number(b, "min_p", &d, e)) < 0)
        return -1;
    sp.min_p = (float)d;
    if ((d = 1, get_number(b, "repeat_penalty", &d, e)) < 0)
        return -1;
    sp.repeat_penalty = (float)d;
    const char *pen[] = {"presence_penalty", "frequency_penalty"};
    for (int k = 0; k < 2; k++) {
        if ((d = 0, get_number(b, pen[k], &d, e)) < 0)
            return -1;
        if (d < -2 || d > 2)
            return fail(e, 400, "invalid_value", pen[k], "'%s' %g is outside [-2, 2]", pen[k], d);
        *(k ? &sp.frequency_penalty : &sp.presence_penalty) = (float)d;
    }
    if ((i = 0, get_int(b, "top_k", &i, e)) < 0)
        return -1;
    if (i < 0 || i > INT32_MAX)
        return fail(e, 400, "invalid_value", "top_k", "'top_k' must be >= 0 (0 = off)");
    sp.top_k = (int32_t)i;
    if ((i = 64, get_int(b, "repeat_last_n", &i, e)) < 0)
        return -1;
    if (i < 0 || i > s->n_ctx)
        return fail(e, 400, "invalid_value", "repeat_last_n", "'repeat_last_n' must be in [0, %d]",
                    s->n_ctx);
    sp.repeat_last_n = (int32_t)i;
    int has = get_int(b, "seed", &i, e);
    if (has < 0)
        return -1;
    sp.seed = has ? (uint64_t)i
                  : (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull +
                        __atomic_add_fetch(&seed_counter, 1, __ATOMIC_RELAXED);
    tq_status st = tq_sampler_create(&sp, s->info.vocab_size, &r->sampler);
    if (st)
        return fail(e, 400, "invalid_value", NULL, "%s", tq_last_error());
    return 0;
}

static int stops(json_object *b, srv_req *r, verr *e)
{
    json_object *v = field(b, "stop");
    if (!v)
        return 0;
    json_object *one[1] = {v};
    size_t n = 1;
    if (json_object_is_type(v, json_type_array))
        n = json_object_array_length(v);
    else if (!json_object_is_type(v, json_type_string))
        return fail(e, 400, "invalid_type", "stop", "'stop' must be a string or an array of strings");
    if (n > SRV_MAX_STOP)
        return fail(e, 400, "invalid_value", "stop", "at most %d stop strings", SRV_MAX_STOP);
    for (size_t k = 0; k < n; k++) {
        json_object *x = json_object_is_type(v, json_type_array) ? json_object_array_get_idx(v, k)
                                                                 : one[0];
        if (!json_object_is_type(x, json_type_string))
            return fail(e, 400, "invalid_type", "stop", "'stop' must be a string or an array of strings");
        if (!json_object_get_string_len(x))
            continue;
        if (!(r->stop[r->n_stop] = strdup(json_object_get_string(x))))
            return fail(e, 500, NULL, NULL, "out of memory");
        r->n_stop++;
    }
    return 0;
}

/* logprobs: chat {"logprobs": true, "top_logprobs": 0..20}; completions {"logprobs": 0..20}
 * (OpenAI allows 5 there; we allow what chat allows). Allocates r's logprob arrays. */
static int logprobs_opts(json_object *b, int chat, srv_req *r, verr *e)
{
    int64_t top = 0;
    if (chat) {
        if (get_bool(b, "logprobs", &r->logprobs, e) < 0)
            return -1;
        const int has = get_int(b, "top_logprobs", &top, e);
        if (has < 0)
            return -1;
        if (has && (top < 0 || top > SRV_MAX_TOP_LOGPROBS))
            return fail(e, 400, "invalid_value", "top_logprobs",
                        "'top_logprobs' must be in [0, %d]", SRV_MAX_TOP_LOGPROBS);
        if (top > 0 && !r->logprobs)
            return fail(e, 400, "invalid_value", "top_logprobs",
                        "'top_logprobs' needs 'logprobs': true");
    } else {
        json_object *v = field(b, "logprobs");
        if (v && json_object_is_type(v, json_type_boolean) && !json_object_get_boolean(v))
            v = NULL; /* false: off, as null */
        if (v) {
            if (get_int(b, "logprobs", &top, e) < 0)
                return -1;
            if (top < 0 || top > SRV_MAX_TOP_LOGPROBS)
                return fail(e, 400, "invalid_value", "logprobs",
                            "'logprobs' must be in [0, %d] (the number of top tokens)",
                            SRV_MAX_TOP_LOGPROBS);
            r->logprobs = 1;
        }
    }
    if (!r->logprobs)
        return 0;
    r->top_n = (int)top;
    const size_t n = (size_t)r->max_tokens, k = (size_t)(top ? top : 1);
    r->lp = malloc(n * sizeof(float));
    r->top_id = malloc(n * k * sizeof(int32_t));
    r->top_lp = malloc(n * k * sizeof(float));
    if (!r->lp || !r->top_id || !r->top_lp)
        return fail(e, 500, NULL, NULL, "out of memory for the logprobs of %lld tokens",
                    (long long)r->max_tokens);
    return 0;
}

/* a generation request from the JSON body: 0, or -1 with *e set */
static int build_request(srv *s, conn *c, json_object *b, verr *e)
{
    json_object *m = field(b, "model");
    if (m && !json_object_is_type(m, json_type_string))
        return fail(e, 400, "invalid_type", "model", "'model' must be a string");
    if (m && strcmp(json_object_get_string(m), s->model_id))
        return fail(e, 404, "model_not_found", "model",
                    "the model '%s' does not exist; this server has '%s' (GET /v1/models)",
                    json_object_get_string(m), s->model_id);
    if (refuse_unsupported(b, c->chat, e))
        return -1;
    int stream = 0;
    if (get_bool(b, "stream", &stream, e) < 0)
        return -1;
    json_object *so = field(b, "stream_options");
    if (so) {
        if (!json_object_is_type(so, json_type_object))
            return fail(e, 400, "invalid_type", "stream_options", "'stream_options' must be an object");
        if (get_bool(so, "include_usage", &c->include_usage, e) < 0)
            return -1;
    }
    srv_req *r = c->req = srv_req_new();
    if (!r)
        return fail(e, 500, NULL, NULL, "out of memory");
    if (get_bool(b, "ignore_eos", &r->ignore_eos, e) < 0 ||
        get_bool(b, "return_tokens", &r->return_tokens, e) < 0 || sampling(s, b, r, e) ||
        stops(b, r, e))
        return -1;
    int64_t mt = -1;
    const char *mt_name = "max_tokens";
    int has = get_int(b, "max_tokens", &mt, e);
    if (has < 0)
        return -1;
    if (!has && c->chat) {
        mt_name = "max_completion_tokens";
        if ((has = get_int(b, mt_name, &mt, e)) < 0)
            return -1;
    }
    if (has && mt < 1)
        return fail(e, 400, "invalid_value", mt_name, "'%s' must be >= 1", mt_name);
    if (has && mt > s->n_ctx)
        return fail(e, 400, "invalid_value", mt_name,
                    "'%s' %lld is above the context of %d tokens per sequence (--ctx)", mt_name,
                    (long long)mt, s->n_ctx);
    if (c->chat ? chat_prompt(s, b, r, e) : completion_prompt(s, b, r, e))
        return -1;
    if (r->n_prompt < 1)
        return fail(e, 400, "invalid_value", c->chat ? "messages" : "prompt",
                    "the prompt is empty (0 tokens)");
    if (r->n_prompt >= s->n_ctx)
        return fail(e, 400, "context_length_exceeded", c->chat ? "messages" : "prompt",
                    "the prompt has %lld tokens; the context (--ctx) is %d tokens, so at most "
                    "%d prompt tokens leave room for one new token",
                    (long long)r->n_prompt, s->n_ctx, s->n_ctx - 1);
    r->max_tokens = has ? mt : s->n_ctx - r->n_prompt;
    if (!(r->toks = malloc((size_t)r->max_tokens * sizeof(int32_t))))
        return fail(e, 500, NULL, NULL, "out of memory");
    if (logprobs_opts(b, c->chat, r, e))
        return -1;
    return stream;
}

/* ---- responses --------------------------------------------------------------------------- */

static const char *finish_name(srv_finish f)
{
    return f == SRV_FIN_LENGTH ? "length" : "stop";
}

static json_object *usage_obj(const srv_req *r)
{
    json_object *u = json_object_new_object();
    json_object_object_add(u, "prompt_tokens", json_object_new_int64(r->n_prompt));
    json_object_object_add(u, "completion_tokens", json_object_new_int64(r->n_gen));
    json_object_object_add(u, "total_tokens", json_object_new_int64(r->n_prompt + r->n_gen));
    json_object *d = json_object_new_object();
    json_object_object_add(d, "cached_tokens", json_object_new_int64(r->n_cached));
    json_object_object_add(u, "prompt_tokens_details", d);
    return u;
}

static json_object *envelope(const conn *c, const char *object)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "id", json_object_new_string(c->id));
    json_object_object_add(o, "object", json_object_new_string(object));
    json_object_object_add(o, "created", json_object_new_int64(c->created));
    json_object_object_add(o, "model", json_object_new_string(c->s->model_id));
    char fp[64];
    snprintf(fp, sizeof(fp), "tq-%s-%s", tq_version_string(), c->s->o.kv);
    json_object_object_add(o, "system_fingerprint", json_object_new_string(fp));
    return o;
}

/* ---- logprobs ----------------------------------------------------------------------------
 * Log-probabilities come from the raw logits of the step that produced the token: the
 * log-softmax over the whole vocabulary before any penalty, temperature or filter (what the
 * model predicts, as vLLM returns by default; tq_logprobs()). A token's string is its piece
 * alone (invalid UTF-8 of a partial character as U+FFFD; "bytes" has the exact bytes). */

static json_object *jlp(float v)
{
    /* -inf (only a -inf or NaN logit gives it) is not JSON: OpenAI's floor -9999 */
    return json_object_new_double(isfinite(v) ? (double)v : -9999.0);
}

static const char *piece_of(const srv *s, int32_t id, size_t *len)
{
    const char *p = tq_tokenizer_piece(s->tok, id, len);
    if (!p)
        *len = 0;
    return p ? p : "";
}

/* {"token", "logprob", "bytes"} of one id (chat) */
static json_object *lp_entry(const srv *s, int32_t id, float lp)
{
    size_t n = 0;
    const char *p = piece_of(s, id, &n);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "token", jstr(p, n));
    json_object_object_add(o, "logprob", jlp(lp));
    json_object *b = json_object_new_array_ext((int)n);
    for (size_t i = 0; i < n; i++)
        json_object_array_add(b, json_object_new_int((unsigned char)p[i]));
    json_object_object_add(o, "bytes", b);
    return o;
}

/* the logprobs of completion tokens [from, to): chat {"content": [...], "refusal": null};
 * completions {"tokens", "token_logprobs", "top_logprobs", "text_offset"}, the offsets in
 * characters from the start of the completion (as vLLM without echo), continued from *off */
static json_object *logprobs_obj(const conn *c, const srv_req *r, int64_t from, int64_t to,
                                 int64_t *off)
{
    const srv *s = c->s;
    const int k = r->top_n;
    json_object *o = json_object_new_object();
    if (c->chat) {
        json_object *a = json_object_new_array_ext((int)(to - from));
        for (int64_t i = from; i < to; i++) {
            json_object *e = lp_entry(s, r->toks[i], r->lp[i]);
            json_object *top = json_object_new_array_ext(k);
            for (int j = 0; j < k; j++)
                json_object_array_add(top, lp_entry(s, r->top_id[i * k + j],
                                                    r->top_lp[i * k + j]));
            json_object_object_add(e, "top_logprobs", top);
            json_object_array_add(a, e);
        }
        json_object_object_add(o, "content", a);
        json_object_object_add(o, "refusal", NULL);
        return o;
    }
    json_object *tk = json_object_new_array_ext((int)(to - from));
    json_object *tl = json_object_new_array_ext((int)(to - from));
    json_object *tp = json_object_new_array_ext((int)(to - from));
    json_object *to_ = json_object_new_array_ext((int)(to - from));
    for (int64_t i = from; i < to; i++) {
        size_t n = 0;
        const char *p = piece_of(s, r->toks[i], &n);
        json_object_array_add(tk, jstr(p, n));
        json_object_array_add(tl, jlp(r->lp[i]));
        json_object *d = json_object_new_object();
        for (int j = 0; j < k; j++) {
            size_t m = 0;
            const char *q = piece_of(s, r->top_id[i * k + j], &m);
            size_t mc = 0;
            char *qc = utf8_clean(q, m, &mc);
            if (qc && !json_object_object_get_ex(d, qc, NULL)) /* same text: the likelier one */
                json_object_object_add(d, qc, jlp(r->top_lp[i * k + j]));
            free(qc);
        }
        json_object_array_add(tp, d);
        json_object_array_add(to_, json_object_new_int64(*off));
        /* + the characters of the token's string (as sent: partial characters as U+FFFD), so
         * text_offset[i] = the summed lengths of tokens[0..i), as vLLM computes it */
        size_t nc = 0;
        char *pc = utf8_clean(p, n, &nc);
        for (size_t b = 0; pc && b < nc; b++)
            *off += ((unsigned char)pc[b] & 0xc0) != 0x80;
        free(pc);
    }
    json_object_object_add(o, "tokens", tk);
    json_object_object_add(o, "token_logprobs", tl);
    json_object_object_add(o, "top_logprobs", tp);
    json_object_object_add(o, "text_offset", to_);
    return o;
}

/* choice object: for chat a message (full) or delta (stream); text/delta text; lp: the logprobs
 * object (taken over) or NULL for null */
static json_object *choice(const conn *c, const char *text, size_t n, int delta, int role,
                           const char *finish, json_object *lp)
{
    json_object *ch = json_object_new_object();
    json_object_object_add(ch, "index", json_object_new_int(0));
    if (c->chat) {
        json_object *msg = json_object_new_object();
        if (role)
            json_object_object_add(msg, "role", json_object_new_string("assistant"));
        if (text)
            json_object_object_add(msg, "content", jstr(text, n));
        json_object_object_add(ch, delta ? "delta" : "message", msg);
    } else {
        json_object_object_add(ch, "text", jstr(text ? text : "", text ? n : 0));
    }
    json_object_object_add(ch, "logprobs", lp);
    json_object_object_add(ch, "finish_reason", finish ? json_object_new_string(finish) : NULL);
    return ch;
}

static void add_tokens(json_object *ch, const srv_req *r, int64_t from, int64_t to)
{
    json_object *a = json_object_new_array_ext((int)(to - from));
    for (int64_t i = from; i < to; i++)
        json_object_array_add(a, json_object_new_int(r->toks[i]));
    json_object_object_add(ch, "tokens", a);
}

static enum MHD_Result send_result(struct MHD_Connection *mc, conn *c)
{
    srv_req *r = c->req;
    if (r->finish == SRV_FIN_ERROR)
        return send_error(mc, c->s, 500, "engine_error", NULL, "%s", r->err);
    json_object *o = envelope(c, c->chat ? "chat.completion" : "text_completion");
    json_object *chs = json_object_new_array();
    int64_t off = 0;
    json_object *ch = choice(c, r->text ? r->text : "", r->n_text, 0, 1, finish_name(r->finish),
                             r->logprobs ? logprobs_obj(c, r, 0, r->n_gen, &off) : NULL);
    if (r->return_tokens)
        add_tokens(ch, r, 0, r->n_gen);
    json_object_array_add(chs, ch);
    json_object_object_add(o, "choices", chs);
    json_object_object_add(o, "usage", usage_obj(r));
    return send_json(mc, c->s, 200, o);
}

static int out_add(conn *c, const char *p, size_t n)
{
    if (c->n_out + n > c->cap_out) {
        size_t nc = c->cap_out ? c->cap_out : 4096;
        while (nc < c->n_out + n)
            nc *= 2;
        char *q = realloc(c->out, nc);
        if (!q)
            return -1;
        c->out = q;
        c->cap_out = nc;
    }
    memcpy(c->out + c->n_out, p, n);
    c->n_out += n;
    return 0;
}

static int out_event(conn *c, json_object *o)
{
    size_t len = 0;
    const char *t = json_object_to_json_string_length(o, JSON_C_TO_STRING_PLAIN, &len);
    int rc = out_add(c, "data: ", 6) || out_add(c, t, len) || out_add(c, "\n\n", 2);
    json_object_put(o);
    return rc;
}

static json_object *chunk(conn *c, const char *text, size_t n, int role, const char *finish,
                          json_object *lp)
{
    json_object *o = envelope(c, c->chat ? "chat.completion.chunk" : "text_completion");
    json_object *chs = json_object_new_array();
    json_object_array_add(chs, choice(c, text, n, 1, role, finish, lp));
    json_object_object_add(o, "choices", chs);
    return o;
}

/* content-reader callback of a stream: SSE events as the scheduler publishes text */
static ssize_t stream_read(void *cls, uint64_t pos, char *buf, size_t max)
{
    conn *c = cls;
    srv *s = c->s;
    srv_req *r = c->req;
    (void)pos;
    for (;;) {
        if (c->off_out < c->n_out) {
            size_t n = c->n_out - c->off_out;
            if (n > max)
                n = max;
            memcpy(buf, c->out + c->off_out, n);
            c->off_out += n;
            return (ssize_t)n;
        }
        c->n_out = c->off_out = 0;
        if (c->phase == 3)
            return MHD_CONTENT_READER_END_OF_STREAM;
        if (c->phase == 0) {
            if (out_event(c, chunk(c, c->chat ? "" : NULL, 0, 1, NULL, NULL)))
                return MHD_CONTENT_READER_END_WITH_ERROR;
            c->phase = 1;
            continue;
        }
        if (c->phase == 2) {
            if (out_add(c, "data: [DONE]\n\n", 14))
                return MHD_CONTENT_READER_END_WITH_ERROR;
            c->phase = 3;
            continue;
        }
        pthread_mutex_lock(&s->mu);
        while (r->n_text == c->n_sent && !r->finish) {
            cond_wait_ms(&r->cv, &s->mu, 100);
            if (r->n_text == c->n_sent && !r->finish && client_gone(c)) {
                r->cancel = 1;
                pthread_cond_signal(&s->wake);
                pthread_mutex_unlock(&s->mu);
                return MHD_CONTENT_READER_END_WITH_ERROR;
            }
        }
        const size_t from = c->n_sent, to = r->n_text;
        const srv_finish fin = r->finish;
        const int64_t ng = r->n_gen; /* logprobs below ng are written and stay as they are */
        char *piece = to > from ? malloc(to - from) : NULL;
        if (piece)
            memcpy(piece, r->text + from, to - from);
        pthread_mutex_unlock(&s->mu);
        int bad = 0;
        /* each text chunk carries the logprobs of the tokens generated since the last one;
         * tokens whose text is still held back (a possible stop string, a partial character)
         * ride on a later chunk, the rest on an empty chunk before the finish */
        const int lp_now = r->logprobs && ng > c->n_tok_sent && (to > from || (fin &&
                           fin != SRV_FIN_ERROR && fin != SRV_FIN_CANCEL));
        if (to > from || lp_now) {
            json_object *lp = lp_now ? logprobs_obj(c, r, c->n_tok_sent, ng, &c->lp_off) : NULL;
            if (to > from && !piece) {
                json_object_put(lp);
                bad = 1;
            } else {
                bad = out_event(c, chunk(c, piece ? piece : "", to - from, 0, NULL, lp));
            }
            c->n_sent = to;
            if (lp_now)
                c->n_tok_sent = ng;
        }
        free(piece);
        if (!bad && fin) {
            if (fin == SRV_FIN_ERROR || fin == SRV_FIN_CANCEL) {
                bad = out_event(c, error_obj(500, "engine_error", NULL,
                                             r->err[0] ? r->err : "request ended"));
            } else {
                bad = out_event(c, chunk(c, NULL, 0, 0, finish_name(fin), NULL));
                if (!bad && c->include_usage) {
                    json_object *o = envelope(c, c->chat ? "chat.completion.chunk"
                                                         : "text_completion");
                    json_object_object_add(o, "choices", json_object_new_array());
                    json_object_object_add(o, "usage", usage_obj(r));
                    bad = out_event(c, o);
                }
            }
            c->phase = 2;
        }
        if (bad)
            return MHD_CONTENT_READER_END_WITH_ERROR;
    }
}

static enum MHD_Result start_stream(struct MHD_Connection *mc, conn *c)
{
    struct MHD_Response *rs =
        MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 16384, stream_read, c, NULL);
    if (!rs)
        return MHD_NO;
    MHD_add_response_header(rs, "Content-Type", "text/event-stream");
    MHD_add_response_header(rs, "Cache-Control", "no-cache");
    enum MHD_Result ret = MHD_queue_response(mc, 200, rs);
    MHD_destroy_response(rs);
    count_status(c->s, 200);
    return ret;
}

static enum MHD_Result generate(struct MHD_Connection *mc, conn *c, json_object *b)
{
    srv *s = c->s;
    verr e = {0};
    int stream = build_request(s, c, b, &e);
    if (stream < 0)
        return send_error(mc, s, e.status, e.code, e.param, "%s", e.msg);
    static uint64_t counter;
    snprintf(c->id, sizeof(c->id), "%s-%llx%06llx", c->chat ? "chatcmpl" : "cmpl",
             (unsigned long long)time(NULL),
             (unsigned long long)__atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED));
    c->created = (long)time(NULL);
    if (srv_submit(s, c->req))
        return send_error(mc, s, 503, "server_busy", NULL,
                          "the server is busy (queue of %d full) or not ready; retry later",
                          s->o.max_queue);
    if (stream)
        return start_stream(mc, c);
    srv_req *r = c->req;
    pthread_mutex_lock(&s->mu);
    while (!r->finish) {
        cond_wait_ms(&r->cv, &s->mu, 100);
        if (!r->finish && client_gone(c)) {
            r->cancel = 1;
            pthread_cond_signal(&s->wake);
            pthread_mutex_unlock(&s->mu);
            return MHD_NO;
        }
    }
    pthread_mutex_unlock(&s->mu);
    return send_result(mc, c);
}

/* ---- other endpoints --------------------------------------------------------------------- */

static enum MHD_Result models(struct MHD_Connection *mc, srv *s)
{
    json_object *m = json_object_new_object();
    json_object_object_add(m, "id", json_object_new_string(s->model_id));
    json_object_object_add(m, "object", json_object_new_string("model"));
    json_object_object_add(m, "created", json_object_new_int64(s->created));
    json_object_object_add(m, "owned_by", json_object_new_string("turboquant"));
    json_object *meta = json_object_new_object();
    json_object_object_add(meta, "arch", json_object_new_string(s->info.arch_name));
    json_object_object_add(meta, "n_ctx", json_object_new_int(s->n_ctx));
    json_object_object_add(meta, "n_vocab", json_object_new_int(s->info.vocab_size));
    json_object_object_add(meta, "kv", json_object_new_string(s->o.kv));
    json_object_object_add(meta, "parallel", json_object_new_int(s->n_slots));
    json_object_object_add(m, "meta", meta);
    json_object *d = json_object_new_array();
    json_object_array_add(d, m);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "object", json_object_new_string("list"));
    json_object_object_add(o, "data", d);
    return send_json(mc, s, 200, o);
}

/* append to t[0..cap) at *n, keeping *n < cap (output cut, never overrun) */
static void addf(char *t, size_t cap, int *n, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
static void addf(char *t, size_t cap, int *n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int k = vsnprintf(t + *n, cap - (size_t)*n, fmt, ap);
    va_end(ap);
    if (k > 0)
        *n = (size_t)*n + (size_t)k < cap ? *n + k : (int)cap - 1;
}

static enum MHD_Result metrics(struct MHD_Connection *mc, srv *s)
{
    const size_t cap = 6144 + 192 * ((size_t)s->n_slots + 1);
    char *t = malloc(cap);
    if (!t)
        return send_error(mc, s, 500, NULL, NULL, "out of memory");
    pthread_mutex_lock(&s->mu);
    int n = snprintf(
        t, cap,
        "# HELP tq_http_responses_total HTTP responses by status class.\n"
        "# TYPE tq_http_responses_total counter\n"
        "tq_http_responses_total{class=\"2xx\"} %llu\n"
        "tq_http_responses_total{class=\"4xx\"} %llu\n"
        "tq_http_responses_total{class=\"5xx\"} %llu\n"
        "# HELP tq_requests_total Generation requests accepted into the queue.\n"
        "# TYPE tq_requests_total counter\ntq_requests_total %llu\n"
        "# HELP tq_requests_shed_total Generation requests refused with 503 (queue full).\n"
        "# TYPE tq_requests_shed_total counter\ntq_requests_shed_total %llu\n"
        "# HELP tq_requests_cancelled_total Requests whose client went away.\n"
        "# TYPE tq_requests_cancelled_total counter\ntq_requests_cancelled_total %llu\n"
        "# HELP tq_prompt_tokens_total Prompt tokens of finished requests.\n"
        "# TYPE tq_prompt_tokens_total counter\ntq_prompt_tokens_total %llu\n"
        "# HELP tq_prompt_tokens_cached_total Prompt tokens reused from a slot's cache.\n"
        "# TYPE tq_prompt_tokens_cached_total counter\ntq_prompt_tokens_cached_total %llu\n"
        "# HELP tq_tokens_generated_total Completion tokens.\n"
        "# TYPE tq_tokens_generated_total counter\ntq_tokens_generated_total %llu\n"
        "# HELP tq_forward_passes_total Batched forward passes (one per scheduler step).\n"
        "# TYPE tq_forward_passes_total counter\ntq_forward_passes_total %llu\n"
        "# HELP tq_forward_sequences_total Sequences served by those passes (sum of batch sizes).\n"
        "# TYPE tq_forward_sequences_total counter\ntq_forward_sequences_total %llu\n"
        "# HELP tq_forward_prompt_chunks_total Prompt chunks evaluated by those passes.\n"
        "# TYPE tq_forward_prompt_chunks_total counter\ntq_forward_prompt_chunks_total %llu\n"
        "# HELP tq_forward_multi_prompt_total Passes that prefilled several prompts at once.\n"
        "# TYPE tq_forward_multi_prompt_total counter\ntq_forward_multi_prompt_total %llu\n"
        "# HELP tq_queue_depth Requests waiting for a slot.\n"
        "# TYPE tq_queue_depth gauge\ntq_queue_depth %d\n"
        "# HELP tq_slots_busy Slots serving a request.\n"
        "# TYPE tq_slots_busy gauge\ntq_slots_busy %d\n"
        "# HELP tq_slots_total Slots (--parallel).\n"
        "# TYPE tq_slots_total gauge\ntq_slots_total %d\n"
        "# HELP tq_kv_bytes_in_use KV-cache bytes holding tokens, in the scheme's real size.\n"
        "# TYPE tq_kv_bytes_in_use gauge\ntq_kv_bytes_in_use{scheme=\"%s\"} %llu\n"
        "# HELP tq_kv_bytes_per_token KV-cache bytes of one token (all layers).\n"
        "# TYPE tq_kv_bytes_per_token gauge\ntq_kv_bytes_per_token{scheme=\"%s\"} %zu\n",
        (unsigned long long)s->m_http[2], (unsigned long long)s->m_http[4],
        (unsigned long long)s->m_http[5], (unsigned long long)s->m_requests,
        (unsigned long long)s->m_shed, (unsigned long long)s->m_cancelled,
        (unsigned long long)s->m_prompt_tokens, (unsigned long long)s->m_cached_tokens,
        (unsigned long long)s->m_gen_tokens, (unsigned long long)s->m_steps,
        (unsigned long long)s->m_step_seqs, (unsigned long long)s->m_prompt_chunks,
        (unsigned long long)s->m_multi_prompt, s->n_queued, s->n_busy, s->n_slots, s->o.kv,
        (unsigned long long)((uint64_t)s->kv_tokens * s->kv_bytes_per_token), s->o.kv,
        s->kv_bytes_per_token);
    /* decode-only steps by batch size: their mean time gives the batch scaling directly */
    if (n < 0 || (size_t)n >= cap)
        n = (int)cap - 1;
    /* where the scheduler thread's time goes: forward passes (those with a prompt chunk apart),
     * its own work around them, and waiting for requests; the rest of the wall time it spent
     * waiting for mu or descheduled */
    addf(t, cap, &n,
         "# HELP tq_forward_seconds_total Seconds in forward passes.\n"
         "# TYPE tq_forward_seconds_total counter\ntq_forward_seconds_total %.6f\n"
         "# HELP tq_forward_prompt_seconds_total Seconds in forward passes with a prompt chunk.\n"
         "# TYPE tq_forward_prompt_seconds_total counter\ntq_forward_prompt_seconds_total %.6f\n"
         "# HELP tq_scheduler_work_seconds_total Seconds of the scheduler's work around the "
         "passes (admission, sampling, detokenizing, publishing).\n"
         "# TYPE tq_scheduler_work_seconds_total counter\ntq_scheduler_work_seconds_total %.6f\n"
         "# HELP tq_scheduler_idle_seconds_total Seconds the scheduler waited with no request.\n"
         "# TYPE tq_scheduler_idle_seconds_total counter\ntq_scheduler_idle_seconds_total %.6f\n",
         s->m_fwd_s, s->m_prompt_s, s->m_work_s,
         s->m_idle_s + (s->idle_since > 0 ? srv_now() - s->idle_since : 0.0));
    addf(t, cap, &n, "# HELP tq_decode_steps_total Forward passes with no prompt chunk, by the "
                     "number of sequences decoded together.\n"
                     "# TYPE tq_decode_steps_total counter\n");
    for (int k = 1; k <= s->n_slots; k++)
        if (s->m_dsteps[k])
            addf(t, cap, &n, "tq_decode_steps_total{seqs=\"%d\"} %llu\n", k,
                 (unsigned long long)s->m_dsteps[k]);
    addf(t, cap, &n, "# HELP tq_decode_step_seconds_total Seconds in those forward passes.\n"
                     "# TYPE tq_decode_step_seconds_total counter\n");
    for (int k = 1; k <= s->n_slots; k++)
        if (s->m_dsteps[k])
            addf(t, cap, &n, "tq_decode_step_seconds_total{seqs=\"%d\"} %.6f\n", k,
                 s->m_dstep_s[k]);
    pthread_mutex_unlock(&s->mu);
    enum MHD_Result r = send_text(mc, s, 200, "text/plain; version=0.0.4", t, (size_t)n);
    free(t);
    return r;
}

static enum MHD_Result tokenize(struct MHD_Connection *mc, srv *s, json_object *b)
{
    verr e = {0};
    json_object *ct = field(b, "content");
    int add_special = 0, parse_special = 1;
    if (!ct || !json_object_is_type(ct, json_type_string))
        return send_error(mc, s, 400, "invalid_type", "content", "'content' must be a string");
    if (get_bool(b, "add_special", &add_special, &e) < 0 ||
        get_bool(b, "parse_special", &parse_special, &e) < 0)
        return send_error(mc, s, e.status, e.code, e.param, "%s", e.msg);
    int32_t *ids = NULL;
    int64_t n = 0;
    if (encode(s, json_object_get_string(ct), (size_t)json_object_get_string_len(ct),
               (add_special ? TQ_TOK_ADD_BOS_AUTO : 0) | (parse_special ? TQ_TOK_PARSE_SPECIAL : 0),
               &ids, &n, &e)) {
        free(ids);
        return send_error(mc, s, e.status, e.code, e.param, "%s", e.msg);
    }
    json_object *a = json_object_new_array_ext((int)n);
    for (int64_t i = 0; i < n; i++)
        json_object_array_add(a, json_object_new_int(ids[i]));
    free(ids);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "tokens", a);
    return send_json(mc, s, 200, o);
}

static enum MHD_Result detokenize(struct MHD_Connection *mc, srv *s, json_object *b)
{
    json_object *a = field(b, "tokens");
    if (!a || !json_object_is_type(a, json_type_array))
        return send_error(mc, s, 400, "invalid_type", "tokens",
                          "'tokens' must be an array of token ids");
    const size_t n = json_object_array_length(a);
    int32_t *ids = malloc((n ? n : 1) * sizeof(int32_t));
    if (!ids)
        return send_error(mc, s, 500, NULL, NULL, "out of memory");
    for (size_t i = 0; i < n; i++) {
        json_object *v = json_object_array_get_idx(a, i);
        const int64_t t = json_object_is_type(v, json_type_int) ? json_object_get_int64(v) : -1;
        if (t < 0 || t >= tq_tokenizer_vocab_size(s->tok)) {
            free(ids);
            return send_error(mc, s, 400, "invalid_value", "tokens",
                              "tokens[%zu] is not a token id in [0, %d)", i,
                              tq_tokenizer_vocab_size(s->tok));
        }
        ids[i] = (int32_t)t;
    }
    size_t need = 0, cap = 16 * n + 16;
    char *t = malloc(cap);
    tq_status st = t ? tq_tokenizer_decode(s->tok, ids, (int64_t)n, 0, t, cap, &need) : TQ_E_NOMEM;
    if (st == TQ_E_OVERFLOW) {
        free(t);
        cap = need + 1;
        t = malloc(cap);
        st = t ? tq_tokenizer_decode(s->tok, ids, (int64_t)n, 0, t, cap, &need) : TQ_E_NOMEM;
    }
    free(ids);
    if (st) {
        free(t);
        return send_error(mc, s, 400, "invalid_value", "tokens", "cannot decode: %s",
                          tq_last_error());
    }
    json_object *o = json_object_new_object();
    json_object_object_add(o, "content", jstr(t, need));
    free(t);
    return send_json(mc, s, 200, o);
}

/* ---- routing ----------------------------------------------------------------------------- */

typedef enum route {
    R_NONE, R_HEALTH, R_METRICS, R_MODELS, R_CHAT, R_COMPLETIONS, R_TOKENIZE, R_DETOKENIZE
} route;

static route find_route(const char *url, int *post)
{
    static const struct {
        const char *path;
        route r;
        int post;
    } t[] = {
        {"/health", R_HEALTH, 0},          {"/v1/health", R_HEALTH, 0},
        {"/metrics", R_METRICS, 0},        {"/v1/models", R_MODELS, 0},
        {"/models", R_MODELS, 0},          {"/v1/chat/completions", R_CHAT, 1},
        {"/chat/completions", R_CHAT, 1},  {"/v1/completions", R_COMPLETIONS, 1},
        {"/completions", R_COMPLETIONS, 1}, {"/tokenize", R_TOKENIZE, 1},
        {"/detokenize", R_DETOKENIZE, 1},
    };
    for (size_t i = 0; i < sizeof(t) / sizeof(t[0]); i++)
        if (!strcmp(url, t[i].path)) {
            *post = t[i].post;
            return t[i].r;
        }
    return R_NONE;
}

/* constant-time comparison of the Authorization header with "Bearer KEY" */
static int auth_ok(struct MHD_Connection *mc, const char *key)
{
    const char *h = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Authorization");
    if (!h || strncmp(h, "Bearer ", 7))
        return 0;
    h += 7;
    const size_t a = strlen(h), b = strlen(key);
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < a; i++)
        diff |= (unsigned char)h[i] ^ (unsigned char)key[i % (b ? b : 1)];
    return diff == 0;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *mc, const char *url,
                                  const char *method, const char *version,
                                  const char *upload_data, size_t *upload_data_size,
                                  void **con_cls)
{
    srv *s = cls;
    conn *c = *con_cls;
    (void)version;
    if (!c) { /* first call: headers only */
        c = calloc(1, sizeof(*c));
        if (!c)
            return MHD_NO;
        c->s = s;
        c->fd = -1;
        const union MHD_ConnectionInfo *ci =
            MHD_get_connection_info(mc, MHD_CONNECTION_INFO_CONNECTION_FD);
        if (ci)
            c->fd = ci->connect_fd;
        *con_cls = c;
        int post = 0;
        const route r = find_route(url, &post);
        if (r == R_NONE) {
            c->answered = 1;
            return send_error(mc, s, 404, "not_found", NULL, "no endpoint %s %s", method, url);
        }
        if (strcmp(method, post ? "POST" : "GET")) {
            c->answered = 1;
            return send_error(mc, s, 405, "method_not_allowed", NULL, "%s needs %s, not %s", url,
                              post ? "POST" : "GET", method);
        }
        if (s->o.api_key && r != R_HEALTH && !auth_ok(mc, s->o.api_key)) {
            c->answered = 1;
            return send_error(mc, s, 401, "invalid_api_key", NULL,
                              "missing or wrong API key (send 'Authorization: Bearer KEY')");
        }
        const char *cl = MHD_lookup_connection_value(mc, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > s->o.max_body) {
            c->answered = 1;
            return send_error(mc, s, 413, "body_too_large", NULL,
                              "the request body has %s bytes; the limit is %zu (--max-body)", cl,
                              s->o.max_body);
        }
        return MHD_YES;
    }
    if (c->answered)
        return MHD_YES; /* the rest of a body we already refused */
    if (*upload_data_size) {
        const size_t n = *upload_data_size;
        *upload_data_size = 0;
        if (c->too_big || c->n_body + n > s->o.max_body) {
            c->too_big = 1;
            return MHD_YES;
        }
        if (c->n_body + n + 1 > c->cap_body) {
            size_t nc = c->cap_body ? c->cap_body : 4096;
            while (nc < c->n_body + n + 1)
                nc *= 2;
            char *p = realloc(c->body, nc);
            if (!p)
                return MHD_NO;
            c->body = p;
            c->cap_body = nc;
        }
        memcpy(c->body + c->n_body, upload_data, n);
        c->n_body += n;
        c->body[c->n_body] = 0;
        return MHD_YES;
    }
    c->answered = 1;
    if (c->too_big)
        return send_error(mc, s, 413, "body_too_large", NULL,
                          "the request body is above the limit of %zu bytes (--max-body)",
                          s->o.max_body);
    int post = 0;
    const route r = find_route(url, &post);
    pthread_mutex_lock(&s->mu);
    const int ready = s->ready && !s->quit;
    pthread_mutex_unlock(&s->mu);
    if (r == R_HEALTH) {
        const char *t = ready ? "{\"status\":\"ok\"}" : "{\"status\":\"loading model\"}";
        return send_text(mc, s, ready ? 200 : 503, "application/json", t, strlen(t));
    }
    if (!ready)
        return send_error(mc, s, 503, "loading", NULL, "the model is still loading");
    if (r == R_METRICS)
        return metrics(mc, s);
    if (r == R_MODELS)
        return models(mc, s);
    /* POST endpoints: a JSON object body */
    json_tokener *tk = json_tokener_new();
    if (!tk)
        return send_error(mc, s, 500, NULL, NULL, "out of memory");
    json_object *b = json_tokener_parse_ex(tk, c->body ? c->body : "", (int)c->n_body);
    const enum json_tokener_error je = json_tokener_get_error(tk);
    size_t end = json_tokener_get_parse_end(tk);
    json_tokener_free(tk);
    while (b && end < c->n_body && strchr(" \t\r\n", c->body[end]))
        end++;
    if (!b || je != json_tokener_success || end != c->n_body) {
        json_object_put(b);
        return send_error(mc, s, 400, "invalid_json", NULL,
                          "the body is not valid JSON (%s at byte %zu)",
                          je == json_tokener_continue  ? "unexpected end of input"
                          : je != json_tokener_success ? json_tokener_error_desc(je)
                          : b                        ? "trailing data"
                                                     : "empty body",
                          end);
    }
    if (!json_object_is_type(b, json_type_object)) {
        json_object_put(b);
        return send_error(mc, s, 400, "invalid_type", NULL, "the body must be a JSON object");
    }
    enum MHD_Result ret;
    if (r == R_TOKENIZE) {
        ret = tokenize(mc, s, b);
    } else if (r == R_DETOKENIZE) {
        ret = detokenize(mc, s, b);
    } else {
        c->chat = r == R_CHAT;
        ret = generate(mc, c, b);
    }
    json_object_put(b);
    return ret;
}

static void on_completed(void *cls, struct MHD_Connection *mc, void **con_cls,
                         enum MHD_RequestTerminationCode toe)
{
    srv *s = cls;
    conn *c = *con_cls;
    (void)mc;
    (void)toe;
    if (!c)
        return;
    if (c->req) {
        pthread_mutex_lock(&s->mu);
        if (!c->req->finish) {
            c->req->cancel = 1;
            pthread_cond_signal(&s->wake);
        }
        pthread_mutex_unlock(&s->mu);
        srv_req_release(s, c->req);
    }
    free(c->body);
    free(c->out);
    free(c);
    *con_cls = NULL;
}

int srv_http_start(srv *s)
{
    struct sockaddr_in a4 = {0};
    struct sockaddr_in6 a6 = {0};
    struct sockaddr *sa;
    unsigned flags = MHD_USE_AUTO | MHD_USE_INTERNAL_POLLING_THREAD |
                     MHD_USE_THREAD_PER_CONNECTION;
    const char *host = !strcmp(s->o.host, "localhost") ? "127.0.0.1" : s->o.host;
    if (inet_pton(AF_INET, host, &a4.sin_addr) == 1) {
        a4.sin_family = AF_INET;
        a4.sin_port = htons((uint16_t)s->o.port);
        sa = (struct sockaddr *)&a4;
    } else if (inet_pton(AF_INET6, host, &a6.sin6_addr) == 1) {
        a6.sin6_family = AF_INET6;
        a6.sin6_port = htons((uint16_t)s->o.port);
        sa = (struct sockaddr *)&a6;
        flags |= MHD_USE_IPv6;
    } else {
        fprintf(stderr, "tq serve: --host '%s' is not an IPv4 or IPv6 address\n", s->o.host);
        return 2;
    }
    daemon_ = MHD_start_daemon(flags, (uint16_t)s->o.port, NULL, NULL, on_request, s,
                               MHD_OPTION_SOCK_ADDR, sa,
                               MHD_OPTION_NOTIFY_COMPLETED, on_completed, s,
                               MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)s->o.timeout,
                               MHD_OPTION_CONNECTION_LIMIT, (unsigned)1000,
                               MHD_OPTION_LISTEN_BACKLOG_SIZE, (unsigned)512,
                               MHD_OPTION_THREAD_STACK_SIZE, (size_t)(512 << 10), MHD_OPTION_END);
    if (!daemon_) {
        fprintf(stderr, "tq serve: cannot listen on %s port %d (in use? permission?)\n", s->o.host,
                s->o.port);
        return 1;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(daemon_, MHD_DAEMON_INFO_BIND_PORT);
    fprintf(stderr, "tq serve: listening on http://%s%s%s:%u\n", sa->sa_family == AF_INET6 ? "[" : "",
            s->o.host, sa->sa_family == AF_INET6 ? "]" : "", di ? di->port : (unsigned)s->o.port);
    return 0;
}

void srv_http_stop(srv *s)
{
    (void)s;
    if (daemon_)
        MHD_stop_daemon(daemon_);
    daemon_ = NULL;
}

#else /* !TQ_HAVE_MHD */

int srv_http_start(srv *s)
{
    (void)s;
    fprintf(stderr, "tq serve: this tq was built without libmicrohttpd (Debian: apt install "
                    "libmicrohttpd-dev, then rebuild)\n");
    return 1;
}

void srv_http_stop(srv *s)
{
    (void)s;
}

#endif
