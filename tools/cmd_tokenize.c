/* cmd_tokenize.c -- `tq tokenize`: text -> token ids (and pieces) with a tokenizer.json or a GGUF
 * file's vocabulary; or ids -> text with --decode; or a chat rendered with the model's template. */
#include <errno.h>
#include <time.h>

#include "cli.h"

static void usage(FILE *f)
{
    fprintf(
        f,
        "usage: tq tokenize -t TOKENIZER [-p TEXT | -f FILE] [options]\n\n"
        "Tokenize text with a Hugging Face tokenizer.json (or a directory holding one) or the\n"
        "vocabulary embedded in a .gguf file. Prints one line per token: index, id and the\n"
        "piece (C-escaped), unless --ids or --count.\n\n"
        "options:\n"
        "  -t, --tokenizer P  tokenizer.json, its directory, or model.gguf (required)\n"
        "  -p, --prompt TEXT  the text (default: read -f FILE, else standard input)\n"
        "  -f, --file FILE    read the text from FILE ('-' = standard input)\n"
        "  --ids              print only the ids, space-separated, on one line\n"
        "  --count            print only the number of tokens (and bytes, time)\n"
        "  --special          parse special tokens written in the text (<|im_start|> ...)\n"
        "  --bos              prepend BOS; --bos-auto: prepend it if the model asks for it\n"
        "  --decode           the text is space-separated ids: print what they decode to\n"
        "  --chat ROLE=TEXT   add a chat message (repeatable); prints the rendered chat and\n"
        "                     tokenizes it with special tokens parsed\n"
        "  --template NAME    chat format: auto (from the model), chatml, llama3 (default auto)\n"
        "  --no-gen-prompt    with --chat: leave out the assistant header at the end\n"
        "  --no-think         with --chat: empty <think> block after the header (Qwen3's\n"
        "                     enable_thinking=false)\n"
        "  --info             print vocabulary facts (size, kind, bos/eos/eot, chat format)\n"
        "  -h, --help         this text\n");
}

static char *read_all(FILE *f, size_t *n)
{
    size_t cap = 1 << 16, len = 0;
    char *b = malloc(cap);
    while (b) {
        size_t r = fread(b + len, 1, cap - len, f);
        len += r;
        if (len < cap) {
            if (ferror(f)) {
                free(b);
                return NULL;
            }
            break;
        }
        char *nb = realloc(b, cap *= 2);
        if (!nb)
            free(b);
        b = nb;
    }
    if (b)
        *n = len;
    return b;
}

static void print_escaped(const char *s, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (c == '\n')
            fputs("\\n", stdout);
        else if (c == '\t')
            fputs("\\t", stdout);
        else if (c == '\r')
            fputs("\\r", stdout);
        else if (c == '\\')
            fputs("\\\\", stdout);
        else if (c < 0x20 || c == 0x7f)
            printf("\\x%02x", c);
        else
            putchar(c);
    }
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#define MAX_MSGS 64

