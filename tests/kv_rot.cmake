# Rotated block KV schemes (issue 11; src/kv/kv_rot.c).
tq_test(test_kv_rot LABELS fast)
tq_test(test_kv_rot_cache LABELS fast)
tq_test(test_kv_rot_isa LABELS fast)
tq_test(test_kv_rot_batch LABELS fast)
