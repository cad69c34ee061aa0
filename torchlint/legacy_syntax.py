"""Getting past the one syntax error of PyTorch 0.3 code: `x.cuda(async=True)` (TL204).

PyTorch before 0.4 spelled `non_blocking=` as `async=`. Since Python 3.7 `async` is a reserved
keyword, so such a file does not even parse, and a linter would only say "cannot parse". When a
file fails to parse, this module looks for that exact cause in the tokens: a keyword argument
named `async` in a call of one of the methods that took it (`.cuda`, `.to`, `.type`, `.copy_`).
If there is one, the text is rewritten in memory with `non_blocking` in its place, and the
rewritten text is linted instead; `Recovery` maps every position found there back to the file.
Nothing else is ever rewritten: any other syntax error stays a syntax error.

Imports nothing heavy (LibCST only inside `rewritten_arguments`): notebooks use it before any
parse.
"""

from __future__ import annotations

import re
import tokenize
from dataclasses import dataclass, replace
from typing import Dict, List, Optional, Sequence, Tuple

RULE_CODE = "TL204"
OLD = "async"
NEW = "non_blocking"
# Tensor methods whose `async=` argument PyTorch 0.4 renamed `non_blocking=`.
METHODS = frozenset({"cuda", "to", "type", "copy_"})
_GROWTH = len(NEW) - len(OLD)
_LINES = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")  # rows as the rest of torchlint counts them


@dataclass(frozen=True)
class Site:
    """An `async` keyword argument: its row (1-based) and column (0-based, code points) in the
    original text, and the method it was passed to."""

    row: int
    column: int
    method: str


def async_keyword_sites(text: str) -> List[Site]:
    """Every `async=` keyword argument in a call `<x>.cuda(...)` / `.to` / `.type` / `.copy_`.
    Empty when there is none or the text cannot be tokenized."""
    if OLD not in text:
        return []
    lines = iter(_LINES.findall(text))
    tokens = []
    try:
        for token in tokenize.generate_tokens(lambda: next(lines, "")):
            if token.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT,
                                  tokenize.DEDENT):
                tokens.append(token)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return []
    sites: List[Site] = []
    # For each open bracket: the method it calls (`x.cuda(`), or None.
    brackets: List[Optional[str]] = []
    for position, token in enumerate(tokens):
        if token.type == tokenize.OP and token.string in "([{":
            method = None
            if token.string == "(" and position >= 2:
                name, dot = tokens[position - 1], tokens[position - 2]
                if name.type == tokenize.NAME and dot.type == tokenize.OP and dot.string == ".":
                    method = name.string
            brackets.append(method)
        elif token.type == tokenize.OP and token.string in ")]}":
            if brackets:
                brackets.pop()
        elif token.type == tokenize.NAME and token.string == OLD and brackets and brackets[-1] in METHODS:
            before = tokens[position - 1]
            after = tokens[position + 1] if position + 1 < len(tokens) else None
            if before.type == tokenize.OP and before.string in ("(", ",") and after is not None \
                    and after.type == tokenize.OP and after.string == "=":
                sites.append(Site(token.start[0], token.start[1], brackets[-1]))
    return sites


@dataclass
class Recovery:
    """The text with each site's `async` written as `non_blocking`, and the way back."""

    text: str
    sites: Tuple[Site, ...]

    def _row_sites(self) -> Dict[int, List[int]]:
        """Row -> the 0-based columns where `non_blocking` starts in the rewritten text."""
        by_row: Dict[int, List[int]] = {}
        for site in self.sites:
            columns = by_row.setdefault(site.row, [])
            columns.append(site.column + _GROWTH * len(columns))
        return by_row

    def original_column(self, row: int, column0: int, end: bool = False) -> int:
        """A 0-based column of the rewritten text as a column of the original. A position inside
        a rewritten keyword goes to that keyword's start (or its end, for an `end`)."""
        shift = 0
        for start in self._row_sites().get(row, ()):
            if column0 >= start + len(NEW):
                shift += _GROWTH
            elif column0 > start:
                return start - shift + (len(OLD) if end else 0)
        return column0 - shift


    def _location(self, location, end: bool = False):
        column = self.original_column(location.row, location.column - 1, end) + 1
        return location if column == location.column else replace(location, column=column)

    def finding_in_file(self, finding):
        """`finding` (on the rewritten text) with its own and its fix's positions in the file."""
        fix = finding.fix
        if fix is not None:
            fix = replace(fix, edits=tuple(
                replace(edit, start=self._location(edit.start), end=self._location(edit.end, end=True))
                for edit in fix.edits))
        return replace(finding, start=self._location(finding.start),
                       end=self._location(finding.end, end=True), fix=fix)


def recover(text: str) -> Optional[Recovery]:
    """The rewritten text when `text` has `async=` keyword arguments to rewrite, else None."""
    sites = async_keyword_sites(text)
    if not sites:
        return None
    starts = [0]
    for line in _LINES.findall(text):
        starts.append(starts[-1] + len(line))
    pieces = []
    position = 0
    for site in sites:
        offset = starts[site.row - 1] + site.column
        pieces.append(text[position:offset])
        pieces.append(NEW)
        position = offset + len(OLD)
    pieces.append(text[position:])
    return Recovery("".join(pieces), tuple(sites))


def enabled(rules: Sequence) -> bool:
    """Recovery is TL204's: with TL204 not selected, the file is a syntax error as before."""
    return any(rule.code == RULE_CODE for rule in rules)


def complete_after_recovery(text: str, compiles) -> bool:
    """Whether `text`, with its `async=` arguments rewritten, satisfies `compiles` (a notebook
    cell is complete on its own)."""
    recovery = recover(text)
    return recovery is not None and compiles(recovery.text)


def rewritten_arguments(module, arguments, recovery: Recovery) -> Tuple:
    """Of `arguments` (LibCST `Arg` nodes of the rewritten module), those whose keyword is one
    that `recovery` rewrote."""
    from torchlint.positions import node_ranges

    candidates = [arg for arg in arguments if arg.keyword is not None and arg.keyword.value == NEW]
    ranges = node_ranges(module, [arg.keyword for arg in candidates])
    wanted = {(row, column) for row, columns in recovery._row_sites().items() for column in columns}
    return tuple(arg for arg in candidates if ranges.get(arg.keyword, (None,))[0] in wanted)
