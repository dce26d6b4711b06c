# Attention kernels per ISA and batch invariance (src/model/kvcache.c, src/cpu/attn_turbo*.c,
# src/cpu/matvec_attn_*.c). The _scalar twins run the same checks on the portable kernels
# (test_attn_window calls the AVX2 kernels directly, so it has none).
tq_test(test_attn_invariance LABELS fast)
tq_test(test_attn_window LABELS fast)
foreach(t test_attn_invariance test_turbo_attn)
    add_test(NAME ${t}_scalar COMMAND ${t} --cpu scalar WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(${t}_scalar PROPERTIES LABELS fast SKIP_RETURN_CODE 77 TIMEOUT 300
        ENVIRONMENT "TQ_SRC_DIR=${PROJECT_SOURCE_DIR}")
endforeach()
tq_test(test_attn_bench LABELS slow)
