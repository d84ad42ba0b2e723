"""The notebooks (issue 9) run headless against a local namespace, as the README says:
``notebooks/run.py`` reads each file as a notebook (jupytext, percent cells) and executes
it in a Jupyter kernel (nbclient); the plots they save must exist. The same files are
Databricks source notebooks."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]
NOTEBOOKS = Path(__file__).resolve().parents[2] / "notebooks"
PLOTS = {"quickstart": ["quickstart-partitions.png", "quickstart-throughput.png"],
         "operations": ["operations-maintenance.png"]}


def _runner():  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location("notebook_runner", NOTEBOOKS / "run.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("name", sorted(PLOTS))
def test_notebook_runs_headless_and_saves_its_plots(name, tmp_path, monkeypatch) -> None:
    source = NOTEBOOKS / f"{name}.py"
    text = source.read_text()
    assert text.startswith("# Databricks notebook source\n")  # opens on Databricks
    assert text.count("# COMMAND ----------") == text.count("# %%") - 1
    monkeypatch.setenv("SBQUEUE_NAMESPACE", str(tmp_path / "ns"))
    monkeypatch.setenv("SBQUEUE_PLOTS", str(tmp_path))
    executed = _runner().run_notebook(source, tmp_path)
    import nbformat

    notebook = nbformat.read(executed, as_version=4)
    errors = [o for cell in notebook.cells for o in cell.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors
    assert any(o.get("output_type") == "stream" for cell in notebook.cells
               for o in cell.get("outputs", []))  # it ran and printed
    for plot in PLOTS[name]:
        assert (tmp_path / plot).stat().st_size > 1000, plot
