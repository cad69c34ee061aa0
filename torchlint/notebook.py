"""Jupyter notebooks: each code cell is linted on its own; IPython syntax is masked so it parses.

Masking keeps every line's length (and so every row and column of the rest of the cell): a
masked line becomes `pass#...`, a short statement, or a comment, so that the fixer can tell which
lines it must never edit (`fixer._changed_spans`). IPython syntax is recognised only where IPython
itself recognises it, at the start of a logical line (not inside strings, brackets or a
backslash continuation):

- line magics `%time f()`, shell escapes `!ls` / `!!ls`, help `?x`, `??x`, `x?`, `x.y??`;
- assignments from them, `files = !ls`, `t = %timeit -o f()` (the right-hand side is masked);
- a cell magic `%%time` on the first line: the magic line is masked and the body linted when the
  body is Python (`time`, `timeit`, `capture`, ...); any other cell magic (`%%bash`,
  `%%writefile`) makes the whole cell a comment;
- backslash continuation lines of a masked line.

Cells are numbered from 1 over all cells (markdown too), as Jupyter shows them; findings carry the
number in `Finding.cell` with rows and columns relative to the cell. A file that is not a
notebook (not JSON, no `cells` list, a cell source that is not text) gets one TL905 diagnostic.
"""

from __future__ import annotations

import json
import re
from dataclasses import replace
from typing import List, Optional, Sequence, Tuple

from torchlint import diagnostics
from torchlint.finding import FileResult, Finding

# Cell magics whose body is Python (ruff's list).
PYTHON_CELL_MAGICS = frozenset({"capture", "debug", "prun", "pypy", "python", "python3", "time", "timeit"})

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")
_ESCAPE = re.compile(r"[ \t]*(?:%|!|\?)")
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
            elif _ESCAPE.match(body):
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


def lint_notebook(path: str, data: bytes, rules: Sequence) -> FileResult:
    try:
        cells = code_cells(data)
    except NotebookError as error:
        return diagnostics.failure(path, diagnostics.NOTEBOOK_ERROR, f"not a valid notebook: {error}")
    result = FileResult(path)
    if not cells:
        return result
    from torchlint.engine import lint_text

    for number, source in cells:
        if not source.strip():
            continue
        cell_result = lint_text(mask_magics(source), path, rules)
        for finding in cell_result.findings:
            result.findings.append(in_cell(finding, number))
        result.internal_error |= cell_result.internal_error
    return result


def in_cell(finding: Finding, number: int) -> Finding:
    return replace(finding, cell=number)


__all__ = ["NotebookError", "code_cells", "in_cell", "lint_notebook", "load", "mask_magics"]
