"""The GEMM grid keeps each shape's best over its passes (a noisy machine takes more)."""

import itertools

import pytest

from benchmarks import x86_gemm


class ScriptedTimer:
    """A GemmTimer stand-in whose GFLOPS come from a script, pass after pass."""

    variant = "avx2"

    def __init__(self, gflops):
        self.values = itertools.cycle(gflops)
        self.calls = []

    def peak(self, seconds=0.02):
        return 100.0

    def gflops(self, m, n, k, br=1, **options):
        self.calls.append((m, n, k))
        return next(self.values)


@pytest.mark.parametrize("passes", [1, 2, 3])
def test_each_shape_keeps_its_best_pass(passes):
    sizes, k_values = [8, 9], [16]
    shapes = len(sizes) ** 2
    # pass p gives every shape 10 * p, except pass 1's third shape, which is the best of all
    script = [10.0 * p for p in range(1, passes + 1) for _ in range(shapes)]
    script[2] = 99.0
    timer, lines = ScriptedTimer(script), []
    best, peaks = x86_gemm.measure_grid(timer, sizes, k_values, lines.append, passes)
    assert len(timer.calls) == passes * shapes
    assert len(lines) == passes and lines[-1].split()[2] == f"{passes}/{passes},"
    percents = [best[m, n, 16][0] for m in sizes for n in sizes]
    assert percents == [10.0 * passes, 10.0 * passes, 99.0, 10.0 * passes]
    assert len(peaks) == passes * len(sizes)


def test_no_passes_is_refused(capsys):
    with pytest.raises(SystemExit) as stop:
        x86_gemm.main(["--passes", "0"])
    assert stop.value.code == 2
    assert "--passes 0" in capsys.readouterr().err


def test_complex_brgemm_lines_count_8_flops_against_the_real_parts_peak(monkeypatch):
    """The complex BRGEMMs: 8 flops a complex multiply-add, the FMA peak of the part's dtype,
    one line and one 85% target per dtype and shape."""
    assert x86_gemm.GemmTimer("avx2", "complex64").flops_per_step == 8
    assert x86_gemm.GemmTimer("avx2", "float32").flops_per_step == 2
    peaks = []
    monkeypatch.setattr(x86_gemm, "fma_peak_gflops",
                        lambda variant, seconds, dtype: peaks.append(dtype) or 100.0)
    timed = []

    def paired(timer, m, n, k, br, rounds):
        timed.append((timer.dtype, m, n, k, br))
        timer.peak()
        return 90.0
    monkeypatch.setattr(x86_gemm, "paired_percent", paired)
    verdict = x86_gemm.Verdict()
    lines = x86_gemm.complex_lines("avx2", verdict)
    assert set(peaks) == {"float32", "float64"}
    assert timed == [(dtype, 64, 64, 64, br) for dtype in ("complex64", "complex128")
                     for br in (1, 16)]
    assert len(lines) == 4 and all("90.0% of the float" in line for line in lines)
    assert [target.goal for target in verdict.targets] == [85] * 4


def test_operands_take_each_pitch_and_the_buffers_hold_them():
    """GemmTimer's operands at the pitches asked for: the kernel's arguments say them, the
    batch strides follow from them, and every buffer reaches its last column."""
    timer = x86_gemm.GemmTimer("avx2", "float32")
    (a, b, c), args = timer._operands(8, 4, 16, 2, ld_a=10, ld_b=20, ld_c=12)
    assert args[3:] == (10, 20, 12, 10 * 16, 20 * 4)
    assert (a.size, b.size, c.size) == (2 * 10 * 16, 2 * 20 * 4, 12 * 4)
    (a, b, c), args = timer._operands(8, 4, 16, 1)
    assert args[3:] == (8, 16, 8, 8 * 16, 16 * 4)


@pytest.mark.parametrize("dtype, n, copies", [("float32", 512, 144), ("float64", 256, 136)])
def test_far_c_lines_time_the_large_contractions_call_at_both_pitches(dtype, n, copies):
    """The far_c line: the 2048^3 plan's call (copies of A and B a line past M apart, C from
    beyond L2) at ld_c 2048 and 2064, each paired with the peak, both figures printed."""
    calls = []

    class Recorder:
        def peak(self, seconds=0.02):
            return 100.0

        def gflops(self, m, n, k, br=1, **options):
            calls.append(((m, n, k, br), options))
            return 90.0 if options["ld_c"] == 2048 else 95.0

    recorder = Recorder()
    recorder.dtype = dtype
    lines = x86_gemm.far_c_lines(recorder)
    assert {shape for shape, _ in calls} == {(128, n, 128, 1)}
    assert sorted({options["ld_c"] for _, options in calls}) == [2048, 2064]
    assert all(options["far_c"] and options["ld_a"] == options["ld_b"] == copies
               for _, options in calls)
    assert len(lines) == 1 and "2048: 90.0% of peak" in lines[0] and "2064: 95.0%" in lines[0]


class PlacementTimer(ScriptedTimer):
    """GFLOPS by where A lies: 50 line-aligned, 40 elsewhere."""

    dtype = "float32"

    def gflops(self, m, n, k, br=1, a_offset=x86_gemm.A_OFFSET, **options):
        self.calls.append((m, n, k, br, a_offset))
        return 50.0 if a_offset % 64 == 0 else 40.0


def test_split_loads_of_a_are_paired_against_a_line_aligned_a():
    """Each A_LINE_SHAPES line pairs A line-aligned against numpy's placement, in that order."""
    timer = PlacementTimer([])
    lines = x86_gemm.a_line_lines(timer)
    assert len(lines) == len(x86_gemm.A_LINE_SHAPES)
    for line, (m, n, k, br) in zip(lines, x86_gemm.A_LINE_SHAPES):
        assert f"{m}x{n}x{k} batch {br} with A line-aligned: 50.0%" in line, line
        assert "16 bytes past a line (A's vectors across lines): 40.0%" in line, line
    offsets = {call[-1] for call in timer.calls}
    assert offsets == {x86_gemm.A_OFFSET, x86_gemm.A_OFFSET - x86_gemm.A_OFFSET % 64}


def test_a_lies_where_the_timer_is_told():
    """_operands places A a_offset bytes past a page boundary, B and C where they always lie."""
    timer = x86_gemm.GemmTimer("avx2")
    for offset in (0, 16, 1024):
        (a, b, c), args = timer._operands(8, 8, 8, 1, a_offset=offset)
        assert a.ctypes.data % x86_gemm.PAGE == offset == args[0] % x86_gemm.PAGE
        assert b.ctypes.data % x86_gemm.PAGE == x86_gemm.B_OFFSET
        assert c.ctypes.data % x86_gemm.PAGE == x86_gemm.C_OFFSET
