# Engine (CPU forward pass, KV-cache interface, matvec/GEMM kernels).
tq_test(test_engine_matvec LABELS fast)
tq_test(test_engine_tiny LABELS fast)
tq_test(test_engine_model LABELS model)
tq_test(test_engine_bench LABELS slow)
