# KV codec tests (issue: Foundation and the TurboQuant KV codec). test_kv_golden is listed by its owner.
tq_test(test_kv_ref LABELS fast)
tq_test(test_kv_isa LABELS fast tsan)
tq_test(test_kv_api LABELS fast)
tq_test(test_kv_props LABELS fast)
