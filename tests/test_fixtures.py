"""One case per fixture file: the rule's findings are exactly the inline `# expect:` markers."""

from __future__ import annotations

from pathlib import Path

import pytest

from markers import compare, read_markers
from torchlint.engine import lint_source

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"
FILES = sorted(p for p in FIXTURES.glob("TL*/*.py"))


@pytest.mark.parametrize("path", FILES, ids=[f"{p.parent.name}/{p.name}" for p in FILES])
def test_fixture(path: Path) -> None:
    source = path.read_text(encoding="utf-8")
    rule = path.parent.name
    findings = [f for f in lint_source(source, str(path), select=[rule]) if f.code == rule]
    missing, unexpected = compare(read_markers(source), findings)
    message = []
    if missing:
        message.append("missing findings:\n  " + "\n  ".join(missing))
    if unexpected:
        message.append("unexpected findings (false positives):\n  " + "\n  ".join(unexpected))
    assert not message, "\n".join(message)


def test_every_rule_has_fixtures() -> None:
    from torchlint.rules import all_codes

    for code in all_codes():
        files = list((FIXTURES / code).glob("*.py"))
        assert files, f"{code} has no fixtures in fixtures/{code}/"
        markers = [m for f in files for m in read_markers(f.read_text(encoding="utf-8"))]
        assert markers, f"{code} fixtures mark no finding"


def test_rules_index_lists_every_rule() -> None:
    from torchlint.rules import all_rules

    index = (Path(__file__).resolve().parent.parent / "docs" / "rules" / "index.md").read_text(encoding="utf-8")
    for rule in all_rules():
        summary = rule.summary.replace("|", "\\|")
        row = (f"| [{rule.code}]({rule.code}.md) | {rule.name} | {summary} | {rule.fix_availability} | "
               f"{rule.severity_range_text()} |")
        assert row in index, f"docs/rules/index.md lacks or misstates {rule.code}: {row}"
