"""`python -m einjit`: plan an einsum from the command line, show it, time it, show its code.

    python -m einjit "ij,jk->ik" 512x256 256x128            # numpy subscripts, one shape each
    python -m einjit "[0,1],[1,2]->[0,2]" 512,256,128       # bracket notation, sizes by dim id
    python -m einjit "ij,jk->ik" 512x256 256x128 --bench    # einjit vs numpy on random data
    python -m einjit "ij,jk->ik" 64x48 48x32 --isa aarch64 --disassemble
    python -m einjit "ij,jk->ik" 4096x4096 4096x4096 --threads 72 --profile --quiet

Prints the contraction tree and the plan (each step's TensorOperation). --bench checks
einjit's result against numpy.einsum, then times both (best of several rounds) and prints
milliseconds and GFLOPS. --disassemble lists each step's generated loop nest; with --isa
another instruction set than the host's, the plan's operations are re-optimized for that ISA
and only compiled, never run, so A64 code can be read on an x86-64 machine and vice versa.
--profile prints the plan's parallel profile for --threads threads (any count, on any
machine: plan arithmetic, einjit.frontend.profile): per step its tasks, threads busy and
balance, and the predicted parallel efficiency.

Exit status: 0 on success, 2 for a bad command line or expression (with a message on stderr).
"""

from __future__ import annotations

import argparse
import re
import sys
import time
from typing import Sequence, TextIO

import numpy as np

USAGE_ERROR = 2


class CommandLineError(Exception):
    """A bad argument: printed as `einjit: error: ...` with exit status 2."""


def parse_shape(text: str) -> tuple[int, ...]:
    """"512x256" -> (512, 256); "" or "scalar" -> () (a 0-d operand)."""
    if text in ("", "scalar", "()"):
        return ()
    if not re.fullmatch(r"\d+(x\d+)*", text):
        raise CommandLineError(f"shape {text!r} is not a shape; expected sizes joined by 'x', "
                               f"e.g. 512x256")
    return tuple(int(part) for part in text.split("x"))


def parse_sizes(texts: Sequence[str]) -> list[int]:
    """Bracket-notation sizes: "100,72,128" or "100 72 128" (or both mixed)."""
    sizes = []
    for text in texts:
        for part in filter(None, text.split(",")):
            if not part.strip().isdigit():
                raise CommandLineError(f"size {part!r} is not a whole number; the bracket "
                                       f"notation takes one size per dim id, e.g. 64,32,48")
            sizes.append(int(part))
    if not sizes:
        raise CommandLineError("the bracket notation needs the dims' sizes, e.g. "
                               "'[0,1],[1,2]->[0,2]' 64,32,48")
    return sizes


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m einjit", description="Plan an einsum with einjit and show the plan.",
        epilog="examples: python -m einjit \"ij,jk->ik\" 512x256 256x128 --bench;  "
               "python -m einjit \"[0,1],[1,2]->[0,2]\" 64,32,48 --isa aarch64 --disassemble")
    parser.add_argument("expression", help="numpy subscripts (\"ij,jk->ik\") or the bracket "
                                           "notation (\"[0,1],[1,2]->[0,2]\")")
    parser.add_argument("sizes", nargs="*", help="one shape per operand (512x256) for "
                                                 "subscripts; the sizes by dim id for brackets")
    parser.add_argument("--optimize", default="auto",
                        help="contraction order: an opt_einsum path name (auto, greedy, "
                             "optimal, dp, ...) or 'false' to keep the order as written")
    parser.add_argument("--bench", action="store_true",
                        help="time einjit and numpy.einsum on random float32 data")
    parser.add_argument("--seconds", type=float, default=0.3,
                        help="--bench: about this long per contender (default 0.3)")
    parser.add_argument("--isa", help="show the code for this ISA (aarch64, x86_64, "
                                      "x86_64:avx2, ...) instead of the host's; compile only")
    parser.add_argument("--disassemble", action="store_true",
                        help="print each step's generated loop nest")
    parser.add_argument("--threads", type=int, help="threads per operation (default: the "
                                                    "CPUs this process may use)")
    parser.add_argument("--profile", action="store_true",
                        help="print the plan's parallel profile for --threads threads "
                             "(predicted efficiency; no timing)")
    parser.add_argument("--quiet", action="store_true", help="skip the plan's text")
    return parser


def _optimize_option(text: str):
    lowered = text.lower()
    if lowered in ("false", "no", "none", "0"):
        return False
    if lowered in ("true", "yes", "1"):
        return True
    return text


def make_expression(expression: str, sizes: Sequence[str], optimize):
    """The ContractExpression (and the input tree, for the bracket notation)."""
    import einjit
    if expression.lstrip().startswith("["):
        tree = einjit.EinsumTree(expression, parse_sizes(sizes))
        return einjit.contract_expression(tree, optimize=optimize), tree
    shapes = [parse_shape(text) for text in sizes]
    return einjit.contract_expression(expression, *shapes, optimize=optimize), None


