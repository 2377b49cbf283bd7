"""Pictures of a benchmark run: PNG and SVG plots beside its CSVs, and summary.md linking them.

    python -m benchmarks.plots [DIR]      # default: benchmarks/results/ ($EINJIT_BENCH_RESULTS)

Each CSV the benchmarks write gets its figure, titled with its dtype and the reference its
figures are measured against (a CSV it does not know is named in summary.md as unplotted):

- x86_gemm_<variant>[_float64].csv -> GEMM % of the FMA peak over M×N, one panel per K
  (K = 1: % of the store bound);
- x86_eltwise[_float64].csv        -> GiB/s of every element-wise kernel and of numpy over
  the size, one panel per group (unary, unary transposed, binary) and code variant;
- tensor_operation.csv             -> GFLOPS (GiB/s for permutations) per case, speedup over
  the best peer;
- einsum[_float64].csv             -> GFLOPS of einjit and of each peer per case;
- matmul[_float64].csv             -> GFLOPS of einjit, numpy's @ and torch.matmul per shape,
  one panel per thread count.

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


def dtype_of(path: Path) -> str:
    """The dtype a result file holds: float64 where its name ends so, else float32."""
    return "float64" if path.stem.endswith("_float64") else "float32"


# -- one figure per CSV ---------------------------------------------------------------------
def plot_gemm(path: Path, folder: Path) -> tuple[list[Path], str]:
    """Heat maps over M (rows) × N (columns), one per K (br = 1 rows): % of the FMA peak, and
    for K = 1, where the CSV has it, % of the store bound (colour and caption alike)."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if r.get("br") == "1"
            and _number(r.get("percent_of_peak")) is not None]
    if not rows:
        raise ValueError(f"{path}: no GEMM rows (br == 1 with percent_of_peak)")
    ks = sorted({int(r["k"]) for r in rows})
    ms = sorted({int(r["m"]) for r in rows})
    ns = sorted({int(r["n"]) for r in rows})
    store_bound = any(_number(r.get("percent_of_store_bound")) is not None
                      for r in rows if r["k"] == "1")
    fig, axes = plt.subplots(1, len(ks), figsize=(3.2 * len(ks) + 1, 3.8), squeeze=False,
                             sharey=True, layout="constrained")
    image = None
    for axis, k in zip(axes[0], ks):
        column = "percent_of_store_bound" if k == 1 and store_bound else "percent_of_peak"
        grid = [[math.nan] * len(ns) for _ in ms]
        for r in rows:
            value = _number(r.get(column))
            if int(r["k"]) == k and value is not None:
                grid[ms.index(int(r["m"]))][ns.index(int(r["n"]))] = value
        image = axis.imshow(grid, origin="lower", aspect="auto", vmin=0, vmax=100,
                            cmap="viridis", extent=(ns[0] - .5, ns[-1] + .5, ms[0] - .5,
                                                    ms[-1] + .5))
        axis.set_title(f"K = {k}" + (": % of the store bound" if column != "percent_of_peak"
                                     else ""), fontsize=9)
        axis.set_xlabel("N")
    axes[0][0].set_ylabel("M")
    fig.colorbar(image, ax=list(axes[0]),
                 label="% of FMA peak" + (" (K = 1: of the store bound)" if store_bound else ""))
    dtype = dtype_of(path)
    variant = path.stem.removeprefix("x86_gemm_").removesuffix("_float64")
    fig.suptitle(f"GEMM {variant}, {dtype}: % of the one-core {dtype} FMA peak measured in "
                 f"the run (a JIT'd FMA loop)"
                 + ("; K = 1: % of the store bound (C's stores alone)" if store_bound else ""),
                 fontsize=10)
    best = max(rows, key=lambda r: float(r["percent_of_peak"]))
    return _save(fig, folder, path.stem), (
        f"GEMM ({variant}, {dtype}): % of the FMA peak over M×N for K in {ks}"
        + ("; K = 1 against the store bound" if store_bound else "") + f"; best "
        f"{float(best['percent_of_peak']):.1f}% at {best['m']}×{best['n']}×{best['k']}")


ELTWISE_GROUPS = ("unary", "unary, B transposed", "binary")
NUMPY_BESIDE = {"unary": ("copy", "relu"), "unary, B transposed": ("copy_T",),
                "binary": ("add",)}     # numpy's measures drawn in each group's panel


def _eltwise_group(measure: str, binary_ops: set[str]) -> str:
    if measure in binary_ops:
        return "binary"
    return "unary, B transposed" if measure.endswith("_T") else "unary"


