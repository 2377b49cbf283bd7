#!/usr/bin/env python3
"""Print the sha256 of the A64 code of every primitive over a grid of parameters.

Run it before and after a change to the A64 backend that must not change the generated code,
and diff the two outputs: one line per kernel ("kind params sha256"), then a line "total"
with the hash of all lines. The grid covers every unary op (both layouts), every binary op,
BRGEMM with br_size 1, 2 and 16, sizes 1..70 (every remainder of the blockings: 16x6 GEMM
blocks, K unrolled 4x, 4-row pieces, 8-vector steps, 4x4/8-column transpose tiles, 64-row
blocks) and a few large shapes (big loop counts and immediates).

--dtype float64 hashes the FP64 kernels over the same grid (its blockings: 8x6 GEMM blocks,
2-row pieces, 2x2 transposes with 8-row steps; the sizes 1..70 cover their remainders too);
the default, float32, prints exactly what this script printed before FP64 existed.

Usage: python scripts/code_hashes_aarch64.py [--quick] [--dtype float64] > hashes.txt
"""

from __future__ import annotations

import argparse
import hashlib
import pathlib
import sys
from collections.abc import Iterator

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent.parent))

from einjit.backends import backend, resolve_target  # noqa: E402
from einjit.ops import BINARY_OPS, UNARY_OPS  # noqa: E402

SIZES = range(1, 71)
K_VALUES = (1, 2, 3, 4, 5, 7, 8, 9, 12, 70)          # straight-line K, loop with each rest
BATCHES = (1, 2, 16)
LARGE_BRGEMM = ((1024, 1024, 2048, 1024), (1024, 1, 2048, 1), (1, 1024, 1, 1024),
                (97, 203, 1531, 3))
LARGE_ELTWISE = ((2048, 2048), (2048, 1), (1, 2048), (1111, 333))


def grid(quick: bool) -> Iterator[tuple]:
    sizes = range(1, 71, 7) if quick else SIZES
    for op in UNARY_OPS:
        for trans_b in (False, True):
            for m in sizes:
                for n in sizes:
                    yield "unary", (op, m, n, trans_b)
            for m, n in LARGE_ELTWISE:
                yield "unary", (op, m, n, trans_b)
    for op in BINARY_OPS:
        for m in sizes:
            for n in sizes:
                yield "binary", (op, m, n)
        for m, n in LARGE_ELTWISE:
            yield "binary", (op, m, n)
    for br_size in BATCHES:
        for k in K_VALUES:
            for m in sizes:
                for n in sizes:
                    yield "brgemm", (m, n, k, br_size)
        for k in SIZES:                      # every K for a few block shapes
            for m, n in ((1, 1), (7, 5), (16, 6), (35, 13)):
                yield "brgemm", (m, n, k, br_size)
    for params in LARGE_BRGEMM:
        yield "brgemm", params


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="every 7th size only")
    parser.add_argument("--dtype", default="float32", choices=("float32", "float64"))
    args = parser.parse_args()
    target = resolve_target("aarch64")
    module = backend("aarch64")
    generators = {"brgemm": module.generate_brgemm, "unary": module.generate_unary,
                  "binary": module.generate_binary}
    total = hashlib.sha256()
    for kind, params in grid(args.quick):
        code = generators[kind](target, *params, dtype=args.dtype)
        line = f"{kind} {' '.join(str(p) for p in params)} {hashlib.sha256(code).hexdigest()}"
        total.update(line.encode() + b"\n")
        print(line)
    print(f"total {total.hexdigest()}")


if __name__ == "__main__":
    main()
