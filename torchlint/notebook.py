"""Jupyter notebooks: each code cell is linted on its own; magics are masked so they parse."""

from __future__ import annotations

import json
import re
from typing import List, Sequence, Tuple

from torchlint import diagnostics
from torchlint.engine import lint_text
from torchlint.finding import FileResult, Finding
from torchlint.rules.base import Rule

# IPython line magics (`%time`), cell magics (`%%time`), shell escapes (`!ls`), help (`x?`).
_MAGIC = re.compile(r"^(\s*)(%%?|!|\?)")


def mask_magics(source: str) -> str:
    """Replace IPython-only lines with `pass`-like lines of the same length, keeping positions."""
    lines = source.splitlines(keepends=True)
    masked = []
    for line in lines:
        match = _MAGIC.match(line)
        if match or line.rstrip().endswith("?") and not line.lstrip().startswith("#"):
            body = line.rstrip("\r\n")
            ending = line[len(body):]
            indent = match.group(1) if match else body[: len(body) - len(body.lstrip())]
            masked.append(indent + "#" + body[len(indent) + 1:] + ending if len(body) > len(indent) else line)
        else:
            masked.append(line)
    return "".join(masked)


def code_cells(data: bytes) -> List[Tuple[int, str]]:
    """(cell number counted from 1 over all cells, source) for each code cell."""
    notebook = json.loads(data.decode("utf-8"))
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        raise ValueError("no `cells` list")
    cells = []
    for number, cell in enumerate(notebook["cells"], start=1):
        if not isinstance(cell, dict) or cell.get("cell_type") != "code":
            continue
        source = cell.get("source", "")
        if isinstance(source, list):
            source = "".join(str(part) for part in source)
        if not isinstance(source, str):
            raise ValueError(f"cell {number} has a source that is not text")
        cells.append((number, source))
    return cells


def lint_notebook(path: str, data: bytes, rules: Sequence[Rule]) -> FileResult:
    try:
        cells = code_cells(data)
    except (ValueError, UnicodeDecodeError) as error:
        return diagnostics.failure(path, diagnostics.NOTEBOOK_ERROR, f"not a valid notebook: {error}")
    result = FileResult(path)
    for number, source in cells:
        cell_result = lint_text(mask_magics(source), path, rules)
        for finding in cell_result.findings:
            result.findings.append(_in_cell(finding, number))
        result.internal_error |= cell_result.internal_error
    return result


def _in_cell(finding: Finding, number: int) -> Finding:
    from dataclasses import replace

    return replace(finding, cell=number)
