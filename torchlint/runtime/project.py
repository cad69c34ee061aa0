"""The user's project: which files are "the user's", which of them a script imports, and where
in their source a statement, an attribute assignment or a container update is.

"User's files" are the Python files under the project root — the nearest directory above the
script holding pyproject.toml, setup.py, setup.cfg or .git, else the script's own directory —
except installed packages (site-packages, dist-packages, virtual environments), the Python
standard library and torchlint itself. The line a runtime finding is reported at is the
innermost frame in one of these files.

Source is read with `ast` (never executed) and parsed once per file.
"""

from __future__ import annotations

import ast
import os
import sys
import sysconfig
from functools import lru_cache
from typing import Dict, Iterable, List, Optional, Sequence, Set, Tuple

from torchlint.project_root import find_root as find_project_root  # noqa: F401 (used by command.py)

_INSTALLED_PARTS = ("site-packages", "dist-packages")
_TORCHLINT_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_IMPORTED_FILES = 200


def _library_dirs() -> Tuple[str, ...]:
    dirs = set()
    for key in ("stdlib", "platstdlib", "purelib", "platlib"):
        try:
            path = sysconfig.get_paths()[key]
        except KeyError:
            continue
        if path:
            dirs.add(os.path.abspath(path))
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        dirs.add(os.path.abspath(os.path.join(prefix, "lib")))
    return tuple(sorted(dirs))


class Project:
    """Decides whether a file is the user's. Cached per filename: the runtime asks this for
    every frame it walks."""

    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self._prefix = self.root.rstrip(os.sep) + os.sep
        self._library = _library_dirs()
        self._cache: Dict[str, bool] = {}

    def is_user_file(self, filename: str) -> bool:
        known = self._cache.get(filename)
        if known is None:
            known = self._cache[filename] = self._decide(filename)
        return known

    def _decide(self, filename: str) -> bool:
        if not filename or filename.startswith("<"):
            return False
        path = os.path.abspath(filename)
        if not path.startswith(self._prefix):
            return False
        if path.startswith(_TORCHLINT_DIR + os.sep):
            return False
        parts = path[len(self._prefix):].split(os.sep)
        if any(part in _INSTALLED_PARTS for part in parts):
            return False
        if any(os.path.exists(os.path.join(self.root, *parts[:i], "pyvenv.cfg")) for i in range(len(parts))):
            return False  # a virtual environment inside the project
        if any(path.startswith(lib + os.sep) for lib in self._library if not self.root.startswith(lib)):
            return False
        return path.endswith((".py", ".pyw")) or os.path.isfile(path)


_DISPLAY_ROOTS: List[str] = []  # the project root: paths outside the working directory are shown from it


def set_display_root(root: Optional[str]) -> None:
    _DISPLAY_ROOTS[:] = [os.path.abspath(root)] if root else []


def display_path(path: str) -> str:
    """The path as a user would type it: relative to the working directory when inside it, else
    relative to the project root when inside that (a module imported through PYTHONPATH or an
    editable install from `src/` while the script runs in `scripts/`), else absolute."""
    absolute = os.path.abspath(path)
    for base in [None] + _DISPLAY_ROOTS:
        try:
            relative = os.path.relpath(absolute, base) if base else os.path.relpath(absolute)
        except ValueError:
            continue
        if not relative.startswith(os.pardir):
            return relative
    return absolute


# -- parsing ------------------------------------------------------------------------------------

@lru_cache(maxsize=256)
def parse_file(path: str) -> Optional[ast.Module]:
    try:
        with open(path, "rb") as handle:
            data = handle.read()
        return ast.parse(data, filename=path)
    except (OSError, SyntaxError, ValueError, RecursionError):
        return None


def _statement_start(node: ast.stmt) -> int:
    decorators = getattr(node, "decorator_list", None) or ()
    return min([node.lineno] + [d.lineno for d in decorators])


def statements(tree: ast.AST) -> Iterable[ast.stmt]:
    for node in ast.walk(tree):
        if isinstance(node, ast.stmt):
            yield node


