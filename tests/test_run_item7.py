"""Issue 24, item 7: real scripts through `torchlint run` as a subprocess.

- two `x.data[0]` in one statement: the error that ended the run confirms the one it was raised
  at (its position in the traceback), the other has no evidence of its own;
- TL003 is reported at, and its evidence names, the line that keeps the losses;
- one validation graph has one byte count: the TL106 evidence, the TL003 evidence and the memory
  samples count the same storages (parameters, which the model holds anyway, in none of them);
- the script's error is printed once;
- `[*]` marks only a fix `--fix` applies (an unsafe one with `--unsafe-fixes`), `--statistics`
  included.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
# each test runs a torch script under `torchlint run`, end to end (CI and --runslow run them)
slow = pytest.mark.slow


def torchlint(*args: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    env.pop("TORCHLINT_OUTPUT_FORMAT", None)
    return subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


def script(tmp_path: Path, text: str, name: str = "train.py") -> Path:
    (tmp_path / "pyproject.toml").write_text("")
    path = tmp_path / name
    path.write_text(textwrap.dedent(text))
    return path


def run_json(tmp_path: Path, path: Path, *options: str) -> dict:
    result = torchlint("run", "--output-format", "json", *options, path.name, cwd=tmp_path)
    assert result.returncode in (0, 1), result.stdout + result.stderr
    return json.loads(result.stdout)


def findings(report: dict, code: str):
    return sorted((f for f in report["findings"] if f["code"] == code),
                  key=lambda f: (f["location"]["row"], f["location"]["column"] or 0))


TRAIN_HEAD = '''\
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.MSELoss()
    for step in range(3):
        optimizer.zero_grad()
        out = model(torch.randn(4, 3))
        loss = criterion(out, torch.randn(4, 1))
        acc = (out > 0).float().mean()
        loss.backward()
        optimizer.step()
'''


# -- (a) two TL201 in one statement -------------------------------------------------------------------

@slow
@needs_torch
@pytest.mark.parametrize("tail, raised, unran", [
    # the first one raises: the second never ran
    ("        print(loss.data[0], acc.data[0])\n", (15, 11), (15, 25)),
    # one statement over two lines: the second line is the same statement, not a second sighting
    ("        print('loss', loss.data[0],\n              'acc', acc.data[0])\n", (15, 19), (16, 18)),
    # the one that raised is not the first on the line
    ("        print(loss.data[0] if step > 5 else acc.data[0])\n", (15, 41), (15, 11)),
], ids=["same-line", "two-lines", "second-raises"])
def test_each_zero_dim_index_of_a_statement_gets_its_own_status(tmp_path, tail, raised, unran):
    path = script(tmp_path, TRAIN_HEAD + tail)
    report = run_json(tmp_path, path)
    by_place = {(f["location"]["row"], f["location"]["column"]): f for f in findings(report, "TL201")}
    assert set(by_place) == {raised, unran}, by_place
    assert by_place[raised]["status"] == "CONFIRMED"
    assert by_place[raised]["evidence"].startswith("IndexError: invalid index of a 0-dim tensor")
    assert by_place[unran]["status"] == "NO EVIDENCE"
    assert "IndexError" not in by_place[unran]["evidence"].split("(")[0]  # not the other one's evidence
    assert "raised (IndexError) before it completed" in by_place[unran]["evidence"]
    if raised == (15, 41):  # the confirmed one shows the value of the tensor that was indexed: acc's
        acc = re.search(r"value ([0-9.]+)\)", by_place[raised]["evidence"]).group(1)
        assert float(acc) in (0.0, 0.25, 0.5, 0.75, 1.0)


# -- (b) TL003 names the line that keeps the losses ---------------------------------------------------

@slow
@needs_torch
def test_tl003_is_reported_at_the_line_that_keeps_the_losses(tmp_path):
    path = script(tmp_path, '''\
        import torch
        import torch.nn as nn


        class Trainer:
            def __init__(self):
                self.model = nn.Linear(3, 1)
                self.optimizer = torch.optim.SGD(self.model.parameters(), lr=0.1)
                self.history = {"loss": []}

            def step(self):
                self.optimizer.zero_grad()
                loss = (self.model(torch.randn(4, 3)) - torch.randn(4, 1)).pow(2).mean()
                loss.backward()
                self.optimizer.step()
                self.log(loss)

            def log(self, loss):
                self.history["loss"].append(loss)


        trainer = Trainer()
        for _ in range(6):
            trainer.step()
        ''')
    report = run_json(tmp_path, path)
    (finding,) = findings(report, "TL003")
    assert finding["location"]["row"] == 19  # `self.history["loss"].append(loss)`, not the step (15)
    assert "in `self.history` (kept by line 19)" in finding["evidence"]
    assert "backward() called on them at line 14" in finding["evidence"]  # not "created at" the backward


@slow
@needs_torch
def test_tl003_evidence_of_a_static_finding_names_the_keeping_line(tmp_path):
    path = script(tmp_path, '''\
        import torch
        import torch.nn as nn

        model = nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        criterion = nn.MSELoss()
        total = 0
        losses = []
        for step in range(6):
            optimizer.zero_grad()
            loss = criterion(model(torch.randn(4, 3)), torch.randn(4, 1))
            loss.backward()
            optimizer.step()
            total += loss
            losses.append(loss)
        print(total, len(losses))
        ''')
    report = run_json(tmp_path, path)
    by_row = {f["location"]["row"]: f for f in findings(report, "TL003")}
    assert by_row[14]["status"] == "CONFIRMED" and by_row[15]["status"] == "CONFIRMED", by_row
    assert "`total` (added to at line 14)" in by_row[14]["evidence"]
    assert "in `losses` (kept by line 15)" in by_row[15]["evidence"]
    assert "(created at line 11)" in by_row[15]["evidence"]  # the criterion's line, not the backward's (12)
    assert "line 12" not in by_row[14]["evidence"] + by_row[15]["evidence"]


# -- (c) one validation graph, one byte count ----------------------------------------------------------

VALIDATION = '''\
    import torch
    import torch.nn as nn

    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(32, 128), nn.ReLU(), nn.Linear(128, 4))
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.CrossEntropyLoss()
    kept = []
    for step in range(6):
        model.train()
        optimizer.zero_grad()
        loss = criterion(model(torch.randn(64, 32)), torch.randint(0, 4, (64,)))
        loss.backward()
        optimizer.step()
        model.eval()
        xv, yv = torch.randn(64, 32), torch.randint(0, 4, (64,))
        {keep}
    print(len(kept))
'''


def _kib(text: str, before: str) -> float:
    return float(re.search(r"([0-9.]+) KiB " + re.escape(before), text).group(1))


def _increments(report: dict) -> set:
    saved = [s["saved_bytes"] for s in report["memory"]["samples"]]
    return {b - a for a, b in zip(saved[1:], saved[2:])}  # from step 2 on: one validation graph a step


@slow
@needs_torch
def test_a_validation_graph_has_the_same_size_in_tl106_and_in_the_memory_samples(tmp_path):
    path = script(tmp_path, VALIDATION.replace("{keep}", "kept.append(model(xv))"))
    report = run_json(tmp_path, path, "--saved-tensors-every", "1")
    (tl106,) = findings(report, "TL106")
    per_call = _kib(tl106["evidence"], "of tensors saved for backward per call")
    # x (64x32) and the ReLU's output (64x128, saved by ReLU and by the second Linear: once); the
    # weights (the second Linear saves its weight too) belong to the model, not to the graph
    assert per_call == (64 * 32 + 64 * 128) * 4 / 1024
    (step,) = _increments(report)
    assert step / 1024 == per_call


@slow
@needs_torch
def test_retained_validation_losses_have_the_size_the_memory_samples_grow_by(tmp_path):
    path = script(tmp_path, VALIDATION.replace("{keep}", "kept.append(criterion(model(xv), yv))"))
    report = run_json(tmp_path, path, "--saved-tensors-every", "1")
    (step,) = _increments(report)
    (tl003,) = findings(report, "TL003")
    count = int(re.match(r"(\d+) loss tensors", tl003["evidence"]).group(1))
    assert _kib(tl003["evidence"], "of saved tensors retained") == round(count * step / 1024, 1)
    (tl106,) = findings(report, "TL106")  # the model's call alone: the loss's part aside
    per_call = (64 * 32 + 64 * 128) * 4
    assert _kib(tl106["evidence"], "of tensors saved for backward per call") == per_call / 1024
    # the loss saves its log-softmax (64x4 floats), the target (64 int64) and a 0-dim total weight
    assert per_call + (64 * 4) * 4 + 64 * 8 <= step <= per_call + (64 * 4) * 4 + 64 * 8 + 16


# -- (d) the script's error is printed once --------------------------------------------------------------

@slow
@needs_torch
def test_the_error_of_a_failing_script_is_printed_once(tmp_path):
    path = script(tmp_path, '''\
        import torch


        def load():
            raise ValueError("bad config: lr missing")


        x = torch.ones(2)
        load()
        ''')
    result = torchlint("run", path.name, cwd=tmp_path)
    assert result.returncode == 2
    both = result.stdout + result.stderr
    assert both.count("ValueError: bad config: lr missing") == 1, both  # the traceback's last line
    assert "bad config" not in result.stdout.splitlines()[0]  # the header line does not repeat it
    assert 'File "train.py", line 5, in load' in result.stdout
    json_run = torchlint("run", "--output-format", "json", path.name, cwd=tmp_path)
    assert json_run.returncode == 2 and "bad config" not in json_run.stderr
    assert json.loads(json_run.stdout)["outcome"]["traceback"].count("ValueError: bad config: lr missing") == 1


@slow
@needs_torch
def test_a_known_rules_error_is_printed_once_and_its_evidence_refers_to_it(tmp_path):
    path = script(tmp_path, '''\
        import torch

        x = torch.randn(4, 6).t()
        y = x.view(24)
        ''')
    result = torchlint("run", path.name, cwd=tmp_path)
    assert result.returncode == 1, result.stdout + result.stderr
    both = result.stdout + result.stderr
    assert both.count("view size is not compatible") == 1, both
    assert "RuntimeError: view size is not compatible" in result.stdout
    (evidence,) = [line for line in result.stdout.splitlines() if line.strip().startswith("evidence:")]
    assert "strides (1, 6) (not contiguous): the error in the traceback above" in evidence
    report = run_json(tmp_path, path)  # the machine formats keep the evidence whole
    (tl004,) = findings(report, "TL004")
    assert "view size is not compatible" in tl004["evidence"]


@slow
@needs_torch
def test_the_message_of_sys_exit_is_printed_once(tmp_path):
    path = script(tmp_path, '''\
        import sys
        import torch

        x = torch.ones(2)
        sys.exit("fatal: no data")
        ''')
    result = torchlint("run", path.name, cwd=tmp_path)
    assert result.returncode == 2
    assert (result.stdout + result.stderr).count("fatal: no data") == 1


# -- (e) `[*]` only where --fix applies the fix -----------------------------------------------------------

MARKED = '''\
    import torch
    import torch.nn as nn

    model = nn.Linear(3, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    criterion = nn.MSELoss()
    total = 0
    for step in range(4):
        optimizer.zero_grad()
        loss = criterion(model(torch.randn(4, 3)), torch.randn(4, 1))
        loss.backward()
        optimizer.step()
        total += loss
    print(total.data[0])
'''


def _marked_codes(text: str) -> dict:
    """code -> whether its line(s) carry `[*]`, from the concise report and from --statistics."""
    lines = {}
    for line in text.splitlines():
        found = re.match(r"train\.py:\d+:\d+: (TL\d{3})( \[\*\])? ", line)
        if found:
            lines[found.group(1)] = bool(found.group(2))
        found = re.match(r"\s*\d+\t(TL\d{3})\t(\[\*\]|   ) ", line)
        if found:
            lines["statistics " + found.group(1)] = found.group(2) == "[*]"
    return lines


@slow
@needs_torch
def test_the_fix_marker_means_fix_applies_it(tmp_path):
    path = script(tmp_path, MARKED)
    # TL201 `total.data[0]` -> `total.item()` is a safe fix, TL003 `total += loss.item()` an unsafe one
    # (--statistics prints its table only, as ruff's: the findings come from a second run)
    plain = torchlint(path.name, cwd=tmp_path)
    plain_statistics = torchlint("--statistics", path.name, cwd=tmp_path)
    assert _marked_codes(plain.stdout + plain_statistics.stdout) == {
        "TL201": True, "TL003": False, "statistics TL201": True, "statistics TL003": False}, plain.stdout
    assert "[*] 1 fixable with the --fix option." in plain.stdout
    assert "1 hidden fix can be enabled with the `--unsafe-fixes` option." in plain.stdout
    unsafe = torchlint("--unsafe-fixes", path.name, cwd=tmp_path)
    unsafe_statistics = torchlint("--statistics", "--unsafe-fixes", path.name, cwd=tmp_path)
    assert _marked_codes(unsafe.stdout + unsafe_statistics.stdout) == {
        "TL201": True, "TL003": True, "statistics TL201": True, "statistics TL003": True}, unsafe.stdout
    assert "[*] 2 fixable with the --fix option." in unsafe.stdout and "hidden" not in unsafe.stdout

    # what was marked is what --fix fixes, and only that
    fixed = torchlint("--fix", path.name, cwd=tmp_path)
    assert "total.item()" in path.read_text() and "total += loss\n" in path.read_text()
    assert _marked_codes(fixed.stdout) == {"TL003": False}, fixed.stdout
    fixed = torchlint("--fix", "--unsafe-fixes", path.name, cwd=tmp_path)
    assert "total += loss.item()" in path.read_text()
    assert _marked_codes(fixed.stdout) == {}, fixed.stdout

    # `torchlint run` reports statuses, not fixes: no marker, whatever the fix
    path.write_text(textwrap.dedent(MARKED))
    run = torchlint("run", path.name, cwd=tmp_path)
    assert run.returncode == 1, run.stdout + run.stderr
    # (TL003's severity is the run's measure: backward() freed the sum's saved tensors, only nodes grow)
    assert "TL003 CONFIRMED note:" in run.stdout and "TL201 CONFIRMED error:" in run.stdout
    assert "[*]" not in run.stdout
