"""``store.guarded.apply_guarded``: the guarded MERGE's contract on rows held on the driver
(decision 011, step 4). Pure logic, no Spark; the Spark MERGE's side of the same cases is
``tests/integration/test_driver_commits.py``."""

from __future__ import annotations

from typing import Any

import pytest

from sbqueue.store.guarded import (
    ABSENT,
    DELETE_IF,
    EXPECT_COLUMN,
    OP_COLUMN,
    StaleRead,
    apply_guarded,
)

KEYS = ["k", "kind"]
COLUMNS = ["k", "kind", "row_version", "token", "v"]


def row(k: int, version: int, v: str = "x", kind: str = "m", token: str | None = None
        ) -> dict[str, Any]:
    return {"k": k, "kind": kind, "row_version": version, "token": token, "v": v}


def change(k: int, op: str, expect: int | None, v: str = "y", kind: str = "m",
           token: str | None = None, version: int = 9) -> dict[str, Any]:
    return {**row(k, version, v, kind, token), OP_COLUMN: op, EXPECT_COLUMN: expect}


def apply(stored: list[dict[str, Any]], changes: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return sorted(apply_guarded(
        stored, changes, KEYS, COLUMNS,
        match=lambda t, s: t["kind"] != "c" or t["token"] == s["token"],
        delete_if=lambda t, s: t["v"] == s["v"]), key=lambda r: (r["k"], r["kind"]))


def test_an_upsert_replaces_the_row_it_read_and_inserts_a_new_one() -> None:
    out = apply([row(1, 3)], [change(1, "upsert", 3), change(2, "upsert", None)])
    assert [(r["k"], r["v"], r["row_version"]) for r in out] == [(1, "y", 9), (2, "y", 9)]


@pytest.mark.parametrize("case", [
    ([row(1, 4)], [change(1, "upsert", 3)]),  # changed since read
    ([row(1, 3)], [change(1, "upsert", None)]),  # must not exist yet, exists
    ([], [change(1, "delete", 3)]),  # expected, gone
    ([row(1, 3, kind="c", token="a")], [change(1, ABSENT, None, kind="c", token="a")]),
], ids=["changed", "exists", "gone", "absent-guard"])
def test_a_guard_that_fails_is_a_stale_read_and_changes_nothing(case: Any) -> None:
    stored, changes = case
    before = [dict(r) for r in stored]
    with pytest.raises(StaleRead):
        apply(stored, changes)
    assert stored == before


def test_delete_if_deletes_only_where_its_condition_holds_and_checks_nothing() -> None:
    stored = [row(1, 3, v="done"), row(2, 3, v="other")]
    out = apply(stored, [change(1, DELETE_IF, None, v="done"),
                         change(2, DELETE_IF, None, v="done"),
                         change(3, DELETE_IF, None, v="done")])
    assert [r["k"] for r in out] == [2]


def test_records_match_by_their_token_too() -> None:
    stored = [row(1, 0, kind="c", token="a"), row(1, 0, kind="c", token="b")]
    out = apply(stored, [change(1, "delete", 0, kind="c", token="a"),
                         change(1, ABSENT, None, kind="c", token="z")])
    assert [(r["kind"], r["token"]) for r in out] == [("c", "b")]