int cmd_tokenize(int argc, char **argv)
{
    const char *tok_path = NULL, *prompt = NULL, *file = NULL, *tmpl_name = "auto";
    int ids_only = 0, count_only = 0, decode = 0, info = 0, gen_prompt = TQ_CHAT_GEN;
    unsigned flags = 0;
    tq_chat_msg msgs[MAX_MSGS];
    int n_msgs = 0, rc = 1;
    tq_tokenizer *tok = NULL;
    char *text = NULL, *chat = NULL;
    size_t n_text = 0;
    int32_t *ids = NULL;
    int64_t n_ids = 0;
    tq_status st;
    double t0;

    if (cli_is_help(argc, argv)) {
        usage(stdout);
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        if ((!strcmp(a, "-t") || !strcmp(a, "--tokenizer") || !strcmp(a, "-p") ||
             !strcmp(a, "--prompt") || !strcmp(a, "-f") || !strcmp(a, "--file") ||
             !strcmp(a, "--chat") || !strcmp(a, "--template")) &&
            !v) {
            fprintf(stderr, "tq tokenize: %s needs a value\n", a);
            return 2;
        }
        if (!strcmp(a, "-t") || !strcmp(a, "--tokenizer"))
            tok_path = argv[++i];
        else if (!strcmp(a, "-p") || !strcmp(a, "--prompt"))
            prompt = argv[++i];
        else if (!strcmp(a, "-f") || !strcmp(a, "--file"))
            file = argv[++i];
        else if (!strcmp(a, "--template"))
            tmpl_name = argv[++i];
        else if (!strcmp(a, "--chat")) {
            char *m = argv[++i], *eq = strchr(m, '=');
            if (!eq || eq == m || n_msgs == MAX_MSGS) {
                fprintf(stderr, "tq tokenize: --chat expects ROLE=TEXT (at most %d), got '%s'\n",
                        MAX_MSGS, m);
                return 2;
            }
            *eq = 0;
            msgs[n_msgs++] = (tq_chat_msg){m, eq + 1};
        } else if (!strcmp(a, "--ids"))
            ids_only = 1;
        else if (!strcmp(a, "--count"))
            count_only = 1;
        else if (!strcmp(a, "--special"))
            flags |= TQ_TOK_PARSE_SPECIAL;
        else if (!strcmp(a, "--bos"))
            flags |= TQ_TOK_ADD_BOS;
        else if (!strcmp(a, "--bos-auto"))
            flags |= TQ_TOK_ADD_BOS_AUTO;
        else if (!strcmp(a, "--decode"))
            decode = 1;
        else if (!strcmp(a, "--no-gen-prompt"))
            gen_prompt = TQ_CHAT_GEN_NONE;
        else if (!strcmp(a, "--no-think"))
            gen_prompt = TQ_CHAT_GEN_NO_THINK;
        else if (!strcmp(a, "--info"))
            info = 1;
        else {
            fprintf(stderr, "tq tokenize: unknown option '%s' (see tq tokenize --help)\n", a);
            return 2;
        }
    }
    if (!tok_path) {
        fprintf(stderr, "tq tokenize: -t TOKENIZER is required (tokenizer.json, its directory, "
                        "or a .gguf file)\n");
        return 2;
    }
    t0 = now_s();
    if ((st = tq_tokenizer_load(tok_path, &tok)))
        return cli_error("tokenize", st, "cannot load tokenizer %s", tok_path);
    if (info) {
        tq_chat_format fmt;
        const char *fname = tq_chat_detect(tok, &fmt) == TQ_OK ? tq_chat_format_name(fmt) : "none";
        printf("tokenizer: %s (%s), vocab %d, bos %d, eos %d, eot %d, add_bos %d, chat format %s,"
               " loaded in %.0f ms\n",
               tok_path, tq_tokenizer_kind(tok), tq_tokenizer_vocab_size(tok),
               tq_tokenizer_bos(tok), tq_tokenizer_eos(tok), tq_tokenizer_eot(tok),
               tq_tokenizer_add_bos(tok), fname, 1e3 * (now_s() - t0));
        if (!prompt && !file && !n_msgs) {
            rc = 0;
            goto out;
        }
    }
    if (n_msgs) {
        tq_chat_format fmt;
        size_t need = 0;
        if ((st = tq_chat_format_parse(tmpl_name, &fmt))) {
            rc = cli_error("tokenize", st, "--template");
            goto out;
        }
        st = tq_chat_render(tok, fmt, msgs, n_msgs, gen_prompt, NULL, 0, &need);
        if (st != TQ_E_OVERFLOW && st != TQ_OK) {
            rc = cli_error("tokenize", st, "cannot render the chat");
            goto out;
        }
        chat = malloc(need + 1);
        if (!chat ||
            (st = tq_chat_render(tok, fmt, msgs, n_msgs, gen_prompt, chat, need + 1, &need))) {
            rc = cli_error("tokenize", st, "cannot render the chat");
            goto out;
        }
        if (!ids_only && !count_only)
            printf("--- rendered chat (%zu bytes) ---\n%s\n--- tokens ---\n", need, chat);
        text = chat;
        chat = NULL;
        n_text = need;
        flags |= TQ_TOK_PARSE_SPECIAL;
    } else if (prompt) {
        n_text = strlen(prompt);
        text = malloc(n_text + 1);
        if (text)
            memcpy(text, prompt, n_text + 1);
    } else {
        if (cli_not_dir("tokenize", "-f", file))
            goto out;
        FILE *f = !file || !strcmp(file, "-") ? stdin : fopen(file, "rb");
        if (!f) {
            fprintf(stderr, "tq tokenize: cannot open %s\n", file);
            goto out;
        }
        text = read_all(f, &n_text);
        if (f != stdin)
            fclose(f);
        if (!text) {
            fprintf(stderr, "tq tokenize: cannot read %s\n", file ? file : "standard input");
            goto out;
        }
    }
    if (!text) {
        fprintf(stderr, "tq tokenize: out of memory\n");
        goto out;
    }
    if (decode) {
        char *p = text, *end;
        size_t cap, n_out = 0;
        char *buf;
        ids = malloc((n_text / 2 + 2) * sizeof(int32_t));
        while (ids) {
            errno = 0;
            long v = strtol(p, &end, 10);
            if (end == p)
                break;
            if (errno == ERANGE || v < 0 || v > INT32_MAX) {
                fprintf(stderr, "tq tokenize: --decode: id %.*s is out of range (valid: 0 .. "
                                "2147483647)\n", (int)(end - p), p);
                rc = 2;
                goto out;
            }
            ids[n_ids++] = (int32_t)v;
            p = end;
        }
        while (*p == ' ' || *p == '\n' || *p == '\t' || *p == ',' || *p == '\r')
            p++;
        if (*p) {
            fprintf(stderr, "tq tokenize: --decode expects integer ids, found '%.20s'\n", p);
            rc = 2;
            goto out;
        }
        tq_tokenizer_decode(tok, ids, n_ids, 0, NULL, 0, &cap);
        buf = malloc(cap + 1);
        if (!buf || (st = tq_tokenizer_decode(tok, ids, n_ids, 0, buf, cap, &n_out))) {
            free(buf);
            rc = cli_error("tokenize", st, "cannot decode");
            goto out;
        }
        fwrite(buf, 1, n_out, stdout);
        putchar('\n');
        free(buf);
        rc = 0;
        goto out;
    }
    ids = malloc((size_t)tq_tokenizer_encode_bound(n_text) * sizeof(int32_t));
    if (!ids) {
        fprintf(stderr, "tq tokenize: out of memory\n");
        goto out;
    }
    t0 = now_s();
    st = tq_tokenizer_encode(tok, text, n_text, flags, ids, tq_tokenizer_encode_bound(n_text),
                             &n_ids);
    if (st) {
        rc = cli_error("tokenize", st, "cannot tokenize");
        goto out;
    }
    if (count_only) {
        double dt = now_s() - t0;
        printf("%lld tokens, %zu bytes (%.2f bytes/token), %.1f ms (%.1f MB/s)\n", (long long)n_ids,
               n_text, n_ids ? (double)n_text / (double)n_ids : 0.0, 1e3 * dt,
               dt > 0 ? (double)n_text / dt / 1e6 : 0.0);
    } else if (ids_only) {
        for (int64_t i = 0; i < n_ids; i++)
            printf(i ? " %d" : "%d", ids[i]);
        putchar('\n');
    } else {
        for (int64_t i = 0; i < n_ids; i++) {
            size_t len = 0;
            const char *p = tq_tokenizer_piece(tok, ids[i], &len);
            printf("%6lld %7d  '", (long long)i, ids[i]);
            print_escaped(p, len);
            printf("'%s\n", tq_tokenizer_is_special(tok, ids[i]) ? "  (special)" : "");
        }
    }
    rc = 0;
out:
    free(ids);
    free(text);
    free(chat);
    tq_tokenizer_free(tok);
    return rc;
}
