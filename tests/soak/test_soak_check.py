"""The soak's invariant checker (issue 21 point 1, issue 42) on hand-made histories: a
clean one passes, and each kind of violation is found and counted under its own
invariant. ``test_soak_faults`` shows the same on real soaks with faults put in."""

from __future__ import annotations

import json
from pathlib import Path

from soak_check import Counted, Rules, Stored, chain, check
from soak_facts import FINAL, RUNNER
from soak_history import Event, History, read_histories

from sbqueue.core.sequence import sequence_of

Q = "orders"
P1 = sequence_of(1, 1)  # partition 1, first number
P2 = sequence_of(1, 2)


def send(ids: tuple[str, ...], at: float = 1.0, entity: str = Q, **kw: object) -> Event:
    return Event(ev="send", role="sender", entity=entity, ids=ids, started=at - 0.1, at=at,
                 **kw)  # type: ignore[arg-type]


def receive(message: str, seq: int, token: str, at: float, until: float,
            entity: str = Q, **kw: object) -> Event:
    return Event(ev="receive", role="receiver", entity=entity, id=message, seq=seq,
                 token=token, started=at - 0.1, at=at, until=until,
                 **kw)  # type: ignore[arg-type]


def settle(action: str, seq: int, token: str, at: float, ok: bool = True,
           entity: str = Q) -> Event:
    return Event(ev="settle", role="receiver", entity=entity, seq=seq, token=token,
                 action=action, ok=ok, started=at - 0.1, at=at)


def run(log: list[Event], stored: list[Stored] = (), counted: list[Counted] = (),  # type: ignore[assignment]
        dedupe: frozenset[str] = frozenset(), forwards: dict[str, str] | None = None,
        now: float = 100.0) -> dict[str, list[str]]:
    def routes(e: Event) -> list[tuple[str, ...]]:
        return [chain(e.entity, forwards or {})]

    report = check(log, list(stored), list(counted),
                   Rules(routes, dedupe, frozenset(forwards or {}), stall=120.0), now)
    return {k: v for k, v in report.violations.items() if v}


def held(message: str, seq: int, entity: str = Q, state: str = "Active",
         sub_queue: str = "Main") -> Stored:
    return Stored(entity, message, seq, 1, sub_queue, state)


def test_a_clean_history_has_no_violation() -> None:
    log = [send(("a", "b")),
           receive("a", P1, "t1", at=2.0, until=62.0),
           settle("complete", P1, "t1", at=3.0),
           receive("b", P2, "t2", at=2.0, until=62.0),
           settle("abandon", P2, "t2", at=3.0),
           receive("b", P2, "t3", at=4.0, until=64.0)]  # after the abandon: fine
    counted = [Counted(Q, 1, 0, 0, 0, 0, 1)]
    assert run(log, [held("b", P2)], counted) == {}


def test_a_message_nowhere_is_lost_even_once_its_time_to_live_passed() -> None:
    """Issue 42 point 3: an expired message is dead-lettered (or forwarded on), not gone."""
    assert list(run([send(("a",))])) == ["lost"]
    assert list(run([send(("a",), ttl=5.0)], now=100.0)) == ["lost"]  # expired: no excuse
    dead = held("a", P1, sub_queue="DeadLetter")
    assert run([send(("a",), ttl=5.0)], [dead], now=100.0) == {}
    # forwarded on: held at the destination counts
    assert run([send(("a",))], [held("a", P1, entity="next")], forwards={Q: "next"}) == {}


def test_two_holders_of_one_message_at_once_overlap() -> None:
    log = [send(("a",)), receive("a", P1, "t1", at=2.0, until=62.0),
           receive("a", P1, "t2", at=30.0, until=90.0)]
    found = run(log, [held("a", P1)])
    assert list(found) == ["overlapping locks"]
    # after the first lock ended, a second holder is fine
    log[2] = receive("a", P1, "t2", at=63.0, until=123.0)
    assert run(log, [held("a", P1)]) == {}


def test_a_delivery_after_the_complete_returned_is_caught() -> None:
    log = [send(("a",)), receive("a", P1, "t1", at=2.0, until=62.0),
           settle("complete", P1, "t1", at=3.0),
           receive("a", P1, "t2", at=10.0, until=70.0)]
    assert "delivered after completion" in run(log)
    taken = [send(("a",)), receive("a", P1, "t1", at=2.0, until=62.0,
                                   mode="receive_and_delete"),
             receive("a", P1, "t2", at=10.0, until=70.0)]
    assert "delivered after completion" in run(taken)


