# Sliding-window layers kept as ring buffers (issue 11 item 5; tq_kvcache_set_window).
tq_test(test_kv_swa LABELS fast)
# bench/kv_bytes.c prints the bytes-per-token table of docs/results.md (an executable, not a test).
add_executable(kv_bytes ${PROJECT_SOURCE_DIR}/bench/kv_bytes.c)
target_compile_definitions(kv_bytes PRIVATE _GNU_SOURCE)
target_compile_options(kv_bytes PRIVATE -Wall -Wextra -Wno-unused-parameter)
target_link_libraries(kv_bytes PRIVATE turboquant)
