"""einjit's exceptions.

Every error einjit raises derives from EinjitError, and also from the builtin exception a
caller would naturally catch, so both styles work. The rule: a bad value (a size or range, a
layout, an address) is a ValueError, a bad type a TypeError, a host that cannot run the code
a RuntimeError. Messages name the offending value and what was expected.
"""


class EinjitError(Exception):
    """Base class of every error einjit raises."""


class EncodingError(EinjitError, ValueError):
    """An instruction operand does not fit its encoding (register, immediate, offset, label)."""


class KernelParameterError(EinjitError, ValueError):
    """A kernel parameter (size, op, dtype, leading dimension, stride) is out of range."""


class KernelParameterTypeError(EinjitError, TypeError):
    """A kernel parameter (size, op, trans_b, dtype, isa) has the wrong type."""


class OperandError(EinjitError, TypeError):
    """A kernel argument has the wrong type or dtype."""


class OperandValueError(EinjitError, ValueError):
    """A kernel argument has the right type but a value the kernel cannot take: an address out
    of range, an array too small, in the wrong layout, read-only, or overlapping an output."""


class IsaMismatchError(EinjitError, RuntimeError):
    """Code generated for one instruction set was called on a host that runs another."""


class UnsupportedCpuError(EinjitError, RuntimeError):
    """The host CPU lacks a feature einjit needs (e.g. AVX2/FMA on x86-64)."""


class OperationError(EinjitError, ValueError):
    """A TensorOperation's parameters are inconsistent or out of range: lengths that disagree,
    unknown names, sizes or strides out of range, prim dims that do not fit the primitive, an
    out that two iterations would write, an op not yet optimized where execution needs it."""


class OperationTypeError(EinjitError, TypeError):
    """A TensorOperation parameter has the wrong type (e.g. a size that is not an integer)."""
