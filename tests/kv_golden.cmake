# KV codec vs goldens produced by the reference (vllm-metal turboquant.py on MLX CPU);
# data and provenance in tests/data/kv_goldens/. Every ISA kernel table is run in-process.
tq_test(test_kv_golden LABELS fast)
