# The KV codec's encode modes for constant key groups (reference-exact vs safe; kv.h).
tq_test(test_kv_safe LABELS fast)
