"""Diagnostics about the run itself, reported like findings with TL9xx codes.

A file that cannot be linted gets exactly one of these, and the run goes on.
"""

from __future__ import annotations

from torchlint.finding import FileResult, Finding, Location, Severity

UNREADABLE = ("TL900", "unreadable-file")
SYNTAX_ERROR = ("TL901", "syntax-error")
DECODE_ERROR = ("TL902", "decode-error")
INTERNAL_ERROR = ("TL903", "internal-error")
TOO_COMPLEX = ("TL904", "too-complex")
NOTEBOOK_ERROR = ("TL905", "invalid-notebook")
FIX_NOT_WRITTEN = ("TL906", "fix-not-written")  # reported by the fixer (--fix)

ALL = {code: name for code, name in (UNREADABLE, SYNTAX_ERROR, DECODE_ERROR, INTERNAL_ERROR,
                                     TOO_COMPLEX, NOTEBOOK_ERROR, FIX_NOT_WRITTEN)}


def diagnostic(path: str, kind, message: str, row: int = 1, column: int = 1) -> Finding:
    code, name = kind
    return Finding(
        code=code,
        message=message,
        path=path,
        start=Location(max(row, 1), max(column, 1)),
        end=Location(max(row, 1), max(column, 1)),
        rule_name=name,
        is_diagnostic=True,
        severity=Severity.ERROR,
    )


def failure(path: str, kind, message: str, row: int = 1, column: int = 1) -> FileResult:
    result = FileResult(path, [diagnostic(path, kind, message, row, column)], failed=True)
    result.internal_error = kind == INTERNAL_ERROR
    return result


def internal_error(path: str, rule_code: str, error: BaseException) -> Finding:
    return diagnostic(
        path,
        INTERNAL_ERROR,
        f"internal error in {rule_code}: {type(error).__name__}: {error} "
        "(the other rules still ran; please report this)",
    )
