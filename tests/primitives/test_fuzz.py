"""Fuzzing the public kernels: thousands of random calls, none may crash or return garbage.

Every case picks a public kernel (brgemm; every unary op, with and without trans_b; every
binary op) with random sizes and, on x86-64, a random code variant (`isa="x86_64:avx2"`...),
then random arguments: arrays in the kernel's layout, flat buffers, C- instead of
Fortran-ordered arrays, wrong shapes, strided views, too-small buffers, other dtypes,
read-only outputs, 0-d arrays, operands that alias or overlap (in place, shifted by one
element, adjacent), integer addresses of real buffers (Python and numpy integers) and bad
ones (0, 1, 4095, 2**48, 2**63, 2**64, negative, a real address + 2**64, one element past
2**48), leading dimensions and strides at and beyond every limit (the lower bound, bound-1,
2**31-1, 2**31, 2**63, 2**64 + a valid value), values of the wrong type, missing, extra,
unknown and repeated arguments, positional or by keyword. Some operands end right before a
no-access page (support.guarded), so a read or write past them faults.

The test keeps its own model of the documented call rules (README, "Calling a kernel"), so
for each call it knows which arguments break a rule and of which kind. A call that breaks
none must succeed and match the numpy references of einjit.ops: bit for bit for the exact
ops (NaN payloads aside; relu may keep -0.0), within 1 ulp or the op's tolerance otherwise;
brgemm runs on small integers, where every summation order is exact. A call that breaks a
rule must raise an EinjitError of that rule's class (ValueError for values, TypeError for
types), whose message names an offending argument, and leave all memory as it was. Memory
outside an output's written elements (ld gaps, canary padding) must never change.

All calls run in one forked child (support.run_in_child): a fault fails the test naming the
case. Seeds are fixed; EINJIT_FUZZ_CASES overrides the number of random cases (fewer in the
aarch64 lane, where every instruction is emulated).
"""

from __future__ import annotations

import ctypes
import os
from dataclasses import dataclass, field

import numpy as np
import pytest

import einjit
from einjit.ops import BINARY, UNARY

from support import CANARY, IN_LANE, guarded, mixed_data, run_in_child

SEED = 7_2026
CASES = int(os.environ.get("EINJIT_FUZZ_CASES", "300" if IN_LANE else "3000"))
CONSTRUCTOR_CASES = CASES // 10
HOST = einjit.host_isa()
FOREIGN = {"x86_64": "aarch64", "aarch64": "x86_64"}.get(HOST)

CAP = 1 << 15            # elements: the largest region one operand of a case may get
PAD = 11                 # canary elements before and after every region
GUARD_REGION = CAP + 2 * PAD
INT_LIMIT = 2**31        # leading dimensions and strides are below it
ADDRESS_LIMIT = 2**48    # an address range must end at or below it
MIN_ADDRESS = 4096

KERNELS = ([("brgemm", None, False)]
           + [("unary", op, trans_b) for op in UNARY for trans_b in (False, True)]
           + [("binary", op, False) for op in BINARY])
SIZES = (1, 1, 2, 3, 4, 5, 7, 8, 9, 12, 15, 16, 17, 24, 31, 33, 47)
K_SIZES = (1, 2, 3, 5, 8, 9, 16, 17)
BAD_ADDRESSES = (0, 1, 4095, -1, -4096, -2**63, 2**48, 2**63, 2**64, 2**64 + 8192, 2**64 - 1)
BAD_TYPES = (None, 1.5, "4096", b"\0" * 16, [0.0, 1.0], True, np.float32(1.0),
             ctypes.c_void_p(8192), bytearray(64), {"data": 8192})
BAD_DTYPES = (np.float64, np.float16, np.int32, np.uint32, np.complex64, np.dtype(">f4"))


def _variants() -> list[str]:
    """The targets this host runs, each named as a user would pass isa=."""
    if HOST == "x86_64":
        from einjit.backends import resolve_target, why_not_runnable
        names = [f"x86_64:{v}" for v in ("avx512", "avx2")]
        return [name for name in names if why_not_runnable(resolve_target(name)) is None]
    return [HOST]


# --- the model of one kernel's call rules --------------------------------------------------