def innermost_statement(tree: ast.AST, line: int) -> Optional[ast.stmt]:
    best: Optional[ast.stmt] = None
    for node in statements(tree):
        start, end = _statement_start(node), node.end_lineno or node.lineno
        if start <= line <= end:
            if best is None or (start, -end) >= (_statement_start(best), -(best.end_lineno or best.lineno)):
                best = node
    return best


@lru_cache(maxsize=4096)
def statement_span(path: str, line: int) -> Tuple[int, int]:
    """The lines of the innermost *simple* statement (or compound statement header) containing
    `line`; (line, line) when the file cannot be parsed."""
    tree = parse_file(path)
    if tree is None:
        return (line, line)
    node = innermost_statement(tree, line)
    if node is None:
        return (line, line)
    start = _statement_start(node)
    body = getattr(node, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt):
        header_end = max(start, _statement_start(body[0]) - 1)  # a compound statement: its header
        return (start, header_end) if line <= header_end else (line, line)
    return (start, node.end_lineno or node.lineno)


# -- where something is assigned ------------------------------------------------------------------

def _self_attribute(node: ast.AST, attr: str) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name)
            and node.value.id == "self")


def _targets(node: ast.stmt) -> List[ast.AST]:
    if isinstance(node, ast.Assign):
        found: List[ast.AST] = []
        for target in node.targets:
            found.extend(ast.walk(target) if isinstance(target, (ast.Tuple, ast.List)) else [target])
        return found
    if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
        return [node.target]
    return []


def _class_nodes(tree: ast.Module, name: str) -> List[ast.ClassDef]:
    return [node for node in ast.walk(tree) if isinstance(node, ast.ClassDef) and node.name == name]


def class_source(cls: type) -> Optional[Tuple[str, ast.ClassDef]]:
    """(file, ClassDef) of a class defined in a Python file, found through one of its own
    functions' code objects."""
    code = None
    for value in vars(cls).values():
        function = getattr(value, "__func__", value)
        code = getattr(function, "__code__", None)
        if code is not None:
            break
    if code is None:
        return None
    tree = parse_file(code.co_filename)
    if tree is None:
        return None
    for node in _class_nodes(tree, cls.__name__):
        if node.lineno <= code.co_firstlineno <= (node.end_lineno or node.lineno):
            return code.co_filename, node
    return None


def attribute_lines(cls: type, attr: str, methods: Optional[Sequence[str]] = None) -> List[Tuple[str, int]]:
    """Lines in `cls`'s methods (all, or those named in `methods`) that assign `self.<attr>`
    (also inside a tuple target, as `self.<attr>[k] = ...`, or by `self.<attr>.append(...)`).
    Searches the class's bases defined in Python files too (first match wins)."""
    for klass in cls.__mro__:
        found = class_source(klass)
        if found is None:
            continue
        path, node = found
        lines = []
        for item in node.body:
            if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if methods is not None and item.name not in methods:
                continue
            for statement in statements(item):
                for target in _targets(statement):
                    base = target.value if isinstance(target, ast.Subscript) else target
                    if _self_attribute(base, attr):
                        lines.append(statement.lineno)
                if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call):
                    func = statement.value.func
                    if isinstance(func, ast.Attribute) and func.attr in ("append", "extend", "insert") \
                            and _self_attribute(func.value, attr):
                        lines.append(statement.lineno)
        if lines:
            return [(path, line) for line in sorted(set(lines))]
    return []


def class_span(cls: type) -> Optional[Tuple[str, int, int]]:
    found = class_source(cls)
    if found is None:
        return None
    path, node = found
    return path, _statement_start(node), node.end_lineno or node.lineno


def function_node(path: str, first_line: int, name: str) -> Optional[ast.AST]:
    """The function whose code object starts at `first_line` (the module for `<module>`)."""
    tree = parse_file(path)
    if tree is None:
        return None
    if name == "<module>":
        return tree
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name == name \
                and _statement_start(node) <= first_line <= node.lineno:
            return node
    return None