def test_a_duplicate_detection_id_at_two_numbers_is_caught() -> None:
    log = [send(("a",)), send(("a",), at=1.5),
           receive("a", P1, "t1", at=2.0, until=62.0), settle("complete", P1, "t1", at=3.0),
           receive("a", P2, "t2", at=4.0, until=64.0), settle("complete", P2, "t2", at=5.0)]
    assert list(run(log, dedupe=frozenset({Q}))) == ["duplicate delivered twice"]


def test_one_message_at_two_numbers_is_two_copies() -> None:
    log = [send(("a",)), receive("a", P1, "t1", at=2.0, until=62.0),
           settle("complete", P1, "t1", at=3.0)]
    assert list(run(log, [held("a", P2)])) == ["copies"]


def test_a_session_out_of_order_or_held_twice_is_caught() -> None:
    log = [send(("a", "b"), session="s"),
           receive("b", P2, "t1", at=2.0, until=62.0, session="s", count=1),
           receive("a", P1, "t1", at=3.0, until=62.0, session="s", count=1)]
    assert "session order" in run(log, [held("a", P1), held("b", P2)])
    locks = [Event(ev="session_lock", role="w1", entity=Q, session="s", token="x", at=1.0,
                   until=61.0),
             Event(ev="session_lock", role="w2", entity=Q, session="s", token="y", at=20.0,
                   until=80.0)]
    assert list(run(locks)) == ["session holders"]
    released = [locks[0], Event(ev="session_release", role="receiver", entity=Q, session="s",
                                token="x", started=10.0, at=10.5), locks[1]]
    assert run(released) == {}


def test_a_transaction_half_visible_is_caught() -> None:
    begin = Event(ev="tx_begin", role="tx", entity=Q, tx="x1", ids=("t0", "t1"),
                  locks=((P1, "k"),), started=5.0, at=5.0)
    half = [send(("a",)), begin, send(("t0", "t1"), at=6.0, tx="x1")]  # killed: no tx_end
    assert list(run(half, [held("a", P1), held("t0", P2)])) == ["transaction partial"]
    failed = [*half, Event(ev="tx_end", role="tx", tx="x1", ok=False, at=7.0)]
    assert list(run(failed, [held("a", P1), held("t0", P2)])) == ["transaction partial"]
    none = [send(("a",)), begin]  # killed before the commit: nothing visible is fine
    assert run(none, [held("a", P1)]) == {}


def test_numbers_and_counts_must_agree() -> None:
    log = [send(("a", "b"))]
    assert list(run(log, [held("a", P1), held("b", P1)])) == ["numbers"]
    wrong = [Counted(Q, 1, 0, 0, 0, 0, 1)]  # two held
    assert list(run(log, [held("a", P1), held("b", P2)], wrong)) == ["counts"]
    right = [Counted(Q, 1, 1, 0, 0, 0, 2)]
    assert run(log, [held("a", P1), held("b", P2, state="Scheduled")], right) == {}


def test_histories_survive_a_line_cut_short(tmp_path: Path) -> None:
    path = tmp_path / "h.jsonl"
    history = History(path, "sender")
    history.write("send", entity=Q, ids=("a",), at=1.0)
    history.close()
    with path.open("a") as f:
        f.write(json.dumps({"ev": "send", "role": "sender"})[:-5])  # a kill mid-line
    [event] = list(read_histories([path]))
    assert (event.ev, event.ids, event.role) == ("send", ("a",), "sender")


def test_a_kill_inside_a_complete_or_a_receive_and_delete_is_not_a_loss() -> None:
    got = receive("a", P1, "t1", at=2.0, until=62.0)
    cut = Event(ev="settle_begin", role="receiver", entity=Q, seq=P1, token="t1",
                action="complete", call="c1", started=3.0)
    assert run([send(("a",)), got, cut]) == {}  # it may have completed the message
    ended = [*[send(("a",)), got, cut],
             Event(ev="settle", role="receiver", entity=Q, seq=P1, token="t1",
                   action="complete", ok=False, error="MessageLockLostError", call="c1",
                   started=3.0, at=3.5)]
    assert list(run(ended)) == ["lost"]  # it returned a failure: the message must be held
    taking = Event(ev="receive_begin", role="rnd", entity=Q, mode="receive_and_delete",
                   count=1, call="r1", started=3.0)
    assert run([send(("a",)), taking]) == {}  # one message may have gone with it
    assert list(run([send(("a", "b")), taking])) == ["lost"]  # not two


