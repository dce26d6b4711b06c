/* test_llamacpp_bf16.c -- test_llamacpp.c on the BF16 pair: models/SmolLM2-135M-Instruct.BF16.gguf
 * with tq's bf16 weights against tests/data/llamacpp/smollm2_bf16.bin. llama.cpp also rounds the
 * activations to bf16 in its BF16 matmuls, so the KL is ~1e-4 here (target < 1e-3 still). */
#define LLAMACPP_BF16 1
#include "test_llamacpp.c"
