"""Where an x86-64 BRGEMM kernel keeps its arguments and state: the argument registers as they
arrive (System V), the pool of general registers for other roles, and the red-zone slots
below rsp that hold the loop counters and pointers no register is left for."""
from __future__ import annotations

from einjit.backends.x86_64 import encode as enc
from einjit.backends.x86_64.blocking import POOL_REGISTERS

# general registers: arguments as they arrive, then a pool for the other roles
A_PTR, B_BASE, C_PTR, LDA, LDB, LDC = enc.RDI, enc.RSI, enc.RDX, enc.RCX, enc.R8, enc.R9
POOL = (enc.RAX, enc.R10, enc.R11, enc.RBX, enc.RBP, enc.R12, enc.R13, enc.R14, enc.R15)

assert len(POOL) == POOL_REGISTERS, "blocking.base_registers counts on the pool's size"

# red-zone slots below rsp (a leaf function may use 128 bytes there without moving rsp):
# seven 8-byte slots from -8 down to -56, one at -64, the 64-byte vector slot at -128..-65
A_ROW, C_ROW, B_ORIGIN, B_COL, N_COUNT, M_COUNT, CHUNK_COUNT = (
    enc.Mem(enc.RSP, disp=-8 * i) for i in range(1, 8))
# where the next block row's lines of A are prefetched from (see Microkernel.prefetch_ahead)
A_AHEAD = enc.Mem(enc.RSP, disp=-64)
# AVX2: the tail mask vector, 32 bytes, then (packed tails) 32 zero bytes: the 32-byte window
# 4*share*s bytes on holds the lanes of the column s places before its group's end
MASK_SLOT = enc.Mem(enc.RSP, disp=-128)
INDEX_SLOT = enc.Mem(enc.RSP, disp=-128)    # AVX-512 packed tail: vpermps lane indices, 64 bytes
