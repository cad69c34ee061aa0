"""Confirmation cases built from the API-change table (`torchlint.analysis.api_changes`), one per
entry of `removed.py`: `torchlint --verify TL209 TL210` runs every entry's Check on the installed
torch (probe `api_change`), so a wrong entry fails instead of shipping, and the static half checks
that the rule flags the old spelling at the entry's line and not the replacement."""

from __future__ import annotations

from typing import List

from torchlint.analysis.api_changes import RAISES, ApiChange, removed
from torchlint.verify.case import Case


def rule_of(change: ApiChange) -> str:
    """TL209 for an API whose use raises on the current release, TL210 for one that still runs."""
    return "TL209" if change.outcome == RAISES else "TL210"


def case_of(change: ApiChange) -> Case:
    check = change.check
    snippet_lines = check.snippet.rstrip("\n").splitlines()
    return Case(
        rule=rule_of(change),
        title=f"{change.api}: {change.outcome} on this torch ({change.replacement or 'no replacement'})",
        bad=check.snippet,
        good=check.replacement_snippet,
        bad_line=check.line or len(snippet_lines),
        probe="api_change",
        expect={"api": change.api, "outcome": change.outcome, "error": change.error_type, "match": check.match},
        devices=("cpu",),
        # A torchvision/torchtext entry: where its package cannot be installed the runner reports it
        # SOURCE-CHECKED (the static half runs, the claim was read in `source`), as for any case.
        requires=(change.api.split(".", 1)[0],) if check.checked == "source" else (),
        source=check.source,
    )


def cases_for(rule: str) -> List[Case]:
    return [case_of(change) for change in removed.CHANGES if rule_of(change) == rule]
