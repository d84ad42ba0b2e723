"""The shape of the house (DESIGN layers; issue 18 point 3): checked on the source text.

- Imports point down: ``location`` (where a root lives, imports nothing of sbqueue) <
  ``spark`` < ``store`` < ``core`` < ``engine`` < ``client`` / ``management`` /
  ``datasource`` (the faces, side by side) < ``explorer`` (a face over the others).
- Only ``store`` and the two gateways (``engine.ledger``, ``engine.inbox``) open a Delta
  table, with Spark or on the driver (delta-rs); every other module asks them.
- A sequence number's layout is known only to ``core.sequence``; a sub-queue's four names
  only to ``core.subqueues``.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "sbqueue"
GATEWAYS = {"engine/ledger.py", "engine/inbox.py"}
LAYERS = ["location", "spark", "store", "core", "engine", "client", "management", "datasource",
          "explorer"]
FACES = {"client", "management", "datasource"}
DELTA_ACCESS = re.compile(
    r"DeltaTable|format\(\s*[\"']delta[\"']\s*\)|delta\.`|(?<![.\w])(guarded_merge|read_appended|"
    r"create_table|latest_version|earliest_version|commit_version)\(|\bdeltalake\b")


def _modules() -> list[tuple[str, str]]:
    return [(str(p.relative_to(PACKAGE)), p.read_text()) for p in sorted(PACKAGE.rglob("*.py"))]


def _imported(source: str) -> set[str]:
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


@pytest.mark.parametrize(("name", "source"), _modules(), ids=[n for n, _ in _modules()])
def test_imports_point_down(name: str, source: str) -> None:
    layer = name.split("/")[0].removesuffix(".py")
    if layer not in LAYERS:
        return  # the CLI, the jobs, the demo: on top of everything
    above = set(LAYERS[LAYERS.index(layer) + 1:])
    if layer in FACES:
        above -= FACES
    wrong = sorted(m for m in _imported(source)
                   if m.startswith("sbqueue.") and m.split(".")[1] in above)
    assert not wrong, f"{name} ({layer}) imports from above it: {wrong}"


def test_only_the_gateways_open_delta_tables() -> None:
    offenders = [name for name, source in _modules()
                 if not name.startswith(("store/", "spark/")) and name not in GATEWAYS
                 and DELTA_ACCESS.search(source)]
    assert not offenders, f"Delta opened outside store/ and the gateways: {offenders}"


def test_one_home_for_sequence_layout_and_sub_queue_names() -> None:
    shifts = re.compile(r"COUNTER_BITS|<<\s*48|>>\s*48")
    names = re.compile(
        r"[\"'](DeadLetter|TransferDeadLetter|deadletter|\$DeadLetterQueue)[\"']")
    homes = {"core/sequence.py", "engine/columns.py", "core/subqueues.py", "core/names.py",
             "client/enums.py"}
    spelled = [name for name, source in _modules() if name not in homes
               and (shifts.search(source) or names.search(source))]
    assert not spelled, f"sequence layout or sub-queue names outside their home: {spelled}"


def test_no_import_circle_and_no_module_over_the_limit() -> None:
    """Issue 43 point 4: the house by operation has no import circle (type-only imports
    count) and no module over ``house.MAX_LINES`` lines; ``python3 tests/house.py`` prints
    the counts."""
    import sys

    sys.path.insert(0, str(PACKAGE.parent / "tests"))
    try:
        import house
    finally:
        sys.path.pop(0)
    assert house.circles(house.imports()) == []
    over = [(lines, name) for lines, name in house.sizes() if lines > house.MAX_LINES]
    assert over == [], f"modules over {house.MAX_LINES} lines: {over}"
