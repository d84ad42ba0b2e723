"""Input files for the streaming tests: JSON lines of messages with known ids."""

from __future__ import annotations

import json
from pathlib import Path


def write_files(folder: Path, first: int, files: int, per_file: int = 4) -> list[str]:
    """JSON files of messages; their ids."""
    folder.mkdir(parents=True, exist_ok=True)
    ids = []
    for f in range(first, first + files):
        lines = []
        for i in range(per_file):
            ids.append(f"m{f}-{i}")
            lines.append(json.dumps({"body": f"body {f}-{i}", "message_id": ids[-1],
                                     "application_properties": {"file": str(f)}}))
        (folder / f"f{f:03d}.json").write_text("\n".join(lines) + "\n")
    return ids
