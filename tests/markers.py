"""Inline expectation markers in fixtures, read with tokenize so strings never count.

    x.view(b, -1)  # expect: TL004          this line, any column
    x.view(b, -1)  # expect: TL004:9        this line, column 9 (1-based)
    ...            # expect: TL001, TL003   several findings on this line
    # expect+1: TL002                       the next line
"""

from __future__ import annotations

import io
import re
import tokenize
from dataclasses import dataclass
from typing import List, Optional

_MARKER = re.compile(r"#\s*expect(?P<offset>[+-]\d+)?:\s*(?P<codes>TL\d{3}(?::\d+)?(?:\s*,\s*TL\d{3}(?::\d+)?)*)")


@dataclass(frozen=True)
class Expected:
    code: str
    row: int
    column: Optional[int] = None

    def __str__(self) -> str:
        column = f":{self.column}" if self.column is not None else ""
        return f"line {self.row}{column}: {self.code}"


def read_markers(source: str) -> List[Expected]:
    expected: List[Expected] = []
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type != tokenize.COMMENT:
            continue
        match = _MARKER.search(token.string)
        if not match:
            continue
        row = token.start[0] + int(match.group("offset") or 0)
        for item in match.group("codes").split(","):
            code, _, column = item.strip().partition(":")
            expected.append(Expected(code, row, int(column) if column else None))
    return expected


def compare(expected: List[Expected], findings) -> tuple:
    """(missing, unexpected) as lists of human-readable strings."""
    actual = [(f.code, f.start.row, f.start.column, f.message) for f in findings]
    unmatched = list(actual)
    missing = []
    for item in expected:
        match = next(
            (a for a in unmatched if a[0] == item.code and a[1] == item.row
             and (item.column is None or a[2] == item.column)),
            None,
        )
        if match is None:
            missing.append(str(item))
        else:
            unmatched.remove(match)
    unexpected = [f"line {row}:{column}: {code} {message}" for code, row, column, message in unmatched]
    return missing, unexpected
