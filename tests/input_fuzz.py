"""Hypothesis strategies for the inputs sbqueue checks without Spark (issue 21 point 2),
used by tests/unit/test_input_fuzz.py:

- entity names and paths (S1.7): valid ones up to each length limit, and names broken in
  one known way (too long, a forbidden or control character, an empty, ``.``/``..`` or
  ``$`` segment, an absolute path, spaces around, a lone surrogate), and any text at all;
- connection strings (S1.1): valid ones with their parts, and ones with a missing,
  duplicated or garbled key, an ``sb://`` endpoint or a bad shared access signature;
- ``Config.json`` documents (S15.8): valid documents with the plan they describe, random
  JSON trees, and valid documents with one element broken at a known path;
- entity properties at and past each bound (S1.2, S1.6, S2.4, S5.2, S6.7, S8.1, S11.1,
  S16.1, S16.3), application property maps (S2.3), message sizes around each limit (S2.2,
  S2.4, S6.4) and ISO-8601 durations with the timedelta each means.
"""

from __future__ import annotations

import math
import string
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone
from decimal import Decimal
from typing import Any

from hypothesis import strategies as st

from sbqueue.core.durations import NEVER
from sbqueue.core.names import MAX_PATH, MAX_SHORT_NAME

# --- names (S1.7)

_NAME_CHARS = string.ascii_letters + string.digits + "-_.~"
# Letters and digits beyond ASCII (never spaces, controls or surrogates).
_UNICODE_LETTERS = st.characters(codec="utf-8", categories=("L", "N"))
_name_char = st.one_of(st.sampled_from(_NAME_CHARS), _UNICODE_LETTERS)


def _good_segment(text: str) -> bool:
    return text not in (".", "..") and not text.startswith("$")


segments = st.text(_name_char, min_size=1, max_size=12).filter(_good_segment)


@st.composite
def entity_paths(draw: st.DrawFn) -> str:
    """A queue or topic path S1.7 allows; now and then exactly ``MAX_PATH`` long."""
    path = "/".join(draw(st.lists(segments, min_size=1, max_size=4)))
    if draw(st.integers(0, 4)) == 0:
        path = (path + "x" * MAX_PATH)[:MAX_PATH]
    return path[:MAX_PATH].rstrip("/") or "q"


@st.composite
def short_names(draw: st.DrawFn) -> str:
    """A subscription or rule name S1.7 allows (no '/'); now and then exactly 50 long."""
    name = draw(st.text(_name_char, min_size=1, max_size=MAX_SHORT_NAME)
                .filter(lambda t: t not in (".", "..")))
    if draw(st.integers(0, 4)) == 0:
        name = (name + "n" * MAX_SHORT_NAME)[:MAX_SHORT_NAME]
    return name


# How a valid name is broken: (what is done, a function of the name and a drawn extra).
_PATH_BREAKS: tuple[tuple[str, Any], ...] = (
    ("too long", lambda n, c: (n + "y" * MAX_PATH)[:MAX_PATH + 1]),
    ("forbidden", lambda n, c: n[:1] + c + n[1:]),
    ("control", lambda n, c: n + chr(ord(c) % 32) + "z"),
    ("leading /", lambda n, c: "/" + n),
    ("trailing /", lambda n, c: n + "/"),
    ("double /", lambda n, c: n + "//z"),
    ("dot segment", lambda n, c: n + "/" + (".." if ord(c) % 2 else ".")),
    ("$ segment", lambda n, c: n + "/$" + c),
    ("drive", lambda n, c: "C:" + n),
    ("space around", lambda n, c: " " + n if ord(c) % 2 else n + "\u3000"),
    ("surrogate", lambda n, c: n + "\ud800"),
    ("empty", lambda n, c: "" if ord(c) % 2 else "   "),
)
_FORBIDDEN_IN_PATHS = "@?#*\\"


@st.composite
def broken_paths(draw: st.DrawFn) -> tuple[str, str]:
    """(how, path): a valid path broken in one way S1.7 refuses."""
    how, change = draw(st.sampled_from(_PATH_BREAKS))
    extra = draw(st.sampled_from(_FORBIDDEN_IN_PATHS))
    return how, change(draw(entity_paths()), extra)


