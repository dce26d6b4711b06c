# TurboQuant KV cache in the engine (src/model/kvcache_turbo.c, src/cpu/attn_turbo*.c,
# src/model/kvsnap.c, src/model/eval.c).
tq_test(test_turbo_attn LABELS fast)
tq_test(test_turbo_snap LABELS fast)
tq_test(test_turbo_model LABELS model)
tq_test(test_turbo_bench LABELS slow)
