"""Pictures of a benchmark run: PNG and SVG plots beside its CSVs, and summary.md linking them.

    python -m benchmarks.plots [DIR]      # default: benchmarks/results/ ($EINJIT_BENCH_RESULTS)

Each known CSV in the folder gets its figure (files it does not know are left alone):

- x86_gemm_<variant>.csv -> GEMM % of the FMA peak over M×N, one panel per K;
- x86_eltwise.csv        -> GiB/s of the element-wise kernels and of numpy over the size;
- tensor_operation.csv   -> GFLOPS (GiB/s for permutations) per case, speedup over peers;
- einsum.csv             -> GFLOPS of einjit and of each peer per case.

summary.md lists the figures (relative links, so the folder can be moved or committed as a
reference) after the run's summary.txt. matplotlib runs on its Agg backend: no display is
needed. scripts/bench installs matplotlib (the "plots" extra) and calls write_plots after the
run.
"""

from __future__ import annotations

import csv
import math
import sys
from pathlib import Path
from typing import Callable, Iterable

from .output import results_dir

FORMATS = ("png", "svg")


def _pyplot():
    import matplotlib
    matplotlib.use("Agg")           # files only: no display, same output everywhere
    import matplotlib.pyplot as plt
    return plt


def _number(text: str) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def read_rows(path: Path) -> list[dict[str, str]]:
    """The rows of a CSV as dicts. A row with more fields than the header (a case name with
    an unquoted comma) keeps its last fields for the last columns and joins the rest into
    the first; a row with fewer gets empty strings."""
    with open(path, newline="") as handle:
        rows = list(csv.reader(handle))
    if not rows:
        return []
    header, result = rows[0], []
    for row in rows[1:]:
        if not row:
            continue
        extra = len(row) - len(header)
        if extra > 0:
            row = [",".join(row[:extra + 1])] + row[extra + 1:]
        result.append(dict(zip(header, row + [""] * (len(header) - len(row)))))
    return result


def _save(fig, folder: Path, stem: str) -> list[Path]:
    paths = []
    for extension in FORMATS:
        path = folder / f"{stem}.{extension}"
        fig.savefig(path, dpi=110, bbox_inches="tight")
        paths.append(path)
    _pyplot().close(fig)
    return paths


# -- one figure per CSV ---------------------------------------------------------------------
def plot_gemm(path: Path, folder: Path) -> tuple[list[Path], str]:
    """Heat maps of % of peak over M (rows) × N (columns), one per K (br = 1 rows)."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if r.get("br") == "1"
            and _number(r.get("percent_of_peak")) is not None]
    if not rows:
        raise ValueError(f"{path}: no GEMM rows (br == 1 with percent_of_peak)")
    ks = sorted({int(r["k"]) for r in rows})
    ms = sorted({int(r["m"]) for r in rows})
    ns = sorted({int(r["n"]) for r in rows})
    fig, axes = plt.subplots(1, len(ks), figsize=(3.2 * len(ks) + 1, 3.6), squeeze=False,
                             sharey=True, layout="constrained")
    image = None
    for axis, k in zip(axes[0], ks):
        grid = [[math.nan] * len(ns) for _ in ms]
        for r in rows:
            if int(r["k"]) == k:
                grid[ms.index(int(r["m"]))][ns.index(int(r["n"]))] = float(r["percent_of_peak"])
        image = axis.imshow(grid, origin="lower", aspect="auto", vmin=0, vmax=100,
                            cmap="viridis", extent=(ns[0] - .5, ns[-1] + .5, ms[0] - .5,
                                                    ms[-1] + .5))
        axis.set_title(f"K = {k}")
        axis.set_xlabel("N")
    axes[0][0].set_ylabel("M")
    fig.colorbar(image, ax=list(axes[0]), label="% of FMA peak")
    variant = path.stem.removeprefix("x86_gemm_")
    fig.suptitle(f"GEMM {variant}: % of the measured FMA peak over M × N")
    best = max(rows, key=lambda r: float(r["percent_of_peak"]))
    return _save(fig, folder, path.stem), (
        f"GEMM ({variant}): % of peak over M×N for K in {ks}; best "
        f"{float(best['percent_of_peak']):.1f}% at {best['m']}×{best['n']}×{best['k']}")


def plot_eltwise(path: Path, folder: Path) -> tuple[list[Path], str]:
    """GiB/s over the matrix size: einjit's identity, relu, add (each variant) and numpy."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if not r["measure"].startswith("ratio")]
    series: dict[str, list[tuple[int, float]]] = {}
    for r in rows:
        if r["measure"] in ("identity", "relu", "add", "identity_T", "copy", "copy_T"):
            label = f"{r['who']} {r['measure']}"
            series.setdefault(label, []).append((int(r["size"]), float(r["value"])))
    if not series:
        raise ValueError(f"{path}: no bandwidth rows")
    fig, axis = plt.subplots(figsize=(7, 4))
    for label, points in sorted(series.items()):
        points.sort()
        style = "--" if label.startswith("numpy") else "-"
        axis.plot([p[0] for p in points], [p[1] for p in points], style, marker="o",
                  label=label)
    axis.set_xscale("log", base=2)
    axis.set_xlabel("matrix size (n × n)")
    axis.set_ylabel("GiB/s (read + written)")
    axis.set_title("element-wise kernels against numpy")
    axis.legend(fontsize=7, ncol=2)
    largest = max(p[0] for points in series.values() for p in points)
    return _save(fig, folder, path.stem), f"element-wise bandwidth up to {largest}², vs numpy"


