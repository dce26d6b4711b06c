#!/usr/bin/env python3
"""gen_kv_goldens.py -- golden files for the TurboQuant KV codec, produced by the reference itself.

Runs vllm-metal's `vllm_metal/attention/caches/turboquant.py` ("PY", SPEC A1) under MLX's CPU
backend (`pip install "mlx[cpu]"`) and writes tests/data/kv_goldens/kv_d{64,128,256,512}.bin plus
MANIFEST.txt (the layout is in tests/data/kv_goldens/README.md).

The reference source is read at generation time from a git checkout or bare mirror of
vllm-project/vllm-metal and is never stored in this repository:

    python3 scripts/kv_goldens/gen_kv_goldens.py --repo /path/to/vllm-metal[.git] [--rev HEAD]
    python3 scripts/kv_goldens/gen_kv_goldens.py --ref-file turboquant.py --ref-commit <sha>

What the generator does to the reference module, and nothing else:
  * `from vllm.logger import init_logger` is satisfied by a stub module (stdlib logging);
  * the 2/4/5/8-bit Lloyd-Max tables are put into the module's own cache `_LLOYD_MAX_CACHE`
    from ../shared/reference/turboquant-constants.json (next to the repository; --constants
    or $TQ_CONSTANTS give another) (the fixed tables SPEC A1 pins; the
    reference would otherwise re-derive them with MLX on this CPU, which differs by ulps from the
    Apple-GPU capture). The 3-bit table is the reference's own hardcoded one (checked equal to
    the JSON).
Everything else (rotation, sign vector, RMS scale, searchsorted, affine key math, packing,
decode) is the reference's code running on MLX CPU.

Cross-checks done here (the run fails if one does not hold):
  * the reference's sign vector equals the JSON sign tables; its 3-bit tables equal the JSON;
  * K results are identical for every V width and V results for every K type (so storing K per
    (d, k) and V per (d, v) covers every scheme combination), and aliases (int8 = q8_0, int4 =
    uint4 = q4_0, uint2 = int2) give identical bytes;
  * unpack(packed) == indices for every config (the reference's own unpack);
  * MLX CPU sums the 32 squares of a group sequentially left to right (checked against a
    numpy sequential fp32 sum of the very values MLX squared): expected and required.
Known MLX-CPU vs spec difference, measured and recorded per group (not an error):
  * `x**2` is `std::pow(x, 2.0f)` on MLX CPU, which is NOT always equal to fp32 `x*x` (about
    5 in 10^4 random floats differ by 1 ulp, e.g. exact half-way cases such as (1+2^-12)^2).
    SPEC A1 assumes x*x (Metal `pow(x,2)` under safe math is expected to be exact; RISK-1).
    For every V group the generator also evaluates the spec's x*x variant (numpy, sequential
    fp32) and stores its fp16 scale and indices plus flag bits saying whether pow vs x*x
    changed the fp32 scale, the fp16 scale or an index; the C test allows a difference only
    there, and lists each such case.
  * A K index whose pre-cast value is NaN (rows with NaN/inf) comes from a float->int cast that
    is undefined behaviour in the reference's C++ (MLX CPU on x86 yields 0); flagged per group.
"""

import argparse
import hashlib
import json
import logging
import os
import platform
import struct
import subprocess
import sys
import types

import numpy as np

HEAD_DIMS = (64, 128, 256, 512)
# K types: (name in QUANT_PARAMS, bits, signed). Aliases are checked for identical output.
K_TYPES = (("q8_0", 8, 1), ("uint8", 8, 0), ("q5_0", 5, 0), ("q4_0", 4, 0), ("int2", 2, 0))
K_ALIASES = {"q8_0": ("int8",), "q4_0": ("int4", "uint4"), "int2": ("uint2",)}
V_BITS = (2, 3, 4, 5, 8)
GROUP = 32
MAGIC = b"TQKVGOLD"
VERSION = 1
HEADER_BYTES = 96

