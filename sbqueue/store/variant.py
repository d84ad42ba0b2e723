"""Application properties as a Spark VARIANT object, encoded in Python (no Spark job).

Why (decision 015): a send made on the driver writes the inbox's Parquet itself, so it must
store the properties exactly as a Spark send does: one VARIANT object per message, a str as
a string, an int as the smallest integer type that holds it, a float as a double, a bool, a
datetime as a UTC timestamp (microseconds) and a timedelta as an ISO-8601 duration string
(decision 005). This is the Variant binary encoding (Spark's ``common/variant`` README):
a metadata dictionary of the keys and one object value whose fields are sorted by key.
Reading stays PySpark's (``VariantVal``), so every value written here is read back by the
same code that reads Spark's.

VARIANT has no uuid or interval type, so a ``uuid.UUID`` is stored as its canonical text
and a ``timedelta`` as its ISO-8601 duration, which SQL reads as strings. Which keys held
those types is noted in the metadata dictionary as one more entry that no field uses
(``TYPE_NOTE``): readers of the value (Spark SQL, ``to_json``, PySpark) never see it, and
``restore`` gives the client its typed values back (issue 20, decision 006).
"""

from __future__ import annotations

import json
import math
import struct
import uuid
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

__all__ = ["TYPE_NOTE", "encode_object", "epoch_micros", "iso_duration", "java_double",
           "micros", "restore", "to_json", "type_note"]

TYPE_NOTE = "\x00sbqueue-types:"  # a dictionary entry no field uses: key -> uuid | duration

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
# Primitive type ids and basic types of the encoding.
_NULL, _TRUE, _FALSE, _INT1, _INT2, _INT4, _INT8, _DOUBLE, _TIMESTAMP = 0, 1, 2, 3, 4, 5, 6, 7, 12
_LONG_STR = 16
_PRIMITIVE, _SHORT_STR, _OBJECT = 0, 1, 2
_INTS = ((_INT1, 1), (_INT2, 2), (_INT4, 4), (_INT8, 8))


def java_double(value: float) -> str:
    """``value`` as Spark casts a DOUBLE to STRING (Java's ``Double.toString``): plain
    between 1e-3 and 1e7, else ``d.dddEn``; always a fractional part."""
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "Infinity" if value > 0 else "-Infinity"
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        return repr(float(value))  # plain in this range, with a fractional part
    sign, figures, exponent = Decimal(repr(float(value))).normalize().as_tuple()
    assert isinstance(exponent, int)
    lead = "".join(str(d) for d in figures)
    return f"{'-' if sign else ''}{lead[0]}.{lead[1:] or '0'}E{exponent + len(lead) - 1}"


def micros(value: timedelta) -> int:
    """The exact microseconds of a timedelta (Spark's unit for times and intervals)."""
    return (value.days * 86_400 + value.seconds) * 1_000_000 + value.microseconds


def epoch_micros(value: datetime) -> int:
    """A datetime as Spark stores a timestamp: microseconds since the epoch, UTC (a naive
    one taken as UTC); exact, no time zone or format in between."""
    aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    return micros(aware - _EPOCH)


def iso_duration(value: timedelta) -> str:
    """A timedelta as the send stores it: ``PT<seconds>S``, seconds as a Java double."""
    return f"PT{java_double(float(Decimal(micros(value)) / Decimal(1_000_000)))}S"


def _java_order(key: str) -> bytes:
    """Spark sorts an object's fields as Java compares strings (UTF-16 code units), which
    differs from code point order beyond the BMP; lookups by binary search rely on it."""
    return key.encode("utf-16-be")


def _primitive(kind: int) -> bytes:
    return bytes([(kind << 2) | _PRIMITIVE])


def _scalar(value: Any) -> bytes:
    """One value of the types S2.3 allows."""
    if value is None:
        return _primitive(_NULL)
    if isinstance(value, bool):
        return _primitive(_TRUE if value else _FALSE)
    if isinstance(value, int):
        for kind, size in _INTS:
            if -(1 << (8 * size - 1)) <= value < (1 << (8 * size - 1)):
                return _primitive(kind) + value.to_bytes(size, "little", signed=True)
        raise ValueError(f"{value} is outside 64-bit integers")
    if isinstance(value, float):
        return _primitive(_DOUBLE) + struct.pack("<d", value)
    if isinstance(value, datetime):
        return _primitive(_TIMESTAMP) + epoch_micros(value).to_bytes(8, "little", signed=True)
    if isinstance(value, timedelta):
        return _scalar(iso_duration(value))
    data = str(value).encode("utf-8")  # str, uuid
    if len(data) < 64:
        return bytes([(len(data) << 2) | _SHORT_STR]) + data
    return _primitive(_LONG_STR) + len(data).to_bytes(4, "little") + data


