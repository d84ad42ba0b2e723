"""A catalog that is safe on every store (issue 21 point 3, decision 020), the parts that
need no Spark: the definition states (``core.lifecycle``), the local store's conditional
writes (also across processes), and the catalog's re-applied updates and visibility rules
on a local folder. The Delta store's side and the kill tests are in
``tests/integration/test_catalog_stores.py``."""

from __future__ import annotations

import multiprocessing
from pathlib import Path
from typing import Any

import pytest

from sbqueue.core import lifecycle
from sbqueue.core.properties import QueueProperties
from sbqueue.engine import catalog as catalog_module
from sbqueue.engine.catalog import Catalog
from sbqueue.exceptions import (
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
    StorageConflictError,
)
from sbqueue.store.documents import DocumentConflict, LocalDocumentStore, delta_documents


# -- core.lifecycle -------------------------------------------------------------------------
def test_states_and_moves() -> None:
    assert lifecycle.state_of({}) == lifecycle.READY  # written before states existed
    creating = {"state": lifecycle.CREATING, "revision": 1}
    ready = lifecycle.moved(creating, lifecycle.READY)
    assert lifecycle.is_ready(ready) and ready["revision"] == 2
    assert not lifecycle.is_ready(creating) and not lifecycle.is_ready(None)
    deleting = lifecycle.moved(ready, lifecycle.DELETING)
    assert deleting["revision"] == 3
    with pytest.raises(ValueError, match="a deleting definition cannot become ready"):
        lifecycle.moved(deleting, lifecycle.READY)
    with pytest.raises(ValueError, match="'gone'"):
        lifecycle.state_of({"state": "gone"})
    assert lifecycle.revised({"a": 1}, a=2) == {"a": 2, "revision": 1}


# -- LocalDocumentStore: conditional writes -------------------------------------------------
def test_local_replace_and_delete_only_over_the_version_read(tmp_path: Path) -> None:
    store = LocalDocumentStore(tmp_path)
    store.create("d/x.json", {"v": 1})
    found = store.read_versioned("d/x.json")
    assert found is not None and found[0] == {"v": 1}
    store.replace("d/x.json", {"v": 2}, expected=found[1])  # the version read: written
    with pytest.raises(DocumentConflict):  # a second writer that read v1 loses
        store.replace("d/x.json", {"v": 3}, expected=found[1])
    with pytest.raises(DocumentConflict):
        store.delete("d/x.json", expected=found[1])
    assert store.read("d/x.json") == {"v": 2}
    newer = store.read_versioned("d/x.json")
    assert newer is not None and store.delete("d/x.json", expected=newer[1])
    with pytest.raises(DocumentConflict):  # gone: a conditional write cannot revive it
        store.replace("d/x.json", {"v": 4}, expected=newer[1])
    assert store.read("d/x.json") is None and store.list("d") == []


def _increment(folder: str, times: int) -> None:
    catalog = Catalog(LocalDocumentStore(Path(folder)), folder)
    for _ in range(times):
        catalog._modify("counter.json", lambda d: {"n": (d or {"n": 0})["n"] + 1}, "counter")


