tq_test(test_core LABELS fast)
tq_test(test_pool LABELS fast tsan)
