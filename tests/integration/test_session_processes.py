"""S10.2, S10.3: two OS processes (own JVMs) competing for one session.

Each child tries to open a session receiver until it gets the session, holds it a few
seconds, and then either releases it (the first to get it) or dies holding it (the second,
``os._exit`` without closing). The test process then waits for the session: it gets it
only once the dead holder's lock has expired.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from datetime import timedelta

import pytest

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.exceptions import SessionCannotBeLockedError

pytestmark = [pytest.mark.spark, pytest.mark.slow]

LOCK_SECONDS = 15
HOLD_SECONDS = 6

CHILD = textwrap.dedent(
    """
    import json, os, sys, time
    from sbqueue import ServiceBusClient
    from sbqueue.exceptions import SessionCannotBeLockedError
    root, marker, start_at, hold = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4])
    client = ServiceBusClient(root)
    client.namespace.spark.range(1).count()
    while time.time() < start_at:
        time.sleep(0.01)
    refused = []
    while True:
        receiver = client.get_queue_receiver("contended", session_id="s")
        try:
            receiver.__enter__()
        except SessionCannotBeLockedError:
            refused.append(time.time())
            time.sleep(0.5)
            continue
        got = time.time()
        break
    time.sleep(hold)
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
        first = True
    except FileExistsError:
        first = False
    releasing = time.time()
    if first:
        receiver.close()
    event = {"got": got, "refused": refused, "first": first, "releasing": releasing}
    print(json.dumps(event), flush=True)
    if not first:
        os._exit(0)  # dies holding the session: no release
    """
)


def test_s10_2_two_processes_one_session_one_holder_at_a_time(admin, spark, namespace_root,
                                                             tmp_path) -> None:
    admin.create_queue("contended", requires_session=True,
                       lock_duration=timedelta(seconds=LOCK_SECONDS))
    with ServiceBusClient(namespace_root, spark=spark) as client:
        client.get_queue_sender("contended").send_messages(ServiceBusMessage("m", session_id="s"))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    marker = tmp_path / "first"
    start_at = time.time() + 45  # both JVMs up before either asks
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    procs = [subprocess.Popen([sys.executable, str(script), namespace_root, str(marker),
                               str(start_at), str(HOLD_SECONDS)], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env) for _ in range(2)]
    events = []
    for proc in procs:
        out, err = proc.communicate(timeout=600)
        assert proc.returncode == 0, err[-3000:]
        events.append(json.loads(out.strip().splitlines()[-1]))
    first = next(e for e in events if e["first"])
    second = next(e for e in events if not e["first"])
    # One holder at a time: the second got it only after the first began releasing it,
    # and was refused while the first held it.
    assert second["got"] >= first["releasing"]
    assert any(first["got"] <= t <= first["releasing"] for t in second["refused"])
    # The second died holding it: nobody gets it before its lock expires.
    refused_here = 0
    with ServiceBusClient(namespace_root, spark=spark) as client:
        while True:
            try:
                with client.get_queue_receiver("contended", session_id="s") as receiver:
                    got_here = time.time()
                    assert [str(m) for m in receiver.receive_messages(1, max_wait_time=5)] \
                        == ["m"]
                    break
            except SessionCannotBeLockedError:
                refused_here += 1
                time.sleep(1)
    assert refused_here >= 1
    assert got_here >= second["got"] + LOCK_SECONDS
