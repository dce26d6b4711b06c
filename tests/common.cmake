# src/common/ tests: the general Walsh-Hadamard transform (n = K * 2^m).
tq_test(test_hadamard LABELS fast)
# The format table (common/formats.h): a dummy row added by the test alone reaches every consumer.
tq_test(test_formats LABELS fast)
