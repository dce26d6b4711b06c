#!/usr/bin/env python3
"""Check safetensors files written by our C writer with the reference `safetensors` package.

DIR holds what `TQ_IO_KEEP=DIR test_io_st_write` left: single.safetensors, sharded/ (shards +
model.safetensors.index.json) and expected.json (names, dtypes, shapes, sha256 of the bytes the C
test passed in, metadata). Every tensor must load with identical bytes, dtype and shape, and
metadata must be equal; exits 1 with a message otherwise. Run by ctest test_io_st_python (slow).
"""
import glob
import hashlib
import json
import os
import sys

import numpy as np
from safetensors import safe_open
from safetensors.numpy import load_file

NP = {"F32": np.float32, "F16": np.float16, "I8": np.int8, "U8": np.uint8, "I32": np.int32,
      "U32": np.uint32, "F64": np.float64, "BOOL": np.bool_, "I16": np.int16, "U16": np.uint16,
      "I64": np.int64, "U64": np.uint64}


def check(cond, msg):
    if not cond:
        print("FAIL:", msg)
        sys.exit(1)


def main(d):
    exp = json.load(open(os.path.join(d, "expected.json")))
    want = {t["name"]: t for t in exp["tensors"]}
    for case, files in (("single", [os.path.join(d, "single.safetensors")]),
                        ("sharded", sorted(glob.glob(os.path.join(d, "sharded", "*.safetensors"))))):
        seen = {}
        for f in files:
            with open(f, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
            check(n % 8 == 0, f"{f}: header length {n} not a multiple of 8")
            with safe_open(f, framework="numpy") as sf:
                check(sf.metadata() == exp["metadata"], f"{f}: metadata {sf.metadata()}")
                for name in sf.keys():
                    sl = sf.get_slice(name)
                    check(sl.get_dtype() == want[name]["dtype"], f"{f}:{name} dtype {sl.get_dtype()}")
                    check(list(sl.get_shape()) == want[name]["shape"], f"{f}:{name} shape")
                    seen[name] = f
            arrays = load_file(f) if all(want[k]["dtype"] != "BF16" for k in seen if seen[k] == f) else None
            # bytes: read through safe_open (numpy has no bf16: compare BF16 as raw u16 from the file)
            with safe_open(f, framework="numpy") as sf:
                for name in sf.keys():
                    if want[name]["dtype"] == "BF16":
                        continue
                    a = sf.get_tensor(name)
                    check(a.dtype == NP[want[name]["dtype"]], f"{f}:{name} numpy dtype {a.dtype}")
                    h = hashlib.sha256(np.ascontiguousarray(a).tobytes()).hexdigest()
                    check(h == want[name]["sha256"], f"{f}:{name} bytes differ")
                    if arrays is not None:
                        check(np.array_equal(arrays[name], a, equal_nan=a.dtype.kind == "f"), f"{name} load_file")
        # BF16: numpy cannot hold it; the torch-free check is the header entry + raw byte range
        for name, t in want.items():
            if t["dtype"] != "BF16":
                continue
            f = seen[name]
            with open(f, "rb") as fh:
                n = int.from_bytes(fh.read(8), "little")
                hdr = json.loads(fh.read(n))
                b, e = hdr[name]["data_offsets"]
                fh.seek(8 + n + b)
                raw = fh.read(e - b)
            check(hashlib.sha256(raw).hexdigest() == t["sha256"], f"{f}:{name} bf16 bytes differ")
        check(set(seen) == set(want), f"{case}: tensors {sorted(set(want) ^ set(seen))} differ")
        if case == "sharded":
            idx = json.load(open(os.path.join(d, "sharded", "model.safetensors.index.json")))
            check({k: os.path.join(d, "sharded", v) for k, v in idx["weight_map"].items()} == seen,
                  "index weight_map does not match the shards")
            total = sum(os.path.getsize(f) for f in files)
            check(int(idx["metadata"]["total_size"]) <= total, "total_size")
        print(f"{case}: {len(seen)} tensors in {len(files)} file(s) match (bytes, dtype, shape, metadata)")
    print("OK")


if __name__ == "__main__":
    main(sys.argv[1])
