"""Jupyter notebooks: the code cells are linted together, as the module they make when run top to
bottom, so that an import or an optimizer defined in one cell is known in the next; IPython
syntax is masked so that they parse.

The cells are joined with a marker comment line before each (`# torchlint-cell <n> <token>`),
which keeps every cell's rows whole and lets findings and fixed text be split back into cells.
They are joined only when every cell is complete Python on its own (CPython's parser, no code
run), so that no statement spans two cells. When some cell is not (a Python 2 `print x` in a 2017
notebook), the other cells are still joined and linted as one module, so that a cell keeps what
earlier cells define (a `loss.data[0]` whose criterion is built two cells up is found as it is in
a script); the cell that does not parse gets its own diagnostic, and stands in the joined text as
`name = <unknown>` for each name it may assign, so that nothing after it is judged by a value it
may have replaced. When the joined text does not parse, each cell is linted on its own.

Masking keeps every line's length (and so every row and column of the rest of the cell): a
masked line becomes `pass#...`, a short statement, or a comment, so that the fixer can tell which
lines it must never edit (`fixer._changed_spans`). IPython syntax is recognised only where IPython
itself recognises it, at the start of a logical line (not inside strings, brackets or a
backslash continuation):

- line magics `%time f()`, shell escapes `!ls` / `!!ls`, help `?x`, `??x`, `x?`, `x.y??`,
  automagics (a line magic's name without `%`, `pip install torchviz`, in a line that is not
  Python by itself),
  autocall `/f 1 2`, `,f a b`, `;f a b`;
- assignments from them, `files = !ls`, `t = %timeit -o f()` (the right-hand side is masked);
- a cell magic `%%time` on the first line: the magic line is masked and the body linted when the
  body is Python (`time`, `timeit`, `capture`, ...); any other cell magic (`%%bash`,
  `%%writefile`) makes the whole cell a comment;
- backslash continuation lines of a masked line;
- a cell indented as a whole (IPython strips the first line's indentation from every line that
  starts with it): linted as the body of an `if 1:` block written on its marker line, so rows
  and columns stay those of the cell.

Cells are numbered from 1 over all cells (markdown too), as Jupyter shows them; findings carry the
number in `Finding.cell` with rows and columns relative to the cell (a fix whose edits reach into
another cell is applied by `--fix` but not shown with the finding). A file that is not a
notebook (not JSON, no `cells` list, a cell source that is not text) gets one TL905 diagnostic.
"""

from __future__ import annotations

import ast
import json
import re
import secrets
import warnings
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

from torchlint import diagnostics, legacy_syntax
from torchlint.finding import FileResult, Finding, Location

# Cell magics whose body is Python (ruff's list).
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_ESCAPE = re.compile(r"[ \t]*(?:%|!|\?|/|,|;)")  # `/f 1`, `,f a`, `;f a`: IPython autocall
_ASSIGN = re.compile(r"[ \t]*[A-Za-z_][\w.]*(?:[ \t]*,[ \t]*[A-Za-z_][\w.]*)*[ \t]*=[ \t]*(?=[%!])")
_HELP_END = re.compile(r"[ \t]*[\w.*\[\]()%]+\?\??[ \t]*$")
_CELL_MAGIC = re.compile(r"[ \t]*%%(\w+)")


def _split(text: str) -> List[str]:
    """Physical lines with their endings, split only where Python's tokenizer splits."""
    return _LINE.findall(text)


def _body(line: str) -> Tuple[str, str]:
    body = line.rstrip("\r\n")
    return body, line[len(body):]


def _as_statement(body: str, start: int) -> str:
    """`body[start:]` replaced by a statement of the same length (so a block stays non-empty)."""
    length = len(body) - start
    if length >= 5:
        filler = "pass#" + body[start + 5:]
    elif length == 4:
        filler = "pass"
    else:
        filler = "0".ljust(length)
    return body[:start] + filler


def _as_comment(line: str) -> str:
    body, ending = _body(line)
    stripped = len(body) - len(body.lstrip(" \t"))
    if stripped == len(body):
        return line
    return body[:stripped] + "#" + body[stripped + 1:] + ending