def test_local_increments_from_processes_are_all_kept(tmp_path: Path) -> None:
    """Four processes read-modify-write one document 25 times each: 100, none lost."""
    context = multiprocessing.get_context("fork")
    workers = [context.Process(target=_increment, args=(str(tmp_path), 25)) for _ in range(4)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(60)
        assert w.exitcode == 0
    assert LocalDocumentStore(tmp_path).read("counter.json") == {"n": 100}


# -- the catalog on a local folder -----------------------------------------------------------
@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(LocalDocumentStore(tmp_path), str(tmp_path))


def test_s1_7_a_creating_or_deleting_definition_is_no_entity(catalog: Catalog) -> None:
    props = catalog.create("queue", QueueProperties(name="Q"))
    assert catalog.pending("queue", "q") == ("creating", props)
    with pytest.raises(MessagingEntityNotFoundError):
        catalog.get_queue("q")
    assert catalog.list_queues() == [] and not catalog.queue_exists("q")
    assert [p.name for p in catalog.entities("queue", every=True)] == ["Q"]
    with pytest.raises(MessagingEntityAlreadyExistsError):  # the name is held (S1.7)
        catalog.create("queue", QueueProperties(name="q"))
    catalog.publish("queue", props)
    assert catalog.get_queue("q").entity_id == props.entity_id
    deleting, marked = catalog.mark_deleting("queue", "q")
    assert marked and deleting.entity_id == props.entity_id
    assert catalog.list_queues() == [] and catalog.pending("queue", "q") is not None
    _, marked = catalog.mark_deleting("queue", "q")
    assert not marked  # deleting already: a second delete finishes, not starts
    with pytest.raises(MessagingEntityNotFoundError, match=r"deleted .* while it was being"):
        catalog.publish("queue", props)  # a deleting definition never becomes ready
    assert not catalog.forget("queue", "q", None, "another-id")
    assert catalog.forget("queue", "q", None, props.entity_id)
    assert catalog.pending("queue", "q") is None
    catalog.create("queue", QueueProperties(name="q"))  # the name is free again


def test_s16_1_a_definition_read_again_is_the_stored_one(catalog: Catalog) -> None:
    """``get`` keeps the definition it made from a document (decision 052): a caller that
    sets a field changes only its own copy, and another process's change is read at
    once (S16.1)."""
    catalog.publish("queue", catalog.create("queue", QueueProperties(name="q")))
    first = catalog.get_queue("q")
    first.max_delivery_count = 99
    assert catalog.get_queue("q").max_delivery_count == 10
    other = Catalog(LocalDocumentStore(Path(catalog.root)), catalog.root)
    other.update("queue", "q", None, lambda p: _set(p, max_delivery_count=7))
    assert catalog.get_queue("q").max_delivery_count == 7


def test_an_update_that_lost_a_race_is_reapplied(catalog: Catalog) -> None:
    """Another writer changes the definition between this update's read and its write:
    the write is refused and the change re-applied to the newer version: both kept."""
    catalog.publish("queue", catalog.create("queue", QueueProperties(name="q")))
    other = Catalog(LocalDocumentStore(Path(catalog.root)), catalog.root)
    calls: list[int] = []

    def change(current: QueueProperties) -> QueueProperties:
        calls.append(current.max_delivery_count)
        if len(calls) == 1:  # the other writer gets in first
            other.update("queue", "q", None, lambda p: _set(p, user_metadata="other"))
        return _set(current, max_delivery_count=7)

    catalog.update("queue", "q", None, change)
    stored = catalog.get_queue("q")
    assert (stored.max_delivery_count, stored.user_metadata) == (7, "other")
    assert len(calls) == 2


def test_an_update_that_always_loses_is_refused_clearly(catalog: Catalog,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog_module.time, "sleep", lambda _s: None)
    catalog.publish("queue", catalog.create("queue", QueueProperties(name="q")))
    other = Catalog(LocalDocumentStore(Path(catalog.root)), catalog.root)
    turns: list[int] = []

    def change(current: QueueProperties) -> QueueProperties:
        turns.append(1)
        other.update("queue", "q", None, lambda p: _set(p, user_metadata=str(len(turns))))
        return _set(current, max_delivery_count=3)

    with pytest.raises(StorageConflictError, match=r"queue 'q'.*kept changing.*nothing"):
        catalog.update("queue", "q", None, change)
    assert catalog.get_queue("q").max_delivery_count != 3


def test_an_update_of_a_deleted_entity_does_not_revive_it(catalog: Catalog) -> None:
    props = catalog.create("queue", QueueProperties(name="q"))
    catalog.publish("queue", props)
    catalog.mark_deleting("queue", "q")
    with pytest.raises(MessagingEntityNotFoundError):
        catalog.update("queue", "q", None, lambda p: _set(p, max_delivery_count=2))
    catalog.forget("queue", "q", None, props.entity_id)
    with pytest.raises(MessagingEntityNotFoundError):
        catalog.replace("queue", QueueProperties(name="q"))
    assert catalog.documents.list("_sbqueue/entities") == []


def test_the_delta_switch_names_a_bad_value(monkeypatch: pytest.MonkeyPatch) -> None:
    assert not delta_documents("/tmp/x") and delta_documents("abfss://c@a/x")
    monkeypatch.setenv("SBQUEUE_DOCUMENTS", "delta")
    assert delta_documents("/tmp/x")
    monkeypatch.setenv("SBQUEUE_DOCUMENTS", "s3")
    with pytest.raises(ValueError, match="SBQUEUE_DOCUMENTS='s3'"):
        delta_documents("/tmp/x")


def _set(props: QueueProperties, **changes: Any) -> QueueProperties:
    for key, value in changes.items():
        setattr(props, key, value)
    return props


def test_an_admin_write_on_failing_storage_is_one_clear_error() -> None:
    """A create, update or delete whose catalog or tables cannot be written names the
    entity and the cause (decision 020; the rest of decision 019's 'not done')."""
    import errno

    from sbqueue.engine.storage_guard import definition_guarded
    from sbqueue.exceptions import StorageFailureError

    with pytest.raises(StorageFailureError, match=r"queue 'q'.*read-only; the update was not"), \
            definition_guarded("queue 'q'", "the update"):
        raise OSError(errno.EROFS, "Read-only file system")
    with pytest.raises(KeyError), definition_guarded("queue 'q'", "the update"):
        raise KeyError("x")
