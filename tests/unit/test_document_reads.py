"""A local namespace's documents read again only when their file changed (issue 45: an
entity's definition and fences were read from disk on every operation). Real files, no
Spark."""

from __future__ import annotations

import time
from pathlib import Path

from sbqueue.store import documents
from sbqueue.store.documents import LocalDocumentStore


def test_a_document_replaced_at_once_with_one_of_the_same_size_is_read_anew(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Within the file clock's grain a replacement may keep the size, the time and even
    the inode number (freed by the replace, then reused): what was read then is not kept.
    The stat here says what such a file system would (one inode, one time, one size)."""
    store = LocalDocumentStore(tmp_path)
    store.create("fences.json", {"unavailable": [3]})
    grain = time.time_ns()

    class Same:
        st_ino, st_mtime_ns, st_size = 7, grain, 20
    real = documents.os.stat
    monkeypatch.setattr(documents.os, "stat", lambda path, **kw: Same if str(path).endswith(
        "fences.json") and not kw else real(path, **kw))
    for p in (4, 5, 6, 7):
        assert store.read("fences.json") == {"unavailable": [p - 1]}
        store.replace("fences.json", {"unavailable": [p]})
    assert store.read("fences.json") == {"unavailable": [7]}


def test_a_settled_document_is_read_once_and_its_replacement_seen(
        tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    store = LocalDocumentStore(tmp_path)
    store.create("queue.json", {"lock": "PT1M"})
    time.sleep(documents._SETTLED_NS / 1e9 + 0.05)
    first, token = store.read_versioned("queue.json")  # type: ignore[misc]
    opened: list[str] = []
    read_bytes = Path.read_bytes

    def counted(path: Path) -> bytes:
        opened.append(path.name)
        return read_bytes(path)
    monkeypatch.setattr(Path, "read_bytes", counted)
    assert store.read_versioned("queue.json") == (first, token)
    again = store.read("queue.json")
    assert again == first and again is not first  # each caller its own copy
    assert opened == []
    store.replace("queue.json", {"lock": "PT2M"})  # the same size, a later time
    assert store.read("queue.json") == {"lock": "PT2M"} and opened == ["queue.json"]
    store.delete("queue.json")
    assert store.read("queue.json") is None
