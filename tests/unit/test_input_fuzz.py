"""The inputs sbqueue checks without Spark, fuzzed with Hypothesis (issue 21 point 2):
entity names (S1.7), connection strings (S1.1), Config.json documents (S15.8), entity
properties at their bounds, application properties (S2.3), message sizes at and past each
limit (S2.2, S2.4, S6.4) and ISO-8601 durations.

For each: valid input is accepted (and parses to what it says); invalid input raises
exactly one error of ``sbqueue.exceptions`` whose message names the value (or a part of it)
and cites a rule that has its heading in docs/behaviour.md; nothing raises any other
exception (KeyError, TypeError, UnicodeError, RecursionError, json's, int()'s...). The
strategies are in tests/input_fuzz.py; the examples that found a defect are kept below as
plain regression tests.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from datetime import datetime, timedelta, timezone
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from input_fuzz import (
    BOUNDS,
    ELEMENT_BREAKS,
    Bound,
    ConfigCase,
    ConnectionCase,
    any_durations,
    any_names,
    broken_connection_strings,
    broken_durations,
    broken_paths,
    broken_short_names,
    config_documents,
    connection_strings,
    element_paths,
    entity_paths,
    iso_durations,
    json_trees,
    message_strings,
    non_strings,
    odd_values,
    property_maps,
    refused_property_maps,
    short_names,
    timedeltas,
)

from sbqueue.client.convert import to_outgoing
from sbqueue.client.message import ServiceBusMessage, ServiceBusMessageBatch
from sbqueue.client.sender import ServiceBusSender, scheduled
from sbqueue.core.connection import parse_connection_string, parse_endpoint
from sbqueue.core.durations import format_duration, parse_duration
from sbqueue.core.names import validate_entity_path, validate_short_name
from sbqueue.core.properties import (
    NamespaceProperties,
    QueueProperties,
    Sku,
    build_properties,
    build_queue_properties,
)
from sbqueue.core.routing import RoundRobin
from sbqueue.core.sessions import check_session_id, state_bytes
from sbqueue.core.sizes import HEADER_LIMIT, check_dead_letter_text, message_limit
from sbqueue.engine.send.small import inbox_rows
from sbqueue.exceptions import (
    InvalidOperationError,
    MessageSizeExceededError,
    ServiceBusAuthenticationError,
)
from sbqueue.management.config_file import (
    ConfigPlan,
    property_checker,
    read_config,
    strip_comments,
)

ROOT = Path(__file__).resolve().parents[2]
RULE_IDS = re.compile(r"\bS\d{1,2}\.\d{1,2}\b")
KNOWN_RULES = set(re.findall(r"^### (S\d{1,2}\.\d{1,2})\b",
                             (ROOT / "docs" / "behaviour.md").read_text(encoding="utf-8"),
                             re.MULTILINE))


def fuzz(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                           HealthCheck.filter_too_much])


# --- what every refusal must be


def cites(message: str, rule: str | None = None) -> None:
    """The message cites at least one rule (``rule`` among them), each with a heading."""
    found = set(RULE_IDS.findall(message))
    assert found, f"no rule id in {message!r}"
    assert found <= KNOWN_RULES, f"{found - KNOWN_RULES} have no heading: {message!r}"
    assert rule is None or rule in found, f"{rule} not cited in {message!r}"


def mentions(message: str, value: object) -> None:
    """The message shows ``value``: its repr or text, or their first characters."""
    text = value if isinstance(value, str) else repr(value)
    probes = {text[:10], repr(text)[1:11], repr(text[:40])[1:11], repr(value)[:10]}
    assert any(p in message for p in probes), f"{value!r:.60} not named in {message!r:.300}"


def refused(call: Callable[[], object], error: type[Exception] = InvalidOperationError,
            rule: str | None = None, value: object = None) -> str:
    """``call()`` raises exactly ``error``, citing ``rule`` (or some rule) and naming
    ``value`` when given; its message."""
    try:
        got = call()
    except error as exc:
        assert type(exc) is error, f"{type(exc).__name__}, not {error.__name__}: {exc}"
        message = str(exc)
    else:
        raise AssertionError(f"accepted, giving {got!r:.200}")
    cites(message, rule)
    if value is not None:
        mentions(message, value)
    return message


def outcome(call: Callable[[], Any], *errors: type[Exception]) -> Any:
    """``call()``'s value, or the project error it raised (checked to cite a rule); any other
    exception propagates and fails the test."""
    try:
        return call()
    except errors as exc:
        cites(str(exc))
        return exc


# --- S1.7 names


def path_allowed(name: object) -> bool:
    """S1.7, as docs/behaviour.md states it, for a queue or topic path."""
    if not isinstance(name, str) or not _plain(name) or len(name) > 260:
        return False
    if any(c in "@?#*\\" for c in name) or re.match(r"[A-Za-z]:", name):
        return False
    parts = name.split("/")
    return all(p and p not in (".", "..") and not p.startswith("$") for p in parts)


def short_allowed(name: object) -> bool:
    """S1.7 for a subscription or rule name."""
    return isinstance(name, str) and _plain(name) and len(name) <= 50 and not (
        set(name) & set("/\\")) and name not in (".", "..")


def _utf8(text: str) -> bool:
    return not any(0xD800 <= ord(c) <= 0xDFFF for c in text)


def _plain(name: str) -> bool:
    """Not empty, no spaces around, no control characters, storable as UTF-8."""
    return _utf8(name) and bool(name.strip()) and name == name.strip() and not any(
        ord(c) < 32 or ord(c) == 127 for c in name)


@fuzz(150)
@given(entity_paths(), short_names())
def test_s1_7_valid_names_are_accepted_unchanged(path: str, short: str) -> None:
    assert validate_entity_path(path) == path
    assert validate_entity_path(path, "topic name") == path
    assert validate_short_name(short) == short
    assert validate_short_name(short, "rule name") == short


@fuzz(150)
@given(broken_paths(), broken_short_names())
def test_s1_7_a_name_broken_in_any_way_is_refused_naming_it(
        path: tuple[str, str], short: tuple[str, str]) -> None:
    refused(lambda: validate_entity_path(path[1]), rule="S1.7", value=path[1])
    refused(lambda: validate_short_name(short[1]), rule="S1.7", value=short[1])


@fuzz(300)
@given(any_names)
def test_s1_7_any_name_is_accepted_exactly_when_the_rules_allow_it(name: object) -> None:
    for check, allowed in ((validate_entity_path, path_allowed),
                           (validate_short_name, short_allowed)):
        if allowed(name):
            assert check(name) == name
        else:
            refused(lambda check=check: check(name), rule="S1.7", value=name)


@pytest.mark.parametrize("name", ["\ud800", "q\udfff", "a/\ud83d/b"])
def test_s1_7_a_name_with_a_lone_surrogate_is_refused_not_a_unicode_error(name: str) -> None:
    """Found by the fuzzing: accepted, then a raw UnicodeEncodeError when stored."""
    refused(lambda: validate_entity_path(name), rule="S1.7", value=name)
    refused(lambda: validate_short_name(name.replace("/", "")), rule="S1.7")


# --- S1.1 connection strings


@fuzz(150)
@given(connection_strings())
def test_s1_1_a_valid_connection_string_parses_to_its_parts(case: ConnectionCase) -> None:
    props = parse_connection_string(case.text)
    assert parse_endpoint(case.text) == props.endpoint == case.parts["Endpoint"]
    assert props.fully_qualified_namespace == case.parts["Endpoint"]
    assert props.entity_path == case.parts.get("EntityPath")
    assert props.shared_access_key_name == case.parts.get("SharedAccessKeyName")
    assert props.shared_access_key == case.parts.get("SharedAccessKey")
    assert props.shared_access_signature == case.parts.get("SharedAccessSignature")


_AUTHENTICATION = ("expired", "no expiry", "odd digits")
_CONNECTION_WORDS = {"no endpoint": "no Endpoint", "empty endpoint": "no Endpoint",
                     "duplicate": "twice", "no equals": "not key=value",
                     "sb endpoint": "Azure Service Bus namespace", "expired": "expired at",
                     "no expiry": "names no expiry", "odd digits": "names no expiry",
                     "not a str": "is a str, not"}


@fuzz(200)
@given(broken_connection_strings())
def test_s1_1_a_connection_string_broken_in_any_way_is_refused(case: tuple[str, object]) -> None:
    how, text = case
    error = ServiceBusAuthenticationError if how in _AUTHENTICATION else InvalidOperationError
    for parse in (parse_endpoint, parse_connection_string):
        message = refused(lambda parse=parse: parse(text), error, "S1.1")
        assert _CONNECTION_WORDS[how] in message


@fuzz(200)
@given(st.one_of(st.text(max_size=80), st.text(st.sampled_from("Endpoint=;sb:/ xSe"),
                                                max_size=30), non_strings))
def test_s1_1_any_text_is_parsed_or_refused_with_the_rule(text: Any) -> None:
    outcome(lambda: parse_connection_string(text), InvalidOperationError,
            ServiceBusAuthenticationError)


@pytest.mark.parametrize("expiry", ["²", "١٢٣", "9" * 30, "9" * 5000, "0" * 5000 + "1"])
def test_s1_1_an_odd_expiry_is_refused_or_far_off_never_a_raw_error(expiry: str) -> None:
    """Found by the fuzzing: '²' passed str.isdigit and broke int() (ValueError); a huge
    expiry broke datetime (OverflowError) or int()'s 4300-digit limit (ValueError)."""
    text = ("Endpoint=/data/sb;SharedAccessSignature=SharedAccessSignature sr=x&sig=y"
            f"&se={expiry}")
    if expiry.isascii() and expiry.lstrip("0") != "1":
        assert parse_endpoint(text) == "/data/sb"  # past the year 9999: not expired
    else:
        refused(lambda: parse_endpoint(text), ServiceBusAuthenticationError, "S1.1")


