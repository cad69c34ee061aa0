"""The API-change table of TL209/TL210 (`torchlint/analysis/api_changes/removed.py`): its entries
are well formed, and a wrong entry shows as REFUTED and fails `--verify`."""

from __future__ import annotations

import importlib.util
from dataclasses import replace

import pytest

from torchlint.analysis.api_changes import DOCS, RAISES, WARNS, removed
from torchlint.verify.cases import all_cases
from torchlint.verify.cases._api_table import case_of, rule_of


def test_every_entry_is_well_formed_and_has_a_case():
    apis = [change.api for change in removed.CHANGES]
    assert len(apis) == len(set(apis))
    for change in removed.CHANGES:
        assert change.outcome in (RAISES, WARNS, DOCS), change.api
        assert change.replacement and change.error, change.api
        assert change.check.snippet and change.check.replacement_snippet, change.api
        if change.outcome != DOCS:
            assert change.error.split(":", 1)[0].endswith(("Error", "Warning")), change.api
        if change.check.checked == "source":
            assert change.check.source, change.api
        else:
            assert change.check.match, change.api
    cases = all_cases(["TL209", "TL210"])
    assert len(cases) == len(removed.CHANGES)
    assert {case.rule for case in cases} == {"TL209", "TL210"}


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_a_wrong_entry_is_refuted_and_fails():
    from torchlint.verify.runner import run_cases

    ger = next(change for change in removed.CHANGES if change.api == "torch.ger")
    wrong = replace(ger, outcome=RAISES, error="RuntimeError: removed", check=replace(ger.check, match="removed"))
    assert rule_of(wrong) == "TL209"
    report = run_cases([case_of(wrong)], devices=["cpu"], warm_up=False)
    row = report["results"][0]
    assert row["verdict"] == "REFUTED", row
    assert "ran to completion" in row["reason"]
    assert report["exit_code"] == 1


def test_fixes_on_the_fixtures_parse_and_are_idempotent():
    from pathlib import Path

    from torchlint.engine import select_rules
    from torchlint.fixer import fix_data, parses

    root = Path(__file__).resolve().parent.parent / "fixtures"
    paths = (sorted(root.glob("TL209/*.py")) + sorted(root.glob("TL210/*.py"))
             + sorted(root.glob("fixes/TL209_*.py")) + sorted(root.glob("fixes/TL210_*.py")))
    rules = select_rules(["TL209", "TL210"])
    for path in paths:
        for unsafe in (False, True):
            once = fix_data(str(path), path.read_bytes(), rules, unsafe).new
            assert parses(once.decode("utf-8")), path
            assert fix_data(str(path), once, rules, unsafe).new == once, path
