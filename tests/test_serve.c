/* test_serve.c -- `tq serve` end to end with curl on loopback, on the tiny random Llama of
 * tests/data/tiny/llama (vocab 256) with a byte-level tokenizer written here (token i = byte i)
 * and --chat-format chatml. Checks health, models, completions (greedy tokens equal the
 * library's own greedy loop over one session: the oracle), chat, streaming (the deltas add up
 * to the plain answer, [DONE] last), the prompt cache count, tokenize/detokenize, metrics, the
 * API key, and bad requests: malformed JSON, wrong types, unknown model, empty messages, a body
 * over the limit, max_tokens 1e9, a prompt over the context, n = 2, unknown paths and methods;
 * the server must still answer afterwards and exit 0 on SIGTERM. logprobs (chat, completions,
 * streamed) against the log-softmax of the library's own logits computed here;
 * presence/frequency penalties against a greedy loop applying OpenAI's rule here. Robustness:
 * 200 connections opened at once (200 or 503 each, then still serving), clients that send half
 * a request and stall (closed after --timeout while others are served), 16 greedy requests at
 * once against --parallel 8 --chunk 8 (each equal to its lone run). --prompt-cache-dir:
 * restored after a restart, refused for another --kv and for another model, loadable after
 * kill -9 mid-write. Startup refusals: --parallel x --ctx over --kv-mem, an unknown --kv
 * scheme, --kv turbo for a head_dim (192) it does not support. Skips (77) when curl is not
 * installed. */
#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>

#include "cli_run.h"
#include "turboquant.h"

#define MODEL "tests/data/tiny/llama"
#define KEY "sekrit-key"

static char dir[64] = "/tmp/tq_serve_XXXXXX";
static char tok_path[128], base[64];
static pid_t server = -1;

static int byte_cp(int b)
{
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))
        return b;
    int n = 0;
    for (int x = 0; x < b; x++)
        if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255)))
            n++;
    return 256 + n;
}

/* a byte-level BPE tokenizer.json without merges: token i is byte i */
static void write_tokenizer(const char *path)
{
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    fprintf(f, "{\"model\":{\"type\":\"BPE\",\"vocab\":{");
    for (int b = 0; b < 256; b++) {
        const int cp = byte_cp(b);
        char u[8];
        if (cp < 0x80)
            snprintf(u, sizeof(u), "%s%c", cp == '"' || cp == '\\' ? "\\" : "", cp);
        else
            snprintf(u, sizeof(u), "%c%c", 0xc0 | (cp >> 6), 0x80 | (cp & 0x3f));
        fprintf(f, "%s\"%s\":%d", b ? "," : "", u, b);
    }
    fprintf(f, "},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"ByteLevel\","
               "\"add_prefix_space\":false,\"use_regex\":false}}");
    fclose(f);
}

typedef struct resp {
    int code;
    char body[1 << 16];
} resp;

