# I/O: GGUF, safetensors (read + write), config, tq_weights. Real-model tests are labelled model.
tq_test(test_io_parity LABELS model TIMEOUT 900)
tq_test(test_io_gguf LABELS fast)
tq_test(test_io_st_write LABELS fast)
# The `safetensors` Python package loads what we wrote: identical bytes, dtypes, shapes, metadata.
add_test(NAME test_io_st_python COMMAND sh -c
    "TQ_IO_KEEP=$0/st_python $<TARGET_FILE:test_io_st_write> && python3 scripts/io_ref/check_st_written.py $0/st_python"
    ${CMAKE_CURRENT_BINARY_DIR} WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_io_st_python PROPERTIES LABELS slow SKIP_RETURN_CODE 77)
# Fuzz corpora replayed by the fuzz targets' own code in the normal build (fuzz/regression_main.c).
foreach(t gguf safetensors tokenizer_json)
    add_executable(fuzz_replay_${t} ${PROJECT_SOURCE_DIR}/fuzz/fuzz_${t}.c
        ${PROJECT_SOURCE_DIR}/fuzz/regression_main.c)
    target_compile_options(fuzz_replay_${t} PRIVATE -Wall -Wextra -Wno-unused-parameter)
    target_compile_definitions(fuzz_replay_${t} PRIVATE _GNU_SOURCE)
    target_link_libraries(fuzz_replay_${t} PRIVATE turboquant)
    add_test(NAME fuzz_replay_${t} COMMAND fuzz_replay_${t} ${PROJECT_SOURCE_DIR}/fuzz/corpus/${t}
        WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
    set_tests_properties(fuzz_replay_${t} PROPERTIES LABELS "fast;fuzz" TIMEOUT 120)
endforeach()
tq_test(test_io_config LABELS fast)
# tq inspect end to end on the fixtures (JSON fields, a sharded HF directory, a refused file).
add_test(NAME tq_inspect_gguf COMMAND tq inspect tests/data/io/tiny.gguf --json
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(tq_inspect_gguf PROPERTIES LABELS fast PASS_REGULAR_EXPRESSION
    "\"format\":\"gguf\".*\"arch\":\"llama\".*\"n_heads\":2,\"n_kv_heads\":1,\"head_dim\":4.*\"src_name\":\"blk.0.attn_q.weight\",\"type\":\"F32\",\"shape\":\\[8,8\\]")
add_test(NAME tq_inspect_st COMMAND tq inspect tests/data/io/tiny_st WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(tq_inspect_st PROPERTIES LABELS fast PASS_REGULAR_EXPRESSION
    "rope_scaling +llama3.*k_proj.weight +F16 +\\(4, 8\\) +64.*totals: 2 tensors, 96 parameters")
add_test(NAME tq_inspect_bad COMMAND tq inspect tests/data/io/bad/overlap.gguf
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(tq_inspect_bad PROPERTIES LABELS fast PASS_REGULAR_EXPRESSION
    "tq inspect: cannot open tests/data/io/bad/overlap.gguf: .*tensors 'a' and 'b' overlap")