def test_a_session_given_back_releases_its_messages() -> None:
    """A holder that gives a session back leaves its messages' locks with it: the next
    holder's receive of them is not an overlap."""
    log = [send(("a",), session="s"),
           receive("a", P1, "t1", at=2.0, until=62.0, session="s", count=1, pid=7),
           Event(ev="session_release", role="receiver", entity=Q, session="s", token="x",
                 started=3.0, at=3.5, pid=7),
           receive("a", P1, "t2", at=4.0, until=64.0, session="s", count=2, pid=8)]
    assert run(log, [held("a", P1)]) == {}
    log[2] = Event(ev="session_release", role="receiver", entity=Q, session="s", token="x",
                   started=3.0, at=3.5, pid=9)  # another process's release: still held
    assert list(run(log, [held("a", P1)])) == ["overlapping locks"]


def test_a_later_send_numbered_below_an_earlier_one_is_caught() -> None:
    first, second = sequence_of(1, 5), sequence_of(1, 6)
    log = [send(("a",), at=1.0), send(("b",), at=2.0)]  # b's send began after a's returned
    assert run(log, [held("a", first), held("b", second)]) == {}
    assert list(run(log, [held("a", second), held("b", first)])) == ["numbers"]
    together = [send(("a",), at=1.0), send(("b",), at=1.05)]  # overlapping sends: either
    assert run(together, [held("a", second), held("b", first)]) == {}


# -- issue 42: the roles themselves ----------------------------------------------------------
def life(pid: int, at: float, end: float, ev: str = "kill", roles: tuple[str, ...] = ("r",),
         ok: bool = True) -> list[Event]:
    """The runner's events of one process life: spawned at ``at``, ended by ``ev``."""
    return [Event(ev="spawn", role=RUNNER, process="p", pid=pid, ids=roles, at=at),
            Event(ev=ev, role=RUNNER, process="p", pid=pid, at=end, code=0, ok=ok)]


def step(at: float, pid: int = 1, ok: bool = True, role: str = "r") -> Event:
    return Event(ev="step", role=role, pid=pid, ok=ok, at=at)


def test_a_role_that_raised_or_a_process_that_died_crashed() -> None:
    """Issue 42 point 1: an exception that is not a refusal, a process that ended by
    itself or with an error, a traceback on standard error: each a violation."""
    crash = Event(ev="crash", role="r", pid=1, ok=False, error="ValueError: boom", at=5.0)
    assert list(run([crash])) == ["crashed"]
    died = life(1, 0.0, 50.0, ev="exit")
    assert list(run(died)) == ["crashed"]
    assert list(run(life(1, 0.0, 50.0, ev="stop"))) == []
    failed = [*life(1, 0.0, 50.0, ev="stop")[:1],
              Event(ev="stop", role=RUNNER, process="p", pid=1, at=50.0, code=1)]
    assert list(run(failed)) == ["crashed"]
    report = check([], [], [], Rules(lambda e: [(e.entity,)]), 100.0,
                   ["consumers-1.err: ValueError: not enough values to unpack"])
    assert [k for k, v in report.violations.items() if v] == ["crashed"]


def test_a_settlement_that_crashed_excuses_nothing() -> None:
    """A complete with no end excuses its message only where a kill cut it short: in a
    process that lived on (its role wrote a crash), the message must still be there."""
    got = receive("a", P1, "t1", at=2.0, until=62.0, pid=1)
    cut = Event(ev="settle_begin", role="receiver", entity=Q, seq=P1, token="t1",
                action="complete", call="c1", started=3.0, pid=1)
    start = [Event(ev="spawn", role=RUNNER, process="p", pid=1, ids=(), at=0.0)]
    killed = [*start, send(("a",)), got, cut,
              Event(ev="kill", role=RUNNER, process="p", pid=1, at=4.0)]
    assert run(killed) == {}
    crashed = [*start, send(("a",)), got, cut,
               Event(ev="crash", role="receiver", pid=1, ok=False, error="X", at=3.5),
               Event(ev="stop", role=RUNNER, process="p", pid=1, at=9.0, code=0)]
    assert sorted(run(crashed)) == ["crashed", "lost"]