@st.composite
def broken_short_names(draw: st.DrawFn) -> tuple[str, str]:
    """(how, name): a valid subscription or rule name broken in one way S1.7 refuses."""
    name = draw(short_names())
    how, bad = draw(st.sampled_from((
        ("too long", (name + "y" * MAX_SHORT_NAME)[:MAX_SHORT_NAME + 1]),
        ("slash", name[:1] + "/" + name[1:]),
        ("backslash", name + "\\"),
        ("control", name + "\x7f"),
        ("dot", draw(st.sampled_from((".", "..")))),
        ("space around", " " + name),
        ("surrogate", "\udfff" + name),
        ("empty", ""),
    )))
    return how, bad


non_strings = st.sampled_from((None, 5, 2.5, b"orders", ["orders"], {"n": 1}, True))
# Any text, lone surrogates and controls included, around the length limits.
any_text = st.one_of(st.text(max_size=60), st.text(st.characters(), min_size=45, max_size=55),
                     st.text(st.sampled_from("ab/.$@ \\:\t"), max_size=12),
                     st.text(st.characters(), min_size=255, max_size=265))
any_names = st.one_of(any_text, non_strings, entity_paths(), short_names(),
                      broken_paths().map(lambda c: c[1]),
                      broken_short_names().map(lambda c: c[1]))

# --- connection strings (S1.1)

_KEYS = ("Endpoint", "EntityPath", "SharedAccessKeyName", "SharedAccessKey",
         "SharedAccessSignature")
_ENDPOINTS = ("/data/sb", "file:///data/sb", "abfss://c@acct.dfs.core.windows.net/sb",
              "s3a://bucket/ns", "gs://bucket/ns", "relative/dir", "C:\\data\\sb")
_value_chars = st.characters(codec="utf-8", exclude_characters=";",
                             exclude_categories=("Cc", "Zs", "Zl", "Zp"))
values_without_semicolon = st.text(_value_chars, min_size=1, max_size=20)


def signature(expiry: str) -> str:
    return f"SharedAccessSignature sr=sb%3A%2F%2Fns&sig=abc%3D&se={expiry}&skn=send"


def any_case(word: str) -> st.SearchStrategy[str]:
    """``word`` with each letter upper or lower: connection string keys ignore case."""
    return st.lists(st.booleans(), min_size=len(word), max_size=len(word)).map(
        lambda ups: "".join(c.upper() if up else c.lower() for c, up in zip(word, ups,
                                                                             strict=True)))


@dataclass(frozen=True)
class ConnectionCase:
    text: str
    parts: dict[str, str]  # by the SDK's key, as parse_connection_string must give them


@st.composite
def connection_strings(draw: st.DrawFn) -> ConnectionCase:
    """A valid connection string: an Endpoint and any of the other keys, once each, in any
    order and case, with spaces around and an optional trailing ';'."""
    endpoint = draw(st.one_of(st.sampled_from(_ENDPOINTS), values_without_semicolon.filter(
        lambda v: not v.lower().startswith("sb://"))))
    parts = {"Endpoint": endpoint}
    for key in _KEYS[1:4]:
        if draw(st.booleans()):
            parts[key] = draw(values_without_semicolon)
    if draw(st.booleans()):  # a live signature; far in the future, past datetime, too
        parts["SharedAccessSignature"] = signature(draw(st.sampled_from(
            ("4102444800", "99999999999", "9" * 30, "9" * 5000))))
    order = draw(st.permutations(list(parts)))
    pieces = [f"{draw(st.sampled_from(('', ' ')))}{draw(any_case(k))}="
              f"{draw(st.sampled_from(('', ' ')))}{parts[k]}" for k in order]
    text = ";".join(pieces) + draw(st.sampled_from(("", ";", "; ", ";;")))
    return ConnectionCase(text, parts)


_CONNECTION_BREAKS = ("no endpoint", "empty endpoint", "duplicate", "no equals", "sb endpoint",
                      "expired", "no expiry", "odd digits", "not a str")


