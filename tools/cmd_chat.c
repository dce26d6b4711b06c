/* cmd_chat.c -- `tq chat`: an interactive conversation with an instruct model through its chat
 * template. Reads one message per line from stdin (a terminal or a pipe), streams each reply.
 * The session keeps the conversation's KV cache: each turn re-renders the whole conversation,
 * keeps the cached tokens it shares with it, and evaluates only the new ones. */
#include <unistd.h>

#include "cmd_generate.h"

typedef struct chat_state {
    tq_chat_msg *msgs;  /* conversation so far (contents malloc'd) */
    int n_msgs, cap_msgs;
    int32_t *cached;    /* tokens in the session's cache, in order */
    int64_t n_cached, cap_cached;
    int32_t *gen;       /* this turn's generated tokens */
    int64_t n_gen, cap_gen;
    char *reply;        /* this turn's reply text */
    size_t n_reply, cap_reply;
} chat_state;

static int grow(void **p, int64_t *cap, int64_t need, size_t elem)
{
    if (need <= *cap)
        return 0;
    int64_t nc = *cap ? *cap : 256;
    while (nc < need)
        nc *= 2;
    void *np = realloc(*p, (size_t)nc * elem);
    if (!np)
        return -1;
    *p = np;
    *cap = nc;
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: tq chat [-m MODEL] [options]\n\n"
            "Talk to an instruct model. Type a message and press Enter; the reply streams back.\n"
            "Works on a terminal and with piped input (one message per line), e.g.\n"
            "  printf 'Hi!\\nWhat is 2+2?\\n' | tq chat -q\n"
            "A line ending in '\\' continues on the next line. Commands: /reset (forget the\n"
            "conversation), /exit (or end of input).\n\n"
            "chat:\n"
            "  --system TEXT         system message (default: the chat template's own, if any)\n"
            "  --format F            chat template: auto (default: from the model), chatml, llama3\n"
            "%s\n"
            "Replies stop at the model's end-of-turn token or after -n tokens (default 512 here).\n"
            "A message longer than the context is refused (the chat goes on); the exit status is 1\n"
            "when no message could be answered.\n",
            gen_common_help());
}

/* read one message: lines joined while they end with a backslash; NULL at end of input */
static char *read_message(int tty)
{
    char *msg = NULL, *line = NULL;
    size_t n_msg = 0, lcap = 0;
    ssize_t r;
    if (tty) {
        fputs("> ", stdout);
        cli_flush();
    }
    while ((r = getline(&line, &lcap, stdin)) >= 0) {
        while (r > 0 && (line[r - 1] == '\n' || line[r - 1] == '\r'))
            line[--r] = 0;
        int more = r > 0 && line[r - 1] == '\\';
        if (more)
            line[--r] = '\n';
        char *nm = realloc(msg, n_msg + (size_t)r + 1);
        if (!nm)
            break;
        msg = nm;
        memcpy(msg + n_msg, line, (size_t)r);
        n_msg += (size_t)r;
        msg[n_msg] = 0;
        if (!more)
            break;
        if (tty) {
            fputs(". ", stdout);
            cli_flush();
        }
    }
    free(line);
    if (r < 0 && !msg)
        return NULL;
    return msg ? msg : calloc(1, 1);
}

typedef struct turn_cb {
    chat_state *c;
    int failed;
} turn_cb;

static int turn_token(void *user, int32_t token, const char *text, size_t len)
{
    turn_cb *t = user;
    chat_state *c = t->c;
    if (token >= 0) {
        int64_t cap = c->cap_gen;
        if (grow((void **)&c->gen, &cap, c->n_gen + 1, sizeof(int32_t)))
            t->failed = 1;
        else {
            c->cap_gen = cap;
            c->gen[c->n_gen++] = token;
        }
    }
    if (len) {
        int64_t cap = (int64_t)c->cap_reply;
        if (grow((void **)&c->reply, &cap, (int64_t)(c->n_reply + len + 1), 1))
            t->failed = 1;
        else {
            c->cap_reply = (size_t)cap;
            memcpy(c->reply + c->n_reply, text, len);
            c->n_reply += len;
            c->reply[c->n_reply] = 0;
        }
    }
    if (gen_print_cb(NULL, token, text, len))
        t->failed = 1; /* stdout cannot be written: stop (main() reports it) */
    return t->failed;
}

