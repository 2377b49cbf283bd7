"""The checked array call (einjit.backends.array_call): one native function checks that each
operand is an ndarray of the type, dtype, ndim, shape and strides the plan was made for (and
an out= array's flags and bytes), runs the plan's nests one after another on the arrays'
data, intermediates in a frame on its stack, and returns 0; where an argument differs in
any of them it returns 1 and writes nothing. ContractExpression's calls and einsum's
repeated ones make it. Runs on the host and in the aarch64 lane."""

import numpy as np
import pytest

import einjit
from einjit.backends import ISAS, STACK_PROBE_BYTES, backend, resolve_target
from einjit.backends.array_call import (
    MAX_FRAME_BYTES,
    ArrayCall,
    ArrayLayout,
    NestCall,
    Source,
)
from einjit.disasm import disassemble
from einjit.runtime.arrays import ARRAY_FIELDS, ArrayFields
from einjit.runtime.host import host_isa

FIELDS = ArrayFields(type=8, data=16, nd=24, dims=32, strides=40, descr=56, flags=64)


def _layout(shape, strides):
    return ArrayLayout(id(np.ndarray), 0x7F00_0000_1234, 4, shape, strides)


def test_a_layouts_span_reaches_the_end_of_its_last_element():
    assert _layout((3, 5), (20, 4)).span == 60
    assert _layout((3, 5), (40, 4)).span == 100
    assert _layout((), ()).span == 4 and _layout((7, 2), (0, 4)).span == 8


NESTS = (NestCall(0x7FFF_1234_5678, 7, (Source("argument", 0, 0), Source("address", 0, 0x1000),
                                        Source("frame", 0, 64))),
         NestCall(0x7FFF_1234_9000, 1, (Source("frame", 0, 64), Source("argument", 1, 8192),
                                        Source("argument", 2, 0))))


def _lines(isa, call):
    code, entry = backend(isa).array_call(resolve_target(isa), call)
    assert entry == 16
    return [line.split(None, 2)[2] for line in disassemble(code, isa).splitlines()]


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("arguments, result", [
    ((_layout((3, 5), (20, 4)),), None),
    ((_layout((3, 5), (20, 4)), _layout((5, 7, 2), (56, 8, 4))), None),
    ((_layout((), ()), _layout((9,), (4,))), _layout((9, 9), (36, 4))),
    ((_layout((3, 5), (20, 4)),) * 5, _layout((), ())),
])
def test_every_field_is_compared_and_every_failure_returns_1(isa, arguments, result):
    lines = _lines(isa, ArrayCall(FIELDS, arguments, result, NESTS, 9000))
    first = ["mov eax, 1", "ret"] if isa == "x86_64" else ["mov x0, #1", "ret"]
    assert lines[:2] == first
    branches = [line for line in lines if line.startswith(("j", "b.")) and line != "jmp"]
    failures = [line for line in branches if line.endswith((" 0", " #0"))]
    # type, dtype and ndim, then each size and each stride, of each array checked; a result
    # given: its flags, and where its bytes meet each operand's
    checked = list(arguments) + ([result] if result else [])
    assert len(failures) == sum(3 + 2 * len(layout.shape) for layout in checked) + \
        (1 + len(arguments) if result else 0)
    kinds = {line.split()[0] for line in failures}
    expected = {"jne"} | ({"je", "ja"} if result else set()) if isa == "x86_64" else \
        {"b.ne"} | ({"b.eq", "b.hi"} if result else set())
    assert kinds == expected
    # the only other branches skip an operand whose bytes start past the result's end
    assert len(branches) - len(failures) == (len(arguments) if result else 0)
    assert lines[-1] == "ret"
    assert sum(line.startswith(("call", "blr")) for line in lines) == len(NESTS)
    # every failure is decided before the frame is set up (offset 0 returns at once)
    frame = next(i for i, line in enumerate(lines) if line in ("push rbp",) or
                 line.startswith("stp x29, x30"))
    assert all(lines.index(line) < frame for line in failures)


@pytest.mark.parametrize("isa", ISAS)
@pytest.mark.parametrize("frame", [0, 64, 4032, 4033, 9000, MAX_FRAME_BYTES])
def test_the_frame_is_taken_a_touched_page_at_a_time_and_64_aligned(isa, frame):
    lines = _lines(isa, ArrayCall(FIELDS, (_layout((3,), (4,)),), None, NESTS, frame))
    if isa == "x86_64":
        lowered = [int(line.split(", ")[1], 16) for line in lines if line.startswith("sub rsp")]
        touches = lines.count("mov qword ptr [rsp], rax")
        aligned = "and rsp, 0xffffffffffffffc0" in lines
    else:
        lowered = [int(line.split("#")[1], 16) for line in lines
                   if line.startswith(("sub sp, sp", "sub x9, sp"))]
        touches = lines.count("str xzr, [sp]")
        aligned = "and sp, x9, #0xffffffffffffffc0" in lines
    taken = lowered[1:] if isa == "x86_64" else lowered      # x86: the slots' sub first
    assert sum(taken) == frame and all(0 < step <= STACK_PROBE_BYTES - 64 for step in taken)
    assert touches == len(taken) and aligned == (frame > 0)


