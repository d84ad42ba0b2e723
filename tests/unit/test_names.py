"""S1.7: entity names."""

from __future__ import annotations

import pytest

from sbqueue.core.names import (
    name_key,
    subscription_parts,
    validate_entity_path,
    validate_short_name,
)
from sbqueue.exceptions import InvalidOperationError


@pytest.mark.parametrize("name", ["orders", "a/b/c", "Orders-2026_x.y", "x" * 260])
def test_s1_7_valid_queue_paths(name: str) -> None:
    assert validate_entity_path(name) == name


@pytest.mark.parametrize(
    ("name", "fragment"),
    [
        ("x" * 261, "at most 260"),
        ("/orders", "absolute"),
        ("orders/", "empty segment"),
        ("a//b", "empty segment"),
        ("a@b", "not allowed"),
        ("a?b", "not allowed"),
        ("a#b", "not allowed"),
        ("a*b", "not allowed"),
        ("a\\b", "not allowed"),
        ("../escape", "escape"),
        ("a/../../b", "escape"),
        ("./a", "escape"),
        ("C:/windows", "absolute"),
        ("", "empty"),
        ("q/$DeadLetterQueue", "reserved"),
    ],
)
def test_s1_7_invalid_queue_paths_name_the_value(name: str, fragment: str) -> None:
    with pytest.raises(InvalidOperationError, match=r"S1\.7") as info:
        validate_entity_path(name)
    assert fragment in str(info.value)


def test_s1_7_short_names() -> None:
    assert validate_short_name("sub-1") == "sub-1"
    for bad in ("a/b", "a\\b", "x" * 51, "..", ""):
        with pytest.raises(InvalidOperationError, match=r"S1\.7"):
            validate_short_name(bad)


def test_s1_7_lookup_is_case_insensitive() -> None:
    assert name_key("Orders/EU") == name_key("orders/eu")


def test_s1_7_name_must_be_a_string() -> None:
    with pytest.raises(InvalidOperationError, match="string"):
        validate_entity_path(42)


def test_a_subscription_path_names_its_topic_and_subscription() -> None:
    assert subscription_parts("orders/Subscriptions/eu") == ("orders", "eu")
    assert subscription_parts("orders/subscriptions/eu") == ("orders", "eu")  # S1.7: any case
    assert subscription_parts("shop/orders/Subscriptions/eu") == ("shop/orders", "eu")
    for path in ("orders", "orders/eu", "orders/Subs/eu", "Subscriptions/eu"):
        assert subscription_parts(path) is None, path
