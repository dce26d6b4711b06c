#!/usr/bin/env python3
"""check_mlx_cpu_ops.py -- does MLX's CPU backend evaluate the reference's `x**2` and its
32-element `mean` the way SPEC A1 assumes (fp32 x*x, sequential left-to-right fp32 sum)?

    python3 scripts/kv_goldens/check_mlx_cpu_ops.py

Prints how many fp32 inputs give `mx.array(x)**2 != x*x` (every mantissa at six exponents plus
2^24 random bit patterns of each sign) and how many of 100000 random 32-element rows give
`mx.sum(row) != sequential fp32 sum`. Results are quoted in tests/data/kv_goldens/README.md.
"""
import time

import mlx.core as mx
import numpy as np

mx.set_default_device(mx.cpu)


def main():
    t0 = time.time()
    bad = tot = 0
    examples = []

    def chk(xs):
        nonlocal bad, tot
        a = np.array(mx.array(xs) ** 2)
        with np.errstate(over="ignore", under="ignore"):
            b = (xs * xs).astype(np.float32)
        d = (a.view(np.uint32) != b.view(np.uint32)) & ~(np.isnan(a) & np.isnan(b))
        bad += int(d.sum())
        tot += xs.size
        if d.any() and len(examples) < 4:
            examples.append((float(xs[d][0]), float(a[d][0]), float(b[d][0])))

    for e in (127, 126, 100, 60, 150, 180):
        m = np.arange(1 << 23, dtype=np.uint32)
        chk(((np.uint32(e) << 23) | m).view(np.float32))
    rng = np.random.default_rng(1)
    xs = rng.integers(0, 0x7F800000, size=1 << 24, dtype=np.uint32).view(np.float32)
    chk(xs)
    chk(-xs)
    print("pow(x,2) vs x*x: %d of %d fp32 inputs differ (%.2e)" % (bad, tot, bad / tot))
    for x, a, b in examples:
        print("  x=%.9g: mlx %.9g, x*x %.9g" % (x, a, b))
    y = rng.standard_normal((100000, 32)).astype(np.float32)
    y *= np.exp(rng.uniform(-5, 5, (100000, 1))).astype(np.float32)
    s = np.array(mx.sum(mx.array(y), axis=-1))
    acc = np.zeros(100000, np.float32)
    for k in range(32):
        acc = (y[:, k] + acc).astype(np.float32)
    print("sum of 32 vs sequential fp32: %d of 100000 rows differ" %
          int((s.view(np.uint32) != acc.view(np.uint32)).sum()))
    print("(%.1f s, mlx %s)" % (time.time() - t0, mx.__version__))


if __name__ == "__main__":
    main()