# Row kinds (ids are part of the file format; the C test prints the names).
ROW_KINDS = [
    "gaussian",          # 0  N(0,1), seed per head_dim
    "gaussian_small",    # 1  N(0, 0.02^2), like real K/V activations
    "gaussian_offset",   # 2  N(3, 1): all-positive groups (zero point far from 0)
    "heavy_tailed_t2",   # 3  Student-t, 2 degrees of freedom
    "heavy_tailed_cauchy",  # 4 Cauchy (t, 1 dof)
    "outlier_channel",   # 5  N(0,1) with one element = 1000
    "outlier_channel_neg",  # 6 N(0,1)*0.1 with one element = -1000 in the last group
    "all_zero",          # 7  +0.0 everywhere
    "constant_0.5",      # 8  0.5 everywhere
    "tiny_1e-30",        # 9  N(0,1) * 1e-30
    "huge_1e30",         # 10 N(0,1) * 1e30
    "subnormal",         # 11 N(0,1) * 1e-40 (fp32 subnormals)
    "inf",               # 12 N(0,1) with +inf in group 0 and -inf in the last group
    "nan",               # 13 N(0,1) with one NaN in the last group
    "mixed_groups",      # 14 group g cycles: -0.0, const -3, N*1e-3, N*1e3, const 1e-5, N
    "group_scales",      # 15 N(0,1) * 10^U(-6,6) per group
    "fp32_extreme",      # 16 U(-3.4e38, 3.4e38): max - min and the rotation overflow to inf
    "gaussian_bf16",     # 17 N(0,1) rounded to bf16 values (real activations upcast)
    # 18-22: every group is min 0, max M, and the other 30 elements are inputs whose pre-rint
    # key value x/se - zero is EXACTLY a half-integer for that K type (round half to even).
    "k_ties_q8_0", "k_ties_uint8", "k_ties_q5_0", "k_ties_q4_0", "k_ties_int2",
    # 23-27: element 5 of group 0 has a normalised value z EXACTLY equal to a boundary of that V
    # codebook (ties go to the lower bin); for 3 bits it is +1.74793, the hardcoded boundary that
    # differs by 1 ulp from the centroid midpoint the Metal kernel uses.
    "v_tie_2", "v_tie_3", "v_tie_4", "v_tie_5", "v_tie_8",
]
V_TIE_BOUNDARY = {2: 2, 3: 6, 4: 11, 5: 23, 8: 191}  # which boundary index the tie row targets
V_TIE_ELEM = 5


def k_tie_row(d, bits, signed, rng):
    """Groups [0, M, x2..x31] where every x_j / se - zero is exactly a half-integer (numpy fp32,
    the spec's operation order; the generator later counts the ties in the reference's run)."""
    eps = np.float32(1e-8)
    r = np.empty(d, np.float32)
    for g0 in range(0, d, GROUP):
        M = np.float32(rng.uniform(0.5, 4.0))
        if signed:
            se = np.float32(np.float32(M / np.float32(254.0)) + eps)
            zero = np.float32(np.rint(np.float32(M / np.float32(np.float32(2.0) * se))))
            lo, hi = -127, 126
        else:
            maxv = (1 << bits) - 1
            se = np.float32(np.float32(M / np.float32(maxv)) + eps)
            zero = np.float32(0.0)
            lo, hi = 0, maxv - 1
        r[g0] = 0.0
        r[g0 + 1] = M
        j = 2
        while j < GROUP:
            t = np.float32(rng.integers(lo, hi + 1) + 0.5)
            x0 = np.float32((t + zero) * se)
            found = False
            for x in (x0, np.nextafter(x0, np.float32(-1)), np.nextafter(x0, np.float32(10))):
                pre = np.float32(np.float32(x / se) - zero)
                if pre == t and np.float32(0) <= x <= M:
                    r[g0 + j] = x
                    found = True
                    break
            if found:
                j += 1
    return r


