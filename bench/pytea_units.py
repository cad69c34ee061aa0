#!/usr/bin/env python
"""PyTea's own shape-error unit tests, linted by torchlint's shape rules (TL301-TL307).

    python bench/pytea_units.py --mirror /work/.mirror             # lint: which cases are flagged
    python bench/pytea_units.py --mirror /work/.mirror --confirm   # also run each case on torch

PyTea (ropas/pytea, ICSE 2022) shipped unit tests as small scripts, `fails/fail_*.py` (a shape
error) and `passes/pass_*.py` (none), until its commit 6df164e removed them; they are read from
the commit that added them (1401154) in the repository's snapshot (`fetch github:ropas/pytea`).

A "fail" case counts when torch raises a shape error on it (--confirm: run in a subprocess on the
installed torch; an error about dtypes or an argument's value, not about shapes, does not count,
nor a script that runs clean), and is found when a TL30x finding is in the file. A "pass" case
must stay silent whatever it raises (several pass float class targets to `nll_loss`, which
torch 2.13 rejects for their dtype). Nothing here imports torch except the --confirm subprocesses.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Dict, List, Optional

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

PYTEA = "ropas+pytea"
COMMIT = "14011548713cecdd1da9fde00e836a07bd4fd2a1"
FOLDER = "packages/pytea/pytest/unit_tests"
# torch errors that are not about shapes: the case fails for another reason
NOT_SHAPE = ("dtype", "is not a valid value for reduction")


def cases(mirror: Path) -> Dict[str, str]:
    """{"fails/fail_conv2d_basic01.py": text, ...} from the snapshot."""
    git_dir = mirror / PYTEA / "repo"
    listed = subprocess.run(["git", "--git-dir", str(git_dir), "ls-tree", "-r", "--name-only", COMMIT, FOLDER],
                            capture_output=True, text=True, check=True).stdout.split()
    found = {}
    for path in listed:
        if path.endswith(".py"):
            text = subprocess.run(["git", "--git-dir", str(git_dir), "show", f"{COMMIT}:{path}"],
                                  capture_output=True, text=True, check=True).stdout
            found[path[len(FOLDER) + 1:]] = text
    return found


def findings(path: str, text: str) -> List[str]:
    from torchlint.engine import select_rules
    from torchlint.runner import lint_data

    result = lint_data(path, text.encode("utf-8"), select_rules(["TL3"]))
    return [f"{f.code}:{f.start.row} {f.message}" for f in result.findings if f.code.startswith("TL30")]


def observe(text: str) -> str:
    """What the case does on the installed torch: "runs" or the last line of its traceback."""
    with tempfile.TemporaryDirectory() as folder:
        script = Path(folder) / "case.py"
        script.write_text(text, encoding="utf-8")
        try:
            done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120,
                                  cwd=folder, env={**os.environ, "PYTHONWARNINGS": "ignore"})
        except subprocess.TimeoutExpired:
            return "timed out"
    if done.returncode == 0:
        return "runs"
    lines = [line for line in done.stderr.strip().splitlines() if line.strip()]
    return lines[-1] if lines else f"exit {done.returncode}"


def run(mirror: Path, confirm: bool) -> List[dict]:
    rows = []
    for name, text in sorted(cases(mirror).items()):
        row = {"case": name, "kind": "fail" if name.startswith("fails/") else "pass",
               "findings": findings(name, text)}
        if confirm:
            observed = observe(text)
            row["observed"] = observed
            row["shape_error"] = observed not in ("runs", "timed out") and not any(w in observed for w in NOT_SHAPE)
        rows.append(row)
    return rows


def table(rows: List[dict], confirmed: bool) -> str:
    fails = [r for r in rows if r["kind"] == "fail"]
    passes = [r for r in rows if r["kind"] == "pass"]
    counted = [r for r in fails if r.get("shape_error", True)]
    found = sum(bool(r["findings"]) for r in counted)
    lines = [f"fail cases: {len(fails)}" + (f", a shape error on torch: {len(counted)}" if confirmed else ""),
             f"  found: {found} of {len(counted)}",
             f"pass cases: {len(passes)}, with a TL30x finding: {sum(bool(r['findings']) for r in passes)}"]
    if confirmed:
        other = [r for r in fails if not r["shape_error"]]
        lines.append(f"fail cases not counted (no shape error on this torch): {len(other)}"
                     + (f", of them flagged: {sum(bool(r['findings']) for r in other)}" if other else ""))
    return "\n".join(lines)


def main(argv: Optional[List[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--mirror", type=Path, default=Path("/work/.mirror"),
                        help="folder holding the snapshots as owner+name/repo bare git dirs")
    parser.add_argument("--confirm", action="store_true", help="run every case on torch first")
    parser.add_argument("--list", action="store_true", help="every case with what torch and torchlint say")
    args = parser.parse_args(argv)
    if not (args.mirror / PYTEA / "repo").exists():
        print(f"no snapshot of ropas/pytea under {args.mirror} (fetch github:ropas/pytea)", file=sys.stderr)
        return 2
    rows = run(args.mirror, args.confirm)
    if args.list:
        for row in rows:
            observed = f" [{row['observed']}]" if "observed" in row else ""
            said = "; ".join(f[:110] for f in row["findings"]) or "silent"
            print(f"{row['case']}{observed}: {said}")
        print()
    print(table(rows, args.confirm))
    return 0


if __name__ == "__main__":
    sys.exit(main())
