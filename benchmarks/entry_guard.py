"""What the entry guard costs: every entry Python calls saves and restores the FP status word
(backends/<isa>/entry.py). Each figure is the guarded entry against the unguarded body behind
it (the same code, BODY_OFFSET bytes further), measured in the same run, best of several:

- native: calls from a JIT'd loop (x86-64, harness.RepeatDriver), no Python in between;
- Python: the bare ctypes entry, Kernel.__call__ and TensorOperation.execute of a 4x4x4 gemm.

    python -m benchmarks.entry_guard
"""

import ctypes

import numpy as np

import einjit
from einjit.codegen import compile_operation
from einjit.codegen.compile import _ENTRY
from einjit.ir import TensorOperation
from einjit.runtime.host import host_isa

from .harness import RepeatDriver, seconds_per_call


def _body_offset():
    if host_isa() == "aarch64":
        from einjit.backends.aarch64.entry import BODY_OFFSET
    else:
        from einjit.backends.x86_64.entry import BODY_OFFSET
    return BODY_OFFSET


def _line(what, guarded, body):
    print(f"{what:<44} guarded {guarded * 1e9:9.1f} ns   unguarded {body * 1e9:9.1f} ns   "
          f"difference {(guarded - body) * 1e9:+7.1f} ns ({guarded / body:.3f}x)")


def native(offset):
    driver = RepeatDriver()
    m = 4
    a, b, c = (np.ones(64, np.float32) for _ in range(3))
    cases = {
        "identity 4x4 (4 arguments)": (einjit.unary("identity", m, m),
                                        [a.ctypes.data, c.ctypes.data, m, m]),
        "brgemm 4x4x4 (8 arguments)": (einjit.brgemm(m, m, m),
                                        [a.ctypes.data, b.ctypes.data, c.ctypes.data, m, m, m,
                                         0, 0]),
    }
    for name, (kernel, args) in cases.items():
        kernel.function      # seal the code
        best = {"guarded": float("inf"), "body": float("inf")}
        for _ in range(5):   # alternate, so a busy spell hits both
            best["guarded"] = min(best["guarded"],
                                  driver.seconds_per_call(kernel.address, args))
            best["body"] = min(best["body"], driver.seconds_per_call(kernel.address + offset,
                                                                     args))
        _line(f"native call, {name}", best["guarded"], best["body"])


def python(offset):
    m = 4
    kernel = einjit.brgemm(m, m, m)
    a, b, c = (np.asfortranarray(np.ones((m, m), np.float32)) for _ in range(3))
    addresses = [x.ctypes.data for x in (a, b, c)] + [m, m, m, 0, 0]
    body = ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * 8)(kernel.address + offset)
    times = seconds_per_call({"guarded": lambda: kernel.function(*addresses),
                              "body": lambda: body(*addresses)})
    _line("ctypes entry, brgemm 4x4x4", times["guarded"], times["body"])

    op = TensorOperation("float32", "none", "gemm", "none", ("m", "n", "k"), ("prim",) * 3,
                         (m, m, m), (1, 0, m), (0, m, 1), (1, m, 0))
    compiled = compile_operation(op)
    a, b, out = np.ones(m * m, np.float32), np.ones(m * m, np.float32), np.zeros(m * m,
                                                                                np.float32)
    guarded_entry = compiled.function
    body_entry = _ENTRY(compiled.address + offset)

    def execute(entry):
        def call():
            compiled.function = entry
            op.execute(a, b, out)
        return call
    times = seconds_per_call({"guarded": execute(guarded_entry), "body": execute(body_entry),
                              "kernel": lambda: kernel(a, b, c, m, m, m, 0, 0)})
    compiled.function = guarded_entry
    _line("TensorOperation.execute, gemm 4x4x4", times["guarded"], times["body"])
    print(f"(for scale: Kernel.__call__ of brgemm 4x4x4 {times['kernel'] * 1e6:.2f} us)")


def main():
    offset = _body_offset()
    print(f"entry guard on {host_isa()}: the body starts {offset} bytes after the entry")
    if host_isa() == "x86_64":
        native(offset)
    python(offset)


if __name__ == "__main__":
    main()
