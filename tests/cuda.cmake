# CUDA tests: label cuda; each exits 77 (skip) when the build has no CUDA kernels or there is no device.
tq_test(test_cuda_kv LABELS cuda TIMEOUT 1800)
tq_test(test_cuda_api LABELS fast)
tq_test(test_cuda_fwd LABELS cuda model TIMEOUT 600)
# the evaluators on the GPU (tq ppl / kl / teacher --cuda): f32 weights + f32 cache vs the CPU
tq_test(test_cuda_eval LABELS cuda model TIMEOUT 600)
# Diagnostic (issue 16 item 6, not a test): same-scheme drift of the CPU engine under another
# rounding of the forward (bench/cuda/cpu_drift.c; docs/results.md "Engine on the GPU").
add_executable(cpu_drift ${PROJECT_SOURCE_DIR}/bench/cuda/cpu_drift.c)
target_compile_options(cpu_drift PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_compile_definitions(cpu_drift PRIVATE _GNU_SOURCE)
target_link_libraries(cpu_drift PRIVATE turboquant)
# Quantized GEMV on the GPU (issue 16 item 5): the test (label cuda) and its benchmark program.
tq_test(test_cuda_qgemv LABELS cuda TIMEOUT 600)
add_executable(qgemv_bench ${PROJECT_SOURCE_DIR}/bench/cuda/qgemv_bench.c)
target_include_directories(qgemv_bench PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_options(qgemv_bench PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_compile_definitions(qgemv_bench PRIVATE _GNU_SOURCE)
# the CUDA archive needs the C archive again after it (the bench calls only tq_cuda_* entry points)
if(TQ_CUDA)
    target_link_libraries(qgemv_bench PRIVATE "$<LINK_GROUP:RESCAN,turboquant,turboquant_cuda>")
else()
    target_link_libraries(qgemv_bench PRIVATE turboquant)
endif()
# The device greedy sampler and the generation loop on the GPU (issue 16 item 4; tiny model only).
tq_test(test_cuda_gen LABELS cuda TIMEOUT 300)
# A random-weight GGUF of SmolLM2-135M's shape (tests/rand_gguf.h) for the GPU benchmarks.
add_executable(rand_gguf ${PROJECT_SOURCE_DIR}/bench/cuda/rand_gguf.c)
target_compile_options(rand_gguf PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_link_libraries(rand_gguf PRIVATE turboquant)
