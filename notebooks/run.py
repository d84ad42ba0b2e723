"""Run notebooks headless against a local namespace and keep what they made:

    python notebooks/run.py notebooks/quickstart.py notebooks/operations.py --out nb-out

Each ``.py`` file (a Databricks source notebook with jupytext percent cells) is read as a
notebook and executed in a Jupyter kernel; the executed ``.ipynb`` and the plots the
notebook saves go to ``--out``; the namespace is ``--out``/ns unless SBQUEUE_NAMESPACE is
set. Needs the test extras (jupytext, nbclient, ipykernel, matplotlib).
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import jupytext
from nbclient import NotebookClient


def run_notebook(source: Path, out: Path) -> Path:
    """Execute ``source`` with its outputs (plots) in ``out``; the executed notebook."""
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("SBQUEUE_NAMESPACE", str(out / "ns"))
    os.environ["SBQUEUE_PLOTS"] = str(out)
    notebook = jupytext.read(source, fmt="py:percent")
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": str(out)}}).execute()
    executed = out / f"{source.stem}.ipynb"
    jupytext.write(notebook, executed)
    return executed


def main() -> None:
    parser = argparse.ArgumentParser(description="Run sbqueue's notebooks headless.")
    parser.add_argument("notebooks", nargs="+", type=Path)
    parser.add_argument("--out", type=Path, default=Path("nb-out"))
    args = parser.parse_args()
    for source in args.notebooks:
        print(f"{source} -> {run_notebook(source, args.out)}", flush=True)


if __name__ == "__main__":
    main()
