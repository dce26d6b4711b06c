# Fused CPU attention of the rot: KV schemes (issue 11 item 3; src/cpu/attn_rot*.c,
# src/model/kvcache_rot.c).
tq_test(test_attn_rot LABELS fast)
tq_test(test_rot_model LABELS model)
tq_test(test_rot_bench LABELS slow)
