# tq serve (issue 15): the HTTP server end to end with curl on loopback against the tiny random
# Llama (a byte tokenizer written by the test): endpoints, streaming, greedy tokens vs the
# library, bad requests, API key, startup refusals. Skips (77) without curl.
tq_test(test_serve LABELS fast ARGS $<TARGET_FILE:tq> TIMEOUT 120)
add_dependencies(test_serve tq)
# tq_batch_eval: several sessions in one forward pass, each row bit-identical to its lone run
# (four tiny models, f32/bf16 weights, f32/bf16/turbo caches, a prompt chunk riding along).
tq_test(test_batch_eval LABELS fast)
