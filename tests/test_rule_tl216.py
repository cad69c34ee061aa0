"""TL216 (calls today's torch rejects): the signature table, its lazy load, its check against the
installed torch, the rule's messages and silences, and `torchlint run`'s TypeError mapping."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from torchlint.analysis.api_changes import signatures as table
from torchlint.engine import lint_source

ROOT = Path(__file__).resolve().parent.parent
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _tl216(source: str):
    return [f for f in lint_source(textwrap.dedent(source), "t.py", select=["TL216"]) if f.code == "TL216"]


def test_parse_kinds():
    sig = table.parse("(a, b=1, /, c=None, *args, d, e=…, **kwargs)")
    assert [p.name for p in sig.positional_only] == ["a", "b"]
    assert [p.name for p in sig.positional] == ["a", "b", "c"]
    assert [p.name for p in sig.keyword_only] == ["d", "e"]
    assert sig.keywords == ("c", "d", "e")  # a positional-only name is no keyword
    assert (sig.var_positional, sig.var_keyword) == ("args", "kwargs")
    assert [p.name for p in sig.required_positional] == ["a"]


def test_table_records_its_torch_and_the_issue_callables():
    data = table.load()
    assert data["torch"].startswith("2.")
    for name, keyword in [("torch.optim.lr_scheduler.ReduceLROnPlateau", "patience"),
                          ("torch.utils.data.DataLoader", "num_workers"), ("torch.nn.LSTM", "num_layers"),
                          ("torch.nn.functional.interpolate", "align_corners"), ("torch.load", "weights_only"),
                          ("torch.nn.utils.clip_grad_norm_", "norm_type"), ("torch.jit.trace", "example_inputs"),
                          ("torch.amp.GradScaler", "init_scale")]:
        sig = table.lookup(name)
        assert sig is not None and keyword in sig.keywords, name
    assert "verbose" not in table.lookup("torch.optim.lr_scheduler.StepLR").keywords
    assert "o" in table.lookup("torch.nn.GRU").flags  # read from the overload


def test_table_is_not_read_for_a_file_without_torch_calls():
    code = textwrap.dedent("""\
        from torchlint.engine import lint_source
        from torchlint.analysis.api_changes import signatures
        lint_source("import os\\nos.path.join('a', 'b')\\n", "a.py")
        lint_source("import torch\\nx = 1\\n", "b.py")
        assert signatures.load.cache_info().currsize == 0
        lint_source("import torch\\nloader = torch.utils.data.DataLoader(ds, num_worker=2)\\n", "c.py")
        assert signatures.load.cache_info().currsize == 1
        """)
    result = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True)
    assert result.returncode == 0, result.stderr


def test_differences_name_the_changed_entries():
    from torchlint.analysis.api_changes.make_signatures import differences

    stored = json.loads(table.TABLE.read_text(encoding="utf-8"))
    changed = json.loads(json.dumps(stored))
    key = "torch.optim.lr_scheduler.ReduceLROnPlateau"
    changed["entries"][key][0] = changed["entries"][key][0].replace("eps=1e-08", "eps=1e-08, verbose=False")
    found = differences(stored, changed)
    assert len(found) == 1 and found[0].startswith(key)
    assert differences(stored, stored) == []


def test_messages():
    found = _tl216("""\
        import torch
        from torch.optim.lr_scheduler import ReduceLROnPlateau
        opt = torch.optim.AdamW([], lr=1e-3, momentum=0.9)
        sched = ReduceLROnPlateau(opt, 'min', patience=3, verbose=True)
        loader = torch.utils.data.DataLoader([], num_worker=2)
        traced = torch.jit.trace()
        """)
    messages = [f.message for f in found]
    assert len(messages) == 4, messages
    assert "`momentum` is Muon's, RMSprop's and SGD's, not a parameter of `AdamW`" in messages[0]
    assert "betas, eps, weight_decay, amsgrad" in messages[0]
    assert "removed in PyTorch 2.7 (deprecated in PyTorch 2.2" in messages[1]
    assert "remove `verbose=`; log `scheduler.get_last_lr()` instead" in messages[1]
    assert "did you mean `num_workers=`?" in messages[2] and found[2].fix is not None
    assert "without its required argument `func`" in messages[3]


def test_silent_on_unresolved_and_guarded_calls():
    assert not _tl216("""\
        import torch
        from somewhere import DataLoader
        DataLoader([], num_worker=2)
        Adam = torch.optim.Adam
        Adam([], momentum=0.9)
        def make(**cfg):
            return torch.optim.SGD([], **cfg)
        try:
            torch.optim.lr_scheduler.StepLR(None, 3, verbose=True)
        except Exception:
            pass
        """)


def test_run_maps_a_binding_typeerror_of_torch_only(tmp_path):
    from torchlint.runtime import signatures

    assert signatures.rejected_call("ReduceLROnPlateau.__init__() got an unexpected keyword argument 'verbose'") \
        == ("ReduceLROnPlateau", "verbose")
    assert signatures.rejected_call("trace() missing 1 required positional argument: 'func'") == ("trace", "")
    assert signatures.rejected_call("ReLU.__init__() takes from 1 to 2 positional arguments but 3 were given") \
        == ("ReLU", "")
    assert "removed in PyTorch 2.7" in signatures.rejected_call_advice("ReduceLROnPlateau", "verbose")
    assert "did you mean `num_workers=`" in signatures.rejected_call_advice("DataLoader", "num_worker")
    assert signatures.rejected_call_advice("train", "verbose") is None
    assert signatures.exception_family("TypeError", "DataLoader.__init__() got an unexpected keyword "
                                       "argument 'num_worker'") == "TL216"
    assert signatures.exception_family("TypeError", "Tensor.backward() got an unexpected keyword argument "
                                       "'retain_variables'") == "TL203"


@pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")
def test_run_reports_tl216_at_the_users_line(tmp_path):
    (tmp_path / "lstm.py").write_text(textwrap.dedent("""\
        import torch.nn as nn


        def build(width):
            return nn.LSTM(width, 16,
                           num_layer=2)


        lstm = build(8)
        """))
    (tmp_path / "own.py").write_text(textwrap.dedent("""\
        import torch


        def train(model):
            return model


        train(torch.nn.Linear(2, 2), verbose=True)
        """))
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    run = [sys.executable, "-m", "torchlint", "run"]
    result = subprocess.run(run + ["lstm.py"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert "lstm.py:6:20: TL216 CONFIRMED" in result.stdout, result.stdout + result.stderr
    assert "internal error" not in result.stdout + result.stderr
    result = subprocess.run(run + ["own.py"], cwd=tmp_path, capture_output=True, text=True, env=env, timeout=300)
    assert "TL216" not in result.stdout and "the script failed" in result.stdout, result.stdout + result.stderr
