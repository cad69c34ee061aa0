"""Write docs/rules/: one page per rule and an index, from the rules' own metadata and docs.

    python scripts/generate_rule_docs.py          # write the pages
    python scripts/generate_rule_docs.py --check  # exit 1 and name the pages that differ

A page is exactly what `torchlint rule CODE` prints, and a finding's `url` points at the page's
address on the documentation site (`torchlint.rule_codes.rule_url`). The rules are read from the
registry, so a new rule only needs this script re-run; `tests/test_docs.py` fails when the pages
and the rules drift apart.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Dict

ROOT = Path(__file__).resolve().parent.parent
RULES_DIR = ROOT / "docs" / "rules"

_GROUPS = (
    ("TL0", "Training bugs", "Mistakes that crash a training script or make it learn wrongly."),
    ("TL1", "Models, evaluation and silent bugs",
     "Modules, evaluation loops, losses and numerics: bugs that often raise nothing."),
    ("TL2", "Legacy and changed PyTorch APIs",
     "Code written for older PyTorch (or torchvision) that fails or warns on today's."),
)


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def index_page(rules) -> str:
    lines = [
        "# Rules",
        "",
        "Every rule torchlint has, generated from the rules themselves "
        "(`python scripts/generate_rule_docs.py`). `torchlint rule CODE` prints the same page in the "
        "terminal, and each finding's `url` points here. **Fix**: whether `--fix` can rewrite the code "
        "(`always`, `sometimes`, `none`). **Severity**: what a finding of the rule can be; each finding "
        "gets its own (see a rule's page).",
        "",
        "Codes `TL900`–`TL905` are not rules: they report a file that could not be checked "
        "(see [Usage](../usage.md#files-that-cannot-be-checked)).",
    ]
    grouped: Dict[str, list] = {}
    for rule in rules:
        prefix = next((p for p, _, _ in _GROUPS if rule.code.startswith(p)), "other")
        grouped.setdefault(prefix, []).append(rule)
    for prefix, title, blurb in _GROUPS + (("other", "Other rules", ""),):
        members = grouped.get(prefix)
        if not members:
            continue
        lines += ["", f"## {title}", ""]
        if blurb:
            lines += [blurb, ""]
        lines += ["| code | name | what | fix | severity |", "| --- | --- | --- | --- | --- |"]
        for rule in members:
            lines.append(f"| [{rule.code}]({rule.code}.md) | {rule.name} | {_cell(rule.summary)} | "
                         f"{rule.fix_availability} | {rule.severity_range_text()} |")
    return "\n".join(lines) + "\n"


def pages() -> Dict[str, str]:
    """File name under docs/rules/ -> its text."""
    from torchlint.cli import rule_docs
    from torchlint.rules import all_rules

    rules = all_rules()
    result = {f"{rule.code}.md": rule_docs(rule) for rule in rules}
    result["index.md"] = index_page(rules)
    return result


def drift(folder: Path = RULES_DIR) -> list:
    """What differs between the pages the rules make and those in `folder`: missing, stale, extra."""
    expected = pages()
    problems = []
    for name, text in expected.items():
        path = folder / name
        if not path.exists():
            problems.append(f"missing: {path}")
        elif path.read_text(encoding="utf-8") != text:
            problems.append(f"stale: {path}")
    for path in sorted(folder.glob("*.md")) if folder.exists() else ():
        if path.name not in expected:
            problems.append(f"no such rule: {path}")
    return problems


def main(argv=None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    sys.path.insert(0, str(ROOT))
    if argv == ["--check"]:
        problems = drift()
        for problem in problems:
            print(problem)
        if problems:
            print("Run `python scripts/generate_rule_docs.py` to regenerate docs/rules/.")
        return 1 if problems else 0
    if argv:
        print(__doc__)
        return 2
    RULES_DIR.mkdir(parents=True, exist_ok=True)
    expected = pages()
    for path in RULES_DIR.glob("*.md"):
        if path.name not in expected:
            path.unlink()
    for name, text in expected.items():
        (RULES_DIR / name).write_text(text, encoding="utf-8")
    print(f"wrote {len(expected)} pages to {RULES_DIR.relative_to(ROOT)}/")
    return 0


if __name__ == "__main__":
    sys.exit(main())
