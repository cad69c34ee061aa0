"""`torchlint run`: an exception a removed API of the API-change table raises is TL209 at the
user's line (the table's measured error text, not a pattern spelled out in the runtime)."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_removed_api_error_is_tl209_at_the_users_line(tmp_path):
    script = tmp_path / "drift.py"
    script.write_text(textwrap.dedent("""\
        import torch
        from torch.utils.data import DataLoader, TensorDataset

        loader = DataLoader(TensorDataset(torch.randn(8, 2)), batch_size=4)
        batch = iter(loader).next()
        """))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-m", "torchlint", "run", "drift.py"], cwd=tmp_path,
                            capture_output=True, text=True, env=env, timeout=300)
    assert "drift.py:5:9: TL209 CONFIRMED" in result.stdout, result.stdout + result.stderr
    assert "object has no attribute 'next'" in result.stdout
    assert "instrumentation error" not in result.stdout + result.stderr


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="torch is not installed")
def test_deprecated_api_warning_is_tl210_at_the_users_line(tmp_path):
    """The warning is raised in the user's line (torch.range, torch.cuda.amp.autocast) or inside
    torch's own file (weight_norm warns from torch/nn/utils/weight_norm.py): either way the run
    reports it at the user's frame, CONFIRMED for the static finding there; a call the linter
    cannot resolve (getattr) is the run's own finding."""
    script = tmp_path / "drift.py"
    script.write_text(textwrap.dedent("""\
        import torch


        def build():
            return torch.nn.utils.weight_norm(torch.nn.Linear(4, 4))


        r = torch.range(0, 4)
        layer = build()
        ctx = torch.cuda.amp.autocast(enabled=False)
        m = getattr(torch, "chain_matmul")(torch.eye(2), torch.eye(2))
        """))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-m", "torchlint", "run", "drift.py"], cwd=tmp_path,
                            capture_output=True, text=True, env=env, timeout=300)
    out = result.stdout
    assert "drift.py:5:12: TL210 CONFIRMED" in out, out + result.stderr
    assert "drift.py:8:5: TL210 CONFIRMED" in out
    assert "drift.py:10:7: TL210 CONFIRMED" in out
    assert "drift.py:11: TL210 `torch.chain_matmul` is deprecated since 1.9" in out and "(found by the run)" in out
    assert "evidence: UserWarning: torch.range is deprecated" in out
    assert "weight_norm.py" not in out.split("Gradient health")[0]  # the user's frame, not torch's
    assert "instrumentation error" not in out + result.stderr


def test_every_warns_entry_maps_to_itself():
    """Each WARNS entry's measured warning maps to that entry (the functorch entries share a first
    sentence), TL208/TL213's own texts keep their codes, and other warnings map to nothing."""
    from torchlint.analysis.api_changes import WARNS, removed
    from torchlint.runtime import signatures

    entries = [c for c in removed.CHANGES if c.outcome == WARNS]
    assert len(entries) >= 20
    for change in entries:
        assert signatures.deprecated_api(change.error_type, change.error_text + " More advice.") is change
        code, message = signatures.run_warning(change.error_type, change.error_text)
        assert code == "TL210" and change.api in message
        assert signatures.deprecated_api("RuntimeWarning", change.error_text) is None
    assert signatures.run_warning("UserWarning", "torch.utils.checkpoint: the use_reentrant parameter should be "
                                  "passed explicitly.")[0] == "TL213"
    assert signatures.run_warning("FutureWarning", "`nn.init.xavier_uniform` is now deprecated in favor of "
                                  "`nn.init.xavier_uniform_`.")[0] == "TL208"
    assert signatures.run_warning("UserWarning", "something is deprecated") is None