@pytest.mark.parametrize(("text", "words"), [
    ("Endpoint=/a;Endpoint=/b", "'endpoint' twice"),
    ("Endpoint=/a;entitypath=q;EntityPath=r", "'entitypath' twice"),
    ("Endpoint=/a;junk", "'junk' is not key=value"),
    (None, "a connection string is a str, not NoneType"),
])
def test_s1_1_duplicated_garbled_and_non_str_connection_strings(text: Any, words: str) -> None:
    """Found by the fuzzing: a key given twice was read first by parse_endpoint and last
    by parse_connection_string; a part without '=' passed silently; None raised
    AttributeError."""
    assert words in refused(lambda: parse_connection_string(text), rule="S1.1")


# --- durations (S5.2, S8.1, S11.1, S16.3 bound them)


@fuzz(200)
@given(iso_durations())
def test_an_iso_duration_parses_to_what_it_means(case: tuple[str, timedelta]) -> None:
    text, expected = case
    assert abs(parse_duration(text, "d") - expected) <= timedelta(microseconds=3)


@fuzz(200)
@given(timedeltas)
def test_a_duration_round_trips_through_its_stored_form(value: timedelta) -> None:
    assert parse_duration(format_duration(value), "d") == value


@fuzz(150)
@given(broken_durations)
def test_s5_2_text_that_is_not_an_iso_duration_is_refused_with_the_rule(text: str) -> None:
    refused(lambda: parse_duration(text, "lock_duration", "S5.2"), rule="S5.2", value=text)
    refused(lambda: build_queue_properties("q", {"lock_duration": text}, sku=Sku.STANDARD,
                                           messaging_partitions=1), rule="S5.2")


