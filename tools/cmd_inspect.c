/* cmd_inspect.c -- `tq inspect PATH [--json] [--no-tensors]`: what a model file holds.
 * PATH is a .gguf file, a .safetensors file, an index json or a Hugging Face directory. Prints the
 * architecture and hyper-parameters, the tokenizer summary, GGUF metadata, the tensor table (HF
 * name, stored name, type, shape, bytes) and totals per stored type; --json prints the same as
 * one JSON object for scripts. */
#include "cli.h"

static void json_str(FILE *f, const char *s, size_t n)
{
    fputc('"', f);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)s[i];
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void js(FILE *f, const char *s)
{
    json_str(f, s, strlen(s));
}

static void print_shape(FILE *f, const int64_t *shape, int n, int json)
{
    fputc(json ? '[' : '(', f);
    for (int d = 0; d < n; d++)
        fprintf(f, "%s%lld", d ? (json ? "," : ", ") : "", (long long)shape[d]);
    fputc(json ? ']' : ')', f);
}

/* A metadata value as JSON (scalars, strings shortened to 200 bytes in text mode) */
static void print_kv(FILE *f, const tq_gguf *g, int64_t i, int json)
{
    const char *key = tq_gguf_kv_key(g, i);
    const int t = tq_gguf_kv_type(g, i);
    int64_t iv;
    float fv;
    int bv;
    const char *s;
    size_t len;
    if (t == TQ_GGUF_STRING && tq_gguf_get_str(g, key, &s, &len) == TQ_OK) {
        if (!json && len > 200)
            len = 200;
        json_str(f, s, len);
    } else if (t == TQ_GGUF_BOOL && tq_gguf_get_bool(g, key, &bv) == TQ_OK) {
        fputs(bv ? "true" : "false", f);
    } else if ((t == TQ_GGUF_F32 || t == TQ_GGUF_F64) && tq_gguf_get_f32(g, key, &fv) == TQ_OK) {
        fprintf(f, "%.9g", (double)fv);
    } else if (t == TQ_GGUF_ARRAY) {
        static const char *names[] = {"u8",   "i8",     "u16",   "i16", "u32", "i32", "f32",
                                      "bool", "string", "array", "u64", "i64", "f64"};
        const int at = tq_gguf_kv_arr_type(g, i);
        fprintf(f, json ? "{\"array\":\"%s\",\"len\":%lld}" : "[%s x %lld]",
                at >= 0 && at < 13 ? names[at] : "?", (long long)tq_gguf_kv_arr_len(g, i));
    } else if (tq_gguf_get_i64(g, key, &iv) == TQ_OK) {
        fprintf(f, "%lld", (long long)iv);
    } else {
        uint32_t u;
        if (tq_gguf_get_u32(g, key, &u) == TQ_OK)
            fprintf(f, "%u", u);
        else
            fputs(json ? "null" : "(u64 above int64)", f);
    }
}

