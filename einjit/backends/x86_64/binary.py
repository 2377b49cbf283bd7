"""x86-64 binary kernels: C := A op B element-wise for column-major FP32 or FP64 matrices.

Kernel ABI (System V): binary(a, b, c, ld_a, ld_b, ld_c) in rdi, rsi, rdx, rcx, r8, r9,
leading dimensions in elements; M, N and the op are compile-time. The loop nest is
eltwise.ColumnSweep over the three matrices (streaming C when it is large).

min/max follow numpy, which propagates a NaN from either side, while vminps/vmaxps return the
second source when either is NaN: x = A, y = B, lanes where x is NaN keep x (AVX-512: the
max is merge-masked to the lanes where x is ordered; AVX2: blended back by an unordered
compare), and the others get vmaxps(x, y), which is y when y is NaN. float64 uses the
packed-double forms of the same instructions (precision.Precision).

complex64 and complex128 run on the real rows of einjit.backends.complex_eltwise: add and sub
are the real ops; mul computes numpy's array product on each pair of lanes, re = fma(ar, br,
-(ai bi)) and im = fma(ar, bi, ai br), the product of the second term rounded (vshufps or
vshufpd bring the pairs' parts into place, one vfmaddsub213 fuses the first terms): the
formula and so the bits of numpy's own SIMD loop.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from einjit.backends import Target
from einjit.backends.complex_eltwise import binary_form, check_complex_op, is_complex
from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.asm import Assembler, Label
from einjit.backends.x86_64.eltwise import (
    COLUMN_STREAM_MIN_BYTES,
    MAX_UNROLL,
    MEMORY_BOUND_WIDTH,
    ColumnRegisters,
    ColumnSweep,
    Slot,
    Vector,
)
from einjit.backends.x86_64.encode import (
    R8,
    R9,
    R10,
    R11,
    R12,
    R13,
    RAX,
    RBP,
    RBX,
    RCX,
    RDI,
    RDX,
    RSI,
)
from einjit.backends.x86_64.precision import precision

ORDERED = 0x07
UNORDERED = 0x03


@dataclass(frozen=True)
class BinaryOp:
    """emit(asm, vector, x, y, scratch, k): x := x op y; `scratch` has `temps` vector
    registers, k is a free mask register (AVX-512)."""
    name: str
    emit: Callable
    temps: int = 0


def _arithmetic(name: str) -> Callable[..., None]:
    """x := x op y with the Precision's instruction `name` (add, sub, mul, div)."""
    def emit(asm: Assembler, vector: Vector, x: int, y: int, scratch: list[int], k: int) -> None:
        asm(getattr(vector.precision, name)(x, x, y, vector.width))
    return emit


def _nan_propagating(name: str) -> Callable[..., None]:
    """min/max (the Precision's instruction `name`) with numpy's NaN propagation."""
    def emit(asm: Assembler, vector: Vector, x: int, y: int, scratch: list[int], k: int) -> None:
        width, p = vector.width, vector.precision
        instruction = getattr(p, name)
        if vector.masks:                                     # k: lanes where x is ordered
            asm(p.compare(k, x, x, ORDERED, width, evex=True),
                instruction(x, x, y, width, mask=k))
        else:
            (x_is_nan,) = scratch
            asm(instruction(y, x, y, width),                 # y when either is NaN
                p.compare(x_is_nan, x, x, UNORDERED, width),
                p.blend_lanes(x, y, x, x_is_nan, width))
    return emit


BINARY_OPS = {op.name: op for op in (
    BinaryOp("add", _arithmetic("add")),
    BinaryOp("sub", _arithmetic("sub")),
    BinaryOp("mul", _arithmetic("mul")),
    BinaryOp("div", _arithmetic("div")),
    BinaryOp("min", _nan_propagating("min"), temps=1),
    BinaryOp("max", _nan_propagating("max"), temps=1),
)}

# vshufps/vshufpd immediates on the pairs of a complex vector: each pair's real part twice,
# its imaginary part twice, the two parts swapped
DUP_REAL = {4: 0xA0, 8: 0x00}
DUP_IMAG = {4: 0xF5, 8: 0xFF}
SWAP = {4: 0xB1, 8: 0x55}


