"""Shared test setup. Tests live in one folder per layer (backends/<isa>, runtime, primitives,
ir, passes, frontend, ...); helpers they share are in support.py beside this file (the
primitives' test problems in brgemm_support.py and eltwise_support.py), which pytest puts on
sys.path because this conftest.py lives here.

Which tests run where (the one place this is decided; scripts/test applies it):

- `native`: the test generates, runs or inspects code for the machine it runs on, so its
  outcome depends on the code variant. scripts/test reruns exactly these in each further
  variant's run (`-m native`: x86-64 with the AVX2 path forced, the aarch64 lane). Every
  test under NATIVE_PATHS (among them the host ISA's backend folder) is `native`; in the
  other files a test is marked `@pytest.mark.native` where it runs generated code, plus a
  few smoke tests of each folder. The rest (the parser, the passes, the tree rewrites, the
  reference executor, the displays, the benchmark harness, the other ISA's encoders) runs
  once, on the host.
- `alone`: the test measures its own process (its mappings, its memory), which other tests
  before it in the same process disturb: scripts/test runs these in a pytest process of their
  own after the others (spread over pytest-xdist's workers). Set by ALONE_PATHS.
- `slow`: seconds even on the host; still run by scripts/test (`-m "not slow"` leaves them
  out of a quick local run).

Skips are summarized once at the end of a run, grouped by reason with their counts."""

import collections
import os

import pytest

from einjit.runtime.host import host_isa

TESTS = os.path.dirname(os.path.abspath(__file__))
# folders and files (relative to tests/) whose every test is `native`
NATIVE_PATHS = (
    "primitives", "codegen", f"backends/{host_isa()}",
    "backends/test_registry.py",
    "frontend/test_einsum_jit.py", "frontend/test_tree_execution.py",
    "ir/test_ir_execute.py",
    "runtime",
    "environment/test_lane_smoke.py", "environment/test_child_runner.py",
)

# test files whose every test is `alone`
ALONE_PATHS = ("runtime/test_kernel_churn.py",)


def _under(path: str, paths) -> bool:
    return any(path == top or path.startswith(top + "/") for top in paths)


def _is_native(path: str) -> bool:
    return _under(path, NATIVE_PATHS)


def pytest_ignore_collect(collection_path, config):
    """Under `-m native` (or `-m "native and ..."`), a test file outside NATIVE_PATHS that
    marks no test native is not even imported (collecting is slow under qemu)."""
    markexpr = config.getoption("markexpr")
    if not (markexpr == "native" or markexpr.startswith("native and ")) or \
            collection_path.suffix != ".py" or not collection_path.name.startswith("test_"):
        return None
    path = os.path.relpath(str(collection_path), TESTS).replace(os.sep, "/")
    if _is_native(path) or "pytest.mark.native" in collection_path.read_text():
        return None
    return True


@pytest.hookimpl(tryfirst=True)   # before -m selects by these marks
def pytest_collection_modifyitems(config, items):
    for item in items:
        path = os.path.relpath(str(item.path), TESTS).replace(os.sep, "/")
        if _is_native(path):
            item.add_marker(pytest.mark.native)
        if _under(path, ALONE_PATHS):
            item.add_marker(pytest.mark.alone)


def pytest_terminal_summary(terminalreporter):
    """One line per distinct skip reason with its count (pytest's -rs lists every location)."""
    reasons = collections.Counter()
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = report.longrepr
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        reasons[reason.removeprefix("Skipped: ")] += 1
    if not reasons:
        return
    terminalreporter.section("skipped, by reason")
    for reason, count in reasons.most_common():
        terminalreporter.write_line(f"{count:,} skipped: {reason}")
