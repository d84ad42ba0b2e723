"""The explorer's routes and /metrics through the framework's test client, on a real
namespace (issue 46): what the pages show matches the engine's counts, bodies are
escaped, actions are guarded and report what they did or the engine's one-line error."""

from __future__ import annotations

import re
from html import unescape

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from sbqueue import ServiceBusClient, ServiceBusMessage
from sbqueue.cli import main
from sbqueue.explorer import Guard, create_app
from sbqueue.management import SqlRuleFilter

pytestmark = pytest.mark.spark
BASE = "http://127.0.0.1"


@pytest.fixture
def filled(admin, spark, namespace_root):
    """orders (16 partitions): 5 messages, the first dead-lettered, one a JSON body,
    one holding markup; a topic with a filtered subscription; a session queue."""
    admin.create_queue("orders", enable_partitioning=True, max_delivery_count=1)
    admin.create_topic("events")
    admin.create_subscription("events", "red")
    admin.delete_rule("events", "red", "$Default")
    admin.create_rule("events", "red", "only-red", filter=SqlRuleFilter("color = 'red'"))
    admin.create_queue("jobs", requires_session=True)
    client = ServiceBusClient(namespace_root, spark=spark)
    with client.get_queue_sender("orders") as sender:
        # the one to dead-letter goes first and alone: which partition a receive looks at
        # first is not promised, so a receive among all five could take any of them
        sender.send_messages(ServiceBusMessage("plain 0"))
        with client.get_queue_receiver("orders") as receiver:
            got = receiver.receive_messages(1, max_wait_time=10)[0]
            receiver.dead_letter_message(got, reason="<i>bad</i>", error_description="broken")
        sender.send_messages([ServiceBusMessage(f"plain {i}") for i in (1, 2)])
        sender.send_messages(ServiceBusMessage('{"order": 7, "items": ["a"]}',
                                               content_type="application/json"))
        sender.send_messages(ServiceBusMessage("<script>alert('body')</script>",
                                               application_properties={"note": "<b>x</b>"}))
    with client.get_topic_sender("events") as sender:
        sender.send_messages(ServiceBusMessage("r", application_properties={"color": "red"}))
    with client.get_queue_sender("jobs") as sender:
        sender.send_messages(ServiceBusMessage("j", session_id="s-1"))
    return client


def _app(namespace_root, spark, **guard):
    return TestClient(create_app(namespace_root, spark=spark, guard=Guard(**guard)),
                      base_url=BASE, raise_server_exceptions=False)


def _cells(html: str, entity: str) -> dict[str, str]:
    row = re.search(rf'<tr data-entity="{re.escape(entity)}".*?</tr>', html, re.S)
    assert row, entity
    return {k: v.strip() for k, v in re.findall(
        r'<td class="num (\w+)">([^<]*)</td>', row.group(0))}


def test_the_namespace_page_shows_every_entity_with_the_engines_counts(
        filled, admin, namespace_root, spark) -> None:
    """S16.2: the same numbers as the runtime properties (what ``sbqueue stats`` prints)."""
    page = _app(namespace_root, spark).get("/")
    assert page.status_code == 200
    for q in admin.list_queues_runtime_properties():
        cells = _cells(page.text, q.name)
        assert (int(cells["active"]), int(cells["dead_letter"]), int(cells["scheduled"]),
                int(cells["size"])) == (q.active_message_count, q.dead_letter_message_count,
                                        q.scheduled_message_count, q.size_in_bytes)
    sub = admin.get_subscription_runtime_properties("events", "red")
    assert int(_cells(page.text, "events/Subscriptions/red")["active"]) == (
        sub.active_message_count) == 1
    assert 'data-entity="events"' in page.text and "sessions</span>" in page.text