@dataclass(frozen=True)
class Spec:
    """A public kernel's parameters and, independently of einjit.kernel, how it walks its
    operands: each pointer is `rows` contiguous elements per column/row, `cols` of them, `ld`
    apart (plus `br` batch entries `stride` apart for brgemm's A and B)."""
    kind: str
    op: str | None
    trans_b: bool
    m: int
    n: int
    k: int = 1
    br: int = 1

    @property
    def pointers(self) -> tuple[str, ...]:
        return ("a", "b") if self.kind == "unary" else ("a", "b", "c")

    @property
    def output(self) -> str:
        return self.pointers[-1]

    @property
    def integers(self) -> tuple[str, ...]:
        lds = tuple(f"ld_{p}" for p in self.pointers)
        return lds + (("br_stride_a", "br_stride_b") if self.kind == "brgemm" else ())

    def walk(self, pointer: str) -> tuple[int, int, str]:
        """(rows, cols, order) of one operand."""
        m, n, k = self.m, self.n, self.k
        if self.kind == "brgemm":
            return {"a": (m, k, "F"), "b": (k, n, "F"), "c": (m, n, "F")}[pointer]
        if self.kind == "unary" and pointer == "b" and self.trans_b:
            return n, m, "C"
        return m, n, "F"

    def lower(self, name: str) -> int:
        return 0 if name.startswith("br_") else self.walk(name[-1])[0]

    def extent(self, pointer: str, ints: dict) -> int:
        rows, cols, _ = self.walk(pointer)
        extent = (cols - 1) * ints[f"ld_{pointer}"] + rows
        if self.kind == "brgemm" and pointer in "ab":
            extent += (self.br - 1) * ints[f"br_stride_{pointer}"]
        return extent

    def in_place(self, other: str) -> bool:
        """May the output be exactly operand `other` (same start, same ld)?"""
        return self.kind == "binary" or (self.kind == "unary" and not self.trans_b)

    def make(self, isa: str) -> einjit.Kernel:
        if self.kind == "brgemm":
            return einjit.brgemm(self.m, self.n, self.k, self.br, isa=isa)
        if self.kind == "unary":
            return einjit.unary(self.op, self.m, self.n, trans_b=self.trans_b, isa=isa)
        return einjit.binary(self.op, self.m, self.n, isa=isa)

    def __str__(self) -> str:
        shape = f"{self.m}x{self.n}" + (f"x{self.k} br{self.br}" if self.kind == "brgemm" else "")
        return " ".join(filter(None, [self.kind, self.op, shape, "trans_b" * self.trans_b]))


@dataclass
class Operand:
    """One pointer argument: the value passed, the memory it names (if real) and the rules
    it breaks, each as (exception class, text the message must contain)."""
    value: object
    how: str
    flat: np.ndarray | None = None     # float32, 1-D, starting at the address the kernel gets
    owner: np.ndarray | None = None    # the whole region around it (padding included)
    broken: list = field(default_factory=list)


