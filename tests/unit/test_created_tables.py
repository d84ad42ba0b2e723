"""An empty table's first commit and checksum written on the driver (decision 026): the
files alone, no Spark (the comparison with Spark's own is tests/integration/
test_table_create.py)."""

from __future__ import annotations

import json
from pathlib import Path

from sbqueue.engine.schema import INBOX_PROPERTIES, INBOX_PROTOCOL, INBOX_SCHEMA
from sbqueue.store import created
from sbqueue.store.objects import LocalFiles

ZERO = f"{0:020d}"


def _make(path: Path) -> bool:
    return created.create_here(str(path), INBOX_SCHEMA, ["partition_id", "segment"],
                               INBOX_PROPERTIES, INBOX_PROTOCOL)


def _actions(path: Path) -> dict[str, dict[str, object]]:
    lines = (path / "_delta_log" / f"{ZERO}.json").read_text().splitlines()
    return {k: v for line in lines for k, v in json.loads(line).items()}


def test_the_first_creator_wins_and_the_second_finds_its_table(tmp_path) -> None:
    assert _make(tmp_path / "t") is True
    first = _actions(tmp_path / "t")["metaData"]["id"]

    assert _make(tmp_path / "t") is False

    assert _actions(tmp_path / "t")["metaData"]["id"] == first
    assert sorted(p.name for p in (tmp_path / "t" / "_delta_log").iterdir()) == [
        f"{ZERO}.crc", f"{ZERO}.json"]  # no temporary file left


def test_row_tracking_names_its_columns_per_table(tmp_path) -> None:
    _make(tmp_path / "a")
    _make(tmp_path / "b")
    names = [{k: v for k, v in _actions(tmp_path / t)["metaData"]["configuration"].items()
              if k.startswith("delta.rowTracking.")} for t in ("a", "b")]
    assert len(names[0]) == 2 and set(names[0].values()).isdisjoint(names[1].values())


def test_a_checksum_a_crash_left_unwritten_is_written_by_the_next_create(tmp_path) -> None:
    _make(tmp_path / "t")
    crc = tmp_path / "t" / "_delta_log" / f"{ZERO}.crc"
    written = json.loads(crc.read_text())
    crc.unlink()

    assert _make(tmp_path / "t") is False

    again = json.loads(crc.read_text())
    assert again == written  # the same state, from the commit on disk


def test_a_table_made_elsewhere_gets_no_checksum_from_here(tmp_path) -> None:
    _make(tmp_path / "t")
    log = tmp_path / "t" / "_delta_log"
    (log / f"{ZERO}.crc").unlink()
    body = (log / f"{ZERO}.json").read_text().replace(created.ENGINE, "Apache-Spark/4.2.0")
    (log / f"{ZERO}.json").write_text(body)

    _make(tmp_path / "t")

    assert not (log / f"{ZERO}.crc").exists()


def test_a_checksum_that_cannot_be_written_leaves_the_table(tmp_path, monkeypatch) -> None:
    def refuse(self: LocalFiles, name: str, data: bytes) -> bool:
        if name.endswith(".crc"):
            raise OSError(28, "No space left on device")
        return real(self, name, data)
    real = LocalFiles.put_if_absent
    monkeypatch.setattr(LocalFiles, "put_if_absent", refuse)

    assert _make(tmp_path / "t") is True

    assert _actions(tmp_path / "t")["commitInfo"]["operation"] == "CREATE TABLE"


def test_the_stated_protocol_is_written_as_lists(tmp_path) -> None:
    _make(tmp_path / "t")
    assert _actions(tmp_path / "t")["protocol"] == {
        k: list(v) if isinstance(v, tuple) else v for k, v in INBOX_PROTOCOL.items()}
