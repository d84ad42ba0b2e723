"""Issue 44 point 7: a namespace on Azure Blob storage, as far as this machine allows:
Azurite (the storage emulator, from npm) on 127.0.0.1, served by the local executor.
delta-rs reads, the driver's commits put only where no blob is (obstore's conditional
put), the catalog as blobs, no JVM. No mock of a client library: the server speaks the
Blob API over HTTP, as an account would. Spark on ``az://`` (hadoop-azure) is not proven
here (decision 051)."""

from __future__ import annotations

from typing import Any

import pytest

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.management import ServiceBusAdministrationClient
from sbqueue.store.logfiles import has_commit, log_files

# An npm package installed once per machine and a server process: with the slow tests.
pytestmark = [pytest.mark.slow]


def test_s1_a_client_round_trip_on_azure_blob_runs_on_the_driver(az_root: str) -> None:
    """Create, send, receive, complete, count and delete on ``az://`` with the local
    executor: every operation served by delta-rs and the driver's commits (no session is
    given, none is started)."""
    from sender_race import drain

    admin = ServiceBusAdministrationClient(az_root)
    admin.create_queue("q", enable_partitioning=True, lock_duration="PT1M")
    assert Namespace(az_root).executor == "local"
    with ServiceBusClient(az_root) as client, client.get_queue_sender("q") as sender, \
            client.get_queue_receiver("q", max_wait_time=5) as receiver:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
        got = receiver.receive_messages(3)
        for message in got:
            receiver.complete_message(message)
    assert len(got) == 3
    assert admin.get_queue_runtime_properties("q").active_message_count == 2
    assert sorted(drain(az_root) + [str(m) for m in got]) == [f"m{i}" for i in range(5)]
    admin.delete_queue("q")
    assert [q.name for q in admin.list_queues()] == []


def test_senders_in_three_processes_lose_nothing_on_azure_blob(az_root: str,
                                                               tmp_path: Any) -> None:
    """Three processes send 10 batches each to one queue at once: each version is claimed
    by exactly one commit (a conditional put, ``If-None-Match: *``), so every row
    survives, once."""
    from sender_race import EXPECTED, drain, send_from_three_processes

    ServiceBusAdministrationClient(az_root).create_queue("q")
    send_from_three_processes(az_root, tmp_path)
    log = log_files(Namespace(az_root).entity("q").inbox.path)
    assert [v for v in range(40) if has_commit(log, v)] == list(range(31))
    assert sorted(drain(az_root)) == EXPECTED


def test_a_missing_container_is_one_clear_error(az_root: str) -> None:
    """S1.1: a root in a container that does not exist is one line naming it, nothing
    made."""
    from sbqueue.exceptions import ServiceBusConnectionError

    root = az_root.replace("sbq-test", "sbq-no-such-container")
    with pytest.raises(ServiceBusConnectionError) as err:
        ServiceBusAdministrationClient(root).create_queue("q")
    text = str(err.value)
    assert "container does not exist" in text and "\n" not in text
