"""Issue 42 point 6: the chaos soak's checker bites. One short soak (three minutes, no
kills) runs with every fault of ``soak_faults`` put in on purpose; it must fail, and each
fault must be reported under the invariant it breaks, naming the message, session or role
the fault touched (``faults.jsonl`` says which). ``test_soak_check`` shows the same rules
on hand-made histories; this shows them on what real roles, a real engine and a real drain
wrote."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).resolve().parent

# one worker runs the soaks one after another: two at once (eight JVMs on two cores) starved
# the receivers of test_soak_run past its progress check
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("soaks")]

FAULTS = ("raise", "hang", "fake-complete", "drop-forward", "astray-forward",
          "double-forward", "leaky-transaction", "reverse-session", "swap-numbers",
          "lock-twice", "session-twice", "dedupe-jump", "delete-row", "hold-session")


@pytest.fixture(scope="module")
def soaked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The faulted soak's report, what each fault did, and the command's output."""
    root = tmp_path_factory.mktemp("faulted") / "ns"
    run = subprocess.run(
        [sys.executable, str(HERE / "soak.py"), "--minutes", "3", "--kill-every", "100000",
         "--stall", "60", "--root", str(root), "--seed", "3",
         *(f"--fault={name}" for name in FAULTS)],
        capture_output=True, text=True, timeout=2400, stdin=subprocess.DEVNULL)
    logs = root / "histories"
    assert (logs / "report.json").exists(), run.stdout + run.stderr[-3000:]
    notes: dict[str, dict[str, Any]] = {}
    for line in (logs / "faults.jsonl").read_text().splitlines():
        note = json.loads(line)
        notes.setdefault(note["fault"], note)
    return {"report": json.loads((logs / "report.json").read_text()), "notes": notes,
            "code": run.returncode, "out": run.stdout}


def named(soaked: dict[str, Any], invariant: str, *needles: object) -> None:
    """``invariant`` has a violation whose text names every needle."""
    found = soaked["report"]["violations"][invariant]
    assert any(all(str(n) in v for n in needles) for v in found), (
        f"{invariant} names no {needles}: {found[:10]}\n{soaked['out']}")


def fault(soaked: dict[str, Any], name: str) -> dict[str, Any]:
    assert "failed" not in soaked["notes"], soaked["notes"]["failed"]
    assert name in soaked["notes"], f"{name} never fired: {sorted(soaked['notes'])}"
    note: dict[str, Any] = soaked["notes"][name]
    return note


def test_the_faulted_soak_fails(soaked: dict[str, Any]) -> None:
    assert soaked["code"] == 1, soaked["out"]


def test_a_role_that_raises_crashed(soaked: dict[str, Any]) -> None:
    named(soaked, "crashed", "sender#2", "injected fault")


def test_a_role_that_hangs_stalled(soaked: dict[str, Any]) -> None:
    named(soaked, "stalled", "maintainer in jobs")


def test_a_forward_that_drops_a_message_lost_it(soaked: dict[str, Any]) -> None:
    named(soaked, "lost", fault(soaked, "drop-forward")["id"])


def test_a_row_deleted_behind_the_engines_back_lost_its_message(soaked: dict[str, Any]
                                                                ) -> None:
    named(soaked, "lost", fault(soaked, "delete-row")["id"])


def test_a_forward_astray_misplaced_its_message(soaked: dict[str, Any]) -> None:
    named(soaked, "misplaced", fault(soaked, "astray-forward")["id"], "parking")


def test_a_forward_made_twice_left_copies(soaked: dict[str, Any]) -> None:
    named(soaked, "copies", fault(soaked, "double-forward")["id"])


def test_a_complete_that_left_the_lock_delivered_after_completion(soaked: dict[str, Any]
                                                                   ) -> None:
    named(soaked, "delivered after completion", fault(soaked, "fake-complete")["id"])


def test_a_session_never_let_go_stranded_its_messages_and_the_counts(soaked: dict[str, Any]
                                                                    ) -> None:
    held = fault(soaked, "hold-session")["ids"][0]
    named(soaked, "stranded", "sessions", held)
    named(soaked, "counts", "sessions")


def test_a_lock_taken_twice_overlapped(soaked: dict[str, Any]) -> None:
    named(soaked, "overlapping locks", f"'sessions', '{fault(soaked, 'lock-twice')['seq']}'")


def test_a_session_taken_twice_had_two_holders(soaked: dict[str, Any]) -> None:
    named(soaked, "session holders", fault(soaked, "session-twice")["session"])


def test_a_resend_past_the_window_was_a_duplicate(soaked: dict[str, Any]) -> None:
    named(soaked, "duplicate delivered twice", fault(soaked, "dedupe-jump")["id"])


def test_a_session_out_of_order_broke_session_order(soaked: dict[str, Any]) -> None:
    named(soaked, "session order", fault(soaked, "reverse-session")["session"])


def test_a_transaction_whose_sends_escaped_was_partial(soaked: dict[str, Any]) -> None:
    named(soaked, "transaction partial", fault(soaked, "leaky-transaction")["tx"])


def test_a_later_send_numbered_lower_broke_numbers(soaked: dict[str, Any]) -> None:
    first, _ = fault(soaked, "swap-numbers")["ids"]
    named(soaked, "numbers", first)