/* curl -X METHOD base+path [-d @body] with the API key unless key is NULL; extra header opt. */
static void http(resp *r, const char *method, const char *path, const char *body, size_t len,
                 const char *key)
{
    char url[256], bodyf[160], outf[160], auth[128], codes[32] = "";
    snprintf(url, sizeof(url), "%s%s", base, path);
    snprintf(bodyf, sizeof(bodyf), "%s/body", dir);
    snprintf(outf, sizeof(outf), "%s/out", dir);
    snprintf(auth, sizeof(auth), "Authorization: Bearer %s", key ? key : "");
    if (body) {
        FILE *f = fopen(bodyf, "wb");
        CHECK(f && fwrite(body, 1, len, f) == len, "write body");
        fclose(f);
    }
    char data[200];
    snprintf(data, sizeof(data), "@%s", bodyf);
    const char *argv[24];
    int n = 0;
    argv[n++] = "curl";
    argv[n++] = "-sS";
    argv[n++] = "--max-time";
    argv[n++] = "60";
    argv[n++] = "-o";
    argv[n++] = outf;
    argv[n++] = "-w";
    argv[n++] = "%{http_code}";
    argv[n++] = "-X";
    argv[n++] = method;
    if (key) {
        argv[n++] = "-H";
        argv[n++] = auth;
    }
    if (body) {
        argv[n++] = "-H";
        argv[n++] = "Content-Type: application/json";
        argv[n++] = "--data-binary";
        argv[n++] = data;
    }
    argv[n++] = url;
    argv[n] = NULL;
    int p[2];
    CHECK(pipe(p) == 0, "pipe");
    fflush(stdout);
    const pid_t pid = fork();
    if (pid == 0) {
        dup2(p[1], 1);
        close(p[0]);
        execvp("curl", (char *const *)argv);
        _exit(127);
    }
    close(p[1]);
    ssize_t k = read(p[0], codes, sizeof(codes) - 1);
    codes[k > 0 ? k : 0] = 0;
    close(p[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    r->code = atoi(codes);
    r->body[0] = 0;
    FILE *f = fopen(outf, "rb");
    if (f) {
        size_t m = fread(r->body, 1, sizeof(r->body) - 1, f);
        r->body[m] = 0;
        fclose(f);
        unlink(outf);
    }
}

static void post(resp *r, const char *path, const char *json)
{
    http(r, "POST", path, json, strlen(json), KEY);
}

#define CHECK_CODE(r, want, what)                                                              \
    CHECK((r)->code == (want), "%s: HTTP %d (want %d): %s", (what), (r)->code, (want), (r)->body)

/* an error response: status and the OpenAI error shape with the given code */
static void check_error(const resp *r, int status, const char *code, const char *what)
{
    CHECK_CODE(r, status, what);
    json_object *o = json_tokener_parse(r->body), *e = NULL, *m = NULL, *c = NULL;
    CHECK(o && json_object_object_get_ex(o, "error", &e) &&
              json_object_object_get_ex(e, "message", &m) &&
              json_object_object_get_ex(e, "code", &c) && json_object_get_string(c) &&
              !strcmp(json_object_get_string(c), code),
          "%s: want an error with code %s, got %s", what, code, r->body);
    json_object_put(o);
}

static json_object *path_get(json_object *o, const char *p1, int idx, const char *p2,
                             const char *p3)
{
    json_object *v = NULL;
    if (!json_object_object_get_ex(o, p1, &v))
        return NULL;
    if (idx >= 0)
        v = json_object_array_get_idx(v, (size_t)idx);
    if (v && p2 && !json_object_object_get_ex(v, p2, &v))
        return NULL;
    if (v && p3 && !json_object_object_get_ex(v, p3, &v))
        return NULL;
    return v;
}

/* the oracle: greedy continuation of prompt by one session of the library (f32 cache) */
static void greedy(const int32_t *prompt, int n, int n_new, int32_t *out)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 1;
    tq_model *m = NULL;
    tq_session *s = NULL;
    CHECK(tq_model_load(MODEL, &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv); /* the server's --kv f32 (the default would be bf16) */
    CHECK(tq_session_create(m, &so, &s) == TQ_OK, "session: %s", tq_last_error());
    float logits[256];
    CHECK(tq_session_eval(s, prompt, n, logits) == TQ_OK, "eval");
    for (int i = 0; i < n_new; i++) {
        int best = 0;
        for (int v = 1; v < 256; v++)
            if (logits[v] > logits[best])
                best = v;
        out[i] = best;
        CHECK(tq_session_eval(s, &out[i], 1, logits) == TQ_OK, "eval");
    }
    tq_session_free(s);
    tq_model_free(m);
}

/* start tq serve with the test's flags plus extra[] (NULL-terminated, may be NULL) */
static int start_server_x(const char *const *extra)
{
    char log[160];
    snprintf(log, sizeof(log), "%s/log", dir);
    /* no stale log: the previous server's port line must not be read as this one's (another
     * process may listen on that port by now) */
    unlink(log);
    fflush(stdout);
    server = fork();
    if (server == 0) {
        int fd = open(log, O_WRONLY | O_CREAT | O_TRUNC, 0644);
        dup2(fd, 2);
        dup2(fd, 1);
        const char *av[40] = {cli_tq, "serve", "-m", MODEL, "--tokenizer", tok_path,
                              "--chat-format", "chatml", "--port", "0", "-t", "1", "--parallel",
                              "2", "--api-key", KEY, "--max-body", "64K"};
        int n = 18;
        for (int i = 0; extra && extra[i] && n < 38; i++)
            av[n++] = extra[i];
        int has_kv = 0;
        for (int i = 18; i < n; i++)
            has_kv |= !strcmp(av[i], "--kv");
        if (!has_kv) {
            av[n++] = "--kv";
            av[n++] = "f32";
        }
        av[n] = NULL;
        execv(cli_tq, (char *const *)av);
        _exit(127);
    }
    /* the port is printed on the first line; then wait for /health 200 */
    for (int i = 0; i < 300; i++) {
        FILE *f = fopen(log, "r");
        char line[512];
        int port = 0;
        while (f && fgets(line, sizeof(line), f)) {
            const char *p = strstr(line, "listening on http://127.0.0.1:");
            if (p)
                port = atoi(p + strlen("listening on http://127.0.0.1:"));
        }
        if (f)
            fclose(f);
        if (port) {
            snprintf(base, sizeof(base), "http://127.0.0.1:%d", port);
            resp r;
            http(&r, "GET", "/health", NULL, 0, NULL);
            if (r.code == 200)
                return 0;
        }
        int st;
        if (waitpid(server, &st, WNOHANG) == server) {
            server = -1;
            break;
        }
        usleep(100000);
    }
    char cmd[200];
    snprintf(cmd, sizeof(cmd), "cat %s >&2", log);
    CHECK(system(cmd) >= 0, "log");
    return -1;
}

static void stop_server(int sig)
{
    int st = 0;
    kill(server, sig);
    waitpid(server, &st, 0);
    if (sig == SIGTERM)
        CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0, "tq serve exit status %d after SIGTERM", st);
    server = -1;
}

static int cached_of(const resp *r)
{
    json_object *o = json_tokener_parse(r->body);
    json_object *c = o ? path_get(o, "usage", -1, "prompt_tokens_details", "cached_tokens") : NULL;
    const int n = c ? json_object_get_int(c) : -1;
    json_object_put(o);
    return n;
}

/* nc concurrent greedy requests (curl processes started at once), prompts of 3 + step * i
 * tokens: each answer's 48 tokens equal the library's lone greedy run of the same prompt, so
 * batching (decode rows, several prompts' chunks in one pass, queueing) changes no answer */
static void concurrent(resp *r, int nc, int step, const char *what)
{
    enum { MAXC = 16, NT = 48, MAXP = 3 + 3 * (MAXC - 1) };
    pid_t pids[MAXC];
    static char outs[MAXC][160];
    static int32_t pr[MAXC][MAXP], exp[MAXC][NT];
    int n_ok = 0;
    for (int i = 0; i < nc && i < MAXC; i++) {
        char body[1024], bf[160];
        const int np = 3 + step * i;
        int o = snprintf(body, sizeof(body), "{\"prompt\":[");
        for (int t = 0; t < np; t++) {
            pr[i][t] = (int32_t)((37 * i + 11 * t + 5) % 256);
            o += snprintf(body + o, sizeof(body) - (size_t)o, "%s%d", t ? "," : "", pr[i][t]);
        }
        snprintf(body + o, sizeof(body) - (size_t)o,
                 "],\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,"
                 "\"return_tokens\":true}", NT);
        greedy(pr[i], np, NT, exp[i]);
        snprintf(bf, sizeof(bf), "%s/cbody%d", dir, i);
        snprintf(outs[i], sizeof(outs[i]), "%s/cout%d", dir, i);
        FILE *f = fopen(bf, "w");
        fputs(body, f);
        fclose(f);
    }
    for (int i = 0; i < nc && i < MAXC; i++) {
        char data[200], url[256], bf[160];
        snprintf(bf, sizeof(bf), "%s/cbody%d", dir, i);
        snprintf(data, sizeof(data), "@%s", bf);
        snprintf(url, sizeof(url), "%s/v1/completions", base);
        fflush(stdout);
        if ((pids[i] = fork()) == 0) {
            execlp("curl", "curl", "-sS", "--max-time", "100", "-o", outs[i], "-H",
                   "Authorization: Bearer " KEY, "--data-binary", data, url, (char *)NULL);
            _exit(127);
        }
    }
    for (int i = 0; i < nc && i < MAXC; i++) {
        int st = 0;
        waitpid(pids[i], &st, 0);
        FILE *f = fopen(outs[i], "r");
        size_t m = f ? fread(r->body, 1, sizeof(r->body) - 1, f) : 0;
        r->body[m] = 0;
        if (f)
            fclose(f);
        json_object *o = json_tokener_parse(r->body);
        json_object *toks = o ? path_get(o, "choices", 0, "tokens", NULL) : NULL;
        CHECK(toks && json_object_array_length(toks) == NT, "%s: request %d: %s", what, i,
              r->body);
        int same = toks && json_object_array_length(toks) == NT;
        for (int t = 0; same && t < NT; t++) {
            const int got = json_object_get_int(json_object_array_get_idx(toks, (size_t)t));
            CHECK(got == exp[i][t], "%s: request %d token %d: server %d, lone run %d", what, i,
                  t, got, exp[i][t]);
            same = got == exp[i][t];
        }
        n_ok += same;
        json_object_put(o);
    }
    printf("  %s: %d concurrent greedy requests, %d equal to their lone runs\n", what, nc, n_ok);
}

/* the metric name{...} value from a /metrics body (-1 when missing) */
static double metric(const char *body, const char *name)
{
    char key[160];
    snprintf(key, sizeof(key), "\n%s ", name);
    const char *p = strstr(body, key);
    return p ? atof(p + strlen(key)) : -1;
}

/* ---- logprobs and penalties: the oracle is the library's own logits, processed here ------- */

/* rows[i] = the 256 logits after prompt + toks[0..i) (f32 cache, 1 thread, as the server) */
static void oracle_rows(const int32_t *prompt, int n, const int32_t *toks, int n_tok, float *rows)
{
    tq_model_opts mo;
    tq_model_opts_default(&mo);
    mo.n_threads = 1;
    tq_model *m = NULL;
    tq_session *s = NULL;
    CHECK(tq_model_load(MODEL, &mo, &m) == TQ_OK, "load: %s", tq_last_error());
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    CHECK(tq_session_create(m, &so, &s) == TQ_OK, "session: %s", tq_last_error());
    CHECK(tq_session_eval(s, prompt, n, rows) == TQ_OK, "eval");
    for (int i = 1; i < n_tok; i++)
        CHECK(tq_session_eval(s, &toks[i - 1], 1, rows + (size_t)i * 256) == TQ_OK, "eval");
    tq_session_free(s);
    tq_model_free(m);
}

/* log-softmax of one row in double; ord = ids by logit descending, ties by lower id */
static void log_softmax(const float *l, double *lp, int *ord)
{
    double m = l[0], z = 0;
    for (int v = 1; v < 256; v++)
        m = l[v] > m ? l[v] : m;
    for (int v = 0; v < 256; v++)
        z += exp((double)l[v] - m);
    for (int v = 0; v < 256; v++) {
        lp[v] = (double)l[v] - m - log(z);
        ord[v] = v;
    }
    for (int i = 1; i < 256; i++) /* insertion sort: stable, so equal logits keep id order */
        for (int j = i; j > 0 && l[ord[j]] > l[ord[j - 1]]; j--) {
            int x = ord[j];
            ord[j] = ord[j - 1];
            ord[j - 1] = x;
        }
}

/* the JSON string a one-byte token b has (the byte tokenizer: token b is byte b) */
static void byte_str(int b, char *out)
{
    if (b < 0x80) {
        out[0] = (char)b;
        out[1] = 0;
    } else {
        strcpy(out, "\xef\xbf\xbd"); /* a lone byte >= 0x80 is not UTF-8: U+FFFD */
    }
}

/* the logprobs object lo (chat or completions shape) of n tokens toks with top k, against the
 * oracle rows; first = index of toks[0] in rows */
static void check_logprobs(json_object *lo, int chat, const int32_t *toks, int n, int k,
                           const float *rows, const char *what)
{
    double lp[256];
    int ord[256];
    const int fails0 = t_fail;
    json_object *content = NULL, *tk = NULL, *tl = NULL, *tp = NULL, *to = NULL;
    if (chat)
        CHECK(lo && json_object_object_get_ex(lo, "content", &content) &&
                  (int)json_object_array_length(content) == n,
              "%s: logprobs.content has not %d entries: %s", what, n,
              lo ? json_object_to_json_string(lo) : "null");
    else
        CHECK(lo && json_object_object_get_ex(lo, "tokens", &tk) &&
                  json_object_object_get_ex(lo, "token_logprobs", &tl) &&
                  json_object_object_get_ex(lo, "top_logprobs", &tp) &&
                  json_object_object_get_ex(lo, "text_offset", &to) &&
                  (int)json_object_array_length(tk) == n && (int)json_object_array_length(tl) == n &&
                  (int)json_object_array_length(tp) == n && (int)json_object_array_length(to) == n,
              "%s: logprobs {tokens, token_logprobs, top_logprobs, text_offset} of %d: %s", what,
              n, lo ? json_object_to_json_string(lo) : "null");
    if (t_fail != fails0)
        return;
    double worst = 0;
    int off = 0;
    for (int i = 0; i < n; i++) {
        log_softmax(rows + (size_t)i * 256, lp, ord);
        const int id = toks[i];
        char want[8];
        byte_str(id, want);
        if (chat) {
            json_object *e = json_object_array_get_idx(content, (size_t)i), *x, *b, *top;
            CHECK(json_object_object_get_ex(e, "token", &x) &&
                      !strcmp(json_object_get_string(x), want),
                  "%s: token %d string", what, i);
            CHECK(json_object_object_get_ex(e, "bytes", &b) && json_object_array_length(b) == 1 &&
                      json_object_get_int(json_object_array_get_idx(b, 0)) == id,
                  "%s: token %d bytes (want [%d])", what, i, id);
            CHECK(json_object_object_get_ex(e, "logprob", &x), "%s: token %d logprob", what, i);
            worst = fmax(worst, fabs(json_object_get_double(x) - lp[id]));
            CHECK(json_object_object_get_ex(e, "top_logprobs", &top) &&
                      (int)json_object_array_length(top) == k,
                  "%s: token %d: top_logprobs of %d", what, i, k);
            for (int j = 0; j < k && t_fail == fails0; j++) {
                json_object *te = json_object_array_get_idx(top, (size_t)j), *tb, *tv;
                CHECK(json_object_object_get_ex(te, "bytes", &tb) &&
                          json_object_get_int(json_object_array_get_idx(tb, 0)) == ord[j] &&
                          json_object_object_get_ex(te, "logprob", &tv),
                      "%s: token %d top %d is not id %d", what, i, j, ord[j]);
                worst = fmax(worst, fabs(json_object_get_double(tv) - lp[ord[j]]));
            }
        } else {
            CHECK(!strcmp(json_object_get_string(json_object_array_get_idx(tk, (size_t)i)), want),
                  "%s: tokens[%d]", what, i);
            worst = fmax(worst, fabs(json_object_get_double(json_object_array_get_idx(tl, (size_t)i)) -
                                     lp[id]));
            CHECK(json_object_get_int(json_object_array_get_idx(to, (size_t)i)) == off,
                  "%s: text_offset[%d] %d, want %d", what, i,
                  json_object_get_int(json_object_array_get_idx(to, (size_t)i)), off);
            off++; /* one character per byte token (U+FFFD for a lone high byte) */
            json_object *d = json_object_array_get_idx(tp, (size_t)i);
            int n_keys = 0;
            for (int j = 0; j < k; j++) {
                char key[8];
                byte_str(ord[j], key);
                int dup = 0; /* several high bytes share U+FFFD: the likeliest one is kept */
                for (int q = 0; q < j; q++) {
                    char kq[8];
                    byte_str(ord[q], kq);
                    dup |= !strcmp(kq, key);
                }
                if (dup)
                    continue;
                n_keys++;
                json_object *v = NULL;
                CHECK(json_object_object_get_ex(d, key, &v), "%s: token %d: top key of id %d",
                      what, i, ord[j]);
                if (v)
                    worst = fmax(worst, fabs(json_object_get_double(v) - lp[ord[j]]));
            }
            CHECK(json_object_object_length(d) == n_keys, "%s: token %d: %d top keys, want %d",
                  what, i, json_object_object_length(d), n_keys);
        }
    }
    CHECK(worst < 1e-4, "%s: logprobs differ from the log-softmax of the logits by %g", what,
          worst);
    printf("  %s: %d tokens, top %d, max |logprob error| %.2g\n", what, n, k, worst);
}

/* token ids of a response's choices[0].tokens (return_tokens) into out; the count */
static int resp_tokens(json_object *o, int32_t *out, int cap)
{
    json_object *a = path_get(o, "choices", 0, "tokens", NULL);
    int n = a ? (int)json_object_array_length(a) : 0;
    for (int i = 0; i < n && i < cap; i++)
        out[i] = json_object_get_int(json_object_array_get_idx(a, (size_t)i));
    return n < cap ? n : cap;
}

/* SSE body -> the logprobs objects of its chunks merged into one (chat: content entries
 * appended; completions: the four arrays appended), and the joined text */
static json_object *merge_stream(char *body, int chat, char *text, size_t cap)
{
    json_object *m = json_object_new_object();
    const char *keys[4] = {"tokens", "token_logprobs", "top_logprobs", "text_offset"};
    const int nk = chat ? 1 : 4;
    if (chat)
        keys[0] = "content";
    for (int i = 0; i < nk; i++)
        json_object_object_add(m, keys[i], json_object_new_array());
    text[0] = 0;
    for (char *ev = body; (ev = strstr(ev, "data: ")); ev += 6) {
        char *end = strstr(ev, "\n\n");
        if (!end || !strncmp(ev, "data: [DONE]", 12))
            break;
        *end = 0;
        json_object *e = json_tokener_parse(ev + 6);
        *end = '\n';
        json_object *lp = e ? path_get(e, "choices", 0, "logprobs", NULL) : NULL;
        json_object *tx = e ? (chat ? path_get(e, "choices", 0, "delta", "content")
                                    : path_get(e, "choices", 0, "text", NULL))
                            : NULL;
        if (tx)
            strncat(text, json_object_get_string(tx), cap - strlen(text) - 1);
        for (int i = 0; lp && i < nk; i++) {
            json_object *src = NULL, *dst = NULL;
            json_object_object_get_ex(lp, keys[i], &src);
            json_object_object_get_ex(m, keys[i], &dst);
            for (size_t j = 0; src && j < json_object_array_length(src); j++)
                json_object_array_add(dst, json_object_get(json_object_array_get_idx(src, j)));
        }
        json_object_put(e);
    }
    return m;
}

static void logprobs_and_penalties(resp *r)
{
    enum { NT = 10, K = 5 };
    static float rows[64 * 256];
    int32_t toks[64];
    /* completions: logprobs 5 on a token prompt, greedy */
    const int32_t prompt[6] = {1, 72, 101, 108, 108, 111};
    post(r, "/v1/completions", "{\"prompt\":[1,72,101,108,108,111],\"max_tokens\":10,"
                               "\"temperature\":0,\"ignore_eos\":true,\"return_tokens\":true,"
                               "\"logprobs\":5}");
    CHECK_CODE(r, 200, "completions with logprobs");
    json_object *o = json_tokener_parse(r->body);
    int n = resp_tokens(o, toks, 64);
    CHECK(n == NT, "completions with logprobs: %d tokens", n);
    oracle_rows(prompt, 6, toks, n, rows);
    check_logprobs(path_get(o, "choices", 0, "logprobs", NULL), 0, toks, n, K, rows,
                   "completions logprobs 5");
    json_object_put(o);
    /* the same streamed: the chunks' logprobs add up to the same lists */
    post(r, "/v1/completions", "{\"prompt\":[1,72,101,108,108,111],\"max_tokens\":10,"
                               "\"temperature\":0,\"ignore_eos\":true,\"logprobs\":5,"
                               "\"stream\":true}");
    CHECK_CODE(r, 200, "streamed completions with logprobs");
    char text[1024];
    json_object *mg = merge_stream(r->body, 0, text, sizeof(text));
    check_logprobs(mg, 0, toks, n, K, rows, "streamed completions logprobs 5");
    json_object_put(mg);

    /* chat: the prompt is ChatML rendered here, byte by byte (the byte tokenizer has no special
     * tokens); logprobs true, top_logprobs 3, plain and streamed */
    const char *rendered = "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n";
    int32_t cp[128];
    const int ncp = (int)strlen(rendered);
    for (int i = 0; i < ncp; i++)
        cp[i] = (unsigned char)rendered[i];
    const char *chat = "{\"messages\":[{\"role\":\"user\",\"content\":\"hi\"}],\"max_tokens\":8,"
                       "\"temperature\":0,\"ignore_eos\":true,\"return_tokens\":true,"
                       "\"logprobs\":true,\"top_logprobs\":3%s}";
    char buf[512];
    snprintf(buf, sizeof(buf), chat, "");
    post(r, "/v1/chat/completions", buf);
    CHECK_CODE(r, 200, "chat with logprobs");
    o = json_tokener_parse(r->body);
    n = resp_tokens(o, toks, 64);
    json_object *pt = o ? path_get(o, "usage", -1, "prompt_tokens", NULL) : NULL;
    CHECK(n == 8 && pt && json_object_get_int(pt) == ncp,
          "chat: %d tokens, prompt of %d tokens (want the %d of the ChatML rendering here)", n,
          pt ? json_object_get_int(pt) : -1, ncp);
    oracle_rows(cp, ncp, toks, n, rows);
    check_logprobs(path_get(o, "choices", 0, "logprobs", NULL), 1, toks, n, 3, rows,
                   "chat logprobs, top 3");
    json_object_put(o);
    snprintf(buf, sizeof(buf), chat, ",\"stream\":true");
    post(r, "/v1/chat/completions", buf);
    CHECK_CODE(r, 200, "streamed chat with logprobs");
    mg = merge_stream(r->body, 1, text, sizeof(text));
    check_logprobs(mg, 1, toks, n, 3, rows, "streamed chat logprobs, top 3");
    json_object_put(mg);

    /* presence / frequency penalties: greedy with OpenAI's rule applied here to the library's
     * logits; prompt tokens are not counted; the logprobs stay those of the raw logits */
    const float pp = 1.5f, fp = 0.75f;
    post(r, "/v1/completions", "{\"prompt\":[1,72,101,108,108,111],\"max_tokens\":24,"
                               "\"temperature\":0,\"ignore_eos\":true,\"return_tokens\":true,"
                               "\"presence_penalty\":1.5,\"frequency_penalty\":0.75,"
                               "\"logprobs\":2}");
    CHECK_CODE(r, 200, "completions with penalties");
    o = json_tokener_parse(r->body);
    n = resp_tokens(o, toks, 64);
    CHECK(n == 24, "penalties: %d tokens", n);
    oracle_rows(prompt, 6, toks, n, rows);
    int count[256] = {0}, first_bad = -1, n_changed = 0;
    for (int i = 0; i < n; i++) {
        const float *l = rows + (size_t)i * 256;
        int best = 0, raw = 0;
        float bv = -INFINITY;
        for (int v = 0; v < 256; v++) {
            const float x = count[v] ? l[v] - (pp + fp * (float)count[v]) : l[v];
            if (x > bv)
                bv = x, best = v;
            if (l[v] > l[raw])
                raw = v;
        }
        n_changed += best != raw;
        if (best != toks[i] && first_bad < 0)
            first_bad = i;
        count[toks[i]]++;
    }
    CHECK(first_bad < 0, "penalties: token %d differs from the greedy loop with the penalties",
          first_bad);
    CHECK(n_changed > 0, "penalties changed no choice in 24 steps: the test proves nothing");
    printf("  penalties: %d of %d greedy choices changed by them\n", n_changed, n);
    check_logprobs(path_get(o, "choices", 0, "logprobs", NULL), 0, toks, n, 2, rows,
                   "logprobs with penalties (raw logits)");
    json_object_put(o);

    /* refusals */
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"presence_penalty\":2.5}");
    check_error(r, 400, "invalid_value", "presence_penalty 2.5");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"frequency_penalty\":-3}");
    check_error(r, 400, "invalid_value", "frequency_penalty -3");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"frequency_penalty\":\"x\"}");
    check_error(r, 400, "invalid_type", "frequency_penalty a string");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"logprobs\":21}");
    check_error(r, 400, "invalid_value", "completions logprobs 21");
    post(r, "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":1}");
    check_error(r, 400, "invalid_type", "chat logprobs 1 (a bool is needed)");
    post(r, "/v1/chat/completions",
         "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}");
    check_error(r, 400, "invalid_value", "top_logprobs without logprobs");
    post(r, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],"
                                    "\"logprobs\":true,\"top_logprobs\":21}");
    check_error(r, 400, "invalid_value", "top_logprobs 21");
}

