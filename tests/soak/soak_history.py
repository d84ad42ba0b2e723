"""The chaos soak's histories (issue 21 point 1): what each process did, one JSON line per
event, flushed and fsynced before the process goes on, so a SIGKILL loses at most the
event of the operation it interrupted (and that operation never returned).

Times are the wall clock of this machine (every process of a soak shares it). ``started``
is read before a call, ``at`` after it returned: a commit the call made lies between them.
"""

from __future__ import annotations

import json
import os
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
    - ``settle_begin`` / ``receive_begin``: written before a complete or a
      receive-and-delete call, with the ``call`` id its end event repeats. A begin with no
      end is a call a kill interrupted: it may have taken effect.
    - ``step``: one step of a job role (forward, maintain).
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
        self._file = path.open("a", encoding="utf-8")

    def write(self, ev: str, **fields: Any) -> None:
        event = Event(ev=ev, role=self.role, pid=os.getpid(), **fields)
        self._file.write(json.dumps(asdict(event), default=str) + "\n")
        self._file.flush()
        os.fsync(self._file.fileno())

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
