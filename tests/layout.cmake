# The dependency direction of docs/ARCHITECTURE.md "Layers": every #include under src/ and tools/.
tq_test(test_layout LABELS fast)