@fuzz(200)
@given(any_durations, st.sampled_from(BOUNDS[:4]))
def test_s5_2_s8_1_s11_1_s16_3_any_duration_is_in_bounds_or_refused(value: Any,
                                                                  bound: Bound) -> None:
    got = outcome(lambda: build_queue_properties(
        "q", {bound.key: value}, sku=Sku.STANDARD, messaging_partitions=1),
        InvalidOperationError)
    if isinstance(got, InvalidOperationError):
        cites(str(got), bound.rule)
    else:
        assert isinstance(getattr(got, bound.key), timedelta)


@pytest.mark.parametrize("text", ["P٣D", "PT١S"])
def test_durations_take_ascii_digits_only(text: str) -> None:
    """Found by the fuzzing: '\\d' matched Arabic-Indic digits ('P٣D' was three days)."""
    refused(lambda: parse_duration(text, "lock_duration", "S5.2"), rule="S5.2", value=text)


def test_a_negative_duration_is_shown_with_a_sign() -> None:
    assert format_duration(-timedelta(seconds=1)) == "-PT1S"
    message = refused(lambda: build_queue_properties(
        "q", {"lock_duration": timedelta(seconds=-1)}, sku=Sku.STANDARD,
        messaging_partitions=1), rule="S5.2")
    assert "lock_duration=-PT1S" in message