def test_an_entity_page_has_its_partitions_chart_rules_and_sessions(
        filled, namespace_root, spark) -> None:
    app = _app(namespace_root, spark)
    orders = app.get("/entity", params={"path": "orders"}).text
    counts = [int(n) for n in re.findall(r'data-count="(\d+)"', orders)]
    assert sum(counts) == 5 and orders.count("<title>partition ") == len(counts)
    assert orders.count('class="total">') == 16  # one bar a partition
    assert "max_delivery_count" in orders
    red = app.get("/entity", params={"path": "events/Subscriptions/red"}).text
    assert "only-red" in red and "SQL: color = &#39;red&#39;" in red
    jobs = app.get("/entity", params={"path": "jobs"}).text
    assert "Sessions with a state or a lock" in jobs
    topic = app.get("/entity", params={"path": "events"}).text
    assert 'data-entity="events/Subscriptions/red"' in topic


def test_messages_are_peeked_and_shown_escaped(filled, namespace_root, spark) -> None:
    app = _app(namespace_root, spark)
    listing = app.get("/messages", params={"path": "orders"}).text
    assert "<script>" not in listing and "&lt;script&gt;" in listing
    seqs = [int(s) for s in re.findall(r"seq=(\d+)", listing)]
    assert len(seqs) == 4  # 5 sent, 1 dead-lettered
    pages = {s: app.get("/message", params={"path": "orders", "seq": s}).text for s in seqs}
    marked = next(p for p in pages.values() if "alert" in p)
    assert "<script>" not in marked and "<b>x</b>" not in marked
    assert "&lt;b&gt;x&lt;/b&gt;" in marked
    json_page = next(p for p in pages.values() if "order" in p and "json" in p)
    assert '{\n  &#34;order&#34;: 7,' in json_page
    dead = app.get("/messages", params={"path": "orders", "dlq": "1"}).text
    dead_seq = re.findall(r"seq=(\d+)", dead)
    assert len(dead_seq) == 1
    one = app.get("/message", params={"path": "orders", "dlq": "1", "seq": dead_seq[0]}).text
    assert "&lt;i&gt;bad&lt;/i&gt;" in one and "<i>bad" not in one


def test_paging_goes_on_after_the_last_message_of_a_page(filled, namespace_root,
                                                         spark) -> None:
    app = _app(namespace_root, spark)
    first = app.get("/messages", params={"path": "orders", "n": "3"}).text
    after = unescape(re.search(r'id="next" href="([^"]+)"', first).group(1))
    second = app.get(after).text
    seen = re.findall(r"seq=(\d+)", first) + re.findall(r"seq=(\d+)", second)
    assert len(seen) == len(set(seen)) == 4
    bad = app.get("/messages", params={"path": "orders", "after": "yesterday"})
    assert bad.status_code == 400 and "after=&#39;yesterday&#39; is not" in bad.text
    too_many = app.get("/messages", params={"path": "orders", "n": "1000"})
    assert too_many.status_code == 400 and "a page shows 1 to 250" in too_many.text


def test_a_missing_entity_or_message_is_one_line_not_a_trace(filled, namespace_root,
                                                              spark) -> None:
    app = _app(namespace_root, spark)
    for params in ({"path": "nope"}, {"path": "orders", "seq": "99999"},
                   {"path": "orders", "seq": "x"}):
        page = app.get("/message" if "seq" in params else "/entity", params=params)
        assert page.status_code in (400, 404)
        assert len(re.findall(r'id="error">error: [^<\n]+</p>', page.text)) == 1
        assert "Traceback" not in page.text


def _form(app: TestClient, path: str = "orders") -> str:
    return re.search(r'name="csrf" value="([^"]+)"',
                     app.get("/entity", params={"path": path}).text).group(1)


def test_read_only_by_default_an_action_changes_nothing(filled, admin, namespace_root,
                                                         spark) -> None:
    app = _app(namespace_root, spark)
    assert "Resubmit" not in app.get("/entity", params={"path": "orders"}).text
    refused = app.post("/action/purge", data={"path": "orders", "confirmed": "yes",
                                              "csrf": Guard().csrf})
    assert refused.status_code == 403 and "read-only" in refused.text
    assert admin.get_queue_runtime_properties("orders").active_message_count == 4


