"""Generated code leaves the caller's floating-point exception flags as it found them.

Kernels raise IEEE exceptions (1/0, 0 * inf, overflow) and the CPU records them as sticky
flags (x86-64 MXCSR bits 0..5, AArch64 FPSR); every entry Python calls runs behind the
backend's guard_entry stub, which saves that status and restores it. Each test reads the
status with a two-instruction function placed in the same code arena, presets some flags,
calls a primitive or a TensorOperation whose unguarded body demonstrably raises a flag, and
finds the status word unchanged; the results still match numpy. Runs on the host and in the
aarch64 lane."""

import ctypes
import inspect

import numpy as np
import pytest

import einjit
from einjit.backends import ISAS, backend, place_code, resolve_target
from einjit.codegen import compile as compile_module
from einjit.codegen import compile_operation, workers
from einjit.disasm import disassemble
from einjit.ir import TensorOperation
from einjit.ir.reference import execute_reference
from einjit.ops import lookup
from einjit.runtime.host import host_isa
from einjit.runtime.threads import pool

from support import run_in_child

pytestmark = pytest.mark.skipif(host_isa() is None, reason="runs generated code")

# the sticky exception flags of the status word
FLAGS = {
    "x86_64": {"invalid": 0x01, "denormal": 0x02, "divide": 0x04, "overflow": 0x08,
               "underflow": 0x10, "inexact": 0x20},
    "aarch64": {"invalid": 0x01, "divide": 0x02, "overflow": 0x04, "underflow": 0x08,
                "inexact": 0x10, "denormal": 0x80, "saturation": 1 << 27},
}


def _status_functions(isa):
    """Code that returns the status word, and code that sets it from its argument."""
    if isa == "aarch64":
        from einjit.backends.aarch64 import encode as e

        def words(*ws):
            return b"".join(w.to_bytes(4, "little") for w in ws)
        return words(e.mrs(0, "fpsr"), e.ret()), words(e.msr("fpsr", 0), e.ret())
    from einjit.backends.x86_64 import encode as e
    from einjit.backends.x86_64.encode import RAX, RDI, RSP, Mem
    slot = Mem(RSP, disp=-8)     # the red zone
    return (e.stmxcsr(slot) + e.mov_rm(RAX, slot) + e.ret(),
            e.mov_mr(slot, RDI) + e.ldmxcsr(slot) + e.ret())


class Status:
    """Read and write this thread's FP status word; `flags` are the sticky bits in it."""

    def __init__(self, isa):
        self.flags = FLAGS[isa]
        self.mask = sum(self.flags.values())
        get_code, set_code = _status_functions(isa)
        target = resolve_target(isa)
        self._blocks = place_code(target, get_code), place_code(target, set_code)
        self.get = ctypes.CFUNCTYPE(ctypes.c_uint32)(self._blocks[0].address)
        self.put = ctypes.CFUNCTYPE(None, ctypes.c_uint64)(self._blocks[1].address)

    def with_flags(self, word, names):
        """`word` with exactly the named flags set (control bits kept)."""
        return word & ~self.mask | sum(self.flags[name] for name in names)


@pytest.fixture(scope="module")
def status():
    status = Status(host_isa())
    original = status.get()
    yield status
    status.put(original)


def presets(raised):
    """Flag sets to start from: none, and every other flag but the one the code raises
    (so a leak shows, and so does a flag the guard cleared)."""
    others = [name for name in FLAGS[host_isa()] if name != raised]
    return [(), tuple(others)]


def body_of(entry_address, argument_count):
    """The unguarded code behind an entry (what the guard calls)."""
    offset = _body_offset()
    return ctypes.CFUNCTYPE(None, *[ctypes.c_int64] * argument_count)(entry_address + offset)


def _body_offset():
    if host_isa() == "aarch64":
        from einjit.backends.aarch64.entry import BODY_OFFSET
    else:
        from einjit.backends.x86_64.entry import BODY_OFFSET
    return BODY_OFFSET


def assert_body_raises(status, flag, call):
    """Without the guard, `call` raises `flag`: the guard is what keeps the status."""
    word = status.get()
    status.put(status.with_flags(word, ()))
    call()
    raised = status.get()
    status.put(word)
    assert raised & status.flags[flag], f"{flag} not raised: status {raised:#x}"


# ---------------------------------------------------------------- the stub itself

@pytest.mark.parametrize("isa", ISAS)
def test_guard_entry_prepends_a_fixed_stub_and_keeps_the_body(isa):
    module = backend(isa)
    assert list(inspect.signature(module.guard_entry).parameters) == ["target", "code"]
    target = resolve_target(isa)
    body = module.generate_unary(target, "reciprocal", 19, 5, False)
    guarded = module.guard_entry(target, body)
    offset = len(guarded) - len(body)
    assert guarded[offset:] == body and offset % 64 == 0
    other = module.guard_entry(target, module.generate_binary(target, "div", 3, 2))
    assert other[:offset] == guarded[:offset]           # the same stub for every body
    lines = disassemble(guarded[:offset], isa).splitlines()
    assert not [line for line in lines if ".byte" in line or "invalid" in line]
    assert any(line.split()[-1] == "ret" for line in lines)