# --- entity properties at their bounds


def _build(bound: Bound, value: Any) -> QueueProperties:
    sku = Sku.PREMIUM if bound.premium else Sku.STANDARD
    return build_queue_properties("q", {bound.key: value}, sku=sku, messaging_partitions=1)


def _shown(value: Any) -> Any:
    """How an error shows a duration: normalized to its ISO form."""
    if isinstance(value, timedelta):
        return format_duration(value)
    try:
        return format_duration(parse_duration(value, "d"))
    except InvalidOperationError:
        return value


@pytest.mark.parametrize("bound", BOUNDS, ids=[f"{b.key}-{b.rule}" for b in BOUNDS])
def test_each_property_bound_accepts_inside_and_refuses_outside(bound: Bound) -> None:
    """S1.6, S2.4, S5.2, S6.7, S8.1, S10.1, S11.1, S13.1, S16.1, S16.3: each bound's edge."""
    for value in bound.good:
        _build(bound, value)
    for value in bound.bad:
        refused(lambda value=value: _build(bound, value), rule=bound.rule,
                value=_shown(value) if value not in ("", []) else None)


_SETTABLE = sorted(QueueProperties.settable())


@fuzz(300)
@given(st.sampled_from(_SETTABLE), odd_values, st.sampled_from(list(Sku)))
def test_any_value_of_any_property_is_taken_in_range_or_refused(key: str, value: Any,
                                                               sku: Sku) -> None:
    got = outcome(lambda: build_queue_properties("q", {key: value}, sku=sku,
                                                 messaging_partitions=1), InvalidOperationError)
    if isinstance(got, QueueProperties) and key == "max_delivery_count":
        assert 1 <= got.max_delivery_count < 2**31
    if isinstance(got, QueueProperties) and key == "lock_duration":
        assert timedelta(seconds=5) <= got.lock_duration <= timedelta(minutes=5)


@fuzz(100)
@given(st.dictionaries(st.one_of(st.text(max_size=8), st.integers(), st.none()), odd_values,
                       min_size=1, max_size=3))
def test_unknown_property_names_of_any_type_are_refused(overrides: dict[Any, Any]) -> None:
    assume(not set(overrides) & set(_SETTABLE))
    message = refused(lambda: build_properties(QueueProperties, "q", overrides,
                                               sku=Sku.STANDARD, messaging_partitions=1))
    assert "unknown queue propert" in message


@fuzz(150)
@given(st.one_of(st.sampled_from(("Standard", "premium", "PREMIUM", "Basic", "")), odd_values),
       st.one_of(st.sampled_from((None, 1, 2, 4, 3, 0, True, 2.0, "2")), odd_values))
def test_s1_2_a_namespace_sku_and_partitions_are_checked(sku: Any, partitions: Any) -> None:
    got = outcome(lambda: NamespaceProperties.validate(sku, partitions), InvalidOperationError)
    if isinstance(got, InvalidOperationError):
        cites(str(got), "S1.2")
        return
    chosen, count = got
    assert type(count) is int and (count == 1 if chosen is Sku.STANDARD else count in (1, 2, 4))
    assert partitions is None or (type(partitions) is int and partitions == count)


# --- S2.3 application properties, S2.1 strings