/* ---- robustness: raw sockets ---------------------------------------------------------------- */

static int port_of_base(void)
{
    const char *p = strrchr(base, ':');
    return p ? atoi(p + 1) : 0;
}

static int dial(void)
{
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {0};
    a.sin_family = AF_INET;
    a.sin_port = htons((uint16_t)port_of_base());
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (fd >= 0 && connect(fd, (struct sockaddr *)&a, sizeof(a)) != 0) {
        close(fd);
        return -1;
    }
    return fd;
}

static double now_s(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + 1e-9 * (double)t.tv_nsec;
}

static int send_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
        if (k <= 0)
            return -1;
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* 200 connections opened at once, each with a generation request: every one is answered 200 or
 * 503 (shed: the queue is full), at least one of each; then a request is served and SIGTERM
 * still ends the server with 0. Its own server: --max-queue 4, --chunk 1 (a prompt of 100
 * tokens takes 100 steps, so the queue is full while the connections come in). */
static void flood(resp *r)
{
    enum { NCON = 200 };
    static int fd[NCON];
    static char rb[NCON][64];
    static size_t nb[NCON];
    static const char *const fl[] = {"--max-queue", "4", "--chunk", "1", NULL};
    CHECK(start_server_x(fl) == 0, "flood server");
    char body[1024];
    int o = snprintf(body, sizeof(body), "{\"prompt\":[");
    for (int i = 0; i < 100; i++)
        o += snprintf(body + o, sizeof(body) - (size_t)o, "%s%d", i ? "," : "", 32 + i);
    snprintf(body + o, sizeof(body) - (size_t)o,
             "],\"max_tokens\":20,\"temperature\":0,\"ignore_eos\":true}");
    char req[1536];
    const int rl = snprintf(req, sizeof(req),
                            "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: "
                            "Bearer " KEY "\r\nContent-Type: application/json\r\nConnection: "
                            "close\r\nContent-Length: %zu\r\n\r\n%s",
                            strlen(body), body);
    int n_open = 0;
    for (int i = 0; i < NCON; i++) {
        fd[i] = dial();
        nb[i] = 0;
        n_open += fd[i] >= 0;
    }
    CHECK(n_open == NCON, "flood: %d of %d connections opened", n_open, NCON);
    for (int i = 0; i < NCON; i++) /* all requests out before any answer is read */
        if (fd[i] >= 0)
            send_all(fd[i], req, (size_t)rl); /* a failure shows as a missing status line */
    const double t0 = now_s();
    int left = n_open;
    while (left > 0 && now_s() - t0 < 90) {
        struct pollfd p[NCON];
        int map[NCON], np = 0;
        for (int i = 0; i < NCON; i++)
            if (fd[i] >= 0) {
                p[np].fd = fd[i];
                p[np].events = POLLIN;
                map[np++] = i;
            }
        if (poll(p, (nfds_t)np, 1000) <= 0)
            continue;
        for (int j = 0; j < np; j++) {
            if (!p[j].revents)
                continue;
            const int i = map[j];
            char tmp[4096];
            ssize_t k = recv(fd[i], tmp, sizeof(tmp), 0);
            if (k > 0) {
                size_t c = (size_t)k < sizeof(rb[i]) - 1 - nb[i] ? (size_t)k : sizeof(rb[i]) - 1 - nb[i];
                memcpy(rb[i] + nb[i], tmp, c);
                nb[i] += c;
                rb[i][nb[i]] = 0;
                continue;
            }
            close(fd[i]); /* EOF (Connection: close) or a reset */
            fd[i] = -1;
            left--;
        }
    }
    int n200 = 0, n503 = 0, other = 0;
    for (int i = 0; i < NCON; i++) {
        if (fd[i] >= 0)
            close(fd[i]);
        if (!strncmp(rb[i], "HTTP/1.1 200", 12))
            n200++;
        else if (!strncmp(rb[i], "HTTP/1.1 503", 12))
            n503++;
        else
            other++;
    }
    printf("  flood: %d connections: %d answered 200, %d shed with 503, %d other, %.1f s\n", NCON,
           n200, n503, other, now_s() - t0);
    CHECK(left == 0, "flood: %d connections still open after 90 s", left);
    CHECK(other == 0 && n200 > 0 && n503 > 0,
          "flood: want only 200 and 503 (both), got %d / %d / %d other", n200, n503, other);
    post(r, "/v1/completions", "{\"prompt\":[5,6],\"max_tokens\":3,\"temperature\":0}");
    CHECK_CODE(r, 200, "a request after the flood");
    stop_server(SIGTERM);
}

