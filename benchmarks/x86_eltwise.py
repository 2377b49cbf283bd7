"""Bandwidth of the x86-64 unary and binary kernels against numpy, measured in the same run.

For square matrices of 50², 64², 512² and 2048² it times every unary op in both layouts and
every binary op, for each code variant, interleaved with numpy's equivalents into a
preallocated output: np.copyto (copy, and of a transposed view), np.maximum(a, 0, out=)
(relu), np.add(a, b, out=) (binary). Bandwidth counts bytes read plus written, in GiB/s.
Kernels are called through a bare ctypes function (no argument checks); that call's own
cost, measured and printed, dominates at 50², as numpy's call overhead does for numpy.
Targets at 2048² (each recorded in the run's verdict): identity/copy, relu/np.maximum,
add/np.add >= 0.9; transposed identity/copy >= 0.5.

Operands sit where numpy's allocator may put them, not on cache lines: the inputs 16 bytes
and the output 32 bytes past a 64-byte boundary (numpy promises only 16-byte alignment, so
the kernels must keep their speed off a line boundary).

    python -m benchmarks.x86_eltwise [--sizes 50 64 512 2048] [--variants avx512 avx2]
                                     [--dtype float64]
"""

import argparse
import csv
import io
import sys

import numpy as np

from einjit import BINARY_OPS, UNARY_OPS
from einjit.backends.x86_64 import VARIANTS, cpu, generate_binary, generate_unary

from .harness import GIB, JitFunction, placed, seconds_per_call, write_result
from .verdict import Verdict

SIZES = (50, 64, 512, 2048)
RATIOS = (("identity/copy", "identity", "copy"), ("relu/np.maximum", "relu", "relu"),
          ("add/np.add", "add", "add"), ("identity_T/copy", "identity_T", "copy"))
TARGET_SIZE = 2048
RATIO_TARGETS = {"identity_T/copy": 0.5}   # the others: RATIO_TARGET
RATIO_TARGET = 0.9


def host_variants():
    return [v for v in ("avx512", "avx2") if set(cpu.VARIANTS[v]) <= cpu.features()]


def _bound(code, *arguments):
    """A zero-argument callable running `code` on the given arrays and integers."""
    function = JitFunction(code, len(arguments))
    values = [a.ctypes.data if isinstance(a, np.ndarray) else a for a in arguments]
    return lambda: function.call(*values)


INPUT_OFFSET, OUTPUT_OFFSET = 16, 32      # bytes past a 64-byte boundary (see the doc)


def _functions(size, variants, rng, dtype="float32"):
    """{(who, measure): (callable, bytes moved per call)} at size x size."""
    m = n = size
    a = placed(rng.standard_normal((m, n)).astype(dtype), INPUT_OFFSET)
    b = placed(rng.standard_normal((m, n)).astype(dtype), INPUT_OFFSET)
    out = placed(np.zeros((m, n), dtype), OUTPUT_OFFSET)
    unary_bytes, binary_bytes = 2 * a.nbytes, 3 * a.nbytes
    zero = a.dtype.type(0)
    extra = {} if dtype == "float32" else {"dtype": dtype}   # the generators' float32 form
    functions = {
        ("numpy", "copy"): (lambda: np.copyto(out, a), unary_bytes),
        ("numpy", "copy_T"): (lambda: np.copyto(out, a.T), unary_bytes),
        ("numpy", "relu"): (lambda: np.maximum(a, zero, out=out), unary_bytes),
        ("numpy", "add"): (lambda: np.add(a, b, out=out), binary_bytes),
    }
    for variant in variants:
        for op in UNARY_OPS:
            for trans_b in (False, True):
                code = generate_unary(VARIANTS[variant], op, m, n, trans_b, **extra)
                functions[variant, op + "_T" * trans_b] = (
                    _bound(code, a, out, m, n), a.nbytes if op == "zero" else unary_bytes)
        for op in BINARY_OPS:
            code = generate_binary(VARIANTS[variant], op, m, n, **extra)
            functions[variant, op] = (_bound(code, a, b, out, m, m, m), binary_bytes)
    return functions


def _call_overhead_ns():
    """Nanoseconds of a bare ctypes call of an empty function with 6 arguments."""
    empty = JitFunction(b"\xc3", 6)   # ret
    return 1e9 * seconds_per_call({"empty": lambda: empty.call(0, 0, 0, 0, 0, 0)})["empty"]


def run(variants, sizes=SIZES, seed=0, dtype="float32", verdict=None):
    """Measure; return (summary lines, CSV text). The targets go to `verdict`."""
    verdict = verdict or Verdict()
    rng = np.random.default_rng(seed)
    gib = {}
    for size in sizes:
        functions = _functions(size, variants, rng, dtype)
        seconds = seconds_per_call({key: f for key, (f, _) in functions.items()})
        gib.update({(size, *key): functions[key][1] / s / GIB for key, s in seconds.items()})

    header = f"{'GiB/s':<18}" + "".join(f"{size:>9}" for size in sizes)
    lines = [f"{dtype} operands"]
    for who in ["numpy", *variants]:
        measures = dict.fromkeys(name for (_, w, name) in gib if w == who)
        lines += ["", f"{who}", header]
        lines += [f"{name:<18}" + "".join(f"{gib[size, who, name]:9.1f}" for size in sizes)
                  for name in measures]
    lines += ["", f"ratios to numpy (targets at {TARGET_SIZE}: >= {RATIO_TARGET}; identity_T/copy "
                  f">= {RATIO_TARGETS['identity_T/copy']})",
              f"{'':<28}" + "".join(f"{size:>9}" for size in sizes)]
    ratio_rows = []
    for variant in variants:
        for label, ours, theirs in RATIOS:
            values = [gib[size, variant, ours] / gib[size, "numpy", theirs] for size in sizes]
            ratio_rows += [(size, variant, f"ratio {label}", v) for size, v in zip(sizes, values)]
            lines.append(f"{variant + ' ' + label:<28}" + "".join(f"{v:9.2f}" for v in values))
            if TARGET_SIZE in sizes:
                verdict.target(f"element-wise {variant} {dtype} {label} at {TARGET_SIZE}^2, "
                               f"ratio to numpy", values[sizes.index(TARGET_SIZE)],
                               RATIO_TARGETS.get(label, RATIO_TARGET), "x", digits=2)
    lines.append(f"bare ctypes call (6 arguments), included in every kernel figure: "
                 f"{_call_overhead_ns():.0f} ns")

    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(("size", "who", "measure", "value"))
    writer.writerows((size, who, name, f"{v:.4g}") for (size, who, name), v in gib.items())
    writer.writerows((size, who, name, f"{v:.4g}") for size, who, name, v in ratio_rows)
    return lines, out.getvalue()


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    parser.add_argument("--variants", nargs="+", default=host_variants(),
                        choices=("avx512", "avx2"))
    parser.add_argument("--dtype", choices=("float32", "float64"), default="float32")
    options = parser.parse_args(argv)
    lines, table = run(options.variants, options.sizes, dtype=options.dtype)
    print("\n".join(lines))
    suffix = "" if options.dtype == "float32" else "_float64"
    print(f"written: {write_result(f'x86_eltwise{suffix}.csv', table)}")
    if options.dtype == "float64":
        summary = "\n".join(lines) + "\n"
        print(f"written: {write_result(f'x86_eltwise{suffix}.txt', summary)}")


if __name__ == "__main__":
    sys.exit(main())