def foreign_operations(expr, isa: str, threads: int | None) -> list:
    """The plan's operations made for `isa`: each step's op re-optimized for that target."""
    import einjit
    from einjit.display import plan_of
    ops = []
    for step in plan_of(expr).steps:
        op = step.lowered.op
        ops.append(einjit.optimize(op.replace(isa=isa, exec_types=None),
                                   num_threads=threads or op.num_threads))
    return ops


def bench(expr, given, seconds: float, out: TextIO) -> None:
    """einjit's expression vs numpy.einsum(optimize=True) on the same random operands
    (`given`: the bracket-notation tree as given, None for subscripts)."""
    from einjit.display import plan_of
    rng = np.random.default_rng(0)
    arrays = [rng.uniform(-1, 1, shape).astype(np.float32) for shape in expr.shapes]
    tree = None if expr.empty else plan_of(expr).tree
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    if given is not None:
        if len(tree.sizes) > len(letters):
            raise CommandLineError(f"--bench compares with numpy.einsum, which takes at most "
                                   f"{len(letters)} dims; this tree has {len(tree.sizes)}")
        equation = ",".join("".join(letters[d] for d in leaf.dims) for leaf in given.leaves) \
            + "->" + "".join(letters[d] for d in given.root.dims)
    else:
        equation = expr.subscripts
    contenders = {"einjit": lambda: expr(*arrays),
                  "numpy.einsum": lambda: np.einsum(equation, *arrays, optimize=True)}
    result = contenders["einjit"]()
    expected = np.einsum(equation, *[a.astype(np.float64) for a in arrays], optimize=True)
    error = float(np.linalg.norm(np.asarray(result, np.float64) - expected)) / \
        max(float(np.linalg.norm(expected)), 1e-30)
    flops = 0 if tree is None else tree.flops()
    print(f"check: relative error vs numpy (float64) {error:.1e}", file=out)
    if error > 1e-4:
        raise AssertionError(f"einjit's result differs from numpy's: relative error {error:.1e}")
    for name, function in contenders.items():
        best = _best_seconds(function, seconds)
        rate = f", {flops / best / 1e9:8.2f} GFLOPS" if flops else ""
        print(f"{name:<14} {1e3 * best:10.3f} ms{rate}", file=out)


def _best_seconds(function, seconds: float) -> float:
    function()
    count, start = 0, time.perf_counter()
    while count == 0 or time.perf_counter() - start < seconds / 10:
        function()
        count += 1
    per_round = max(1, count)
    best = float("inf")
    for _ in range(5):
        started = time.perf_counter()
        for _ in range(per_round):
            function()
        best = min(best, (time.perf_counter() - started) / per_round)
    return best


def run(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    """The command: returns the exit status."""
    out = out or sys.stdout
    parser = build_parser()
    options = parser.parse_args(argv)          # exits 2 itself on a malformed command line
    from einjit.errors import EinjitError
    try:
        return _run(options, out)
    except (CommandLineError, EinjitError) as exc:
        print(f"einjit: error: {exc}", file=sys.stderr)
        return USAGE_ERROR


def _run(options: argparse.Namespace, out: TextIO) -> int:
    import einjit
    from einjit.display import plan_of
    if options.threads is not None and options.threads < 1:
        raise CommandLineError(f"--threads {options.threads}: expected a count >= 1")
    target = einjit.resolve_target(options.isa) if options.isa else None
    if options.threads is not None:
        import os
        os.environ["EINJIT_NUM_THREADS"] = str(options.threads)
    expr, given = make_expression(options.expression, options.sizes,
                                  _optimize_option(options.optimize))
    if given is not None:
        print(f"tree as given: {given}", file=out)
        print(given.pretty(), file=out)
        print(file=out)
    if expr.empty:          # zero-size operands: numpy evaluates it, nothing is generated
        print(expr, file=out)
        if options.bench:
            bench(expr, given, options.seconds, out)
        return 0
    print(f"tree as planned: {expr.tree}", file=out)
    print(expr.tree.pretty(), file=out)
    print(file=out)
    host = einjit.resolve_target(None)
    foreign = target is not None and target != host
    ops = foreign_operations(expr, options.isa, options.threads) if foreign else None
    if not options.quiet:
        print(expr.describe(ops), file=out)
    if options.disassemble or foreign:
        if foreign:
            compiled = [(op, _compiled(op)) for op in ops]
        else:
            compiled = [(step.lowered.op, _compiled(step.lowered.op))
                        for step in plan_of(expr).steps]
        for number, (op, nest) in enumerate(compiled):
            print(f"== step {number} on {op.target.name}: {len(nest.code)} bytes", file=out)
            if foreign and options.quiet:
                print(op, file=out)
            if options.disassemble:
                print(nest.disassemble(), file=out)
    if options.profile:
        print(expr.parallel_profile(options.threads), file=out)
    if options.bench:
        bench(expr, given, options.seconds, out)
    return 0


def _compiled(op):
    from einjit.codegen import compile_operation
    return compile_operation(op)


def main() -> None:
    sys.exit(run())
