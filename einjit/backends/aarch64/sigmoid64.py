"""FP64 sigmoid as a VectorOp on 2d vectors, accurate to a few units in the last place.

sigmoid(x) = 1 / (1 + e) for x >= 0 and e / (1 + e) for x < 0, with e = exp(-|x|) in (0, 1]:
one division, no overflow, and e = 0 gives exactly 1 at +inf and exactly 0 at -inf.

exp(-u), u = min(|x|, 750) (exp(-750) is below half the smallest denormal, so it rounds to 0):
- n = round(u / ln 2) by the 1.5 * 2^52 shifter: the fused multiply-add rounds u*log2(e) to an
  integer, whose bits are n + bits(shifter);
- r = u - n ln 2 with ln 2 in two parts; the high part has 21 trailing zero bits, so n * ln2_hi
  is exact for every n that occurs (n <= 1083) and |r| <= ln2/2 carries no cancellation error;
- exp(-r) by its Taylor polynomial of degree 13 (the first omitted term is below 4.3e-18 on
  |r| <= 0.3466), by Horner's scheme with coefficients rounded to nearest;
- times 2^-n, applied as two factors 2^-(n>>1) and 2^-(n - n>>1), each a normal double built
  from its exponent bits (bits(1.0) - (k << 52)), so e underflows gracefully into denormals
  with one rounding.
fmin propagates NaN (fminnm would not), so NaN flows into e and the division returns NaN.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Sequence
from fractions import Fraction

from einjit.backends.aarch64 import encode as enc
from einjit.backends.aarch64.eltwise import VectorOp

ARR = "2d"
CLAMP = 750.0
SHIFTER = 6755399441055744.0                 # 1.5 * 2^52
LOG2E = 1.4426950408889634
LN2_HI = 6.93147180369123816490e-01          # 0x3fe62e42fee00000
LN2_LO = 1.90821492927058770002e-10          # ln 2 - LN2_HI
DEGREE = 13
# c_k of exp(-r) = sum c_k r^k: (-1)^k / k!, correctly rounded
COEFFICIENTS = tuple(float(Fraction((-1) ** k, math.factorial(k))) for k in range(DEGREE + 1))
# values read by element from packed registers, two per register
PACKED = (LOG2E, -LN2_HI, -LN2_LO) + COEFFICIENTS[1:]
PACKED_REGISTERS = (len(PACKED) + 1) // 2
CONSTANTS = 3 + PACKED_REGISTERS                # one, clamp, shifter, the packed ones
TEMPS = 4


def _bits(value: float) -> int:
    return struct.unpack("<Q", struct.pack("<d", value))[0]


def _packed(index: int) -> tuple[int, int]:
    """(packed register number, lane) of PACKED[index]."""
    return divmod(index, 2)


def _constants(regs: Sequence[int], scratch: int) -> list[int]:
    one, clamp, shifter, *packed = regs
    words = [enc.fmov_v_imm(one, 1.0, ARR)]
    for reg, value in ((clamp, CLAMP), (shifter, SHIFTER)):
        words += enc.mov_imm(scratch, _bits(value))
        words.append(enc.dup_gpr(reg, scratch, ARR))
    for index, value in enumerate(PACKED):
        register, lane = _packed(index)
        words += enc.mov_imm(scratch, _bits(value))
        words.append(enc.ins_gpr(packed[register], "d", lane, scratch))
    return words


def _compute(inputs: Sequence[int], temps: Sequence[int],
             consts: Sequence[int]) -> tuple[list[int], int]:
    x = inputs[0]
    r, n, p, t = temps
    one, clamp, shifter, *packed = consts

    def by_element(index: int) -> tuple[int, int]:
        register, lane = _packed(index)
        return packed[register], lane

    def coefficient(k: int) -> tuple[int, int]:
        return by_element(3 + k - 1)            # PACKED holds c1..c13 after the three

    words = [
        enc.fabs(r, x, ARR),
        enc.fmin(r, r, clamp, ARR),                       # u = min(|x|, 750), NaN stays NaN
        enc.mov_v(n, shifter, "16b"),
        enc.fmla_elem(n, r, *by_element(0), ARR),         # shifter + round(u * log2(e))
        enc.fsub(p, n, shifter, ARR),                     # n as a double
        enc.sub_v(n, n, shifter, ARR),                    # n as an integer
        enc.fmla_elem(r, p, *by_element(1), ARR),
        enc.fmla_elem(r, p, *by_element(2), ARR),         # r = u - n ln2
        enc.dup_elem(p, *coefficient(DEGREE), ARR),
    ]
    for k in range(DEGREE - 1, 0, -1):                    # p = c_k + p r
        words += [enc.dup_elem(t, *coefficient(k), ARR), enc.fmla(t, p, r, ARR)]
        p, t = t, p
    words += [enc.mov_v(t, one, "16b"), enc.fmla(t, p, r, ARR)]   # c0 = 1
    p, t = t, p
    words += [
        # e = p * 2^-(n >> 1) * 2^-(n - (n >> 1))
        enc.ushr_v(r, n, 1, ARR),
        enc.sub_v(n, n, r, ARR),
        enc.shl_v(r, r, 52, ARR),
        enc.sub_v(r, one, r, ARR),
        enc.shl_v(n, n, 52, ARR),
        enc.sub_v(n, one, n, ARR),
        enc.fmul(p, p, r, ARR),
        enc.fmul(p, p, n, ARR),
        # x < 0 (sign bit set): e / (1 + e), else 1 / (1 + e)
        enc.sshr_v(r, x, 63, ARR),
        enc.fadd(n, p, one, ARR),
        enc.bsl(r, p, one, "16b"),
        enc.fdiv(x, r, n, ARR),
    ]
    return words, x


SIGMOID64 = VectorOp("sigmoid", 1, TEMPS, CONSTANTS, _constants, _compute)
