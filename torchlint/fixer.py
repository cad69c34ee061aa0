"""`--fix`, `--unsafe-fixes`, `--diff`: applying the rules' fixes without ever corrupting a file.

The model is ruff's. Each pass lints the current text, takes the applicable fixes (safe ones, plus
unsafe ones with `--unsafe-fixes`) in source order, skips any fix that overlaps one taken earlier
in the pass, and applies the rest at once; the next pass re-lints the new text, so a skipped fix
gets its turn if it still applies. Passes stop when nothing changes (at most `MAX_PASSES`).
The result of every pass must parse with LibCST, otherwise the file is left as it was and a
diagnostic says so. Writes are atomic (`torchlint.atomic`) and keep the file's encoding, BOM,
line endings and permission bits; a file that changed on disk since it was read is not written.

Text edits apply to the decoded text: rows count lines split on \\n, \\r\\n and \\r, columns are
1-based code points (`Finding.fix.edits`). Notebooks are fixed as the module their cells make
(cell by cell when they cannot be joined) and written back with outputs, metadata, key order and
indentation as they were.
"""

from __future__ import annotations

import difflib
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass, field, replace
from typing import Callable, List, Optional, Sequence, Tuple

import libcst as cst

from torchlint import atomic, diagnostics, legacy_syntax
from torchlint.engine import lint_text
from torchlint.finding import FileResult, Finding
from torchlint.positions import line_starts
from torchlint.rules.base import Rule
from torchlint.source import SourceError, decode_source, detect_newline

MAX_PASSES = 10
INVALID_FIX = diagnostics.INTERNAL_ERROR  # a fix that breaks the code is a torchlint bug
NOT_WRITTEN = diagnostics.FIX_NOT_WRITTEN
_NEWLINES = re.compile(r"\r\n|\r|\n")


# --- applying edits to text ------------------------------------------------------------------

def applicable(finding: Finding, unsafe: bool) -> bool:
    return finding.fix_applies(unsafe)  # the same test as the `[*]` marker


def _offset(starts: List[int], text: str, row: int, column: int) -> Optional[int]:
    if row < 1 or row > len(starts) or column < 1:
        return None
    offset = starts[row - 1] + column - 1
    line_end = starts[row] if row < len(starts) else len(text)
    return offset if offset <= line_end else None


def apply_fixes(
    text: str,
    findings: Sequence[Finding],
    unsafe: bool = False,
    newline: Optional[str] = None,
    protected: Sequence[Tuple[int, int]] = (),
) -> Tuple[str, Counter]:
    """One pass: the text with the non-overlapping applicable fixes applied, and how many fixes
    of each code were applied. `protected` offset ranges (masked notebook magics) are never
    edited. Inserted line breaks are written as `newline` (default: the text's own)."""
    newline = newline or detect_newline(text)
    starts = line_starts(text)
    candidates = []
    for finding in findings:
        if not applicable(finding, unsafe):
            continue
        edits = []
        for edit in finding.fix.edits:
            start = _offset(starts, text, edit.start.row, edit.start.column)
            end = _offset(starts, text, edit.end.row, edit.end.column)
            if start is None or end is None or end < start:
                edits = None
                break
            content = _NEWLINES.sub(newline, edit.content) if ("\n" in edit.content or "\r" in edit.content) else edit.content
            edits.append((start, end, content))
        if not edits:
            continue
        edits.sort()
        if any(a[1] > b[0] for a, b in zip(edits, edits[1:])):
            continue  # a fix whose own edits overlap is broken; never apply it
        if any(s < p_end and p_start < e or (s == e and p_start < s < p_end)
               for s, e, _ in edits for p_start, p_end in protected):
            continue
        candidates.append((edits[0][0], edits[-1][1], finding.code, tuple(edits)))
    candidates.sort(key=lambda item: (item[0], item[1], item[2]))
    accepted: List[Tuple[int, int, str]] = []
    applied_edits = set()
    counts: Counter = Counter()
    last_end = -1
    for start, end, code, edits in candidates:
        new = [edit for edit in edits if edit not in applied_edits]
        if not new:
            counts[code] += 1  # the same edit fixed an earlier finding too (as ruff counts it)
            continue
        if last_end >= new[0][0] or len(new) != len(edits):
            continue  # overlaps a fix taken earlier in this pass: left for the next pass
        accepted.extend(edits)
        applied_edits.update(edits)
        last_end = max(last_end, max(e for _, e, _ in edits))
        counts[code] += 1
    if not accepted:
        return text, Counter()
    accepted.sort(key=lambda edit: (edit[0], edit[1]))
    pieces = []
    position = 0
    for start, end, content in accepted:
        pieces.append(text[position:start])
        pieces.append(content)
        position = end
    pieces.append(text[position:])
    return "".join(pieces), counts