/* clients that send half a request and stall: one stops inside the headers, one inside the
 * body. The server serves others meanwhile and closes both after --timeout. Its own server
 * with --timeout 2 (the other servers keep the default 60 s, so a curl that a loaded machine
 * starves for 2 s between connecting and sending is not cut off). */
static void stallers(resp *r)
{
    static const char *const fl[] = {"--timeout", "2", NULL};
    CHECK(start_server_x(fl) == 0, "staller server");
    const char *half[2] = {
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Ty",
        "POST /v1/completions HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer " KEY
        "\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n{\"prompt\":[1,",
    };
    int fd[2];
    const double t0 = now_s();
    for (int i = 0; i < 2; i++) {
        fd[i] = dial();
        CHECK(fd[i] >= 0 && send_all(fd[i], half[i], strlen(half[i])) == 0, "staller %d", i);
    }
    post(r, "/v1/completions", "{\"prompt\":[9,8,7],\"max_tokens\":4,\"temperature\":0}");
    CHECK_CODE(r, 200, "a request while two clients stall");
    for (int i = 0; i < 2; i++) {
        struct pollfd p = {.fd = fd[i], .events = POLLIN};
        char tmp[512];
        ssize_t k = 1;
        while (k > 0 && now_s() - t0 < 20 && poll(&p, 1, 20000) > 0)
            k = recv(fd[i], tmp, sizeof(tmp), 0);
        const double dt = now_s() - t0;
        CHECK(k <= 0 && dt < 20, "staller %d: not closed by the server after %.1f s", i, dt);
        printf("  staller %d (%s): closed by the server after %.1f s\n", i,
               i ? "half a body" : "half the headers", dt);
        close(fd[i]);
    }
    post(r, "/v1/completions", "{\"prompt\":[9,8,7],\"max_tokens\":4,\"temperature\":0}");
    CHECK_CODE(r, 200, "a request after the stalled clients");
    stop_server(SIGTERM);
}

