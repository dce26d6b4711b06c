# Generation: sampler, generation loop, commands; llama.cpp comparison (needs models/).
tq_test(test_sample LABELS fast)
