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
# The MLX affine rows of the format table and their matvec kernels: block layout vs file
# layout, scalar vs the specification, every SIMD table vs scalar (bit for bit).
tq_test(test_qdot_affine LABELS fast)
# Stock mlx-lm loads tq's MLX output of SmolLM2 (4-bit g64, plain and rotated) and its logits
# match tq's engine on the same files (label model: needs models/ and python3 with mlx + mlx-lm;
# skips otherwise). Peer runner: scripts/quant/mlx_lm_logits.py.
tq_test(test_mlx_lm LABELS model TIMEOUT 900)
# IQ4_NL kept in its block format: every ISA's dots/matvecs vs the scalar reference (bit for
# bit, random blocks, seed printed), the reference vs the gguf package's dequantization.
tq_test(test_qdot_iq4nl LABELS fast)