/* --prompt-cache-dir: snapshots survive a restart, are refused by name for another --kv, and a
 * kill -9 at any moment leaves every snapshot file loadable (the old one or the new one) */
static void prompt_cache_dir(resp *r, const char *creq)
{
    char pc[128], log[160], slot[200];
    snprintf(pc, sizeof(pc), "%s/pc", dir);
    snprintf(log, sizeof(log), "%s/log", dir);
    mkdir(pc, 0755);
    const char *ex[] = {"--prompt-cache-dir", pc, "--prompt-cache-min", "4", NULL};
    CHECK(start_server_x(ex) == 0, "server with --prompt-cache-dir");
    post(r, "/v1/completions", creq);
    CHECK(r->code == 200 && cached_of(r) == 0, "first request: %s", r->body);
    stop_server(SIGTERM);
    CHECK(start_server_x(ex) == 0, "restart");
    post(r, "/v1/completions", creq);
    CHECK(r->code == 200 && cached_of(r) == 5, "after a restart the prompt is cached: %s",
          r->body);
    stop_server(SIGTERM);
    const char *ex2[] = {"--prompt-cache-dir", pc, "--kv", "bf16", NULL};
    CHECK(start_server_x(ex2) == 0, "restart with another --kv");
    FILE *f = fopen(log, "r");
    size_t n = f ? fread(r->body, 1, sizeof(r->body) - 1, f) : 0;
    r->body[n] = 0;
    if (f)
        fclose(f);
    CHECK(strstr(r->body, "refused") && strstr(r->body, "slot-"), "another --kv: log %s",
          r->body);
    post(r, "/v1/completions", creq);
    CHECK(r->code == 200 && cached_of(r) == 0, "another --kv: nothing reused: %s", r->body);
    stop_server(SIGTERM);
    /* another model (the head_dim 192 one of the startup refusals), same --kv: refused too */
    char hd[128];
    snprintf(hd, sizeof(hd), "%s/hd192", dir);
    const char *ex3[] = {"--prompt-cache-dir", pc, "-m", hd, NULL};
    CHECK(start_server_x(ex3) == 0, "restart with another model");
    f = fopen(log, "r");
    n = f ? fread(r->body, 1, sizeof(r->body) - 1, f) : 0;
    r->body[n] = 0;
    if (f)
        fclose(f);
    CHECK(strstr(r->body, "refused") && strstr(r->body, "slot-") && !strstr(r->body, "restored"),
          "another model: log %s", r->body);
    const char *pl = strstr(r->body, "tq serve: prompt cache");
    printf("  another model: %.*s\n", pl ? (int)strcspn(pl, "\n") : 9, pl ? pl : "(no line)");
    stop_server(SIGTERM);

    /* kill -9 while snapshots are being written */
    tq_model *m = NULL;
    tq_session *s = NULL;
    tq_session_opts so;
    tq_session_opts_default(&so);
    tq_kv_scheme_parse("f32", &so.kv);
    so.n_ctx = 256;
    CHECK(tq_model_load(MODEL, NULL, &m) == TQ_OK && tq_session_create(m, &so, &s) == TQ_OK,
          "oracle session");
    int32_t *ids = malloc(256 * sizeof(int32_t));
    for (int round = 0; round < 4 && s; round++) {
        CHECK(start_server_x(ex) == 0, "kill round %d", round);
        pid_t pids[8];
        for (int i = 0; i < 8; i++) {
            char body[200], bf[160], data[170], url[256];
            snprintf(body, sizeof(body), "{\"prompt\":[%d,%d,%d,%d,%d,%d],\"max_tokens\":40,"
                     "\"temperature\":0,\"ignore_eos\":true}", round, i, 7, 8, i, 9);
            snprintf(bf, sizeof(bf), "%s/kbody%d", dir, i);
            f = fopen(bf, "w");
            fputs(body, f);
            fclose(f);
            snprintf(data, sizeof(data), "@%s", bf);
            snprintf(url, sizeof(url), "%s/v1/completions", base);
            fflush(stdout);
            if ((pids[i] = fork()) == 0) {
                execlp("curl", "curl", "-s", "-o", "/dev/null", "--max-time", "30", "-H",
                       "Authorization: Bearer " KEY, "--data-binary", data, url, (char *)NULL);
                _exit(127);
            }
        }
        usleep(20000u + 40000u * (unsigned)round);
        stop_server(SIGKILL);
        for (int i = 0; i < 8; i++)
            waitpid(pids[i], NULL, 0);
        for (int k = 0; k < 2; k++) {
            snprintf(slot, sizeof(slot), "%s/slot-%d.tqkv", pc, k);
            if (access(slot, F_OK))
                continue;
            int64_t nt = 0;
            tq_status st = tq_session_load(s, slot, ids, 256, &nt);
            CHECK(st == TQ_OK && nt > 0, "round %d: %s after kill -9: %s", round, slot,
                  tq_last_error());
        }
    }
    free(ids);
    tq_session_free(s);
    tq_model_free(m);
}

