"""The cheap pre-filter: can any enabled rule fire on this text? Decided without parsing.

Every rule declares `triggers`, strings of which at least one must occur in the source for the
rule to report anything. All triggers of the enabled rules are compiled into one regular
expression (an alternation of literals), so a file is scanned once. This module imports nothing
heavy (no LibCST), so the command can skip files before the parser is even imported.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Iterable, Optional, Pattern, Sequence, Tuple

ALWAYS = None  # a rule without triggers can fire on any file


@lru_cache(maxsize=64)
def _compile(trigger_sets: Tuple[Tuple[str, ...], ...]) -> Optional[Pattern[str]]:
    literals = set()
    for triggers in trigger_sets:
        if not triggers:
            return ALWAYS
        literals.update(triggers)
    if not literals:
        return re.compile(r"(?!)")  # no rules: nothing can match
    # Longest first so that the alternation never stops at a prefix (irrelevant for a yes/no
    # search, but keeps the pattern canonical and the cache key stable).
    ordered = sorted(literals, key=lambda s: (-len(s), s))
    return re.compile("|".join(re.escape(literal) for literal in ordered))


def pattern_for(trigger_sets: Iterable[Sequence[str]]) -> Optional[Pattern[str]]:
    """The compiled alternation for these rules' triggers; None when some rule has none."""
    return _compile(tuple(tuple(t) for t in trigger_sets))


def could_match_triggers(text: str, trigger_sets: Iterable[Sequence[str]]) -> bool:
    pattern = pattern_for(trigger_sets)
    return pattern is None or pattern.search(text) is not None


# ---------------------------------------------------------------------------------------------
# Nesting guard: LibCST's native parser overflows the C stack (segmentation fault, the whole
# process dies) on a few thousand nested brackets. CPython itself refuses more than 200 levels
# ("too many nested parentheses"), so no valid file is deeper; anything that looks deeper is
# checked with CPython's own parser, which fails cleanly.
MAX_BRACKET_DEPTH = 200
_NOT_BRACKET = re.compile(r"[^()\[\]{}]+")


def naive_bracket_depth(text: str) -> int:
    """Bracket nesting depth ignoring strings and comments (an over-estimate at worst)."""
    if text.count("(") + text.count("[") + text.count("{") <= MAX_BRACKET_DEPTH:
        return 0
    depth = deepest = 0
    for char in _NOT_BRACKET.sub("", text):
        if char in "([{":
            depth += 1
            if depth > deepest:
                deepest = depth
        elif depth:
            depth -= 1
    return deepest


def too_deep(text: str) -> Optional[str]:
    """A reason when `text` is nested too deeply to hand to LibCST safely, else None."""
    if naive_bracket_depth(text) <= MAX_BRACKET_DEPTH:
        return None
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            ast.parse(text)
    except (SyntaxError, ValueError) as error:
        message = getattr(error, "msg", None) or str(error)
        return f"nesting too deep to parse ({message})"
    except (RecursionError, MemoryError):
        return "nesting too deep to parse (Python's own parser gives up too)"
    return None


def without_parse(path: str, data: bytes, trigger_sets, cross_file_sets=None):
    """A file's FileResult when it needs no parse (bytes that do not decode, or no trigger of an
    enabled rule in the text), else None. Gives exactly what the engine would."""
    from torchlint import diagnostics
    from torchlint.finding import FileResult
    from torchlint.source import SourceError, decode_source

    try:
        source = decode_source(data)
    except SourceError as error:
        return diagnostics.failure(path, diagnostics.DECODE_ERROR, str(error), error.row, error.column)
    if _prefilter_enabled() and not could_match_triggers(source.text, trigger_sets) and syntax_ok(source.text):
        # A trigger may stand in a project file this one imports (`Dropout` in model.py).
        from torchlint.analysis.project_files import imported_text

        imported, dependencies = imported_text(path, source.text)
        # Only the rules whose facts may come from another file (`cross_file_sets`; by default
        # every rule's) look at the imported text.
        searched = trigger_sets if cross_file_sets is None else cross_file_sets
        if imported and searched and could_match_triggers(imported, searched):
            return None
        return FileResult(path, dependencies=dependencies)
    return None  # the engine decides (and reports a syntax error exactly as it always does)


def _prefilter_enabled() -> bool:
    engine = __import__("sys").modules.get("torchlint.engine")
    return engine is None or getattr(engine, "PREFILTER_ENABLED", True)


def syntax_ok(text: str) -> bool:
    """Whether CPython's own (C, fast) parser accepts `text`. A file the pre-filter skips is still
    checked, so a syntax error is reported whether or not any rule could fire; only when CPython
    rejects it does the engine run LibCST (which also accepts newer syntax) to decide and word the
    diagnostic the same way as everywhere else."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<torchlint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
        return True
    except (SyntaxError, ValueError, RecursionError, MemoryError, OverflowError):
        return False


def cpython_syntax_error(text: str):
    """(message, row, column) of CPython's own syntax error for `text`, or None if it parses."""
    import ast
    import warnings

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            compile(text, "<torchlint>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as error:
        return (error.msg or "invalid syntax", error.lineno or 1, error.offset or 1)
    except (ValueError, RecursionError, MemoryError, OverflowError):
        return None
    return None
