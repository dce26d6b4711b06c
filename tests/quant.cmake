# Weights pipeline (tq quantize): the rotation fold on tiny models of every architecture, the
# GGUF writer, refusals; the block quantizers against the gguf package's goldens.
tq_test(test_quant_fold LABELS fast)
tq_test(test_quant_blocks LABELS fast)
