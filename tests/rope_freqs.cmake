# Issue 10 item 1, rope_freqs.weight: a Llama-3-style GGUF truncated while it loads gives TQ_E_IO,
# not SIGBUS. The test wraps tq_gguf_find_tensor (static library) to truncate at that moment.
tq_test(test_rope_freqs LABELS fast TIMEOUT 30)
target_link_options(test_rope_freqs PRIVATE -Wl,--wrap=tq_gguf_find_tensor)