@fuzz(200)
@given(property_maps())
def test_s2_3_allowed_property_values_are_accepted(values: dict[str, Any]) -> None:
    message = ServiceBusMessage("body", application_properties=values, message_id="m")
    message.validate()
    ServiceBusMessageBatch().add_message(message)


@fuzz(200)
@given(refused_property_maps())
def test_s2_3_a_refused_value_or_name_is_refused_naming_the_property(
        values: dict[Any, Any]) -> None:
    message = ServiceBusMessage("body", application_properties=values)
    text = refused(message.validate, rule="S2.3")
    assert any(repr(name) in text for name in values), text
    refused(lambda: ServiceBusMessageBatch().add_message(message), rule="S2.3")


@pytest.mark.parametrize("values", [[1, 2], "ab", 5, [("k", 1)]])
def test_s2_3_properties_that_are_not_a_map_are_refused(values: Any) -> None:
    """Found by the fuzzing: dict() of a list or a str raised TypeError or ValueError (and
    a list of pairs was taken); a non-map set later broke validate with AttributeError."""
    refused(lambda: ServiceBusMessage("b", application_properties=values), rule="S2.3")
    message = ServiceBusMessage("b")
    message.application_properties = values
    refused(message.validate, rule="S2.3")


@pytest.mark.parametrize("when", [datetime.min.replace(tzinfo=timezone(timedelta(hours=5))),
                                  datetime.max.replace(tzinfo=timezone(-timedelta(hours=1)))])
def test_s2_3_s8_4_a_time_without_a_utc_time_is_refused(when: datetime) -> None:
    """Found by the fuzzing: a datetime with no UTC equivalent was accepted, then raised
    OverflowError when the message was sized, sent or scheduled."""
    refused(ServiceBusMessage("b", application_properties={"t": when}).validate, rule="S2.3")
    refused(ServiceBusMessage("b", scheduled_enqueue_time_utc=when).validate, rule="S2.1")
    refused(lambda: scheduled([ServiceBusMessage("b")], when), rule="S8.4")


@pytest.mark.parametrize("field", ["body", "message_id", "subject", "to", "session_id"])
def test_s2_1_text_utf8_cannot_store_is_refused_not_a_unicode_error(field: str) -> None:
    """Found by the fuzzing: a lone surrogate raised UnicodeEncodeError (the body at once,
    the string properties when the size was counted)."""
    if field == "body":
        refused(lambda: ServiceBusMessage("a\ud800"), rule="S2.1")
        return
    message = ServiceBusMessage("b", **{field: "x\udc00"})
    refused(message.validate, rule="S2.1")
    refused(lambda: ServiceBusMessageBatch().add_message(message), rule="S2.1")


# --- S2.2, S2.4, S6.4 sizes at and past each limit

_PREMIUM = QueueProperties(name="q", max_message_size_in_kilobytes=1024)


def _engine(message: ServiceBusMessage, props: QueueProperties = _PREMIUM) -> int:
    """The size the driver send stores for ``message`` (``engine.send.small``)."""
    rows = inbox_rows(to_outgoing([message]), props, frozenset(), RoundRobin(1), "send")
    return int(rows[0]["size_in_bytes"])


@fuzz(150)
@given(st.binary(max_size=50), message_strings, st.one_of(st.none(), property_maps()))
def test_s2_4_the_client_counts_a_message_as_the_engine_does(
        body: bytes, strings: dict[str, str], values: dict[str, Any] | None) -> None:
    """The batch's size is the send's, UTF-8 and the id S2.6 gives included: else a batch
    takes a message the send refuses, or refuses one it would take."""
    message = ServiceBusMessage(body, application_properties=values, **strings)
    assert message.size_in_bytes == _engine(message)