def parses(text: str) -> bool:
    """Whether LibCST parses `text` (through the engine's parse, which also refuses nesting deep
    enough to crash the native parser)."""
    from torchlint.engine import parse

    try:
        return isinstance(parse(text, "<fixed>"), cst.Module)
    except Exception:  # ParserSyntaxError, RecursionError, native parser errors
        return False


def _parses_or_recovers(text: str) -> bool:
    """Whether `text` parses, or parses once its `async=` arguments are read as `non_blocking=`
    (a file with a `# noqa: TL204` keeps them; other fixes must not be refused for that)."""
    if parses(text):
        return True
    recovery = legacy_syntax.recover(text)
    return recovery is not None and parses(recovery.text)


def _changed_spans(original: str, masked: str) -> List[Tuple[int, int]]:
    """Offset ranges (in `original`) of the lines that masking changed. Masking keeps the lines
    (and their lengths, but for a notebook marker line that carries `if 1: ` before an indented
    cell), so the lines are compared one by one."""
    spans: List[Tuple[int, int]] = []
    if original == masked:
        return spans
    starts = line_starts(original) + [len(original)]
    masked_starts = line_starts(masked) + [len(masked)]
    for index, (begin, end) in enumerate(zip(starts, starts[1:])):
        if index + 1 >= len(masked_starts):
            spans.append((begin, end))
            continue
        if original[begin:end] != masked[masked_starts[index]:masked_starts[index + 1]]:
            spans.append((begin, end))
    return spans


@dataclass
class Outcome:
    """What fixing one text produced."""

    text: str
    fixed: Counter = field(default_factory=Counter)
    result: Optional[FileResult] = None  # the findings that remain (of the final text)
    invalid: bool = False  # a fix produced code that does not parse; `text` is the original

    @property
    def count(self) -> int:
        return sum(self.fixed.values())


def fix_text(
    text: str,
    path: str,
    rules: Sequence[Rule],
    unsafe: bool = False,
    mask: Optional[Callable[[str], str]] = None,
) -> Outcome:
    """Apply fixes in passes until nothing changes. `mask` turns the text into what is linted
    (notebook magics); edits never touch lines the mask changed."""
    original = text
    newline = detect_newline(text)
    fixed: Counter = Counter()
    first: Optional[FileResult] = None
    result: Optional[FileResult] = None
    for _ in range(MAX_PASSES):
        linted = mask(text) if mask else text
        result = lint_text(linted, path, rules)
        if first is None:
            first = result
        if result.failed:
            break
        protected = _changed_spans(text, linted) if mask else ()
        new, counts = apply_fixes(text, result.findings, unsafe, newline, protected)
        if not counts:
            break
        if new == text:
            fixed += counts
            break
        if not _parses_or_recovers(mask(new) if mask else new):
            return Outcome(original, Counter(), first, invalid=True)
        text = new
        fixed += counts
        result = None
    if result is None:
        result = lint_text(mask(text) if mask else text, path, rules)
    return Outcome(text, fixed, result)


# --- one file --------------------------------------------------------------------------------

@dataclass
class FileFix:
    path: str
    original: bytes
    new: bytes
    result: FileResult
    fixed: Counter = field(default_factory=Counter)
    # (label, old text, new text) for --diff: the whole file, or one entry per changed cell
    texts: List[Tuple[str, str, str]] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return self.new != self.original


def _invalid(path: str, result: FileResult, cell: Optional[int] = None) -> FileResult:
    where = f" (cell {cell})" if cell is not None else ""
    finding = diagnostics.diagnostic(
        path, INVALID_FIX, f"fix produced invalid code{where}; file left unchanged (please report this)"
    )
    if cell is not None:
        finding = replace(finding, cell=cell)
    out = FileResult(path, list(result.findings) + [finding], failed=result.failed)
    out.internal_error = True
    return out