def _indent(body: str) -> int:
    return len(body) - len(body.lstrip(" \t"))


class _Scanner:
    """Tracks, line by line, whether the next line starts a logical line: not inside a string,
    brackets or a backslash continuation. A deliberately small tokenizer (no f-string nesting)."""

    def __init__(self) -> None:
        self.quote: Optional[str] = None  # the open string's delimiter
        self.depth = 0
        self.continued = False

    @property
    def at_logical_start(self) -> bool:
        return self.quote is None and self.depth == 0 and not self.continued

    def feed(self, line: str) -> bool:
        """Consume one physical line; return whether it has a `?` in code (outside strings)."""
        body, _ = _body(line)
        question = False
        i, n = 0, len(body)
        self.continued = False
        while i < n:
            char = body[i]
            if self.quote is not None:
                if char == "\\":
                    i += 2
                    continue
                if body.startswith(self.quote, i):
                    i += len(self.quote)
                    self.quote = None
                    continue
                i += 1
                continue
            if char == "#":
                break
            if char in "'\"":
                triple = body[i:i + 3]
                self.quote = triple if triple in ("'''", '"""') else char
                i += len(self.quote)
                continue
            if char in "([{":
                self.depth += 1
            elif char in ")]}":
                self.depth = max(self.depth - 1, 0)
            elif char == "?":
                question = True
            elif char == "\\" and i == n - 1:
                self.continued = True
            i += 1
        if self.quote is not None and len(self.quote) == 1 and not self.continued:
            if not body.endswith("\\"):
                self.quote = None  # an unterminated one-line string ends at the line end
            else:
                self.continued = True
        return question


# Line magics IPython runs without the `%` (automagic, on by default) when no variable of the
# name shadows them: `pip install torchviz`, `cd data`, `load_ext autoreload`.
_AUTOMAGICS = frozenset("""
pip conda mamba cd ls pwd mkdir rmdir rm cp mv cat env load_ext reload_ext unload_ext matplotlib
autoreload time timeit run config history who whos reset lsmagic bookmark alias unalias tensorboard
""".split())
_AUTOMAGIC = re.compile(r"[ \t]*([A-Za-z_]\w*)[ \t]+(?![ \t]*=)(?=\S)")


def _is_automagic(body: str) -> bool:
    """`pip install torchviz` at the start of a logical line: a line magic's name, then
    arguments, in a line that is not Python by itself (so `time = 3`, `ls -la` as arithmetic and
    `cd(x)` stay Python, as IPython keeps them where a variable shadows the magic)."""
    match = _AUTOMAGIC.match(body)
    if match is None or match.group(1) not in _AUTOMAGICS:
        return False
    return not _complete(body.strip() + "\n")


def mask_magics(source: str) -> str:
    """`source` with IPython-only syntax replaced by Python of the same length on every line."""
    lines = _split(source)
    if not lines:
        return source
    first = next((i for i, line in enumerate(lines) if line.strip()), None)
    if first is not None:
        match = _CELL_MAGIC.match(lines[first])
        if match:
            if match.group(1) not in PYTHON_CELL_MAGICS:
                return "".join(_as_comment(line) for line in lines)
            lines[first] = _as_comment(lines[first])
    out: List[str] = []
    scanner = _Scanner()
    index = 0
    while index < len(lines):
        line = lines[index]
        body, ending = _body(line)
        masked: Optional[str] = None
        if scanner.at_logical_start and body.strip():
            assign = _ASSIGN.match(body)
            if assign:
                masked = body[: assign.end()] + "_".ljust(len(body) - assign.end())
            elif _ESCAPE.match(body) or _is_automagic(body):
                masked = _as_statement(body, _indent(body))
            elif "?" in body and _HELP_END.match(body):
                probe = _Scanner()
                if probe.feed(line) and probe.at_logical_start:
                    masked = _as_statement(body, _indent(body))
        if masked is None:
            scanner.feed(line)
            out.append(line)
            index += 1
            continue
        out.append(masked + ending)
        index += 1
        # backslash continuations belong to the masked command
        while body.endswith("\\") and index < len(lines):
            body, _ = _body(lines[index])
            out.append(_as_comment(lines[index]))
            index += 1
        scanner = _Scanner()
    return "".join(out)