def test_a_resubmit_asks_first_then_reports_and_the_counts_change(
        filled, admin, namespace_root, spark) -> None:
    app = _app(namespace_root, spark, allow_actions=True)
    csrf = _form(app)
    assert app.post("/action/resubmit", data={"path": "orders", "where": "true"}
                    ).status_code == 403  # no CSRF token
    ask = app.post("/action/resubmit", data={"path": "orders", "csrf": csrf, "where": "true"})
    assert "Resubmit dead-lettered messages on orders (where = &#39;true&#39;)?" in ask.text
    assert admin.get_queue_runtime_properties("orders").dead_letter_message_count == 1
    done = app.post("/action/resubmit", data={"path": "orders", "csrf": csrf,
                                              "where": "true", "confirmed": "yes"})
    assert done.status_code == 200
    assert "resubmitted 1 dead-lettered message(s) of orders to orders" in done.text
    cells = _cells(app.get("/").text, "orders")
    assert (cells["active"], cells["dead_letter"]) == ("5", "0")


def test_a_bad_predicate_shows_the_engines_one_line_error_and_moves_nothing(
        filled, admin, namespace_root, spark) -> None:
    app = _app(namespace_root, spark, allow_actions=True)
    done = app.post("/action/resubmit", data={"path": "orders", "csrf": _form(app),
                                              "where": "color ===", "confirmed": "yes"})
    assert done.status_code == 400
    errors = re.findall(r'id="error">error: ([^<\n]+)</p>', done.text)
    assert len(errors) == 1 and errors[0].startswith("--where &#39;color ===&#39;:")
    assert "Traceback" not in done.text and "java." not in done.text
    assert admin.get_queue_runtime_properties("orders").dead_letter_message_count == 1


def test_send_purge_and_status_act_through_the_engine(filled, admin, namespace_root,
                                                      spark) -> None:
    app = _app(namespace_root, spark, allow_actions=True)
    csrf = _form(app)

    def act(name: str, **fields: str) -> str:
        page = app.post(f"/action/{name}", data={"path": "orders", "csrf": csrf,
                                                 "confirmed": "yes", **fields})
        return page.text

    assert "sent one message to orders" in act("send", body="hi")
    assert admin.get_queue_runtime_properties("orders").active_message_count == 5
    assert "orders is now Disabled" in act("status", status="Disabled")
    assert admin.get_queue("orders").status.value == "Disabled"
    assert "error: " in act("send", body="refused")  # S16.1: a disabled queue takes none
    assert "orders is now Active" in act("status", status="Active")
    assert "status=&#39;Paused&#39;: one of Active" in act("status", status="Paused")
    assert "purged 5 message(s) from orders" in act("purge", sub_queue="main")
    runtime = admin.get_queue_runtime_properties("orders")
    assert (runtime.active_message_count, runtime.dead_letter_message_count) == (0, 1)


def test_a_token_guards_every_route_once_given(filled, namespace_root, spark) -> None:
    app = _app(namespace_root, spark, token="s3cret")
    for url in ("/", "/metrics", "/entity?path=orders"):
        assert app.get(url).status_code == 401
    first = app.get("/?token=s3cret", follow_redirects=False)
    assert first.status_code == 303 and first.headers["location"] == "/"
    assert "httponly" in first.headers["set-cookie"].lower()
    assert app.get("/").status_code == 200  # the cookie now
    fresh = _app(namespace_root, spark, token="s3cret")
    assert fresh.get("/metrics", headers={"Authorization": "Bearer s3cret"}).status_code == 200


def test_a_loopback_explorer_answers_only_loopback_host_names(filled, namespace_root,
                                                               spark) -> None:
    app = _app(namespace_root, spark)
    assert app.get("/", headers={"host": "evil.example"}).status_code == 400
    page = app.get("/")
    assert "default-src 'none'" in page.headers["content-security-policy"]