@st.composite
def broken_connection_strings(draw: st.DrawFn) -> tuple[str, object]:
    """(how, value): a valid connection string broken in one way S1.1 refuses."""
    case = draw(connection_strings())
    how = draw(st.sampled_from(_CONNECTION_BREAKS))
    pieces = [p for p in case.text.split(";") if p.strip()]
    endpoint_at = next(i for i, p in enumerate(pieces) if p.strip().lower().startswith(
        "endpoint="))
    if how == "no endpoint":
        return how, ";".join(pieces[:endpoint_at] + pieces[endpoint_at + 1:])
    if how == "empty endpoint":
        pieces[endpoint_at] = "Endpoint= "
    elif how == "duplicate":
        key = draw(st.sampled_from(sorted(case.parts)))
        pieces.append(f"{draw(any_case(key))}={draw(values_without_semicolon)}")
    elif how == "no equals":
        pieces.insert(draw(st.integers(0, len(pieces))), draw(st.sampled_from(
            ("garbage", "Endpoint", "UseDevelopmentEmulator", "=value"))))
    elif how == "sb endpoint":
        pieces[endpoint_at] = f"Endpoint={draw(any_case('sb'))}://contoso.servicebus.net/"
    else:
        expiry = {"expired": "1", "no expiry": "", "odd digits": draw(st.sampled_from(
            ("²", "٣٤", "1.5", "-5", "12a")))}.get(how)
        if expiry is None:
            return how, draw(non_strings)
        pieces = [p for p in pieces if "sharedaccesssignature" not in p.lower()]
        pieces.append(f"SharedAccessSignature={signature(expiry)}")
    return how, ";".join(pieces)


# --- durations

_UNITS = {"W": 7 * 86400, "D": 86400, "H": 3600, "M": 60, "S": 1}


@st.composite
def iso_durations(draw: st.DrawFn) -> tuple[str, timedelta]:
    """(text, timedelta): an ISO-8601 duration of weeks, days, hours, minutes and seconds
    (whole or decimal), in any case, with the timedelta it means (under NEVER)."""
    amounts = {u: draw(st.one_of(st.none(), st.integers(0, 400).map(str),
                                 st.decimals(0, 1000, places=3).map(str)))
               for u in _UNITS}
    date = "".join(f"{amounts[u]}{u}" for u in "WD" if amounts[u] is not None)
    time = "".join(f"{amounts[u]}{u}" for u in "HMS" if amounts[u] is not None)
    text = "P" + date + ("T" + time if time else "")
    if text == "P":
        text, amounts = "PT0S", {**amounts, "S": "0"}
    seconds = sum(Decimal(a) * _UNITS[u] for u, a in amounts.items() if a is not None)
    micros = int((seconds * 10**6).to_integral_value())
    padded = draw(st.sampled_from(("", " "))) + text + draw(st.sampled_from(("", "\n")))
    return (padded.lower() if draw(st.booleans()) else padded), timedelta(microseconds=micros)


timedeltas = st.one_of(st.timedeltas(min_value=timedelta(0), max_value=NEVER),
                       st.sampled_from((timedelta(0), timedelta(microseconds=1), NEVER,
                                        timedelta(seconds=5), timedelta(days=7))))
broken_durations = st.one_of(
    st.sampled_from(("", "P", "PT", "P1DT", "1D", "PT1", "P1Y", "P2M", "P1Y2M", "PT-1S",
                     "P٣D", "PT１S", "PT1.S", "PT.5S", "P1D1D", "PT1S1M", "P1e3D", "PTS",
                     "\ud800", "P" + "9" * 5000 + "Y")),
    st.text(max_size=12).filter(lambda t: not t.strip().upper().startswith("P")))
any_durations = st.one_of(broken_durations, st.text(st.sampled_from("PTWDHMSY0123456789. "),
                                                    max_size=12),
                          iso_durations().map(lambda c: c[0]),
                          st.sampled_from((None, 5, 1.5, [1], {"s": 1}, b"PT1S")))

# --- entity properties (the admin client's rules)


