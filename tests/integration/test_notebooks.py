"""The notebooks (issue 9) run headless against a local namespace: each file is read as a
notebook (jupytext, percent cells) and executed in a Jupyter kernel (nbclient); the plots
they save must exist. The same files are Databricks source notebooks."""

from __future__ import annotations

from pathlib import Path

import jupytext
import pytest
from nbclient import NotebookClient

pytestmark = [pytest.mark.spark, pytest.mark.slow]
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PLOTS = {"quickstart": ["quickstart-partitions.png", "quickstart-throughput.png"],
         "operations": ["operations-maintenance.png"]}


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_notebook_runs_headless_and_saves_its_plots(name, tmp_path, monkeypatch) -> None:
    source = NOTEBOOKS / f"{name}.py"
    text = source.read_text()
    assert text.startswith("# Databricks notebook source\n")  # opens on Databricks
    assert text.count("# COMMAND ----------") == text.count("# %%") - 1
    notebook = jupytext.read(source, fmt="py:percent")
    monkeypatch.setenv("SBQUEUE_NAMESPACE", str(tmp_path / "ns"))
    monkeypatch.setenv("SBQUEUE_PLOTS", str(tmp_path))
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(tmp_path)}}).execute()
    jupytext.write(notebook, tmp_path / f"{name}.ipynb")  # the executed notebook, kept
    errors = [o for cell in notebook.cells for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    for plot in PLOTS[name]:
        assert (tmp_path / plot).stat().st_size > 1000, plot
