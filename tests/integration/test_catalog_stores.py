"""A catalog that is safe on every store (issue 21 point 3, decision 020), on real Delta
tables: the Delta document store's conditional writes, and what a crash between a
definition and its tables leaves, on the local document store and on the Delta one (the
path object stores take, run here on a local folder with ``SBQUEUE_DOCUMENTS=delta``).
Last, the kill test: three admin processes (each its own JVM) create, update and delete
the same and different queues at once and are killed with SIGKILL at a random moment, on
both stores. Afterwards: no lost update (each process's last acknowledged update of an
entity is in it, or a later one of its own), no half entity (every listed queue has its
tables and moves a message; no data folder outside a definition), and the next call
finishes whatever a killed process left."""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
import textwrap
import threading
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.core.properties import QueueProperties
from sbqueue.exceptions import MessagingEntityAlreadyExistsError
from sbqueue.exceptions import MessagingEntityAlreadyExistsError as MessagingEntityExists
from sbqueue.exceptions import MessagingEntityNotFoundError as MessagingEntityNotFound
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.documents import DeltaDocumentStore, DocumentConflict

pytestmark = pytest.mark.spark
# the Delta document store makes each catalog read a Spark query and each write a MERGE:
# tens of seconds a test on two busy cores, so those run with --full
STORES = ("local", pytest.param("delta", marks=pytest.mark.slow))


@pytest.mark.slow  # a Delta catalog write is seconds; the unit tests hold the rule
def test_delta_store_writes_only_over_the_version_read(spark, tmp_path) -> None:
    """The condition is in the MERGE: a writer holding an old version is refused by the
    table, and concurrent read-modify-writes from threads keep every increment."""
    store = DeltaDocumentStore(spark, str(tmp_path / "root"))
    store.create("d/x.json", {"n": 0})
    found = store.read_versioned("d/x.json")
    assert found is not None
    store.replace("d/x.json", {"n": 1}, expected=found[1])
    with pytest.raises(DocumentConflict):
        store.replace("d/x.json", {"n": 99}, expected=found[1])
    with pytest.raises(DocumentConflict):
        store.delete("d/x.json", expected=found[1])
    assert store.read("d/x.json") == {"n": 1}
    assert store.delete("d/x.json", expected=store.read_versioned("d/x.json")[1])  # type: ignore[index]
    assert store.read("d/x.json") is None and not store.delete("d/x.json")


@pytest.mark.slow
def test_delta_store_keeps_every_concurrent_increment(spark, tmp_path) -> None:
    """Two threads read-modify-write one document by conditional MERGEs: Delta aborts one
    of two commits over the same file, the re-run no longer matches, the loser re-reads."""
    store = DeltaDocumentStore(spark, str(tmp_path / "root"))
    store.create("d/x.json", {"n": 0})

    def increment(times: int) -> None:
        done = 0
        while done < times:
            read = store.read_versioned("d/x.json")
            assert read is not None
            try:
                store.replace("d/x.json", {"n": read[0]["n"] + 1}, expected=read[1])
                done += 1
            except DocumentConflict:
                continue

    workers = [threading.Thread(target=increment, args=(3,)) for _ in range(2)]
    for w in workers:
        w.start()
    for w in workers:
        w.join(300)
    assert store.read("d/x.json") == {"n": 6}  # 2 x 3: no increment lost


def works(client: ServiceBusClient, queue: str) -> bool:
    """A message sent to ``queue`` comes back: the entity has its tables."""
    with client.get_queue_sender(queue) as sender:
        sender.send_messages(ServiceBusMessage(f"probe {queue}"))
    with client.get_queue_receiver(queue, max_wait_time=5) as receiver:
        got = receiver.receive_messages(max_message_count=1)
        for message in got:
            receiver.complete_message(message)
    return [str(m) for m in got] == [f"probe {queue}"]


