"""`grouped` (ruff's): the file name once, then its findings indented, then the summary.

Errors first, as in `concise`: the files with an error come before the others (then those with a
warning, then the rest, each group in path order), and a file lists its errors first."""

from __future__ import annotations

from typing import List, TextIO

from torchlint.finding import FileResult, Finding
from torchlint.output.text import all_findings, by_severity, summary, wrapped, write_statistics
from torchlint.terminal import BOLD, paint


def _where(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{cell}{finding.start.row}:{finding.start.column}"


def _line(finding: Finding, options: dict, width: int) -> str:
    """`  4:5  TL004 [*] warning: message`, wrapped like `full` on a terminal."""
    where = f"{_where(finding):<{width}}"
    return wrapped(finding, options, where=where, indent="  ", sep="")


def write_grouped(results: List[FileResult], stream: TextIO, options: dict) -> None:
    findings = all_findings(results)
    if options.get("statistics"):
        write_statistics(findings, stream, options)
        return
    color = bool(options.get("color"))
    shown = [result for result in results if result.findings]
    shown.sort(key=lambda result: min(finding.severity.rank for finding in result.findings))
    for result in shown:
        stream.write(f"{paint(result.path, BOLD, enabled=color)}:\n")
        width = max(len(_where(f)) for f in result.findings)
        for finding in by_severity(result.findings):
            stream.write(_line(finding, options, width) + "\n")
        stream.write("\n")
    for text in summary(findings, options):
        stream.write(text + "\n")