def test_a_role_without_progress_for_a_stall_window_stalled() -> None:
    """Every life of every process: each of its roles starts, then succeeds at least once
    every stall window (120 s here), failed calls not counting."""
    start = Event(ev="start", role="r", pid=1, at=10.0)
    busy = [*life(1, 0.0, 300.0), start, *(step(t) for t in range(20, 300, 60))]
    assert run(busy) == {}
    failing = [*life(1, 0.0, 300.0), start, step(20.0), *(step(t, ok=False)
                                                          for t in range(30, 300, 10))]
    assert list(run(failing)) == ["stalled"]
    never = life(1, 0.0, 300.0)  # no start in 300 s: past the boot allowance
    assert list(run(never)) == ["stalled"]
    short = life(1, 0.0, 100.0)  # killed while its JVM started: not a stall
    assert run(short) == {}
    stuck = life(1, 0.0, 300.0, ev="stop", ok=False)  # killed at the stop: it hung
    assert "stalled" in run([*stuck, start, *(step(t) for t in range(20, 300, 60))])


def test_per_role_work_counts_messages_not_attempts() -> None:
    """Issue 42 point 2: what the table shows per role."""
    log = [send(("a", "b")), Event(ev="send", role="sender", entity=Q, ids=("c",), ok=False),
           receive("a", P1, "t1", at=2.0, until=62.0), settle("complete", P1, "t1", at=3.0),
           receive("b", P2, "t2", at=2.0, until=62.0),
           settle("complete", P2, "t2", at=70.0, ok=False),
           Event(ev="step", role="forwarder", moved=7, at=4.0),
           Event(ev="step", role="forwarder", moved=0, at=5.0),
           Event(ev="step", role="maintainer", moved=1, at=4.0)]
    report = check(log, [], [], Rules(lambda e: [(e.entity,)]), 100.0)
    assert report.work["sender"] == {"sent": 2, "errors": 1}
    assert report.work["receiver"] == {"received": 2, "completed": 1, "errors": 1}
    assert report.work["forwarder"] == {"forwarded": 7}
    assert report.work["maintainer"] == {"maintained": 1}


# -- issue 42: where each message ended, judged by the final drain ----------------------------
def drained(message: str, seq: int, entity: str = Q, sub_queue: str = "Main",
            at: float = 200.0) -> list[Event]:
    token = f"d-{message}-{entity}-{sub_queue}"
    return [Event(ev="receive", role=FINAL, entity=entity, id=message, seq=seq, token=token,
                  started=at - 0.1, at=at, until=at + 60, sub_queue=sub_queue),
            Event(ev="settle", role=FINAL, entity=entity, seq=seq, token=token,
                  action="complete", started=at + 0.1, at=at + 0.2)]


DRAINED = Event(ev="drained", role=FINAL, at=300.0)


def judge(log: list[Event], stored: list[Stored] = (),  # type: ignore[assignment]
          counted: list[Counted] = ()) -> dict[str, list[str]]:  # type: ignore[assignment]
    """With the soak's own routes and places: work forwards its dead letters to parking."""
    from soak_topology import places, routes

    report = check(log, list(stored), list(counted), Rules(routes, places=places), 150.0)
    return {k: v for k, v in report.violations.items() if v}


def test_what_the_drain_does_not_take_is_stranded_and_every_message_must_come_out() -> None:
    """Issue 42 point 4: held at the end is not enough; the clients must get it out."""
    log = [send(("a", "b"), entity="work")]
    out = [*drained("a", P1, "work"), *drained("b", P2, "work"), DRAINED]
    assert judge([*log, *out], [held("a", P1, "work"), held("b", P2, "work")]) == {}
    only_a = [*log, *drained("a", P1, "work"), DRAINED]
    found = judge(only_a, [held("a", P1, "work"), held("b", P2, "work")])
    assert list(found) == ["stranded"] and "(b," in found["stranded"][0]
    assert list(judge(only_a, [held("a", P1, "work")])) == ["lost"]  # b: neither held nor out


def test_a_completed_message_that_comes_out_again_was_delivered_after_completion() -> None:
    log = [send(("a",), entity="work"), receive("a", P1, "t1", at=2.0, until=62.0,
                                                entity="work"),
           settle("complete", P1, "t1", at=3.0, entity="work"),
           *drained("a", P1, "work"), DRAINED]
    assert list(judge(log)) == ["delivered after completion"]