@dataclass(frozen=True)
class Bound:
    """A property's values just inside and just outside the rule that bounds it."""

    key: str
    rule: str
    good: tuple[Any, ...]
    bad: tuple[Any, ...]
    premium: bool = False


_US = timedelta(microseconds=1)
BOUNDS = (
    Bound("lock_duration", "S5.2", (timedelta(seconds=5), "PT5M", "pt1m"),
          (timedelta(seconds=5) - _US, "PT5M0.000001S", "PT0S", -_US)),
    Bound("default_message_time_to_live", "S8.1", ("PT1S", NEVER, "P99999999999D"),
          (timedelta(seconds=1) - _US, "PT0S")),
    Bound("duplicate_detection_history_time_window", "S11.1", ("PT20S", "P7D", "P1W"),
          ("PT19.999999S", "P7DT0.000001S", "P8D")),
    Bound("auto_delete_on_idle", "S16.3", ("PT5M", NEVER), ("PT4M59S", "PT1S")),
    Bound("max_delivery_count", "S6.7", (1, 2**31 - 1), (0, -1, 2**31, True, 1.0, "10")),
    Bound("max_size_in_megabytes", "S1.6", (1024, 5120), (1023, 5121, 2048.0, False)),
    Bound("max_size_in_megabytes", "S1.6", (1024, 81920), (81921,), premium=True),
    Bound("max_message_size_in_kilobytes", "S2.4", (None,), (1024, 256)),
    Bound("max_message_size_in_kilobytes", "S2.4", (1024, 102400, None),
          (1023, 102401, 1024.0, True), premium=True),
    Bound("requires_session", "S10.1", (True, False), (1, "true", None)),
    Bound("status", "S16.1", ("Active", "SendDisabled"), ("Paused", "", 1, [])),
    Bound("forward_to", "S1.7", ("other", "", None), ("a//b", "../x", 5)),
    Bound("user_metadata", "S17.1", ("m" * 1024, None), ("m" * 1025, 5)),
)

# Values of any kind, for properties that must refuse all but their own.
odd_values = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=8),
    st.sampled_from((timedelta(-1), timedelta.max, b"x", [], {}, (1,), object(), Decimal(2),
                     math.nan, "PT1M", "P7D", "Active", 1024, 2**63)))

# --- application properties (S2.3)

_INT64 = (-(2**63), 2**63 - 1)
allowed_property_values = st.one_of(
    st.none(), st.booleans(), st.integers(*_INT64), st.sampled_from(_INT64),
    st.floats(), st.text(st.characters(codec="utf-8"), max_size=20),
    st.datetimes(datetime(1, 1, 2), datetime(9999, 12, 30), timezones=st.one_of(
        st.none(), st.timedeltas(-timedelta(hours=23), timedelta(hours=23)).map(timezone))),
    st.sampled_from((datetime.min, datetime.max, datetime.max.replace(tzinfo=timezone.utc))),
    st.timedeltas(min_value=timedelta(days=-1000), max_value=timedelta(days=1000)),
    st.uuids())
refused_property_values = st.sampled_from((
    b"x", bytearray(b"y"), [1], {"a": 1}, (1,), {1}, object(), Decimal("1.5"), 2**63,
    -(2**63) - 1, 10**30, "\ud800", "a\udfffb", complex(1, 2),
    datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
    datetime.max.replace(tzinfo=timezone(-timedelta(minutes=1)))))
property_names = st.one_of(st.text(st.characters(codec="utf-8"), max_size=10),
                           st.sampled_from(("", "k", "RuleName", "é", "\U0001f600")))
refused_property_names = st.sampled_from((1, None, b"k", ("k",), "\ud800", 2.5))


def property_maps(values: st.SearchStrategy[Any] = allowed_property_values,
                  ) -> st.SearchStrategy[dict[Any, Any]]:
    return st.dictionaries(property_names, values, max_size=5)


@st.composite
def refused_property_maps(draw: st.DrawFn) -> dict[Any, Any]:
    """A map of allowed values with one refused value or one refused name in it."""
    values: dict[Any, Any] = draw(property_maps())
    if draw(st.booleans()):
        values[draw(property_names)] = draw(refused_property_values)
    else:
        values[draw(refused_property_names)] = draw(allowed_property_values)
    return values


