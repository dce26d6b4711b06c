# Native GGUF block-format kernels (issue 14): scalar reference vs AVX2 and vs the dequantizer
# oracle. The micro-benchmark bench/qdot_bench.c is an executable only (never a test: timing).
# TIMEOUT 900: under ASan (make check-asan) it runs ~45x slower than plain (269 s of the old 300 s
# limit in the 2026-12-03 clean-clone CI, after the 8-token tile tests); plain it takes ~6 s.
tq_test(test_qdot LABELS fast TIMEOUT 900)
# The gated activations (cpu/act.h): vector == scalar bit for bit; scalar vs float64 GELU/SiLU.
tq_test(test_act LABELS fast)
# The AMX int8 tiles (cpu/qdot_amx.h) == the per-block q8 spec bit for bit; skips without AMX.
tq_test(test_qdot_amx LABELS fast)
# The r16 layout of Q4_0/Q4_1/Q8_0 (cpu/qdot_r16.h): pack/unpack, its decode kernel and the driver == the spec.
tq_test(test_qdot_r16 LABELS fast)
add_executable(qdot_bench ${PROJECT_SOURCE_DIR}/bench/qdot_bench.c)
target_include_directories(qdot_bench PRIVATE ${PROJECT_SOURCE_DIR}/src)
target_compile_definitions(qdot_bench PRIVATE _GNU_SOURCE)
target_compile_options(qdot_bench PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_link_libraries(qdot_bench PRIVATE turboquant)
# Streaming-read bandwidth at 1..N threads (the decode roofline, docs/results.md): an executable only.
add_executable(membw ${PROJECT_SOURCE_DIR}/bench/membw.c)
target_compile_options(membw PRIVATE -Wall -Wextra)
target_link_libraries(membw PRIVATE Threads::Threads)
# The batched decode step of tq serve by batch size (bench/batch_bench.c; an executable only).
add_executable(batch_bench ${PROJECT_SOURCE_DIR}/bench/batch_bench.c)
target_compile_definitions(batch_bench PRIVATE _GNU_SOURCE)
target_compile_options(batch_bench PRIVATE -Wall -Wextra)
target_link_libraries(batch_bench PRIVATE turboquant)
# Does AMX int8 work here, and a per-block-spec prototype of the 8-token tile on it
# (bench/amx_probe.c; an executable only, x86-64 compilers that know -mamx-int8).
if(TQ_AMX)
    add_executable(amx_probe ${PROJECT_SOURCE_DIR}/bench/amx_probe.c)
    target_compile_options(amx_probe PRIVATE -Wall -Wextra -mamx-tile -mamx-int8 -mavx512f
                           -mavx512bw -mavx512vl -mf16c -mfma)
    target_link_libraries(amx_probe PRIVATE m)
endif()