static void print_config(FILE *f, const tq_model_config *c, int json)
{
    static const char *scal[] = {"none", "linear", "llama3", "yarn"};
#define I(k, v) fprintf(f, json ? "\"%s\":%lld," : "  %-24s %lld\n", k, (long long)(v))
#define F(k, v) fprintf(f, json ? "\"%s\":%.9g," : "  %-24s %.9g\n", k, (double)(v))
    if (json)
        fprintf(f, "\"config\":{\"arch\":\"%s\",\"arch_name\":", tq_arch_name(c->arch));
    else
        fprintf(f, "architecture: %s (%s)\n", tq_arch_name(c->arch), c->arch_name);
    if (json)
        js(f, c->arch_name), fputc(',', f);
    I("n_layers", c->n_layers);
    I("hidden", c->hidden);
    I("n_heads", c->n_heads);
    I("n_kv_heads", c->n_kv_heads);
    I("head_dim", c->head_dim);
    I("ffn_hidden", c->ffn_hidden);
    I("vocab", c->vocab);
    I("max_ctx", c->max_ctx);
    F("rope_theta", c->rope_theta);
    F("rope_theta_local", c->rope_theta_local);
    I("rope_dim", c->rope_dim);
    {
        const char *order = c->rope_order == TQ_ROPE_NORM ? "norm" : "neox";
        const char *sc = scal[c->rope_scaling & 3];
        if (json)
            fprintf(f, "\"rope_order\":\"%s\",\"rope_scaling\":\"%s\",", order, sc);
        else
            fprintf(f, "  %-24s %s\n  %-24s %s\n", "rope_order", order, "rope_scaling", sc);
    }
    if (c->rope_scaling) {
        F("rope_factor", c->rope_factor);
        F("rope_low_freq_factor", c->rope_low_freq_factor);
        F("rope_high_freq_factor", c->rope_high_freq_factor);
        I("rope_orig_max_pos", c->rope_orig_max_pos);
    }
    F("rms_eps", c->rms_eps);
    I("tied_embeddings", c->tied_embeddings);
    I("qkv_bias", c->qkv_bias);
    I("qk_norm", c->qk_norm);
    I("norm_plus_one", c->norm_plus_one);
    I("sliding_window", c->sliding_window);
    I("sliding_window_pattern", c->sliding_window_pattern);
    F("query_pre_attn_scalar", c->query_pre_attn_scalar);
    F("final_logit_softcap", c->final_logit_softcap);
    F("attn_logit_softcap", c->attn_logit_softcap);
    F("embed_scale", c->embed_scale);
    if (json)
        fprintf(f, "\"activation\":\"%s\",", c->act_gelu ? "gelu_tanh" : "silu");
    else
        fprintf(f, "  %-24s %s\n", "activation", c->act_gelu ? "gelu_tanh" : "silu");
    I("bos_id", c->bos_id);
    if (json)
        fprintf(f, "\"eos_id\":%d}", c->eos_id);
    else
        fprintf(f, "  %-24s %d\n", "eos_id", c->eos_id);
#undef I
#undef F
}

static void print_tokenizer(FILE *f, const tq_weights *w, const char *path, int json)
{
    tq_tokenizer *t = NULL;
    tq_status st;
    if (tq_weights_gguf(w))
        st = tq_tokenizer_from_gguf(tq_weights_gguf(w), &t);
    else
        st = tq_tokenizer_load(path, &t);
    if (st) {
        if (json) {
            fputs("\"tokenizer\":{\"error\":", f);
            js(f, tq_last_error());
            fputs("}", f);
        } else {
            fprintf(f, "tokenizer: none usable (%s)\n", tq_last_error());
        }
        return;
    }
    if (json)
        fprintf(f,
                "\"tokenizer\":{\"kind\":\"%s\",\"vocab\":%d,\"bos\":%d,\"eos\":%d,\"eot\":%d,"
                "\"add_bos\":%s,\"chat_template\":%s}",
                tq_tokenizer_kind(t), tq_tokenizer_vocab_size(t), tq_tokenizer_bos(t),
                tq_tokenizer_eos(t), tq_tokenizer_eot(t),
                tq_tokenizer_add_bos(t) ? "true" : "false",
                tq_tokenizer_chat_template(t)[0] ? "true" : "false");
    else
        fprintf(f,
                "tokenizer: %s, %d tokens, bos %d, eos %d, eot %d, add_bos %d, chat template %s\n",
                tq_tokenizer_kind(t), tq_tokenizer_vocab_size(t), tq_tokenizer_bos(t),
                tq_tokenizer_eos(t), tq_tokenizer_eot(t), tq_tokenizer_add_bos(t),
                tq_tokenizer_chat_template(t)[0] ? "yes" : "no");
    tq_tokenizer_free(t);
}

typedef struct type_total {
    const char *type;
    int64_t n;
    double bytes;
    double params;
} type_total;

