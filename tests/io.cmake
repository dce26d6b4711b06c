# I/O: GGUF, safetensors (read + write), config, tq_weights. Real-model tests are labelled model.
tq_test(test_io_parity LABELS model TIMEOUT 900)
tq_test(test_io_gguf LABELS fast)
