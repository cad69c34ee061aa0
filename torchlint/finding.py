"""What a rule reports: a `Finding`, optionally with a `Fix` made of text `Edit`s.

Rows and columns are 1-based everywhere in this module; columns count characters (code points).
A `cell` is set for findings in notebooks (1-based cell number among all cells, as Jupyter shows).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Optional, Tuple


class Severity(str, Enum):
    """How much a finding matters in the analysed program, decided per finding from its facts.

    error: the program crashes, or trains/evaluates wrongly, on the current PyTorch.
    warning: harm that depends on scale or data (memory per batch, a view that fails for some shapes).
    note: hygiene with no effect on results today (a deprecated spelling that still works).
    """

    ERROR = "error"
    WARNING = "warning"
    NOTE = "note"

    @property
    def rank(self) -> int:
        """0 for the most severe, so that sorting by rank lists errors first."""
        return _SEVERITY_RANK[self]

    @classmethod
    def parse(cls, text: str) -> "Severity":
        try:
            return cls(text.strip().lower())
        except ValueError:
            raise ValueError(f"unknown severity {text!r} (expected error, warning or note)") from None


_SEVERITY_RANK = {Severity.ERROR: 0, Severity.WARNING: 1, Severity.NOTE: 2}


class Applicability(str, Enum):
    SAFE = "safe"  # keeps runtime behaviour; applied by --fix
    UNSAFE = "unsafe"  # may change behaviour; applied only with --unsafe-fixes


@dataclass(frozen=True, order=True)
class Location:
    row: int
    column: int


@dataclass(frozen=True)
class Edit:
    content: str
    start: Location
    end: Location

    def to_json(self) -> dict:
        return {
            "content": self.content,
            "location": {"row": self.start.row, "column": self.start.column},
            "end_location": {"row": self.end.row, "column": self.end.column},
        }


@dataclass(frozen=True)
class Fix:
    message: str
    edits: Tuple[Edit, ...]
    applicability: Applicability = Applicability.SAFE

    def to_json(self) -> dict:
        return {
            "applicability": self.applicability.value,
            "message": self.message,
            "edits": [edit.to_json() for edit in self.edits],
        }


@dataclass(frozen=True)
class Finding:
    code: str
    message: str
    path: str
    start: Location
    end: Location
    rule_name: str = ""
    fix: Optional[Fix] = None
    cell: Optional[int] = None
    # Diagnostics about the run itself (parse errors, unreadable files) use TL9xx codes.
    is_diagnostic: bool = False
    severity: Severity = Severity.WARNING
    # Places in other files of the project the finding's proof uses (the class that holds the
    # Dropout), as (path relative to the project root or absolute, row, column, what is there).
    related: Tuple[Tuple[str, int, int, str], ...] = ()

    @property
    def sort_key(self) -> tuple:
        return (self.path, self.cell or 0, self.start.row, self.start.column, self.code)

    def fix_applies(self, unsafe: bool = False) -> bool:
        """`--fix` (with `--unsafe-fixes` when `unsafe`) applies this finding's fix: what `[*]`
        marks, in every output, and what the fixer takes (fixer.applicable). A diagnostic or a fix
        without edits is never applied."""
        fix = self.fix
        if fix is None or self.is_diagnostic or not fix.edits:
            return False
        return fix.applicability is Applicability.SAFE or (unsafe and fix.applicability is Applicability.UNSAFE)

    @property
    def fixable(self) -> bool:
        """`--fix` applies the fix (as ruff's `[*]`): only safe fixes; an unsafe one needs
        `--unsafe-fixes` and is counted as a hidden fix."""
        return self.fix_applies(False)


@dataclass
class FileResult:
    """Everything linting one file produced, in the order it is reported."""

    path: str
    findings: list = field(default_factory=list)
    # Set when the file could not be linted at all (diagnostic finding carries the reason).
    failed: bool = False
    internal_error: bool = False
    # The project files (absolute path -> content hash) the lint of this file read: its cached
    # result holds only while they are unchanged.
    dependencies: dict = field(default_factory=dict)
