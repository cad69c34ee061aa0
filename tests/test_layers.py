"""The package reads top-down: facts in `analysis/`, queries in `rules/`, and no two modules
import each other (imports inside functions count too)."""

from __future__ import annotations

import ast
from pathlib import Path

PACKAGE = Path(__file__).resolve().parent.parent / "torchlint"


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports() -> dict:
    """module -> the torchlint modules it imports (anywhere in its code)."""
    found = {}
    for path in PACKAGE.rglob("*.py"):
        name = _module_name(path)
        targets = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                targets.update(a.name for a in node.names if a.name.startswith("torchlint"))
            elif isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("torchlint"):
                targets.add(node.module)
                targets.update(f"{node.module}.{a.name}" for a in node.names)
        found[name] = targets
    modules = set(found)
    return {name: {t for t in targets if t in modules and t != name} for name, targets in found.items()}


def test_analysis_never_imports_rules():
    for name, targets in _imports().items():
        if name.startswith("torchlint.analysis"):
            assert not {t for t in targets if t.startswith("torchlint.rules")}, name


def test_no_two_modules_import_each_other():
    imports = _imports()
    cycles = sorted({tuple(sorted((a, b))) for a, targets in imports.items() for b in targets
                     if a in imports.get(b, ()) and not (a.startswith(b + ".") or b.startswith(a + "."))})
    assert not cycles, cycles
