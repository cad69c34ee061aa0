"""The JSON report: an array of findings in a fixed schema other tools build on.

Each finding carries `severity` (`"error"`, `"warning"` or `"note"`); the array stays in path order."""

from __future__ import annotations

import json
from typing import List, TextIO

from torchlint.finding import FileResult, Finding


def finding_to_json(finding: Finding) -> dict:
    # The rule's address from the rule modules' names: a warm run imports no rule (nor LibCST).
    from torchlint.rule_codes import rule_url

    data = {
        "code": finding.code,
        "message": finding.message,
        "severity": finding.severity.value,
        "filename": finding.path,
        "location": {"row": finding.start.row, "column": finding.start.column},
        "end_location": {"row": finding.end.row, "column": finding.end.column},
        "fix": finding.fix.to_json() if finding.fix is not None else None,
        "url": rule_url(finding.code),
    }
    if finding.cell is not None:
        data["cell"] = finding.cell
    return data


def write_json(results: List[FileResult], stream: TextIO, options: dict) -> None:
    findings = [finding_to_json(f) for result in results for f in result.findings]
    json.dump(findings, stream, indent=2, ensure_ascii=False)
    stream.write("\n")
