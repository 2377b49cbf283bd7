"""Print the sha256 of every x86-64 primitive's code over a grid of parameters, both variants.

A refactoring of the x86-64 backend that must not change the generated code is checked by
running this before and after and comparing the outputs:

    .venv/bin/python scripts/code_hashes.py > /tmp/hashes_before.txt
    ... change the backend ...
    .venv/bin/python scripts/code_hashes.py | diff /tmp/hashes_before.txt -

Each line is `kind params variant sha256`. Sizes cover 1..70 with every remainder class of
8 and 16 lanes, plus larger shapes that take the streaming paths of the element-wise kernels.
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Iterator

from einjit.backends import backend, resolve_target
from einjit.ops import BINARY_OPS, UNARY_OPS

SIZES = (1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 23, 24, 25, 31, 32, 33, 40, 47, 48, 49, 63,
         64, 65, 70)
K_VALUES = (1, 2, 5, 64)
BR_SIZES = (1, 2, 16)
# element-wise shapes past the streaming thresholds (columns: 12 MiB; transposed: 256 KiB
# with ld_b conflicts, 4 MiB always) and a few lopsided ones
LARGE_ELTWISE = ((2048, 1536), (1801, 1800), (512, 512), (1024, 1024), (300, 700), (700, 300),
                 (64, 1024), (1024, 64), (16, 2048), (2048, 16), (33, 2000))
LARGE_BRGEMM = ((128, 128, 128), (256, 64, 32), (100, 200, 3), (1024, 1024, 1), (72, 90, 17))
VARIANTS = ("avx512", "avx2")


def cases() -> Iterator[tuple[str, tuple]]:
    """(kind, generator parameters after the target) of every case of the grid."""
    shapes = [(m, n) for m in SIZES for n in SIZES]
    for op in UNARY_OPS:
        for trans_b in (False, True):
            for m, n in shapes + list(LARGE_ELTWISE):
                yield "unary", (op, m, n, trans_b)
    for op in BINARY_OPS:
        for m, n in shapes + list(LARGE_ELTWISE):
            yield "binary", (op, m, n)
    for br in BR_SIZES:
        for m, n in shapes:
            for k in K_VALUES:
                yield "brgemm", (m, n, k, br)
        for m, n, k in LARGE_BRGEMM:
            yield "brgemm", (m, n, k, br)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variants", nargs="+", default=VARIANTS, choices=VARIANTS)
    parser.add_argument("--kinds", nargs="+", default=("unary", "binary", "brgemm"))
    options = parser.parse_args(argv)
    x86 = backend("x86_64")
    generators = {"unary": x86.generate_unary, "binary": x86.generate_binary,
                  "brgemm": x86.generate_brgemm}
    for variant in options.variants:
        target = resolve_target(f"x86_64:{variant}")
        for kind, params in cases():
            if kind not in options.kinds:
                continue
            digest = hashlib.sha256(generators[kind](target, *params)).hexdigest()
            print(kind, ",".join(map(str, params)), variant, digest)
    return 0


if __name__ == "__main__":
    sys.exit(main())