@fuzz(60)
@given(st.sampled_from((None, 1024, 2048)), message_strings, property_maps(), st.booleans())
def test_s2_4_a_message_at_its_limit_is_taken_and_one_byte_more_refused(
        kilobytes: int | None, strings: dict[str, str], values: dict[str, Any],
        over: bool) -> None:
    props = QueueProperties(name="q", max_message_size_in_kilobytes=kilobytes)
    limit = message_limit(kilobytes)
    header = ServiceBusMessage(b"", application_properties=values,
                               **{**strings, "message_id": "m"}).size_in_bytes
    message = ServiceBusMessage(b"x" * (limit - header + over), application_properties=values,
                                **{**strings, "message_id": "m"})
    batch = ServiceBusMessageBatch(max_size_in_bytes=limit)
    if not over:
        assert _engine(message, props) == limit
        batch.add_message(message)
        return
    refused(lambda: _engine(message, props), MessageSizeExceededError, "S2.4", "m")
    refused(lambda: batch.add_message(message), MessageSizeExceededError, "S2.4")


@pytest.mark.parametrize("over", [0, 1])
def test_s2_4_the_header_limit_is_64_kb(over: int) -> None:
    filler = HEADER_LIMIT - len("m") - len('{"k":""}') + over
    message = ServiceBusMessage(b"", message_id="m", application_properties={"k": "x" * filler})
    if over:
        assert "header" in refused(lambda: _engine(message), MessageSizeExceededError, "S2.4")
    else:
        assert _engine(message) == HEADER_LIMIT


@fuzz(100)
@given(st.sampled_from(("message_id", "session_id", "partition_key", "reply_to_session_id")),
       st.sampled_from((1, 127, 128, 129, 300)), st.characters(codec="utf-8"))
def test_s2_2_identifiers_are_at_most_128_characters(field: str, length: int,
                                                     char: str) -> None:
    value = char * length
    strings = {field: value, "message_id": value} if field != "message_id" else {field: value}
    if field == "partition_key":
        strings["session_id"] = value  # S2.2: a partition key differing from it is refused
    message = ServiceBusMessage(b"b", **strings)  # type: ignore[arg-type]
    if length <= 128:
        _engine(message)
    else:
        refused(lambda: _engine(message), rule="S2.2", value=value[:40])


@fuzz(100)
@given(st.one_of(st.none(), st.integers(4090, 4100).map(lambda n: "r" * n), st.text(),
                 non_strings, st.just("\ud800")))
def test_s6_4_dead_letter_texts_are_strings_of_at_most_4096(text: Any) -> None:
    for call in (lambda: check_dead_letter_text(text, None),
                 lambda: check_dead_letter_text(None, text)):
        if text is None or (isinstance(text, str) and len(text) <= 4096 and _utf8(text)):
            call()
        else:
            refused(call, rule="S6.4")


@fuzz(100)
@given(st.one_of(st.text(max_size=130), st.integers(127, 129).map(lambda n: "s" * n),
                 st.just("s\ud800"), non_strings))
def test_s2_2_s10_2_a_session_id_is_one_a_message_can_carry(session_id: Any) -> None:
    if isinstance(session_id, str) and 0 < len(session_id) <= 128 and _utf8(session_id):
        assert check_session_id(session_id) == session_id
    else:
        refused(lambda: check_session_id(session_id), value=session_id[:40]
                if isinstance(session_id, str) else session_id)


@fuzz(100)
@given(st.one_of(st.none(), st.binary(max_size=20), st.text(max_size=20), non_strings,
                 st.sampled_from(("\udc00", "é" * 6, b"x" * 11))), st.integers(10, 12))
def test_s10_5_a_session_state_is_bytes_or_text_of_at_most_one_message(state: Any,
                                                                       limit: int) -> None:
    """Found by the fuzzing: a str state with a lone surrogate raised UnicodeEncodeError."""
    if state is None or (isinstance(state, (str, bytes)) and (
            isinstance(state, bytes) or _utf8(state))):
        size = len(state.encode() if isinstance(state, str) else state or b"")
        if size <= limit:
            assert state_bytes(state, limit) == (None if state is None else (
                state.encode() if isinstance(state, str) else state))
        else:
            refused(lambda: state_bytes(state, limit), MessageSizeExceededError, "S10.5")
    else:
        refused(lambda: state_bytes(state, limit), rule="S10.5")


def _sender(kilobytes: int | None) -> ServiceBusSender:
    entity = SimpleNamespace(name="q", max_message_kilobytes=kilobytes)
    return ServiceBusSender(entity)  # type: ignore[arg-type]


