/* kv_compare.c -- the KV part of the main job (`tq` with no arguments, tools/cmd_default.c):
 * after the answer through the default cache (GEN_DEFAULT_KV, rotated 6.5-bit codes), the same
 * prompt with the same sampling through an unquantized bf16 cache, then memory per token and
 * teacher-forced KL (vs an f32 cache) of bf16, kv8, TurboQuant k8v3 and the default on a short
 * built-in text (one window of 256 tokens, loss positions 128..254). */
#include "cmd_generate.h"
#include "env_opts.h"

static const char kv_text[] =
    "The Eiffel Tower is a wrought-iron lattice tower on the Champ de Mars in Paris, France. It "
    "is named after the engineer Gustave Eiffel, whose company designed and built the tower "
    "from 1887 to 1889. Locally nicknamed \"La dame de fer\" (French for \"Iron Lady\"), it was "
    "constructed as the centrepiece of the 1889 World's Fair, and to crown the centennial "
    "anniversary of the French Revolution. Although initially criticised by some of France's "
    "leading artists and intellectuals for its design, it has since become a global cultural "
    "icon of France and one of the most recognisable structures in the world. The tower "
    "received 5,889,000 visitors in 2022. The Eiffel Tower is the most visited monument with "
    "an entrance fee in the world: 6.91 million people ascended it in 2015. It was designated "
    "a monument historique in 1964, and was named part of a UNESCO World Heritage Site "
    "(\"Paris, Banks of the Seine\") in 1991. The tower is 330 metres tall, about the same "
    "height as an 81-storey building, and the tallest structure in Paris. Its base is square, "
    "measuring 125 metres on each side. During its construction, the Eiffel Tower surpassed "
    "the Washington Monument to become the tallest human-made structure in the world, a title "
    "it held for 41 years until the Chrysler Building in New York City was finished in 1930. "
    "It was the first structure in the world to surpass both the 200-metre and 300-metre mark "
    "in height. Due to the addition of a broadcasting aerial at the top of the tower in 1957, "
    "it is now taller than the Chrysler Building by 5.2 metres.";

int kv_compare(const char *cmd, gen_ctx *g, gen_args *a, const int32_t *ids, int64_t n_ids)
{
    tq_session_opts so;
    tq_session *s = NULL;
    tq_generator *gen = NULL;
    tq_gen_stats st;
    int32_t *tok = NULL;
    int64_t nt = 0;
    tq_status e;
    int rc = 1;

    tq_session_opts_default(&so);
    cli_env_session(&so);
    tq_kv_scheme_parse("bf16", &so.kv);
    so.n_ctx = (int)a->ctx;
    if ((e = tq_session_create(g->model, &so, &s)) ||
        (e = tq_generator_create(g->model, s, g->tok, &a->gen, &gen))) {
        rc = cli_error(cmd, e, "bf16 session");
        goto out;
    }
    printf("the same question, same sampling, KV cache bf16 (unquantized):\nassistant: ");
    cli_flush();
    if ((e = tq_generator_run(gen, ids, n_ids, gen_print_cb, NULL, &st))) {
        rc = cli_error(cmd, e, "generation failed");
        goto out;
    }
    printf("\n\nprompt %lld tokens at %.1f tok/s; %lld tokens generated at %.1f tok/s\n\n",
           (long long)st.n_prompt, st.prefill_s > 0 ? st.n_prompt / st.prefill_s : 0.0,
           (long long)st.n_gen, st.decode_s > 0 ? st.n_gen / st.decode_s : 0.0);

    /* memory per token and KL on the built-in text */
    if ((rc = gen_encode(cmd, g, kv_text, 0, 0, &tok, &nt)))
        goto out;
    rc = 1;
    const int ctx = nt >= 256 ? 256 : (int)(nt & ~1LL);
    const char *names[] = {"bf16", "kv8", "turbo:k8v3", GEN_DEFAULT_KV};
    tq_kv_scheme teacher, sch[4];
    tq_kl_stats r[4], tr;
    tq_kv_scheme_parse("f32", &teacher);
    for (int i = 0; i < 4; i++)
        tq_kv_scheme_parse(names[i], &sch[i]);
    printf("KV cache quality on a built-in text (%d tokens, KL vs an f32 cache at positions "
           "%d..%d%s; `tq kl` for real runs):\n", ctx, ctx / 2, ctx - 2,
           g->info.native ? ", bf16 weights" : "");
    cli_flush();
    /* the KL table measures the KV cache alone: with native block weights (q8 activations,
     * whose rounding amplifies every KV difference) it runs on the weights dequantized to bf16,
     * as `tq kl` does by default */
    tq_model *km = g->model, *kmb = NULL;
    if (g->info.native) {
        tq_model_opts mo;
        tq_model_opts_default(&mo);
        cli_model_env(&mo);
        mo.weight_store = TQ_STORE_DEQUANT;
        mo.weight_type = TQ_DTYPE_BF16;
        mo.n_threads = (int)a->threads;
        if ((e = tq_model_load(a->model, &mo, &kmb))) {
            rc = cli_error(cmd, e, "cannot load model '%s' with bf16 weights", a->model);
            goto out;
        }
        km = kmb;
    }
    e = tq_eval_kl(km, tok, nt, -1, teacher, sch, 4, ctx, 1, NULL, NULL, r, &tr);
    tq_model_free(kmb);
    if (e) {
        rc = cli_error(cmd, e, "KL evaluation");
        goto out;
    }
    printf("  %-18s %10s %8s %10s %7s\n", "KV scheme", "bytes/tok", "vs f32", "KL mean", "top-1");
    printf("  %-18s %10zu %8s %10s %7s\n", "f32", tr.kv_bytes_per_token, "1.00x", "0", "1");
    for (int i = 0; i < 4; i++)
        printf("  %-18s %10zu %7.2fx %10.5f %7.3f%s\n", names[i], r[i].kv_bytes_per_token,
               (double)tr.kv_bytes_per_token / (double)r[i].kv_bytes_per_token, r[i].mean,
               r[i].top1, i == 3 ? "  (the default)" : "");
    rc = 0;
out:
    free(tok);
    tq_generator_free(gen);
    tq_session_free(s);
    return rc;
}
