"""The static half of a confirmation: the analyzer must flag `bad` at `bad_line` and leave
`good` alone. Runs in the parent process (no torch)."""

from __future__ import annotations

import importlib
import re
from typing import Any, Callable, Optional, Tuple

from torchlint.verify.case import Case

_RULE_CODE = re.compile(r"^TL\d{3}$")

OK = "ok"
MISMATCH = "mismatch"
UNAVAILABLE = "unavailable"
ERROR = "error"
NOT_APPLICABLE = "n/a"


def load_linter() -> Tuple[Optional[Callable[..., Any]], str]:
    """(`torchlint.engine.lint_source`, "") or (None, why it is unavailable). Raises when the
    engine exists but fails to import: that is a bug, not an absence."""
    try:
        engine = importlib.import_module("torchlint.engine")
    except ModuleNotFoundError as exc:
        if exc.name in ("torchlint.engine", "torchlint"):
            return None, "analyzer unavailable (torchlint.engine is missing)"
        raise
    lint = getattr(engine, "lint_source", None)
    if lint is None:
        return None, "analyzer unavailable (torchlint.engine.lint_source is missing)"
    return lint, ""


def _registered(code: str) -> bool:
    try:
        from torchlint.rules import get_rule
    except ImportError:
        return True  # cannot tell; the line check speaks for itself
    try:
        return get_rule(code) is not None
    except Exception:  # noqa: BLE001 - a broken rule module shows up in lint_source instead
        return True


def _rows(findings: Any, code: str) -> list:
    return sorted({f.start.row for f in findings if f.code == code})


def check_case(case: Case, lint: Optional[Callable[..., Any]] = None,
               unavailable_reason: str = "") -> dict:
    """{"status": ok|mismatch|unavailable|error|n/a, "detail": text}."""
    if case.is_claim:
        return {"status": NOT_APPLICABLE, "detail": "claims have no static part"}
    if not _RULE_CODE.match(case.rule):
        return {"status": NOT_APPLICABLE, "detail": f"{case.rule} is not a rule code"}
    if lint is None:
        return {"status": UNAVAILABLE, "detail": unavailable_reason or "analyzer unavailable"}
    try:
        bad_rows = _rows(lint(case.bad, path="<bad>", select=[case.rule]), case.rule)
        good_rows = _rows(lint(case.good, path="<good>", select=[case.rule]), case.rule)
    except Exception as exc:  # noqa: BLE001 - an analyzer crash is reported, not raised
        return {"status": ERROR, "detail": f"lint_source raised {type(exc).__name__}: {exc}"}
    problems = []
    if not bad_rows and not _registered(case.rule):
        return {"status": MISMATCH,
                "detail": f"{case.rule} is not a registered rule (torchlint.rules has no {case.rule})"}
    if case.bad_line not in bad_rows:
        seen = ", ".join(map(str, bad_rows)) or "none"
        problems.append(f"bad: {case.rule} not reported at line {case.bad_line} "
                        f"(reported at lines: {seen})")
    if good_rows:
        problems.append(f"good: {case.rule} reported at line(s) {', '.join(map(str, good_rows))}")
    if problems:
        return {"status": MISMATCH, "detail": "; ".join(problems)}
    return {"status": OK,
            "detail": f"{case.rule} reported at line {case.bad_line} of bad; not on good"}
