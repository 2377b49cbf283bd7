"""What every kernel accepts, whatever the instruction set: the largest sizes the primitives
generate code for, the range of the integer arguments (leading dims, strides, in elements) and
of operand addresses. The public constructors (einjit.primitives), the Kernel's call checks
(einjit.kernel), the IR's validation (einjit.ir.verify) and the passes that cut an operation
into kernel calls all check against these."""

BRGEMM_LIMITS = {"m": 1024, "n": 1024, "k": 2048, "br_size": 1024}
ELTWISE_LIMITS = {"m": 2048, "n": 2048}
INTEGER_LIMIT = 1 << 31     # leading dimensions and strides, in elements
MIN_ADDRESS = 4096          # the zero page is never mapped
ADDRESS_LIMIT = 1 << 48     # user-space addresses on x86-64 (47 bits) and AArch64 (48 bits)