/* a one-layer Llama with head_dim 192 (random f32 weights, byte vocabulary) in out_dir: a
 * multiple of 64 (bf16 caches take it) that turbo does not support (64/128/256/512) */
static void write_hd192(const char *out_dir)
{
    enum { H = 64, HD = 192, NH = 2, NKV = 1, FF = 64, VOC = 256 };
    char path[256];
    mkdir(out_dir, 0755);
    snprintf(path, sizeof(path), "%s/config.json", out_dir);
    FILE *f = fopen(path, "w");
    CHECK(f != NULL, "cannot write %s", path);
    if (!f)
        return;
    fprintf(f, "{\"architectures\":[\"LlamaForCausalLM\"],\"model_type\":\"llama\","
               "\"hidden_size\":%d,\"intermediate_size\":%d,\"num_hidden_layers\":1,"
               "\"num_attention_heads\":%d,\"num_key_value_heads\":%d,\"head_dim\":%d,"
               "\"vocab_size\":%d,\"max_position_embeddings\":256,\"rms_norm_eps\":1e-5,"
               "\"rope_theta\":10000.0,\"tie_word_embeddings\":false,\"bos_token_id\":1,"
               "\"eos_token_id\":2,\"hidden_act\":\"silu\"}",
            H, FF, NH, NKV, HD, VOC);
    fclose(f);
    static const struct { const char *name; int64_t rows, cols; } t[] = {
        {"model.embed_tokens.weight", VOC, H},
        {"model.layers.0.input_layernorm.weight", H, 0},
        {"model.layers.0.self_attn.q_proj.weight", NH * HD, H},
        {"model.layers.0.self_attn.k_proj.weight", NKV * HD, H},
        {"model.layers.0.self_attn.v_proj.weight", NKV * HD, H},
        {"model.layers.0.self_attn.o_proj.weight", H, NH * HD},
        {"model.layers.0.post_attention_layernorm.weight", H, 0},
        {"model.layers.0.mlp.gate_proj.weight", FF, H},
        {"model.layers.0.mlp.up_proj.weight", FF, H},
        {"model.layers.0.mlp.down_proj.weight", H, FF},
        {"model.norm.weight", H, 0},
        {"lm_head.weight", VOC, H},
    };
    snprintf(path, sizeof(path), "%s/model.safetensors", out_dir);
    tq_st_writer *w = NULL;
    tq_status st = tq_st_writer_create(path, 0, &w);
    static float buf[NH * HD * H];
    uint32_t x = 12345;
    for (size_t i = 0; !st && i < sizeof(t) / sizeof(t[0]); i++) {
        const int64_t n = t[i].rows * (t[i].cols ? t[i].cols : 1);
        for (int64_t j = 0; j < n; j++) {
            x = x * 1664525u + 1013904223u;
            buf[j] = t[i].cols ? ((float)(x >> 9) / 8388608.0f - 0.5f) * 0.2f : 1.0f;
        }
        const int64_t shape[2] = {t[i].rows, t[i].cols};
        st = tq_st_writer_add(w, t[i].name, TQ_DTYPE_F32, t[i].cols ? 2 : 1, shape, buf,
                              (size_t)n * sizeof(float));
    }
    if (!st)
        st = tq_st_writer_finish(w);
    tq_st_writer_free(w);
    CHECK(st == TQ_OK, "head_dim 192 model: %s", tq_last_error());
}

