"""The chaos soak's histories (issue 21 point 1): what each process did, one JSON line per
event, flushed and fsynced before the process goes on, so a SIGKILL loses at most the
event of the operation it interrupted (and that operation never returned).

Times are the wall clock of this machine (every process of a soak shares it). ``started``
is read before a call, ``at`` after it returned: a commit the call made lies between them.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

__all__ = ["Event", "History", "read_histories"]


@dataclass(frozen=True)
class Event:
    """One thing a process saw happen.

    ``ev`` is one of:
    - ``send``: ``ids`` were accepted by ``entity`` (the call returned); ``tx`` when inside a
      transaction (then ``tx_end`` says whether it committed);
    - ``receive``: ``id`` came back as ``seq`` with ``token`` locked ``until`` (peek-lock),
      or taken (``mode`` receive_and_delete), ``count`` its delivery count;
    - ``settle``: ``action`` on (``seq``, ``token``) returned ``ok`` (else ``error``);
    - ``tx_begin`` / ``tx_end``: a transaction's sends (``ids``) and completes (``locks``),
      then whether its commit returned (``ok``);
    - ``session_lock`` / ``session_release``: a session lock taken ``until``, given back;
    - ``settle_begin`` / ``receive_begin``: written before a settlement or a
      receive-and-delete call, with the ``call`` id its end event repeats. A begin with no
      end, the last event of its role in a process that was killed, is a call the kill
      interrupted: it may have taken effect.
    - ``step``: one step of a job role (forward, maintain: ``moved`` what it forwarded or
      the entities it maintained), or a role's loop turn that returned with nothing to
      report (an empty receive);
    - ``start``: a role's thread began its loop (its process's Spark session is up);
      ``crash``: a role's call raised an exception that is not a ``ServiceBusError``;
    - ``spawn`` / ``kill`` / ``exit`` / ``term`` / ``stop``: the runner (role ``runner``)
      started a ``process`` (``pid``, its roles in ``ids``), killed it, saw it end by
      itself (``code``), asked it to stop at the end (SIGTERM), or saw it stop (``code``;
      ``ok`` false when it had to be killed);
    - ``drained``: the end of the final drain (role ``final-drain``), whose ``receive``
      events name the ``sub_queue`` each message came out of.
    """

    ev: str
    role: str
    entity: str = ""
    ids: tuple[str, ...] = ()
    id: str | None = None
    seq: int | None = None
    token: str | None = None
    session: str | None = None
    mode: str = "peek_lock"
    count: int = 0
    action: str | None = None
    ok: bool = True
    error: str | None = None
    tx: str | None = None
    locks: tuple[tuple[int, str], ...] = ()
    ttl: float | None = None
    props: dict[str, Any] = field(default_factory=dict)
    started: float = 0.0
    at: float = 0.0
    until: float | None = None
    pid: int = 0
    call: str | None = None
    process: str | None = None
    code: int | None = None
    moved: int = 0
    key: str | None = None  # a received message's partition key
    sub_queue: str | None = None  # Main, DeadLetter or TransferDeadLetter (the final drain)

    @staticmethod
    def from_json(line: str) -> Event:
        raw = json.loads(line)
        raw["ids"] = tuple(raw.get("ids", ()))
        raw["locks"] = tuple((int(s), str(t)) for s, t in raw.get("locks", ()))
        return Event(**raw)


class History:
    """A process's event log, appended to as it goes."""

    def __init__(self, path: Path, role: str) -> None:
        self.role = role
        self.written = 0  # events written so far (a role's turn that wrote none says so)
        self._file = path.open("a", encoding="utf-8")
        self._lock = threading.Lock()

    def write(self, ev: str, **fields: Any) -> None:
        fields.setdefault("pid", os.getpid())
        event = Event(ev=ev, role=self.role, **fields)
        with self._lock:
            self._file.write(json.dumps(asdict(event), default=str) + "\n")
            self._file.flush()
            os.fsync(self._file.fileno())
            self.written += 1

    def close(self) -> None:
        self._file.close()


def read_histories(paths: Iterable[Path]) -> Iterator[Event]:
    """Every event of these logs; a last line cut short by a kill is skipped."""
    for path in paths:
        for line in path.read_text(encoding="utf-8").splitlines():
            if not line.strip():
                continue
            try:
                yield Event.from_json(line)
            except (ValueError, TypeError):
                continue  # the line a SIGKILL cut short
