"""numpy's own einsum tests (numpy/_core/tests/test_einsum.py of the installed numpy, which its
wheel ships) with einjit.einsum in numpy.einsum's place (the numpy_einsum_swap plugin), run by
pytest in a child process; every test passes."""

import os
import subprocess
import sys
import xml.etree.ElementTree as ElementTree
from pathlib import Path

import numpy

FRONTEND_TESTS = Path(__file__).resolve().parent
REPO = FRONTEND_TESTS.parents[1]
NUMPY_TESTS = Path(numpy.__file__).resolve().parent / "_core" / "tests"


def run_suite(tmp_path) -> dict[str, str]:
    """Each test of numpy's test_einsum.py: 'passed', 'failed' (failure or error), 'skipped'."""
    suite = NUMPY_TESTS / "test_einsum.py"
    assert suite.is_file(), f"numpy {numpy.__version__} installed without its tests ({suite})"
    report = tmp_path / "report.xml"
    env = dict(os.environ, EINJIT_VERBOSE="0",
               PYTHONPATH=os.pathsep.join([str(REPO), str(FRONTEND_TESTS)]))
    # numpy's own conftest.py (above its tests, needing hypothesis) stays out: --confcutdir
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "numpy_einsum_swap",
         f"--confcutdir={NUMPY_TESTS}", f"--rootdir={NUMPY_TESTS}", f"--junitxml={report}",
         str(suite)], capture_output=True, text=True, env=env, cwd=tmp_path, timeout=900)
    assert report.is_file(), done.stdout[-4000:] + done.stderr[-4000:]
    outcomes = {}
    for case in ElementTree.parse(report).iter("testcase"):
        name = f"{case.get('classname')}.{case.get('name')}"
        kinds = {child.tag for child in case}
        outcomes[name] = "failed" if kinds & {"failure", "error"} else \
            "skipped" if "skipped" in kinds else "passed"
    return outcomes


def test_numpys_einsum_suite_passes_with_einjit(tmp_path):
    outcomes = run_suite(tmp_path)
    assert len(outcomes) > 50, outcomes
    failed = sorted(name for name, outcome in outcomes.items() if outcome == "failed")
    assert not failed, f"numpy's tests failing with einjit.einsum: {failed}"
    skipped = sorted(name for name, outcome in outcomes.items() if outcome == "skipped")
    assert not skipped, f"numpy's tests skipped: {skipped}"