def test_an_expired_or_dead_lettered_message_must_come_out_of_a_dead_letter_place() -> None:
    """Issue 42 point 3: the work queue dead-letters on expiry and forwards its dead letters
    to parking; an expired message must come out of its dead-letter queue or of parking,
    never out of work's main queue."""
    log = [send(("a",), entity="work", ttl=4.0)]
    assert judge([*log, *drained("a", P1, "parking", "DeadLetter"), DRAINED]) == {}
    assert judge([*log, *drained("a", P1, "parking"), DRAINED]) == {}
    assert judge([*log, *drained("a", P1, "work", "DeadLetter"), DRAINED]) == {}
    found = judge([*log, *drained("a", P1, "work"), DRAINED])
    assert list(found) == ["misplaced"]  # expired, yet out of the main queue
    assert list(judge([*log, DRAINED])) == ["lost"]
    dead = [send(("b",), entity="work"), receive("b", P2, "t", at=2.0, until=62.0,
                                                 entity="work"),
            settle("dead_letter", P2, "t", at=3.0, entity="work")]
    assert list(judge([*dead, *drained("b", P2, "work"), DRAINED])) == ["misplaced"]
    assert judge([*dead, *drained("b", P2, "parking"), DRAINED]) == {}


def test_a_message_out_of_an_entity_off_its_route_or_from_no_send_is_misplaced() -> None:
    log = [send(("a",), entity="chain-a")]
    assert judge([*log, *drained("a", P1, "chain-c"), DRAINED]) == {}
    found = judge([*log, *drained("a", P1, "parking"), DRAINED])
    assert list(found) == ["misplaced"]  # not lost as well: it is somewhere
    assert list(judge([*drained("x", P1, "work"), DRAINED])) == ["misplaced"]
    begun = Event(ev="send_begin", role="sender", entity="work", ids=("x",), call="s")
    assert judge([begun, *drained("x", P1, "work"), DRAINED]) == {}  # a send a kill cut short


def test_the_runtime_counts_must_equal_what_the_drain_took_out() -> None:
    """Issue 42 point 5: an independent reference for ``counts`` (the view is the counts'
    own source on a queue that detects duplicates)."""
    log = [send(("a", "b"), entity="work"), *drained("a", P1, "work"),
           *drained("b", P2, "parking", "DeadLetter"), DRAINED]
    stored = [held("a", P1, "work"), held("b", P2, "parking", sub_queue="DeadLetter")]
    right = [Counted("work", 1, 0, 0, 0, 0, 1), Counted("parking", 0, 0, 1, 0, 0, 1)]
    assert judge(log, stored, right) == {}
    wrong = [Counted("work", 1, 0, 0, 0, 0, 1), Counted("parking", 1, 0, 0, 0, 0, 1)]
    assert list(judge(log, stored, wrong)) == ["counts"]  # a main queue gave more
    short = [Counted("work", 2, 0, 0, 0, 0, 2), Counted("parking", 0, 0, 1, 0, 0, 1)]
    assert list(judge(log, stored, short)) == ["counts"]  # one counted, none drained
    # a receive moves an expired message to the dead-letter queue: main counted, DLQ drained
    moved = [send(("c",), entity="work", ttl=4.0), *drained("c", P1, "work", "DeadLetter"),
             DRAINED]
    assert judge(moved, [held("c", P1, "work")], [Counted("work", 1, 0, 0, 0, 0, 1)]) == {}


def test_numbers_follow_the_sdk_layout_and_one_key_keeps_one_partition() -> None:
    """Issue 42 point 5: the partition read from the number's top 16 bits (the SDK's
    documented layout), not by the engine's own function; one key, one partition."""
    log = [send(("a",))]
    assert list(run(log, [Stored(Q, "a", (3 << 48) + 1, 2, "Main", "Active")])) == ["numbers"]
    keyed = [send(("a", "b")), receive("a", P1, "t1", at=2.0, until=62.0, key="k"),
             receive("b", P2 + (1 << 48), "t2", at=2.0, until=62.0, key="k")]
    assert list(run(keyed, [held("a", P1), Stored(Q, "b", P2 + (1 << 48), 2, "Main",
                                                  "Active")])) == ["numbers"]
