#!/usr/bin/env python3
"""sdpa_bench.py -- PyTorch SDPA decode-attention timings on bf16 K/V, the peer for
`tq kv-bench --cuda`: same shapes (batch, 32 query heads / 8 kv heads, 1 query token, head_dim,
context), flash backend forced (torch.nn.attention.sdpa_kernel(SDPBackend.FLASH_ATTENTION)) with
enable_gqa=True so K/V are read once per kv head. CUDA-event timing per call, 10 warm-ups, median
of --reps, timed like `tq kv-bench --cuda --timing`: cold (default) reads a 256 MiB buffer
before each call (L2 holds nothing of K/V) and records the start event behind it (GPU time only,
no host/PyTorch launch overhead); host = events around a call issued to an idle GPU. Prints one row
per point and writes CSV (--csv). Helper script only (not product).

usage: python3 bench/cuda/sdpa_bench.py [--head-dim 128] [--ctx 1024,...] [--batch 1,8] [--reps 20]
                                       [--timing cold|host|both]
"""
import argparse
import statistics
import sys

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--head-dim", default="128")
    ap.add_argument("--ctx", default="1024,4096,16384,32768,65536,131072")
    ap.add_argument("--batch", default="1,8")
    ap.add_argument("--heads", type=int, default=32)
    ap.add_argument("--kv-heads", type=int, default=8)
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--csv", default=None)
    ap.add_argument("--backend", default="flash", choices=["flash", "efficient", "cudnn", "math"])
    ap.add_argument("--timing", default="cold", choices=["cold", "host", "both"])
    args = ap.parse_args()
    timings = ["cold", "host"] if args.timing == "both" else [args.timing]
    backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
               "cudnn": SDPBackend.CUDNN_ATTENTION, "math": SDPBackend.MATH}[args.backend]
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name(0)
    print(f"device: {name}; torch {torch.__version__}; backend {args.backend}; enable_gqa")
    rows = []
    g = torch.Generator(device=dev)
    g.manual_seed(1234)
    flush = torch.empty(64 << 20, device=dev, dtype=torch.float32).fill_(1.0)  # 256 MiB
    # clocks up before the first point (a fresh process's first points ran 2x slow at 1k, b2)
    for _ in range(200):
        flush.sum()
    torch.cuda.synchronize()
    for d in [int(x) for x in args.head_dim.split(",")]:
        for b in [int(x) for x in args.batch.split(",")]:
            for n in [int(x) for x in args.ctx.split(",")]:
                q = torch.randn(b, args.heads, 1, d, device=dev, dtype=torch.bfloat16, generator=g)
                k = torch.randn(b, args.kv_heads, n, d, device=dev, dtype=torch.bfloat16, generator=g)
                v = torch.randn(b, args.kv_heads, n, d, device=dev, dtype=torch.bfloat16, generator=g)
                for timing in timings:
                    try:
                        with sdpa_kernel(backend):
                            for _ in range(10):
                                F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                            torch.cuda.synchronize()
                            ts = []
                            for _ in range(args.reps):
                                e0 = torch.cuda.Event(enable_timing=True)
                                e1 = torch.cuda.Event(enable_timing=True)
                                if timing == "cold":
                                    flush.sum()
                                e0.record()
                                F.scaled_dot_product_attention(q, k, v, enable_gqa=True)
                                e1.record()
                                e1.synchronize()
                                ts.append(e0.elapsed_time(e1) * 1e3)
                    except RuntimeError as ex:
                        print(f"d={d} batch={b} ctx={n}: {args.backend} failed: {str(ex).splitlines()[0]}")
                        continue
                    med = statistics.median(ts)
                    nbytes = 2 * b * args.kv_heads * n * d * 2 + 2 * b * args.heads * d * 2
                    gbps = nbytes / (med * 1e-6) / 1e9
                    rows.append((name, "sdpa-" + args.backend + "-bf16", d, b, n, med, min(ts), nbytes, gbps, timing))
                    print(f"sdpa-{args.backend}-bf16 d={d:4d} batch={b} ctx={n:7d} {med:9.2f} us (min {min(ts):.2f}) "
                          f"{gbps:7.0f} GB/s {timing}", flush=True)
                del q, k, v
                torch.cuda.empty_cache()
    if args.csv:
        with open(args.csv, "w") as f:
            f.write("device,scheme,head_dim,batch,ctx,us_median,us_min,bytes,gbps,timing\n")
            for r in rows:
                f.write(",".join(str(x) if not isinstance(x, float) else f"{x:.3f}" for x in r) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