int main(int argc, char **argv)
{
    int rc = cli_init(argc, argv);
    if (rc)
        return rc;
    if (system("curl --version >/dev/null 2>&1") != 0) {
        printf("SKIP: curl is not installed (apt install curl); tq serve is not tested\n");
        return 77;
    }
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    snprintf(tok_path, sizeof(tok_path), "%s/bytes.json", dir);
    write_tokenizer(tok_path);

    /* startup refusals, before any request */
    cli_res *cr = calloc(1, sizeof(*cr));
    cli_run(cr, OUT_CAPTURE, NULL, "serve", "-m", MODEL, "--tokenizer", tok_path, "--port", "0",
            "--parallel", "4", "--kv-mem", "1K", NULL);
    CHECK_RUN(cr, 1, "above the limit", "--parallel x --ctx over --kv-mem");
    cli_run(cr, OUT_CAPTURE, NULL, "serve", "-m", MODEL, "--tokenizer", tok_path, "--port", "0",
            "--kv", "nonsense", NULL);
    CHECK_RUN(cr, 2, "--kv 'nonsense'", "unknown --kv");
    cli_run(cr, OUT_CAPTURE, NULL, "serve", "-m", MODEL, "--parallel", "0", NULL);
    CHECK_RUN(cr, 2, "--parallel needs an integer", "--parallel 0");
    /* a scheme the model cannot use is refused at start, not at the first request */
    char hd[128];
    snprintf(hd, sizeof(hd), "%s/hd192", dir);
    write_hd192(hd);
    cli_run(cr, OUT_CAPTURE, NULL, "serve", "-m", hd, "--tokenizer", tok_path, "--port", "0",
            "--kv", "turbo", NULL);
    CHECK_RUN(cr, 1, "head_dim 192 not supported", "--kv turbo with head_dim 192");
    cli_run(cr, OUT_CAPTURE, NULL, "serve", "-m", hd, "--tokenizer", tok_path, "--port", "0",
            "--kv", "bf16", "--kv-mem", "1K", NULL);
    CHECK_RUN(cr, 1, "above the limit", "the same model with --kv bf16 gets past the scheme");
    free(cr);

    if (start_server_x(NULL)) {
        CHECK(0, "tq serve did not become healthy");
        if (server > 0)
            kill(server, SIGKILL);
        return t_done();
    }
    resp *r = malloc(sizeof(*r));

    http(r, "GET", "/health", NULL, 0, NULL);
    CHECK(r->code == 200 && strstr(r->body, "\"ok\""), "health: %d %s", r->code, r->body);
    http(r, "GET", "/v1/models", NULL, 0, KEY);
    CHECK(r->code == 200 && strstr(r->body, "\"id\":\"llama\""), "models: %d %s", r->code,
          r->body);

    /* completions: greedy tokens equal the oracle's */
    const int32_t prompt[6] = {1, 72, 101, 108, 108, 111};
    int32_t want[12];
    greedy(prompt, 6, 12, want);
    const char *creq = "{\"model\":\"llama\",\"prompt\":[1,72,101,108,108,111],\"max_tokens\":12,"
                       "\"temperature\":0,\"ignore_eos\":true,\"return_tokens\":true}";
    for (int rep = 0; rep < 2; rep++) {
        post(r, "/v1/completions", creq);
        CHECK_CODE(r, 200, "completions");
        json_object *o = json_tokener_parse(r->body);
        json_object *toks = path_get(o, "choices", 0, "tokens", NULL);
        json_object *fin = path_get(o, "choices", 0, "finish_reason", NULL);
        json_object *cached = path_get(o, "usage", -1, "prompt_tokens_details", "cached_tokens");
        CHECK(toks && json_object_array_length(toks) == 12, "tokens: %s", r->body);
        for (int i = 0; i < 12; i++)
            CHECK(json_object_get_int(json_object_array_get_idx(toks, (size_t)i)) == want[i],
                  "token %d: server %d, library %d", i,
                  json_object_get_int(json_object_array_get_idx(toks, (size_t)i)), want[i]);
        CHECK(fin && !strcmp(json_object_get_string(fin), "length"), "finish: %s", r->body);
        /* the second time the prompt (all but its last token) comes from a slot's cache */
        CHECK(cached && json_object_get_int(cached) == (rep ? 5 : 0), "cached_tokens: %s",
              r->body);
        json_object_put(o);
    }

    /* chat, plain and streamed: the deltas add up to the plain content */
    const char *chat = "{\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
                       "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"hi\"}]}],"
                       "\"max_tokens\":10,\"temperature\":0,\"ignore_eos\":true%s}";
    char buf[512];
    snprintf(buf, sizeof(buf), chat, "");
    post(r, "/v1/chat/completions", buf);
    CHECK_CODE(r, 200, "chat");
    json_object *o = json_tokener_parse(r->body);
    json_object *content = path_get(o, "choices", 0, "message", "content");
    json_object *role = path_get(o, "choices", 0, "message", "role");
    CHECK(content && role && !strcmp(json_object_get_string(role), "assistant"), "chat: %s",
          r->body);
    char plain[1024];
    snprintf(plain, sizeof(plain), "%s", json_object_get_string(content));
    json_object_put(o);
    snprintf(buf, sizeof(buf), chat, ",\"stream\":true,\"stream_options\":{\"include_usage\":true}");
    post(r, "/v1/chat/completions", buf);
    CHECK_CODE(r, 200, "chat stream");
    const size_t bl = strlen(r->body);
    CHECK(bl > 14 && !strcmp(r->body + bl - 14, "data: [DONE]\n\n"), "stream end: %s", r->body);
    char joined[1024] = "";
    int n_events = 0, saw_finish = 0, saw_usage = 0;
    for (char *ev = r->body; (ev = strstr(ev, "data: ")); ev += 6) {
        char *end = strstr(ev, "\n\n");
        CHECK(end != NULL, "event without blank line");
        if (!strncmp(ev, "data: [DONE]", 12))
            break;
        *end = 0;
        json_object *e = json_tokener_parse(ev + 6);
        CHECK(e != NULL, "event is not JSON: %s", ev + 6);
        json_object *d = path_get(e, "choices", 0, "delta", "content");
        json_object *f = path_get(e, "choices", 0, "finish_reason", NULL);
        if (d)
            strncat(joined, json_object_get_string(d), sizeof(joined) - strlen(joined) - 1);
        if (f && json_object_get_string(f))
            saw_finish = 1;
        if (path_get(e, "usage", -1, "completion_tokens", NULL))
            saw_usage = 1;
        json_object_put(e);
        n_events++;
        *end = '\n';
    }
    CHECK(!strcmp(joined, plain), "stream '%s' != plain '%s'", joined, plain);
    CHECK(n_events >= 3 && saw_finish && saw_usage, "events %d finish %d usage %d", n_events,
          saw_finish, saw_usage);

    /* concurrent greedy requests (more than --parallel 2: queued, then decoded in one batch):
     * each answer equals the library's lone greedy run of its prompt */
    concurrent(r, 6, 1, "--parallel 2");

    logprobs_and_penalties(r);

    /* tokenize / detokenize */
    post(r, "/tokenize", "{\"content\":\"Hi!\"}");
    CHECK(r->code == 200 && strstr(r->body, "[72,105,33]"), "tokenize: %d %s", r->code, r->body);
    post(r, "/detokenize", "{\"tokens\":[72,105,33]}");
    CHECK(r->code == 200 && strstr(r->body, "\"Hi!\""), "detokenize: %d %s", r->code, r->body);

    /* bad requests */
    post(r, "/v1/chat/completions", "{\"messages\": [");
    check_error(r, 400, "invalid_json", "truncated JSON");
    post(r, "/v1/chat/completions", "{\"messages\": []} x");
    check_error(r, 400, "invalid_json", "trailing data");
    post(r, "/v1/chat/completions", "[1,2]");
    check_error(r, 400, "invalid_type", "array body");
    post(r, "/v1/chat/completions", "{\"messages\":[]}");
    check_error(r, 400, "invalid_value", "empty messages");
    post(r, "/v1/chat/completions", "{\"messages\":\"hi\"}");
    check_error(r, 400, "invalid_type", "messages not an array");
    post(r, "/v1/chat/completions", "{\"messages\":[{\"role\":\"user\",\"content\":5}]}");
    check_error(r, 400, "invalid_type", "content a number");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"temperature\":\"hot\"}");
    check_error(r, 400, "invalid_type", "temperature a string");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"stream\":1}");
    check_error(r, 400, "invalid_type", "stream a number");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"temperature\":-1}");
    check_error(r, 400, "invalid_value", "temperature < 0");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"model\":\"gpt-4\"}");
    check_error(r, 404, "model_not_found", "unknown model");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":1e9}");
    check_error(r, 400, "invalid_value", "max_tokens 1e9");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"max_tokens\":1000000000}");
    check_error(r, 400, "invalid_value", "max_tokens 10^9");
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"n\":2}");
    check_error(r, 400, "unsupported_value", "n = 2");
    post(r, "/v1/completions", "{\"prompt\":[300]}");
    check_error(r, 400, "invalid_value", "token id out of range");
    {
        char big[2048] = "{\"prompt\":\"";
        for (int i = 0; i < 300; i++)
            strcat(big, "ab");
        strcat(big, "\"}");
        post(r, "/v1/completions", big);
        check_error(r, 400, "context_length_exceeded", "prompt over --ctx");
    }
    {
        const size_t n = 10u << 20; /* 10 MiB against --max-body 64K */
        char *huge = malloc(n);
        memset(huge, ' ', n);
        huge[0] = '{';
        huge[n - 1] = '}';
        http(r, "POST", "/v1/completions", huge, n, KEY);
        free(huge);
        check_error(r, 413, "body_too_large", "10 MiB body");
    }
    http(r, "GET", "/v1/chat/completions", NULL, 0, KEY);
    check_error(r, 405, "method_not_allowed", "GET on a POST endpoint");
    http(r, "GET", "/v2/nothing", NULL, 0, KEY);
    check_error(r, 404, "not_found", "unknown path");
    http(r, "POST", "/v1/completions", "{\"prompt\":\"a\"}", 14, NULL);
    check_error(r, 401, "invalid_api_key", "no API key");
    http(r, "POST", "/v1/completions", "{\"prompt\":\"a\"}", 14, "wrong");
    check_error(r, 401, "invalid_api_key", "wrong API key");

    /* still serving, and the metrics counted it all */
    post(r, "/v1/completions", creq);
    CHECK_CODE(r, 200, "completions after the bad requests");
    http(r, "GET", "/metrics", NULL, 0, KEY);
    CHECK(r->code == 200 && strstr(r->body, "tq_requests_total ") &&
              strstr(r->body, "tq_kv_bytes_in_use{scheme=\"f32\"}") &&
              strstr(r->body, "\ntq_decode_steps_total{seqs=\"1\"} ") &&
              strstr(r->body, "\ntq_decode_step_seconds_total{seqs=\"1\"} ") &&
              !strstr(r->body, "tq_http_responses_total{class=\"4xx\"} 0\n"),
          "metrics: %s", r->body);

    {
        static const char ka[] = "\ntq_forward_passes_total ", kb[] = "\ntq_forward_sequences_total ";
        const char *a = strstr(r->body, ka), *b = strstr(r->body, kb);
        const long passes = a ? atol(a + sizeof(ka) - 1) : 0;
        const long seqs = b ? atol(b + sizeof(kb) - 1) : 0;
        /* whether requests overlapped depends on the machine's load: reported, not checked
         * (test_batch_eval checks the batched pass itself) */
        CHECK(passes > 0 && seqs >= passes, "metrics: %ld passes for %ld sequences", passes, seqs);
        printf("  %ld forward passes served %ld sequence steps\n", passes, seqs);
    }
    stop_server(SIGTERM);

    /* the batching proof: 16 greedy requests at once with --parallel 8, prompts of 3..48
     * tokens in chunks of 8 (several prompts' chunks share a pass with the decode rows) */
    {
        static const char *const p8[] = {"--parallel", "8", "--chunk", "8", NULL};
        CHECK(start_server_x(p8) == 0, "--parallel 8 server");
        concurrent(r, 16, 3, "--parallel 8 --chunk 8");
        http(r, "GET", "/metrics", NULL, 0, KEY);
        /* how much overlapped depends on the machine's load: reported, not checked */
        printf("  --parallel 8: %.0f forward passes served %.0f sequence steps and %.0f prompt "
               "chunks; %.0f passes prefilled several prompts at once\n",
               metric(r->body, "tq_forward_passes_total"),
               metric(r->body, "tq_forward_sequences_total"),
               metric(r->body, "tq_forward_prompt_chunks_total"),
               metric(r->body, "tq_forward_multi_prompt_total"));
        CHECK(metric(r->body, "tq_forward_prompt_chunks_total") >= 16, "prompt chunks counted");
        stop_server(SIGTERM);
    }
    stallers(r);
    flood(r);
    prompt_cache_dir(r, creq);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(r);
    return t_done();
}
