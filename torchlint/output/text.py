"""Human-readable reports: `concise` (one line a finding, ruff style) and `full` (with source).

Each line names the finding's severity after its code (`path:4:5: TL201 [*] error: message`), and
the findings are listed errors first: sorted by severity over the whole run, then by path, cell,
line and column, so that what crashes is read before what is old-fashioned. The summary counts
findings by severity (`Found 55 findings: 3 errors, 12 warnings, 40 notes.`).
"""

from __future__ import annotations

from collections import Counter
from typing import List, Optional, TextIO

from torchlint.finding import FileResult, Finding, Severity


def location(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{finding.path}:{cell}{finding.start.row}:{finding.start.column}"


def applies(finding: Finding, options: dict) -> bool:
    """`[*]`: the fix `--fix` applies (a safe one; an unsafe one only with `--unsafe-fixes`)."""
    return finding.fix_applies(bool(options.get("unsafe_fixes")))


def line(finding: Finding, options: Optional[dict] = None) -> str:
    marker = " [*]" if applies(finding, options or {}) else ""
    return f"{location(finding)}: {finding.code}{marker} {finding.severity.value}: {finding.message}"


def all_findings(results: List[FileResult]) -> List[Finding]:
    return [finding for result in results for finding in result.findings]


def by_severity(findings: List[Finding]) -> List[Finding]:
    """Errors first, then warnings, then notes; within a severity in the run's path order (stable)."""
    return sorted(findings, key=lambda finding: finding.severity.rank)


def _count(count: int, word: str) -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def severity_counts(findings: List[Finding]) -> str:
    """`3 errors, 12 warnings, 40 notes` (severities with no finding left out)."""
    counts = Counter(finding.severity for finding in findings)
    return ", ".join(_count(counts[level], level.value) for level in Severity if counts[level])


def summary(findings: List[Finding], options: dict) -> List[str]:
    """The closing lines. Under `--fix`, `options["fixed"]` counts what was fixed (ruff's
    `Found N errors (M fixed, K remaining).`, here `Found N findings (M fixed, K remaining: 1 error,
    ...)` since "error" is a severity) and `options["fix_listing"]` lists it."""
    lints = [f for f in findings if not f.is_diagnostic]
    fixed = options.get("fixed", 0)
    lines = list(options.get("fix_listing") or ())
    if lines:
        lines = [""] + lines + [""]
    if fixed:
        count = len(lints)
        remaining = f"{count} remaining: {severity_counts(lints)}" if count else "0 remaining"
        lines.append(f"Found {_count(fixed + count, 'finding')} ({fixed} fixed, {remaining}).")
    elif lints:
        lines.append(f"Found {_count(len(lints), 'finding')}: {severity_counts(lints)}.")
    elif not options.get("quiet"):
        level, below = options.get("below_min_severity") or ("", 0)
        lines.append(f"No findings of severity {level} or above." if below else "All checks passed!")
    if lints:
        fixable = sum(1 for f in lints if applies(f, options))
        hidden = sum(1 for f in lints if not applies(f, options) and f.fix_applies(True))
        if fixable:
            lines.append(f"[*] {fixable} fixable with the --fix option.")
        if hidden:
            lines.append(f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
                         "`--unsafe-fixes` option.")
    level, below = options.get("below_min_severity") or ("", 0)
    if below and not options.get("quiet"):
        lines.append(f"{_count(below, 'finding')} less severe than {level} not shown (--min-severity).")
    problems = len(findings) - len(lints)
    if problems:
        lines.append(f"{problems} file{'s' if problems != 1 else ''} could not be fully checked (TL9xx).")
    return lines


def write_statistics(findings: List[Finding], stream: TextIO, options: Optional[dict] = None) -> None:
    """Findings per rule; `[*]` where `--fix` (with the options given) applies one of them."""
    counts = Counter((f.code, f.rule_name) for f in findings)
    fixable = Counter(f.code for f in findings if applies(f, options or {}))
    for (code, name), count in sorted(counts.items(), key=lambda item: (-item[1], item[0])):
        marker = "[*]" if fixable[code] else "   "
        stream.write(f"{count:>5}\t{code}\t{marker} {name}\n")


def write_concise(results: List[FileResult], stream: TextIO, options: dict) -> None:
    findings = all_findings(results)
    for finding in by_severity(findings):
        stream.write(line(finding, options) + "\n")
    if options.get("statistics"):
        write_statistics(findings, stream, options)
    for text in summary(findings, options):
        stream.write(text + "\n")


def write_full(results: List[FileResult], stream: TextIO, options: dict) -> None:
    sources = options.get("sources", {})
    findings = all_findings(results)
    for finding in by_severity(findings):
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
        write_statistics(findings, stream, options)
    for text in summary(findings, options):
        stream.write(text + "\n")
