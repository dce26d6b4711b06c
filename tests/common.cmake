# src/common/ tests: the general Walsh-Hadamard transform (n = K * 2^m).
tq_test(test_hadamard LABELS fast)