def container_update_lines(scope: ast.AST, name: str) -> List[int]:
    """Lines in `scope` that add to the container or running sum `name`: `name.append(...)`,
    `.extend`, `.insert`, `name += ...`, `name = name + ...`, `name[k] = ...`, and the same for
    `self.<name>`-style attribute names given as "self.x"; also through subscripts of it
    (`name["loss"].append(...)`, `name[k] += ...`)."""
    owner, _, attr = name.rpartition(".")

    def is_name(node: ast.AST) -> bool:
        while isinstance(node, ast.Subscript):  # `history["loss"].append(loss)`, `losses[k] += loss`
            node = node.value
        if owner:
            return isinstance(node, ast.Attribute) and node.attr == attr and isinstance(node.value, ast.Name) \
                and node.value.id == owner
        return isinstance(node, ast.Name) and node.id == name

    lines: Set[int] = set()
    for node in ast.walk(scope):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in ("append", "extend", "insert", "appendleft", "add") and is_name(node.func.value):
            lines.add(node.lineno)
        elif isinstance(node, ast.AugAssign) and is_name(node.target):
            lines.add(node.lineno)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                if isinstance(target, ast.Subscript) and is_name(target.value):
                    lines.add(node.lineno)
                elif is_name(target) and any(is_name(n) for n in ast.walk(node.value)):
                    lines.add(node.lineno)
    return sorted(lines)


# -- what a script imports from its own project -----------------------------------------------------

def _module_file(directory: str, dotted: str) -> Optional[str]:
    base = os.path.join(directory, *dotted.split("."))
    for candidate in (base + ".py", os.path.join(base, "__init__.py")):
        if os.path.isfile(candidate):
            return candidate
    return None


def _package_dir(path: str, level: int) -> Optional[str]:
    directory = os.path.dirname(path)
    for _ in range(level - 1):
        directory = os.path.dirname(directory)
    return directory


def import_roots(first: Sequence[str], project: Project) -> List[str]:
    """Where `python SCRIPT` finds the script's absolute imports, in order: `first` (the script's
    directory, or the working directory with -m), then the entries of sys.path — PYTHONPATH and the
    directories editable installs add through .pth files; sys.path[0] is torchlint's, which the
    script's replaces) — and the source directories of editable installs done with import hooks
    (setuptools' `__editable__` finders). What they resolve to counts only when it is a user file."""
    roots: List[str] = []
    for entry in list(first) + list(sys.path[1:]) + _editable_directories():
        path = os.path.abspath(entry) if entry else ""
        if path and path not in roots and os.path.isdir(path):
            roots.append(path)
    return roots


def _editable_directories() -> List[str]:
    """The package directories named by setuptools' editable finders (`__editable___*_finder`
    modules on sys.meta_path keep a MAPPING of top-level name -> source directory): their parent
    directories, where those packages are found."""
    found: List[str] = []
    for finder in list(sys.meta_path):
        module = sys.modules.get(getattr(finder, "__module__", "") or "")
        mapping = getattr(module, "MAPPING", None) if module is not None and \
            (getattr(finder, "__module__", "") or "").startswith("__editable__") else None
        if isinstance(mapping, dict):
            for location in mapping.values():
                if isinstance(location, str):
                    found.append(os.path.dirname(location))
    return found


def imported_project_files(script: str, search: Sequence[str], project: Project) -> List[str]:
    """The script's same-project imports, followed recursively (absolute imports resolved
    against `search`, the directories `python SCRIPT` would look in — see import_roots; relative
    ones against the importing file), in discovery order, the script first."""
    seen: List[str] = []
    queue = [os.path.abspath(script)]
    while queue and len(seen) < MAX_IMPORTED_FILES:
        path = queue.pop(0)
        if path in seen:
            continue
        seen.append(path)
        tree = parse_file(path)
        if tree is None:
            continue
        for node in ast.walk(tree):
            names: List[Tuple[str, int]] = []
            if isinstance(node, ast.Import):
                names = [(alias.name, 0) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                module = node.module or ""
                names = [(module, node.level)]
                names += [((module + "." if module else "") + alias.name, node.level) for alias in node.names]
            for dotted, level in names:
                roots = [_package_dir(path, level)] if level else list(search)
                parts = dotted.split(".") if dotted else []
                for root in roots:
                    if root is None:
                        continue
                    for depth in range(1, len(parts) + 1):  # `a.b.c` needs a/__init__, a/b/__init__, ...
                        found = _module_file(root, ".".join(parts[:depth]))
                        if found and project.is_user_file(found) and found not in seen and found not in queue:
                            queue.append(os.path.abspath(found))
    return seen
