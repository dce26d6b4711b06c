/* env_opts.c -- see env_opts.h. The only getenv() of tq. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "env_opts.h"

static int parse_log(const char *s, tq_log_level *out)
{
    static const char *const names[] = {"error", "warn", "info", "debug"};
    for (int i = 0; i < 4; i++)
        if (!strcmp(s, names[i])) {
            *out = (tq_log_level)i;
            return 0;
        }
    return -1;
}

static int parse_isa(const char *s, tq_isa *out)
{
    if (!strcmp(s, "avx512vnni")) { /* avx512 without the AMX tiles (same results) */
        *out = TQ_ISA_AVX512;
        return 0;
    }
    for (int i = 0; i < TQ_ISA_COUNT; i++)
        if (!strcmp(s, tq_isa_name((tq_isa)i))) {
            *out = (tq_isa)i;
            return 0;
        }
    return -1;
}

static int parse_spin(const char *s, int *out)
{
    char *end;
    const long v = strtol(s, &end, 10);
    if (!*s || *end)
        return -1;
    *out = v > 0 ? (v > 1000000000L ? 1000000000 : (int)v) : 0; /* as atoi: negative = 0 */
    return 0;
}

int cli_env_start(int *argc, char ***argv)
{
    const char *log = getenv("TQ_LOG"), *cpu = getenv("TQ_CPU"), *spin = getenv("TQ_POOL_SPIN");
    const char *log_from = "TQ_LOG", *cpu_from = "TQ_CPU", *spin_from = "TQ_POOL_SPIN";
    char **av = *argv;
    int n = *argc, i = 1;
    /* global flags before the command */
    while (i + 1 < n && (!strcmp(av[i], "--cpu") || !strcmp(av[i], "--log") ||
                         !strcmp(av[i], "--pool-spin"))) {
        if (!strcmp(av[i], "--cpu"))
            cpu = av[i + 1], cpu_from = "--cpu";
        else if (!strcmp(av[i], "--log"))
            log = av[i + 1], log_from = "--log";
        else
            spin = av[i + 1], spin_from = "--pool-spin";
        i += 2;
    }
    if (i < n && (!strcmp(av[i], "--cpu") || !strcmp(av[i], "--log") ||
                  !strcmp(av[i], "--pool-spin")))
        return fprintf(stderr, "tq: %s needs a value\n", av[i]), 2;
    const int flag_log = log_from[0] == '-', flag_cpu = cpu_from[0] == '-';
    const int flag_spin = spin_from[0] == '-';
    int warn = 1; /* the warnings below obey the level, as the library's own did */
    if (log && *log) {
        tq_log_level lvl;
        if (!parse_log(log, &lvl)) {
            tq_log_set_level(lvl);
            warn = lvl >= TQ_LOG_WARN;
        }
        else if (flag_log)
            return fprintf(stderr, "tq: --log %s: valid are error, warn, info, debug\n", log), 2;
        /* an unknown TQ_LOG value was ignored before too (level stays warn) */
    }
    if (cpu && *cpu) {
        tq_isa isa;
        if (parse_isa(cpu, &isa)) {
            if (flag_cpu)
                return fprintf(stderr, "tq: --cpu %s: valid are scalar, avx2, avx512, avx512vnni\n",
                               cpu),
                       2;
            if (warn)
                fprintf(stderr, "tq: warning: TQ_CPU=%s is not one of scalar, avx2, avx512, "
                                "avx512vnni; using %s\n", cpu, tq_isa_name(tq_cpu_isa()));
        } else if (tq_cpu_set_amx(strcmp(cpu, "avx512vnni") != 0), tq_cpu_select(isa) != TQ_OK &&
                   warn) {
            fprintf(stderr, "tq: warning: %s%s%s: this CPU cannot run it; using %s\n", cpu_from,
                    flag_cpu ? " " : "=", cpu, tq_isa_name(tq_cpu_isa()));
        }
    }
    const char *r16 = getenv("TQ_R16"); /* 0: keep the file's rows (no r16 repack at load) */
    if (r16 && *r16)
        tq_cpu_set_r16(strcmp(r16, "0") != 0);
    if (spin && *spin) {
        int v;
        if (!parse_spin(spin, &v))
            tq_pool_set_default_spin(v);
        else if (flag_spin)
            return fprintf(stderr, "tq: --pool-spin %s: give a number of iterations\n", spin), 2;
        else
            tq_pool_set_default_spin(atoi(spin) > 0 ? atoi(spin) : 0); /* as before: atoi */
    }
    if (i > 1) { /* drop the global flags: argv[0] stays, the command moves up */
        memmove(av + 1, av + i, (size_t)(n - i + 1) * sizeof(*av));
        *argc = n - (i - 1);
    }
    return 0;
}

void cli_env_session(tq_session_opts *opts)
{
    const char *m = getenv("TQ_TURBO_ATTN");
    if (!m || !*m)
        return;
    if (!strcmp(m, "fused"))
        opts->turbo_attn = TQ_TURBO_ATTN_FUSED;
    else if (!strcmp(m, "ref"))
        opts->turbo_attn = TQ_TURBO_ATTN_REF;
    else if (!strcmp(m, "both"))
        opts->turbo_attn = TQ_TURBO_ATTN_BOTH;
    else
        fprintf(stderr, "tq: warning: TQ_TURBO_ATTN='%s' is not valid (valid: fused, ref, both); "
                        "using fused\n", m);
}

void cli_model_env(tq_model_opts *o)
{
    const char *mv = getenv("TQ_MATVEC");
    if (mv && *mv) {
        if (!strcmp(mv, "avx512bf16"))
            o->matvec_bf16 = 1;
        else
            fprintf(stderr, "tq: warning: TQ_MATVEC=%s: unknown value (valid: avx512bf16); "
                            "ignored\n", mv);
    }
    const char *g = getenv("TQ_GEMM");
    if (g && *g) {
        if (!strcmp(g, "openblas"))
            o->gemm_openblas = 1;
        else if (strcmp(g, "own"))
            fprintf(stderr, "tq: warning: TQ_GEMM=%s: unknown value (valid: own, openblas); "
                            "using own\n", g);
    }
}
