"""The options of ``format("sbqueue")``, read once and checked with clear errors."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from sbqueue.exceptions import InvalidOperationError
from sbqueue.location import is_local, local_path

__all__ = ["Options", "query_id"]


@dataclass(frozen=True)
class Options:
    """``namespace`` (the root folder) and ``entity`` (a queue, a topic to send to, or a
    subscription or sub-queue path to read), both required."""

    namespace: str
    entity: str

    @classmethod
    def parse(cls, options: Mapping[str, str]) -> Options:
        missing = [n for n in ("namespace", "entity") if not options.get(n)]
        if missing:
            raise InvalidOperationError(
                f"format('sbqueue') needs .option({missing[0]!r}, ...): the namespace folder "
                "and the entity path (decision 024)")
        root = str(options["namespace"])
        if is_local(root) and not root.startswith("file:") and not os.path.isabs(root):
            raise InvalidOperationError(
                f"namespace {root!r} is a relative path: give format('sbqueue') an absolute "
                "one (its Python workers do not run in the caller's working directory)")
        return cls(root, str(options["entity"]))

    def where(self) -> str:
        """How errors name this stream: the entity in its namespace."""
        return f"sbqueue {self.entity!r} in {self.namespace}"


def query_id(options: Mapping[str, str]) -> str:
    """The streaming query's id, from its checkpoint's ``metadata`` file: the same across
    restarts from that checkpoint and new for a new one, so a replayed batch is recognised
    and a new query's batch 0 is not taken for an old query's."""
    location = options.get("checkpointLocation") or options.get("checkpointlocation")
    if not location or not is_local(str(location)):
        raise InvalidOperationError(
            f"checkpointLocation {location!r}: the sbqueue sink needs "
            ".option('checkpointLocation', <a local folder>) on the query: a replayed batch "
            "is recognised by the query id stored there (decision 024)")
    metadata = Path(local_path(str(location))) / "metadata"
    try:
        found = json.loads(metadata.read_text().splitlines()[0])["id"]
    except (OSError, ValueError, KeyError, IndexError) as exc:
        raise InvalidOperationError(
            f"checkpointLocation {location!r}: no query id in {metadata} ({exc})") from None
    return f"stream-{found}"
