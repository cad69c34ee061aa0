#!/usr/bin/env python
"""Recall on real code: seed known bugs into real multi-file projects, lint, count what is found.

    python bench/seeded_bugs.py DIR [DIR ...]          # project trees (e.g. fetched repositories)
    python bench/seeded_bugs.py --json DIR             # the counts as JSON
    python bench/seeded_bugs.py --all-files DIR        # also files that import nothing of their project

Each seed is one edit of one real line, in a file that imports a module of its own project
(`from model import Net`, `from .layers import X`, `import utils`), and is counted as found when
the expected rule reports it in that file and did not before the edit:

  TL003  `x += loss.item()` / `xs.append(loss.item())` loses its `.item()` (the line);
  TL004  `.contiguous().view(` becomes `.view(` (the line);
  TL107  a `model.eval()` statement line is deleted (anywhere in the file: the finding is at the
         first call of the model in the evaluation loop).

The edited file is linted the way pre-commit lints it (that one file, its project on disk), once
with the project layer switched off (TORCHLINT_NO_PROJECT=1: imported names unknown) and once with
it on; the table shows found/seeded per rule for both. Nothing is written: the edited text is
linted in memory under the file's own path. Only torchlint's lint is imported (never torch).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from pathlib import Path
from typing import Dict, Iterator, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.append(str(REPO))  # PYTHONPATH first: measure another checkout with this harness

_ITEM = re.compile(r"(?P<expr>\b\w*loss\w*(?:\[[^\]]*\])?)\.item\(\)")
_GROWTH = re.compile(r"(\+=|\.append\()")
_CONTIGUOUS_VIEW = re.compile(r"\.contiguous\(\)\.view\(")
_EVAL_LINE = re.compile(r"^(?P<indent>[ \t]*)(?P<model>[\w.]+)\.eval\(\)[ \t]*(?:#.*)?$")
_SKIP_DIRS = {".git", "site-packages", "venv", ".venv", "node_modules", "__pycache__"}

Seed = Tuple[str, int, str, str]  # (rule, 1-based line, description, edited text)


def python_files(root: Path) -> Iterator[Path]:
    for directory, names, files in os.walk(root):
        names[:] = sorted(n for n in names if n not in _SKIP_DIRS)
        for name in sorted(files):
            if name.endswith(".py"):
                yield Path(directory) / name


def seeds(text: str) -> Iterator[Seed]:
    lines = text.splitlines(keepends=True)
    for number, line in enumerate(lines, 1):
        code = line.split("#", 1)[0]
        if _GROWTH.search(code) and not _under_no_grad(lines, number):
            # Under no_grad a kept loss holds no graph: dropping `.item()` there is no bug.
            match = _ITEM.search(code)
            if match is not None:
                edited = line[:match.start()] + match.group("expr") + line[match.end():]
                yield "TL003", number, f"drop .item() of {match.group('expr')}", _join(lines, number, edited)
        if _CONTIGUOUS_VIEW.search(code):
            edited = line.replace(".contiguous().view(", ".view(", 1)
            yield "TL004", number, "drop .contiguous() before .view()", _join(lines, number, edited)
        match = _EVAL_LINE.match(line.rstrip("\r\n"))
        if match is not None:
            # Keep the block valid: a deleted line that is a block's only statement becomes `pass`.
            edited = f"{match.group('indent')}pass\n"
            yield "TL107", number, f"delete {match.group('model')}.eval()", _join(lines, number, edited)


_NO_GRAD = re.compile(r"^\s*(?:with\b.*\b(?:no_grad|inference_mode)\b|@.*\b(?:no_grad|inference_mode)\b)")


def _under_no_grad(lines: List[str], number: int) -> bool:
    """Whether line `number` is inside a `with torch.no_grad():` block or a function decorated
    with one (judged by indentation)."""
    indent = len(lines[number - 1]) - len(lines[number - 1].lstrip())
    for previous in range(number - 2, -1, -1):
        line = lines[previous]
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        depth = len(line) - len(line.lstrip())
        if depth < indent:
            if _NO_GRAD.match(line):
                return True
            if line.lstrip().startswith("def ") and previous > 0 and _NO_GRAD.match(lines[previous - 1]):
                return True
            indent = depth
        if depth == 0 and not line.lstrip().startswith("@"):
            break
    return False


def _join(lines: List[str], number: int, edited: str) -> str:
    return "".join(lines[:number - 1] + [edited] + lines[number:])


def imports_its_project(path: Path, text: str) -> bool:
    from torchlint.analysis import project

    os.environ.pop("TORCHLINT_NO_PROJECT", None)
    imported, _ = project.imported_text(str(path), text)
    return bool(imported)


def lint(path: Path, text: str, rule: str, layer: bool):
    from torchlint.engine import lint_text, select_rules

    if layer:
        os.environ.pop("TORCHLINT_NO_PROJECT", None)
    else:
        os.environ["TORCHLINT_NO_PROJECT"] = "1"
    try:
        return [f for f in lint_text(text, str(path), select_rules([rule])).findings if f.code == rule]
    finally:
        os.environ.pop("TORCHLINT_NO_PROJECT", None)


def found(rule: str, line: int, before, after) -> bool:
    old = {(f.start.row, f.message) for f in before}
    new = [f for f in after if (f.start.row, f.message) not in old]
    if rule == "TL107":
        return bool(new)
    return any(f.start.row == line for f in new)


def run(roots: List[Path], all_files: bool) -> Dict[str, dict]:
    counts: Dict[str, dict] = {}
    details = []
    for root in roots:
        for path in python_files(root):
            try:
                text = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError):
                continue
            if not all_files and not imports_its_project(path, text):
                continue
            file_seeds = list(seeds(text))
            if not file_seeds:
                continue
            baseline = {}
            for rule, line, what, edited in file_seeds:
                row = counts.setdefault(rule, {"seeded": 0, "off": 0, "on": 0})
                row["seeded"] += 1
                outcome = {}
                for layer in (False, True):
                    if (rule, layer) not in baseline:
                        baseline[(rule, layer)] = lint(path, text, rule, layer)
                    hit = found(rule, line, baseline[(rule, layer)], lint(path, edited, rule, layer))
                    outcome["on" if layer else "off"] = hit
                    if hit:
                        row["on" if layer else "off"] += 1
                details.append({"file": str(path), "line": line, "rule": rule, "seed": what, **outcome})
    return {"counts": counts, "seeds": details}


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("roots", nargs="+", type=Path)
    parser.add_argument("--json", action="store_true", help="print the counts and every seed as JSON")
    parser.add_argument("--all-files", action="store_true",
                        help="seed every file, not only those that import their own project")
    parser.add_argument("--list", action="store_true", help="list every seed and whether it was found")
    args = parser.parse_args(argv)
    result = run(args.roots, args.all_files)
    if args.json:
        print(json.dumps(result, indent=1))
        return 0
    if args.list:
        for seed in result["seeds"]:
            print(f"{seed['file']}:{seed['line']}: {seed['rule']} {seed['seed']}: "
                  f"off={'found' if seed['off'] else 'missed'} on={'found' if seed['on'] else 'missed'}")
    print("| rule | seeded | found, project layer off | found, project layer on |")
    print("| --- | ---: | ---: | ---: |")
    total = {"seeded": 0, "off": 0, "on": 0}
    for rule in sorted(result["counts"]):
        row = result["counts"][rule]
        for key in total:
            total[key] += row[key]
        print(f"| {rule} | {row['seeded']} | {row['off']} | {row['on']} |")
    print(f"| all | {total['seeded']} | {total['off']} | {total['on']} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