int cmd_inspect(int argc, char **argv)
{
    const char *path = NULL;
    int json = 0, tensors = 1, cpu = 0;
    tq_weights *w = NULL;
    tq_status st;
    type_total tot[32];
    int n_tot = 0;
    double all_bytes = 0, all_params = 0;
    FILE *f = stdout;

    if (cli_is_help(argc, argv)) {
        printf(
            "usage: tq inspect PATH [--json] [--no-tensors]\n"
            "       tq inspect --cpu\n\n"
            "PATH: a .gguf file, a .safetensors file, a model.safetensors.index.json, or a\n"
            "Hugging Face directory (config.json + safetensors). Prints architecture and\n"
            "hyper-parameters, tokenizer summary, GGUF metadata, the tensor table (Hugging Face\n"
            "name, stored name, type, shape, bytes) and totals.\n"
            "  --json        one JSON object on stdout, for scripts\n"
            "  --no-tensors  leave out the per-tensor table\n"
            "  --cpu         the CPU kernel level in use and the levels this CPU supports\n");
        return 0;
    }
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--json"))
            json = 1;
        else if (!strcmp(argv[i], "--no-tensors"))
            tensors = 0;
        else if (!strcmp(argv[i], "--cpu"))
            cpu = 1;
        else if (argv[i][0] == '-' && argv[i][1])
            return fprintf(stderr,
                           "tq inspect: unknown option '%s' (valid: --json, --no-tensors)\n",
                           argv[i]),
                   2;
        else if (!path)
            path = argv[i];
        else
            return fprintf(stderr, "tq inspect: one PATH only ('%s' is extra)\n", argv[i]), 2;
    }
    if (cpu) {
        printf("cpu kernels in use: %s%s (TQ_CPU=scalar|avx2|avx512|avx512vnni lowers it)\n"
               "supported:", tq_isa_name(tq_cpu_isa()), tq_cpu_amx() ? " + amx-int8" : "");
        for (int i = 0; i < TQ_ISA_COUNT; i++)
            if (tq_cpu_supports((tq_isa)i))
                printf(" %s", tq_isa_name((tq_isa)i));
        printf("\n");
        if (!path)
            return 0;
    }
    if (!path)
        return fprintf(stderr, "tq inspect: missing PATH (tq inspect --help)\n"), 2;
    if ((st = tq_weights_open(path, &w)))
        return cli_error("inspect", st, "cannot open %s", path);

    const tq_gguf *g = tq_weights_gguf(w);
    if (json) {
        fputs("{\"path\":", f);
        js(f, path);
        fprintf(f, ",\"format\":\"%s\",", g ? "gguf" : "safetensors");
        if (g)
            fprintf(f, "\"gguf_version\":%u,\"alignment\":%zu,", tq_gguf_version(g),
                    tq_gguf_alignment(g));
    } else {
        fprintf(f, "%s: %s", path, g ? "GGUF" : "safetensors");
        if (g)
            fprintf(f, " v%u, alignment %zu, %lld metadata keys", tq_gguf_version(g),
                    tq_gguf_alignment(g), (long long)tq_gguf_n_kv(g));
        fputc('\n', f);
    }
    print_config(f, tq_weights_config(w), json);
    if (json)
        fputc(',', f);
    print_tokenizer(f, w, path, json);
    if (g) {
        fputs(json ? ",\"metadata\":{" : "metadata:\n", f);
        for (int64_t i = 0; i < tq_gguf_n_kv(g); i++) {
            if (json) {
                if (i)
                    fputc(',', f);
                js(f, tq_gguf_kv_key(g, i));
                fputc(':', f);
            } else {
                fprintf(f, "  %-40s ", tq_gguf_kv_key(g, i));
            }
            print_kv(f, g, i, json);
            if (!json)
                fputc('\n', f);
        }
        if (json)
            fputc('}', f);
    } else if (tq_weights_st(w) && tq_st_n_metadata(tq_weights_st(w))) {
        const tq_st *s = tq_weights_st(w);
        fputs(json ? ",\"metadata\":{" : "metadata:\n", f);
        for (int64_t i = 0; i < tq_st_n_metadata(s); i++) {
            const char *k, *v;
            tq_st_metadata_at(s, i, &k, &v);
            if (json) {
                fputs(i ? "," : "", f);
                js(f, k);
                fputc(':', f);
                js(f, v);
            } else {
                fprintf(f, "  %-40s %s\n", k, v);
            }
        }
        if (json)
            fputc('}', f);
    }
    if (json)
        fputs(",\"tensors\":[", f);
    else if (tensors)
        fprintf(f, "tensors:\n  %-52s %-28s %-6s %-16s %12s\n", "name", "stored as", "type",
                "shape", "bytes");
    for (int64_t i = 0; i < tq_weights_count(w); i++) {
        tq_weights_tensor t;
        int k;
        tq_weights_tensor_at(w, i, &t);
        for (k = 0; k < n_tot && strcmp(tot[k].type, t.src_type); k++)
            ;
        if (k == n_tot && n_tot < 32)
            tot[n_tot++] = (type_total){t.src_type, 0, 0, 0};
        if (k < 32) {
            tot[k].n++;
            tot[k].bytes += (double)t.src_nbytes;
            tot[k].params += (double)t.n_elem;
        }
        all_bytes += (double)t.src_nbytes;
        all_params += (double)t.n_elem;
        if (!tensors)
            continue;
        if (json) {
            fputs(i ? ",{\"name\":" : "{\"name\":", f);
            js(f, t.name);
            fputs(",\"src_name\":", f);
            js(f, t.src_name);
            fprintf(f, ",\"type\":\"%s\",\"shape\":", t.src_type);
            print_shape(f, t.shape, t.n_dims, 1);
            fprintf(f, ",\"bytes\":%zu}", t.src_nbytes);
        } else {
            char shp[64];
            FILE *m = fmemopen(shp, sizeof(shp), "w");
            if (m) {
                print_shape(m, t.shape, t.n_dims, 0);
                fclose(m);
            } else {
                shp[0] = 0;
            }
            fprintf(f, "  %-52s %-28s %-6s %-16s %12zu\n", t.name,
                    strcmp(t.name, t.src_name) ? t.src_name : "", t.src_type, shp, t.src_nbytes);
        }
    }
    if (json) {
        fprintf(f, "],\"totals\":{\"tensors\":%lld,\"bytes\":%.0f,\"params\":%.0f,\"by_type\":{",
                (long long)tq_weights_count(w), all_bytes, all_params);
        for (int k = 0; k < n_tot; k++)
            fprintf(f, "%s\"%s\":{\"tensors\":%lld,\"bytes\":%.0f,\"params\":%.0f}", k ? "," : "",
                    tot[k].type, (long long)tot[k].n, tot[k].bytes, tot[k].params);
        fputs("}}}\n", f);
    } else {
        fprintf(f,
                "totals: %lld tensors, %.0f parameters, %.0f bytes (%.2f MiB, %.3f bits/param)\n",
                (long long)tq_weights_count(w), all_params, all_bytes, all_bytes / 1048576.0,
                all_params > 0 ? all_bytes * 8 / all_params : 0.0);
        for (int k = 0; k < n_tot; k++) {
            fprintf(f, "  %-6s %5lld tensors %14.0f params %14.0f bytes", tot[k].type,
                    (long long)tot[k].n, tot[k].params, tot[k].bytes);
            int id = -1;
            for (int t = 0; g && t < TQ_GGML_TYPE_LIMIT && id < 0; t++)
                if (!strcmp(tq_ggml_type_name(t), tot[k].type))
                    id = t;
            char kn[64];
            if (id >= 0) /* matrices of this type under --weights native (vectors stay f32) */
                fprintf(f, "   native kernel: %s", tq_native_kernel_name(id, 0, kn, sizeof(kn)));
            fputc('\n', f);
        }
    }
    tq_weights_free(w);
    return 0;
}
