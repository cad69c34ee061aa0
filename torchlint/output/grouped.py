"""`grouped` (ruff's): the file name once, then its findings indented, then the summary.

Errors first, as in `concise`: the files with an error come before the others (then those with a
warning, then the rest, each group in path order), and a file lists its errors first."""

from __future__ import annotations

from typing import List, TextIO

from torchlint.finding import FileResult, Finding
from torchlint.output.text import all_findings, applies, by_severity, summary, write_statistics


def _where(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{cell}{finding.start.row}:{finding.start.column}"


def write_grouped(results: List[FileResult], stream: TextIO, options: dict) -> None:
    shown = [result for result in results if result.findings]
    shown.sort(key=lambda result: min(finding.severity.rank for finding in result.findings))
    for result in shown:
        stream.write(f"{result.path}:\n")
        width = max(len(_where(f)) for f in result.findings)
        for finding in by_severity(result.findings):
            marker = " [*]" if applies(finding, options) else ""
            stream.write(f"  {_where(finding):<{width}} {finding.code}{marker} {finding.severity.value}: "
                         f"{finding.message}\n")
        stream.write("\n")
    findings = all_findings(results)
    if options.get("statistics"):
        write_statistics(findings, stream, options)
    for text in summary(findings, options):
        stream.write(text + "\n")
