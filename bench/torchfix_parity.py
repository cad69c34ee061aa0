#!/usr/bin/env python
"""How torchlint does on TorchFix's own checker fixtures: every positive line, every negative line.

    python bench/torchfix_parity.py PATH            # a TorchFix checkout, or its bare git dir
    python bench/torchfix_parity.py PATH --json     # the same as JSON
    python bench/torchfix_parity.py PATH --rev TAG  # a bare git dir at another revision

TorchFix's checker fixtures are `tests/fixtures/<area>/checker/<name>.py`, each with the
expected findings in `<name>.txt` (`row:col TORnnn message`). A line listed there is a positive
line of that TOR code; every other code line of the fixture is a negative line (TorchFix's
authors judged it clean, or wrote it as a near-miss or as a known false negative).

For every TOR code the report gives its positive lines, how many torchlint flags with the TL code
that covers it (the table below, "Coming from TorchFix" in docs/comparisons.md), how many it reports once at
the import that brought the name instead (a use of `default_collate` imported from the private
module), and which it misses; then every finding of a covering TL code on a negative line (so the
precision on TorchFix's negatives), and the findings of other TL codes for information. TorchFix's
files are read into a temporary directory and never copied anywhere else.

Without PATH the script says so and exits 0 (it is a measurement, not a test).
"""

from __future__ import annotations

import argparse
import io
import json
import re
import subprocess
import sys
import tarfile
import tempfile
import tokenize
from collections import defaultdict
from pathlib import Path
from typing import Dict, List, Optional, Tuple

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

# TorchFix code -> the torchlint codes that cover it; () = deliberately not covered (docs/comparisons.md
# says why).
COVERAGE: Dict[str, Tuple[str, ...]] = {
    "TOR001": ("TL209", "TL210"),  # removed functions
    "TOR002": ("TL120",),  # require_grad typo
    "TOR003": ("TL213",),  # checkpoint without use_reentrant
    "TOR004": ("TL209", "TL210"),  # import of removed functions
    "TOR101": ("TL209", "TL210"),  # deprecated functions
    "TOR102": ("TL211",),  # torch.load without weights_only
    "TOR103": ("TL209", "TL210"),  # import of deprecated functions
    "TOR104": ("TL214",),  # private default_collate, use
    "TOR105": ("TL214",),  # private default_collate, import
    "TOR106": ("TL121",),  # log(1 + x)
    "TOR107": ("TL121",),  # exp(x) - 1
    "TOR108": ("TL122",),  # log(sum(exp(x)))
    "TOR201": ("TL215",),  # torchvision pretrained=
    "TOR202": ("TL209", "TL210"),  # torchvision ToTensor in transforms v2
    "TOR203": (),  # torchvision singleton import style
    "TOR401": (),  # DataLoader without workers
    "TOR402": (),  # zero_grad(set_to_none=False)
    "TOR901": (),  # torch.library.Library in PyTorch's own tests
}
# A use reported at its import instead: TorchFix code -> the code of its import finding.
AT_IMPORT = {"TOR104": "TOR105"}
# A fixture comment by which TorchFix's authors mark the code below it as a bug TorchFix misses.
_KNOWN_MISS = re.compile(r"#\s*false negative", re.IGNORECASE)
_EXPECTED = re.compile(r"^(?P<row>\d+):(?P<col>\d+) (?P<code>TOR\d+) (?P<message>.*)$")


def _fixtures(path: Path, rev: str) -> Tuple[Path, Optional[tempfile.TemporaryDirectory]]:
    """The directory holding `tests/fixtures` of the checkout or bare git dir `path`."""
    if (path / "tests" / "fixtures").is_dir():
        return path, None
    bare = subprocess.run(["git", "--git-dir", str(path), "rev-parse", "--is-bare-repository"],
                          capture_output=True, text=True)
    if bare.returncode != 0:
        raise SystemExit(f"torchfix_parity: {path} is neither a TorchFix checkout (no tests/fixtures) "
                         f"nor a git directory")
    archive = subprocess.run(["git", "--git-dir", str(path), "archive", rev, "tests/fixtures"],
                             capture_output=True)
    if archive.returncode != 0:
        raise SystemExit(f"torchfix_parity: git archive {rev} tests/fixtures failed: "
                         f"{archive.stderr.decode(errors='replace').strip()}")
    temporary = tempfile.TemporaryDirectory(prefix="torchfix-fixtures-")
    with tarfile.open(fileobj=io.BytesIO(archive.stdout)) as tar:
        tar.extractall(temporary.name, filter="data")
    return Path(temporary.name), temporary