def v_tie_row(mod, mx, d, bits, rng):
    """A row whose element V_TIE_ELEM has z == B[V_TIE_BOUNDARY[bits]] exactly under the
    reference's own rotation and RMS (searched by nudging the input)."""
    _, bnd = mod.lloyd_max_centroids(bits)
    bt = np.float32(np.array(bnd)[V_TIE_BOUNDARY[bits]])
    k = V_TIE_ELEM
    sg = np.array(1 - 2 * mx.random.randint(0, 2, shape=(d,), key=mod._RNG_KEY)).astype(np.float32)
    hk = np.array([1.0 - 2.0 * (bin(k & i).count("1") & 1) for i in range(d)], np.float32)
    dirv = (sg * hk).astype(np.float32)  # d(y_k)/d(x) direction

    def zk(x):
        y = mod.fwht(mx.array(x[None]), True).reshape(1, -1, GROUP)
        sc = mx.sqrt(mx.mean(y ** 2, axis=-1, keepdims=True))
        return np.float32(np.array(y / (sc + 1e-8)).reshape(-1)[k])

    for attempt in range(20):
        x = rng.standard_normal(d).astype(np.float32)
        for _ in range(20000):
            z = zk(x)
            if z == bt:
                return x
            diff = float(bt) - float(z)
            if abs(diff) > 1e-5:
                x = (x + np.float32(diff * 0.05) * dirv).astype(np.float32)
            else:
                i = int(rng.integers(0, d))
                up = diff * dirv[i] > 0
                x[i] = np.nextafter(x[i], np.float32(np.inf if up else -np.inf))
    raise RuntimeError("no V tie found for d=%d bits=%d" % (d, bits))


def make_rows(d, rng, mod, mx):
    g = d // GROUP
    rows = []
    n = lambda: rng.standard_normal(d).astype(np.float32)
    rows.append(n())
    rows.append((n() * np.float32(0.02)).astype(np.float32))
    rows.append((n() + np.float32(3.0)).astype(np.float32))
    rows.append(rng.standard_t(2.0, d).astype(np.float32))
    rows.append(rng.standard_cauchy(d).astype(np.float32))
    r = n()
    r[int(rng.integers(0, d))] = 1000.0
    rows.append(r)
    r = (n() * np.float32(0.1)).astype(np.float32)
    r[d - GROUP + int(rng.integers(0, GROUP))] = -1000.0
    rows.append(r)
    rows.append(np.zeros(d, np.float32))
    rows.append(np.full(d, 0.5, np.float32))
    rows.append((n() * np.float32(1e-30)).astype(np.float32))
    rows.append((n() * np.float32(1e30)).astype(np.float32))
    rows.append((n() * np.float32(1e-40)).astype(np.float32))
    r = n()
    r[int(rng.integers(0, GROUP))] = np.inf
    r[d - GROUP + int(rng.integers(0, GROUP))] = -np.inf
    rows.append(r)
    r = n()
    r[d - GROUP + int(rng.integers(0, GROUP))] = np.nan
    rows.append(r)
    r = np.empty(d, np.float32)
    for gi in range(g):
        s = slice(gi * GROUP, (gi + 1) * GROUP)
        kind = gi % 6
        if kind == 0:
            r[s] = -0.0
        elif kind == 1:
            r[s] = -3.0
        elif kind == 2:
            r[s] = rng.standard_normal(GROUP) * 1e-3
        elif kind == 3:
            r[s] = rng.standard_normal(GROUP) * 1e3
        elif kind == 4:
            r[s] = 1e-5
        else:
            r[s] = rng.standard_normal(GROUP)
    rows.append(r.astype(np.float32))
    sc = (10.0 ** rng.uniform(-6, 6, g)).astype(np.float32)
    rows.append((n().reshape(g, GROUP) * sc[:, None]).astype(np.float32).reshape(d))
    rows.append(rng.uniform(-3.4e38, 3.4e38, d).astype(np.float32))
    b = n().view(np.uint32)
    b = ((b + np.uint32(0x7FFF) + ((b >> np.uint32(16)) & np.uint32(1))) & np.uint32(0xFFFF0000))
    rows.append(b.view(np.float32))
    for _, kb, ks in K_TYPES:
        rows.append(k_tie_row(d, kb, ks, rng))
    for vb in V_BITS:
        rows.append(v_tie_row(mod, mx, d, vb, rng))
    assert len(rows) == len(ROW_KINDS)
    return np.stack(rows).astype(np.float32)


def git(gitdir, *args, quiet=False):
    return subprocess.check_output(["git", "--git-dir", gitdir] + list(args),
                                   stderr=subprocess.DEVNULL if quiet else None).decode()


