"""The harness's pictures: every known CSV of a run becomes a valid PNG (and SVG) of
non-trivial size, summary.md links each, and the progress bar names the case measured.
Synthetic CSVs in the formats the benchmarks write; no benchmark runs here."""

import struct
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("matplotlib", reason="the plots extra (scripts/setup installs it)")
from PIL import Image  # noqa: E402  (matplotlib depends on pillow)

from benchmarks import plots  # noqa: E402
from benchmarks.progress import progress_bar  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_run(folder):
    rows = ["m,n,k,br,gflops,percent_of_peak"]
    for k in (1, 64):
        for m in (8, 16, 24, 32):
            for n in (8, 16, 24, 32):
                percent = m * n * k / 1100
                rows.append(f"{m},{n},{k},1,{2.5 * percent:.2f},{percent:.1f}")
    rows.append("32,32,32,16,,97.0")                      # a batched row: no grid cell
    (folder / "x86_gemm_avx2.csv").write_text("\n".join(rows) + "\n")
    eltwise = ["size,who,measure,value"]
    for size in (50, 512, 2048):
        for who, measure, value in (("numpy", "copy", 40), ("avx2", "identity", 50),
                                    ("avx2", "relu", 45), ("numpy", "relu", 15),
                                    ("avx2", "ratio identity/copy", 1.2)):
            eltwise.append(f"{size},{who},{measure},{value * size ** 0.1:.4g}")
    (folder / "x86_eltwise.csv").write_text("\n".join(eltwise) + "\n")
    # case names with unquoted commas, as benchmarks/tensor_operation.py writes them
    (folder / "tensor_operation.csv").write_text(
        "case,gflops_or_gibs,percent_of_peak,speedup_vs_best_peer\n"
        "seeds GEMM, 1 thread,214.62,83.8,4.054\n"
        "seeds BRGEMM, 2 threads,207.74,53.6,4.643\n"
        "permutation trus -> turs,25.54,,0.971\n"
        "overhead 4x4x4,2.011,,2.426\n")
    (folder / "einsum.csv").write_text(
        "case,group,equation,shapes,gflop,einjit_s,einjit_gflops,percent_of_peak,best_peer,"
        "speedup_vs_best_peer,rel_error,np.einsum_s,opt_einsum_s\n"
        'tt OPT,course,af->a,"3x4 4x5",2.0000,0.010000,200.00,80.0,opt_einsum,2.000,1e-07,'
        "0.050000,0.020000\n"
        'matrix chain,public,ij->i,"8x8",1.0000,0.020000,50.00,20.0,np.einsum,0.500,1e-07,'
        "0.010000,0.030000\n"
        "overhead expr 4x4,,,,,0.000002,,,np.einsum,0.800,\n")
    (folder / "summary.txt").write_text("== a synthetic run\ntotal time 1 s\n")


def _check_png(path):
    data = path.read_bytes()
    assert data[:8] == PNG_SIGNATURE
    width, height = struct.unpack(">II", data[16:24])          # the IHDR chunk
    assert width >= 300 and height >= 200 and len(data) > 5000
    with Image.open(path) as image:
        image.verify()
    with Image.open(path) as image:
        colours = image.convert("RGB").getcolors(maxcolors=1 << 20)
        assert colours is None or len(colours) > 20            # a drawing, not a blank page


@pytest.mark.slow
def test_every_csv_becomes_a_valid_image_linked_from_summary(tmp_path):
    _write_run(tmp_path)
    written = plots.write_plots(tmp_path, progress=lambda line: None)
    stems = ["x86_gemm_avx2", "x86_eltwise", "tensor_operation", "einsum"]
    for stem in stems:
        _check_png(tmp_path / f"{stem}.png")
        ET.parse(tmp_path / f"{stem}.svg")                      # well-formed SVG
        assert tmp_path / f"{stem}.png" in written
    summary = (tmp_path / "summary.md").read_text()
    assert summary.startswith("# einjit benchmark run") and "== a synthetic run" in summary
    for stem in stems:
        assert f"]({stem}.png)" in summary and f"[svg]({stem}.svg)" in summary
    assert "best 59.6% at 32×32×64" in summary
    assert "geomean 1.00× the best peer" in summary             # sqrt(2.0 * 0.5)


def test_rows_with_unquoted_commas_keep_their_case_names(tmp_path):
    _write_run(tmp_path)
    rows = plots.read_rows(tmp_path / "tensor_operation.csv")
    assert [r["case"] for r in rows][:2] == ["seeds GEMM, 1 thread", "seeds BRGEMM, 2 threads"]
    assert rows[0]["speedup_vs_best_peer"] == "4.054" and rows[2]["percent_of_peak"] == ""


def test_a_csv_without_data_is_reported_not_raised(tmp_path):
    (tmp_path / "x86_gemm_avx512.csv").write_text("m,n,k,br,gflops,percent_of_peak\n")
    plots.write_plots(tmp_path, progress=lambda line: None)
    summary = (tmp_path / "summary.md").read_text()
    assert "x86_gemm_avx512.csv: no plot" in summary
    assert not (tmp_path / "x86_gemm_avx512.png").exists()


def test_progress_bar_names_the_case(capsys):
    pytest.importorskip("tqdm")
    with progress_bar(3, "GEMM test", enabled=True) as bar:
        for case in ("1x1x1", "2x2x2", "3x3x3"):
            bar.step(case)
        bar.write("a line between")
    captured = capsys.readouterr()
    assert "GEMM test" in captured.err and "3x3x3" in captured.err and "3/3" in captured.err
    assert "a line between" in captured.out + captured.err
    with progress_bar(2, "quiet", enabled=False) as bar:
        bar.step("x")
        bar.write("plain")
    captured = capsys.readouterr()
    assert captured.err == "" and captured.out == "plain\n" and bar.count == 1