@fuzz(100)
@given(st.sampled_from((None, 1024)), st.one_of(
    st.sampled_from((None, 0, 1, 262_143, 262_144, 262_145, 1_048_576, 1_048_577, -1)),
    odd_values))
def test_s2_4_a_batch_is_at_most_the_entity_allows(kilobytes: int | None, size: Any) -> None:
    """Found by the fuzzing: a size past the limit raised a plain ValueError (no project
    error), a str one TypeError."""
    limit = 1_048_576 if kilobytes else 262_144
    ok = size is None or (type(size) is int and 0 <= size <= limit)
    if ok:
        assert _sender(kilobytes).create_message_batch(size).max_size_in_bytes == (
            size or limit)
    elif type(size) is int and size > limit:
        refused(lambda: _sender(kilobytes).create_message_batch(size),
                MessageSizeExceededError, "S2.4", size)
    else:
        refused(lambda: _sender(kilobytes).create_message_batch(size), rule="S2.4")


# --- S15.8 Config.json


@pytest.fixture(scope="module")
def folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("config")


def _read(folder: Path, content: str | bytes) -> ConfigPlan:
    path = folder / "Config.json"
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    else:
        path.write_bytes(content)
    return read_config(path, property_checker(Sku.STANDARD, 1))


def _with_comments(doc: Any) -> str:
    """``doc`` as JSON with a ``//`` comment after each line (and one before)."""
    lines = json.dumps(doc, indent=1).splitlines()
    return "// Config.json\n" + "\n".join(f"{line} // c{i} \"q\" //" for i, line in
                                          enumerate(lines))


@fuzz(50)
@given(config_documents(), st.booleans())
def test_s15_8_a_valid_document_plans_what_it_describes(folder: Path, case: ConfigCase,
                                                       comments: bool) -> None:
    plan = _read(folder, _with_comments(case.doc) if comments else json.dumps(case.doc))
    assert [name for name, _ in plan.queues] == case.queues
    assert [name for name, _ in plan.topics] == case.topics
    assert [(t, s, [r.name for r in rules]) for t, s, _, rules in plan.subscriptions] == \
        case.subscriptions


@pytest.mark.parametrize("value", ['"', '\\', 'say "hi" // not a comment', '\\"'])
def test_s15_8_a_comment_after_a_string_with_escapes_is_stripped(value: str) -> None:
    """Found by the fuzzing: an escaped quote ended the string in ``strip_comments``, so the
    comment after it was kept (and the file refused as not JSON)."""
    text = f'{{"a": {json.dumps(value)} // a "comment"\n}}'
    assert json.loads(strip_comments(text)) == {"a": value}


def test_s15_8_the_shipped_example_is_read(folder: Path) -> None:
    plan = _read(folder, (ROOT / "conf" / "Config.json").read_text(encoding="utf-8"))
    assert [q for q, _ in plan.queues] == ["orders", "audit"]
    assert [s for _, s, _, _ in plan.subscriptions] == ["all", "red", "big-blue", "green"]


def _rendered(path: tuple[Any, ...]) -> str:
    """The element ``path`` is in, as errors write it: up to its last list index."""
    last = max(i for i, part in enumerate(path) if isinstance(part, int))
    out = ""
    for part in path[:last + 1]:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else part)
    return out


def _set(doc: Any, path: tuple[Any, ...], value: Any) -> None:
    for part in path[:-1]:
        doc = doc[part]
    doc[path[-1]] = value


@fuzz(100)
@given(config_documents(), st.data())
def test_s15_8_a_broken_element_is_refused_at_its_path(folder: Path, case: ConfigCase,
                                                      data: st.DataObject) -> None:
    paths = [p for p in element_paths(case.doc) if p[-1] in ELEMENT_BREAKS and len(p) > 4]
    assume(paths)
    path = data.draw(st.sampled_from(paths))
    _set(case.doc, path, data.draw(st.sampled_from(ELEMENT_BREAKS[path[-1]])))
    message = refused(lambda: _read(folder, json.dumps(case.doc)), rule="S15.8")
    assert f"Config.json {_rendered(path)}" in message


