"""S1.2, S1.3, S1.6, S5.2, S6.7, S8.1, S11.1, S16.1, S16.3: queue definitions."""

from __future__ import annotations

from datetime import timedelta

import pytest

from sbqueue.core.durations import NEVER, format_duration, parse_duration
from sbqueue.core.properties import (
    EntityStatus,
    NamespaceProperties,
    QueueProperties,
    Sku,
    build_queue_properties,
)
from sbqueue.exceptions import InvalidOperationError


def std(**kw: object) -> QueueProperties:
    return build_queue_properties("q", kw, sku=Sku.STANDARD, messaging_partitions=1)


def test_sdk_defaults() -> None:
    q = std()
    assert q.lock_duration == timedelta(seconds=60)
    assert q.max_delivery_count == 10
    assert q.max_size_in_megabytes == 1024
    assert q.duplicate_detection_history_time_window == timedelta(minutes=10)
    assert q.default_message_time_to_live == NEVER
    assert q.auto_delete_on_idle == NEVER
    assert q.status is EntityStatus.ACTIVE
    assert q.max_message_size_in_kilobytes is None


def test_s1_2_standard_partitioning_is_16_or_1() -> None:
    assert std(enable_partitioning=True).partition_count == 16
    assert std(enable_partitioning=False).partition_count == 1
    assert std().partition_count == 1


@pytest.mark.parametrize("count", [1, 2, 4])
def test_s1_2_premium_queues_take_the_namespace_partitions(count: int) -> None:
    q = build_queue_properties("q", {}, sku=Sku.PREMIUM, messaging_partitions=count)
    assert q.partition_count == count
    assert q.enable_partitioning is (count > 1)
    assert q.max_message_size_in_kilobytes == 1024


def test_s1_2_premium_rejects_a_contrary_partitioning_flag() -> None:
    with pytest.raises(InvalidOperationError, match=r"S1\.2"):
        build_queue_properties("q", {"enable_partitioning": False}, sku=Sku.PREMIUM,
                               messaging_partitions=4)


@pytest.mark.parametrize(("sku", "parts"), [("Premium", 3), ("Premium", 8), ("Basic", None),
                                             ("Standard", 4), ("Premium", True)])
def test_s1_2_namespace_sku_and_partitions_are_checked(sku: str, parts: object) -> None:
    with pytest.raises(InvalidOperationError, match=r"S1\.2"):
        NamespaceProperties.validate(sku, parts)


def test_s1_3_partitioning_and_other_fixed_properties_cannot_change() -> None:
    base = std(enable_partitioning=True)
    for key, value in (("enable_partitioning", False), ("requires_session", True),
                       ("requires_duplicate_detection", True)):
        with pytest.raises(InvalidOperationError, match=r"S1\.3"):
            build_queue_properties("q", {key: value}, sku=Sku.STANDARD, messaging_partitions=1,
                                   base=base)
    same = build_queue_properties("q", {"enable_partitioning": True, "max_delivery_count": 3},
                                  sku=Sku.STANDARD, messaging_partitions=1, base=base)
    assert same.partition_count == 16 and same.max_delivery_count == 3


@pytest.mark.parametrize(
    ("key", "value", "rule"),
    [
        ("lock_duration", timedelta(seconds=4), "out of range"),
        ("lock_duration", "PT6M", "out of range"),
        ("max_delivery_count", 0, "S6.7"),
        ("max_delivery_count", "5", "S6.7"),
        ("default_message_time_to_live", "PT0.5S", "out of range"),
        ("duplicate_detection_history_time_window", "PT19S", "out of range"),
        ("duplicate_detection_history_time_window", "P8D", "out of range"),
        ("auto_delete_on_idle", "PT4M", "out of range"),
        ("max_size_in_megabytes", 512, "S1.6"),
        ("max_size_in_megabytes", 6000, "S1.6"),
        ("max_message_size_in_kilobytes", 2048, "Premium"),
        ("requires_session", "yes", "True or False"),
        ("status", "Paused", "not one of"),
        ("lock_duration", "1 minute", "ISO-8601"),
        ("lock_duration", "P1M", "years and months"),
        ("no_such_property", 1, "unknown queue property"),
        ("user_metadata", "x" * 1025, "1024"),
    ],
)
def test_every_property_is_validated_with_a_clear_message(key: str, value: object,
                                                          rule: str) -> None:
    with pytest.raises(InvalidOperationError) as info:
        std(**{key: value})
    assert rule in str(info.value)
    assert key in str(info.value) or "propert" in str(info.value)


def test_s1_6_size_range_on_standard_and_premium() -> None:
    assert std(max_size_in_megabytes=5120).max_size_in_megabytes == 5120
    prem = build_queue_properties("q", {"max_size_in_megabytes": 40960,
                                        "max_message_size_in_kilobytes": 102400},
                                  sku=Sku.PREMIUM, messaging_partitions=2)
    assert prem.max_message_size_in_kilobytes == 102400


def test_s5_2_s8_1_s11_1_s16_3_duration_bounds_accept_the_edges() -> None:
    q = std(lock_duration="PT5S", default_message_time_to_live="PT1S",
            duplicate_detection_history_time_window="P7D", auto_delete_on_idle="PT5M")
    assert q.lock_duration == timedelta(seconds=5)
    assert q.duplicate_detection_history_time_window == timedelta(days=7)
    assert std(lock_duration=timedelta(minutes=5)).lock_duration == timedelta(minutes=5)


def test_s16_1_status_values() -> None:
    for status in ("Active", "Disabled", "SendDisabled", "ReceiveDisabled"):
        assert std(status=status).status.value == status


def test_s13_1_a_session_queue_cannot_forward() -> None:
    with pytest.raises(InvalidOperationError, match=r"S13\.1"):
        std(requires_session=True, forward_to="other")


def test_definitions_round_trip_through_json() -> None:
    q = std(lock_duration="PT30S", enable_partitioning=True, user_metadata="m",
            default_message_time_to_live=timedelta(hours=1, microseconds=5))
    again = QueueProperties.from_json(q.to_json())
    assert again == q


@pytest.mark.parametrize(
    "text", ["PT1M", "P7D", "PT0.5S", "P1DT2H3M4.25S", "P10675199DT2H48M5.4775807S"]
)
def test_iso_durations_round_trip(text: str) -> None:
    value = parse_duration(text, "d")
    assert parse_duration(format_duration(value), "d") == value


def test_s1_4_subscription_takes_the_parent_partition_count() -> None:
    from sbqueue.core.properties import SubscriptionProperties, build_properties

    sub = build_properties(SubscriptionProperties, "s", {}, sku=Sku.STANDARD,
                           messaging_partitions=1, parent_partitions=16)
    assert sub.partition_count == 16
    with pytest.raises(InvalidOperationError, match="unknown subscription property"):
        build_properties(SubscriptionProperties, "s", {"enable_partitioning": True},
                         sku=Sku.STANDARD, messaging_partitions=1, parent_partitions=16)


def test_topic_properties_have_the_sdk_defaults() -> None:
    from sbqueue.core.properties import TopicProperties, build_properties

    topic = build_properties(TopicProperties, "t", {"enable_partitioning": True},
                             sku=Sku.STANDARD, messaging_partitions=1)
    assert topic.partition_count == 16 and topic.support_ordering is False
    assert topic.duplicate_detection_history_time_window == timedelta(minutes=10)
    with pytest.raises(InvalidOperationError, match="unknown topic property"):
        build_properties(TopicProperties, "t", {"lock_duration": "PT1M"}, sku=Sku.STANDARD,
                         messaging_partitions=1)