needs_host_code = pytest.mark.skipif(host_isa() is None or ARRAY_FIELDS is None,
                                     reason="runs generated code on numpy's probed arrays")

EXPRESSIONS = [("ij,jk->ik", [(37, 19), (19, 5)]), ("ij,jk->ik", [(64, 64), (64, 64)]),
               ("ij,jk->ik", [(1, 16), (16, 13)]), ("bij,bjk->bik", [(3, 7, 5), (3, 5, 6)]),
               ("i,i->", [(33,), (33,)]), ("ij,j->i", [(17, 40), (40,)]),
               ("ij,jk,kl->il", [(5, 7), (7, 3), (3, 4)]),
               ("ij,kj,kl->li", [(9, 8), (6, 8), (6, 11)]),
               ("abc,cd,de,ea->b", [(3, 4, 5), (5, 6), (6, 2), (2, 3)]),
               ("ij,jk,kl,lm,mn->in", [(4, 5), (5, 6), (6, 7), (7, 8), (8, 3)]),
               ("ijk->i", [(5, 6, 7)]), ("ij->ji", [(13, 21)]),
               ("ij,jk,kl->il", [(40, 40), (40, 40), (40, 40)])]


def _operands(shapes, dtype, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.standard_normal(shape).astype(dtype) for shape in shapes]


@needs_host_code
@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("equation, shapes", EXPRESSIONS)
def test_the_plans_arrays_run_the_steps_as_the_plans_program_does(dtype, equation, shapes):
    expr = einjit.contract_expression(equation, *shapes, dtype=dtype)
    call = expr._array_call
    assert call is not None
    operands = _operands(shapes, dtype)
    by_call, by_program = (np.full(expr.shape, np.nan, dtype) for _ in range(2))
    assert call(*map(id, operands), id(by_call)) == 0
    expr._prepared.plan.run_addresses([op.ctypes.data for op in operands],
                                      by_program.ctypes.data)
    np.testing.assert_array_equal(by_call, by_program)
    expected = np.einsum(equation, *[o.astype(np.float64) for o in operands])
    np.testing.assert_allclose(by_call, expected, rtol=1e-4, atol=1e-4)


@needs_host_code
def test_a_long_sum_in_chunks_reads_its_operands_at_their_offsets():
    a = _operands([(100003,)], "float32")[0]
    expr = einjit.contract_expression("i->", a.shape)
    plan = expr._prepared.plan
    assert len(plan.steps) > 1 and any(any(step.offsets) for step in plan.steps)
    out = np.full((), np.nan, np.float32)
    assert expr._array_call(id(a), id(out)) == 0
    reference = np.full((), np.nan, np.float32)
    plan.run([a], reference)
    np.testing.assert_array_equal(out, reference)


def _differing(a):
    """Arrays and objects that are not `a` as the plan takes it, each named."""
    class Sub(np.ndarray):
        pass
    big = np.zeros((a.shape[0], 2 * a.shape[1]), a.dtype)
    return {
        "transposed copy, F order": np.asfortranarray(a),
        "every other column": big[:, ::2],
        "another shape, same size": a.reshape(a.shape[::-1]).copy(),
        "one dim": a.ravel(),
        "three dims": a[None],
        "float64": a.astype(np.float64),
        "byte-swapped": a.astype(a.dtype.newbyteorder()),
        "a subclass": a.view(Sub),
        "a list": a.tolist(),
        "an int": 5,
        "None": None,
    }


@needs_host_code
@pytest.mark.parametrize("position", [0, 1, 2])
@pytest.mark.parametrize("kind", list(_differing(np.zeros((4, 6), np.float32))))
def test_an_operand_that_differs_makes_it_return_1_with_nothing_written(position, kind):
    shapes = [(6, 10), (10, 6), (6, 4)]
    expr = einjit.contract_expression("ij,jk,kl->il", *shapes)
    operands = _operands(shapes, "float32")
    operands[position] = _differing(operands[position])[kind]
    out = np.full((6, 4), np.nan, np.float32)
    assert expr._array_call(*map(id, operands), id(out)) == 1
    assert np.isnan(out).all()


@needs_host_code
@pytest.mark.parametrize("equation", ["ij->ji", "ij->i", "ij->"])
def test_one_operand_takes_two_arguments(equation):
    a = _operands([(13, 21)], "float32")[0]
    expr = einjit.contract_expression(equation, a.shape)
    out = np.full(expr.shape, np.nan, np.float32)
    assert expr._array_call(id(a), id(out)) == 0
    np.testing.assert_allclose(out, np.einsum(equation, a), rtol=1e-5, atol=1e-5)
    assert expr._array_call(id(a.T), id(out)) == 1


