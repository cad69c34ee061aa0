"""`bench/shape_edits.py`: its seeds are read from a bare git snapshot at a pinned commit, each edit
changes exactly one line (of a .py file or of a notebook's cell), a snippet that is absent, not
unique or changes more than one line is reported, an absent repository is skipped, and the lint
step compares findings before and after. A tiny synthetic repository in a temp dir: no network,
no torch."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

MODEL = """import torch.nn as nn


class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1 = nn.Conv2d(1, 32, 3, 1)
        self.fc1 = nn.Linear(21632, 10)

    def forward(self, x):
        x = self.conv1(x)
        x = x.view(x.size(0), -1)
        x = x.view(x.size(0), -1)
        return self.fc1(x)
"""

NOTEBOOK = {
    "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": ["# TinyVGG\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["import torch.nn as nn\n", "layer = nn.Conv2d(in_channels=1, out_channels=10, kernel_size=3)\n"]},
        {"cell_type": "code", "metadata": {}, "outputs": [], "execution_count": None,
         "source": ["head = nn.Linear(in_features=10*13*13, out_features=10)\n"]},
    ],
    "metadata": {}, "nbformat": 4, "nbformat_minor": 5,
}


@pytest.fixture(scope="module")
def bench():
    spec = importlib.util.spec_from_file_location("bench_shape_edits", ROOT / "bench" / "shape_edits.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def mirror(tmp_path_factory):
    """owner+name/repo as the fetch tool lays it out: a bare git directory."""
    root = tmp_path_factory.mktemp("mirror")
    work = root / "work"
    (work / "models").mkdir(parents=True)
    (work / "models" / "net.py").write_text(MODEL)
    (work / "nb.ipynb").write_text(json.dumps(NOTEBOOK, indent=1))
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-c", "commit.gpgsign=false"]
    subprocess.run(git + ["init", "-q", str(work)], check=True)
    subprocess.run(git + ["-C", str(work), "add", "."], check=True)
    subprocess.run(git + ["-C", str(work), "commit", "-qm", "seed"], check=True)
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(root / "someone+proj" / "repo")], check=True)
    commit = subprocess.run(["git", "-C", str(work), "rev-parse", "HEAD"], capture_output=True, text=True,
                            check=True).stdout.strip()
    return root, commit


def test_edits_one_line_of_a_file_or_a_cell(bench):
    edited, where = bench.apply_edit(MODEL, "net.py", "nn.Conv2d(1, 32, 3, 1)", "nn.Conv2d(1, 32, 5, 1)")
    assert where == (None, 7) and "nn.Conv2d(1, 32, 5, 1)" in edited
    edited, where = bench.apply_edit(MODEL, "net.py", "x = x.view(x.size(0), -1)", "x = x.view(64, -1)", nth=2)
    assert where == (None, 13)
    text = bench.normalised(json.dumps(NOTEBOOK), "nb.ipynb")
    edited, where = bench.apply_edit(text, "nb.ipynb", "10*13*13", "10*16*16")
    assert where == (3, 1)  # cell 3 counted over all cells, as torchlint reports notebook findings
    assert "10*16*16" in json.loads(edited)["cells"][2]["source"][0]
    with pytest.raises(bench.EditError, match="found 2 times"):
        bench.apply_edit(MODEL, "net.py", "x = x.view(x.size(0), -1)", "x = x.view(64, -1)")
    with pytest.raises(bench.EditError, match="found 0 times"):
        bench.apply_edit(MODEL, "net.py", "nn.MaxPool2d(2)", "nn.Identity()")
    with pytest.raises(bench.EditError, match="changes"):
        bench.apply_edit(MODEL, "net.py", "nn.Linear(21632, 10)", "nn.Linear(\n21632, 10)")


def test_runnable_code_joins_cells_and_masks_magics(bench):
    notebook = dict(NOTEBOOK, cells=NOTEBOOK["cells"] + [
        {"cell_type": "code", "metadata": {}, "outputs": [], "source": ["!pip install torchinfo\n", "%matplotlib inline"]}])
    code, where = bench.runnable_code(json.dumps(notebook), "nb.ipynb")
    lines = code.splitlines()
    assert lines[where.index((4, 1))] == "pass" and lines[where.index((3, 1))].startswith("head = ")
    assert bench.plan(code, ()) == {1: "yes"}  # only the import runs: the rest are calls


def test_run_reads_the_snapshot_skips_absent_repositories_and_lints(bench, mirror, monkeypatch):
    root, commit = mirror
    repo = ("someone/proj", commit)
    monkeypatch.setattr(bench, "FILES", {
        "net": bench.File(*repo, "models/net.py", mode="defs"),
        "nb": bench.File(*repo, "nb.ipynb", mode="defs"),
        "gone": bench.File("nobody/absent", commit, "main.py"),
    })
    monkeypatch.setattr(bench, "SEEDS", [
        bench.Seed("net", "kernel", "nn.Conv2d(1, 32, 3, 1)", "nn.Conv2d(1, 32, 5, 1)"),
        bench.Seed("net", "view", "x = x.view(x.size(0), -1)", "x = x.view(64, -1)", nth=1),
        bench.Seed("net", "view", "x = x.view(x.size(0), -1)", "x = x.view(64, -1)"),  # not unique
        bench.Seed("nb", "channels", "in_features=10*13*13", "in_features=10*16*16"),
        bench.Seed("gone", "pooling", "nn.MaxPool2d(2)", "nn.Identity()"),
    ])
    result = bench.run(root, do_confirm=False)
    assert result["skipped_repos"] == ["nobody/absent"]
    assert [b["file"] for b in result["broken_seeds"]] == ["net"]
    assert [(r["kind"], r["cell"], r["line"]) for r in result["seeds"]] == [
        ("kernel", None, 7), ("view", None, 12), ("channels", 3, 1)]
    assert set(result["originals"]) == {"net", "nb"}
    for row in result["seeds"]:
        assert row["found"] == bool(row["findings"])
        assert all(f["code"].startswith("TL30") for f in row["findings"])
    table = bench.table(result, confirmed_only=False)
    assert "| all | 3 |" in table and "nobody/absent" in table


def test_every_stored_seed_names_a_known_file_and_kind(bench):
    assert len(bench.SEEDS) >= 60
    assert {seed.kind for seed in bench.SEEDS} == set(bench.KINDS)
    assert {bench.FILES[seed.file].repo for seed in bench.SEEDS} >= {"pytorch/examples", "yunjey/pytorch-tutorial"}
    for seed in bench.SEEDS:
        assert seed.old != seed.new and seed.old.count("\n") == seed.new.count("\n")
        assert len(bench.FILES[seed.file].commit) == 40


def test_lint_mode_never_imports_torch(mirror):
    root, _ = mirror
    code = ("import runpy, sys\n"
            f"sys.argv = ['shape_edits.py', '--mirror', {str(root)!r}]\n"
            "try:\n    runpy.run_path('bench/shape_edits.py', run_name='__main__')\n"
            "except SystemExit:\n    pass\n"
            "print('torch imported' if 'torch' in sys.modules else 'no torch')\n")
    done = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    assert done.stdout.strip().endswith("no torch")
    assert "Repositories absent" in done.stdout and "pytorch/examples" in done.stdout


def test_found_counts_only_new_shape_findings_and_where_they_are(bench, mirror, monkeypatch):
    root, commit = mirror
    monkeypatch.setattr(bench, "FILES", {"net": bench.File("someone/proj", commit, "models/net.py", mode="defs")})
    monkeypatch.setattr(bench, "SEEDS", [
        bench.Seed("net", "kernel", "nn.Conv2d(1, 32, 3, 1)", "nn.Conv2d(1, 32, 5, 1)"),
        bench.Seed("net", "channels", "nn.Linear(21632, 10)", "nn.Linear(2163, 10)"),
        bench.Seed("net", "pooling", "return self.fc1(x)", "return self.fc1(x) "),
    ])

    def fake(path, text):  # a TL301 where the edit shows; a TL302 on the original and every mutant
        findings = [{"code": "TL302", "line": 1, "cell": None, "message": "on the original too"}]
        lines = text.splitlines()
        if "nn.Conv2d(1, 32, 5, 1)" in text:
            findings.append({"code": "TL301", "line": 8, "cell": None, "message": "fc1 gets 18432"})
        if "2163," in text:
            findings.append({"code": "TL301", "line": lines.index("        x = self.conv1(x)") + 1, "cell": None,
                             "message": "at the conv, far from the edit"})
        return findings

    monkeypatch.setattr(bench, "shape_findings", fake)
    result = bench.run(root, do_confirm=False)
    rows = {row["kind"]: row for row in result["seeds"]}
    assert rows["kernel"]["found"] and rows["kernel"]["found_near"]  # line 8, next to the edit (line 7)
    assert rows["channels"]["found"] and not rows["channels"]["found_near"]  # line 11, three below the edit
    assert not rows["pooling"]["found"]  # the original's finding is not counted
    assert [f["code"] for f in result["originals"]["net"]["findings"]] == ["TL302"]


def _pytea_harness():
    spec = importlib.util.spec_from_file_location("pytea_units", ROOT / "bench" / "pytea_units.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_pytea_harness_reads_the_unit_tests_from_a_snapshot_and_counts_fails_and_passes(tmp_path):
    """A synthetic snapshot holding PyTea's layout at the pinned commit: the harness lints each case
    and counts flagged fail cases and silent pass cases (lint mode: no torch)."""
    harness = _pytea_harness()
    work = tmp_path / "work"
    folder = work / harness.FOLDER
    (folder / "fails").mkdir(parents=True)
    (folder / "passes").mkdir(parents=True)
    (folder / "fails" / "fail_flatten01.py").write_text(
        "import torch\na = torch.rand(2, 3, 4)\nb = torch.flatten(a, 3)\n")
    (folder / "passes" / "pass_flatten01.py").write_text(
        "import torch\na = torch.rand(2, 3, 4)\nb = torch.flatten(a, 1)\n")
    git = ["git", "-C", str(work), "-c", "user.email=t@t", "-c", "user.name=t"]
    subprocess.run(git + ["init", "-q"], check=True)
    subprocess.run(git + ["add", "-A"], check=True)
    subprocess.run(git + ["commit", "-qm", "units"], check=True)
    commit = subprocess.run(git + ["rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    mirror = tmp_path / "mirror"
    subprocess.run(["git", "clone", "-q", "--bare", str(work), str(mirror / harness.PYTEA / "repo")], check=True)
    harness.COMMIT = commit
    rows = harness.run(mirror, confirm=False)
    assert {r["case"]: bool(r["findings"]) for r in rows} == {
        "fails/fail_flatten01.py": True, "passes/pass_flatten01.py": False}
    assert "found: 1 of 1" in harness.table(rows, False)
