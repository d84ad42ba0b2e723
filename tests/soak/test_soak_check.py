"""The soak's invariant checker (issue 21 point 1) on hand-made histories: a clean one
passes, and each kind of violation is found and counted under its own invariant."""

from __future__ import annotations

import json
from pathlib import Path

from soak_check import Counted, Stored, chain, check
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

    report = check(log, list(stored), list(counted), routes, dedupe, now,
                   frozenset(forwards or {}))
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


def test_a_message_nowhere_is_lost_unless_its_time_to_live_passed() -> None:
    assert list(run([send(("a",))])) == ["lost"]
    assert run([send(("a",), ttl=5.0)], now=100.0) == {}  # expired by now
    assert list(run([send(("a",), ttl=500.0)], now=100.0)) == ["lost"]
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