def fix_python(path: str, data: bytes, rules: Sequence[Rule], unsafe: bool) -> FileFix:
    try:
        source = decode_source(data)
    except SourceError as error:
        return FileFix(path, data, data, diagnostics.failure(path, diagnostics.DECODE_ERROR, str(error),
                                                          error.row, error.column))
    outcome = fix_text(source.text, path, rules, unsafe)
    if outcome.invalid:
        return FileFix(path, data, data, _invalid(path, outcome.result))
    if outcome.text == source.text:
        return FileFix(path, data, data, outcome.result, outcome.fixed)
    try:
        new = source.encode(outcome.text)
    except UnicodeEncodeError as error:
        reason = f"the fixed code cannot be encoded as {source.encoding}: {error.reason}"
        return FileFix(path, data, data, _not_written(path, lint_text(source.text, path, rules), reason))
    return FileFix(path, data, new, outcome.result, outcome.fixed, [(path, source.text, outcome.text)])


def _not_written(path: str, result: FileResult, reason: str) -> FileResult:
    finding = diagnostics.diagnostic(path, NOT_WRITTEN, f"fixes not applied: {reason}; file left unchanged")
    out = FileResult(path, list(result.findings) + [finding], failed=result.failed)
    out.internal_error = result.internal_error
    return out


def _notebook_indent(data: bytes):
    match = re.match(rb"\s*[\[{]\r?\n([ \t]+)\S", data)
    if not match:
        return None
    indent = match.group(1)
    return indent.decode() if b"\t" in indent else len(indent)


def dump_notebook(notebook: dict, original: bytes) -> bytes:
    """Serialise like the original file: its indent, key order, ASCII escaping, line ending and
    final newline (nbformat writes indent=1, non-ASCII as is, a trailing newline)."""
    ascii_only = b"\\u" in original and all(byte < 0x80 for byte in original)
    text = json.dumps(notebook, indent=_notebook_indent(original), ensure_ascii=ascii_only)
    if b"\r\n" in original:
        text = text.replace("\n", "\r\n")
    ending = original[len(original.rstrip()):].decode("ascii", "replace")
    return (text + ending).encode("utf-8")


