# Native block weights in the engine (issue 14): tiny llama GGUFs in Q8_0..Q5_1, native vs
# dequantized f32, batch invariance, refusals. With a model: native vs f32 on SmolLM2 / Gemma 3.
tq_test(test_native LABELS fast)
if(EXISTS ${PROJECT_SOURCE_DIR}/models/SmolLM2-135M-Instruct.Q4_1.gguf)
    add_test(NAME test_native_smollm2 COMMAND test_native -m models/SmolLM2-135M-Instruct.Q4_1.gguf
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(test_native_smollm2 PROPERTIES LABELS model)
endif()
if(EXISTS ${PROJECT_SOURCE_DIR}/models/gemma-3-270m-q4_k_m.gguf)
    add_test(NAME test_native_gemma3 COMMAND test_native -m models/gemma-3-270m-q4_k_m.gguf
             WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(test_native_gemma3 PROPERTIES LABELS model)
endif()
