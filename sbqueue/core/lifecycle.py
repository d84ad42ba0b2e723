"""The states of an entity's definition while it is created and deleted (decision 020).

The definition is written before the entity's tables and removed after them, so a crash at
any point leaves a marked definition, never a half entity in use::

    (none) --create--> creating --tables made--> ready --delete--> deleting --> (none)
                          |                                          ^     tables dropped
                          +-------------------delete-----------------+

Only a ``ready`` definition is an entity: reads, lists and lookups see nothing else. The
next create or delete of the name finishes a ``creating`` (makes its tables) or a
``deleting`` (drops them) one. Every write bumps ``revision``, so a conditional write never
mistakes a changed definition for the one it read. Pure: no I/O.
"""

from __future__ import annotations

from typing import Any

__all__ = ["CREATING", "DELETING", "READY", "is_ready", "moved", "revised", "state_of"]

CREATING = "creating"
READY = "ready"
DELETING = "deleting"
_NEXT = {CREATING: (READY, DELETING), READY: (READY, DELETING), DELETING: ()}


def state_of(doc: dict[str, Any]) -> str:
    """A definition's state; one written before states existed is ready."""
    state = doc.get("state", READY)
    if state not in _NEXT:
        raise ValueError(f"definition state {state!r}: expected one of {sorted(_NEXT)}")
    return str(state)


def is_ready(doc: dict[str, Any] | None) -> bool:
    return doc is not None and state_of(doc) == READY


def revised(doc: dict[str, Any], **changes: Any) -> dict[str, Any]:
    """``doc`` with ``changes`` and the next revision."""
    return {**doc, **changes, "revision": int(doc.get("revision", 0)) + 1}


def moved(doc: dict[str, Any], state: str) -> dict[str, Any]:
    """``doc`` moved to ``state``; a move the diagram above lacks is a ValueError (a
    deleting definition is only ever removed)."""
    current = state_of(doc)
    if state not in _NEXT[current]:
        raise ValueError(f"a {current} definition cannot become {state}")
    return revised(doc, state=state)
