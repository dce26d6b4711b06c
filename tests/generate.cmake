# Generation: sampler, generation loop, commands; llama.cpp comparison (needs models/).
tq_test(test_sample LABELS fast)
tq_test(test_gen LABELS fast)
# tq vs llama.cpp on the same F16 weights (skips without models/SmolLM2-135M-Instruct.F16.gguf;
# make it with scripts/llamacpp/make_f16_gguf.py)
tq_test(test_llamacpp LABELS model TIMEOUT 900)
tq_test(test_llamacpp_bf16 LABELS model TIMEOUT 900)
