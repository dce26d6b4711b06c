# Sliding-window layers kept as ring buffers (issue 11 item 5; tq_kvcache_set_window).
tq_test(test_kv_swa LABELS fast)