static void forget(chat_state *c, gen_ctx *g, int keep_system)
{
    int k = 0;
    for (int i = 0; i < c->n_msgs; i++) {
        if (keep_system && i == 0 && !strcmp(c->msgs[0].role, "system")) {
            k = 1;
            continue;
        }
        free((char *)c->msgs[i].content);
    }
    c->n_msgs = k;
    c->n_cached = 0;
    tq_session_reset(g->session);
}

int cmd_chat(int argc, char **argv)
{
    const char *cmd = "chat";
    gen_args a;
    gen_ctx g;
    chat_state c = {0};
    const char *system = NULL;
    tq_chat_format fmt = TQ_CHAT_AUTO;
    char *rendered = NULL;
    size_t cap_r = 0;
    int rc, n_asked = 0, n_answered = 0; /* messages given to the model, and answered */

    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    gen_args_default(&a);
    a.gen.max_new_tokens = 512;
    for (int i = 1; i < argc; i++) {
        int r = gen_parse_common(cmd, &a, argc, argv, &i);
        if (r < 0)
            return 2;
        if (r)
            continue;
        if (!strcmp(argv[i], "--system") && i + 1 < argc)
            system = argv[++i];
        else if (!strcmp(argv[i], "--format") && i + 1 < argc) {
            tq_status s = tq_chat_format_parse(argv[++i], &fmt);
            if (s) {
                cli_error(cmd, s, "--format '%s'", argv[i]);
                return 2;
            }
        } else {
            fprintf(stderr, "tq %s: unknown or incomplete option '%s' (see tq %s --help)\n", cmd,
                    argv[i], cmd);
            return 2;
        }
    }
    if ((rc = gen_open(cmd, &a, &g)))
        return rc;
    if (fmt == TQ_CHAT_AUTO && tq_chat_detect(g.tok, &fmt) != TQ_OK) {
        rc = cli_error(cmd, TQ_E_UNSUPPORTED,
                       "the model '%s' has no chat template this tool knows; name one with --format chatml|llama3",
                       a.model);
        goto out;
    }
    const int tty = isatty(0);
    if (tty)
        fprintf(stderr, "tq chat: %s (%s, ctx %lld). /reset forgets, /exit or Ctrl-D ends.\n",
                a.model, tq_chat_format_name(fmt), (long long)tq_session_n_ctx(g.session));
    c.cap_msgs = 16;
    c.msgs = malloc((size_t)c.cap_msgs * sizeof(*c.msgs));
    if (!c.msgs) {
        rc = cli_error(cmd, TQ_E_NOMEM, "out of memory");
        goto out;
    }
    if (system)
        c.msgs[c.n_msgs++] = (tq_chat_msg){"system", strdup(system)};
    rc = 0;
    for (;;) {
        char *line = read_message(tty);
        if (!line)
            break;
        if (!line[0]) {
            free(line);
            continue;
        }
        if (!strcmp(line, "/exit") || !strcmp(line, "/quit")) {
            free(line);
            break;
        }
        if (!strcmp(line, "/reset")) {
            free(line);
            forget(&c, &g, 1);
            fprintf(stderr, "[conversation cleared]\n");
            continue;
        }
        if (c.n_msgs + 2 > c.cap_msgs) {
            tq_chat_msg *nm = realloc(c.msgs, (size_t)c.cap_msgs * 2 * sizeof(*nm));
            if (!nm) {
                free(line);
                rc = cli_error(cmd, TQ_E_NOMEM, "out of memory");
                break;
            }
            c.msgs = nm;
            c.cap_msgs *= 2;
        }
        c.msgs[c.n_msgs++] = (tq_chat_msg){"user", line};

        /* render the whole conversation and tokenize it */
        size_t need_n = 0;
        tq_status s = tq_chat_render(g.tok, fmt, c.msgs, c.n_msgs, 1, rendered, cap_r, &need_n);
        if (s == TQ_E_OVERFLOW || (!rendered && s == TQ_OK)) {
            free(rendered);
            cap_r = need_n + 1;
            rendered = malloc(cap_r);
            s = rendered ? tq_chat_render(g.tok, fmt, c.msgs, c.n_msgs, 1, rendered, cap_r, &need_n)
                         : TQ_E_NOMEM;
        }
        int32_t *ids = NULL;
        int64_t n = 0;
        if (s || gen_encode(cmd, &g, rendered, 1, 0, &ids, &n)) {
            if (s)
                cli_error(cmd, s, "cannot render the conversation");
            rc = 1;
            break;
        }
        /* keep the cached tokens the conversation still starts with; evaluate the rest (>= 1) */
        int64_t common = 0;
        while (common < c.n_cached && common < n && c.cached[common] == ids[common])
            common++;
        if (common == n)
            common = n - 1;
        if (tq_session_trim(g.session, tq_session_n_past(g.session) - common)) {
            tq_session_reset(g.session); /* a ring (sliding window) cannot go back that far */
            common = 0;
        }
        c.n_cached = common;
        c.n_gen = 0;
        c.n_reply = 0;
        turn_cb tc = {&c, 0};
        tq_gen_stats st;
        tq_sampler_reset(tq_generator_sampler(g.gen));
        s = tq_generator_run(g.gen, ids + common, n - common, turn_token, &tc, &st);
        n_asked++;
        printf("\n");
        if (cli_flush()) {
            free(ids);
            rc = 1; /* main() says why */
            break;
        }
        if (s) {
            cli_error(cmd, s, "this message cannot be answered");
            if (s == TQ_E_OVERFLOW)
                fprintf(stderr, "tq chat: the conversation is longer than the context; /reset to "
                                "start over, or restart with a larger --ctx\n");
            free((char *)c.msgs[--c.n_msgs].content); /* drop the unanswered message */
            free(ids);
            if (s != TQ_E_OVERFLOW) {
                rc = 1;
                break;
            }
            continue;
        }
        /* the session now holds the prompt and the first n_decode generated tokens */
        int64_t capc = c.cap_cached;
        if (grow((void **)&c.cached, &capc, n + st.n_decode, sizeof(int32_t))) {
            free(ids);
            rc = cli_error(cmd, TQ_E_NOMEM, "out of memory");
            break;
        }
        c.cap_cached = capc;
        memcpy(c.cached, ids, (size_t)n * sizeof(int32_t));
        memcpy(c.cached + n, c.gen, (size_t)st.n_decode * sizeof(int32_t));
        c.n_cached = n + st.n_decode;
        free(ids);
        char *reply = c.n_reply ? strndup(c.reply, c.n_reply) : strdup("");
        c.msgs[c.n_msgs++] = (tq_chat_msg){"assistant", reply};
        n_answered++;
        if (!a.quiet)
            gen_print_stats(&st, 0);
        if (st.stop == TQ_GEN_STOP_CTX)
            fprintf(stderr, "tq chat: the context is full; /reset to start over\n");
    }
    if (rc == 0 && n_asked > 0 && n_answered == 0) {
        fprintf(stderr, "tq chat: none of the %d message%s could be answered\n", n_asked,
                n_asked > 1 ? "s" : "");
        rc = 1;
    }
out:
    for (int i = 0; i < c.n_msgs; i++)
        free((char *)c.msgs[i].content);
    free(c.msgs);
    free(c.cached);
    free(c.gen);
    free(c.reply);
    free(rendered);
    gen_close(&g);
    return rc;
}