def plot_eltwise(path: Path, folder: Path) -> tuple[list[Path], str]:
    """GiB/s over the matrix size of every element-wise kernel, one panel per group (unary,
    unary transposed, binary) and code variant, numpy's equivalents dashed in each; a size
    a series lacks breaks its line."""
    plt = _pyplot()
    from einjit import BINARY_OPS
    rows = [r for r in read_rows(path) if not r["measure"].startswith("ratio")
            and _number(r.get("value")) is not None]
    if not rows:
        raise ValueError(f"{path}: no bandwidth rows")
    sizes = sorted({int(r["size"]) for r in rows})
    value = {(r["who"], r["measure"], int(r["size"])): float(r["value"]) for r in rows}
    variants = sorted({r["who"] for r in rows} - {"numpy"}, reverse=True)
    if not variants:
        raise ValueError(f"{path}: no einjit kernels, numpy alone")
    fig, axes = plt.subplots(len(variants), len(ELTWISE_GROUPS), squeeze=False, sharey=True,
                             figsize=(5 * len(ELTWISE_GROUPS), 3.6 * len(variants)),
                             layout="constrained")
    kernels = 0
    for row, variant in enumerate(variants):
        measures = sorted({r["measure"] for r in rows if r["who"] == variant})
        for column, group in enumerate(ELTWISE_GROUPS):
            axis = axes[row][column]
            series = [(variant, m) for m in measures
                      if _eltwise_group(m, set(BINARY_OPS)) == group]
            kernels += len(series)
            series += [("numpy", m) for m in NUMPY_BESIDE[group]]
            for who, measure in series:
                points = [value.get((who, measure, size), math.nan) for size in sizes]
                if all(math.isnan(p) for p in points):
                    continue
                axis.plot(sizes, points, "--" if who == "numpy" else "-", marker="o",
                          markersize=3, label=f"numpy {measure}" if who == "numpy" else measure)
            axis.set_xscale("log", base=2)
            axis.set_xticks(sizes, [str(size) for size in sizes])
            axis.set_title(f"{variant}: {group}", fontsize=9)
            axis.set_xlabel("matrix size (n × n)")
            if axis.lines:
                axis.legend(fontsize=6, ncol=2)
        axes[row][0].set_ylabel("GiB/s (read + written)")
    dtype = dtype_of(path)
    fig.suptitle(f"element-wise kernels, {dtype}: GiB/s (read + written) against numpy's "
                 f"equivalents (dashed), measured in the same run", fontsize=10)
    return _save(fig, folder, path.stem), (
        f"element-wise bandwidth ({dtype}) of {kernels} kernels up to {sizes[-1]}², vs numpy")


def plot_tensor_operation(path: Path, folder: Path) -> tuple[list[Path], str]:
    """GFLOPS (GiB/s for permutations) per case, labelled with the speedup over the best peer."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if _number(r.get("gflops_or_gibs")) is not None
            and not r["case"].startswith("overhead")]
    if not rows:
        raise ValueError(f"{path}: no cases")
    fig, axis = plt.subplots(figsize=(8, 0.35 * len(rows) + 1.4))
    values = [float(r["gflops_or_gibs"]) for r in rows]
    positions = range(len(rows))
    axis.barh(positions, values, color="#4c72b0")
    axis.set_yticks(list(positions), [r["case"] for r in rows], fontsize=8)
    axis.invert_yaxis()
    for y, (r, v) in enumerate(zip(rows, values)):
        speedup = _number(r.get("speedup_vs_best_peer"))
        percent = _number(r.get("percent_of_peak"))
        label = (f" {percent:.0f}% of peak," if percent is not None else "") + \
            (f" {speedup:.2f}× best peer" if speedup is not None else "")
        axis.text(v, y, label, va="center", fontsize=7)
    axis.set_xlabel("GFLOPS (permutations: GiB/s)")
    axis.set_title("TensorOperation cases, float32: GFLOPS against the FMA peak of the cores "
                   "used; × the best of np.einsum, torch.einsum\n(permutations: GiB/s, × "
                   "numpy's copy of the transposed view)", fontsize=9)
    return _save(fig, folder, path.stem), f"{len(rows)} TensorOperation cases (float32)"


def plot_einsum(path: Path, folder: Path) -> tuple[list[Path], str]:
    """Grouped bars: GFLOPS of einjit and of every peer (columns <peer>_s) per case, einjit's
    labelled with its speed over the best peer and its share of the all-core peak."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if _number(r.get("gflop")) and _number(r.get("einjit_s"))]
    if not rows:
        raise ValueError(f"{path}: no einsum cases")
    peers = [c[:-2] for c in rows[0] if c.endswith("_s") and c != "einjit_s"]
    who = ["einjit"] + peers
    fig, axis = plt.subplots(figsize=(9, 0.12 * len(rows) * len(who) + 1.7))
    height = 0.8 / len(who)
    for index, name in enumerate(who):
        rates = []
        for r in rows:
            seconds = _number(r.get(f"{name}_s"))
            rates.append(float(r["gflop"]) / seconds if seconds and seconds > 0 else 0.0)
        axis.barh([y + index * height for y in range(len(rows))], rates, height=height,
                  label=name)
        if name == "einjit":
            for y, (r, rate) in enumerate(zip(rows, rates)):
                ratio, percent = (_number(r.get(c)) for c in ("speedup_vs_best_peer",
                                                               "percent_of_peak"))
                label = (f" {ratio:.2f}×" if ratio else "") + \
                    (f", {percent:.0f}% peak" if percent is not None else "")
                axis.text(rate, y, label, va="center", fontsize=6)
    axis.set_yticks([y + 0.4 - height / 2 for y in range(len(rows))],
                    [r["case"] for r in rows], fontsize=8)
    axis.invert_yaxis()
    axis.set_xlabel("GFLOPS (the flops of einjit's tree)")
    dtype = dtype_of(path)
    axis.set_title(f"einsum, {dtype}: einjit against its peers (labels: × the best peer, % of "
                   f"the all-core {dtype} FMA peak measured in the run)", fontsize=9)
    axis.legend(fontsize=8, loc="lower right")
    ratios = [_number(r.get("speedup_vs_best_peer")) for r in rows]
    ratios = [r for r in ratios if r]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else math.nan
    return _save(fig, folder, path.stem), (
        f"einsum ({dtype}): {len(rows)} cases, geomean {geomean:.2f}× the best peer")