def _size_of(largest: int) -> int:
    return 1 if largest < 1 << 8 else 2 if largest < 1 << 16 else 3 if largest < 1 << 24 else 4


def _metadata(keys: list[bytes]) -> bytes:
    """The dictionary: version 1, the keys in order of first use, their offsets."""
    total = sum(len(k) for k in keys)
    size = _size_of(max(total, len(keys)))
    out = bytearray([1 | ((size - 1) << 6)])
    out += len(keys).to_bytes(size, "little")
    offset = 0
    for key in keys:
        out += offset.to_bytes(size, "little")
        offset += len(key)
    out += offset.to_bytes(size, "little")
    for key in keys:
        out += key
    return bytes(out)


def encode_object(values: Mapping[str, Any]) -> tuple[bytes, bytes]:
    """(value, metadata) of a VARIANT object holding ``values``; the keys of uuid and
    timedelta values noted in the metadata (``TYPE_NOTE``)."""
    keys = [k.encode("utf-8") for k in values]
    typed = {k: "uuid" if isinstance(v, uuid.UUID) else "duration"
             for k, v in values.items() if isinstance(v, (uuid.UUID, timedelta))}
    if typed:
        keys.append((TYPE_NOTE + json.dumps(typed, sort_keys=True)).encode("utf-8"))
    ids = {k: i for i, k in enumerate(values)}
    encoded = [_scalar(v) for v in values.values()]
    body = b"".join(encoded)
    starts, at = [], 0
    for part in encoded:
        starts.append(at)
        at += len(part)
    order = sorted(values, key=_java_order)  # fields sorted by key, as Spark compares them
    count = len(order)
    large = count > 255
    id_size = _size_of(max(count - 1, 0))
    offset_size = _size_of(len(body))
    header = (_OBJECT | (((offset_size - 1) | ((id_size - 1) << 2) | (int(large) << 4)) << 2))
    out = bytearray([header])
    out += count.to_bytes(4 if large else 1, "little")
    for key in order:
        out += ids[key].to_bytes(id_size, "little")
    for key in order:
        out += starts[ids[key]].to_bytes(offset_size, "little")
    out += len(body).to_bytes(offset_size, "little")
    out += body
    return bytes(out), _metadata(keys)


def _json_value(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return java_double(value)
    if isinstance(value, datetime):
        aware = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        text = aware.astimezone(timezone.utc).strftime("%Y-%m-%d %H:%M:%S")
        fraction = f"{aware.microsecond:06d}".rstrip("0")
        return json.dumps(f"{text}{'.' + fraction if fraction else ''}+00:00")
    if isinstance(value, timedelta):
        return json.dumps(iso_duration(value), ensure_ascii=False)
    return json.dumps(str(value), ensure_ascii=False)


def to_json(values: Mapping[str, Any]) -> str:
    """``encode_object(values)`` as Spark's ``to_json`` writes it (fields by key, doubles as
    Java writes them, UTC times, UTF-8 kept): what S2.4 counts as the properties' size."""
    order = sorted(values, key=_java_order)
    return "{" + ",".join(f"{json.dumps(k, ensure_ascii=False)}:{_json_value(values[k])}"
                          for k in order) + "}"


def type_note(metadata: bytes) -> dict[str, str]:
    """The keys ``encode_object`` noted as uuid or duration, read from a VARIANT's metadata
    dictionary (empty for values Spark built)."""
    if not metadata:
        return {}
    size = ((metadata[0] >> 6) & 0x3) + 1
    count = int.from_bytes(metadata[1:1 + size], "little")
    offsets = [int.from_bytes(metadata[1 + size * (i + 1):1 + size * (i + 2)], "little")
               for i in range(count + 1)]
    start = 1 + size * (count + 2)
    for i in range(count):
        entry = metadata[start + offsets[i]:start + offsets[i + 1]].decode("utf-8", "replace")
        if entry.startswith(TYPE_NOTE):
            try:
                note = json.loads(entry[len(TYPE_NOTE):])
            except ValueError:
                return {}
            return {str(k): str(v) for k, v in note.items()} if isinstance(note, dict) else {}
    return {}


def restore(values: Mapping[str, Any], note: Mapping[str, str]) -> dict[str, Any]:
    """``values`` with the noted keys as ``uuid.UUID`` / ``timedelta`` again; a value that no
    longer parses as its noted type (a rule action replaced it) stays as it is."""
    out = dict(values)
    for key, kind in note.items():
        text = out.get(key)
        if not isinstance(text, str):
            continue
        try:
            if kind == "uuid":
                out[key] = uuid.UUID(text)
            elif kind == "duration" and text.startswith("PT") and text.endswith("S"):
                seconds = Decimal(text[2:-1])
                out[key] = timedelta(microseconds=int(seconds * 1_000_000))
        except (ValueError, ArithmeticError):
            continue
    return out
