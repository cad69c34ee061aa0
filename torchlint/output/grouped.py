"""`grouped` (ruff's): the file name once, then its findings indented, then the summary."""

from __future__ import annotations

from typing import List, TextIO

from torchlint.finding import FileResult, Finding
from torchlint.output.text import all_findings, applies, summary, write_statistics


def _where(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{cell}{finding.start.row}:{finding.start.column}"


def write_grouped(results: List[FileResult], stream: TextIO, options: dict) -> None:
    for result in results:
        if not result.findings:
            continue
        stream.write(f"{result.path}:\n")
        width = max(len(_where(f)) for f in result.findings)
        for finding in result.findings:
            marker = " [*]" if applies(finding, options) else ""
            stream.write(f"  {_where(finding):<{width}} {finding.code}{marker} {finding.message}\n")
        stream.write("\n")
    findings = all_findings(results)
    if options.get("statistics"):
        write_statistics(findings, stream)
    for text in summary(findings, options):
        stream.write(text + "\n")
