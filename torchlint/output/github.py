"""GitHub Actions workflow commands: one a finding, `::error`, `::warning` or `::notice` after its
severity (TL9xx diagnostics are errors), which GitHub shows as an annotation on the pull request's diff.

`::warning file=F,line=L,col=C,endLine=..,endColumn=..,title=torchlint (TL001)::message`
In the message `%`, CR and LF are escaped; in property values also `:` and `,`. `col` and
`endColumn` are left out when the finding spans lines. A notebook finding names its cell in the
message (GitHub cannot point into a cell).
"""

from __future__ import annotations

from typing import List, TextIO

from torchlint.finding import FileResult, Finding, Severity

# GitHub's annotation levels are error, warning and notice.
COMMANDS = {Severity.ERROR: "error", Severity.WARNING: "warning", Severity.NOTE: "notice"}


def escape_data(value: str) -> str:
    return value.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(value: str) -> str:
    return escape_data(value).replace(":", "%3A").replace(",", "%2C")


def annotation(finding: Finding) -> str:
    command = "error" if finding.is_diagnostic else COMMANDS[finding.severity]
    message = finding.message
    properties = [("file", finding.path)]
    if finding.cell is not None:
        message = f"cell {finding.cell}, line {finding.start.row}, column {finding.start.column}: {message}"
    else:
        properties.append(("line", str(finding.start.row)))
        if finding.start.row == finding.end.row:
            properties.append(("col", str(finding.start.column)))
        properties.append(("endLine", str(finding.end.row)))
        if finding.start.row == finding.end.row:
            properties.append(("endColumn", str(finding.end.column)))
    properties.append(("title", f"torchlint ({finding.code})"))
    rendered = ",".join(f"{key}={escape_property(value)}" for key, value in properties)
    return f"::{command} {rendered}::{escape_data(message)}"


def write_github(results: List[FileResult], stream: TextIO, options: dict) -> None:
    for result in results:
        for finding in result.findings:
            stream.write(annotation(finding) + "\n")
