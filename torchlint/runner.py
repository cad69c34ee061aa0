"""Linting a set of files: read each, pick its rules from the config, collect the results."""

from __future__ import annotations

from typing import Dict, List, Sequence, Tuple

from torchlint import diagnostics
from torchlint.config import Config
from torchlint.finding import FileResult
from torchlint.startup import compiled_dataclass_methods

# Whichever path imports the engine first (stdin, a pre-commit run whose cache already holds the
# rule manifest, a worker), LibCST's node classes are built from the kept code (startup.py).
with compiled_dataclass_methods():
    from torchlint.engine import lint_bytes, select_rules
    from torchlint.rules.base import Rule

_RULES_CACHE: Dict[Tuple[Tuple[str, ...], Tuple[str, ...]], List[Rule]] = {}


def rules_for(path: str, config: Config, select: Sequence[str], ignore: Sequence[str]) -> List[Rule]:
    key = (tuple(select), tuple(list(ignore) + config.ignores_for(path)))
    rules = _RULES_CACHE.get(key)
    if rules is None:
        rules = _RULES_CACHE[key] = select_rules(key[0], key[1])
    return rules


def read_bytes(path: str):
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except OSError as error:
        return diagnostics.failure(path, diagnostics.UNREADABLE, f"cannot read file: {error.strerror or error}")


def lint_data(path: str, data: bytes, rules: Sequence[Rule]) -> FileResult:
    if path.endswith(".ipynb"):
        from torchlint.notebook import lint_notebook

        return lint_notebook(path, data, rules)
    return lint_bytes(data, path, rules)


def lint_file(path: str, config: Config, select: Sequence[str], ignore: Sequence[str]) -> FileResult:
    data = read_bytes(path)
    if isinstance(data, FileResult):
        return data
    try:
        return lint_data(path, data, rules_for(path, config, select, ignore))
    except RecursionError:
        return diagnostics.failure(path, diagnostics.TOO_COMPLEX, "nesting too deep to analyse")
    except Exception as error:  # never let one file end the run with a traceback
        return diagnostics.failure(
            path, diagnostics.INTERNAL_ERROR, f"internal error: {type(error).__name__}: {error} (please report this)"
        )


def lint_files(paths: Sequence[str], config: Config, select: Sequence[str], ignore: Sequence[str]) -> List[FileResult]:
    return [lint_file(path, config, select, ignore) for path in paths]
