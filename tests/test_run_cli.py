"""`torchlint run` through the real command line (subprocesses), and the instrumentation's
promises checked in-process: installing and removing it leaves torch as it was, and the run does
not change what the script computes or raises."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
HAS_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")


def torchlint(*args: str, cwd: Path = ROOT, timeout: float = 300) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, "-m", "torchlint", *args], cwd=cwd, capture_output=True, text=True,
                          env=env, timeout=timeout)


def test_help_says_linting_never_executes_and_run_does():
    result = torchlint("--help")
    assert result.returncode == 0
    text = " ".join(result.stdout.split())
    assert "never imports torch and never executes" in text and "torchlint run SCRIPT" in text
    result = torchlint("run", "--help")
    assert result.returncode == 0
    assert "EXECUTES the script" in result.stdout and "--max-steps" in result.stdout


def test_usage_errors_exit_2(tmp_path):
    assert torchlint("run").returncode == 2
    missing = torchlint("run", str(tmp_path / "missing.py"))
    assert missing.returncode == 2 and "No such file" in missing.stderr
    assert torchlint("run", "--max-steps", "x", "train.py").returncode == 2
    assert torchlint("run", "-m", "no_such_module_at_all").returncode == 2


@pytest.mark.slow  # a torch script under `torchlint run`, end to end (CI and --runslow run it)
@needs_torch
def test_text_report_through_the_command_line():
    result = torchlint("run", "fixtures/run/tl002_bad.py")
    assert result.returncode == 1, result.stderr
    out = result.stdout
    assert "fixtures/run/tl002_bad.py:17:9: TL002 CONFIRMED" in out
    assert "evidence: " in out and "Gradient health" in out and "Memory per step" in out
    assert out.rstrip().endswith("Exit status 1.")


@pytest.mark.slow  # a torch script under `torchlint run`, end to end (CI and --runslow run it)
@needs_torch
def test_module_mode_passes_arguments_and_keeps_json_on_stdout(tmp_path):
    package = tmp_path / "trainer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "__main__.py").write_text(textwrap.dedent('''\
        import sys
        import torch
        import torch.nn as nn
        from .model import build

        print("argv", sys.argv[1:])
        model = build()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(int(sys.argv[2])):
            loss = model(torch.randn(4, 3)).sum()
            loss.backward()
            optimizer.step()
        '''))
    (package / "model.py").write_text("import torch.nn as nn\n\ndef build():\n    return nn.Linear(3, 1)\n")
    result = torchlint("run", "--output-format", "json", "--max-steps", "3", "-m", "trainer", "--steps", "9",
                       cwd=tmp_path)
    assert result.returncode == 1, result.stderr
    assert "argv ['--steps', '9']" in result.stderr  # the script's output went to stderr
    report = json.loads(result.stdout)
    assert report["outcome"]["kind"] == "stopped" and report["outcome"]["optimizer_steps"] == 3
    (finding,) = [f for f in report["findings"] if f["code"] == "TL002"]
    assert finding["status"] == "CONFIRMED" and finding["filename"].endswith("__main__.py")


# -- in-process: the instrumentation leaves torch and the script's results alone -------------------------

@needs_torch
def test_install_and_uninstall_leave_torch_as_it_was():
    import warnings

    import torch
    from torch.nn.modules import module as nn_module
    from torch.optim import optimizer as optim_module

    from torchlint.runtime.session import Options, Session

    before = (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks),
              len(optim_module._global_optimizer_pre_hooks), len(optim_module._global_optimizer_post_hooks),
              torch._C._len_torch_function_stack(), warnings.showwarning)
    session = Session(Options(), lambda filename: filename == __file__)
    session.install()
    model = torch.nn.Linear(2, 1)
    optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
    model(torch.randn(3, 2)).sum().backward()
    optimizer.step()
    session.uninstall()
    after = (len(nn_module._global_forward_pre_hooks), len(nn_module._global_forward_hooks),
             len(optim_module._global_optimizer_pre_hooks), len(optim_module._global_optimizer_post_hooks),
             torch._C._len_torch_function_stack(), warnings.showwarning)
    assert after == before
    assert not model.weight._backward_hooks  # the per-parameter hooks are gone


@needs_torch
def test_saved_tensor_hooks_keep_the_in_place_error_and_the_gradients():
    import torch

    from torchlint.runtime.session import Options, Session

    def modified_after_save():
        a = torch.arange(3.0, requires_grad=True)
        b = a.sigmoid()
        b.add_(1)
        b.sum().backward()

    def saved_input_modified():
        a = torch.arange(3.0, requires_grad=True)
        e = a.exp()
        b = e * a
        e.add_(1)
        b.sum().backward()

    def clean():
        a = torch.arange(3.0, requires_grad=True)
        (a.exp() * a).sum().backward()
        return a.grad

    with pytest.raises(RuntimeError) as plain:
        modified_after_save()
    with pytest.raises(RuntimeError) as plain_input:
        saved_input_modified()
    expected_grad = clean()
    session = Session(Options(), lambda filename: filename == __file__)
    session.install()
    try:
        with pytest.raises(RuntimeError) as instrumented:
            modified_after_save()
        with pytest.raises(RuntimeError) as instrumented_input:
            saved_input_modified()
        grad = clean()
    finally:
        session.uninstall()
    assert str(instrumented.value) == str(plain.value)
    # a saved input: torch names the node the tensor has when backward fails, we the one at save time
    prefix = str(plain_input.value).split(", which is")[0]
    assert str(instrumented_input.value).startswith(prefix) and "is at version 1; expected version 0" in \
        str(instrumented_input.value)
    assert torch.equal(grad, expected_grad)