@pytest.mark.parametrize("store", STORES)
def test_s1_7_a_create_cut_short_is_no_entity_and_is_finished(store, spark, namespace_root,
                                                             monkeypatch) -> None:
    """A create killed after its definition (marked creating) and before its tables: no
    read, list or lookup sees the queue; the next create of the name finishes it (and
    reports it existing, S1.7); it then works."""
    monkeypatch.setenv("SBQUEUE_DOCUMENTS", store)
    admin = ServiceBusAdministrationClient(namespace_root, spark=spark)
    catalog = admin.namespace.catalog
    assert type(catalog.documents).__name__.lower().startswith(store)
    half = catalog.create("queue", QueueProperties(name="half"))  # what the crash left
    assert not (Path(namespace_root) / "entities" / half.entity_id).exists()
    with ServiceBusClient(namespace_root, spark=spark) as client:
        assert admin.list_queues() == []
        for lookup in (lambda: admin.get_queue("half"),
                       lambda: admin.get_queue_runtime_properties("half"),
                       lambda: admin.update_queue({"name": "half"}, max_delivery_count=3),
                       lambda: client.namespace.entity("half")):
            with pytest.raises(MessagingEntityNotFound):
                lookup()
        with pytest.raises(MessagingEntityExists):
            admin.create_queue("half", max_delivery_count=4)
        finished = admin.get_queue("half")
        assert finished.entity_id == half.entity_id and finished.max_delivery_count == 10
        assert [q.name for q in admin.list_queues()] == ["half"] and works(client, "half")


@pytest.mark.parametrize("store", STORES)
def test_s15_1_a_delete_cut_short_is_gone_and_never_blocks_a_create(store, spark,
                                                                   namespace_root,
                                                                   monkeypatch) -> None:
    """A delete killed after marking the definition deleting and before its tables were
    dropped: the entity (a topic: with its subscriptions) is gone at once; creating the
    name again finishes the delete and makes a new, empty entity."""
    monkeypatch.setenv("SBQUEUE_DOCUMENTS", store)
    admin = ServiceBusAdministrationClient(namespace_root, spark=spark)
    old = admin.create_queue("q")
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("q").send_messages(ServiceBusMessage("old"))
        catalog = admin.namespace.catalog
        catalog.mark_deleting("queue", "q")  # what the crashes left
        catalog.mark_deleting("topic", "t")
        assert admin.list_queues() == [] and admin.list_topics() == []
        with pytest.raises(MessagingEntityNotFound):
            admin.list_subscriptions("t")
        with pytest.raises(MessagingEntityNotFound):
            client.namespace.entity("t/Subscriptions/s")
        with pytest.raises(MessagingEntityNotFound):  # a second delete finishes the first
            admin.delete_queue("q")
        assert catalog.pending("queue", "q") is None
        assert not (Path(namespace_root) / "entities" / old.entity_id).exists()
        new = admin.create_queue("q")
        assert new.entity_id != old.entity_id and works(client, "q")  # not "old"
        admin.create_topic("t")
        assert admin.list_subscriptions("t") == []  # the old topic's went with it
        assert catalog.entities("subscription", every=True) == []


@pytest.mark.parametrize("store", STORES)
def test_s1_7_concurrent_updates_of_different_fields_are_all_kept(store, spark,
                                                                  namespace_root,
                                                                  monkeypatch) -> None:
    """Two admin clients update different properties of one queue at the same time, many
    times: each one's last value is stored (no update lost to the other's stale copy)."""
    monkeypatch.setenv("SBQUEUE_DOCUMENTS", store)
    first = ServiceBusAdministrationClient(namespace_root, spark=spark)
    first.create_queue("q")
    second = ServiceBusAdministrationClient(namespace_root, spark=spark)
    rounds = 6 if store == "local" else 3

    def run(admin: ServiceBusAdministrationClient, field: str) -> None:
        for n in range(1, rounds + 1):
            value = 100 + n if field == "max_delivery_count" else str(n)
            admin.update_queue({"name": "q"}, **{field: value})

    workers = [threading.Thread(target=run, args=(first, "max_delivery_count")),
               threading.Thread(target=run, args=(second, "user_metadata"))]
    for w in workers:
        w.start()
    for w in workers:
        w.join(600)
    stored = first.get_queue("q")
    assert (stored.max_delivery_count, stored.user_metadata) == (100 + rounds, str(rounds))


PROCESSES = 3
NAMES = ["shared-0", "shared-1", *(f"own-{i}" for i in range(PROCESSES))]

