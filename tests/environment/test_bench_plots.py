"""The harness's pictures: every CSV a run writes becomes a valid PNG (and SVG) of
non-trivial size titled with its dtype and reference, summary.md links each, and the progress
bar names the case measured. Synthetic CSVs in the formats the benchmarks write; no benchmark
runs here."""

import math
import struct
import xml.etree.ElementTree as ET

import pytest

pytest.importorskip("matplotlib", reason="the plots extra (scripts/setup installs it)")
from PIL import Image  # noqa: E402  (matplotlib depends on pillow)

from benchmarks import einsum, matmul, plots  # noqa: E402
from benchmarks.progress import progress_bar  # noqa: E402

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _write_run(folder):
    rows = ["m,n,k,br,gflops,percent_of_peak,percent_of_store_bound"]
    for k in (1, 64):
        for m in (8, 16, 24, 32):
            for n in (8, 16, 24, 32):
                percent = m * n * k / 1100
                store = f"{50 + m:.1f}" if k == 1 else ""   # K = 1: against the store bound
                rows.append(f"{m},{n},{k},1,{2.5 * percent:.2f},{percent:.1f},{store}")
    rows.append("32,32,32,16,,97.0")                      # a batched row: no grid cell
    (folder / "x86_gemm_avx2.csv").write_text("\n".join(rows) + "\n")
    (folder / "x86_gemm_avx512_float64.csv").write_text("\n".join(rows) + "\n")
    eltwise = ["size,who,measure,value"]
    for size in (50, 512, 2048):
        for who, measure, value in (("numpy", "copy", 40), ("avx2", "identity", 50),
                                    ("avx2", "relu", 45), ("numpy", "relu", 15),
                                    ("avx2", "sigmoid_T", 9), ("avx2", "max", 30),
                                    ("numpy", "add", 20), ("avx2", "ratio identity/copy", 1.2)):
            if (measure, size) != ("relu", 512):         # a size the relu series lacks
                eltwise.append(f"{size},{who},{measure},{value * size ** 0.1:.4g}")
    (folder / "x86_eltwise.csv").write_text("\n".join(eltwise) + "\n")
    (folder / "x86_eltwise_float64.csv").write_text("\n".join(eltwise) + "\n")
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
    (folder / "einsum_float64.csv").write_text((folder / "einsum.csv").read_text())
    matmul = ("dtype,shape,kind,batch,m,k,n,threads,gflop,einjit_s,einjit_gflops,numpy_s,"
              "numpy_gflops,ratio_vs_numpy,percent_of_peak,rel_error\n")
    for threads in (1, 2):
        matmul += (f"float32,512x512x512,square,0,512,512,512,{threads},0.2684,0.002684,100.00,"
                   f"0.002000,134.22,0.745,80.0,1e-07\n"
                   f"float32,64x4096x64,skinny,0,64,4096,64,{threads},0.0336,0.000336,100.00,"
                   f"0.000672,50.00,2.000,40.0,1e-07\n")
    (folder / "matmul.csv").write_text(matmul)
    (folder / "matmul_float64.csv").write_text(matmul.replace("float32", "float64"))
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
    stems = ["x86_gemm_avx2", "x86_gemm_avx512_float64", "x86_eltwise", "x86_eltwise_float64",
             "tensor_operation", "einsum", "einsum_float64", "matmul", "matmul_float64"]
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
    assert "no plot" not in summary


def test_every_csv_the_benchmarks_write_has_a_plotter(tmp_path):
    names = ["x86_gemm_avx512.csv", "x86_gemm_avx2.csv", "x86_gemm_avx2_float64.csv",
             "x86_eltwise.csv", "x86_eltwise_float64.csv", "tensor_operation.csv"]
    names += [einsum.csv_name(dtype) for dtype in einsum.DTYPES]
    names += [matmul.csv_name(dtype) for dtype in matmul.DTYPES]
    for name in names:
        (tmp_path / name).write_text("")
    for name in names:
        assert any((tmp_path / name) in tmp_path.glob(p) for p in plots.PLOTTERS), name
    (tmp_path / "something_new.csv").write_text("a,b\n1,2\n")
    plots.write_plots(tmp_path, progress=lambda line: None)
    assert "something_new.csv: no plot (no plotter for this table)" in \
        (tmp_path / "summary.md").read_text()


class Drawn:
    """What one saved figure shows: its titles, heat-map arrays and line series."""

    def __init__(self, fig):
        self.titles = ([fig._suptitle.get_text()] if fig._suptitle else []) + \
            [axis.get_title() for axis in fig.axes]
        self.images = {axis.get_title(): axis.images[0].get_array() for axis in fig.axes
                       if axis.images}
        self.series = {(axis.get_title(), line.get_label()): list(line.get_ydata())
                       for axis in fig.axes for line in axis.lines}


@pytest.fixture(scope="module")
def drawn(tmp_path_factory):
    """One synthetic run plotted, and what each figure it saved shows: {stem: Drawn}."""
    folder = tmp_path_factory.mktemp("run")
    _write_run(folder)
    figures, save = {}, plots._save

    def capture(fig, folder, stem):
        figures[stem] = Drawn(fig)
        return save(fig, folder, stem)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(plots, "_save", capture)
        plots.write_plots(folder, progress=lambda line: None)
    return figures


def test_each_picture_names_its_dtype_and_reference(drawn):
    figures = drawn
    expected = {
        "x86_gemm_avx2": ("float32", "FMA peak"),
        "x86_gemm_avx512_float64": ("float64", "FMA peak"),
        "x86_eltwise": ("float32", "numpy"),
        "x86_eltwise_float64": ("float64", "numpy"),
        "tensor_operation": ("float32", "peak"),
        "einsum": ("float32", "best peer"),
        "einsum_float64": ("float64", "float64 FMA peak"),
        "matmul": ("float32", "numpy's @"),
        "matmul_float64": ("float64", "float64 FMA peak"),
    }
    assert sorted(figures) == sorted(expected)
    for stem, (dtype, reference) in expected.items():
        title = " ".join(figures[stem].titles)
        assert dtype in title and reference in title, (stem, title)
        other = "float64" if dtype == "float32" else "float32"
        assert other not in title, (stem, title)


def test_the_gemm_k1_panel_is_coloured_against_the_store_bound(drawn):
    figures = drawn
    images = figures["x86_gemm_avx2"].images
    assert sorted(images) == ["K = 1: % of the store bound", "K = 64"]
    k1 = images["K = 1: % of the store bound"]
    assert [round(float(v), 1) for v in k1[:, 0]] == [58.0, 66.0, 74.0, 82.0]   # 50 + M
    assert round(float(images["K = 64"][3, 3]), 1) == round(32 * 32 * 64 / 1100, 1)
    assert "store bound" in " ".join(figures["x86_gemm_avx2"].titles)


def test_the_eltwise_picture_shows_every_kernel_and_breaks_at_missing_sizes(drawn):
    figures = drawn
    series = figures["x86_eltwise"].series
    kernels = {label for (_, label) in series if not label.startswith("numpy")}
    assert kernels == {"identity", "relu", "sigmoid_T", "max"}
    assert ("avx2: unary, B transposed", "sigmoid_T") in series
    assert ("avx2: binary", "max") in series and ("avx2: binary", "numpy add") in series
    relu = series["avx2: unary", "relu"]
    assert len(relu) == 3 and math.isnan(relu[1]) and not math.isnan(relu[2])


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
