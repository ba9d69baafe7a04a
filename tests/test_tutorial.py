"""docs/tutorial.ipynb run top to bottom in a fresh kernel, as a reader would run it.

Every cell of the tutorial asserts what it shows, so a cell error is a failed check. The kernel
is the ``python3`` kernel of the interpreter running pytest (jupyter_client starts a kernelspec
whose command is ``python`` with ``sys.executable``), and it works in a temporary directory.
"""

import os
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

REPOSITORY = Path(__file__).resolve().parents[1]
TUTORIAL = REPOSITORY / "docs" / "tutorial.ipynb"
CELL_TIMEOUT_SECONDS = 300
KERNEL_START_SECONDS = 120


def _code_cells(notebook):
    return [cell for cell in notebook.cells if cell.cell_type == "code"]


def test_the_committed_tutorial_is_valid_and_has_no_outputs():
    notebook = nbformat.read(TUTORIAL, as_version=4)
    assert all("id" in cell for cell in notebook.cells), "give every cell an id (nbformat 4.5)"
    nbformat.validate(notebook)
    assert notebook.metadata.kernelspec.name == "python3"
    cells = _code_cells(notebook)
    assert len(cells) > 10
    stale = [n for n, cell in enumerate(cells) if cell.outputs or cell.execution_count is not None]
    assert not stale, f"code cells {stale} carry outputs: clear them before committing"


def test_the_tutorial_runs_top_to_bottom(tmp_path, monkeypatch):
    monkeypatch.setenv("PYTHONPATH", os.pathsep.join(
        filter(None, [str(REPOSITORY), os.environ.get("PYTHONPATH")])))
    notebook = nbformat.read(TUTORIAL, as_version=4)
    notebook.cells.append(nbformat.v4.new_code_cell("import sys\nprint(sys.prefix)"))
    client = NotebookClient(notebook, kernel_name="python3", timeout=CELL_TIMEOUT_SECONDS,
                            startup_timeout=KERNEL_START_SECONDS,
                            resources={"metadata": {"path": str(tmp_path)}})
    client.execute()  # raises CellExecutionError, naming the cell, on the first failing cell

    cells = _code_cells(notebook)
    assert cells[-1].outputs[0]["text"].strip() == sys.prefix  # the interpreter running pytest
    outputs = [output for cell in cells for output in cell.outputs]
    assert not [output for output in outputs if output.output_type == "error"]
    shown = [output.get("data", {}) for output in outputs]
    html = [data["text/html"] for data in shown if "text/html" in data]
    assert any("<caption><b>LongHashMap</b>" in text for text in html)
    assert any("<caption><b>TreeMap</b>" in text for text in html)
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        pass
    else:
        assert any("image/png" in data for data in shown), "the capacity plot was not displayed"
    assert not list(tmp_path.iterdir()), "the tutorial left files in its working directory"
