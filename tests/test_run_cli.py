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


# -- the run never changes how the program behaves (issue 24) ------------------------------------------------

def _script(tmp_path: Path, name: str, source: str) -> Path:
    path = tmp_path / name
    path.write_text(textwrap.dedent(source))
    return path


@needs_torch
def test_ctrl_c_mid_run_stops_it_with_exit_130_and_the_report_within_a_second(tmp_path):
    import signal
    import threading
    import time

    script = _script(tmp_path, "forever.py", '''\
        import torch
        import torch.nn as nn

        model = nn.LSTM(4, 8)
        head = nn.Linear(8, 1)
        optimizer = torch.optim.SGD(list(model.parameters()) + list(head.parameters()), lr=0.01)
        step = 0
        while True:
            out, _ = model(torch.randn(5, 3, 4))
            loss = head(out).pow(2).mean()
            optimizer.zero_grad()
            loss.backward()
            optimizer.step()
            step += 1
            if step == 3:
                print("training", flush=True)
        ''')
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    for attempt in range(3):  # the interrupt lands at a different point of the loop each time
        process = subprocess.Popen([sys.executable, "-m", "torchlint", "run", "--max-steps", "0", str(script)],
                                   cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
        lines: list = []
        reader = threading.Thread(target=lambda: lines.extend(iter(process.stdout.readline, "")), daemon=True)
        reader.start()
        deadline = time.monotonic() + 120
        while not any("training" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(0.05 + 0.1 * attempt)
        sent = time.monotonic()
        process.send_signal(signal.SIGINT)
        while not any("Exit status" in line for line in lines) and time.monotonic() - sent < 10:
            time.sleep(0.01)
        took = time.monotonic() - sent
        try:
            code = process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            process.kill()
            raise AssertionError("Ctrl-C was lost: the script kept running")
        stderr = process.stderr.read()
        assert code == 130, stderr[-2000:]
        assert took < 1.0, f"the report came {took:.2f} s after SIGINT"
        text = "".join(lines)
        assert "interrupted (Ctrl-C)" in text and "Exit status 130." in text
        assert "Exception ignored" not in stderr


@needs_torch
def test_a_bare_except_that_catches_the_stop_is_stopped_and_reported(tmp_path):
    script = _script(tmp_path, "bare.py", '''\
        import torch
        import torch.nn as nn

        model = nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for batch in range(500):
            try:
                optimizer.zero_grad()
                loss = model(torch.randn(4, 3)).pow(2).mean()
                loss.backward()
                optimizer.step()
            except:  # noqa: E722
                print(f"batch {batch} failed, skipping")
        print("ran all batches")
        ''')
    result = torchlint("run", "--max-steps", "3", "--output-format", "json", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    assert "ran all batches" not in result.stderr and result.stderr.count("failed, skipping") <= 4
    report = json.loads(result.stdout)
    assert report["outcome"]["kind"] == "stopped" and report["outcome"]["optimizer_steps"] == 3
    assert "the script caught torchlint's stop 3 times" in report["outcome"]["reason"]
    assert "ended the process" in report["outcome"]["reason"]

    once = _script(tmp_path, "once.py", '''\
        import torch
        import torch.nn as nn

        model = nn.Linear(3, 1)
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        try:
            for batch in range(50):
                optimizer.zero_grad()
                model(torch.randn(4, 3)).pow(2).mean().backward()
                optimizer.step()
        except BaseException:
            print("interrupted; saving")
        ''')
    result = torchlint("run", "--max-steps", "2", str(once), cwd=tmp_path)
    assert result.returncode == 0 and "interrupted; saving" in result.stdout, result.stderr[-2000:]
    assert "stopped after 2 optimizer steps (--max-steps 2); the script caught torchlint's stop 1 time" in \
        result.stdout


@needs_torch
def test_a_project_on_pythonpath_is_linted_first_and_shown_from_the_project_root(tmp_path):
    (tmp_path / "pyproject.toml").write_text("")
    package = tmp_path / "src" / "mylib"
    package.mkdir(parents=True)
    (package / "__init__.py").write_text("")
    _script(package, "model.py", '''\
        import torch.nn as nn


        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.layers = [nn.Linear(4, 4) for _ in range(2)]
                self.head = nn.Linear(4, 1)

            def forward(self, x):
                for layer in self.layers:
                    x = layer(x)
                return self.head(x)


        def unused(model):
            model.train()
            return model(None)
        ''')
    scripts = tmp_path / "scripts"
    scripts.mkdir()
    _script(scripts, "train.py", '''\
        import torch
        from mylib.model import Net

        model = Net()
        optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
        for step in range(2):
            optimizer.zero_grad()
            model(torch.randn(2, 4)).pow(2).mean().backward()
            optimizer.step()
        ''')
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([str(tmp_path / "src"), str(ROOT)]), OMP_NUM_THREADS="1")
    result = subprocess.run([sys.executable, "-m", "torchlint", "run", "--output-format", "json", "train.py"],
                            cwd=scripts, capture_output=True, text=True, env=env, timeout=300)
    assert result.returncode == 1, result.stderr[-2000:]
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "TL101"]
    assert finding["source"] == "static" and finding["status"] == "CONFIRMED"
    assert finding["filename"] == os.path.join("src", "mylib", "model.py")


@needs_torch
def test_hand_written_sgd_is_counted_as_steps_and_max_steps_applies(tmp_path):
    script = _script(tmp_path, "sgd.py", '''\
        import torch
        import torch.nn as nn

        model = nn.Sequential(nn.Linear(3, 4), nn.ReLU(), nn.Linear(4, 1))
        for step in range(100):
            loss = model(torch.randn(8, 3)).pow(2).mean()
            model.zero_grad()
            loss.backward()
            for p in model.parameters():
                p.data.add_(p.grad.data, alpha=-0.01)  # no optimizer; .data does not bump versions
            print("step", step)
        ''')
    result = torchlint("run", "--max-steps", "4", "--output-format", "json", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["outcome"]["kind"] == "stopped" and report["outcome"]["optimizer_steps"] == 4
    assert "hand-written" in report["outcome"]["reason"] and "step 5" not in result.stderr
    assert any("hand-written" in note for note in report["notes"])


@needs_torch
def test_training_in_child_processes_says_why_no_step_was_seen(tmp_path):
    script = _script(tmp_path, "hogwild.py", '''\
        import torch
        import torch.multiprocessing as mp
        import torch.nn as nn


        def train(model):
            optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
            for _ in range(3):
                optimizer.zero_grad()
                model(torch.randn(4, 3)).sum().backward()
                optimizer.step()


        if __name__ == "__main__":
            model = nn.Linear(3, 1)
            model.share_memory()
            workers = [mp.get_context("fork").Process(target=train, args=(model,)) for _ in range(2)]
            for worker in workers:
                worker.start()
            for worker in workers:
                worker.join()
        ''')
    result = torchlint("run", "--output-format", "json", str(script), cwd=tmp_path)
    assert result.returncode == 0, result.stderr[-2000:]
    report = json.loads(result.stdout)
    assert report["outcome"]["optimizer_steps"] == 0
    (note,) = [n for n in report["notes"] if "child process" in n]
    assert "2 child processes" in note and "--max-steps 20 did not apply" in note


@needs_torch
def test_statuses_after_a_crash(tmp_path):
    softmax = _script(tmp_path, "softmax.py", '''\
        import torch
        import torch.nn as nn
        import torch.nn.functional as F

        model = nn.Linear(8, 3)
        criterion = nn.CrossEntropyLoss()
        x, y = torch.randn(4, 8), torch.randint(0, 3, (4,))
        loss = criterion(F.softmax(model(x), dim=5), y)
        loss.backward()
        ''')
    result = torchlint("run", "--output-format", "json", str(softmax), cwd=tmp_path)
    assert result.returncode == 2, result.stderr[-2000:]
    (finding,) = [f for f in json.loads(result.stdout)["findings"] if f["code"] == "TL108"]
    assert finding["status"] == "NO EVIDENCE" and "raised (IndexError)" in finding["evidence"]

    double = _script(tmp_path, "double.py", '''\
        import torch
        import torch.nn as nn


        class Deep(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = [nn.Linear(8, 8) for _ in range(2)]
                self.head = nn.Linear(8, 2)

            def forward(self, x):
                for block in self.blocks:
                    x = torch.relu(block(x))
                return self.head(x)


        model = Deep().double()
        model(torch.randn(4, 8, dtype=torch.float64)).sum().backward()
        ''')
    result = torchlint("run", "--output-format", "json", str(double), cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    report = json.loads(result.stdout)
    (finding,) = [f for f in report["findings"] if f["code"] == "TL101"]
    assert finding["status"] == "CONFIRMED" and finding["ended_run"] and finding["count"] == 1
    assert "Deep.blocks" in finding["evidence"] and "float32" in finding["evidence"]

    index = _script(tmp_path, "index.py", '''\
        import torch

        loss = torch.ones(3, requires_grad=True).sum()
        accuracy = loss.detach() * 0
        print("loss %.3f accuracy %.3f" % (loss.data[0], accuracy.data[0]))
        ''')
    result = torchlint("run", str(index), cwd=tmp_path)
    assert result.returncode == 1, result.stderr[-2000:]
    assert "TL201 CONFIRMED error: `loss.data[0]`" in result.stdout
    assert "TL201 NO EVIDENCE error: `accuracy.data[0]`" in result.stdout
    assert result.stdout.count("IndexError: invalid index of a 0-dim tensor. Use") == 1  # the traceback only
    assert "evidence: the error in the traceback above (the tensor is 0-dim: value 3)" in result.stdout
    assert result.stdout.splitlines()[0].startswith(f"torchlint run {index}: stopped by a known rule's error (")


@needs_torch
def test_a_warning_torch_raises_in_the_users_call_points_at_the_users_line(tmp_path):
    """torch warns at the innermost Python frame; under the run's TorchFunctionMode that frame is
    the mode's own, so the warning is pointed back at the frame that made the call, as without the run."""
    script = _script(tmp_path, "warns.py", '''\
        import torch

        w = torch.randn(3, requires_grad=True)
        loss = (w * 2).sum()
        value = float(loss)
        print(value > -1e9)
        ''')
    plain = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, cwd=tmp_path)
    result = torchlint("run", "--output-format", "json", str(script), cwd=tmp_path)
    assert f"{script}:5: UserWarning: Converting a tensor" in plain.stderr
    assert f"{script}:5: UserWarning: Converting a tensor" in result.stderr, result.stderr[-2000:]
    assert "torchlint" not in result.stderr.split("UserWarning")[0]
