"""S15.2 under a crash: a child process (its own JVM) sends to a topic with three
subscriptions and is killed with SIGKILL at each step of the fan-out: before the write,
during it (0.5 s into Spark's append job; on the driver, its files written and its commit
not yet published), after the commit before the caller returns, on each executor. Every
subscription must then hold all of its copies, or every subscription none."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

from sbqueue import Namespace
from sbqueue.management import RuleProperties, SqlRuleAction, SqlRuleFilter

pytestmark = [pytest.mark.spark, pytest.mark.slow]

STEPS = ("before_write", "during_write", "after_write")
MESSAGES = 60
# subscription -> copies it gets of the 60 messages (n = 0..59)
EXPECTED = {"all": 60, "even": 30, "tagged": 20}

CHILD = textwrap.dedent(
    """
    import os, signal, sys, threading
    from sbqueue import ServiceBusClient, ServiceBusMessage
    from sbqueue.engine.inbox import Inbox
    from sbqueue.store import tracked
    root, topic, step = sys.argv[1], sys.argv[2], sys.argv[3]

    def kill():
        os.kill(os.getpid(), signal.SIGKILL)

    def killing(real, path, during):
        def append(inbox, *args, **kwargs):
            print("path", path, flush=True)
            if step == "before_write":
                kill()
            if step == "during_write":
                during()
            result = real(inbox, *args, **kwargs)
            if step == "after_write" and (path == "spark" or result is not None):
                kill()  # (the driver's None: nothing committed, Spark appends instead)
            return result
        return append

    def unpublished(*args, **kwargs):  # the driver's files are written, its commit not
        kill()

    Inbox.append = killing(Inbox.append, "spark",
                           lambda: threading.Timer(0.5, kill).start())
    Inbox.append_small = killing(Inbox.append_small, "driver",
                                 lambda: setattr(tracked, "publish", unpublished))
    client = ServiceBusClient(root)
    with client.get_topic_sender(topic) as sender:
        sender.send_messages([ServiceBusMessage(f"m{n}", application_properties={"n": n})
                              for n in range(60)])
    print("returned", flush=True)
    """
)
# the executor a send takes (docs/decisions/030): the driver's commit on a local folder,
# Spark's append where the driver may not commit (as on object storage or Connect)
EXECUTORS = {"driver": {}, "spark": {"SBQUEUE_DRIVER_COMMITS": "0", "SBQUEUE_DRIVER_READS": "0"}}


@pytest.mark.parametrize("executor", sorted(EXECUTORS))
def test_s15_2_a_killed_fan_out_leaves_every_copy_or_none(admin, spark, namespace_root,
                                                         tmp_path, executor: str) -> None:
    for step in STEPS:
        admin.create_topic(step, enable_partitioning=True)
        admin.create_subscription(step, "all")
        admin.create_subscription(step, "even", default_rule=RuleProperties(
            "even", SqlRuleFilter("n % 2 = 0")))
        admin.create_subscription(step, "tagged", default_rule=RuleProperties(
            "third", SqlRuleFilter("n % 3 = 0"), SqlRuleAction("SET third = TRUE")))
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    ns = Namespace(namespace_root, spark)
    for step in STEPS:  # one at a time: a cold JVM each
        proc = subprocess.run([sys.executable, str(script), namespace_root, step, step],
                              capture_output=True, text=True, timeout=900, check=False,
                              env={**os.environ, **EXECUTORS[executor]})
        assert proc.returncode == -9, (step, proc.stdout, proc.stderr[-3000:])
        assert proc.stdout.split()[-1] == executor, proc.stdout  # the path that was killed
        counts = {sub: ns.entity(f"{step}/Subscriptions/{sub}").messages().count()
                  for sub in EXPECTED}
        zero = dict.fromkeys(EXPECTED, 0)
        assert counts in (EXPECTED, zero), (step, counts)  # all of it or none of it
        if step == "before_write":
            assert counts == zero
        if step == "after_write":
            assert counts == EXPECTED
