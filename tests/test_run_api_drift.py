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