@fuzz(80)
@given(config_documents(), st.data())
def test_s15_8_a_near_valid_document_is_planned_or_refused(folder: Path, case: ConfigCase,
                                                          data: st.DataObject) -> None:
    paths = element_paths(case.doc)
    assume(paths)
    _set(case.doc, data.draw(st.sampled_from(paths)), data.draw(json_trees))
    outcome(lambda: _read(folder, json.dumps(case.doc)), InvalidOperationError)


@fuzz(200)
@given(json_trees, st.sampled_from(("{}", '{{"UserConfig": {}}}',
                                    '{{"UserConfig": {{"Namespaces": {}}}}}',
                                    '{{"UserConfig": {{"Namespaces": [{{"Queues": {}}}]}}}}')))
def test_s15_8_any_json_is_planned_or_refused(folder: Path, tree: Any, frame: str) -> None:
    outcome(lambda: _read(folder, frame.format(json.dumps(tree))), InvalidOperationError)


@fuzz(100)
@given(st.one_of(st.binary(max_size=40), st.text(max_size=40),
                 st.text(st.sampled_from('{}[]":/\\n, 1a'), max_size=40)))
def test_s15_8_any_bytes_are_planned_or_refused(folder: Path, content: Any) -> None:
    outcome(lambda: _read(folder, content), InvalidOperationError)


_QUEUE = {"Name": "q", "Properties": {}}


def _topic(name: str, rules: list[str]) -> dict[str, Any]:
    return {"Name": name, "Subscriptions": [{"Name": "s", "Rules": [
        {"Name": r, "Properties": {"SqlFilter": {"SqlExpression": "1=1"}}} for r in rules]}]}


def _doc(**namespace: Any) -> str:
    return json.dumps({"UserConfig": {"Namespaces": [namespace]}})


def _one_rule(properties: dict[str, Any]) -> str:
    return _doc(Topics=[{"Name": "t", "Subscriptions": [{"Name": "s", "Rules": [
        {"Name": "r", "Properties": properties}]}]}])


@pytest.mark.parametrize(("content", "where"), [
    ("[" * 100_000, "(S15.8)"),
    ('{"UserConfig": ' + "1" * 5000 + "}", "(S15.8)"),
    (b'{"UserConfig": "\xff"}', "cannot read it"),
    (_doc(Queues=[{"Name": "a\\ud800"}]), "Queues[0].Name"),
    (_doc(Queues=[{"Name": "a//b"}]), "Queues[0].Name"),
    (_doc(Topics=[{"Name": "t", "Subscriptions": [{"Name": "a/b"}]}]),
     "Topics[0].Subscriptions[0].Name"),
    (_doc(Queues=[_QUEUE], Topics=[_topic("Q", [])]), "Topics[0].Name"),
    (_doc(Topics=[_topic("t", ["r", "R"])]), "Subscriptions[0].Rules[1].Name"),
    (_one_rule({"SqlFilter": {"SqlExpression": "1=1", "Parameters": [1]}}),
     "Rules[0].Properties"),
    (_one_rule({"SqlFilter": {"SqlExpression": "x = @p", "Parameters": {"@p": 2**64}}}),
     "Rules[0].Properties"),
    (_one_rule({"FilterType": "Correlation", "CorrelationFilter": {"CorrelationId": [1]}}),
     "Rules[0].Properties"),
    (_one_rule({"FilterType": "Correlation", "CorrelationFilter": {"Properties": "x"}}),
     "Rules[0].Properties"),
])
def test_s15_8_defects_the_fuzzing_found(folder: Path, content: str | bytes, where: str) -> None:
    """Found by the fuzzing: RecursionError, a ValueError from int() (4300 digits) and a
    UnicodeDecodeError escaped raw; bad names passed the check and a queue and topic of one
    name, or two rules of one name, were found only part way through creating; SQL
    parameters not a map raised TypeError; a correlation field of a list was accepted."""
    message = refused(lambda: _read(folder, content), rule="S15.8")
    assert where in message