# IPython strips the first line's indentation from every line of a cell that starts with it
# (`leading_indent`), so a cell indented as a whole runs. Linted, such a cell's marker line
# becomes `if 1: # torchlint-cell ...`: the cell is that block's body, rows and columns unchanged.
INDENTED_CELL_HEADER = "if 1: "


def indented_cell(masked: str) -> bool:
    """A cell (masked) whose first line is indented, that is not Python as written but is as
    IPython runs it (inside a block, which is what stripping the common indentation amounts to)."""
    first = next((line for line in _split(masked) if line.strip()), None)
    if first is None or first[0] not in " \t":
        return False
    return not _complete(masked) and _complete("if 1:\n" + masked)


def lint_cell(source: str, path: str, rules) -> FileResult:
    """One cell linted on its own, as IPython runs it: magics masked, an indented cell inside a
    block (rows then moved back by the one line added)."""
    from torchlint.engine import lint_text

    masked = mask_magics(source)
    if not indented_cell(masked):
        return lint_text(masked, path, rules)
    result = lint_text("if 1:\n" + masked, path, rules)
    result.findings = [replace(f, start=Location(max(f.start.row - 1, 1), f.start.column),
                               end=Location(max(f.end.row - 1, 1), f.end.column), fix=None)
                       for f in result.findings]
    return result


class NotebookError(ValueError):
    """The file is not a notebook this tool can read; the message is user-facing."""


def load(data: bytes) -> dict:
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as error:
        raise NotebookError(f"not UTF-8 (byte {error.start}: {error.reason})") from None
    try:
        notebook = json.loads(text)
    except json.JSONDecodeError as error:
        raise NotebookError(f"not valid JSON (line {error.lineno}, column {error.colno}: {error.msg})") from None
    if not isinstance(notebook, dict):
        raise NotebookError("the top level is not a JSON object")
    if "cells" not in notebook and "worksheets" in notebook:
        raise NotebookError("nbformat 3 notebooks are not supported; convert with `jupyter nbconvert --to notebook`")
    if not isinstance(notebook.get("cells"), list):
        raise NotebookError("no `cells` list")
    return notebook


def code_cells(data: bytes) -> List[Tuple[int, str]]:
    """(cell number counted from 1 over all cells, source) for each code cell."""
    notebook = load(data)
    cells = []
    for number, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict):
            raise NotebookError(f"cell {number} is not a JSON object")
        if cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list) and all(isinstance(part, str) for part in source):
            source = "".join(source)
        if not isinstance(source, str):
            raise NotebookError(f"cell {number} has a source that is not text")
        cells.append((number, source))
    return cells


