"""Durations as the SDK takes them: ``timedelta`` or ISO-8601 strings (``PT1M``, ``P7D``).

``NEVER`` is .NET's ``TimeSpan.MaxValue``, which Service Bus reports for "no limit".
"""

from __future__ import annotations

import re
from datetime import timedelta

from sbqueue.exceptions import InvalidOperationError

__all__ = ["NEVER", "format_duration", "is_never", "parse_duration"]

NEVER = timedelta(days=10675199, seconds=10085, microseconds=477581)

_ISO = re.compile(
    r"^P(?!$)(?:(?P<years>\d+(?:\.\d+)?)Y)?(?:(?P<months>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<weeks>\d+(?:\.\d+)?)W)?(?:(?P<days>\d+(?:\.\d+)?)D)?"
    r"(?:T(?=\d)(?:(?P<hours>\d+(?:\.\d+)?)H)?(?:(?P<minutes>\d+(?:\.\d+)?)M)?"
    r"(?:(?P<seconds>\d+(?:\.\d+)?)S)?)?$",
    re.ASCII,  # ASCII digits only: '\d' would take '٣' (Arabic-Indic three) too
)


def parse_duration(value: object, what: str, rule: str = "S17.1") -> timedelta:
    """A timedelta from a timedelta or an ISO-8601 duration; years and months are refused.
    ``rule`` is the id of the rule that bounds ``what``, cited by the error."""
    if isinstance(value, timedelta):
        return value
    if isinstance(value, str):
        match = _ISO.match(value.strip().upper())
        if match is None:
            raise InvalidOperationError(
                f"{what} {value!r} is not an ISO-8601 duration such as 'PT1M' or 'P7D' "
                f"({rule})")
        parts = {k: float(v) for k, v in match.groupdict().items() if v is not None}
        if "years" in parts or "months" in parts:
            raise InvalidOperationError(
                f"{what} {value!r}: years and months have no fixed length; use days ({rule})")
        try:
            return timedelta(**parts)
        except OverflowError:
            return NEVER
    raise InvalidOperationError(
        f"{what} must be a timedelta or an ISO-8601 string, got {type(value).__name__} "
        f"{value!r} ({rule})")


def is_never(value: timedelta) -> bool:
    return value >= NEVER


def format_duration(value: timedelta) -> str:
    """The ISO-8601 form used in stored definitions, exact to the microsecond; a negative
    one (only ever shown in an error) with a leading '-', not as days of -1 plus the rest."""
    if value < timedelta(0):
        return "-" + format_duration(-value)
    total = value.days * 86400 + value.seconds
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, seconds = divmod(rest, 60)
    text = f"P{days}D" if days else "P"
    fraction = f".{value.microseconds:06d}".rstrip("0") if value.microseconds else ""
    time_part = ""
    if hours:
        time_part += f"{hours}H"
    if minutes:
        time_part += f"{minutes}M"
    if seconds or fraction:
        time_part += f"{seconds}{fraction}S"
    if time_part:
        text += "T" + time_part
    return text if text != "P" else "PT0S"
