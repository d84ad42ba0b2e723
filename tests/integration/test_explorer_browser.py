"""The explorer in a real browser (issue 46 point 4): ``sbqueue explorer`` started by its
script, Debian's Chromium driven headless by Selenium through chromedriver. A person's
round: the namespace, an entity, a dead-lettered message (its markup shown, never run),
a resubmit confirmed and the counts changing in place, a bad predicate's one-line error.

Screenshots of each page go to the test's folder; with ``SBQUEUE_SCREENSHOTS=DIR`` the
namespace and entity pages are also written there (the README's: docs/images)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from ports import free_port, listening

from sbqueue import ServiceBusClient, ServiceBusMessage

pytestmark = [pytest.mark.slow, pytest.mark.spark]

CHROMIUM, CHROMEDRIVER = "/usr/bin/chromium", "/usr/bin/chromedriver"
XSS = "<script>window.__sbqueue_xss = 1</script><img src=x onerror='window.__sbqueue_xss=2'>"


def _browser_or_skip() -> None:
    if Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists():
        return
    reason = (f"{CHROMIUM} and {CHROMEDRIVER} are needed (Debian: apt-get install chromium "
              "chromium-driver; .ci/run installs them)")
    if os.environ.get("CI"):
        pytest.fail(reason)
    pytest.skip(reason)


@pytest.fixture
def namespace(admin, spark, namespace_root) -> ServiceBusClient:
    """orders (16 partitions): 20 messages, 2 dead-lettered (one holds markup); a topic
    with one subscription."""
    admin.create_queue("orders", enable_partitioning=True, max_delivery_count=1)
    admin.create_topic("events")
    admin.create_subscription("events", "all")
    client = ServiceBusClient(namespace_root, spark=spark)
    with client.get_queue_sender("orders") as sender:
        sender.send_messages([ServiceBusMessage(XSS)] + [
            ServiceBusMessage(f'{{"order": {i}, "total": {i * 2.5}}}',
                              content_type="application/json") for i in range(19)])
    with client.get_queue_receiver("orders") as receiver:
        got: list = []
        while len(got) < 20:
            got += receiver.receive_messages(20, max_wait_time=10)
        marked = next(m for m in got if str(m) == XSS)
        for message in (marked, next(m for m in got if m is not marked)):
            receiver.dead_letter_message(message, reason="BadOrder",
                                         error_description="checked by a person")
    with client.get_topic_sender("events") as sender:
        sender.send_messages([ServiceBusMessage(f"event {i}") for i in range(5)])
    return client


@pytest.fixture
def explorer(namespace, namespace_root) -> Iterator[str]:
    """``sbqueue explorer --allow-actions`` by the interpreter's own script; its address."""
    script = Path(sys.executable).parent / "sbqueue"
    assert script.exists(), f"{script}: install the package into this interpreter"
    port = free_port()
    process = subprocess.Popen(
        [str(script), "explorer", "--namespace", namespace_root, "--port", str(port),
         "--allow-actions"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if not listening(port, 120, lambda: process.poll() is None):
        process.kill()
        pytest.fail(f"the explorer did not start: {process.communicate()[0][-2000:]}")
    yield f"http://127.0.0.1:{port}"
    process.terminate()
    process.wait(30)


@pytest.fixture
def browser() -> Iterator[object]:
    _browser_or_skip()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for arg in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage",
                "--window-size=1280,1000", "--disable-gpu"):
        options.add_argument(arg)
    driver = webdriver.Chrome(options=options, service=Service(CHROMEDRIVER))
    # A resubmit starts Spark in the explorer first: minutes on a loaded machine.
    driver.command_executor.client_config.timeout = 600
    driver.set_page_load_timeout(600)
    yield driver
    driver.quit()


def _shot(driver, folder: Path, name: str) -> None:
    folder.mkdir(exist_ok=True)
    driver.save_screenshot(str(folder / f"{name}.png"))
    wanted = os.environ.get("SBQUEUE_SCREENSHOTS")
    if wanted and name in ("namespace", "entity"):
        Path(wanted).mkdir(parents=True, exist_ok=True)
        shutil.copy(folder / f"{name}.png", Path(wanted) / f"explorer-{name}.png")


def _cell(driver, entity: str, kind: str) -> str:
    """The text of one count cell, found and read in one step in the page (the page
    refreshes its rows in place, so an element found by one call may be gone by the next)."""
    text = driver.execute_script(
        "const c = document.querySelector(arguments[0]);"
        " return c === null ? null : c.textContent.trim();",
        f'tr[data-entity="{entity}"] td.{kind}')
    assert text is not None, f"no {kind} cell for {entity}"
    return str(text)


def _wait(driver, condition, seconds: float = 60) -> None:
    """Wait for ``condition``; a page that refreshes in place replaces its rows, so a cell
    found just before a refresh may be gone when read: that look is retried."""
    from selenium.common.exceptions import StaleElementReferenceException
    from selenium.webdriver.support.ui import WebDriverWait

    WebDriverWait(driver, seconds, poll_frequency=0.5,
                  ignored_exceptions=(StaleElementReferenceException,)).until(
        lambda d: condition())


def _go(driver, act, wanted: str, seconds: float = 600) -> None:
    """``act()`` (a click, a back) and wait until the browser shows a new document holding
    ``wanted`` (a CSS selector). The page is marked with a token of this call's own before
    acting, and the wait asks the page, in one script, for a document without that token:
    no element of the old page is held across the navigation (Chrome may answer a question
    about one with a stale-element error or an inspector error), and a page the back button
    restores carries an older token, not this one."""
    from selenium.common.exceptions import WebDriverException
    from selenium.webdriver.support.ui import WebDriverWait

    token = f"page-{time.monotonic_ns()}"
    driver.execute_script("document.documentElement.dataset.sbqPage = arguments[0];", token)
    act()
    WebDriverWait(driver, seconds, poll_frequency=0.2,
                  ignored_exceptions=(WebDriverException,)).until(
        lambda d: d.execute_script(
            "const root = document.documentElement;"
            " return root !== null && root.dataset.sbqPage !== arguments[0]"
            " && document.readyState !== 'loading'"
            " && document.querySelector(arguments[1]) !== null;", token, wanted))


def test_a_person_looks_peeks_resubmits_and_sees_the_counts_change(
        namespace, explorer, browser, tmp_path) -> None:
    from selenium.webdriver.common.by import By

    shots = tmp_path / "screenshots"
    driver = browser
    driver.get(explorer + "/")
    assert (_cell(driver, "orders", "active"), _cell(driver, "orders", "dead_letter")) == (
        "18", "2")
    assert _cell(driver, "events/Subscriptions/all", "active") == "5"
    _shot(driver, shots, "namespace")

    _go(driver, driver.find_element(By.LINK_TEXT, "orders").click, "svg.chart")
    bars = driver.find_elements(By.CSS_SELECTOR, "svg.chart rect[data-count]")
    assert sum(int(b.get_attribute("data-count")) for b in bars) == 20
    _shot(driver, shots, "entity")

    _go(driver, driver.find_element(By.LINK_TEXT, "peek the dead-letter queue").click,
        "#messages")
    links = driver.find_elements(By.CSS_SELECTOR, "#messages a")
    assert len(links) == 2
    for index in range(2):
        _go(driver, driver.find_elements(By.CSS_SELECTOR, "#messages a")[index].click,
            "#system")
        reason = driver.find_element(By.ID, "system").text
        assert "dead_letter_reason BadOrder" in reason
        if "script" in driver.find_element(By.ID, "body").text:
            assert driver.find_element(By.ID, "body").text == XSS  # shown as text
            _shot(driver, shots, "message")
        assert driver.execute_script("return window.__sbqueue_xss === undefined")
        _go(driver, driver.back, "#messages")

    driver.get(explorer + "/entity?path=orders")
    driver.find_element(By.ID, "where").send_keys("dead_letter_reason = 'BadOrder'")
    _go(driver, driver.find_element(By.ID, "resubmit").click, "#question")
    assert "Resubmit dead-lettered messages on orders" in driver.find_element(
        By.ID, "question").text
    _go(driver, driver.find_element(By.ID, "confirm").click, "#report, #error")
    shown = driver.find_element(By.TAG_NAME, "main").text
    assert "resubmitted 2 dead-lettered message(s) of orders to orders" in shown, shown
    _shot(driver, shots, "resubmitted")

    _go(driver, driver.find_element(By.LINK_TEXT, "the namespace").click, "#entities")
    assert (_cell(driver, "orders", "active"), _cell(driver, "orders", "dead_letter")) == (
        "20", "0")
    with namespace.get_queue_sender("orders") as sender:  # the page refreshes in place
        sender.send_messages(ServiceBusMessage("arrived while the page was open"))
    _wait(driver, lambda: _cell(driver, "orders", "active") == "21")
    assert driver.execute_script("return performance.getEntriesByType('navigation').length") == 1

    driver.get(explorer + "/entity?path=orders")
    driver.find_element(By.ID, "where").send_keys("dead_letter_reason ===")
    _go(driver, driver.find_element(By.ID, "resubmit").click, "#question")
    _go(driver, driver.find_element(By.ID, "confirm").click, "#report, #error")
    shown = driver.find_element(By.TAG_NAME, "main").text
    assert "Not done" in shown, shown
    error = driver.find_element(By.ID, "error").text
    assert error.startswith("error: --where \"dead_letter_reason ===\"") or error.startswith(
        "error: --where 'dead_letter_reason ==='"), error
    assert "\n" not in error and "Traceback" not in driver.page_source
    _shot(driver, shots, "error")
    assert {p.name for p in shots.iterdir()} == {
        "namespace.png", "entity.png", "message.png", "resubmitted.png", "error.png"}
