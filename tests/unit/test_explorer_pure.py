"""The explorer's pure parts, without Spark or a server: how a body is shown, the chart,
and the guard's rules (issue 46)."""

from __future__ import annotations

import json
import re

import pytest

from sbqueue.explorer.actions import ACTIONS
from sbqueue.explorer.bodies import MAX_SHOWN, hex_dump, shown_body
from sbqueue.explorer.charts import partition_chart
from sbqueue.explorer.guard import COOKIE, Guard, is_loopback


def test_a_json_body_is_indented_by_its_content_type_or_its_shape() -> None:
    compact = b'{"order": 7, "items": ["a", "b"]}'
    for content_type in ("application/json", None):
        shown = shown_body(compact, content_type)
        assert shown.kind == "json"
        assert shown.text == json.dumps(json.loads(compact), indent=2)
    assert shown_body(b"[1, 2", "application/json").kind == "text"  # not JSON after all


def test_text_stays_text_and_anything_else_is_a_hex_dump() -> None:
    assert shown_body("grüße <b>".encode()).text == "grüße <b>"
    binary = shown_body(b"\x00\x01abc\xff")
    assert binary.kind == "hex"
    assert binary.text == "00000000  " + "00 01 61 62 63 ff".ljust(47) + "  ..abc."
    assert shown_body(b"tab\tand\nnewline").kind == "text"
    assert shown_body(b"bell\x07").kind == "hex"
    assert shown_body(None).kind == shown_body(b"").kind == "empty"


def test_a_large_body_is_cut_to_whole_characters_and_says_so() -> None:
    body = ("é" * MAX_SHOWN).encode()  # two bytes each: the cut falls inside a character
    shown = shown_body(body)
    assert (shown.kind, shown.size, shown.truncated) == ("text", 2 * MAX_SHOWN, True)
    assert set(shown.text) == {"é"} and len(shown.text) == MAX_SHOWN // 2


def test_hex_dump_lines_hold_sixteen_bytes_with_offsets() -> None:
    lines = hex_dump(bytes(range(40))).splitlines()
    assert [line[:8] for line in lines] == ["00000000", "00000010", "00000020"]
    assert lines[1].split("  ")[1].split() == [f"{b:02x}" for b in range(16, 32)]


def test_the_chart_draws_one_stacked_bar_per_partition_scaled_to_the_longest() -> None:
    svg = partition_chart({0: {"active": 30, "dead_letter": 10}, 1: {"active": 20},
                           2: {}})
    assert svg.startswith("<svg") and svg.endswith("</svg>")
    bars = re.findall(r'width="([\d.]+)" height="18" fill="[^"]+" data-kind="(\w+)" '
                      r'data-count="(\d+)"', svg)
    assert {(k, n) for _, k, n in bars} == {("active", "30"), ("dead_letter", "10"),
                                            ("active", "20")}
    by_count = {int(n): float(w) for w, _, n in bars}
    assert by_count[30] + by_count[10] == pytest.approx(520)  # the longest spans the chart
    assert by_count[20] == pytest.approx(520 / 2)
    assert re.findall(r'class="total">(\d+)<', svg) == ["40", "20", "0"]


def test_loopback_is_only_this_machine() -> None:
    for host in ("127.0.0.1", "127.0.0.2", "::1", "[::1]", "localhost"):
        assert is_loopback(host), host
    for host in ("0.0.0.0", "::", "192.168.1.5", "example.com", ""):
        assert not is_loopback(host), host


def test_the_token_is_taken_from_a_bearer_header_the_cookie_or_the_query() -> None:
    guard = Guard(token="s3cret")
    assert not guard.admits({}, {}, {})
    assert not guard.admits({"authorization": "Bearer wrong"}, {COOKIE: "nope"}, {"token": ""})
    assert guard.admits({"authorization": "Bearer s3cret"}, {}, {})
    assert guard.admits({}, {COOKIE: "s3cret"}, {})
    assert guard.admits({}, {}, {"token": "s3cret"})
    assert Guard().admits({}, {}, {})  # no token: loopback only, everyone there


def test_an_action_form_needs_actions_allowed_its_csrf_token_and_the_same_origin() -> None:
    same = {"host": "127.0.0.1:8765", "origin": "http://127.0.0.1:8765"}
    read_only = Guard()
    assert "read-only" in str(read_only.refuses_form({"csrf": read_only.csrf}, same))
    guard = Guard(allow_actions=True)
    assert guard.refuses_form({"csrf": guard.csrf}, same) is None
    assert "CSRF" in str(guard.refuses_form({}, same))
    assert "CSRF" in str(guard.refuses_form({"csrf": Guard().csrf}, same))
    assert "another origin" in str(guard.refuses_form(
        {"csrf": guard.csrf}, {**same, "origin": "http://evil.example"}))
    assert "another site" in str(guard.refuses_form(
        {"csrf": guard.csrf}, {**same, "sec-fetch-site": "cross-site"}))


def test_each_action_asks_its_question_with_what_it_was_given() -> None:
    assert ACTIONS["resubmit"].question("orders", {"where": "x > 1"}) == (
        "Resubmit dead-lettered messages on orders (where = 'x > 1')?")
    assert ACTIONS["purge"].question("orders", {}) == "Purge messages on orders?"
