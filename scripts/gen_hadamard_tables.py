#!/usr/bin/env python3
"""gen_hadamard_tables.py -- generate src/common/hadamard_tables.c: the K x K Hadamard matrices
H_K (entries +-1, H_K H_K^T = K I) that src/common/hadamard.c combines with a power-of-two
Walsh-Hadamard transform into H_K (x) H_{2^m} for n = K * 2^m.

Usage:  python3 scripts/gen_hadamard_tables.py [OUT]     (default: src/common/hadamard_tables.c)

Constructions (written from the published definitions; no table copied from another project):
  Sylvester  J. J. Sylvester, "Thoughts on inverse orthogonal matrices, simultaneous sign
             successions, and tessellated pavements in two or more colours", Phil. Mag. 34
             (1867) 461-475: H_2 = [[1, 1], [1, -1]], H_2A = H_2 (x) H_A (Kronecker product).
  Paley I    R. E. A. C. Paley, "On orthogonal matrices", J. Math. Phys. 12 (1933) 311-320:
             q a prime power, q = 3 mod 4, order q + 1. chi = quadratic character of GF(q),
             Q[i][j] = chi(e_i - e_j) (Jacobsthal matrix, skew for q = 3 mod 4),
             S = [[0, 1^T], [-1, Q]], H = I + S.
  Paley II   same paper: q a prime power, q = 1 mod 4, order 2(q + 1). C = [[0, 1^T], [1, Q]]
             (symmetric conference matrix); every 0 of C becomes [[1, -1], [-1, -1]] and every
             +-1 becomes +-[[1, 1], [1, -1]].
  GF(p^k)    element e_i for i = c_0 + c_1 p + ... + c_{k-1} p^{k-1} is the polynomial
             c_0 + c_1 x + ... over GF(p) modulo a fixed irreducible polynomial (below); only
             subtraction and squaring are used (chi(a) = 1 iff a is a nonzero square).
The script checks H H^T = K I in integers for every matrix and that each polynomial is
irreducible (no zero divisors), then writes each row LSB-first as bits (bit t set = -1).
"""
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

# q -> (p, k, modulus): x^k = sum(modulus[i] x^i) in GF(p^k); prime fields have k = 1.
FIELDS = {25: (5, 2, [2, 0]),   # x^2 = 2 (2 is not a square mod 5)
          49: (7, 2, [3, 0])}   # x^2 = 3 (3 is not a square mod 7)


