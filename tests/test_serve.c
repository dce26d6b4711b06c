/* test_serve.c -- `tq serve` end to end with curl on loopback, on the tiny random Llama of
 * tests/data/tiny/llama (vocab 256) with a byte-level tokenizer written here (token i = byte i)
 * and --chat-format chatml. Checks health, models, completions (greedy tokens equal the
 * library's own greedy loop over one session: the oracle), chat, streaming (the deltas add up
 * to the plain answer, [DONE] last), the prompt cache count, tokenize/detokenize, metrics, the
 * API key, and bad requests: malformed JSON, wrong types, unknown model, empty messages, a body
 * over the limit, max_tokens 1e9, a prompt over the context, n = 2, unknown paths and methods;
 * the server must still answer afterwards and exit 0 on SIGTERM. --prompt-cache-dir: restored
 * after a restart, refused for another --kv, loadable after kill -9 mid-write. Startup refusals: --parallel x
 * --ctx over --kv-mem, an unknown --kv scheme. Skips (77) when curl is not installed. */
#include <json-c/json.h>
#include <signal.h>
#include <sys/stat.h>

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

static int start_server(void)
{
    return start_server_x(NULL);
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
    free(cr);

    if (start_server()) {
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
    {
        enum { NC = 6, NT = 48 };
        pid_t pids[NC];
        char outs[NC][160];
        int32_t pr[NC][8], exp[NC][NT];
        for (int i = 0; i < NC; i++) {
            char body[256], bf[160];
            int o = snprintf(body, sizeof(body), "{\"prompt\":[");
            for (int t = 0; t < 3 + i; t++) {
                pr[i][t] = (int32_t)((37 * i + 11 * t + 5) % 256);
                o += snprintf(body + o, sizeof(body) - (size_t)o, "%s%d", t ? "," : "", pr[i][t]);
            }
            snprintf(body + o, sizeof(body) - (size_t)o,
                     "],\"max_tokens\":%d,\"temperature\":0,\"ignore_eos\":true,"
                     "\"return_tokens\":true}", NT);
            greedy(pr[i], 3 + i, NT, exp[i]);
            snprintf(bf, sizeof(bf), "%s/cbody%d", dir, i);
            snprintf(outs[i], sizeof(outs[i]), "%s/cout%d", dir, i);
            FILE *f = fopen(bf, "w");
            fputs(body, f);
            fclose(f);
            char data[200], url[256];
            snprintf(data, sizeof(data), "@%s", bf);
            snprintf(url, sizeof(url), "%s/v1/completions", base);
            fflush(stdout);
            if ((pids[i] = fork()) == 0) {
                execlp("curl", "curl", "-sS", "--max-time", "60", "-o", outs[i], "-H",
                       "Authorization: Bearer " KEY, "--data-binary", data, url, (char *)NULL);
                _exit(127);
            }
        }
        for (int i = 0; i < NC; i++) {
            int st = 0;
            waitpid(pids[i], &st, 0);
            FILE *f = fopen(outs[i], "r");
            size_t m = f ? fread(r->body, 1, sizeof(r->body) - 1, f) : 0;
            r->body[m] = 0;
            if (f)
                fclose(f);
            json_object *o = json_tokener_parse(r->body);
            json_object *toks = o ? path_get(o, "choices", 0, "tokens", NULL) : NULL;
            CHECK(toks && json_object_array_length(toks) == NT, "concurrent %d: %s", i, r->body);
            for (int t = 0; toks && t < NT; t++)
                CHECK(json_object_get_int(json_object_array_get_idx(toks, (size_t)t)) ==
                          exp[i][t],
                      "concurrent request %d token %d differs from its lone run", i, t);
            json_object_put(o);
        }
    }

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
    post(r, "/v1/completions", "{\"prompt\":\"a\",\"presence_penalty\":0.5}");
    check_error(r, 400, "unsupported_value", "presence_penalty");
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
    prompt_cache_dir(r, creq);
    char cmd[128];
    snprintf(cmd, sizeof(cmd), "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "cleanup");
    free(r);
    return t_done();
}
