#!/usr/bin/env python3
"""Time the `gguf` package's dequantization of every tensor of a GGUF file (numpy, one process),
the peer for test_io_parity's printed scalar/AVX2 times. Median of N runs.

usage: python3 scripts/io_ref/bench_dequant.py models/X.gguf [N]
"""
import statistics
import sys
import time

import gguf
from gguf.quants import dequantize


def main(path, n=3):
    r = gguf.GGUFReader(path)
    for t in r.tensors:  # touch the mapping once so page faults are not timed
        t.data.sum()
    times = []
    for _ in range(n):
        t0 = time.perf_counter()
        for t in r.tensors:
            dequantize(t.data, t.tensor_type)
        times.append(time.perf_counter() - t0)
    print(f"{path}: gguf-py dequantize all tensors: median {statistics.median(times):.3f} s of {n}")


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3)
