# Weights pipeline (tq quantize): the rotation fold on tiny models of every architecture, the
# GGUF writer, refusals; the block quantizers against the gguf package's goldens.
tq_test(test_quant_fold LABELS fast)
tq_test(test_quant_blocks LABELS fast)
# The fold gate on SmolLM2 (label model; needs models/ and ../shared): the folded f32 GGUF vs the
# original through full-vocabulary KL on WikiText-2 (docs/results.md "Weights: rotation fold").
tq_test(test_quant_gate LABELS model TIMEOUT 1800)
set_tests_properties(test_quant_gate PROPERTIES SKIP_RETURN_CODE 77)
# The engine reads MLX affine directories (issue 13 item 5): the row dequantizer vs a bit-by-bit
# reference for every bits/group/scale dtype, tiny models (hand-made with per-module overrides,
# and written by tq quantize --format mlx) vs their dequantized f32 copies, the refusals.
tq_test(test_mlx_load LABELS fast)