class Case:
    """One random call: kernel, arguments, and what the model expects of it."""

    def __init__(self, index: int, variants: list[str], guards: list[np.ndarray]):
        rng = self.rng = np.random.default_rng((SEED, index))
        kind, op, trans_b = KERNELS[index % len(KERNELS)]
        self.spec = Spec(kind, op, trans_b, _pick(rng, SIZES), _pick(rng, SIZES),
                         _pick(rng, K_SIZES), _pick(rng, (1, 1, 2, 3)))
        self.isa = variants[index // len(KERNELS) % len(variants)]
        self.foreign = FOREIGN is not None and rng.random() < 0.02
        self.guards = guards
        self.broken = []          # (class, tag) of every rule the call breaks
        self.ints = self._integers()
        self.operands = self._operands()
        self.args, self.kwargs = self._arguments()

    # -- integers

    def _valid_integer(self, name: str) -> int:
        rng, spec = self.rng, self.spec
        if name.startswith("br_"):
            rows, cols, _ = spec.walk(name[-1])
            natural = self._valid[f"ld_{name[-1]}"] * cols
            return _pick(rng, (0, natural, natural, natural + 3, 1, rows))
        return spec.lower(name) + _pick(rng, (0, 0, 0, 1, 2, 5))

    def _integers(self) -> dict:
        rng = self.rng
        self._valid = {}
        for name in self.spec.integers:
            self._valid[name] = self._valid_integer(name)
        ints = {}
        for name in self.spec.integers:
            value = self._valid[name]
            roll = rng.random()
            if roll < 0.03:        # a value out of range
                value = _pick(rng, (self.spec.lower(name) - 1, -1, INT_LIMIT, 2**32, 2**63,
                                    -2**63, 2**64 + self._valid[name]))
                self.broken.append((ValueError, name))
            elif roll < 0.05:      # a value of the wrong type
                value = _pick(rng, (1.5, float(value), str(value), None, True, [value],
                                    np.float64(value)))
                self.broken.append((TypeError, name))
            elif roll < 0.07:      # in range, but far larger than any buffer here
                value = _pick(rng, (INT_LIMIT - 1, 2**30 + 1))
            elif roll < 0.2:       # a numpy integer
                value = _pick(rng, (np.int64, np.int32, np.uint64, np.intp))(value)
            ints[name] = value
        # the integers the operands are built for: the real ones when all are valid, else the
        # valid ones the case started from (the call must fail anyway)
        self.ints_ok = not self.broken
        self.values = {k: int(v) for k, v in ints.items()} if self.ints_ok else dict(self._valid)
        return ints

    def _extents(self) -> dict:
        """Elements each pointer reaches, for the working integers."""
        return {p: self.spec.extent(p, self.values) for p in self.spec.pointers}

    # -- pointers

    def _fill(self, pointer: str, region: np.ndarray, extent: int) -> None:
        """Data for an input region, canaries (and small integers at C's elements for
        brgemm) for an output region."""
        rng, spec = self.rng, self.spec
        if pointer != spec.output:
            if spec.kind == "brgemm":
                region[:] = rng.integers(-4, 5, region.size)
            else:
                region[:] = mixed_data(rng, region.size)
            return
        region.view(np.uint32)[:] = CANARY
        if spec.kind == "brgemm":
            index = self._elements(pointer, extent)
            if index is not None:
                index = index[index < region.size]
                region[index] = rng.integers(-4, 5, index.size)

    def _elements(self, pointer: str, extent: int) -> np.ndarray | None:
        """Flat indices of an operand's matrix elements, column by column (None if the
        integers are not valid)."""
        if not self.ints_ok:
            return None
        rows, cols, _ = self.spec.walk(pointer)
        ld = self.values[f"ld_{pointer}"]
        return (np.arange(rows)[:, None] + ld * np.arange(cols)[None, :]).ravel(order="F")

    def _region(self, pointer: str, room: int, guard: bool) -> np.ndarray:
        """A canary-padded float32 region with `room` elements in the middle, filled."""
        if guard:
            owner = self.guards[self.spec.pointers.index(pointer)][-(room + PAD):]
            owner.view(np.uint32)[:] = CANARY
        else:
            owner = np.full(room + 2 * PAD, CANARY, np.uint32).view(np.float32)
        self._fill(pointer, owner[PAD:PAD + room], room)
        return owner

    def _operands(self) -> dict:
        rng, spec = self.rng, self.spec
        self.extents = extents = self._extents()
        operands = {}
        for pointer in spec.pointers:
            extent = extents[pointer]
            roll = rng.random()
            if pointer == spec.output and roll < 0.12 and len(operands) > 0:
                operand = self._alias(pointer, operands)
            elif pointer == "b" and spec.kind != "unary" and roll < 0.05:
                operand = self._reuse(pointer, operands["a"])
            else:
                operand = self._operand(pointer, extent)
            operands[pointer] = operand
            self.broken.extend(operand.broken)
        if not self.broken:     # spans are known only for valid integers and pointers
            self._check_overlaps(operands)
        return operands

    def _operand(self, pointer: str, extent: int) -> Operand:
        rng = self.rng
        rows, cols, order = self.spec.walk(pointer)
        ld = self.values[f"ld_{pointer}"]
        tag = f"operand {pointer}"
        if rng.random() < 0.8:      # a layout the kernel takes (mostly)
            how = _pick(rng, ("natural",) * 5 + ("flat",) * 3 + ("address",) * 2
                        + ("guarded",) * 2 + ("readonly",) * (pointer != self.spec.output))
        else:
            how = _pick(rng, ("swapped", "wrong_shape", "transposed_shape", "strided", "small",
                              "dtype", "readonly", "bad_address", "bad_address", "bad_type",
                              "zero_d"))
        if extent > CAP and how not in ("dtype", "bad_address", "bad_type"):
            how = "small"        # no buffer here is that large: the call must refuse it
        if how == "bad_address":
            value = _pick(rng, BAD_ADDRESSES + (ADDRESS_LIMIT - 4 * extent + 4,))
            return Operand(value, how, broken=[(ValueError, tag)])
        if how == "bad_type":
            return Operand(BAD_TYPES[int(rng.integers(len(BAD_TYPES)))], how,
                           broken=[(TypeError, tag)])
        if how == "dtype":
            dtype = BAD_DTYPES[int(rng.integers(len(BAD_DTYPES)))]
            return Operand(np.zeros(min(max(extent, 1), CAP), dtype), how,
                           broken=[(TypeError, tag)])
        if how == "small":
            size = min(extent - 1, CAP)
            owner = self._region(pointer, size, guard=False)
            return Operand(owner[PAD:PAD + size], how, owner[PAD:PAD + size], owner,
                           [(ValueError, tag)])
        columns = -(-extent // ld) if ld else 1
        if how in ("natural", "swapped", "readonly", "transposed_shape") and ld * columns > CAP:
            how = "flat"
        if how == "wrong_shape" and (ld + 1) * (-(-extent // (ld + 1))) > CAP:
            how = "flat"
        room = {"natural": ld * columns, "swapped": ld * columns, "readonly": ld * columns,
                "transposed_shape": ld * columns, "strided": 2 * extent,
                "wrong_shape": (ld + 1) * (-(-extent // (ld + 1))), "zero_d": 1,
                "flat": extent + int(rng.integers(0, 4))}.get(how, extent)
        owner = self._region(pointer, room, guard=how == "guarded")
        middle = owner[PAD:PAD + room]
        if how in ("natural", "readonly"):
            shape = (ld, columns) if order == "F" else (columns, ld)
            value = middle.reshape(shape, order=order)
            if rng.random() < 0.1:   # the transpose: the same memory, another shape
                value = value.T
            if how == "readonly":
                value.flags.writeable = False
        elif how == "swapped":       # the right shape in the other order
            shape = (ld, columns) if order == "F" else (columns, ld)
            value = middle.reshape(shape, order="C" if order == "F" else "F")
        elif how == "transposed_shape":  # e.g. an A of shape (k, m): right size, wrong shape
            shape = (columns, ld) if order == "F" else (ld, columns)
            value = middle.reshape(shape, order=order)
        elif how == "wrong_shape":
            other = -(-extent // (ld + 1))
            shape = (ld + 1, other) if order == "F" else (other, ld + 1)
            value = middle.reshape(shape, order=order)
        elif how == "strided":
            value = middle[::2]
        elif how == "zero_d":
            value = middle[:1].reshape(())
        elif how == "address":
            value = _pick(rng, (int, np.int64, np.uint64, np.intp))(middle.ctypes.data)
        else:                        # flat, guarded
            value = middle
        operand = Operand(value, how, middle, owner)
        if isinstance(value, np.ndarray):
            operand.broken = self._array_rules(pointer, value, ld, extent)
        return operand

    def _array_rules(self, pointer: str, array: np.ndarray, ld: int, extent: int) -> list:
        """The documented rules an array operand breaks (empty if it is acceptable)."""
        tag = f"operand {pointer}"
        order = self.spec.walk(pointer)[2]
        if array.dtype != np.float32:
            return [(TypeError, tag)]
        broken = []
        if not (array.flags.c_contiguous or array.flags.f_contiguous):
            broken.append((ValueError, tag))
        if array.ndim >= 2 and array.size != max(array.shape):
            fortran = array.flags.f_contiguous and array.shape[0] == ld
            rows = order == "C" and array.flags.c_contiguous and array.shape[-1] == ld
            if not (fortran or rows):
                broken.append((ValueError, tag))
        if array.size < extent:
            broken.append((ValueError, tag))
        if pointer == self.spec.output and not array.flags.writeable:
            broken.append((ValueError, tag))
        return broken

    def _address_rules(self, pointer: str, address: int, extent: int) -> list:
        if address < MIN_ADDRESS or address + 4 * extent > ADDRESS_LIMIT:
            return [(ValueError, f"operand {pointer}")]
        return []

    def _alias(self, pointer: str, operands: dict) -> Operand:
        """The output made from an input's memory: the same object, or a view starting one
        element later, or right after the input (no overlap)."""
        rng = self.rng
        source_name = _pick(rng, tuple(operands))
        source = operands[source_name]
        extent = self.extents[pointer]
        ld = self.values[f"ld_{pointer}"]
        if source.flat is None or extent > CAP:
            return self._operand(pointer, extent)
        movable = (not isinstance(source.value, np.ndarray)
                   or source.value.flags.c_contiguous or source.value.flags.f_contiguous)
        how = _pick(rng, ("same", "same", "shift", "adjacent") if movable else ("same",))
        if how == "same":
            operand = self._share(pointer, source, extent, "alias same " + source_name)
        else:
            size = source.flat.size
            shift = 1 if how == "shift" else size
            owner = np.full(PAD + max(size, shift + extent) + PAD, CANARY,
                            np.uint32).view(np.float32)
            self._fill(pointer, owner[PAD + shift:PAD + shift + extent], extent)
            owner[PAD:PAD + size] = source.flat   # the input's data, moved to the new region
            self._move(source, owner)
            flat = owner[PAD + shift:PAD + shift + extent]
            operand = Operand(flat, f"alias {how} {source_name}", flat, owner)
            operand.broken = self._array_rules(pointer, flat, ld, extent)
        return operand

    @staticmethod
    def _move(source: Operand, owner: np.ndarray) -> None:
        """Point `source` at the same layout of data starting at owner[PAD]."""
        old, start = source.value, owner[PAD:]
        if isinstance(old, np.ndarray):
            value = np.ndarray(old.shape, old.dtype, buffer=owner, offset=4 * PAD,
                               strides=old.strides)
            value.flags.writeable = old.flags.writeable
        else:
            value = type(old)(start.ctypes.data)
        source.value, source.flat, source.owner = value, owner[PAD:PAD + source.flat.size], owner

    def _share(self, pointer: str, source: Operand, extent: int, how: str) -> Operand:
        """Operand `pointer` given exactly the value of `source` (an array object or an
        address); if that is an address of too little memory, its flat array instead."""
        ld = self.values[f"ld_{pointer}"]
        offset = (source.flat.ctypes.data - source.owner.ctypes.data) // 4
        reach = source.owner[offset:]           # all the memory from the operand's start
        value = source.value
        if not isinstance(value, np.ndarray) and reach.size < extent:
            value = source.flat                 # an address must name enough memory
        operand = Operand(value, how, reach, source.owner)
        if isinstance(value, np.ndarray):
            operand.broken = self._array_rules(pointer, value, ld, extent)
        else:
            operand.broken = self._address_rules(pointer, int(value), extent)
        return operand

    def _reuse(self, pointer: str, source: Operand) -> Operand:
        """Input b given the same memory as input a (allowed: both are only read)."""
        extent = self.extents[pointer]
        if source.flat is None or extent > CAP:
            return self._operand(pointer, extent)
        return self._share(pointer, source, extent, "same as a")

    def _check_overlaps(self, operands: dict) -> None:
        """An output may share memory with another operand only as the same start and ld,
        where the kernel allows it in place."""
        spec = self.spec
        out = spec.output
        start = {p: self._address_of(o) for p, o in operands.items()}
        span = {p: (start[p], start[p] + 4 * self.extents[p]) for p in operands}
        for other in spec.pointers:
            if other == out or span[other][0] >= span[out][1] or span[out][0] >= span[other][1]:
                continue
            same = (start[other] == start[out] and spec.in_place(other)
                    and self.values[f"ld_{out}"] == self.values[f"ld_{other}"])
            if not same:
                self.broken.append((ValueError, f"operand {out}"))

    @staticmethod
    def _address_of(operand: Operand) -> int:
        value = operand.value
        return value.ctypes.data if isinstance(value, np.ndarray) else int(value)

    # -- the call

    def _arguments(self) -> tuple[list, dict]:
        rng, spec = self.rng, self.spec
        values = [self.operands[p].value for p in spec.pointers]
        values += [self.ints[name] for name in spec.integers]
        names = list(spec.pointers + spec.integers)
        roll = rng.random()
        if roll < 0.03:
            self.broken.append((TypeError, "takes ("))
            trouble = int(rng.integers(4))
            if trouble == 0:
                return values[:-1], {}                              # missing
            if trouble == 1:
                return values + [values[-1]], {}                    # one too many
            if trouble == 2:
                return values, {"ld_z": 1}                          # unknown keyword
            return values, {names[0]: values[0]}                    # given twice
        keywords = int(rng.integers(0, len(names) + 1)) if roll < 0.4 else 0
        split = len(names) - keywords
        kwargs = dict(zip(names[split:], values[split:]))
        if keywords and rng.random() < 0.5:
            kwargs = dict(sorted(kwargs.items(), key=lambda _: rng.random()))
        return values[:split], kwargs

    def describe(self) -> str:
        ints = ", ".join(f"{k}={v!r}" for k, v in self.ints.items())
        ops = ", ".join(f"{p}: {o.how}" for p, o in self.operands.items())
        where = FOREIGN if self.foreign else self.isa
        return f"{self.spec} on {where}; {ops}; {ints}; {len(self.kwargs)} by keyword"

    def run(self) -> tuple[str, str | None]:
        """Call the kernel; ("ok" | "raised" | class name, failure text or None)."""
        kernel = self.spec.make(FOREIGN if self.foreign else self.isa)
        owners = {}
        for operand in self.operands.values():
            if operand.owner is not None:
                owners.setdefault(operand.owner.ctypes.data, operand.owner)
        before = {key: owner.copy() for key, owner in owners.items()}
        inputs = {p: o.flat.copy() for p, o in self.operands.items() if o.flat is not None}
        expected = list(self.broken)
        if self.foreign:
            expected.append((RuntimeError, "cannot run here"))
        try:
            kernel(*self.args, **self.kwargs)
        except einjit.EinjitError as exc:
            if not expected:
                return "raised", f"raised {type(exc).__name__} for a valid call: {exc}"
            if not any(isinstance(exc, cls) and tag in str(exc) for cls, tag in expected):
                return "raised", (f"raised {type(exc).__name__}({exc}) but the call breaks "
                                  f"{[(cls.__name__, tag) for cls, tag in expected]}")
            for key, owner in owners.items():
                if not np.array_equal(owner.view(np.uint32), before[key].view(np.uint32)):
                    return "raised", "memory changed although the call raised"
            return type(exc).__name__, None
        except Exception as exc:       # anything else is a bug: every error is an EinjitError
            return "raised", f"raised {type(exc).__name__}, not an EinjitError: {exc}"
        if expected:
            return "ok", (f"accepted a call that breaks "
                          f"{[(cls.__name__, tag) for cls, tag in expected]}")
        return "ok", self._verify(owners, before, inputs)

    def _verify(self, owners: dict, before: dict, inputs: dict) -> str | None:
        spec = self.spec
        out = self.operands[spec.output]
        index = self._elements(spec.output, self.extents[spec.output])
        got_all = out.flat
        expected = self._expected(inputs)
        got = got_all[index]
        old = inputs[spec.output][index]
        problem = self._compare(got, expected, old)
        if problem:
            return problem
        written = out.flat.ctypes.data - out.owner.ctypes.data
        skip = np.zeros(out.owner.size, bool)
        skip[written // 4 + index] = True
        for key, owner in owners.items():
            mask = skip if key == out.owner.ctypes.data else np.zeros(owner.size, bool)
            changed = np.flatnonzero((owner.view(np.uint32) != before[key].view(np.uint32))
                                     & ~mask)
            if changed.size:
                return f"changed memory outside the output's elements at {changed[:5].tolist()}"
        return None

    def _matrix(self, flat: np.ndarray, pointer: str, batch: int = 0) -> np.ndarray:
        rows, cols, order = self.spec.walk(pointer)
        start = batch * self.values[f"br_stride_{pointer}"] if batch else 0
        ld = self.values[f"ld_{pointer}"]
        index = start + np.arange(rows)[:, None] + ld * np.arange(cols)[None, :]
        return flat[index]

    def _expected(self, inputs: dict) -> np.ndarray:
        """The output's elements (in the order of _elements) from the inputs as they were."""
        spec = self.spec
        if spec.kind == "brgemm":
            c = self._matrix(inputs["c"], "c").astype(np.float64)
            with np.errstate(invalid="ignore", over="ignore"):
                for i in range(spec.br):
                    c += (self._matrix(inputs["a"], "a", i).astype(np.float64)
                          @ self._matrix(inputs["b"], "b", i).astype(np.float64))
            return c.astype(np.float32).ravel(order="F")
        a = self._matrix(inputs["a"], "a")
        if spec.kind == "unary":
            result = UNARY[spec.op].reference(a)
            return (result.T if spec.trans_b else result).ravel(order="F")
        return BINARY[spec.op].reference(a, self._matrix(inputs["b"], "b")).ravel(order="F")

    def _compare(self, got: np.ndarray, expected: np.ndarray, old: np.ndarray) -> str | None:
        spec = self.spec
        both_nan = np.isnan(got) & np.isnan(expected)
        if spec.kind == "brgemm":
            ok = (got == expected) | both_nan           # integers: exact in any order
        else:
            op = (UNARY if spec.kind == "unary" else BINARY)[spec.op]
            ok = (got.view(np.uint32) == expected.view(np.uint32)) | both_nan
            if op.name == "relu":                        # the kernels may keep -0.0
                ok |= (got == 0) & (expected == 0)
            if not op.exact:
                with np.errstate(invalid="ignore", over="ignore"):
                    close = np.abs(got.astype(np.float64) - expected) <= op.tolerance
                ok |= close | (np.abs(_ordered(got) - _ordered(expected)) <= 1)
        if ok.all():
            return None
        bad = np.flatnonzero(~ok)[:4]
        return (f"{bad.size} wrong elements, e.g. at {bad.tolist()}: got {got[bad].tolist()}, "
                f"expected {expected[bad].tolist()} (before: {old[bad].tolist()})")


def _pick(rng: np.random.Generator, choices: tuple):
    """One of `choices`, as given (rng.choice would turn them into a numpy array)."""
    return choices[int(rng.integers(len(choices)))]


def _ordered(x: np.ndarray) -> np.ndarray:
    """float32 bits as integers in the order of the values (for ulp distances)."""
    bits = x.view(np.int32).astype(np.int64)
    return np.where(bits < 0, -(bits & 0x7FFF_FFFF), bits)


# --- the tests ------------------------------------------------------------------------------

def _fuzz(note) -> tuple[dict, list]:
    """Run the random cases; (outcome counts per kernel, the first failures)."""
    variants = _variants()
    guards = [guarded(GUARD_REGION) for _ in range(3)]
    counts, failures = {}, []
    for index in range(CASES):
        case = Case(index, variants, guards)
        text = f"case {index}: {case.describe()}"
        note(text)
        outcome, problem = case.run()
        key = (case.spec.kind, case.spec.op, case.spec.trans_b, outcome)
        counts[key] = counts.get(key, 0) + 1
        if problem:
            failures.append(f"{text}: {problem}")
            if len(failures) == 8:
                break
    return counts, failures


@pytest.mark.slow
@pytest.mark.skipif(HOST is None, reason="einjit runs no code on this host")
def test_random_calls_raise_an_einjit_error_or_match_numpy():
    counts, failures = run_in_child(_fuzz)
    assert not failures, "\n".join(failures)
    total = {}
    for (kind, op, trans_b, outcome), count in counts.items():
        total[outcome] = total.get(outcome, 0) + count
        if outcome == "ok":
            total[(kind, op, trans_b)] = total.get((kind, op, trans_b), 0) + count
    assert sum(count for key, count in total.items() if isinstance(key, str)) == CASES
    # the fuzzer reaches both sides of the rules, for every kernel
    for kernel in KERNELS:
        assert total.get(kernel, 0) >= CASES // len(KERNELS) // 4, (kernel, total)
    for outcome in ("OperandValueError", "OperandError"):
        assert total.get(outcome, 0) >= CASES // 20, total
    if FOREIGN is not None and CASES >= 200:
        assert total.get("IsaMismatchError", 0) > 0, total


LIMIT_SPECS = (Spec("brgemm", None, False, 5, 3, 4, 2), Spec("unary", "relu", False, 5, 3),
               Spec("unary", "sigmoid", True, 5, 3), Spec("binary", "div", False, 5, 3))


def _bad_integers(lower: int) -> list:
    """(value, class, text its message must contain) for an integer argument >= lower."""
    values = [lower - 1, -1, 2**31, 2**32 + lower, 2**63, 2**64 + lower, -2**63,
              np.uint64(2**64 - 1), np.int64(-1)]
    return ([(v, ValueError, f"={int(v)}") for v in values]
            + [(v, TypeError, repr(v)) for v in (float(lower), str(lower), None, True,
                                                 np.float32(lower), [lower])])


def _limits(note) -> list:
    """Each pointer with each bad address and each integer with each bad value, the rest of
    the call valid: (description, problem) for every call that did not raise as it should."""
    problems = []
    for index, spec in enumerate(LIMIT_SPECS):
        isa = _variants()[index % len(_variants())]
        kernel = spec.make(isa)
        ints = {name: spec.lower(name) for name in spec.integers}
        ints.update({f"br_stride_{p}": spec.walk(p)[0] * spec.walk(p)[1] for p in "ab"
                     if f"br_stride_{p}" in ints})
        arrays = {p: np.ones(spec.extent(p, ints), np.float32) for p in spec.pointers}
        valid = {**arrays, **ints}
        calls = []
        for p in spec.pointers:
            real = arrays[p].ctypes.data
            for address in BAD_ADDRESSES + (real + 2**64, real - 2**64,
                                            ADDRESS_LIMIT - 4 * arrays[p].size + 4):
                calls.append(({**valid, p: address}, ValueError, f"{address:#x}"))
        for name in spec.integers:
            for value, cls, text in _bad_integers(spec.lower(name)):
                calls.append(({**valid, name: value}, cls, text))
        for args, cls, text in calls:
            what = f"{spec} on {isa} with " + ", ".join(
                f"{k}={v!r}" for k, v in args.items() if not isinstance(v, np.ndarray))
            note(what)
            before = {p: a.copy() for p, a in arrays.items()}
            try:
                kernel(**args)
                problems.append((what, "accepted"))
            except einjit.EinjitError as exc:
                if not (isinstance(exc, cls) and text in str(exc)):
                    problems.append((what, f"raised {type(exc).__name__}({exc}); expected a "
                                           f"{cls.__name__} naming {text}"))
            if any(not np.array_equal(before[p], arrays[p]) for p in arrays):
                problems.append((what, "changed an operand"))
        note(f"{spec}: the valid call")
        kernel(**valid)                   # and the same call with valid values runs
    return problems


@pytest.mark.skipif(HOST is None, reason="einjit runs no code on this host")
def test_every_limit_of_every_argument_raises_naming_the_value():
    problems = run_in_child(_limits)
    assert not problems, "\n".join(f"{what}: {problem}" for what, problem in problems[:10])


def _constructor_arguments(rng: np.random.Generator, kind: str) -> tuple[dict, list]:
    """Random parameters of brgemm/unary/binary: (keyword arguments, the rules they break
    as (class, text naming the parameter))."""
    limits = ({"m": 1024, "n": 1024, "k": 2048, "br_size": 1024} if kind == "brgemm"
              else {"m": 2048, "n": 2048})
    kwargs, broken = {}, []
    for name, limit in limits.items():
        roll = rng.random()
        if roll < 0.1:
            value = _pick(rng, (0, -1, limit + 1, 2**64, -2**63))
            broken.append((ValueError, f"{name}={value}"))
        elif roll < 0.2:
            value = _pick(rng, (1.5, "4", None, True, 4.0, [4]))
            broken.append((TypeError, name))
        else:
            value = _pick(rng, (1, 2, 5, 17, limit, np.int64(3), np.uint16(7)))
        kwargs[name] = value
    if kind != "brgemm":
        ops = UNARY if kind == "unary" else BINARY
        roll = rng.random()
        if roll < 0.1:
            kwargs["op"] = _pick(rng, ("tanh", "RELU", "", "max " if kind == "binary" else "relu "))
            broken.append((ValueError, repr(kwargs["op"])))
        elif roll < 0.15:
            kwargs["op"] = _pick(rng, (3, None, b"relu", ("add",)))
            broken.append((TypeError, "op"))
        else:
            kwargs["op"] = _pick(rng, tuple(ops))
    if kind == "unary" and rng.random() < 0.5:
        kwargs["trans_b"] = _pick(rng, (True, False, True, False, 1, "yes", None))
        if not isinstance(kwargs["trans_b"], bool):
            broken.append((TypeError, "trans_b"))
    roll = rng.random()
    if roll < 0.1:
        # native complex is taken (where the op and its ISA's backend have it: see below)
        bad = ("float16", np.float16, "int32", ">c16", ">f8", ">f4")
        kwargs["dtype"] = _pick(rng, bad)
        broken.append((ValueError, "dtype"))
    elif roll < 0.15:
        kwargs["dtype"] = _pick(rng, (3, 4.0, ["float32"]))
        broken.append((TypeError, "dtype"))
    elif roll < 0.3:
        kwargs["dtype"] = _pick(rng, ("float32", np.float32, np.dtype("float32"), "f4",
                                      "float64", np.float64, np.dtype("float64"), "f8"))
    roll = rng.random()
    if roll < 0.1:
        kwargs["isa"] = _pick(rng, ("arm", "x86", "x86_64:sse2", "aarch64:sve", "X86_64"))
        broken.append((ValueError, "isa="))
    elif roll < 0.15:
        kwargs["isa"] = _pick(rng, (3, b"x86_64", ["aarch64"]))
        broken.append((TypeError, "isa="))
    elif roll < 0.5:
        kwargs["isa"] = _pick(rng, ("aarch64", "x86_64:avx2", "x86_64:avx512", "x86_64", None))
    if kind == "brgemm" and "dtype" not in kwargs and rng.random() < 0.1:
        # every backend's brgemm generates complex64 and complex128
        kwargs["dtype"] = _pick(rng, ("complex64", np.complex128, "c8", np.dtype("c16")))
    if kind != "brgemm" and "dtype" not in kwargs and rng.random() < 0.1:
        kwargs["dtype"] = _pick(rng, ("complex64", np.complex128, "c8", np.dtype("c16")))
        op = kwargs["op"]
        if isinstance(op, str) and op in ops and not ops[op].complex:
            broken.append((ValueError, f"{kind} {op} does not take complex"))
    return kwargs, broken


def _constructors(note) -> list:
    problems = []
    rng = np.random.default_rng((SEED, 1))
    for index in range(CONSTRUCTOR_CASES):
        kind = ("brgemm", "unary", "binary")[index % 3]
        kwargs, broken = _constructor_arguments(rng, kind)
        what = f"einjit.{kind}(**{kwargs!r})"
        note(what)
        try:
            kernel = getattr(einjit, kind)(**kwargs)
        except einjit.EinjitError as exc:
            if not any(isinstance(exc, cls) and text in str(exc) for cls, text in broken):
                problems.append(f"{what}: raised {type(exc).__name__}({exc}); it breaks "
                                f"{[(cls.__name__, text) for cls, text in broken]}")
            continue
        except Exception as exc:
            problems.append(f"{what}: raised {type(exc).__name__}, not an EinjitError: {exc}")
            continue
        if broken:
            problems.append(f"{what}: accepted; it breaks {broken}")
        elif kernel.isa != (kwargs.get("isa") or HOST).split(":")[0]:
            problems.append(f"{what}: made a kernel for {kernel.target}")
    return problems


def test_random_constructor_arguments_raise_by_the_rule_or_make_a_kernel():
    problems = run_in_child(_constructors)
    assert not problems, "\n".join(problems[:10])