def resolve_gitdir(repo):
    for cand in (os.path.join(repo, ".git"), repo):
        try:
            git(cand, "rev-parse", "HEAD", quiet=True)
            return cand
        except (subprocess.CalledProcessError, FileNotFoundError):
            pass
    sys.exit(f"--repo {repo}: not a git checkout or bare repository")


REF_PATH = "vllm_metal/attention/caches/turboquant.py"


def load_reference(args):
    """Return (module, provenance dict). The source is executed as-is with a stub vllm.logger."""
    if args.repo:
        gd = resolve_gitdir(args.repo)
        commit = git(gd, "rev-parse", args.rev).strip()
        src = git(gd, "show", f"{commit}:{REF_PATH}")
        last = git(gd, "log", "-1", "--format=%H %cI", commit, "--", REF_PATH).strip()
    else:
        with open(args.ref_file) as f:
            src = f.read()
        commit = args.ref_commit or "unknown"
        last = "unknown"
    logger_mod = types.ModuleType("vllm.logger")
    logger_mod.init_logger = logging.getLogger
    vllm_mod = types.ModuleType("vllm")
    vllm_mod.logger = logger_mod
    sys.modules.setdefault("vllm", vllm_mod)
    sys.modules.setdefault("vllm.logger", logger_mod)
    mod = types.ModuleType("tq_reference_turboquant")
    mod.__file__ = REF_PATH
    exec(compile(src, REF_PATH, "exec"), mod.__dict__)
    prov = {
        "commit": commit,
        "last_change": last,
        "sha256": hashlib.sha256(src.encode()).hexdigest(),
        "lines": src.count("\n"),
    }
    return mod, prov


def f32_list_bits(a):
    return np.asarray(a, dtype=np.float32).view(np.uint32)


def inject_tables(mod, mx, consts):
    lm = consts["lloyd_max"]
    c3, b3 = mod.lloyd_max_centroids(3)
    assert np.array_equal(f32_list_bits(np.array(c3)), f32_list_bits(lm["3"]["centroids"])), "3-bit C"
    assert np.array_equal(f32_list_bits(np.array(b3)), f32_list_bits(lm["3"]["boundaries"])), "3-bit B"
    for b in (2, 4, 5, 8):
        c = np.array(lm[str(b)]["centroids"], dtype=np.float32)
        bb = np.array(lm[str(b)]["boundaries"], dtype=np.float32)
        assert c.size == 1 << b and bb.size == (1 << b) - 1
        mod._LLOYD_MAX_CACHE[b] = (mx.array(c), mx.array(bb))
    for b in V_BITS:
        c, bb = mod.lloyd_max_centroids(b)
        assert np.array_equal(f32_list_bits(np.array(c)), f32_list_bits(lm[str(b)]["centroids"]))
        assert np.array_equal(f32_list_bits(np.array(bb)), f32_list_bits(lm[str(b)]["boundaries"]))


def same_bits(a, b):
    a = np.asarray(a)
    b = np.asarray(b)
    return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def seq_sum_f32(v):
    """Sequential fp32 sum over the last axis, left to right from 0 (the spec's order)."""
    acc = np.zeros(v.shape[:-1], np.float32)
    for k in range(v.shape[-1]):
        acc = (v[..., k] + acc).astype(np.float32)
    return acc


def k_nan_cast_flags(x, bits, signed):
    """Per group: 1 if an index's pre-cast value is NaN (float->int cast of NaN is UB in the
    reference's C++). Independent numpy fp32 evaluation of the pre-cast value."""
    with np.errstate(all="ignore"):
        xg = x.reshape(x.shape[0], -1, GROUP)
        mn = xg.min(axis=-1, keepdims=True)  # numpy min propagates NaN like MLX CPU
        mxv = xg.max(axis=-1, keepdims=True)
        eps = np.float32(1e-8)
        if signed:
            scale = ((mxv - mn) / np.float32(254.0)).astype(np.float32)
            se = (scale + eps).astype(np.float32)
            zero = np.rint((mxv + mn) / (np.float32(2.0) * se)).astype(np.float32)
        else:
            scale = ((mxv - mn) / np.float32((1 << bits) - 1)).astype(np.float32)
            se = (scale + eps).astype(np.float32)
            zero = np.rint(mn / se).astype(np.float32)
        pre = (xg / se - zero).astype(np.float32)
        q = np.rint(pre).astype(np.float32)
        ties = int((np.abs(pre - np.floor(pre)) == np.float32(0.5)).sum())
    return np.isnan(q).any(axis=-1).astype(np.uint8), ties


