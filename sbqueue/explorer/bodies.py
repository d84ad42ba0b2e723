"""How the explorer shows a message body or a session state: JSON pretty-printed, text, or
bytes as hex. Pure: the page escapes what this returns (nothing here is HTML)."""

from __future__ import annotations

import json
from dataclasses import dataclass

__all__ = ["MAX_SHOWN", "ShownBody", "hex_dump", "shown_body"]

MAX_SHOWN = 64 * 1024
"""Bytes of a body the page shows; the rest is cut (the size says how much there is)."""

_TEXT_CONTROLS = {"\n", "\r", "\t"}


@dataclass(frozen=True)
class ShownBody:
    """A body as the page shows it: ``kind`` is json, text, hex or empty."""

    kind: str
    text: str
    size: int
    truncated: bool


def shown_body(body: bytes | None, content_type: str | None = None) -> ShownBody:
    """JSON (by content type, or text that parses as an object or array) indented; other
    UTF-8 text as it is; anything else (or text with control characters) as a hex dump."""
    if not body:
        return ShownBody("empty", "", 0, False)
    size, cut = len(body), body[:MAX_SHOWN]
    truncated = size > MAX_SHOWN
    text = _text(cut, truncated)
    if text is None:
        return ShownBody("hex", hex_dump(cut), size, truncated)
    pretty = None if truncated else _json(text, content_type)
    if pretty is not None:
        return ShownBody("json", pretty, size, False)
    return ShownBody("text", text, size, truncated)


def _text(data: bytes, truncated: bool) -> str | None:
    """The bytes as UTF-8 text without control characters, else None. A body cut in the
    middle of a character keeps its whole characters."""
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        if not truncated or exc.start < len(data) - 3:
            return None
        text = data[:exc.start].decode("utf-8")
    if any((ch < " " and ch not in _TEXT_CONTROLS) or ch == "\x7f" for ch in text):
        return None
    return text


def _json(text: str, content_type: str | None) -> str | None:
    stripped = text.lstrip()
    said_json = content_type is not None and "json" in content_type.lower()
    if not said_json and not stripped.startswith(("{", "[")):
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=False)


def hex_dump(data: bytes, width: int = 16) -> str:
    """Offset, hex bytes and printable ASCII, ``width`` bytes a line (as ``xxd`` shows)."""
    lines = []
    for start in range(0, len(data), width):
        chunk = data[start:start + width]
        hexed = " ".join(f"{b:02x}" for b in chunk).ljust(width * 3 - 1)
        shown = "".join(chr(b) if 32 <= b < 127 else "." for b in chunk)
        lines.append(f"{start:08x}  {hexed}  {shown}")
    return "\n".join(lines)