def plot_tensor_operation(path: Path, folder: Path) -> tuple[list[Path], str]:
    """GFLOPS (GiB/s for permutations) per case, labelled with the speedup over the best peer."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if _number(r.get("gflops_or_gibs")) is not None
            and not r["case"].startswith("overhead")]
    if not rows:
        raise ValueError(f"{path}: no cases")
    fig, axis = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.2))
    values = [float(r["gflops_or_gibs"]) for r in rows]
    positions = range(len(rows))
    axis.barh(positions, values, color="#4c72b0")
    axis.set_yticks(list(positions), [r["case"] for r in rows], fontsize=8)
    axis.invert_yaxis()
    for y, (r, v) in enumerate(zip(rows, values)):
        speedup = _number(r.get("speedup_vs_best_peer"))
        if speedup is not None:
            axis.text(v, y, f" {speedup:.2f}× best peer", va="center", fontsize=7)
    axis.set_xlabel("GFLOPS (permutations: GiB/s)")
    axis.set_title("TensorOperation cases")
    return _save(fig, folder, path.stem), f"{len(rows)} TensorOperation cases"


def plot_einsum(path: Path, folder: Path) -> tuple[list[Path], str]:
    """Grouped bars: GFLOPS of einjit and of every peer (columns <peer>_s) per case."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if _number(r.get("gflop")) and _number(r.get("einjit_s"))]
    if not rows:
        raise ValueError(f"{path}: no einsum cases")
    peers = [c[:-2] for c in rows[0] if c.endswith("_s") and c != "einjit_s"]
    who = ["einjit"] + peers
    fig, axis = plt.subplots(figsize=(9, 0.5 * len(rows) * max(1, len(who)) / 2 + 1.5))
    height = 0.8 / len(who)
    for index, name in enumerate(who):
        rates = []
        for r in rows:
            seconds = _number(r.get(f"{name}_s"))
            rates.append(float(r["gflop"]) / seconds if seconds and seconds > 0 else 0.0)
        axis.barh([y + index * height for y in range(len(rows))], rates, height=height,
                  label=name)
    axis.set_yticks([y + 0.4 - height / 2 for y in range(len(rows))],
                    [r["case"] for r in rows], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("GFLOPS")
    axis.set_title("einsum: einjit against its peers")
    axis.legend(fontsize=8)
    ratios = [_number(r.get("speedup_vs_best_peer")) for r in rows]
    ratios = [r for r in ratios if r]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else math.nan
    return _save(fig, folder, path.stem), (
        f"einsum: {len(rows)} cases, geomean {geomean:.2f}× the best peer")


PLOTTERS: dict[str, Callable[[Path, Path], tuple[list[Path], str]]] = {
    "x86_gemm_*.csv": plot_gemm,
    "x86_eltwise.csv": plot_eltwise,
    "tensor_operation.csv": plot_tensor_operation,
    "einsum.csv": plot_einsum,
}


def write_plots(folder: Path | None = None, progress: Callable[[str], None] = print
                ) -> list[Path]:
    """Plot every known CSV in `folder` (default: results_dir()) and write summary.md; the
    paths written. A CSV whose figure fails is reported in summary.md, not raised."""
    folder = Path(folder or results_dir())
    written: list[Path] = []
    entries: list[tuple[str, list[Path]]] = []
    for pattern, plotter in PLOTTERS.items():
        for path in sorted(folder.glob(pattern)):
            try:
                paths, caption = plotter(path, folder)
            except (ValueError, KeyError) as exc:
                entries.append((f"{path.name}: no plot ({exc})", []))
                continue
            written += paths
            entries.append((caption, paths))
            progress(f"plot: {paths[0]}")
    summary = folder / "summary.md"
    summary.write_text(summary_markdown(folder, entries))
    return written + [summary]


def summary_markdown(folder: Path, entries: Iterable[tuple[str, list[Path]]]) -> str:
    lines = ["# einjit benchmark run", ""]
    text = folder / "summary.txt"
    if text.exists():
        lines += ["```", text.read_text().rstrip(), "```", ""]
    lines += ["## Figures", ""]
    for caption, paths in entries:
        if not paths:
            lines.append(f"- {caption}")
            continue
        png = next((p for p in paths if p.suffix == ".png"), paths[0])
        others = ", ".join(f"[{p.suffix[1:]}]({p.name})" for p in paths if p is not png)
        lines += [f"### {caption}", "", f"![{caption}]({png.name})", "",
                  f"{others}; data: [{png.stem}.csv]({png.stem}.csv)", ""]
    csvs = sorted(p.name for p in folder.glob("*.csv"))
    lines += ["## Tables", ""] + [f"- [{name}]({name})" for name in csvs]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    written = write_plots(Path(args[0]) if args else None)
    print(f"written: {written[-1]} and {len(written) - 1} figure files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
