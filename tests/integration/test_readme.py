"""The README's Python examples run as written (issue 6: examples stay true)."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

pytestmark = pytest.mark.spark

README = Path(__file__).resolve().parents[2] / "README.md"
BLOCKS = re.findall(r"```python\n(.*?)```", README.read_text(), flags=re.S)


def test_the_readme_has_python_examples() -> None:
    assert BLOCKS


@pytest.mark.slow
@pytest.mark.parametrize("index", range(len(BLOCKS)))
def test_readme_example_runs(index: int, spark, tmp_path: Path, capsys) -> None:
    """Each block runs in a fresh folder (its namespace is ``sbqueue-data`` there)."""
    here = Path.cwd()
    os.chdir(tmp_path)
    try:
        exec(compile(BLOCKS[index], f"README.md python block {index}", "exec"), {})
    finally:
        os.chdir(here)
    assert "Traceback" not in capsys.readouterr().err
