"""Topics, subscriptions and rules through the client, the admin client and DataFrames
(SPEC S15.1-S15.7, S10.1 for topics, S10.6, S11 on topics)."""

from __future__ import annotations

import pytest

from sbqueue import Namespace, ServiceBusClient, ServiceBusMessage
from sbqueue.exceptions import (
    InvalidOperationError,
    MessagingEntityAlreadyExistsError,
    MessagingEntityNotFoundError,
)
from sbqueue.management import (
    CorrelationRuleFilter,
    FalseRuleFilter,
    RuleProperties,
    SqlRuleAction,
    SqlRuleFilter,
    TrueRuleFilter,
)

pytestmark = pytest.mark.spark

COLORS = ["Red", "Blue", "Green", "Red", "Blue", "Green"]


@pytest.fixture
def client(spark, namespace_root):
    return ServiceBusClient(namespace_root, spark=spark)


def _classic(admin) -> None:
    """The classic scenario: four subscriptions, four kinds of rule."""
    admin.create_topic("colors", enable_partitioning=True)
    admin.create_subscription("colors", "all")  # $Default: TrueFilter (S15.1)
    admin.create_subscription("colors", "red", default_rule=RuleProperties(
        "red", SqlRuleFilter("color = 'Red'")))
    admin.create_subscription("colors", "blue", default_rule=RuleProperties(
        "blue", SqlRuleFilter("color = @c", {"c": "Blue"}),
        SqlRuleAction("SET quantity = quantity * 10; SET sys.Label = 'big-blue'")))
    admin.create_subscription("colors", "green", default_rule=RuleProperties(
        "green", CorrelationRuleFilter(label="Green", properties={"color": "Green"})))


def _drain(client, sub: str) -> list:
    got = []
    with client.get_subscription_receiver("colors", sub, max_wait_time=5) as receiver:
        while batch := receiver.receive_messages(50, max_wait_time=3):
            for m in batch:
                receiver.complete_message(m)
            got.extend(batch)
    return got


@pytest.mark.slow
def test_s15_1_s15_2_classic_scenario(admin, client) -> None:
    _classic(admin)
    assert [r.name for r in admin.list_rules("colors", "all")] == ["$Default"]
    assert isinstance(admin.get_rule("colors", "all", "$Default").filter, TrueRuleFilter)
    with client.get_topic_sender("colors") as sender:
        sender.send_messages([
            ServiceBusMessage(f"{c}-{i}", subject=c, message_id=f"m{i}",
                              application_properties={"color": c, "quantity": i})
            for i, c in enumerate(COLORS)])
    assert sorted(str(m) for m in _drain(client, "all")) == sorted(
        f"{c}-{i}" for i, c in enumerate(COLORS))
    red = _drain(client, "red")
    assert sorted(str(m) for m in red) == ["Red-0", "Red-3"]
    assert all("RuleName" not in m.application_properties for m in red)  # no action
    blue = sorted(_drain(client, "blue"), key=lambda m: m.message_id)
    assert [m.application_properties["quantity"] for m in blue] == [10, 40]  # S15.6
    assert {m.subject for m in blue} == {"big-blue"}
    assert {m.application_properties["RuleName"] for m in blue} == {"blue"}  # S15.2
    assert sorted(str(m) for m in _drain(client, "green")) == ["Green-2", "Green-5"]
    # per subscription, numbers start at 1 in each partition (S3)
    assert all((m.sequence_number & 0xFFFF_FFFF_FFFF) >= 1 for m in red)