def plot_matmul(path: Path, folder: Path) -> tuple[list[Path], str]:
    """One panel per thread count: GFLOPS of einjit and of each peer (columns <peer>_gflops)
    per shape, einjit's labelled with its speed over numpy's @ and its share of the FMA peak
    of the threads used."""
    plt = _pyplot()
    rows = [r for r in read_rows(path) if _number(r.get("einjit_gflops"))]
    if not rows:
        raise ValueError(f"{path}: no matmul shapes")
    who = ["einjit"] + [c[:-len("_gflops")] for c in rows[0]
                        if c.endswith("_gflops") and c != "einjit_gflops"]
    threads = sorted({r["threads"] for r in rows}, key=int)
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, axes = plt.subplots(1, len(threads), figsize=(5.5 * len(threads),
                                                      0.12 * len(shapes) * len(who) + 1.9),
                             squeeze=False, sharey=True)
    height = 0.8 / len(who)
    for axis, count in zip(axes[0], threads):
        mine = {r["shape"]: r for r in rows if r["threads"] == count}
        for index, name in enumerate(who):
            rates = [_number(mine[s].get(f"{name}_gflops")) or 0.0 if s in mine else 0.0
                     for s in shapes]
            axis.barh([y + index * height for y in range(len(shapes))], rates, height=height,
                      label=name)
            if name != "einjit":
                continue
            for y, (shape, rate) in enumerate(zip(shapes, rates)):
                if shape not in mine:
                    continue
                ratio, percent = (_number(mine[shape].get(c)) for c in ("ratio_vs_numpy",
                                                                         "percent_of_peak"))
                label = (f" {ratio:.2f}×" if ratio else "") + \
                    (f", {percent:.0f}% peak" if percent is not None else "")
                axis.text(rate, y, label, va="center", fontsize=6)
        axis.set_title(f"{count} thread{'s' if count != '1' else ''}", fontsize=9)
        axis.set_xlabel("GFLOPS")
        axis.margins(x=0.3)             # room for the labels right of the longest bar
    axes[0][0].set_yticks([y + 0.4 - height / 2 for y in range(len(shapes))], shapes,
                          fontsize=8)
    axes[0][0].invert_yaxis()
    fig.legend(*axes[0][0].get_legend_handles_labels(), loc="lower center", ncol=len(who),
               fontsize=8, bbox_to_anchor=(0.5, -0.06))
    dtype = dtype_of(path)
    fig.suptitle(f"matmul (M×K×N), {dtype}: einjit against numpy's @ (labels: × numpy's @, % "
                 f"of the {dtype} FMA peak of the threads used)", fontsize=9)
    ratios = [r for r in (_number(r.get("ratio_vs_numpy")) for r in rows) if r]
    geomean = math.exp(sum(map(math.log, ratios)) / len(ratios)) if ratios else math.nan
    return _save(fig, folder, path.stem), (
        f"matmul ({dtype}): {len(shapes)} shapes on {', '.join(threads)} threads, geomean "
        f"{geomean:.2f}× numpy's @")


PLOTTERS: dict[str, Callable[[Path, Path], tuple[list[Path], str]]] = {
    "x86_gemm_*.csv": plot_gemm,
    "x86_eltwise*.csv": plot_eltwise,
    "tensor_operation.csv": plot_tensor_operation,
    "einsum*.csv": plot_einsum,
    "matmul*.csv": plot_matmul,
}


def write_plots(folder: Path | None = None, progress: Callable[[str], None] = print
                ) -> list[Path]:
    """Plot every known CSV in `folder` (default: results_dir()) and write summary.md; the
    paths written. A CSV whose figure fails is reported in summary.md, not raised."""
    folder = Path(folder or results_dir())
    written: list[Path] = []
    entries: list[tuple[str, list[Path]]] = []
    known = {p for pattern in PLOTTERS for p in folder.glob(pattern)}
    entries += [(f"{path.name}: no plot (no plotter for this table)", [])
                for path in sorted(set(folder.glob("*.csv")) - known)]
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