@pytest.mark.parametrize("isa", ISAS)
def test_kernels_run_their_generated_code_behind_the_guard(isa):
    target = resolve_target(isa)
    module = backend(isa)
    kernel = einjit.brgemm(8, 3, 5, 2, isa=isa)
    body = module.generate_brgemm(target, 8, 3, 5, 2)
    assert kernel.code == module.guard_entry(target, body)


def test_the_entries_python_calls_are_guarded():
    """What runs at a Kernel's address is its code (the guard, then the generated body); at a
    CompiledOperation's, the guard, then `code` (the nest as generated)."""
    kernel = einjit.unary("reciprocal", 6, 3)
    assert ctypes.string_at(kernel.address, len(kernel.code)) == kernel.code
    target = kernel.target
    body = backend(target.isa).generate_unary(target, "reciprocal", 6, 3, False)
    assert kernel.code == backend(target.isa).guard_entry(target, body)
    op, _, _ = _operations("float32")[1]
    compiled = compile_operation(op)
    offset = _body_offset()
    mapped = ctypes.string_at(compiled.address, offset + len(compiled.code))
    assert mapped == backend(target.isa).guard_entry(target, compiled.code)


# ---------------------------------------------------------------- primitives

def _array(value, shape, dtype):
    return np.full(shape, value, dtype, order="F")


# (kind, op, operand values, the flag the body raises)
PRIMITIVE_CASES = [
    ("unary", "reciprocal", (0.0,), "divide"),
    ("binary", "div", (1.0, 0.0), "divide"),
    ("unary", "square", (1e30,), "overflow"),
    ("binary", "mul", (0.0, np.inf), "invalid"),
]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("kind, name, values, raised", PRIMITIVE_CASES,
                         ids=[case[1] for case in PRIMITIVE_CASES])
def test_primitive_keeps_the_callers_flags(status, kind, name, values, raised, dtype):
    if dtype == "float64" and name == "square":
        values = (1e300,)
    m, n, ld = 13, 5, 16      # a row remainder, ld > m
    kernel = getattr(einjit, kind)(name, m, n, dtype=dtype)
    inputs = [_array(value, (ld, n), dtype) for value in values]
    inputs[0][m:] = 7.0       # rows past m: never read
    out = _array(-1.0, (ld, n), dtype)
    expected = out.copy()
    expected[:m] = lookup(name).reference(*(a[:m] for a in inputs))
    args = [*inputs, out, *[ld] * (len(inputs) + 1)]
    addresses = [a.ctypes.data for a in (*inputs, out)] + [ld] * (len(inputs) + 1)
    assert_body_raises(status, raised, lambda: body_of(kernel.address, len(addresses))(*addresses))
    for preset in presets(raised):
        word = status.with_flags(status.get(), preset)
        status.put(word)
        kernel(*args)
        after = status.get()
        assert after == word, f"{word:#x} before, {after:#x} after"
    np.testing.assert_array_equal(out, expected)


def test_brgemm_keeps_the_flags_and_gets_its_stack_arguments(status):
    """brgemm's batch strides are its 7th and 8th arguments (on the stack on x86-64): the
    guard hands them on, and the overflow of one product stays inside."""
    m, n, k, batch = 9, 4, 3, 3
    rng = np.random.default_rng(7)
    a = rng.uniform(-2, 2, (batch, k, m + 2)).astype(np.float32)    # A_i: ld_a = m + 2
    b = rng.uniform(-2, 2, (batch, n, k + 1)).astype(np.float32)    # B_i: ld_b = k + 1
    a[1, 0, 0] = b[1, 0, 0] = 1e20          # A_1[0, 0] * B_1[0, 0] overflows
    start = rng.uniform(-2, 2, (n, m)).astype(np.float32)             # C: ld_c = m
    expected = start.T.astype(np.float64)
    for i in range(batch):
        expected += a[i, :, :m].T.astype(np.float64) @ b[i, :, :k].T.astype(np.float64)
    expected[0, 0] = np.inf
    kernel = einjit.brgemm(m, n, k, batch)
    args = (m + 2, k + 1, m, k * (m + 2), n * (k + 1))
    addresses = [x.ctypes.data for x in (a, b, start.copy())]
    assert_body_raises(status, "overflow", lambda: body_of(kernel.address, 8)(*addresses, *args))
    for preset in presets("overflow"):
        c = start.copy()
        word = status.with_flags(status.get(), preset)
        status.put(word)
        kernel(a.ravel(), b.ravel(), c.ravel(), *args)     # 1-D views of the buffers
        assert status.get() == word
        np.testing.assert_allclose(c.T, expected, rtol=1e-5, atol=1e-4)