def test_s15_2_copies_per_rule_outcome_and_unmatched_dropped(admin, client, spark,
                                                             namespace_root) -> None:
    admin.create_topic("t")
    admin.create_subscription("t", "s", default_rule=RuleProperties(
        "plain1", SqlRuleFilter("n > 0")))
    admin.create_rule("t", "s", "plain2", filter=SqlRuleFilter("n > 1"))
    admin.create_rule("t", "s", "act", filter=SqlRuleFilter("n > 2"),
                      action=SqlRuleAction("SET tagged = TRUE"))
    admin.create_rule("t", "s", "never", filter=FalseRuleFilter(),
                      action=SqlRuleAction("SET x = 1"))
    ns = Namespace(namespace_root, spark)
    df = spark.createDataFrame([(f"b{n}", n) for n in range(5)], "body string, n int")
    result = ns.topic("t").send_dataframe(
        df.selectExpr("body", "named_struct('n', n) AS application_properties"))
    assert result.count == 4 + 2  # n=1..4 plain once (two plain rules: one copy); n=3,4 act
    rows = ns.entity("t/Subscriptions/s").messages().select(
        "body", "application_properties").collect()
    plain = sorted(r.body.decode() for r in rows
                   if "RuleName" not in r.application_properties.toPython())
    acted = sorted(r.body.decode() for r in rows
                   if r.application_properties.toPython().get("RuleName") == "act")
    assert plain == ["b1", "b2", "b3", "b4"]  # b0 matched nothing: dropped (S15.2)
    assert acted == ["b3", "b4"]
    # the SQL view of the subscription sees the same (Spark SQL by name)
    assert spark.sql(f"SELECT count(*) FROM {ns.sql_name('t/Subscriptions/s')}").first()[0] == 6


@pytest.mark.slow
def test_s15_2_fan_out_is_one_commit(admin, spark, namespace_root) -> None:
    admin.create_topic("t")
    for i in range(5):
        admin.create_subscription("t", f"s{i}", default_rule=RuleProperties(
            "r", SqlRuleFilter(f"n % 5 = {i} OR n = 99")))
    ns = Namespace(namespace_root, spark)
    topic = ns.topic("t")
    before = topic.inbox.version()
    df = spark.range(100).selectExpr("CAST(id AS STRING) AS body",
                                     "named_struct('n', id) AS application_properties")
    topic.send_dataframe(df)
    assert topic.inbox.version() == before + 1
    counts = [ns.entity(f"t/Subscriptions/s{i}").messages().count() for i in range(5)]
    assert counts == [21, 21, 21, 21, 20]  # 99 goes to every one (99 % 5 = 4 already)


def test_s15_7_rules_admin_refuses_bad_rules(admin) -> None:
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    with pytest.raises(InvalidOperationError, match="column 8"):
        admin.create_rule("t", "s", "bad", filter=SqlRuleFilter("color == 'x'"))
    with pytest.raises(InvalidOperationError, match=r"S15\.7"):
        admin.create_rule("t", "s", "bad", filter=SqlRuleFilter("a = 1"),
                          action=SqlRuleAction("SET"))
    assert [r.name for r in admin.list_rules("t", "s")] == ["$Default"]  # nothing added
    admin.create_rule("t", "s", "ok", filter=SqlRuleFilter("a = 1"))
    with pytest.raises(MessagingEntityAlreadyExistsError):
        admin.create_rule("t", "s", "OK")
    rule = admin.get_rule("t", "s", "ok")
    rule.filter = SqlRuleFilter("a = 2")
    admin.update_rule("t", "s", rule)
    assert admin.get_rule("t", "s", "ok").filter.sql_expression == "a = 2"
    admin.delete_rule("t", "s", "$Default")
    assert [r.name for r in admin.list_rules("t", "s")] == ["ok"]
    with pytest.raises(MessagingEntityNotFoundError):
        admin.get_rule("t", "s", "$Default")