def _complex_product(asm: Assembler, vector: Vector, x: int, y: int, scratch: list[int],
                     k: int) -> None:
    """x := x y on interleaved pairs (see the module doc for the formula)."""
    width, p = vector.width, vector.precision
    shuffle = enc.vshufps if p.bytes == 4 else enc.vshufpd
    fmaddsub = enc.vfmaddsub213ps if p.bytes == 4 else enc.vfmaddsub213pd
    t, swapped = scratch
    asm(shuffle(t, x, x, DUP_IMAG[p.bytes], width),          # (ai, ai)
        shuffle(swapped, y, y, SWAP[p.bytes], width),        # (bi, br)
        p.mul(t, t, swapped, width),                         # (ai bi, ai br), rounded
        shuffle(x, x, x, DUP_REAL[p.bytes], width),          # (ar, ar)
        fmaddsub(x, y, t, width))                            # (ar br - ai bi, ar bi + ai br)


# complex64/complex128 on the real rows of einjit.backends.complex_eltwise
COMPLEX_BINARY_OPS = {"add": BINARY_OPS["add"], "sub": BINARY_OPS["sub"],
                      "mul": BinaryOp("mul", _complex_product, temps=2)}

REGISTERS = ColumnRegisters(column_counter=R10, row_counter=RAX, row_index=R11, start=RBX,
                            groups=R12, singles=R13, scratch=RAX)


def emit_binary(asm: Assembler, target: Target, op: str, m: int, n: int,
                dtype: str = "float32") -> Label:
    """Emit the function binary(a, b, c, ld_a, ld_b, ld_c) at the current position of `asm`
    and return its entry: C := A op B, all column-major m x n of `dtype`."""
    ld_shift = 0
    if is_complex(dtype):
        check_complex_op("binary", op, dtype)
        form = binary_form(m, n, dtype)
        m, n, dtype, ld_shift = form.m, form.n, form.dtype, form.ld_shift
        kernel = COMPLEX_BINARY_OPS[op]
    else:
        kernel = BINARY_OPS[op]
    elements = precision(dtype)
    vector = Vector(target, MEMORY_BOUND_WIDTH, elements)
    streaming = (m >= vector.line_elements
                 and elements.bytes * m * n >= COLUMN_STREAM_MIN_BYTES)
    spare = list(range(vector.registers))
    mask_count = ColumnSweep.mask_count(vector, streaming)
    masks = [1 + i if vector.masks else spare.pop() for i in range(mask_count)]
    per_vector = 2 + kernel.temps

    def process(slots: list[Slot]) -> None:
        registers = [spare[i * per_vector:(i + 1) * per_vector] for i in range(len(slots))]
        for regs, slot in zip(registers, slots):
            asm(vector.load(regs[0], slot.mems[0], slot.tail),
                vector.load(regs[1], slot.mems[1], slot.tail))
        for index, regs in enumerate(registers):   # k registers after the sweep's masks
            kernel.emit(asm, vector, regs[0], regs[1], regs[2:], mask_count + 1 + index)
        asm(slot.store(vector, slot.mems[2], regs[0]) for regs, slot in zip(registers, slots))

    sweep = ColumnSweep(asm, vector, m, n, ((RDI, RCX), (RSI, R8), (RDX, R9)),
                        min(MAX_UNROLL, len(spare) // per_vector), process, gprs=REGISTERS,
                        masks=masks, temp=spare[0], streaming=streaming)
    entry = asm.entry(f"binary_{op}")
    asm.prologue((RAX, RBX, RCX, RDX, RSI, RDI, R8, R9, R10, R11, R12, R13)
                 + ((RBP,) if not vector.frame.empty else ()))
    vector.frame.enter(asm)
    shift = elements.shift + ld_shift                       # leading dimensions in bytes
    asm(enc.shl_ri(RCX, shift), enc.shl_ri(R8, shift), enc.shl_ri(R9, shift))
    sweep.emit()
    vector.frame.leave(asm)
    asm.epilogue()
    return entry


def generate_binary(target: Target, op: str, m: int, n: int, dtype: str = "float32") -> bytes:
    """The code of emit_binary as a buffer of its own."""
    asm = Assembler()
    emit_binary(asm, target, op, m, n, dtype)
    return asm.finish()
