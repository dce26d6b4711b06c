# Install test (issue 12 item 8): cmake --install into a temporary prefix, then tests/install/
# consumer.c built against the installed copy with pkg-config and with find_package(turboquant).
add_test(NAME test_install COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/install/run.sh
    ${PROJECT_BINARY_DIR} ${CMAKE_C_COMPILER} "${TQ_SANITIZE}" ${TQ_SHARED})
set_tests_properties(test_install PROPERTIES LABELS fast SKIP_RETURN_CODE 77 TIMEOUT 120)
