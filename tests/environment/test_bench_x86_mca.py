"""benchmarks.x86_mca and benchmarks.llvm_mca: the K loops cut out of generated x86-64 BRGEMMs,
llvm-mca's report read back, the choice of llvm-mca per core, and the warning where the model
and a measurement on this host disagree. The parsing is checked on a captured llvm-mca report
(fixtures/), and again on a live run where llvm-mca is installed."""

import os
import re
import shutil
import stat
from pathlib import Path

import pytest

from benchmarks import llvm_mca, x86_mca
from einjit.backends.x86_64 import cpu
from einjit.backends.x86_64.blocking import TailMode, choose
from einjit.backends.x86_64.precision import precision

FIXTURES = Path(__file__).parent / "fixtures"
REPORT = FIXTURES / "llvm_mca_16_sapphirerapids.txt"
LOOP = FIXTURES / "x86_loop_8x4_float64.s"


def _check_loop(loop):
    """A loop as llvm-mca gets it: its label, then the body with no branch, then the
    conditional branch back to the label."""
    assert loop.body[0] == f"{llvm_mca.LABEL}:"
    assert re.fullmatch(rf"j(ne|nz|g|a|b|l|ae|ge) {llvm_mca.LABEL}", loop.body[-1]), loop.body[-1]
    assert not any(line.startswith("j") for line in loop.body[1:-1])


def _plain_blocks(variant, mca_cpu, dtype, shape):
    """{"rows x cols": FMAs a k-step} of the plan's blocks that take one k-step an iteration
    with an FMA per vector of A and column of B (a masked or overlapped tail vector, or none;
    no packed, dot, paired or quad tails)."""
    target = x86_mca.core_target(variant, mca_cpu)
    chosen, panels = choose(*shape, target, dtype)
    lanes = chosen.lanes(precision(dtype).bytes)
    return {f"{p.vectors * lanes - (lanes - p.tail_rows if p.tail_rows else 0)}x{cols}":
            p.vectors * cols for p in panels for _, cols in p.runs()
            if p.mode in (TailMode(), TailMode(overlap=True))}


# (variant, llvm-mca cpu, dtype, kernel): Intel and AMD code of both variants and dtypes,
# batches, masked AVX-512 tails (M = 25, 17), an overlapped AVX2 tail (M = 30) and a dot one
# (M = 25)
CASES = [
    ("avx512", "sapphirerapids", "float32", (64, 64, 64, 1)),
    ("avx512", "skylake-avx512", "float64", (64, 64, 64, 1)),
    ("avx512", "icelake-server", "float32", (25, 25, 64, 16)),
    ("avx512", "znver4", "float32", (64, 64, 64, 1)),
    ("avx512", "znver4", "float64", (17, 16, 64, 32)),
    ("avx2", "znver3", "float32", (64, 64, 64, 1)),
    ("avx2", "icelake-server", "float64", (12, 48, 64, 16)),
    ("avx2", "znver4", "float32", (30, 30, 64, 1)),
    ("avx2", "znver4", "float32", (25, 30, 64, 1)),
    # blocks alike in their accumulators and vectors of A: an overlapped tail (24x4 and 22x4),
    # a packed one (16x6 and 12x8, one vector of A and 4 rows packed two columns a vector)
    ("avx2", "skylake-avx512", "float32", (46, 64, 64, 1)),
    ("avx512", "znver4", "float32", (28, 64, 64, 1)),
]


@pytest.mark.parametrize("variant, mca_cpu, dtype, shape", CASES)
def test_the_k_loops_of_generated_kernels(variant, mca_cpu, dtype, shape):
    target = x86_mca.core_target(variant, mca_cpu)
    loops = x86_mca.kernel_loops(target, *shape, dtype)
    runs = x86_mca.block_runs(target, *shape, dtype)
    # a loop for every block shape of the plan, each named after one
    assert {loop.block for loop in loops} == {block for block, *_ in runs}
    plain = _plain_blocks(variant, mca_cpu, dtype, shape)
    assert plain, "the case should hold blocks of one k-step an iteration"
    for loop in loops:
        _check_loop(loop)
        assert loop.width == (256 if variant == "avx2" else loop.width)
        if loop.block in plain:                 # an FMA per accumulator, per vector and column
            assert loop.fmas == loop.accumulators == plain[loop.block], (loop.block, loop.body)


