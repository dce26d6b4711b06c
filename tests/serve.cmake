# tq serve (issue 15): the HTTP server end to end with curl on loopback against the tiny random
# Llama (a byte tokenizer written by the test): endpoints, streaming, greedy tokens vs the
# library, bad requests, API key, startup refusals. Skips (77) without curl.
tq_test(test_serve LABELS fast ARGS $<TARGET_FILE:tq> TIMEOUT 120)
add_dependencies(test_serve tq)
# tq_batch_eval: several sessions in one forward pass, each row bit-identical to its lone run
# (four tiny models, f32/bf16 weights, f32/bf16/turbo caches, a prompt chunk riding along).
tq_test(test_batch_eval LABELS fast)
# The `openai` Python package as the client (model label: needs models/SmolLM2-135M-Instruct.Q4_1.gguf;
# skips without the package or the model).
add_test(NAME serve_openai COMMAND python3 ${CMAKE_CURRENT_SOURCE_DIR}/serve/openai_client.py
    $<TARGET_FILE:tq> models/SmolLM2-135M-Instruct.Q4_1.gguf WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(serve_openai PROPERTIES LABELS model SKIP_RETURN_CODE 77 TIMEOUT 300)