message_strings = st.fixed_dictionaries({}, optional={
    "message_id": st.text(st.characters(codec="utf-8"), max_size=10),
    "session_id": st.text(st.characters(codec="utf-8"), max_size=10),
    "correlation_id": st.text(st.characters(codec="utf-8"), max_size=10),
    "subject": st.text(st.characters(codec="utf-8"), max_size=10),
    "content_type": st.sampled_from(("application/json", "text/plain; charset=utf-8")),
    "to": st.text(st.characters(codec="utf-8"), max_size=10),
    "reply_to": st.text(st.characters(codec="utf-8"), max_size=10),
})

# --- Config.json (S15.8)

json_leaves = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False),
                        st.text(max_size=10),
                        st.sampled_from(("", "Sql", "Correlation", "PT1M", "Name", "q")))
json_trees = st.recursive(json_leaves, lambda children: st.one_of(
    st.lists(children, max_size=4),
    st.dictionaries(st.one_of(st.text(max_size=8), st.sampled_from((
        "UserConfig", "Namespaces", "Queues", "Topics", "Subscriptions", "Rules", "Name",
        "Properties", "FilterType", "SqlFilter", "SqlExpression", "CorrelationFilter",
        "Action", "LockDuration", "MaxDeliveryCount"))), children, max_size=4)),
    max_leaves=25)

_QUEUE_PROPS = {
    "LockDuration": st.sampled_from(("PT5S", "PT1M", "PT5M")),
    "MaxDeliveryCount": st.integers(1, 2**31 - 1),
    "RequiresSession": st.booleans(),
    "RequiresDuplicateDetection": st.booleans(),
    "DefaultMessageTimeToLive": st.sampled_from(("PT1S", "PT1H", "P14D", "P10675199D")),
    "DuplicateDetectionHistoryTimeWindow": st.sampled_from(("PT20S", "PT10M", "P7D")),
    "DeadLetteringOnMessageExpiration": st.booleans(),
    "EnablePartitioning": st.booleans(),
    "MaxSizeInMegabytes": st.integers(1024, 5120),
    "Status": st.sampled_from(("Active", "Disabled", "SendDisabled", "ReceiveDisabled")),
    "AutoDeleteOnIdle": st.sampled_from(("PT5M", "P1D")),
    "UserMetadata": st.one_of(st.text(st.characters(codec="utf-8"), max_size=20),
                              st.just("see http://example.com//a // not a comment")),
    "ForwardTo": st.just(""),
    "ForwardDeadLetteredMessagesTo": st.just(""),
}
_TOPIC_PROPS = {k: _QUEUE_PROPS[k] for k in (
    "DefaultMessageTimeToLive", "RequiresDuplicateDetection", "EnablePartitioning",
    "MaxSizeInMegabytes", "DuplicateDetectionHistoryTimeWindow", "Status")} | {
    "SupportOrdering": st.booleans()}
_SUBSCRIPTION_PROPS = {k: _QUEUE_PROPS[k] for k in (
    "LockDuration", "MaxDeliveryCount", "RequiresSession", "DeadLetteringOnMessageExpiration",
    "DefaultMessageTimeToLive", "Status")} | {
    "DeadLetteringOnFilterEvaluationExceptions": st.booleans()}
_SQL = ("color = 'Red'", "quantity > 100 AND sys.Label = 'x'", "EXISTS(a)", "1=1",
        "n IN (1, 2, 3)", "name LIKE 'a%'", "x = @p")


@st.composite
def _props(draw: st.DrawFn, pool: dict[str, st.SearchStrategy[Any]]) -> dict[str, Any]:
    keys = draw(st.lists(st.sampled_from(sorted(pool)), unique=True, max_size=4))
    return {k: draw(pool[k]) for k in keys}


