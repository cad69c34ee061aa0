"""Human-readable reports: `concise` (one line a finding, ruff style) and `full` (with source).

Each line names the finding's severity after its code (`path:4:5: TL201 [*] error: message`), and
the findings are listed errors first: sorted by severity over the whole run, then by path, cell,
line and column, so that what crashes is read before what is old-fashioned. The summary counts
findings by severity, the TL9xx diagnostics (files that could not be checked, errors) included
(`Found 55 findings: 3 errors, 12 warnings, 40 notes.`).

On a terminal the report is coloured (`options["color"]`, decided by torchlint.terminal) and, in
`full` and `grouped`, long messages are wrapped to the terminal's width (`options["width"]`);
`concise` stays one line per finding for editors and scripts. `-q` prints the findings only;
`--statistics` prints only its table.
"""

from __future__ import annotations

import textwrap
from collections import Counter
from typing import List, Optional, TextIO

from torchlint.finding import FileResult, Finding, Severity
from torchlint.terminal import BOLD, CYAN, DIM, GREEN, RED, SEVERITY_COLORS, paint


def location(finding: Finding) -> str:
    cell = f"cell {finding.cell}:" if finding.cell is not None else ""
    return f"{finding.path}:{cell}{finding.start.row}:{finding.start.column}"


def applies(finding: Finding, options: dict) -> bool:
    """`[*]`: the fix `--fix` applies (a safe one; an unsafe one only with `--unsafe-fixes`)."""
    return finding.fix_applies(bool(options.get("unsafe_fixes")))


def line(finding: Finding, options: Optional[dict] = None) -> str:
    """The finding's one line, coloured when `options["color"]`."""
    options = options or {}
    color = bool(options.get("color"))
    fixable = applies(finding, options)
    if not color:
        marker = " [*]" if fixable else ""
        return f"{location(finding)}: {finding.code}{marker} {finding.severity.value}: {finding.message}"
    return f"{head(finding, options)} {finding.message}"


def head(finding: Finding, options: dict, where: Optional[str] = None, sep: str = ":") -> str:
    """`path:row:col: TL004 [*] warning:` (or `where` instead of the location), coloured when
    `options["color"]`: the path bold, the code red and bold, `[*]` cyan, the severity in its
    colour."""
    color = bool(options.get("color"))
    marker = " " + paint("[*]", CYAN, enabled=color) if applies(finding, options) else ""
    severity = finding.severity.value
    place = paint(where if where is not None else location(finding), BOLD, enabled=color)
    colon = paint(sep, CYAN, enabled=color)
    return (f"{place}{colon} {paint(finding.code, BOLD, RED, enabled=color)}{marker} "
            f"{paint(severity + ':', SEVERITY_COLORS.get(severity, ''), enabled=color)}")


def plain_head(finding: Finding, options: dict, where: Optional[str] = None, sep: str = ":") -> str:
    marker = " [*]" if applies(finding, options) else ""
    place = where if where is not None else location(finding)
    return f"{place}{sep} {finding.code}{marker} {finding.severity.value}:"