def _code_lines(source: str) -> List[int]:
    """Rows holding code (not blank, not only a comment)."""
    rows = set()
    try:
        for token in tokenize.generate_tokens(io.StringIO(source).readline):
            if token.type in (tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT,
                              tokenize.DEDENT, tokenize.ENDMARKER):
                continue
            rows.update(range(token.start[0], token.end[0] + 1))
    except (tokenize.TokenError, SyntaxError):
        rows = {i for i, line in enumerate(source.splitlines(), 1)
                if line.strip() and not line.strip().startswith("#")}
    return sorted(rows)


def _known_misses(source: str) -> set:
    """Rows of code below a `# False negative: ...` comment, up to the next blank line: bugs by
    TorchFix's own judgement that TorchFix does not report (so not negatives)."""
    rows, marked = set(), False
    for row, line in enumerate(source.splitlines(), 1):
        text = line.strip()
        if _KNOWN_MISS.search(text):
            marked = True
        elif not text:
            marked = False
        elif marked and not text.startswith("#"):
            rows.add(row)
    return rows


def measure(root: Path) -> dict:
    from torchlint.engine import lint_source

    covering = sorted({code for codes in COVERAGE.values() for code in codes})
    per_code: Dict[str, dict] = {code: {"positive": 0, "flagged": 0, "at_import": 0, "missed": [],
                                        "flagged_by": defaultdict(int)} for code in COVERAGE}
    negatives = {"lines": 0, "findings": []}
    known = {"lines": 0, "flagged": []}
    entries = 0
    others: List[str] = []
    files = sorted((root / "tests" / "fixtures").glob("*/checker/*.py"))
    for path in files:
        expected_path = path.with_suffix(".txt")
        if not expected_path.exists():
            continue
        name = str(path.relative_to(root / "tests" / "fixtures"))
        source = path.read_text(encoding="utf-8")
        lines = source.splitlines()
        positives: Dict[Tuple[int, str], str] = {}
        for entry in expected_path.read_text(encoding="utf-8").splitlines():
            match = _EXPECTED.match(entry.strip())
            if match:
                entries += 1
                positives.setdefault((int(match["row"]), match["code"]), match["message"])
        findings = lint_source(source, str(path))
        by_row: Dict[int, List] = defaultdict(list)
        for finding in findings:
            by_row[finding.start.row].append(finding)
        positive_rows = {row for row, _ in positives}
        for (row, code), message in sorted(positives.items()):
            stats = per_code.setdefault(code, {"positive": 0, "flagged": 0, "at_import": 0, "missed": [],
                                               "flagged_by": defaultdict(int)})
            stats["positive"] += 1
            wanted = COVERAGE.get(code, ())
            hits = [f.code for f in by_row.get(row, []) if f.code in wanted]
            for seen in {f.code for f in by_row.get(row, [])}:
                stats["flagged_by"][seen] += 1
            if hits:
                stats["flagged"] += 1
                continue
            imported = _reported_at_import(code, message, positives, by_row, lines, wanted)
            if imported is not None:
                stats["at_import"] += 1
                continue
            stats["missed"].append(f"{name}:{row}: {lines[row - 1].strip()}")
        misses = _known_misses(source)
        for row in _code_lines(source):
            if row in positive_rows:
                continue
            if row in misses:
                known["lines"] += 1
                known["flagged"].extend(f"{name}:{row}: {f.code} {lines[row - 1].strip()}"
                                        for f in by_row.get(row, []) if f.code in covering)
                continue
            negatives["lines"] += 1
            for finding in by_row.get(row, []):
                text = f"{name}:{row}: {finding.code} {lines[row - 1].strip()}"
                if finding.code in covering:
                    negatives["findings"].append(text)
                else:
                    others.append(text)
    return {"files": len(files), "entries": entries, "per_code": per_code, "negatives": negatives,
            "known_misses": known, "others": others, "covering": covering}


