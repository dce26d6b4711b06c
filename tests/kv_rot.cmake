# Rotated block KV schemes (issue 11; src/kv/kv_rot.c). test_kv_rot_batch also runs under TSan (label
# tsan): the batch op runs every sequence's units on a 2-thread pool.
tq_test(test_kv_rot LABELS fast)
tq_test(test_kv_rot_cache LABELS fast)
tq_test(test_kv_rot_isa LABELS fast)
tq_test(test_kv_rot_batch LABELS fast tsan)
