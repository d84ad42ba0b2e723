"""S1, S16.1, S17 on real Spark + Delta: namespaces and queue administration."""

from __future__ import annotations

import pytest

from sbqueue.engine import catalog as catalog_module
from sbqueue.exceptions import (
    InvalidOperationError,
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
    ServiceBusQuotaExceededError,
)
from sbqueue.management import EntityStatus, ServiceBusAdministrationClient

pytestmark = pytest.mark.spark


@pytest.mark.slow
def test_s1_1_queue_crud_and_persistence(admin, spark, namespace_root) -> None:
    """S1.1, S16.2: definitions persist in the namespace; an empty queue counts zero."""
    created = admin.create_queue("Orders/EU", enable_partitioning=True, lock_duration="PT30S")
    assert created.partition_count == 16
    assert admin.get_queue("orders/eu").name == "Orders/EU"  # S1.7 case-insensitive lookup
    assert [q.name for q in admin.list_queues()] == ["Orders/EU"]
    updated = admin.update_queue(admin.get_queue("Orders/EU"), max_delivery_count=3)
    assert updated.max_delivery_count == 3
    # A new client (a restart) sees the stored definition.
    again = ServiceBusAdministrationClient(namespace_root, spark=spark)
    assert again.get_queue("Orders/EU").max_delivery_count == 3
    assert again.get_queue("Orders/EU").lock_duration.total_seconds() == 30
    runtime = again.get_queue_runtime_properties("Orders/EU")
    assert runtime.total_message_count == 0 and runtime.active_message_count == 0
    assert runtime.size_in_bytes == 0 and runtime.availability_status.value == "Available"
    again.delete_queue("orders/EU")
    assert again.list_queues() == []
    with pytest.raises(MessagingEntityNotFoundError):
        again.get_queue("Orders/EU")


def test_s1_7_duplicate_names_compare_case_insensitively(admin) -> None:
    """S1.7: one name space, compared case-insensitively."""
    admin.create_queue("jobs")
    with pytest.raises(MessagingEntityAlreadyExistsError, match="JOBS"):
        admin.create_queue("JOBS")


def test_s1_7_escaping_names_are_refused_and_create_nothing(admin, namespace_root) -> None:
    """S1.7: no name reaches outside the namespace root."""
    for bad in ("../outside", "/etc/q", "a/../../b"):
        with pytest.raises(InvalidOperationError, match=r"S1\.7"):
            admin.create_queue(bad)
    assert admin.list_queues() == []


def test_s1_3_partitioning_cannot_change_and_nothing_changes(admin) -> None:
    """S1.3: the failed update changes nothing, not even its other fields."""
    admin.create_queue("fixed", enable_partitioning=True)
    with pytest.raises(InvalidOperationError, match=r"S1\.3"):
        admin.update_queue("fixed" and admin.get_queue("fixed"), enable_partitioning=False,
                           max_delivery_count=2)
    assert admin.get_queue("fixed").max_delivery_count == 10


def test_s1_2_premium_namespace(spark, tmp_path) -> None:
    """S1.2: Premium partitions are fixed at namespace creation."""
    root = str(tmp_path / "premium")
    props = ServiceBusAdministrationClient.create_namespace(root, sku="Premium",
                                                            messaging_partitions=4, spark=spark)
    assert props.sku.value == "Premium" and props.messaging_partitions == 4
    admin = ServiceBusAdministrationClient(root, spark=spark)
    assert admin.create_queue("p").partition_count == 4
    with pytest.raises(InvalidOperationError, match=r"S1\.2"):
        ServiceBusAdministrationClient.create_namespace(root, sku="Premium",
                                                        messaging_partitions=2, spark=spark)
    assert admin.get_namespace_properties().queue_count == 1


def test_s1_2_standard_namespace_mixes_partitioned_and_not(admin) -> None:
    """S1.2: Standard chooses partitioning per entity."""
    assert admin.create_queue("a", enable_partitioning=True).partition_count == 16
    assert admin.create_queue("b").partition_count == 1
    ns = admin.get_namespace_properties()
    assert ns.sku.value == "Standard" and ns.queue_count == 2


def test_s1_5_partitioned_quota(admin, monkeypatch) -> None:
    """S1.5: the partitioned-entity quota; the failing create creates nothing."""
    # The rule is checked with a quota of 2 instead of 100 to keep the test short.
    monkeypatch.setattr(catalog_module, "MAX_PARTITIONED_ENTITIES", 2)
    admin.create_queue("p1", enable_partitioning=True)
    admin.create_queue("p2", enable_partitioning=True)
    with pytest.raises(ServiceBusQuotaExceededError, match=r"S1\.5"):
        admin.create_queue("p3", enable_partitioning=True)
    admin.create_queue("plain")  # non-partitioned queues do not count
    assert sorted(q.name for q in admin.list_queues()) == ["p1", "p2", "plain"]


def test_s16_1_status_is_stored(admin) -> None:
    """S16.1: status values are stored."""
    admin.create_queue("s", status="SendDisabled")
    assert admin.get_queue("s").status is EntityStatus.SEND_DISABLED


