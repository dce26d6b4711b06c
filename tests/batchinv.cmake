# Batch invariance (issue 10 item 11) and the prompt-cache weights fingerprint (item 4):
# src/cpu/matvec*.c, src/model/forward.c, src/model/kvsnap.c.
# kernels + the four tiny models, f32/f16/bf16 weights, 100-token prompt
tq_test(test_batch_invariance LABELS fast)
function(tq_binv name labels)
    add_test(NAME ${name} COMMAND test_batch_invariance ${ARGN}
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(${name} PROPERTIES LABELS "${labels}" SKIP_RETURN_CODE 77 TIMEOUT 1800
        ENVIRONMENT "TQ_SRC_DIR=${PROJECT_SOURCE_DIR}")
endfunction()
# the scalar kernels; a 530-token prompt (a chunk boundary at 512); SmolLM2 (model label)
tq_binv(test_batch_invariance_scalar fast --cpu scalar -w f32,bf16 -p 80)
tq_binv(test_batch_invariance_long fast -m tests/data/tiny/llama -w f32,bf16 -p 530)
tq_binv(test_batch_invariance_smollm2 model -m models/SmolLM2-135M-Instruct.Q4_1.gguf
        -w f32,bf16 -p 520 -t 2)
tq_test(test_snap_fingerprint LABELS fast)
