"""Sub-queues (SPEC S7): the main queue and its two dead-letter queues, as one value.

A sub-queue is named four ways: the suffix of its path (``q/$DeadLetterQueue``), the ledger
lane its messages live in (``dlq``), the ``sub_queue`` column of the SQL view
(``DeadLetter``) and the SDK's ``ServiceBusSubQueue`` value (``deadletter``). This is the
one place that knows all four; everything else asks it (issue 18, point 3).
"""

from __future__ import annotations

from enum import Enum

from sbqueue.core.names import DEAD_LETTER_SUFFIX, TRANSFER_DEAD_LETTER_SUFFIX
from sbqueue.core.transitions import Lane

__all__ = ["TRANSFER_VIEW_NAME", "SubQueue", "view_name_sql"]

# The view's ``sub_queue`` of a message claimed by a forwarding step (decision 010).
TRANSFER_VIEW_NAME = "Transfer"


class SubQueue(Enum):
    """(path suffix, ledger lane, view name, SDK name) of one sub-queue."""

    MAIN = ("", Lane.MAIN, "Main", "")
    DEAD_LETTER = (DEAD_LETTER_SUFFIX, Lane.DEAD_LETTER, "DeadLetter", "deadletter")
    TRANSFER_DEAD_LETTER = (TRANSFER_DEAD_LETTER_SUFFIX, Lane.TRANSFER_DEAD_LETTER,
                            "TransferDeadLetter", "transferdeadletter")

    @property
    def suffix(self) -> str:
        return self.value[0]

    @property
    def lane(self) -> str:
        return self.value[1]

    @property
    def view_name(self) -> str:
        return self.value[2]

    @property
    def sdk_name(self) -> str:
        return self.value[3]

    @property
    def is_dead_letter(self) -> bool:
        return self is not SubQueue.MAIN

    def path(self, entity_path: str) -> str:
        """The path of this sub-queue of ``entity_path``."""
        return f"{entity_path}/{self.suffix}" if self.suffix else entity_path

    @classmethod
    def split(cls, path: str) -> tuple[str, SubQueue]:
        """(the entity path, the sub-queue) of a path such as ``q/$DeadLetterQueue``. The
        transfer suffix ends with the dead-letter one, so it is tried first."""
        for sub in (cls.TRANSFER_DEAD_LETTER, cls.DEAD_LETTER):
            if path.endswith("/" + sub.suffix):
                return path[: -len(sub.suffix) - 1], sub
        return path, cls.MAIN

    @classmethod
    def from_sdk_name(cls, name: str) -> SubQueue:
        """The sub-queue of a ``ServiceBusSubQueue`` value (case-insensitive)."""
        for sub in cls:
            if sub.sdk_name and sub.sdk_name == name.lower():
                return sub
        raise ValueError(f"sub_queue {name!r} is not 'deadletter' or 'transferdeadletter' "
                         "(S7.1)")


def view_name_sql(lane: str) -> str:
    """The view's ``sub_queue`` of a ledger row, as SQL over its ``lane`` expression (no
    ledger row: the main queue)."""
    cases = " ".join(f"WHEN '{s.lane}' THEN '{s.view_name}'" for s in SubQueue
                     if s is not SubQueue.MAIN)
    return (f"CASE {lane} {cases} WHEN '{Lane.TRANSFER}' THEN '{TRANSFER_VIEW_NAME}' "
            f"ELSE '{SubQueue.MAIN.view_name}' END")