def test_s13_1_forwarding_targets_are_checked(admin) -> None:
    """S13.1: forward targets exist, are not the queue, form no cycle."""
    admin.create_queue("dest")
    with pytest.raises(MessagingEntityNotFoundError, match=r"S13\.1"):
        admin.create_queue("src", forward_to="missing")
    with pytest.raises(InvalidOperationError, match="itself"):
        admin.create_queue("self", forward_to="self")
    admin.create_queue("src", forward_to="dest")
    with pytest.raises(InvalidOperationError, match="cycle"):
        admin.update_queue(admin.get_queue("dest"), forward_to="src")


def test_connection_string_endpoint(spark, namespace_root) -> None:
    """The client's connection string (docs/api/client.md): Endpoint; other keys ignored."""
    admin = ServiceBusAdministrationClient.from_connection_string(
        f"Endpoint={namespace_root};SharedAccessKeyName=x;SharedAccessKey=y", spark=spark)
    admin.create_queue("q")
    assert admin.get_queue("q").name == "q"


def test_s1_4_a_subscription_has_its_topics_partition_count(admin, spark, tmp_path) -> None:
    """S1.4: a subscription has its topic's partition count."""
    admin.create_topic("events", enable_partitioning=True)
    admin.create_topic("plain")
    assert admin.create_subscription("events", "audit").partition_count == 16
    assert admin.create_subscription("plain", "audit").partition_count == 1
    premium = ServiceBusAdministrationClient(str(tmp_path / "p"), spark=spark)
    premium.create_namespace(str(tmp_path / "p"), sku="Premium", messaging_partitions=2,
                             spark=spark)
    premium.create_topic("t")
    assert premium.create_subscription("t", "s").partition_count == 2


@pytest.mark.slow
def test_topic_and_subscription_crud(admin, spark, namespace_root) -> None:
    """S1.3, S1.7: topic and subscription definitions, fixed properties, names."""
    admin.create_topic("Events", requires_duplicate_detection=True)
    with pytest.raises(MessagingEntityAlreadyExistsError):
        admin.create_queue("events")  # queues and topics share names (S1.7)
    sub = admin.create_subscription("events", "Audit", lock_duration="PT10S",
                                    max_delivery_count=4)
    assert sub.topic_name == "Events" and sub.lock_duration.total_seconds() == 10
    with pytest.raises(MessagingEntityAlreadyExistsError):
        admin.create_subscription("EVENTS", "audit")
    again = ServiceBusAdministrationClient(namespace_root, spark=spark)  # a restart
    assert [s.name for s in again.list_subscriptions("events")] == ["Audit"]
    updated = again.update_subscription("events", again.get_subscription("events", "audit"),
                                        max_delivery_count=7)
    assert updated.max_delivery_count == 7
    with pytest.raises(InvalidOperationError, match=r"S1\.3"):
        again.update_subscription("events", {"name": "audit", "requires_session": True})
    with pytest.raises(InvalidOperationError, match=r"S1\.3"):
        again.update_topic(again.get_topic("events"), requires_duplicate_detection=False)
    assert again.get_topic("events").requires_duplicate_detection is True
    with pytest.raises(InvalidOperationError, match=r"S1\.7"):
        again.create_subscription("events", "a/b")
    with pytest.raises(MessagingEntityNotFoundError):
        again.create_subscription("missing", "s")
    assert spark.sql(f"SELECT count(*) AS n FROM "
                     f"{again.namespace.sql_name('Events/Subscriptions/Audit')}").first().n == 0
    again.delete_topic("events")  # takes its subscriptions with it
    assert again.list_topics() == []
    with pytest.raises(MessagingEntityNotFoundError):
        again.get_subscription("events", "audit")


def test_s13_1_subscriptions_forward_to_queues_or_topics(admin) -> None:
    """S13.1: subscriptions forward to queues or topics; not with sessions."""
    admin.create_topic("t")
    admin.create_queue("q")
    assert admin.create_subscription("t", "to-q", forward_to="q").forward_to == "q"
    assert admin.create_subscription("t", "to-t", forward_to="t").forward_to == "t"
    with pytest.raises(MessagingEntityNotFoundError, match=r"S13\.1"):
        admin.create_subscription("t", "bad", forward_to="nowhere")
    with pytest.raises(InvalidOperationError, match=r"S13\.1"):
        admin.create_subscription("t", "sess", requires_session=True, forward_to="q")


@pytest.mark.slow
def test_s16_2_topic_and_subscription_runtime_properties(admin) -> None:
    admin.create_topic("events", enable_partitioning=True)
    admin.create_subscription("events", "audit")
    sub = admin.get_subscription_runtime_properties("events", "audit")
    assert (sub.name, sub.topic_name, sub.total_message_count) == ("audit", "events", 0)
    assert sub.accessed_at_utc >= sub.created_at_utc
    topic = admin.get_topic_runtime_properties("events")
    assert (topic.subscription_count, topic.size_in_bytes) == (1, 0)
    assert [t.name for t in admin.list_topics_runtime_properties()] == ["events"]
    assert len(admin.list_subscriptions_runtime_properties("events")) == 1