def wrapped(finding: Finding, options: dict, where: Optional[str] = None, indent: str = "", sep: str = ":") -> str:
    """`indent` + head + message, wrapped to `options["width"]` (continuation lines indented four
    more spaces) when a width is given; one line otherwise."""
    first = indent + head(finding, options, where, sep)
    width = options.get("width")
    if not width:
        return f"{first} {finding.message}"
    plain = indent + plain_head(finding, options, where, sep)
    lines = textwrap.wrap(f"{plain} {finding.message}", width=width, subsequent_indent=indent + "    ",
                          break_long_words=False, break_on_hyphens=False)
    if not lines or not lines[0].startswith(plain):
        return f"{first} {finding.message}"
    lines[0] = first + lines[0][len(plain):]
    return "\n".join(lines)


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
    """The closing lines (none under `-q`). Under `--fix`, `options["fixed"]` counts what was
    fixed (ruff's `Found N errors (M fixed, K remaining).`, here `Found N findings (M fixed, K
    remaining: 1 error, ...)` since "error" is a severity) and `options["fix_listing"]` lists it.
    The TL9xx diagnostics count as findings (errors); "All checks passed!" only when files were
    linted, every one was checked, and nothing was found."""
    if options.get("quiet"):
        return []
    color = bool(options.get("color"))
    lints = [f for f in findings if not f.is_diagnostic]
    fixed = options.get("fixed", 0)
    lines = list(options.get("fix_listing") or ())
    if lines:
        lines = [""] + lines + [""]
    level, below = options.get("below_min_severity") or ("", 0)
    if fixed:
        count = len(findings)
        remaining = f"{count} remaining: {severity_counts(findings)}" if count else "0 remaining"
        lines.append(paint(f"Found {_count(fixed + count, 'finding')} ({fixed} fixed, {remaining}).", BOLD,
                           enabled=color))
    elif findings:
        lines.append(paint(f"Found {_count(len(findings), 'finding')}: {severity_counts(findings)}.", BOLD,
                           enabled=color))
    elif below:
        lines.append(f"No findings of severity {level} or above.")
    elif options.get("files", 1):
        lines.append(paint("All checks passed!", GREEN, enabled=color))
    if lints:
        fixable = sum(1 for f in lints if applies(f, options))
        hidden = sum(1 for f in lints if not applies(f, options) and f.fix_applies(True))
        if fixable:
            lines.append(f"{paint('[*]', CYAN, enabled=color)} {fixable} fixable with the --fix option.")
        if hidden:
            lines.append(f"{hidden} hidden fix{'es' if hidden != 1 else ''} can be enabled with the "
                         "`--unsafe-fixes` option.")
    if below:
        lines.append(f"{_count(below, 'finding')} less severe than {level} not shown (--min-severity).")
    problems = len({(f.path, f.cell) for f in findings if f.is_diagnostic})
    if problems:
        lines.append(paint(f"{problems} file{'s' if problems != 1 else ''} could not be fully checked (TL9xx).",
                           RED, enabled=color))
    return lines


def write_statistics(findings: List[Finding], stream: TextIO, options: Optional[dict] = None) -> None:
    """ruff's `--statistics`: one row per code, most frequent first (then by code): the count, the
    code, `[*]` where `--fix` (with the options given) applies to one of its findings, and the
    rule's name. Nothing else is printed."""
    options = options or {}
    color = bool(options.get("color"))
    counts = Counter((f.code, f.rule_name) for f in findings)
    fixable = Counter(f.code for f in findings if applies(f, options))
    rows = sorted(counts.items(), key=lambda item: (-item[1], item[0]))
    width = max((len(str(count)) for _, count in rows), default=1)
    for (code, name), count in rows:
        marker = paint("[*]", CYAN, enabled=color) if fixable[code] else "   "
        stream.write(f"{count:>{width}}\t{paint(code, BOLD, RED, enabled=color)}\t{marker} {name}\n")


def write_concise(results: List[FileResult], stream: TextIO, options: dict) -> None:
    findings = all_findings(results)
    if options.get("statistics"):
        write_statistics(findings, stream, options)
        return
    for finding in by_severity(findings):
        stream.write(line(finding, options) + "\n")
    for text in summary(findings, options):
        stream.write(text + "\n")


def write_full(results: List[FileResult], stream: TextIO, options: dict) -> None:
    findings = all_findings(results)
    if options.get("statistics"):
        write_statistics(findings, stream, options)
        return
    sources = options.get("sources", {})
    color = bool(options.get("color"))
    for finding in by_severity(findings):
        stream.write(wrapped(finding, options) + "\n")
        text = sources.get((finding.path, finding.cell))
        if text is not None:
            lines = text.splitlines()
            row = finding.start.row
            if 0 < row <= len(lines):
                gutter = len(str(row + 1))
                for number in range(max(1, row - 1), min(len(lines), row + 1) + 1):
                    bar = paint(f"{number:>{gutter}} |", DIM, enabled=color)
                    stream.write(f"{bar} {lines[number - 1]}\n")
                    if number == row:
                        width = (finding.end.column - finding.start.column
                                 if finding.end.row == row else len(lines[row - 1]) - finding.start.column + 1)
                        carets = paint("^" * max(1, width), RED, BOLD, enabled=color)
                        stream.write(f"{paint(f'{chr(32) * gutter} |', DIM, enabled=color)} "
                                     f"{' ' * (finding.start.column - 1)}{carets}\n")
        if finding.fix is not None:
            stream.write(f"  = {paint('help', BOLD, enabled=color)}: {finding.fix.message} "
                         f"({finding.fix.applicability.value} fix)\n")
        stream.write("\n")
    for text in summary(findings, options):
        stream.write(text + "\n")
