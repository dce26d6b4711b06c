# Engine (CPU forward pass, KV-cache interface, matvec/GEMM kernels).
# test_engine_tiny/matvec also run under TSan (label tsan): they drive the pool with 1-3 threads.
tq_test(test_engine_matvec LABELS fast tsan)
tq_test(test_engine_tiny LABELS fast tsan)
tq_test(test_engine_model LABELS model)
tq_test(test_engine_bench LABELS slow)