@needs_host_code
def test_plain_calls_take_it_and_calls_it_refuses_take_the_checked_path(monkeypatch):
    a, b = _operands([(24, 9), (9, 11)], "float32")
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape)
    native, returned = expr._array_call, []

    def recorded(*ids):
        returned.append(native(*ids))
        return returned[-1]
    monkeypatch.setattr(expr, "_array_call", recorded)
    for x, y in [(a, b), (np.asfortranarray(a), b), (a, b.astype(np.float64))]:
        np.testing.assert_allclose(expr(x, y), a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert returned == [0, 1, 1]
    with pytest.raises(einjit.EinsumValueError, match="takes 2 operands"):
        expr(a)
    assert len(returned) == 3


@needs_host_code
def test_no_array_call_where_a_step_runs_in_shares_or_the_frame_outgrows_its_bound(
        monkeypatch):
    monkeypatch.setenv("EINJIT_NUM_THREADS", "2")
    assert einjit.contract_expression("ij,jk->ik", (512, 512), (512, 512))._array_call is None
    monkeypatch.setenv("EINJIT_NUM_THREADS", "1")
    side = 96                            # intermediates of 96 x 96 floats: 36 KiB
    expr = einjit.contract_expression("ij,jk,kl->il", *[(side, side)] * 3)
    assert side * side * 4 > MAX_FRAME_BYTES and expr._array_call is None
    arrays = _operands([(side, side)] * 3, "float32")
    np.testing.assert_allclose(expr(*arrays), arrays[0].astype(np.float64) @ arrays[1] @
                               arrays[2], rtol=1e-4, atol=1e-3)


@needs_host_code
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_a_given_result_is_checked_for_its_layout_its_flags_and_its_bytes(dtype):
    """An expression's out= call: an out of the plan's layout, writable, sharing no byte
    with an operand is written; any other returns 1 with nothing written. Operands and out
    carved from one buffer end to end share no byte: the bounds are exact."""
    m, k, n = 5, 7, 6
    expr = einjit.contract_expression("ij,jk->ik", (m, k), (k, n), dtype=dtype)
    call = expr._out_call
    buffer = np.full(m * k + k * n + m * n + 1, np.nan, dtype)
    a, b = buffer[:m * k].reshape(m, k), buffer[m * k:m * k + k * n].reshape(k, n)
    a[...], b[...] = _operands([(m, k), (k, n)], dtype)
    out = buffer[m * k + k * n:-1].reshape(m, n)
    assert call(id(a), id(b), id(out)) == 0
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    assert np.isnan(buffer[-1])

    read_only = np.full((m, n), np.nan, dtype)
    read_only.flags.writeable = False
    shifted = buffer[m * k + k * n - 1:-2].reshape(m, n)        # its first element is b's last
    square = einjit.contract_expression("ij,jk->ik", (m, m), (m, m), dtype=dtype)
    x, y = _operands([(m, m), (m, m)], dtype)
    refused = [(call, a, b, read_only), (call, a, b, shifted),
               (call, a, b, np.full((n, m), np.nan, dtype).T),
               (call, a, b, np.full((m, n), np.nan, np.float16)),
               (call, a, b, np.full((m, n + 1), np.nan, dtype)[:, :n]),
               (call, a, b, [[0.0] * n] * m),
               (square._out_call, x, y, x), (square._out_call, x, y, y[::-1])]
    for function, left, right, result in refused:
        before = np.array(result, dtype=np.float64, copy=True)
        assert function(id(left), id(right), id(result)) == 1
        np.testing.assert_array_equal(np.asarray(result, np.float64), before)


@needs_host_code
def test_an_expressions_out_calls_take_it_and_the_refused_ones_compute_as_numpy():
    a, b, c = _operands([(9, 4), (4, 9), (9, 9)], "float32")
    expr = einjit.contract_expression("ij,jk->ik", a.shape, b.shape)
    out = np.full((9, 9), np.nan, np.float32)
    assert expr(a, b, out=out) is out
    np.testing.assert_allclose(out, a.astype(np.float64) @ b, rtol=1e-5, atol=1e-5)
    d = np.array(a @ b)
    assert expr(d[:, :4], b, out=d) is d                  # out meets an operand: a copy
    np.testing.assert_allclose(d, (a @ b)[:, :4].astype(np.float64) @ b, rtol=1e-4,
                               atol=1e-4)
    chain = einjit.contract_expression("ij,jk,kl->il", a.shape, b.shape, c.shape)
    expected = a.astype(np.float64) @ b @ c
    assert chain(a, b, c, out=out) is out
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4)
    e = c.copy()
    assert chain(a, b, e, out=e) is e                     # out is an operand
    np.testing.assert_allclose(e, expected, rtol=1e-4, atol=1e-4)
