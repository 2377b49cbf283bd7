"""str(op): a readable table of a TensorOperation, one row per dim, then its kernels.

    TensorOperation float32 on x86_64:avx512, threads: default
    primitives: first touch zero | main brgemm | last touch relu
      dim  type  exec       size  stride_in0  stride_in1  stride_out
        0  m     seq          32        8192           0       32768
      ...
    kernels:
      first_touch: unary zero 32x32 on (out, out) ld_a=32, ld_b=32
      main: brgemm brgemm 32x32x32 batch 8 on (in0, in1, out) ld_a=32, ...
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from einjit.ir.tensor_operation import TensorOperation

HEADER = ("dim", "type", "exec", "size", "stride_in0", "stride_in1", "stride_out")


def format_operation(op: "TensorOperation") -> str:
    threads = "default" if op.num_threads is None else str(op.num_threads)
    lines = [f"TensorOperation {op.dtype} on {op.target.name}, threads: {threads}",
             f"primitives: first touch {op.prim_first_touch} | main {op.prim_main} | "
             f"last touch {op.prim_last_touch}"]
    rows = [HEADER] + [(str(i), d.type, d.exec_type, str(d.size), str(d.stride_in0),
                        str(d.stride_in1), str(d.stride_out)) for i, d in enumerate(op.dims)]
    widths = [max(len(row[c]) for row in rows) for c in range(len(HEADER))]
    left = {1, 2}    # names left-aligned, numbers right-aligned
    for row in rows:
        cells = [cell.ljust(w) if c in left else cell.rjust(w)
                 for c, (cell, w) in enumerate(zip(row, widths))]
        lines.append("  " + "  ".join(cells).rstrip())
    if op.kernel_calls:
        lines.append("kernels:")
        lines.extend("  " + call.describe() for call in op.kernel_calls)
    else:
        lines.append("kernels: not decided (some dims are 'undefined'; run einjit.optimize)")
    return "\n".join(lines)