def test_the_fmas_of_the_main_blocks():
    """The main blocks as the plans have them now: 4 zmm x 6 columns on the Intel cores,
    1 zmm x 22 on Zen 4 (which splits a zmm FMA in halves), 3 ymm x 4 in AVX2."""
    for variant, mca_cpu, dtype, block, fmas in [
            ("avx512", "sapphirerapids", "float32", "64x6", 4 * 6),
            ("avx512", "skylake-avx512", "float64", "32x6", 4 * 6),
            ("avx512", "znver4", "float32", "16x22", 22),
            ("avx2", "znver3", "float32", "24x4", 3 * 4)]:
        loops = x86_mca.kernel_loops(x86_mca.core_target(variant, mca_cpu), 64, 64, 64, 1,
                                     dtype)
        assert [loop.fmas for loop in loops if loop.block == block][0] == fmas


def test_the_loop_of_a_tail_and_of_the_peak():
    # M = 17 for Sapphire Rapids: a block row of one zmm and a masked tail of one row
    loops = x86_mca.kernel_loops(x86_mca.core_target("avx512", "sapphirerapids"),
                                 17, 64, 64, 1, "float32")
    assert loops and all(loop.block.startswith("17x") and loop.width == 512 for loop in loops)
    for loop in loops:
        _check_loop(loop)
    peak = x86_mca.peak_body(256, "float64")
    assert len(peak) == x86_mca.PEAK_FMAS and all(x86_mca.FMA.match(line) for line in peak)
    assert {line.split()[1] for line in peak} == {f"ymm{i}," for i in range(12)}
    assert x86_mca.Loop("8x4", ("loop:", *peak, "jne loop")).shape == "ymm 8x4"


def test_an_a64_loop_is_cut_as_before():
    from benchmarks import aarch64_mca
    code = aarch64_mca.generate("brgemm", 16, 6, 64, 1)
    (body,) = aarch64_mca.innermost_loops(code)
    assert body[0] == "loop:" and body[-1] == "b.ne loop"
    assert not any(line.startswith("b") for line in body[1:-1])
    # 4 vectors x 6 columns a k-step, 4 k-steps an iteration
    assert sum(line.startswith("fmla") for line in body) == 4 * 6 * 4


def test_a_captured_report_is_parsed():
    report = llvm_mca.parse(REPORT.read_text())
    assert report == llvm_mca.Report(iterations=300, instructions=5400, cycles=1214,
                                     model="SKX")
    assert report.cycles_per_iteration == pytest.approx(1214 / 300)
    with pytest.raises(ValueError, match="Total Cycles"):
        llvm_mca.parse("Iterations: 300\nInstructions: 10\n")


@pytest.mark.parametrize("text, model", [
    ("Resources:\n[0]   - SKXDivider\n", "SKX"), ("Resources:\n[0]   - ICXDivider\n", "ICX"),
    ("Resources:\n[0]   - Zn4AGU0\n", "Zn4"), ("Resources:\n[0]   - N2UnitB\n", "N2UnitB"),
    ("no resources\n", "?")])
def test_the_scheduling_model_is_named_by_its_resources(text, model):
    assert llvm_mca.model_name(text) == model


@pytest.mark.skipif(shutil.which("llvm-mca-16") is None, reason="llvm-mca-16 not installed")
def test_a_live_report_is_parsed_as_the_captured_one():
    command = ["llvm-mca-16", "-mtriple=x86_64", "-mcpu=sapphirerapids"]
    assert llvm_mca.run(command, LOOP.read_text()) == llvm_mca.parse(REPORT.read_text())
    models = x86_mca.Models(["llvm-mca-16"])
    assert models.tool == dict.fromkeys(x86_mca.CPUS, "llvm-mca-16")
    models.run_all({("skylake-avx512", x86_mca.peak_body(512, "float32"))})
    # Skylake-SP's two 512-bit FMA pipes, as LLVM's tables have them
    assert models.peak("skylake-avx512", 512, "float32") == pytest.approx(2.0, rel=0.02)


def _fake_llvm_mca(folder, name, unknown=(), target=None):
    """An executable `name` in `folder` that prints the captured report, or llvm-mca's
    warning for a -mcpu in `unknown` (a link to `target` where given)."""
    path = folder / name
    if target is not None:
        path.symlink_to(folder / target)
        return str(path)
    cases = "".join(f'    *-mcpu={c}*) echo "\'{c}\' is not a recognized processor for this '
                    f'target (ignoring processor)" >&2 ;;\n' for c in unknown)
    cat = shutil.which("cat")               # the test's PATH holds the fakes alone
    path.write_text(f'#!/bin/sh\n{cat} > /dev/null\ncase "$*" in\n{cases}esac\n'
                    f'{cat} "{REPORT}"\n')
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_the_newest_llvm_mca_that_knows_a_cpu_is_chosen(tmp_path, monkeypatch):
    _fake_llvm_mca(tmp_path, "llvm-mca-14", unknown=("znver4",))
    _fake_llvm_mca(tmp_path, "llvm-mca-16", unknown=("icelake-server",))
    _fake_llvm_mca(tmp_path, "llvm-mca", target="llvm-mca-14")
    monkeypatch.setenv("PATH", str(tmp_path))
    assert llvm_mca.tools() == ["llvm-mca-16", "llvm-mca-14"]   # llvm-mca is llvm-mca-14
    models = x86_mca.Models()
    assert models.tool == {"skylake-avx512": "llvm-mca-16", "icelake-server": "llvm-mca-14",
                           "sapphirerapids": "llvm-mca-16", "znver3": "llvm-mca-16",
                           "znver4": "llvm-mca-16"}
    assert x86_mca.Models(["llvm-mca-14"]).tool["znver4"] is None


