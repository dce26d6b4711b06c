# Attention kernels per ISA and batch invariance (src/model/kvcache.c, src/cpu/attn_turbo*.c,
# src/cpu/matvec_attn_*.c). The _scalar twins run the same checks on the portable kernels
# (test_attn_window calls the AVX2 kernels directly, so it has none).
tq_test(test_attn_invariance LABELS fast)
tq_test(test_attn_window LABELS fast)
tq_test(test_attn_block LABELS fast)
foreach(t test_attn_invariance test_turbo_attn)
    add_test(NAME ${t}_scalar COMMAND ${t} --cpu scalar WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(${t}_scalar PROPERTIES LABELS fast SKIP_RETURN_CODE 77 TIMEOUT 300
        ENVIRONMENT "TQ_SRC_DIR=${PROJECT_SOURCE_DIR}")
endforeach()
# the AVX2 kernels on an AVX-512 machine too (the blocked prefill path of each ISA)
add_test(NAME test_attn_invariance_avx2 COMMAND test_attn_invariance --cpu avx2
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_attn_invariance_avx2 PROPERTIES LABELS fast SKIP_RETURN_CODE 77
    TIMEOUT 300 ENVIRONMENT "TQ_SRC_DIR=${PROJECT_SOURCE_DIR}")
tq_test(test_attn_bench LABELS slow)