def count_v_ties(mod, mx, x, bits):
    """Normalised values z (the reference's own expression) exactly equal to a boundary."""
    y = mod.fwht(mx.array(x), True).reshape(x.shape[0], -1, GROUP)
    sc = mx.sqrt(mx.mean(y ** 2, axis=-1, keepdims=True))
    z = np.array(y / (sc + 1e-8)).reshape(-1)
    _, bnd = mod.lloyd_max_centroids(bits)
    return int(np.isin(z, np.array(bnd)).sum())


def v_alt_and_flags(mod, mx, x, bits, ref_scale_h, ref_idx):
    """Evaluate the spec's x*x variant of lm_quant on the reference's own rotated values and
    compare with the reference (MLX CPU pow). Returns (flags[n,G], alt_scale_h, alt_idx)."""
    n, d = x.shape
    y_mx = mod.fwht(mx.array(x), True)  # the reference's rotation
    y = np.array(y_mx).astype(np.float32).reshape(n, -1, GROUP)
    sq_pow = np.array(y_mx.reshape(n, -1, GROUP) ** 2).astype(np.float32)  # what PY squares
    with np.errstate(all="ignore"):
        sq_mul = (y * y).astype(np.float32)
        ss_pow = seq_sum_f32(sq_pow)
        ss_mul = seq_sum_f32(sq_mul)
        inv32 = np.float32(1.0 / 32.0)
        scale_pow = np.sqrt((ss_pow * inv32).astype(np.float32)).astype(np.float32)
        scale_mul = np.sqrt((ss_mul * inv32).astype(np.float32)).astype(np.float32)
        # The reference's own fp32 scale (before the fp16 cast), by its own expression.
        ref_scale32 = np.array(mx.sqrt(mx.mean(y_mx.reshape(n, -1, GROUP) ** 2, axis=-1)))
        _, bnd = mod.lloyd_max_centroids(bits)
        bnd = np.array(bnd).astype(np.float32)
        z_mul = (y / (scale_mul[..., None] + np.float32(1e-8))).astype(np.float32)
        idx_mul = (z_mul[..., None] > bnd).sum(-1).astype(np.uint8)
        # Check the independent model against the reference (pow) path: must agree exactly.
        z_pow = (y / (scale_pow[..., None] + np.float32(1e-8))).astype(np.float32)
        idx_pow = (z_pow[..., None] > bnd).sum(-1).astype(np.uint8)
    sum_order = (ref_scale32.view(np.uint32) != scale_pow.view(np.uint32)) & ~(
        np.isnan(ref_scale32) & np.isnan(scale_pow))
    assert not sum_order.any(), "MLX CPU sum order differs from sequential: %d groups" % sum_order.sum()
    assert np.array_equal(idx_pow.reshape(n, d), ref_idx), "numpy model of lm_quant != reference"
    with np.errstate(all="ignore"):
        alt_scale_h = scale_mul.astype(np.float16).view(np.uint16)
    flags = np.zeros((n, d // GROUP), np.uint8)
    flags |= (sq_pow.view(np.uint32) != sq_mul.view(np.uint32)).any(-1).astype(np.uint8) * 1
    flags |= ((scale_pow.view(np.uint32) != scale_mul.view(np.uint32))
              & ~(np.isnan(scale_pow) & np.isnan(scale_mul))).astype(np.uint8) * 2
    ref_h = ref_scale_h.reshape(n, -1)
    hdiff = (ref_h != alt_scale_h) & ~(((ref_h & 0x7C00) == 0x7C00) & ((ref_h & 0x3FF) != 0)
                                       & ((alt_scale_h & 0x7C00) == 0x7C00)
                                       & ((alt_scale_h & 0x3FF) != 0))
    flags |= hdiff.astype(np.uint8) * 4
    flags |= (idx_mul != ref_idx.reshape(n, -1, GROUP)).any(-1).astype(np.uint8) * 8
    # Count for the manifest: elements where pow != mul.
    npow = int((sq_pow.view(np.uint32) != sq_mul.view(np.uint32)).sum())
    return flags, alt_scale_h, idx_mul.reshape(n, d), npow


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--repo", help="git checkout or bare mirror of vllm-project/vllm-metal")
    src.add_argument("--ref-file", help="a copy of vllm_metal/attention/caches/turboquant.py")
    ap.add_argument("--rev", default="HEAD", help="revision of --repo (default HEAD)")
    ap.add_argument("--ref-commit", help="commit the --ref-file came from (recorded)")
    ap.add_argument("--constants", default=os.environ.get("TQ_CONSTANTS", os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "shared", "reference",
        "turboquant-constants.json")),
        help="the pinned tables (default: ../shared/reference/turboquant-constants.json next to "
             "the repository, or $TQ_CONSTANTS)")
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                   "..", "..", "tests", "data", "kv_goldens"))
    args = ap.parse_args()
    if not os.path.isfile(args.constants):
        sys.exit(f"gen_kv_goldens.py: {os.path.normpath(args.constants)} is missing; it comes "
                 "from the shared folder, ../shared next to the repository (give the file with "
                 "--constants or $TQ_CONSTANTS)")

    import mlx.core as mx
    mx.set_default_device(mx.cpu)
    mod, prov = load_reference(args)
    with open(args.constants) as f:
        consts = json.load(f)
    inject_tables(mod, mx, consts)
    os.makedirs(args.out, exist_ok=True)

    manifest = []
    manifest.append("reference: vllm-project/vllm-metal %s @ %s" % (REF_PATH, prov["commit"]))
    manifest.append("reference last change: %s; sha256 %s" % (prov["last_change"], prov["sha256"]))
    manifest.append("mlx %s (device %s), numpy %s, python %s, %s" % (
        mx.__version__, mx.default_device(), np.__version__, platform.python_version(),
        platform.machine()))
    manifest.append("tables: 3-bit from the reference; 2/4/5/8-bit injected from %s" %
                    os.path.basename(args.constants))
    totals = {"v_groups": 0, "pow_elems": 0, "flag2": 0, "flag4": 0, "flag8": 0, "k_nan": 0,
              "k_ties": 0, "v_ties": 0}

    for d in HEAD_DIMS:
        signs = np.array(1 - 2 * mx.random.randint(0, 2, shape=(d,), key=mod._RNG_KEY))
        assert np.array_equal(signs, np.array(consts["sign_vectors"][str(d)])), "signs d=%d" % d
        rng = np.random.default_rng(20260000 + d)
        x = make_rows(d, rng, mod, mx)
        n = x.shape[0]
        G = d // GROUP
        X = mx.array(x)
        ksec = {}
        vsec = {}
        for kq, kb, ks in K_TYPES:
            for vb in V_BITS:
                (kp, ksc, kz), (vp, vsc) = mod.turbo_quant_encode(X, X, key_quant=kq, value_bits=vb)
                kd, vd = mod.turbo_quant_decode((kp, ksc, kz), (vp, vsc), output_dtype=mx.float32,
                                                key_quant_type=kq, value_bits=vb)
                kres = [np.array(a) for a in (kp, ksc, kz, kd)]
                vres = [np.array(a) for a in (vp, vsc, vd)]
                if kq in ksec:
                    assert all(same_bits(a, b) for a, b in zip(ksec[kq], kres)), (d, kq, vb)
                else:
                    ksec[kq] = kres
                if vb in vsec:
                    assert all(same_bits(a, b) for a, b in zip(vsec[vb], vres)), (d, kq, vb)
                else:
                    vsec[vb] = vres
            for alias in K_ALIASES.get(kq, ()):
                (kp, ksc, kz), _ = mod.turbo_quant_encode(X, X, key_quant=alias, value_bits=3)
                assert all(same_bits(np.array(a), b) for a, b in zip((kp, ksc, kz), ksec[kq])), alias

        out = bytearray()
        hdr = bytearray(HEADER_BYTES)
        struct.pack_into("<8sIIIIII", hdr, 0, MAGIC, VERSION, d, n, G, len(K_TYPES), len(V_BITS))
        c = prov["commit"].encode()[:40]
        hdr[32:32 + len(c)] = c
        out += hdr
        out += np.array([i for i in range(n)], np.uint32).tobytes()
        out += x.astype("<f4").tobytes()
        for kq, kb, ks in K_TYPES:
            idx, _, _ = mod.turbo_quant_encode_key(X, kq)
            idx = np.array(idx)
            kp, ksc, kz, kd = ksec[kq]
            assert idx.dtype == (np.int8 if ks else np.uint8)
            unp = np.array(mod.unpack_bits(mx.array(kp).astype(mx.uint8), kb, d)) if kb < 8 else kp
            assert np.array_equal(unp.view(np.uint8), idx.view(np.uint8)), (d, kq)
            assert kp.shape == (n, d * kb // 8) and ksc.dtype == np.float16 and kd.dtype == np.float32
            kflags, kties = k_nan_cast_flags(x, kb, ks)
            totals["k_ties"] += kties
            totals["k_nan"] += int(kflags.sum())
            out += struct.pack("<II", kb, ks)
            out += idx.view(np.uint8).tobytes()
            out += kp.view(np.uint8).tobytes()
            out += ksc.view("<u2").tobytes()
            out += kz.view("<u2").tobytes()
            out += kflags.tobytes()
            out += kd.astype("<f4").tobytes()
        for vb in V_BITS:
            idx, _ = mod.turbo_quant_encode_value(X, bits=vb)
            idx = np.array(idx)
            vp, vsc, vd = vsec[vb]
            unp = np.array(mod.unpack_bits(mx.array(vp), vb, d)) if vb < 8 else vp
            assert np.array_equal(unp, idx), (d, vb)
            assert vp.shape == (n, d * vb // 8) and vsc.dtype == np.float16 and vd.dtype == np.float32
            flags, alt_h, alt_idx, npow = v_alt_and_flags(mod, mx, x, vb, vsc.view(np.uint16), idx)
            totals["v_ties"] += count_v_ties(mod, mx, x, vb)
            totals["v_groups"] += flags.size
            totals["pow_elems"] += npow
            for bit, key in ((2, "flag2"), (4, "flag4"), (8, "flag8")):
                totals[key] += int(((flags & bit) != 0).sum())
            for r, gi in zip(*np.nonzero(flags & 12)):
                manifest.append("  d=%d v%d row %d (%s) group %d: pow vs x*x changes %s" % (
                    d, vb, r, ROW_KINDS[r], gi,
                    "+".join(s for b, s in ((4, "fp16 scale"), (8, "indices")) if flags[r, gi] & b)))
            out += struct.pack("<II", vb, 0)
            out += idx.astype(np.uint8).tobytes()
            out += vp.view(np.uint8).tobytes()
            out += vsc.view("<u2").tobytes()
            out += flags.tobytes()
            out += alt_h.astype("<u2").tobytes()
            out += alt_idx.astype(np.uint8).tobytes()
            out += vd.astype("<f4").tobytes()
        path = os.path.join(args.out, "kv_d%d.bin" % d)
        with open(path, "wb") as f:
            f.write(out)
        manifest.append("kv_d%d.bin: %d bytes, %d rows, sha256 %s" % (
            d, len(out), n, hashlib.sha256(out).hexdigest()))
    manifest.append(
        "V groups: %(v_groups)d; squares where MLX-CPU pow(y,2) != y*y: %(pow_elems)d; groups whose "
        "fp32 scale differs: %(flag2)d, fp16 scale differs: %(flag4)d, an index differs: %(flag8)d"
        % totals)
    manifest.append("K groups with an index cast from NaN (UB in the reference): %(k_nan)d" % totals)
    manifest.append("exact ties exercised: K pre-rint values on a half-integer %(k_ties)d, "
                    "V normalised values equal to a boundary %(v_ties)d" % totals)
    with open(os.path.join(args.out, "MANIFEST.txt"), "w") as f:
        f.write("\n".join(manifest) + "\n")
    print("\n".join(manifest))


if __name__ == "__main__":
    main()
