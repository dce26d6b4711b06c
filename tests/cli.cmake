# The tq binary end to end (issue 10): flag ranges, stdout write errors, kv-bench +rk, directory
# messages (test_cli, no model); chat with every message refused, the stats line of a prompt
# cache, generate to /dev/full (test_cli_model, needs models/SmolLM2-135M-Instruct.Q4_1.gguf).
tq_test(test_cli LABELS fast ARGS $<TARGET_FILE:tq> TIMEOUT 60)
add_dependencies(test_cli tq)
tq_test(test_cli_model LABELS model ARGS $<TARGET_FILE:tq> TIMEOUT 300)
add_dependencies(test_cli_model tq)
# Committed scripts find ../shared from their own location, never by this machine's path (and
# the docs and test comments name it as ../shared too).
add_test(NAME scripts_no_abs_paths COMMAND sh -c
    "! grep -rnI '/work/' scripts bench tests docs \"$0\" \"$@\"" --include=*.py --include=*.sh
    --include=*.md --include=*.c --include=*.h
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(scripts_no_abs_paths PROPERTIES LABELS fast)
# scripts/llamacpp/bench.py (issue 14's peer timing by llama-bench) against a fake llama-bench and a
# fake tq: the arguments it passes, medians, each ratio against the faster flash-attention setting.
add_test(NAME scripts_llamacpp_bench COMMAND python3 scripts/llamacpp/test_bench.py
    WORKING_DIRECTORY ${PROJECT_SOURCE_DIR})
set_tests_properties(scripts_llamacpp_bench PROPERTIES LABELS fast)
