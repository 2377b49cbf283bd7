"""The vector instructions a BRGEMM kernel emits again and again, each encoded once per process
(the same few hundred recur in every kernel), and the loads and stores of a column's few
rows of float32 without touching the rows past them."""
from __future__ import annotations

from functools import lru_cache

from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.encode import Mem
from einjit.backends.x86_64.precision import FLOAT32, Precision


@lru_cache(maxsize=8192)
def fma(acc: int, a: int, b: int | Mem, width: int, bcst: bool,
         p: Precision = FLOAT32) -> bytes:
    return p.fmadd231(acc, a, b, width, bcst=bcst)


@lru_cache(maxsize=8192)
def broadcast(dst: int, mem: Mem, width: int, p: Precision = FLOAT32) -> bytes:
    return p.broadcast(dst, mem, width)


@lru_cache(maxsize=1024)
def blend(packed: int, broadcast: int, width: int, mask: int) -> bytes:
    """The lanes of mask register `mask` of `packed` := the broadcast element."""
    return enc.vblendmps(packed, packed, broadcast, width, mask=mask)


@lru_cache(maxsize=1024)
def blend_lanes(packed: int, broadcast: int, width: int, lanes: int) -> bytes:
    """The lanes (bits) of `packed` := the broadcast element (AVX2)."""
    return enc.vblendps(packed, packed, broadcast, lanes, width)


@lru_cache(maxsize=1024)
def broadcast_rows(dst: int, mem: Mem, rows: int) -> bytes:
    """ymm dst := the `rows` (1, 2 or 4) floats at mem, repeated."""
    if rows == 1:
        return enc.vbroadcastss(dst, mem, 256)
    if rows == 2:
        return enc.vbroadcastsd(dst, mem, 256)
    return enc.vbroadcastf128(dst, mem)


def load_rows(dst: int, mem: Mem, rows: int, spare: int) -> bytes:
    """xmm dst := the `rows` (1 to 4) floats at mem in its lowest lanes, zeros above, no
    more read."""
    if rows == 1:
        return enc.vmovss_load(dst, mem)
    if rows == 2:
        return enc.vmovsd_load(dst, mem)
    if rows == 3:
        return (enc.vmovsd_load(dst, mem) + enc.vmovss_load(spare, mem.offset(8))
                + enc.vunpcklpd(dst, dst, spare, 128))
    return enc.vmovups_load(dst, mem, 128)


def load_column(dst: int, mem: Mem, rows: int, spare: int) -> bytes:
    """dst := the `rows` (1 to 7) floats at mem in its lowest lanes, no more read (more than
    4: lanes past them hold copies of rows, not zeros)."""
    if rows <= 4:
        return load_rows(dst, mem, rows, spare)
    shift = 8 - rows              # the 4 rows that end at the last start `shift` lanes early
    rotate = sum((shift + lane) % 4 << 2 * lane for lane in range(4))
    return (enc.vmovups_load(dst, mem, 128)
            + enc.vmovups_load(spare, mem.offset(4 * (rows - 4)), 128)
            + enc.vshufps(spare, spare, spare, rotate, 128) + enc.vinsertf128(dst, dst, spare, 1))


def store_column(mem: Mem, src: int, rows: int, spare: int) -> bytes:
    """The lowest `rows` (1 to 7) floats of src to mem, no more written (more than 4: src is
    clobbered)."""
    if rows <= 4:
        return store_rows(mem, src, rows, spare)
    return (enc.vmovups_store(mem, src, 128) + enc.vextractf128(spare, src, 1)
            + store_rows(mem.offset(16), spare, rows - 4, src))


def store_rows(mem: Mem, src: int, rows: int, spare: int) -> bytes:
    """The lowest `rows` (1 to 4) floats of xmm src to mem, no more written."""
    if rows == 1:
        return enc.vmovss_store(mem, src)
    if rows == 2:
        return enc.vmovsd_store(mem, src)
    if rows == 3:
        return (enc.vmovsd_store(mem, src) + enc.vshufps(spare, src, src, 0x02, 128)
                + enc.vmovss_store(mem.offset(8), spare))
    return enc.vmovups_store(mem, src, 128)


@lru_cache(maxsize=1024)
def permute(reg: int, indices: int, width: int) -> bytes:
    return enc.vpermps(reg, indices, reg, width)


@lru_cache(maxsize=8192)
def load(dst: int, mem: Mem, width: int, masked: bool, mask_vector: int | None,
          p: Precision = FLOAT32) -> bytes:
    if not masked:
        return p.load(dst, mem, width)
    if mask_vector is not None:
        return p.mask_load(dst, mask_vector, mem, width)
    return p.load(dst, mem, width, mask=1, zeroing=True)


@lru_cache(maxsize=8192)
def add(acc: int, mem: Mem, width: int, masked: bool, mask_vector: int | None,
         spare: int, p: Precision = FLOAT32) -> bytes:
    if not masked:
        return p.add(acc, acc, mem, width)
    if mask_vector is not None:
        return (p.mask_load(spare, mask_vector, mem, width)
                + p.add(acc, acc, spare, width))
    return p.add(acc, acc, mem, width, mask=1)     # masked lanes are not read


@lru_cache(maxsize=8192)
def add_lanes(acc: int, mem: Mem, width: int, mask: int) -> bytes:
    return enc.vaddps(acc, acc, mem, width, mask=mask)


@lru_cache(maxsize=8192)
def store_lanes(src: int, mem: Mem, width: int, mask: int) -> bytes:
    return enc.vmovups_store(mem, src, width, mask=mask)


@lru_cache(maxsize=8192)
def zero(reg: int) -> bytes:
    """reg := 0 in all lanes (a 128-bit write clears the rest of the register)."""
    return enc.vxorps(reg, reg, reg, 128)


@lru_cache(maxsize=8192)
def store(src: int, mem: Mem, width: int, masked: bool, mask_vector: int | None,
           p: Precision = FLOAT32) -> bytes:
    if not masked:
        return p.store(mem, src, width)
    if mask_vector is not None:
        return p.mask_store(mem, mask_vector, src, width)
    return p.store(mem, src, width, mask=1)