def fix_notebook(path: str, data: bytes, rules: Sequence[Rule], unsafe: bool) -> FileFix:
    from torchlint.notebook import code_cells, join_cells, lint_notebook

    try:
        cells = code_cells(data)
        notebook = json.loads(data.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return FileFix(path, data, data, lint_notebook(path, data, rules))
    joined = join_cells(cells, skip_incomplete=True)  # all cells when each is complete
    if joined is not None:
        fixed_joined = _fix_joined(path, data, notebook, joined, rules, unsafe)
        if fixed_joined is not None:
            from torchlint.notebook import with_skipped_cells  # as lint_notebook reports them

            fixed_joined.result.findings = with_skipped_cells(joined, fixed_joined.result.findings, cells, path, rules)
            return fixed_joined
    return _fix_cell_by_cell(path, data, notebook, cells, rules, unsafe)


def _fix_joined(path: str, data: bytes, notebook: dict, joined, rules: Sequence[Rule],
                unsafe: bool) -> Optional[FileFix]:
    """Fix the cells as the one module they make (what `lint_notebook` lints); None to fall back
    to fixing cell by cell (the joined text does not parse, or the cells cannot be split back)."""
    from torchlint.notebook import findings_in_cells

    outcome = fix_text(joined.text, path, rules, unsafe, mask=joined.mask)
    if outcome.result is None or (outcome.result.failed and not outcome.invalid):
        return None
    if outcome.invalid:
        result = _invalid(path, FileResult(path, findings_in_cells(
            outcome.result.findings, joined.rows(joined.text))))
        result.internal_error = True
        return FileFix(path, data, data, result)
    sources = joined.split(outcome.text)
    if sources is None:
        return None
    original = joined.split(joined.text) or {}
    result = outcome.result
    result.findings = findings_in_cells(result.findings, joined.rows(outcome.text))
    texts = []
    for number, source in sources.items():
        if source == original.get(number):
            continue
        cell = notebook["cells"][number - 1]
        if isinstance(cell.get("source"), list):
            cell["source"] = source.splitlines(keepends=True)
        else:
            cell["source"] = source
        texts.append((f"{path}:cell {number}", original.get(number, ""), source))
    new = dump_notebook(notebook, data) if texts else data
    return FileFix(path, data, new, result, outcome.fixed if texts else Counter(), texts)


def _fix_cell_by_cell(path: str, data: bytes, notebook: dict, cells, rules: Sequence[Rule],
                      unsafe: bool) -> FileFix:
    from torchlint.notebook import lint_notebook, mask_magics

    result = FileResult(path)
    fixed: Counter = Counter()
    texts = []
    for number, source in cells:
        outcome = fix_text(source, path, rules, unsafe, mask=mask_magics)
        cell_result = outcome.result
        if outcome.invalid:
            cell_result = _invalid(path, cell_result, number)
        for finding in cell_result.findings:
            result.findings.append(finding if finding.cell is not None else replace(finding, cell=number))
        result.internal_error |= cell_result.internal_error
        if outcome.invalid or outcome.text == source:
            continue
        fixed += outcome.fixed
        cell = notebook["cells"][number - 1]
        if isinstance(cell.get("source"), list):
            cell["source"] = outcome.text.splitlines(keepends=True)
        else:
            cell["source"] = outcome.text
        texts.append((f"{path}:cell {number}", source, outcome.text))
    invalid = [f for f in result.findings if f.is_diagnostic and f.code == INVALID_FIX[0] and "fix produced" in f.message]
    if invalid:  # like a .py file: one broken fix leaves the whole notebook as it was
        original = lint_notebook(path, data, rules)
        original.findings.extend(invalid)
        original.internal_error = True
        return FileFix(path, data, data, original)
    new = dump_notebook(notebook, data) if texts else data
    return FileFix(path, data, new, result, fixed, texts)


def fix_data(path: str, data: bytes, rules: Sequence[Rule], unsafe: bool) -> FileFix:
    try:
        if path.endswith(".ipynb"):
            return fix_notebook(path, data, rules, unsafe)
        return fix_python(path, data, rules, unsafe)
    except RecursionError:
        return FileFix(path, data, data, diagnostics.failure(path, diagnostics.TOO_COMPLEX, "nesting too deep to analyse"))
    except Exception as error:  # never let one file end the run with a traceback
        return FileFix(path, data, data, diagnostics.failure(
            path, diagnostics.INTERNAL_ERROR, f"internal error while fixing: {type(error).__name__}: {error} (please report this)"
        ))


def write_fix(fix: FileFix, unfixed: Callable[[], FileResult]) -> FileFix:
    """Write a changed file atomically. On failure the file is untouched, and the result is
    `unfixed()` (the findings of the file as it is) plus a diagnostic saying why."""
    if not fix.changed:
        return fix
    try:
        atomic.write_atomic(fix.path, fix.new, expected=fix.original)
    except (atomic.WriteRefused, OSError) as error:
        reason = str(error) if isinstance(error, atomic.WriteRefused) else f"cannot write file: {error.strerror or error}"
        return FileFix(fix.path, fix.original, fix.original, _not_written(fix.path, unfixed(), reason))
    return fix


# --- the command -----------------------------------------------------------------------------

def _plural(count: int, word: str = "finding") -> str:
    return f"{count} {word}{'s' if count != 1 else ''}"


def fix_summary(fixes: Sequence[FileFix]) -> List[str]:
    """ruff's `--show-fixes` block."""
    total = sum(sum(f.fixed.values()) for f in fixes)
    if not total:
        return []
    from torchlint.rules import get_rule

    lines = [f"Fixed {_plural(total)}:"]
    for fix in fixes:
        if not fix.fixed:
            continue
        lines.append(f"- {fix.path}:")
        width = len(str(max(fix.fixed.values())))
        for code, count in sorted(fix.fixed.items()):
            rule = get_rule(code)
            name = f" ({rule.name})" if rule is not None else ""
            lines.append(f"    {count:>{width}} × {code}{name}")
    return lines


def unified_diff(fixes: Sequence[FileFix]) -> str:
    chunks = []
    for fix in fixes:
        for label, old, new in fix.texts:
            for line in difflib.unified_diff(
                old.splitlines(keepends=True), new.splitlines(keepends=True), fromfile=label, tofile=label
            ):
                if not line.endswith(("\n", "\r")):  # a last line without its newline, as diff shows it
                    line += "\n\\ No newline at end of file\n"
                chunks.append(line)
    return "".join(chunks)


def _report_text(run, results, fixed_total: int, show_fixes: List[str], stream) -> None:
    """The normal report; the text formats count the fixes in their summary (ruff's
    `Found N findings (M fixed, K remaining: ...).`), the others leave the listing to stderr."""
    from torchlint.report import report

    name = run.args.output_format or os.environ.get("TORCHLINT_OUTPUT_FORMAT") or "concise"
    saved = run.out
    run.out = stream
    try:
        if name in ("concise", "full", "grouped"):
            report(run, results, fixed=fixed_total, fix_listing=show_fixes)
            return
        report(run, results)
    finally:
        run.out = saved
    if show_fixes:
        sys.stderr.write("\n".join(show_fixes) + "\n")


def _exit(run, results, changed: bool) -> int:
    from torchlint.report import EXIT_CLEAN, EXIT_ERROR, EXIT_FINDINGS

    args = run.args
    if any(r.internal_error for r in results):
        return EXIT_ERROR
    if args.diff:
        return EXIT_FINDINGS if changed else EXIT_CLEAN
    if getattr(args, "exit_non_zero_on_fix", False) and changed:
        return EXIT_FINDINGS
    if any(r.findings for r in results) and not args.exit_zero:
        return EXIT_FINDINGS
    return EXIT_CLEAN


def run_fix_mode(run) -> int:
    """`--fix` / `--diff` for the files (or stdin) of a `LintRun`; returns the exit code."""
    from torchlint.runner import read_bytes, rules_for

    args = run.args
    unsafe = bool(args.unsafe_fixes)
    write = bool(args.fix) and not args.diff
    fixes: List[FileFix] = []
    if run.stdin_source is not None:
        rules = rules_for(run.stdin_name, run.config, run.select, run.ignore)
        fixes.append(fix_data(run.stdin_name, run.stdin_source, rules, unsafe))
    else:
        from torchlint.parallel import lint_paths

        # Lint first, with the workers and the cache of the lint path; only files with a fix to
        # apply are read and fixed (notebooks always: a fix reaching into another cell is not
        # shown with its finding).
        for path, linted in zip(run.files, lint_paths(run)):
            if not path.endswith(".ipynb") and not any(applicable(f, unsafe) for f in linted.findings):
                fixes.append(FileFix(path, b"", b"", linted))
                continue
            data = read_bytes(path)
            if isinstance(data, FileResult):
                fixes.append(FileFix(path, b"", b"", data))
                continue
            rules = rules_for(path, run.config, run.select, run.ignore)
            fix = fix_data(path, data, rules, unsafe)
            if write and fix.changed:
                fix = write_fix(fix, lambda: _lint_unfixed(path, data, rules))
            fixes.append(fix)
    from torchlint.report import shown

    results = shown(run, [fix.result for fix in fixes])  # fixes apply to every selected rule
    changed = any(fix.changed for fix in fixes)
    fixed_total = sum(sum(fix.fixed.values()) for fix in fixes if fix.changed or not write)
    if args.diff:
        diff = unified_diff(fixes)
        if getattr(args, "quiet", 0) < 2:
            run.out.write(diff)
        would = sum(sum(fix.fixed.values()) for fix in fixes if fix.changed)
        remaining = sum(1 for r in results for f in r.findings if not f.is_diagnostic)
        if getattr(args, "quiet", 0):  # -q: the diff only (-qq: not even that, below)
            return _exit(run, results, changed)
        for fix in fixes:
            for finding in fix.result.findings:
                if finding.is_diagnostic:
                    sys.stderr.write(f"{finding.path}: {finding.code} {finding.message}\n")
        if would:
            sys.stderr.write(f"Would fix {_plural(would)} ({remaining} remaining).\n")
        else:
            sys.stderr.write("No findings would be fixed" + (f" ({remaining} remaining).\n" if remaining else ".\n"))
        return _exit(run, results, changed)
    show = fix_summary(fixes) if args.show_fixes else []
    if run.stdin_source is not None:
        # As ruff does: the fixed source goes to stdout, the report to stderr.
        out = sys.stdout.buffer if hasattr(sys.stdout, "buffer") else None
        fixed_bytes = fixes[0].new
        if out is not None:
            out.write(fixed_bytes)
            out.flush()
        else:
            sys.stdout.write(fixed_bytes.decode("utf-8", "replace"))
        stream = run.out if run.out is not sys.stdout else sys.stderr
        stdin_run = replace(run, stdin_source=fixed_bytes)
        _report_text(stdin_run, results, fixed_total, show, stream)
        return _exit(run, results, changed)
    _report_text(run, results, fixed_total, show, run.out)
    return _exit(run, results, changed)


def _lint_unfixed(path: str, data: bytes, rules: Sequence[Rule]) -> FileResult:
    from torchlint.runner import lint_data

    return lint_data(path, data, rules)
