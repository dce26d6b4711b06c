# Generation: sampler, generation loop, commands; llama.cpp comparison (needs models/).
tq_test(test_sample LABELS fast)
# tq vs llama.cpp on the same F16 weights (skips without models/SmolLM2-135M-Instruct.F16.gguf)
tq_test(test_llamacpp LABELS model)