@pytest.mark.slow
def test_s10_1_session_subscription_dead_letters_a_copy_without_session(admin, client
                                                                        ) -> None:
    admin.create_topic("t")
    admin.create_subscription("t", "sess", requires_session=True)
    admin.create_subscription("t", "plain")
    with client.get_topic_sender("t") as sender:
        sender.send_messages([ServiceBusMessage("no-session"),
                              ServiceBusMessage("in-session", session_id="a")])
    with client.get_subscription_receiver("t", "sess", session_id="a",
                                          max_wait_time=5) as receiver:
        got = receiver.receive_messages(10)
        assert [str(m) for m in got] == ["in-session"]
        receiver.complete_message(got[0])
    with client.get_subscription_receiver("t", "sess", sub_queue="deadletter",
                                          max_wait_time=5) as dlq:
        dead = dlq.receive_messages(10)
    assert [(str(m), m.dead_letter_reason) for m in dead] == [("no-session",
                                                               "Session ID is null")]
    assert client.list_subscription_sessions("t", "sess") == []  # S10.6: all settled
    with client.get_subscription_receiver("t", "plain", max_wait_time=5) as receiver:
        assert sorted(str(m) for m in receiver.receive_messages(10)) == [
            "in-session", "no-session"]


@pytest.mark.slow
def test_s10_1_s7_3_a_sessionless_copy_is_dead_lettered_as_the_send_returns(
        admin, client, spark, namespace_root) -> None:
    """Only the dead-letter side is read: no receive on the subscription comes first, so
    nothing but the fan-out can have put the copies there (issue 17)."""
    admin.create_topic("t", enable_partitioning=True)
    admin.create_subscription("t", "sess", requires_session=True)
    admin.create_subscription("t", "tagged", requires_session=True, default_rule=RuleProperties(
        "tag", TrueRuleFilter(), action=SqlRuleAction("SET tagged = 1")))
    with client.get_topic_sender("t") as sender:
        sender.send_messages([ServiceBusMessage("lost-1"), ServiceBusMessage("lost-2"),
                              ServiceBusMessage("kept", session_id="a")])
    reason = "Session ID is null"
    for sub in ("sess", "tagged"):
        runtime = admin.get_subscription_runtime_properties("t", sub)
        assert (runtime.dead_letter_message_count, runtime.active_message_count) == (2, 1)
        view = Namespace(namespace_root, spark=spark).sql_name(f"t/Subscriptions/{sub}")
        rows = spark.sql(f"SELECT body, sub_queue, dead_letter_reason FROM {view}").collect()
        assert sorted((bytes(r[0]).decode(), r[1], r[2]) for r in rows) == [
            ("kept", "Main", None), ("lost-1", "DeadLetter", reason),
            ("lost-2", "DeadLetter", reason)]
        with client.get_subscription_receiver("t", sub, sub_queue="deadletter",
                                              max_wait_time=5) as dlq:
            assert sorted(str(m) for m in dlq.peek_messages(10)) == ["lost-1", "lost-2"]
            dead = dlq.receive_messages(10, max_wait_time=5)
            assert sorted((str(m), m.dead_letter_reason) for m in dead) == [
                ("lost-1", reason), ("lost-2", reason)]
            for m in dead:
                dlq.complete_message(m)
        runtime = admin.get_subscription_runtime_properties("t", sub)
        assert (runtime.dead_letter_message_count, runtime.active_message_count) == (0, 1)
        with client.get_subscription_receiver("t", sub, session_id="a",
                                              max_wait_time=5) as receiver:
            got = receiver.receive_messages(10, max_wait_time=5)
            assert [str(m) for m in got] == ["kept"]
            receiver.complete_message(got[0])


def test_a_subscription_is_not_sendable_and_a_topic_not_receivable(admin, client,
                                                                    spark, namespace_root
                                                                    ) -> None:
    admin.create_topic("t")
    admin.create_subscription("t", "s")
    ns = Namespace(namespace_root, spark)
    with pytest.raises(InvalidOperationError, match="send to the topic"):
        ns.entity("t/Subscriptions/s").send_dataframe(
            spark.createDataFrame([("x",)], "body string"))
    with pytest.raises(InvalidOperationError, match="is a topic"):
        ns.entity("t")


