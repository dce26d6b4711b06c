# CUDA tests: label cuda; each exits 77 (skip) when the build has no CUDA kernels or there is no device.
tq_test(test_cuda_kv LABELS cuda TIMEOUT 1800)
tq_test(test_cuda_api LABELS fast)
tq_test(test_cuda_fwd LABELS cuda model TIMEOUT 600)
