# tq serve (issue 15): the HTTP server end to end with curl on loopback against the tiny random
# Llama (a byte tokenizer written by the test): endpoints, streaming, greedy tokens vs the
# library, bad requests, API key, startup refusals. Skips (77) without curl.
tq_test(test_serve LABELS fast ARGS $<TARGET_FILE:tq> TIMEOUT 120)
add_dependencies(test_serve tq)