@pytest.mark.slow
def test_s8_5_scheduled_topic_messages_wait_at_the_topic(clock, admin, client) -> None:
    from datetime import datetime, timedelta, timezone

    from sbqueue.exceptions import MessageNotFoundError

    admin.create_topic("t", enable_partitioning=True)
    admin.create_subscription("t", "a")
    admin.create_subscription("t", "b", default_rule=RuleProperties(
        "one", SqlRuleFilter("n = 1")))
    later = datetime.now(timezone.utc) + timedelta(hours=1)
    with client.get_topic_sender("t") as sender:
        seqs = sender.schedule_messages([
            ServiceBusMessage("x", application_properties={"n": 1}),
            ServiceBusMessage("y", application_properties={"n": 2})], later)
        assert len(seqs) == 2
        # counted once each, though "x" has a copy in both subscriptions
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 2
        runtime = admin.get_subscription_runtime_properties("t", "a")
        assert runtime.total_message_count == 0  # never shown as Scheduled (S8.5)
        sender.cancel_scheduled_messages(seqs[0])  # from both subscriptions
        assert admin.get_topic_runtime_properties("t").scheduled_message_count == 1
        with pytest.raises(MessageNotFoundError):
            sender.cancel_scheduled_messages(seqs[0])
        soon = sender.schedule_messages(ServiceBusMessage("soon"),
                                        datetime.now(timezone.utc) + timedelta(seconds=8))
        assert len(set(seqs + soon)) == 3
    clock.advance(9)  # "soon" is due now
    with client.get_subscription_receiver("t", "a", max_wait_time=10) as receiver:
        got = receiver.receive_messages(10)
        assert [str(m) for m in got] == ["soon"]
        receiver.complete_message(got[0])
    with client.get_subscription_receiver("t", "b", max_wait_time=2) as receiver:
        assert receiver.receive_messages(10) == []  # x was cancelled, y is not for b


def test_s11_duplicates_on_a_topic_count_each_copy_apart(admin, client) -> None:
    admin.create_topic("t", requires_duplicate_detection=True,
                       duplicate_detection_history_time_window="PT10M")
    admin.create_subscription("t", "s")
    admin.create_rule("t", "s", "tag", filter=TrueRuleFilter(),
                      action=SqlRuleAction("SET tagged = TRUE"))
    with client.get_topic_sender("t") as sender:
        sender.send_messages(ServiceBusMessage("first", message_id="m"))
        sender.send_messages(ServiceBusMessage("again", message_id="m"))  # a duplicate
    with client.get_subscription_receiver("t", "s", max_wait_time=5) as receiver:
        got = receiver.receive_messages(10)
    copies = sorted((str(m), (m.application_properties or {}).get("RuleName", "")) for m in got)
    assert copies == [("first", ""), ("first", "tag")]  # plain and rule copy, once each


def test_s15_1_s1_5_subscription_and_partitioned_topic_quotas(admin, monkeypatch) -> None:
    """2,000 subscriptions per topic and 100 partitioned queues + topics, checked with
    quotas of 2 to keep the test short; a refused create creates nothing."""
    import sbqueue.engine.catalog as catalog_module
    from sbqueue.exceptions import ServiceBusQuotaExceededError

    monkeypatch.setattr(catalog_module, "MAX_SUBSCRIPTIONS", 2)
    monkeypatch.setattr(catalog_module, "MAX_PARTITIONED_ENTITIES", 2)
    admin.create_topic("t", enable_partitioning=True)
    admin.create_queue("q", enable_partitioning=True)
    with pytest.raises(ServiceBusQuotaExceededError, match=r"S1\.5"):
        admin.create_topic("t2", enable_partitioning=True)
    admin.create_subscription("t", "a")
    admin.create_subscription("t", "b")
    with pytest.raises(ServiceBusQuotaExceededError, match=r"S15\.1"):
        admin.create_subscription("t", "c")
    assert [s.name for s in admin.list_subscriptions("t")] == ["a", "b"]
    assert [t.name for t in admin.list_topics()] == ["t"]