@st.composite
def _rule(draw: st.DrawFn, name: str) -> dict[str, Any]:
    if draw(st.booleans()):
        sql = draw(st.sampled_from(_SQL))
        body: dict[str, Any] = {"SqlExpression": sql}
        if "@p" in sql:
            body["Parameters"] = {"@p": draw(st.one_of(st.integers(-5, 5), st.text(max_size=3)))}
        props: dict[str, Any] = {"FilterType": "Sql", "SqlFilter": body}
    else:
        fields = draw(st.fixed_dictionaries({}, optional={
            "CorrelationId": st.text(max_size=5), "Label": st.just("Green"),
            "ContentType": st.just("text/plain"),
            "Properties": st.dictionaries(st.sampled_from(("color", "n")), st.one_of(
                st.text(st.characters(codec="utf-8"), max_size=5), st.integers(-9, 9),
                st.booleans()), min_size=1)}).filter(bool))
        props = {"FilterType": "Correlation", "CorrelationFilter": fields}
    if draw(st.booleans()):
        props["Action"] = {"SqlExpression": "SET priority = 'high'"}
    return {"Name": name, "Properties": props}


@dataclass
class ConfigCase:
    """A valid document and what ``read_config`` must plan from it."""

    doc: dict[str, Any]
    queues: list[str] = field(default_factory=list)
    topics: list[str] = field(default_factory=list)
    subscriptions: list[tuple[str, str, list[str]]] = field(default_factory=list)


def _unique(names: st.SearchStrategy[str], size: int) -> st.SearchStrategy[list[str]]:
    return st.lists(names, max_size=size, unique_by=str.casefold)


@st.composite
def config_documents(draw: st.DrawFn) -> ConfigCase:
    """A valid Config.json document: namespaces of queues and topics (names unique without
    case across both), subscriptions and rules of valid names and properties."""
    case = ConfigCase({"UserConfig": {"Namespaces": []}})
    entity_names = iter(draw(_unique(entity_paths(), 8)))
    for _ in range(draw(st.integers(1, 2))):
        queues, topics = [], []
        for name in entity_names:
            if draw(st.integers(0, 2)) == 0:
                break
            if draw(st.booleans()):
                queues.append({"Name": name, "Properties": draw(_props(_QUEUE_PROPS))})
                case.queues.append(name)
                continue
            subs = []
            for sub in draw(_unique(short_names(), 3)):
                rules = draw(_unique(short_names(), 2))
                subs.append({"Name": sub, "Properties": draw(_props(_SUBSCRIPTION_PROPS)),
                             "Rules": [draw(_rule(r)) for r in rules]})
                case.subscriptions.append((name, sub, rules))
            topics.append({"Name": name, "Properties": draw(_props(_TOPIC_PROPS)),
                           "Subscriptions": subs})
            case.topics.append(name)
        case.doc["UserConfig"]["Namespaces"].append(
            {"Name": "sbemulatorns", "Queues": queues, "Topics": topics})
    return case


def element_paths(doc: Any, at: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """Every path into ``doc`` (keys and indexes), the root's children first."""
    found: list[tuple[Any, ...]] = []
    children = doc.items() if isinstance(doc, dict) else enumerate(doc) \
        if isinstance(doc, list) else ()
    for key, child in children:
        found.append((*at, key))
        found.extend(element_paths(child, (*at, key)))
    return found


# Known breaks of an element of a valid document: (the key it is set under, bad values).
ELEMENT_BREAKS: dict[str, tuple[Any, ...]] = {
    "Name": ("", None, 5, "a//b", "x" * 261, "..", "\ud800", "a\x00b", " q"),
    "Properties": ("text", 5, [1]),
    "LockDuration": ("PT99H", "PT1S", "soon", 60, "P1M"),
    "MaxDeliveryCount": (0, -1, 2**31, 1.5, "5", True),
    "Status": ("Paused", 1, {}),
    "FilterType": ("Regex", None, 1),
    "SqlExpression": ("color = = 'Red'", "", None, 5, ["x"], "x" * 1025, "a = '\ud800'"),
    "Parameters": ([1], "p", 5, {"@p": [1]}),
    "CorrelationFilter": ({}, {"Unknown": 1}, {"Properties": [1]}, {"CorrelationId": 5},
                          {"Properties": {"n": 2**64}}, "x"),
    "Action": ("SET", 5, {"SqlExpression": "REMOVE"}),
}
