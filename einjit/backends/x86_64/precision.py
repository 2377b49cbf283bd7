"""The element type of an x86-64 kernel: its size and the instructions that move and compute
on vectors of it.

The generators are written once over a Precision: float32 picks the packed-single forms
(vmovups, vfmadd231ps, masks per dword), float64 the packed-double forms (vmovupd,
vfmadd231pd, masks and embedded broadcasts per qword). Bitwise operations (vxorps to zero a
register) are the same for both and stay as they are.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from einjit.backends.x86_64 import encode as enc
from einjit.errors import KernelParameterError


@dataclass(frozen=True)
class Precision:
    dtype: str
    bytes: int                  # size of one element
    shift: int                  # log2(bytes): elements to bytes by a shift
    load: Callable
    store: Callable
    stream: Callable            # non-temporal store
    mask_load: Callable         # AVX: mask vector, sign bit of each element
    mask_store: Callable
    broadcast: Callable         # one element from memory (or xmm) to every lane
    broadcast_gpr: Callable     # AVX-512: a general register to every lane
    move_to_xmm: Callable       # general register to element 0 of an xmm
    int_broadcast: Callable     # integer broadcast of element 0 (vpbroadcastd/q)
    int_greater: Callable       # signed integer compare per element (vpcmpgtd/q)
    add: Callable
    sub: Callable
    mul: Callable
    div: Callable
    min: Callable
    max: Callable
    orr: Callable
    fmadd231: Callable
    fmadd213: Callable
    compare: Callable
    blend_mask: Callable        # AVX-512 vblendm*
    blend_lanes: Callable       # AVX vblendv* (sign of a mask vector)
    int_add: Callable           # vpaddd/q

    @property
    def dword_pairs(self) -> int:
        """Dwords per element: AVX2 masks built from dword lanes cover an element with this
        many set dwords."""
        return self.bytes // 4


FLOAT32 = Precision(
    "float32", 4, 2, enc.vmovups_load, enc.vmovups_store, enc.vmovntps_store,
    enc.vmaskmovps_load, enc.vmaskmovps_store, enc.vbroadcastss, enc.vpbroadcastd_gpr,
    enc.vmovd_xr, enc.vpbroadcastd, enc.vpcmpgtd, enc.vaddps, enc.vsubps, enc.vmulps,
    enc.vdivps, enc.vminps, enc.vmaxps, enc.vorps, enc.vfmadd231ps, enc.vfmadd213ps,
    enc.vcmpps, enc.vblendmps, enc.vblendvps, enc.vpaddd)

FLOAT64 = Precision(
    "float64", 8, 3, enc.vmovupd_load, enc.vmovupd_store, enc.vmovntpd_store,
    enc.vmaskmovpd_load, enc.vmaskmovpd_store, enc.vbroadcastsd, enc.vpbroadcastq_gpr,
    enc.vmovq_xr, enc.vpbroadcastq, enc.vpcmpgtq, enc.vaddpd, enc.vsubpd, enc.vmulpd,
    enc.vdivpd, enc.vminpd, enc.vmaxpd, enc.vorpd, enc.vfmadd231pd, enc.vfmadd213pd,
    enc.vcmppd, enc.vblendmpd, enc.vblendvpd, enc.vpaddq)

PRECISIONS = {p.dtype: p for p in (FLOAT32, FLOAT64)}


def precision(dtype: str) -> Precision:
    """The Precision of `dtype` ("float32" or "float64")."""
    try:
        return PRECISIONS[dtype]
    except (KeyError, TypeError):
        raise KernelParameterError(f"dtype={dtype!r} is not supported by the x86-64 backend; "
                                   f"expected one of {tuple(PRECISIONS)}") from None