def _reported_at_import(code: str, message: str, positives, by_row, lines, wanted) -> Optional[int]:
    """For a use TorchFix reports (TOR104) that torchlint reports once at the import of the name:
    the row of that import finding."""
    import_code = AT_IMPORT.get(code)
    if import_code is None:
        return None
    private = re.findall(r"`([\w.]+)`", message)
    if not private:
        return None
    function = private[0].rsplit(".", 1)[-1]
    for (row, other), _ in positives.items():
        if other == import_code and function in lines[row - 1] and \
                any(f.code in wanted for f in by_row.get(row, [])):
            return row
    return None


def render(result: dict) -> str:
    out = ["| TorchFix | torchlint | positive lines | flagged | at the import | missed |",
           "| --- | --- | --- | --- | --- | --- |"]
    total = flagged = covered_total = covered_flagged = 0
    for code in sorted(result["per_code"]):
        stats = result["per_code"][code]
        wanted = COVERAGE.get(code, ())
        hit = stats["flagged"] + stats["at_import"]
        total += stats["positive"]
        flagged += hit
        if wanted:
            covered_total += stats["positive"]
            covered_flagged += hit
        out.append(f"| {code} | {'/'.join(wanted) or 'deliberately not'} | {stats['positive']} | "
                   f"{stats['flagged']} | {stats['at_import']} | {len(stats['missed'])} |")
    out.append("")
    out.append(f"{result['files']} fixture files, {result['entries']} expected findings on {total} "
               f"(line, code) pairs; positive lines flagged: {flagged}/{total} in all, "
               f"{covered_flagged}/{covered_total} of the codes torchlint covers.")
    missed = [(code, line) for code, stats in sorted(result["per_code"].items())
              for line in stats["missed"] if COVERAGE.get(code)]
    if missed:
        out.append("Missed positive lines of covered codes:")
        out.extend(f"  {code} {line}" for code, line in missed)
    negatives = result["negatives"]
    wrong = len(negatives["findings"])
    precision = covered_flagged / (covered_flagged + wrong) if covered_flagged + wrong else 1.0
    out.append(f"Negative lines: {negatives['lines']}; findings of covering codes "
               f"({', '.join(result['covering'])}) on them: {wrong}; precision on TorchFix's "
               f"fixtures {precision:.2f}.")
    out.extend(f"  {line}" for line in negatives["findings"])
    known = result["known_misses"]
    out.append(f"Lines TorchFix's fixtures mark as its own false negatives: {known['lines']}; "
               f"flagged by torchlint: {len(known['flagged'])}.")
    out.extend(f"  {line}" for line in known["flagged"])
    if result["others"]:
        out.append(f"Other torchlint findings on negative lines ({len(result['others'])}):")
        out.extend(f"  {line}" for line in result["others"])
    return "\n".join(out) + "\n"


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("torchfix", nargs="?", help="a TorchFix checkout, or its bare git dir")
    parser.add_argument("--rev", default="HEAD", help="revision of a bare git dir (default HEAD)")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    if not args.torchfix:
        print("torchfix_parity: skipped, no TorchFix checkout given "
              "(python bench/torchfix_parity.py PATH, PATH a checkout or its bare git dir)")
        return 0
    root, temporary = _fixtures(Path(args.torchfix), args.rev)
    try:
        result = measure(root)
    finally:
        if temporary is not None:
            temporary.cleanup()
    if args.json:
        for stats in result["per_code"].values():
            stats["flagged_by"] = dict(stats["flagged_by"])
        print(json.dumps(result, indent=2))
    else:
        print(render(result), end="")
    return 0


if __name__ == "__main__":
    sys.exit(main())
