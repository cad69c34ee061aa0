"""Which static findings' lines the run executed.

Tracing every line (`sys.settrace`) would slow the whole program down. Instead, the files with
static findings are compiled with one extra call before each statement that holds a finding —
`__torchlint_reached__(n)`, a builtin that records `n` in a set — the technique pytest uses to
rewrite asserts. Line numbers, columns and tracebacks stay the user's; the statement itself is
unchanged. Imported project modules get the same treatment through an import hook that is on
`sys.meta_path` only while the script runs.
"""

from __future__ import annotations

import ast
import builtins
import importlib.abc
import importlib.machinery
import os
import sys
from typing import Dict, Iterable, List, Optional, Set, Tuple

from torchlint.runtime.project import _statement_start, innermost_statement

PROBE_NAME = "__torchlint_reached__"
_LINE_SPACE = 1_000_000  # probe id = file number * _LINE_SPACE + statement line


class Reach:
    """Probe ids and the set of ids the run hit, for the files with static findings."""

    def __init__(self) -> None:
        self.hit: Set[int] = set()
        self._files: Dict[str, int] = {}
        self._targets: Dict[str, Set[int]] = {}  # path -> finding lines
        # (path, finding line) -> probe id of the statement holding it
        self._probe_of: Dict[Tuple[str, int], int] = {}
        self.instrumented: Set[str] = set()

    def want(self, path: str, lines: Iterable[int]) -> None:
        self._targets.setdefault(path, set()).update(lines)
        self._files.setdefault(path, len(self._files) + 1)

    def wants(self, path: str) -> bool:
        return path in self._targets

    def reached(self, path: str, line: int, loaded: Set[str]) -> Optional[bool]:
        """Whether the statement holding `line` ran: True/False, or None when the run cannot
        tell (the file was loaded without the probes, or the line holds no statement that can
        take one)."""
        if path not in self.instrumented:
            return None if path in loaded else False
        probe = self._probe_of.get((path, line))
        return None if probe is None else probe in self.hit

    def instrument(self, tree: ast.Module, path: str) -> ast.Module:
        """Insert the probes into `tree` (in place) for the finding lines wanted in `path`."""
        number = self._files.setdefault(path, len(self._files) + 1)
        lines = self._targets.get(path, set())
        chosen: Dict[int, ast.stmt] = {}
        for line in lines:
            statement = innermost_statement(tree, line)
            if statement is None or _must_stay_first(tree, statement):
                continue
            start = _statement_start(statement)
            self._probe_of[(path, line)] = number * _LINE_SPACE + start
            chosen[id(statement)] = statement
        if chosen:
            _insert_probes(tree, chosen, number)
        self.instrumented.add(path)
        return tree

    def compile(self, source: bytes, path: str):
        tree = ast.parse(source, filename=path)
        if self.wants(path):
            tree = self.instrument(tree, path)
        return compile(tree, path, "exec", dont_inherit=True)

    def install(self) -> None:
        builtins.__dict__[PROBE_NAME] = self.hit.add
        sys.meta_path.insert(0, _ProbingFinder(self))

    def uninstall(self) -> None:
        sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _ProbingFinder)]
        # the builtin stays: a thread of the script may still run instrumented code


def _must_stay_first(tree: ast.Module, statement: ast.stmt) -> bool:
    """A docstring and `from __future__` imports must stay where they are."""
    if isinstance(statement, ast.ImportFrom) and statement.module == "__future__":
        return True
    return isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Constant) \
        and isinstance(statement.value.value, str)


def _probe(statement: ast.stmt, number: int) -> ast.stmt:
    call = ast.Expr(ast.Call(ast.Name(PROBE_NAME, ast.Load()),
                             [ast.Constant(number * _LINE_SPACE + _statement_start(statement))], []))
    for node in ast.walk(call):
        node.lineno = node.end_lineno = statement.lineno  # type: ignore[attr-defined]
        node.col_offset = node.end_col_offset = statement.col_offset  # type: ignore[attr-defined]
    return call


def _insert_probes(tree: ast.AST, chosen: Dict[int, ast.stmt], number: int) -> None:
    for node in ast.walk(tree):
        for field in ("body", "orelse", "finalbody"):
            block = getattr(node, field, None)
            if not isinstance(block, list) or not any(id(s) in chosen for s in block):
                continue
            new: List[ast.stmt] = []
            for statement in block:
                if id(statement) in chosen:
                    new.append(_probe(statement, number))
                new.append(statement)
            setattr(node, field, new)


class _ProbingLoader(importlib.machinery.SourceFileLoader):
    """Loads a project module from its source (never its cached bytecode) with the probes."""

    def __init__(self, fullname: str, path: str, reach: Reach) -> None:
        super().__init__(fullname, path)
        self._reach = reach

    def get_code(self, fullname: str):
        path = self.get_filename(fullname)
        return self._reach.compile(self.get_data(path), os.path.abspath(path))


class _ProbingFinder(importlib.abc.MetaPathFinder):
    def __init__(self, reach: Reach) -> None:
        self._reach = reach

    def find_spec(self, fullname: str, path=None, target=None):
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or not isinstance(spec.loader, importlib.machinery.SourceFileLoader):
            return None
        origin = spec.origin
        if origin is None or not self._reach.wants(os.path.abspath(origin)):
            return None
        spec.loader = _ProbingLoader(fullname, origin, self._reach)
        return spec

    def invalidate_caches(self) -> None:
        pass