def test_a_cpu_no_llvm_mca_knows_is_said_so(tmp_path, monkeypatch):
    tool = _fake_llvm_mca(tmp_path, "llvm-mca-14", unknown=("znver4",))
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.setenv("EINJIT_BENCH_RESULTS", str(tmp_path / "results"))
    monkeypatch.setattr(x86_mca, "SHAPES", [(32, 32, 32, 1)])
    monkeypatch.setattr(x86_mca, "GRID_M", range(16, 18))
    monkeypatch.setattr(x86_mca, "host_cpu", lambda: "znver4")
    text = x86_mca.report(x86_mca.Models([os.path.basename(tool)]),
                          measure=lambda *kernel: pytest.fail("nothing to measure"),
                          progress=lambda line: None)
    assert "  llvm-mca-14 knows skylake-avx512, icelake-server, sapphirerapids, znver3; " \
           "not znver4" in text
    assert "unknown to every installed llvm-mca, not modelled: znver4" in text
    assert "no installed llvm-mca knows znver4; nothing compared" in text
    header = next(line for line in text.splitlines() if line.startswith("kernel"))
    assert "znver4" not in header and "sapphirerapids" in header
    assert (tmp_path / "results" / "x86_mca.txt").read_text() == text + "\n"
    rows = (tmp_path / "results" / "x86_mca.csv").read_text().splitlines()
    assert rows[0].startswith("variant,dtype,cpu,llvm_mca,model") and len(rows) > 1
    assert not any(",znver4," in row for row in rows)
    # no llvm-mca at all: a line saying so, not a failure
    assert "no llvm-mca is installed" in x86_mca.report(x86_mca.Models([]))
    assert "no llvm-mca is installed" in (tmp_path / "results" / "x86_mca.txt").read_text()


def test_model_and_measurement_disagreeing_by_more_than_10_points_warn():
    lines = x86_mca.disagreement_lines([("close", 95.0, 90.0), ("edge", 95.0, 85.0),
                                        ("slow", 95.0, 84.9), ("fast", 70.0, 85.5)])
    assert lines[0] == "  close: model 95.0%, measured 90.0% (-5.0 points)"
    assert lines[1] == "  edge: model 95.0%, measured 85.0% (-10.0 points)"
    assert lines[2].startswith("  WARNING slow: model 95.0%, measured 84.9% (-10.1 points): ")
    assert lines[3].startswith("  WARNING fast: model 70.0%, measured 85.5% (+15.5 points)")
    assert [line.startswith("  WARNING") for line in lines] == [False, False, True, True]


def test_the_host_core_maps_to_an_llvm_mca_cpu():
    assert set(x86_mca.HOST_CPUS) == set(cpu.MICROARCHS) - {"generic"}
    assert set(x86_mca.HOST_CPUS.values()) <= set(x86_mca.CPUS)
    assert x86_mca.HOST_CPUS["zen5"] == "znver4"
    assert all(x86_mca.HOST_CPUS[core] == mca_cpu for mca_cpu, core in x86_mca.CPUS.items())


@pytest.mark.skipif(shutil.which("llvm-mca-16") is None, reason="llvm-mca-16 not installed")
@pytest.mark.skipif(x86_mca.host_cpu() is None, reason="this host's core has no llvm-mca cpu")
def test_a_measurement_far_from_the_model_warns(monkeypatch):
    models = x86_mca.Models(["llvm-mca-16"])
    measured = []

    def measure(variant, dtype, m, n, k):
        measured.append((variant, dtype))
        return 40.0                          # far below any model's share of its peak
    lines = x86_mca.host_lines(models, measure)
    assert len(measured) == 2 * len(x86_mca.host_variants())
    assert len(lines) == 1 + len(measured)
    assert all(line.startswith("  WARNING ") for line in lines[1:])
    close = x86_mca.host_lines(models, lambda *kernel: float(
        re.search(r"model ([\d.]+)%", lines[1]).group(1)))
    assert not close[1].startswith("  WARNING")