# ---------------------------------------------------------------- TensorOperations

def _operations(dtype):
    """(op, operand arrays, flag its body raises): an element-wise div by zero over a loop,
    and a gemm of zeros whose last touch takes the reciprocal."""
    m, n, outer = 7, 5, 3
    div = TensorOperation(dtype, "none", "div", "none", ("c", "c", "c"), ("seq", "prim", "prim"),
                          (outer, m, n), (m * n, 1, m), (m * n, 1, m), (m * n, 1, m))
    ones = np.ones(outer * m * n, dtype)
    zeros = np.zeros(outer * m * n, dtype)
    k = 4
    gemm = TensorOperation(dtype, "zero", "gemm", "reciprocal", ("m", "n", "k"),
                           ("prim", "prim", "prim"), (m, n, k), (1, 0, m), (0, k, 1), (1, m, 0))
    a = np.zeros(m * k, dtype)
    b = np.arange(k * n, dtype=dtype)
    return [(div, (ones, zeros, np.empty(outer * m * n, dtype)), "divide"),
            (gemm, (a, b, np.empty(m * n, dtype)), "divide")]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("case", [0, 1], ids=["div", "gemm-reciprocal"])
def test_tensor_operation_keeps_the_callers_flags(status, dtype, case):
    op, (in0, in1, out), raised = _operations(dtype)[case]
    expected = np.full_like(out, -1)
    with np.errstate(all="ignore"):
        execute_reference(op, in0, in1, expected)
    compiled = compile_operation(op)
    body = body_of(compiled.address, 5)
    addresses = [x.ctypes.data for x in (in0, in1, out)]
    assert_body_raises(status, raised,
                       lambda: body(*addresses, 0, compiled.plan.shared_iterations))
    for preset in presets(raised):
        out[:] = -1
        word = status.with_flags(status.get(), preset)
        status.put(word)
        op.execute(in0, in1, out)
        assert status.get() == word
        np.testing.assert_array_equal(out, expected)


def _python_pool_runner(monkeypatch, target):
    """run(function, argument tuples) on the Python pool, which then runs the op's shares."""
    monkeypatch.setattr(workers, "native_pool", lambda target: None)
    return pool.run


def _native_pool_runner(monkeypatch, target):
    """run(function, argument tuples) on the native pool's caller and workers (a ctypes
    callback as the nest: Python on the worker's own thread), which run the op's shares."""
    native = workers.native_pool(target)
    nest_type = ctypes.CFUNCTYPE(None, *[ctypes.c_uint64] * 5)

    def run(function, argument_lists):
        nest = nest_type(lambda *arguments: function(*arguments[:len(argument_lists[0])]))
        address = ctypes.cast(nest, ctypes.c_void_p).value
        native.run([(address, *args) + (0,) * (5 - len(args)) for args in argument_lists])
    return run


@pytest.mark.parametrize("runner", [_native_pool_runner, _python_pool_runner])
def test_threaded_operation_keeps_every_threads_flags(status, monkeypatch, runner):
    """Shares run on the caller and on a worker (native, or the Python pool where the native
    one is not available): both keep their flags. In a forked child: libffi may map the
    native runner's callback writable and executable, which test_arena rules out."""
    def child(note):
        compile_module.MIN_WORK_PER_THREAD = 0
        compile_module.compile_operation.cache_clear()
        m, n, outer = 8, 3, 4
        op = TensorOperation("float32", "none", "div", "none", ("c", "c", "c"),
                             ("shared", "prim", "prim"), (outer, m, n), (m * n, 1, m),
                             (m * n, 1, m), (m * n, 1, m), num_threads=2)
        assert len(compile_operation(op)._shares) == 2
        run = runner(monkeypatch, op.target)
        in0 = np.arange(outer * m * n, dtype=np.float32)
        in1 = np.zeros_like(in0)
        out = np.empty_like(in0)
        # once first: its one-time set-up runs Python's float arithmetic (the workers' spin
        # calibration), which may leave the inexact flag set; the runs below keep flags
        with np.errstate(divide="ignore", invalid="ignore"):
            op.execute(in0, in1, out)
        for preset in presets("divide"):
            word = status.with_flags(status.get(), preset)
            run(status.put, [(word,), (word,)])        # the caller and the worker
            op.execute(in0, in1, out)
            seen = []
            run(lambda *_: seen.append(status.get()), [(), ()])
            assert seen == [word, word]
        with np.errstate(divide="ignore", invalid="ignore"):
            np.testing.assert_array_equal(out, in0 / in1)

    run_in_child(child)
