"""The notebooks run top to bottom (their cells assert their own results)."""

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path):
    code = [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
    assert code, f"{path.name} has no code cells"
    namespace = {}
    for number, cell in enumerate(code, 1):
        exec(compile("".join(cell["source"]), f"{path.name} code cell {number}", "exec"),
             namespace)
