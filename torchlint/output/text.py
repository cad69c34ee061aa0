"""Human-readable reports: `concise` (one line a finding, ruff style) and `full` (with source)."""

from __future__ import annotations

from collections import Counter
from typing import List, Optional, TextIO

from torchlint.finding import FileResult, Finding


def location(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{finding.path}:{cell}{finding.start.row}:{finding.start.column}"


def applies(finding: Finding, options: dict) -> bool:
    """`[*]`: the fix `--fix` applies (a safe one; an unsafe one only with `--unsafe-fixes`)."""
    return finding.fix is not None and (finding.fix.applicability.value == "safe" or bool(options.get("unsafe_fixes")))


def line(finding: Finding, options: Optional[dict] = None) -> str:
    marker = " [*]" if applies(finding, options or {}) else ""
    return f"{location(finding)}: {finding.code}{marker} {finding.message}"


def all_findings(results: List[FileResult]) -> List[Finding]:
    return [finding for result in results for finding in result.findings]


def summary(findings: List[Finding], options: dict) -> List[str]:
    """The closing lines. Under `--fix`, `options["fixed"]` counts what was fixed (ruff's
    `Found N errors (M fixed, K remaining).`) and `options["fix_listing"]` lists it."""
    lints = [f for f in findings if not f.is_diagnostic]
    fixed = options.get("fixed", 0)
    lines = list(options.get("fix_listing") or ())
    if lines:
        lines = [""] + lines + [""]
    if fixed:
        count = len(lints)
        lines.append(f"Found {_errors(fixed + count)} ({fixed} fixed, {count} remaining).")
    elif lints:
        lines.append(f"Found {_errors(len(lints))}.")
    elif not options.get("quiet"):
        lines.append("All checks passed!")
    if lints:
        fixable = sum(1 for f in lints if f.fix is not None and
                      (f.fix.applicability.value == "safe" or options.get("unsafe_fixes")))
        hidden = sum(1 for f in lints if f.fix is not None and f.fix.applicability.value == "unsafe"
                     and not options.get("unsafe_fixes"))
        if fixable:
            lines.append(f"[*] {fixable} fixable with the --fix option.")
        if hidden:
            lines.append(f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
                         "`--unsafe-fixes` option.")
    problems = len(findings) - len(lints)
    if problems:
        lines.append(f"{problems} file{'s' if problems != 1 else ''} could not be fully checked (TL9xx).")
    return lines


def _errors(count: int) -> str:
    return f"{count} error{'s' if count != 1 else ''}"


def write_statistics(findings: List[Finding], stream: TextIO) -> None:
    counts = Counter((f.code, f.rule_name) for f in findings)
    fixable = Counter(f.code for f in findings if f.fix is not None)
    for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        marker = "[*]" if fixable[code] else "   "
        stream.write(f"{count:>5}\t{code}\t{marker} {name}\n")


def write_concise(results: List[FileResult], stream: TextIO, options: dict) -> None:
    findings = all_findings(results)
    for finding in findings:
        stream.write(line(finding, options) + "\n")
    if options.get("statistics"):
        write_statistics(findings, stream)
    for text in summary(findings, options):
        stream.write(text + "\n")


def write_full(results: List[FileResult], stream: TextIO, options: dict) -> None:
    sources = options.get("sources", {})
    findings = all_findings(results)
    for finding in findings:
        stream.write(line(finding, options) + "\n")
        text = sources.get((finding.path, finding.cell))
        if text is not None:
            lines = text.splitlines()
            row = finding.start.row
            if 0 < row <= len(lines):
                gutter = len(str(row + 1))
                for number in range(max(1, row - 1), min(len(lines), row + 1) + 1):
                    stream.write(f"{number:>{gutter}} | {lines[number - 1]}\n")
                    if number == row:
                        width = (finding.end.column - finding.start.column
                                 if finding.end.row == row else len(lines[row - 1]) - finding.start.column + 1)
                        stream.write(f"{'':>{gutter}} | {' ' * (finding.start.column - 1)}{'^' * max(1, width)}\n")
        if finding.fix is not None:
            stream.write(f"  = help: {finding.fix.message} ({finding.fix.applicability.value} fix)\n")
        stream.write("\n")
    if options.get("statistics"):
        write_statistics(findings, stream)
    for text in summary(findings, options):
        stream.write(text + "\n")