def field(q):
    if q in FIELDS:
        p, k, mod = FIELDS[q]
    else:
        assert all(q % d for d in range(2, int(q ** 0.5) + 1)), q
        p, k, mod = q, 1, None

    def digits(a):
        return [(a // p ** i) % p for i in range(k)]

    def number(d):
        return sum(c * p ** i for i, c in enumerate(d))

    def sub(a, b):
        return number([(x - y) % p for x, y in zip(digits(a), digits(b))])

    def mul(a, b):
        if k == 1:
            return a * b % p
        prod = [0] * (2 * k - 1)
        for i, x in enumerate(digits(a)):
            for j, y in enumerate(digits(b)):
                prod[i + j] = (prod[i + j] + x * y) % p
        for d in range(2 * k - 2, k - 1, -1):  # reduce x^d = x^(d-k) * sum(mod[i] x^i)
            c, prod[d] = prod[d], 0
            for i, m in enumerate(mod):
                prod[d - k + i] = (prod[d - k + i] + c * m) % p
        return number(prod[:k])

    for a in range(1, q):  # a field: no zero divisors (so the modulus is irreducible)
        assert all(mul(a, b) for b in range(1, q)), (q, a)
    squares = {mul(a, a) for a in range(1, q)}
    assert len(squares) == (q - 1) // 2
    return sub, (lambda a: 0 if a == 0 else (1 if a in squares else -1))


def jacobsthal(q):
    sub, chi = field(q)
    return [[chi(sub(i, j)) for j in range(q)] for i in range(q)]


def paley1(q):
    assert q % 4 == 3
    Q = jacobsthal(q)
    n = q + 1
    S = [[0] * n for _ in range(n)]
    for j in range(1, n):
        S[0][j] = 1
        S[j][0] = -1
    for i in range(q):
        for j in range(q):
            S[i + 1][j + 1] = Q[i][j]
    return [[S[i][j] + (1 if i == j else 0) for j in range(n)] for i in range(n)]


def paley2(q):
    assert q % 4 == 1
    Q = jacobsthal(q)
    m = q + 1
    C = [[0] * m for _ in range(m)]
    for j in range(1, m):
        C[0][j] = C[j][0] = 1
    for i in range(q):
        for j in range(q):
            C[i + 1][j + 1] = Q[i][j]
    zero = [[1, -1], [-1, -1]]
    one = [[1, 1], [1, -1]]
    return [[(zero[r][c] if C[a][b] == 0 else C[a][b] * one[r][c])
             for b in range(m) for c in range(2)] for a in range(m) for r in range(2)]


def kron2(H):
    n = len(H)
    return [[H[i % n][j % n] * (-1 if (i >= n and j >= n) else 1) for j in range(2 * n)]
            for i in range(2 * n)]


# K -> (construction, description). Odd parts 23 (92), 29 (116), 39 (156), 43 (172) need
# Williamson-type matrices and are not in the table.
TABLE = [
    (12, lambda: paley1(11), "Paley I, q = 11"),
    (20, lambda: paley1(19), "Paley I, q = 19"),
    (28, lambda: paley2(13), "Paley II, q = 13"),
    (36, lambda: paley2(17), "Paley II, q = 17"),
    (40, lambda: kron2(paley1(19)), "Sylvester H_2 (x) H_20 (Paley I, q = 19)"),
    (44, lambda: paley1(43), "Paley I, q = 43"),
    (52, lambda: paley2(25), "Paley II, q = 25 = 5^2 (GF(25), x^2 = 2)"),
    (60, lambda: paley1(59), "Paley I, q = 59"),
    (68, lambda: paley1(67), "Paley I, q = 67"),
    (76, lambda: paley2(37), "Paley II, q = 37"),
    (84, lambda: paley1(83), "Paley I, q = 83"),
    (100, lambda: paley2(49), "Paley II, q = 49 = 7^2 (GF(49), x^2 = 3)"),
    (108, lambda: paley1(107), "Paley I, q = 107"),
    (124, lambda: paley2(61), "Paley II, q = 61"),
    (132, lambda: paley1(131), "Paley I, q = 131"),
    (140, lambda: paley1(139), "Paley I, q = 139"),
    (148, lambda: paley2(73), "Paley II, q = 73"),
    (164, lambda: paley1(163), "Paley I, q = 163"),
]


def check(H, K):
    assert len(H) == K and all(len(r) == K and all(v in (1, -1) for v in r) for r in H)
    for i in range(K):
        for j in range(K):
            assert sum(H[i][t] * H[j][t] for t in range(K)) == (K if i == j else 0), (K, i, j)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "src/common/hadamard_tables.c")
    lines = ["/* hadamard_tables.c -- GENERATED by scripts/gen_hadamard_tables.py; do not edit.",
             " * The K x K Hadamard matrices of src/common/hadamard.c (constructions and their",
             " * provenance: the script's docstring and hadamard.h). Row j of H_K is K bits,",
             " * LSB-first in ceil(K/8) bytes: bit t set means H_K[j][t] = -1, clear means +1. */",
             '#include "common/hadamard.h"', ""]
    rows = []
    for K, make, desc in TABLE:
        H = make()
        check(H, K)
        nb = (K + 7) // 8
        data = []
        for r in H:
            for b in range(nb):
                data.append(sum(1 << t for t in range(8) if 8 * b + t < K and r[8 * b + t] < 0))
        lines.append("static const uint8_t h%d[%d] = { /* %s */" % (K, K * nb, desc))
        for i in range(0, len(data), 16):
            lines.append("    " + " ".join("0x%02x," % v for v in data[i:i + 16]))
        lines.append("};")
        rows.append('    { %d, %d, h%d, "%s" },' % (K, nb, K, desc))
    lines.append("")
    lines.append("const tq_hadamard_base tq_hadamard_bases[] = {")
    lines.append('    { 1, 1, NULL, "Sylvester (Walsh-Hadamard, natural order)" },')
    lines += rows
    lines.append("};")
    lines.append("const int tq_hadamard_n_bases = (int)(sizeof(tq_hadamard_bases) / "
                 "sizeof(tq_hadamard_bases[0]));")
    with open(out, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote %s (%d matrices)" % (out, len(TABLE)))


if __name__ == "__main__":
    main()
