# KV codec vs goldens produced by the reference (vllm-metal turboquant.py on MLX CPU);
# data and provenance in tests/data/kv_goldens/. Every ISA kernel table is run in-process; the
# extra entries run the public API with --cpu scalar/avx2 too (skipped, exit 77, where the CPU
# lacks the ISA).
tq_test(test_kv_golden LABELS fast)
foreach(isa scalar avx2)
    add_test(NAME test_kv_golden_${isa} COMMAND test_kv_golden --cpu ${isa}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(test_kv_golden_${isa} PROPERTIES LABELS fast SKIP_RETURN_CODE 77
        TIMEOUT 300 ENVIRONMENT "TQ_SRC_DIR=${PROJECT_SOURCE_DIR}")
endforeach()