def _complete(source: str) -> bool:
    """Whether `source` (a masked cell) is complete Python by itself: CPython's parser only, with
    top-level `await` allowed as IPython allows it."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(source, "<cell>", "exec", ast.PyCF_ONLY_AST | ast.PyCF_ALLOW_TOP_LEVEL_AWAIT, dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False


@dataclass
class JoinedCells:
    """The code cells as one text, each after a marker line."""

    text: str
    token: str
    ends_with_newline: Dict[int, bool]
    masked: str = ""  # `mask(text)`, computed while joining
    # Cells that are not complete Python on their own: in the text only as stand-in assignments,
    # never split back out (nor fixed); each is linted alone for its diagnostic.
    skipped: Tuple[int, ...] = ()

    def marker(self, number: int) -> str:
        return f"# torchlint-cell {number} {self.token}\n"

    def split(self, text: str) -> Optional[Dict[int, str]]:
        """Cell number -> source, from `text` (this joined text, possibly fixed); None when the
        markers are not all there, in order."""
        sources: Dict[int, str] = {}
        current: Optional[int] = None
        lines: List[str] = []
        for line in _split(text):
            number = self._marker_number(line)
            if number is not None:
                if current is not None:
                    sources[current] = "".join(lines)
                current, lines = number, []
            elif current is None:
                return None
            else:
                lines.append(line)
        if current is not None:
            sources[current] = "".join(lines)
        for number in self.skipped:
            sources.pop(number, None)
        if list(sources) != list(self.ends_with_newline):
            return None
        for number, source in sources.items():
            if not self.ends_with_newline[number] and source.endswith("\n"):
                sources[number] = source[:-1]
        return sources

    def rows(self, text: str) -> List[Tuple[int, int]]:
        """(first row of the cell in `text`, cell number), in order."""
        starts = []
        for row, line in enumerate(_split(text), start=1):
            number = self._marker_number(line)
            if number is not None:
                starts.append((row + 1, number))
        return starts

    def mask(self, text: str) -> str:
        """`mask_magics` cell by cell (a cell magic is one only on its cell's first line)."""
        out: List[str] = []
        cell: List[str] = []

        def flush() -> None:
            if cell:
                masked = mask_magics("".join(cell))
                if out and indented_cell(masked) and self._marker_number(out[-1]) is not None:
                    out[-1] = INDENTED_CELL_HEADER + out[-1]
                out.append(masked)
                cell.clear()

        for line in _split(text):
            if self._marker_number(line) is not None:
                flush()
                out.append(line)
            else:
                cell.append(line)
        flush()
        return "".join(out)

    def _marker_number(self, line: str) -> Optional[int]:
        if not line.startswith("# torchlint-cell ") or not line.rstrip("\r\n").endswith(self.token):
            return None
        parts = line.split()
        return int(parts[2]) if len(parts) == 4 and parts[2].isdigit() else None


# A name a cell that does not parse may assign, at the start of a line: `x = ...`, `a, b = ...`,
# `x += ...`, `for x in ...`, `def x(`, `class x`, `import x` / `from m import x`, `with ... as x`.
_BOUND = re.compile(r"^[ \t]*(?:for[ \t]+(?P<loop>[\w, \t]+?)[ \t]+in\b|(?:def|class)[ \t]+(?P<def>\w+)"
                    r"|(?P<targets>[A-Za-z_]\w*(?:[ \t]*,[ \t]*[A-Za-z_]\w*)*)[ \t]*(?:[-+*/%&|^@]|//|\*\*|<<|>>)?=(?!=))")
_IMPORTED = re.compile(r"\bimport[ \t]+(?P<names>[\w., \t]+)|\bas[ \t]+(?P<alias>\w+)")
_STAND_IN = "__torchlint_unparsed_cell__"


def _stand_in(source: str) -> str:
    """Assignments of an unknown value to every name `source` (a cell that does not parse) may
    bind, so that the value model forgets what those names held before the cell."""
    names: Dict[str, None] = {}
    for line in _split(source):
        match = _BOUND.match(line)
        if match:
            found = match.group("loop") or match.group("def") or match.group("targets") or ""
            for name in re.split(r"[ \t,]+", found.strip()):
                if name.isidentifier():
                    names[name] = None
        for imported in _IMPORTED.finditer(line):
            text = imported.group("alias") or imported.group("names") or ""
            for name in re.split(r"[ \t,]+", text.strip()):
                name = name.split(".")[0]
                if name.isidentifier() and name not in ("as", "import"):
                    names[name] = None
    return "".join(f"{name} = {_STAND_IN}\n" for name in names if not _is_keyword(name))


def _is_keyword(name: str) -> bool:
    import keyword

    return keyword.iskeyword(name)


def join_cells(cells: Sequence[Tuple[int, str]], skip_incomplete: bool = False) -> Optional[JoinedCells]:
    """The non-empty code cells joined, or None when some cell is not complete on its own (with
    `skip_incomplete`, such a cell stands in as assignments of an unknown value instead; None
    when no cell is complete)."""
    joined = JoinedCells("", secrets.token_hex(8), {})
    parts, masked_parts = [], []
    skipped = []
    for number, source in cells:
        if not source.strip():
            continue
        ends_with_newline = source.endswith(("\n", "\r"))
        text = source if ends_with_newline else source + "\n"
        masked = mask_magics(text)  # what `joined.mask` gives for this cell
        indented = indented_cell(masked)
        if not (indented or _complete(masked) or legacy_syntax.complete_after_recovery(masked, _complete)):
            if not skip_incomplete:
                return None
            skipped.append(number)
            stand_in = _stand_in(masked)
            marker = joined.marker(number)
            parts += [marker, stand_in]
            masked_parts += [marker, stand_in]
            continue
        joined.ends_with_newline[number] = ends_with_newline
        marker = joined.marker(number)
        parts += [marker, text]
        masked_parts += [INDENTED_CELL_HEADER + marker if indented else marker, masked]
    if not joined.ends_with_newline:
        return None
    joined.text, joined.masked = "".join(parts), "".join(masked_parts)
    joined.skipped = tuple(skipped)
    return joined


def with_skipped_cells(joined: JoinedCells, findings: Sequence[Finding], cells: Sequence[Tuple[int, str]],
                       path: str, rules) -> List[Finding]:
    """The joined lint's `findings` outside the cells `joined` left out (they stood in as unknown
    values), and those cells' own findings (their parse diagnostic), each linted alone."""
    kept = [finding for finding in findings if finding.cell not in joined.skipped]
    return kept + skipped_cell_findings(joined, cells, path, rules) if joined.skipped else kept


def skipped_cell_findings(joined: JoinedCells, cells: Sequence[Tuple[int, str]], path: str, rules) -> List[Finding]:
    """The findings (the parse diagnostic) of each cell `joined` left out, linted on its own."""
    out: List[Finding] = []
    for number, source in cells:
        if number in joined.skipped:
            out.extend(in_cell(finding, number) for finding in lint_cell(source, path, rules).findings)
    return out


def findings_in_cells(findings: Sequence[Finding], starts: List[Tuple[int, int]]) -> List[Finding]:
    """Findings on the joined text, with rows made relative to their cells."""
    def locate(row: int) -> Optional[Tuple[int, int]]:
        found = None
        for first, number in starts:
            if row < first:
                break
            found = (number, row - first + 1)
        return found

    def moved(location: Location, shift: int) -> Location:
        return Location(location.row - shift, location.column)

    out = []
    for finding in findings:
        where = locate(finding.start.row)
        if where is None:  # a file-level diagnostic
            out.append(finding)
            continue
        number, row = where
        shift = finding.start.row - row
        fix = finding.fix
        if fix is not None:
            if all(locate(e.start.row) == (number, e.start.row - shift)
                   and locate(e.end.row) == (number, e.end.row - shift) for e in fix.edits):
                fix = replace(fix, edits=tuple(replace(e, start=moved(e.start, shift), end=moved(e.end, shift))
                                               for e in fix.edits))
            else:
                fix = None
        out.append(replace(finding, cell=number, start=moved(finding.start, shift),
                           end=moved(finding.end, shift), fix=fix))
    return out


def lint_notebook(path: str, data: bytes, rules: Sequence) -> FileResult:
    try:
        cells = code_cells(data)
    except NotebookError as error:
        return diagnostics.failure(path, diagnostics.NOTEBOOK_ERROR, f"not a valid notebook: {error}")
    result = FileResult(path)
    if not cells:
        return result
    from torchlint.engine import lint_text

    joined = join_cells(cells, skip_incomplete=True)  # all cells when each is complete
    if joined is not None:
        whole = lint_text(joined.masked, path, rules)
        if not whole.failed:
            whole.findings = with_skipped_cells(
                joined, findings_in_cells(whole.findings, joined.rows(joined.text)), cells, path, rules)
            return whole
    for number, source in cells:
        if not source.strip():
            continue
        cell_result = lint_cell(source, path, rules)
        for finding in cell_result.findings:
            result.findings.append(in_cell(finding, number))
        result.internal_error |= cell_result.internal_error
    return result


def in_cell(finding: Finding, number: int) -> Finding:
    return replace(finding, cell=number)


__all__ = ["JoinedCells", "NotebookError", "code_cells", "findings_in_cells", "in_cell", "join_cells",
           "lint_notebook", "load", "mask_magics", "skipped_cell_findings"]
