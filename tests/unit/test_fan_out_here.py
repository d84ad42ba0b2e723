"""A topic send's fan-out on the driver (``engine.topics.fan_out_here``; S8.5, S10.1, S15.2,
S15.6): which rows it makes for which subscriptions. That it makes the rows the Spark
fan-out makes is held by ``test_stream_sink``."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from pyspark.sql.types import VariantVal

from sbqueue.core.properties import SubscriptionProperties
from sbqueue.core.rules import RuleProperties, SqlRuleAction, SqlRuleFilter, TrueRuleFilter
from sbqueue.engine.schema import COPY_BITS
from sbqueue.engine.topics.fan_out_here import fan_out_rows
from sbqueue.store.variant import encode_object

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=timezone.utc)


def _sub(name: str, *rules: RuleProperties, sessions: bool = False):
    sub = SubscriptionProperties(name=name, topic_name="t", requires_session=sessions)
    sub.entity_id = f"id-{name}"
    return sub, list(rules)


def _row(index: int, props: dict, session: str | None = None,
         scheduled: datetime | None = None) -> dict:
    value, metadata = encode_object(props)
    return {"batch_index": index, "message_id": f"m{index}", "session_id": session,
            "subject": None, "correlation_id": None, "to": None, "reply_to": None,
            "reply_to_session_id": None, "content_type": None, "size_in_bytes": 10,
            "scheduled_enqueue_time_utc": scheduled,
            "application_properties": {"value": value, "metadata": metadata}}


def test_plain_rows_list_matching_subscriptions_and_unmatched_ones_drop() -> None:
    subs = [_sub("all", RuleProperties("$Default", TrueRuleFilter())),
            _sub("red", RuleProperties("r", SqlRuleFilter("color = 'red'"))),
            _sub("chats", RuleProperties("$Default", TrueRuleFilter()), sessions=True)]
    out = fan_out_rows([_row(0, {"color": "red"}), _row(1, {"color": "blue"}, "s")], subs, NOW)
    assert [(r["message_id"], r["targets"], r["batch_index"]) for r in out] == [
        ("m0", ["id-all", "id-red", "id-chats", "id-chats:dlq"], 0),  # S10.1: no session
        ("m1", ["id-all", "id-chats"], 1 << COPY_BITS)]
    none = [_sub("red", RuleProperties("r", SqlRuleFilter("color = 'red'")))]
    assert fan_out_rows([_row(0, {"color": "blue"})], none, NOW) == []
    later = _row(0, {"color": "blue"}, scheduled=NOW + timedelta(hours=1))
    assert [r["targets"] for r in fan_out_rows([later], none, NOW)] == [[]]  # S8.5


def test_an_action_rule_makes_its_own_copy() -> None:
    subs = [_sub("tagged", RuleProperties("tag", SqlRuleFilter("n > 1"),
                                          SqlRuleAction("SET sys.Label = 'big'; REMOVE n")))]
    [copy] = fan_out_rows([_row(3, {"n": 5, "RuleName": "old"}), _row(4, {"n": 0})], subs, NOW)
    assert copy["batch_index"] == (3 << COPY_BITS) + 1
    assert (copy["subject"], copy["targets"]) == ("big", ["id-tagged"])
    stored = copy["application_properties"]
    assert VariantVal(stored["value"], stored["metadata"]).toPython() == {"RuleName": "tag"}
