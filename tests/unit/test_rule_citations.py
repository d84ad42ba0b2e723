"""Every behaviour rule cited in the code and the tests has its heading in
docs/behaviour.md, and every design fact cited ("DESIGN fact 4") its heading in
docs/design.md (issue 19): a citation that resolves nowhere fails here."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CITED = re.compile(r"\bS(\d{1,2})(?:\.(\d{1,2}))?\b")
FACTS = re.compile(r"DESIGN(?:\.md)? facts? (\d+(?:(?:, | and )\d+)*)")
FACT_HEADING = re.compile(r"^### Fact (\d+):", re.MULTILINE)
HEADING = re.compile(r"^#{2,3} (S\d{1,2}(?:\.\d{1,2})?)\b", re.MULTILINE)


def headings() -> set[str]:
    return set(HEADING.findall((ROOT / "docs" / "behaviour.md").read_text(encoding="utf-8")))


def cited() -> dict[str, str]:
    """Each rule id cited in sbqueue/, tests/ and jobs/, with one file citing it."""
    found: dict[str, str] = {}
    for folder in ("sbqueue", "tests", "jobs"):
        for path in sorted((ROOT / folder).rglob("*.py")):
            for major, minor in CITED.findall(path.read_text(encoding="utf-8")):
                if 1 <= int(major) <= 17:
                    rule = f"S{major}" + (f".{minor}" if minor else "")
                    found.setdefault(rule, str(path.relative_to(ROOT)))
    return found


def test_every_cited_rule_has_a_heading() -> None:
    known = headings()
    missing = {rule: where for rule, where in cited().items() if rule not in known}
    assert not missing, f"rules cited but not in docs/behaviour.md: {missing}"


def test_the_rules_are_many_and_each_heading_is_unique() -> None:
    text = (ROOT / "docs" / "behaviour.md").read_text(encoding="utf-8")
    ids = HEADING.findall(text)
    assert len(ids) == len(set(ids))
    assert len(cited()) >= 70  # the scan sees the citations (a broken pattern finds none)


def test_every_cited_design_fact_has_a_heading() -> None:
    known = set(FACT_HEADING.findall((ROOT / "docs" / "design.md").read_text(encoding="utf-8")))
    cited_facts: dict[str, str] = {}
    for folder in ("sbqueue", "tests", "jobs"):
        for path in sorted((ROOT / folder).rglob("*")):
            if path.suffix not in (".py", ".conf") or path.name == Path(__file__).name:
                continue
            for group in FACTS.findall(path.read_text(encoding="utf-8")):
                for number in re.findall(r"\d+", group):
                    cited_facts.setdefault(number, str(path.relative_to(ROOT)))
    assert len(cited_facts) >= 4  # the scan sees the citations
    missing = {n: where for n, where in cited_facts.items() if n not in known}
    assert not missing, f"design facts cited but not in docs/design.md: {missing}"
