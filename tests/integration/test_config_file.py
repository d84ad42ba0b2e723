"""The emulator's Config.json applied to a namespace (SPEC S15.8), through the admin client
and ``sbqueue apply`` / ``sbqueue rule``; the shipped example in conf/ is the one used."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from sbqueue.cli import main
from sbqueue.exceptions import InvalidOperationError
from sbqueue.management import CorrelationRuleFilter, SqlRuleFilter, TrueRuleFilter
from sbqueue.management.config_file import strip_comments

pytestmark = pytest.mark.spark

EXAMPLE = Path(__file__).resolve().parents[2] / "conf" / "Config.json"


def test_s15_8_the_example_config_creates_the_namespace(admin) -> None:
    report = admin.apply_config(EXAMPLE)
    assert report["created"] == ["orders", "audit", "colors", "colors/Subscriptions/all",
                                 "colors/Subscriptions/red", "colors/Subscriptions/big-blue",
                                 "colors/Subscriptions/green"]
    orders = admin.get_queue("orders")
    assert orders.max_delivery_count == 5 and orders.partition_count == 16
    assert orders.duplicate_detection_history_time_window.total_seconds() == 20
    assert orders.forward_to is None  # "" means none
    assert admin.get_subscription("colors", "big-blue").forward_to == "audit"
    assert isinstance(admin.get_rule("colors", "all", "$Default").filter, TrueRuleFilter)
    red = admin.get_rule("colors", "red", "red-only")
    assert isinstance(red.filter, SqlRuleFilter) and red.filter.sql_expression == "color = 'Red'"
    assert admin.get_rule("colors", "big-blue", "blue-tagged").action.sql_expression == \
        "SET priority = 'high'"
    green = admin.get_rule("colors", "green", "green-correlation").filter
    assert isinstance(green, CorrelationRuleFilter)
    assert green.label == "Green" and green.properties == {"color": "Green"}
    again = admin.apply_config(EXAMPLE)  # what exists is left alone
    assert again["created"] == [] and len(again["existing"]) == 7


def _bad_copy(tmp_path: Path, change) -> Path:  # type: ignore[no-untyped-def]
    doc = json.loads(strip_comments(EXAMPLE.read_text()))
    change(doc["UserConfig"]["Namespaces"][0])
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize(("change", "where"), [
    (lambda ns: ns["Topics"][0]["Subscriptions"][1]["Rules"][0]["Properties"]["SqlFilter"]
     .update(SqlExpression="color = = 'Red'"),
     "Topics[0].Subscriptions[1].Rules[0].Properties"),
    (lambda ns: ns["Queues"][1]["Properties"].update(LockDuration="PT99H"),
     "Queues[1].Properties"),
    (lambda ns: ns["Queues"][0]["Properties"].update(Colour="red"), "Queues[0].Properties"),
    (lambda ns: ns["Topics"][0]["Subscriptions"][3]["Rules"][0]["Properties"].update(
        FilterType="Regex"), "Rules[0].Properties.FilterType"),
    (lambda ns: ns["Topics"][0]["Subscriptions"][2]["Properties"].update(ForwardTo="nowhere"),
     "ForwardTo='nowhere'".replace("ForwardTo", "forward_to")),
])
def test_s15_8_a_bad_file_names_its_bad_element_and_creates_nothing(admin, tmp_path, change,
                                                                     where: str) -> None:
    with pytest.raises(InvalidOperationError) as caught:
        admin.apply_config(_bad_copy(tmp_path, change))
    assert where in str(caught.value)
    assert admin.list_queues() == [] and admin.list_topics() == []


def test_s15_8_cli_apply_and_rule_commands(spark, namespace_root) -> None:
    runner = CliRunner()
    ns = ["--namespace", namespace_root]
    applied = runner.invoke(main, ["apply", *ns, str(EXAMPLE)])
    assert applied.exit_code == 0, applied.output
    assert "7 created" in applied.output
    made = runner.invoke(main, ["rule", "create", *ns, "colors", "all", "big",
                                "--sql", "quantity > 100", "--action", "SET big = TRUE"])
    assert made.exit_code == 0, made.output
    listed = runner.invoke(main, ["rule", "list", *ns, "colors", "all"])
    assert "$Default" in listed.output and "quantity > 100" in listed.output
    shown = runner.invoke(main, ["rule", "show", *ns, "colors", "all", "big"])
    assert json.loads(shown.output)["action"]["sql_expression"] == "SET big = TRUE"
    bad = runner.invoke(main, ["rule", "create", *ns, "colors", "all", "bad", "--sql", "x =="])
    assert isinstance(bad.exception, InvalidOperationError)
    assert "S15.7" in str(bad.exception)
    corr = runner.invoke(main, ["rule", "create", *ns, "colors", "all", "c",
                                "--correlation", "label=Green", "--correlation",
                                "property.color=Green"])
    assert corr.exit_code == 0, corr.output
    assert runner.invoke(main, ["rule", "delete", *ns, "colors", "all", "big"]).exit_code == 0
    assert "big" not in runner.invoke(main, ["rule", "list", *ns, "colors", "all"]).output
