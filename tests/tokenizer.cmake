# Tokenizer tests (tokenizer.json / GGUF vocabularies, parity with Hugging Face and llama.cpp).
# zlib reads the compressed reference ids in tests/data/tokenizer/*.tqid (tests only).
if(PKG_CONFIG_FOUND)
    pkg_check_modules(ZLIB IMPORTED_TARGET zlib)
endif()
tq_find_dep(PkgConfig::ZLIB zlib.h z) # no pkg-config module: a CMAKE_PREFIX_PATH prefix (CMakeLists.txt)

# Parity on the whole WikiText-2 test file; one executable, one ctest entry per tokenizer.
tq_test(test_tok_parity LABELS fast ARGS qwen3)
target_link_libraries(test_tok_parity PRIVATE PkgConfig::ZLIB)
add_test(NAME test_tok_parity_llama3 COMMAND test_tok_parity llama3
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
add_test(NAME test_tok_parity_smollm2 COMMAND test_tok_parity smollm2
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_tok_parity_llama3 PROPERTIES LABELS fast SKIP_RETURN_CODE 77
    TIMEOUT 300 ENVIRONMENT "TQ_SRC_DIR=${PROJECT_SOURCE_DIR}")
add_test(NAME test_tok_parity_gemma3 COMMAND test_tok_parity gemma3
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(test_tok_parity_smollm2 test_tok_parity_gemma3 PROPERTIES LABELS model
    SKIP_RETURN_CODE 77 TIMEOUT 300 ENVIRONMENT "TQ_SRC_DIR=${PROJECT_SOURCE_DIR}")

# Edge cases (HF / llama.cpp references), chat templates, flags, invalid UTF-8, bad files.
tq_test(test_tok_edge LABELS fast)
target_link_libraries(test_tok_edge PRIVATE PkgConfig::ZLIB)
