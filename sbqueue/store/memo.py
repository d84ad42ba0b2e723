"""Values made from an object once, kept by the object's identity.

Why: a commit or a read compares and converts the same few objects again and again (a
table's schema, the inbox's Spark schema, a snapshot's add actions), and neither Arrow
schemas (their hash walks every field) nor Spark schemas are cheap keys. Each entry holds
its object, so the object's id is not reused while the entry lives; a store past its
bound is emptied (the objects met are few: a process's tables).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Generic, TypeVar

__all__ = ["ByIdentity", "made_once"]

K = TypeVar("K")
V = TypeVar("V")


def made_once(store: dict[K, V], key: K, make: Callable[[], V], bound: int) -> V:
    """``store[key]``, made once; the store emptied past ``bound`` entries (for keys that
    are cheap to hash and compare: names, tuples of them)."""
    found = store.get(key)
    if found is None:
        if len(store) > bound:
            store.clear()
        found = store[key] = make()
    return found


class ByIdentity(Generic[K, V]):
    """A value per object, made once (``get``), for up to ``bound`` objects."""

    def __init__(self, bound: int = 64) -> None:
        self._bound = bound
        self._kept: dict[int, tuple[K, V]] = {}
        self._lock = threading.Lock()

    def get(self, obj: K, make: Callable[[K], V]) -> V:
        """The value kept for ``obj``, else ``make(obj)``, kept."""
        kept = self._kept.get(id(obj))
        if kept is not None and kept[0] is obj:
            return kept[1]
        made = make(obj)
        with self._lock:
            if len(self._kept) > self._bound:
                self._kept.clear()
            self._kept[id(obj)] = (obj, made)
        return made