CHILD = textwrap.dedent(
    """
    import json, os, random, signal, sys, threading, time
    from datetime import timedelta
    from sbqueue.exceptions import (MessagingEntityAlreadyExistsError,
                                    MessagingEntityNotFoundError)
    from sbqueue.management import ServiceBusAdministrationClient
    root, me, log_path, seed = sys.argv[1], int(sys.argv[2]), sys.argv[3], int(sys.argv[4])
    rng = random.Random(seed)
    admin = ServiceBusAdministrationClient(root)
    admin.namespace  # Spark started
    def kill():
        os.kill(os.getpid(), signal.SIGKILL)
    timer = threading.Timer(rng.uniform(3, 12), kill)  # runs from the first acknowledgement
    names = ["shared-0", "shared-1", f"own-{me}"]
    def field(n):
        return [{"max_delivery_count": 100 + n}, {"user_metadata": str(n)},
                {"default_message_time_to_live": timedelta(seconds=1000 + n)}][me]
    n, stop = 0, time.monotonic() + 90
    with open(log_path, "a") as log:
        while time.monotonic() < stop:
            name = rng.choice(names)
            op = rng.choices(["create", "update", "delete"], [2, 6, 1])[0]
            try:
                if op == "create":
                    record = {"op": op, "id": admin.create_queue(name).entity_id}
                elif op == "update":
                    n += 1
                    props = admin.update_queue({"name": name}, **field(n))
                    record = {"op": op, "id": props.entity_id, "n": n}
                else:
                    admin.delete_queue(name)
                    record = {"op": op}
            except (MessagingEntityAlreadyExistsError, MessagingEntityNotFoundError):
                continue
            log.write(json.dumps({**record, "name": name, "me": me}) + "\\n")
            log.flush()
            os.fsync(log.fileno())
            if not timer.is_alive():
                timer.start()
    """
)


def value_of(props: QueueProperties, me: int) -> int:
    """The number process ``me`` last wrote into its own field of ``props``."""
    if me == 0:
        return props.max_delivery_count - 100
    if me == 1:
        return int(props.user_metadata or -1)
    ttl = props.default_message_time_to_live
    return int(ttl.total_seconds()) - 1000 if ttl < timedelta(days=1) else -1


def run_children(root: str, tmp_path: Path, store: str) -> list[dict[str, Any]]:
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = {**os.environ, "SBQUEUE_DOCUMENTS": store, "SBQUEUE_SPARK_MASTER": "local[1]",
           "PYTHONPATH": os.pathsep.join(sys.path)}
    logs = [tmp_path / f"acks-{i}.jsonl" for i in range(PROCESSES)]
    children = [subprocess.Popen([sys.executable, str(script), root, str(i), str(logs[i]),
                                  str(i + 17 * len(store))], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
                for i in range(PROCESSES)]
    for child in children:
        _, err = child.communicate(timeout=600)
        assert child.returncode in (0, -9), err[-3000:]
    return [json.loads(line) for log in logs if log.exists()
            for line in log.read_text().splitlines() if line.strip()]


@pytest.mark.slow
@pytest.mark.parametrize("store", ["local", "delta"])
def test_s1_7_killed_admin_processes_lose_no_update_and_leave_no_half_entity(
        store, spark, namespace_root, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("SBQUEUE_DOCUMENTS", store)
    admin = ServiceBusAdministrationClient(namespace_root, spark=spark)
    admin.create_queue("shared-0")
    admin.create_queue("shared-1")
    acks = run_children(namespace_root, tmp_path, store)
    assert [a for a in acks if a["op"] == "update"], acks  # the processes did work

    catalog = admin.namespace.catalog
    left = [(q.name, catalog.pending("queue", q.name)[0])  # type: ignore[index]
            for q in catalog.entities("queue", every=True)
            if catalog.pending("queue", q.name) is not None]
    listed = {q.name: q for q in admin.list_queues()}
    print(f"{store}: {len(acks)} acknowledged operations "
          f"({sum(a['op'] == 'update' for a in acks)} updates); left unfinished: {left}")
    for name, props in listed.items():  # no lost update
        for me in range(PROCESSES):
            acked = [a["n"] for a in acks if a["op"] == "update" and a["name"] == name
                     and a["id"] == props.entity_id and a["me"] == me]
            if acked:
                assert value_of(props, me) >= max(acked), (store, name, me, acked, props)
    with ServiceBusClient(namespace_root, spark=spark) as client:
        for name in listed:  # no half entity: every listed queue works
            assert works(client, name), (store, name, left)
            admin.get_queue_runtime_properties(name)
        for name in NAMES:  # the next call finishes what a killed process left
            with contextlib.suppress(MessagingEntityAlreadyExistsError):
                admin.create_queue(name)
        assert sorted(q.name for q in admin.list_queues()) == sorted(NAMES), left
        assert len(catalog.entities("queue", every=True)) == len(NAMES), left
        for name in set(NAMES) - set(listed):
            assert works(client, name), (store, name, left)
    named = {q.entity_id for q in admin.list_queues()}
    folders = {p.name for p in (Path(namespace_root) / "entities").iterdir()}
    assert folders <= named, (store, folders - named, left)  # no data outside a definition