def test_metrics_are_the_engines_counts_per_partition(filled, admin, namespace_root,
                                                      spark) -> None:
    client = filled
    app = _app(namespace_root, spark)
    with client.get_queue_sender("orders") as sender:  # timed by the app's OperationMetrics
        sender.send_messages(ServiceBusMessage("one more"))
    scraped = app.get("/metrics")
    assert scraped.headers["content-type"].startswith("text/plain")
    families = {f.name: f for f in text_string_to_metric_families(scraped.text)}
    tallies = admin.namespace.entity("orders").partition_tallies()
    for kind in ("active", "dead_letter", "scheduled"):
        got = {int(s.labels["partition"]): s.value for s in families[f"sbqueue_{kind}_messages"]
               .samples if s.labels["entity"] == "orders"}
        assert got == {p: c[kind] for p, c in tallies.items()}, kind
    sizes = [s.value for s in families["sbqueue_size_bytes"].samples
             if s.labels["entity"] == "orders"]
    assert sum(sizes) == admin.get_queue_runtime_properties("orders").size_in_bytes
    oldest = {s.labels["entity"]: s.value
              for s in families["sbqueue_oldest_active_message_age_seconds"].samples}
    assert oldest["orders"] > 0 and oldest["events/Subscriptions/red"] > 0
    sends = [s for s in families["sbqueue_operation_seconds"].samples
             if s.name.endswith("_count") and s.labels["operation"] == "send"]
    assert [(s.labels["entity"], s.labels["outcome"], s.value) for s in sends] == [
        ("orders", "ok", 1.0)]


@pytest.mark.local_executor
def test_pages_and_metrics_start_no_spark_job_on_the_local_executor(
        filled, namespace_root, spark, spark_jobs) -> None:
    app = _app(namespace_root, spark)
    urls = ["/", "/entity?path=orders", "/entity?path=events", "/entity?path=jobs",
            "/messages?path=orders", "/messages?path=orders&dlq=1", "/metrics"]
    (statuses, jobs) = spark_jobs(lambda: [app.get(u).status_code for u in urls])
    assert statuses == [200] * len(urls) and jobs == 0


def test_the_cli_refuses_to_listen_beyond_loopback_without_a_token(monkeypatch) -> None:
    monkeypatch.delenv("SBQUEUE_EXPLORER_TOKEN", raising=False)
    result = CliRunner().invoke(main, ["explorer", "--host", "0.0.0.0"])
    assert result.exit_code == 2
    assert "--host 0.0.0.0 listens beyond this machine: give --token" in result.output


@pytest.mark.local_executor
def test_an_s3_namespace_is_shown_from_the_driver(spark, s3_root, spark_jobs) -> None:
    """Issue 46 on object storage: the same pages and /metrics on an S3 namespace (the
    moto server), read on the driver (decision 040): no Spark job, the engine's counts."""
    from sbqueue.management import ServiceBusAdministrationClient

    admin = ServiceBusAdministrationClient(s3_root, spark=spark)
    admin.create_queue("orders", enable_partitioning=True)
    with ServiceBusClient(s3_root, spark=spark).get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage(f"m{i}") for i in range(5)])
    app = _app(s3_root, spark)
    urls = ["/", "/entity?path=orders", "/messages?path=orders", "/metrics"]
    (pages, jobs) = spark_jobs(lambda: [app.get(u) for u in urls])
    assert [p.status_code for p in pages] == [200] * len(urls) and jobs == 0
    assert _cells(pages[0].text, "orders")["active"] == "5"
    assert len(re.findall(r"seq=(\d+)", pages[2].text)) == 5
    active = [s.value for f in text_string_to_metric_families(pages[3].text)
              if f.name == "sbqueue_active_messages" for s in f.samples]
    assert sum(active) == 5 and len(active) == 16
