"""The notebooks run top to bottom (their cells assert their own results).

On the host they run as a user runs them: through Jupyter's machinery (nbclient) in a real
IPython kernel (ipykernel), both installed into .venv by scripts/setup. Where those are
missing (the aarch64 lane has no Jupyter) that test is skipped and a plain check runs
instead: the code cells executed in order in this interpreter, which on arm64 runs the A64
kernels the notebook calls.
"""

import json
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
NOTEBOOKS = sorted((REPO / "notebooks").glob("*.ipynb"))

try:
    import ipykernel  # noqa: F401  (the kernel nbclient starts)
    import nbclient
    import nbformat
except ImportError:
    nbclient = None


@pytest.mark.slow
@pytest.mark.skipif(nbclient is None, reason="no Jupyter here (nbclient, ipykernel): "
                                             "scripts/setup installs them into .venv")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs_in_a_jupyter_kernel(path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(notebook, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(REPO)}})
    client.execute()      # raises CellExecutionError, with the cell's traceback, if one fails
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(cell.execution_count for cell in code)
    errors = [output for cell in code for output in cell.outputs
              if output.output_type == "error"]
    assert not errors


@pytest.mark.native
@pytest.mark.skipif(nbclient is not None, reason="the Jupyter kernel test runs these cells")
@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_code_cells_run_in_this_interpreter(path):
    code = [cell for cell in json.loads(path.read_text())["cells"] if cell["cell_type"] == "code"]
    assert code, f"{path.name} has no code cells"
    namespace = {}
    for number, cell in enumerate(code, 1):
        exec(compile("".join(cell["source"]), f"{path.name} code cell {number}", "exec"),
             namespace)
