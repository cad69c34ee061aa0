"""The device family TL007–TL009: the issue-15 file, the device-state facts
(torchlint/analysis/device_state.py, device_guards.py), messages, TL008's fix, and `--verify --device cuda` on a
machine without CUDA."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import libcst as cst
import pytest

from torchlint.analysis import device_guards, device_state
from torchlint.analysis.semantic import Semantic
from torchlint.engine import lint_source
from torchlint.finding import Applicability
from torchlint.rules import all_rules

ROOT = Path(__file__).resolve().parent.parent
ISSUE_FILE = ROOT / "fixtures" / "TL007" / "issue15_why.py"


def model(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


def lint(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code == code]


def calls_named(sem: Semantic, name: str):
    calls = [c for c in sem.index.nodes(cst.Call) if isinstance(c.func, cst.Name) and c.func.value == name]
    return sorted(calls, key=sem.index.order.__getitem__)


# -- the issue's file ---------------------------------------------------------------------------

def test_issue_file_findings_with_every_rule():
    source = ISSUE_FILE.read_text(encoding="utf-8")
    findings = sorted((f.code, f.start.row) for f in lint_source(source, str(ISSUE_FILE)))
    # (1) data and (2) target never moved; both `.cuda()` calls hard-code CUDA in a file that
    # chooses its device; (7) the half input. The issue also names TL005, but no line of the
    # file moves part of a model (the `.cuda()` in train() moves the whole model): TL005 has
    # nothing to report here.
    assert findings == [("TL007", 16), ("TL007", 17), ("TL008", 11), ("TL008", 23), ("TL009", 24)]


def test_tl007_message_names_the_batch_and_the_move():
    source = ISSUE_FILE.read_text(encoding="utf-8")
    first, second = [f for f in lint_source(source, select=["TL007"])]
    assert "`data`" in first.message and "`model = nn.Linear(4, 2).cuda()`" in first.message
    assert "Expected all tensors to be on the same device" in first.message
    assert "`target`" in second.message and "`output`" in second.message


# -- rule units ---------------------------------------------------------------------------------

@pytest.mark.parametrize("code, fix", [("TL007", "none"), ("TL008", "sometimes"), ("TL009", "none")])
def test_docs_and_metadata(code, fix):
    rule = next(r for r in all_rules() if r.code == code)
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:",
                    "## Fix safety", "## References"):
        assert section in rule.docs
    assert rule.fix_availability == fix
    assert rule.confirmation_module == code.lower()


def test_docs_quote_measured_errors():
    rules = {r.code: r for r in all_rules()}
    assert "Tensor on device meta is not on the expected device cpu!" in rules["TL007"].docs
    assert "AssertionError: Torch not compiled with CUDA enabled" in rules["TL008"].docs
    assert "mat1 and mat2 must have the same dtype, but got Half and Float" in rules["TL009"].docs


# -- device values ------------------------------------------------------------------------------

@pytest.mark.parametrize("expr, accelerator, cpu", [
    ('"cuda"', True, False),
    ('"cuda:1"', True, False),
    ('"mps"', True, False),
    ('"cpu"', False, True),
    ('torch.device("cpu")', False, True),
    ('torch.device("cuda" if torch.cuda.is_available() else "cpu")', True, False),
    ('f"cuda:{rank}"', True, False),
    ("args.device", True, False),
    ("batch.device", False, False),
    ("other", False, False),
])
def test_device_values(expr, accelerator, cpu):
    sem = model(f"import torch\nx = {expr}\n")
    value = sem.index.nodes(cst.Assign)[-1].value
    assert device_state.device_may_be_accelerator(sem, value) is accelerator
    assert device_state.device_is_cpu(sem, value) is cpu


def test_device_names_follow_their_values():
    sem = model("""\
        import torch
        gpu = torch.device("cuda")
        cpu_device = "cpu"
        def f(device):
            return device, gpu, cpu_device
        """)
    names = sem.index.nodes(cst.Return)[0].value.elements
    assert [device_state.device_may_be_accelerator(sem, e.value) for e in names] == [True, True, False]


# -- where a model is ---------------------------------------------------------------------------

def function_with(header: str, body: str, last: str) -> str:
    """A module: `header`, then `def f(...):` whose body is the lines of `body` and `last`."""
    lines = [header, "def f(loader: DataLoader, model, device, flag, build, x, helper, cuda):"]
    lines += ["    " + line for line in (body + "\n" + last).splitlines()]
    return "\n".join(lines) + "\n"


MODEL_HEADER = "import torch.nn as nn\nfrom torch.utils.data import DataLoader\nclass Net(nn.Module):\n    pass"


@pytest.mark.parametrize("body, moved", [
    ("model = Net().cuda()", True),
    ("model = Net().to(device).train()", True),
    ("model = Net()\nmodel.to(device)", True),
    ("model = Net()\nmodel = model.cuda()", True),
    ("model = Net().cuda().cpu()", False),
    ("model = Net().to('cpu')", False),
    ("model = Net()", False),
    ("model = Net()\nif flag:\n    model.cuda()", False),
    ("model = nn.DataParallel(Net()).cuda()", False),
    ("model = Net().cuda()\nmodel = nn.DataParallel(model)", False),
    ("model = build().cuda()", False),
    ("model = Net().to(x.device)", False),
])
def test_model_device_move(body, moved):
    sem = Semantic(cst.parse_module(function_with(MODEL_HEADER, body, "use(model)")))
    use = calls_named(sem, "use")[-1]
    assert (device_state.model_device_move(sem, use.args[0].value) is not None) is moved


def test_model_passed_by_every_caller_moved():
    sem = model("""\
        import torch.nn as nn
        def train(model, loader):
            use(model)
        def main(device):
            train(nn.Linear(2, 2).to(device), None)
            net = nn.Linear(2, 2).to(device)
            train(net, None)
        """)
    use = calls_named(sem, "use")[0]
    assert device_state.model_device_move(sem, use.args[0].value) is not None


def test_model_passed_unmoved_by_one_caller_is_not_moved():
    sem = model("""\
        import torch.nn as nn
        def train(model, loader):
            use(model)
        def main(device):
            train(nn.Linear(2, 2).to(device), None)
            train(nn.Linear(2, 2), None)
        """)
    use = calls_named(sem, "use")[0]
    assert device_state.model_device_move(sem, use.args[0].value) is None


# -- where a batch comes from -------------------------------------------------------------------

@pytest.mark.parametrize("loader, certain", [
    ("DataLoader(ds)", True),
    ("DataLoader(ds, batch_size=4, pin_memory=True)", True),
    ("DataLoader(ds, collate_fn=default_collate)", True),
    ("DataLoader(ds, collate_fn=lambda b: [t.cuda() for t in b])", False),
    ("DataLoader(ds, collate_fn=imported_collate)", False),
    ("DataLoader(TensorDataset(x.to(device), y))", False),
    ("DataLoader(ds, 4, True, None, None, 0, my_collate)", False),
    ("DeviceDataLoader(ds)", False),
])
def test_loader_origin(loader, certain):
    sem = model(f"""\
        from torch.utils.data import DataLoader, TensorDataset
        from torch.utils.data.dataloader import default_collate
        from helpers import imported_collate, DeviceDataLoader
        def f(ds, x, y, device, my_collate):
            loader = {loader}
            use(loader)
        """)
    use = calls_named(sem, "use")[0]
    assert (device_state.loader_origin(sem, use.args[0].value) is not None) is certain


@pytest.mark.parametrize("statements, unmoved", [
    ("out = model(x)", True),
    ("x = x.view(-1, 4)\nout = model(x)", True),
    ("out = model(x.float().unsqueeze(0))", True),
    ("x = x.to(device)\nout = model(x)", False),
    ("x = helper(x)\nout = model(x)", False),
    ("if cuda:\n    x = x.cuda()\nout = model(x)", False),
    ("out = model(torch.cat([x, x]))", False),
])
def test_unmoved_batch_element(statements, unmoved):
    body = "for x, y in loader:\n" + textwrap.indent(statements, "    ")
    sem = Semantic(cst.parse_module(function_with("import torch\n" + MODEL_HEADER, body, "")))
    call = calls_named(sem, "model")[-1]
    element = device_state.unmoved_batch_element(sem, call.args[0].value)
    assert (element is not None and not device_state.batch_touched_before(sem, element, call)) is unmoved


def test_enumerate_index_is_not_a_batch():
    sem = model("""\
        from torch.utils.data import DataLoader
        def f(loader: DataLoader):
            for i, (x, y) in enumerate(loader):
                use(i, x)
        """)
    i, x = [a.value for a in calls_named(sem, "use")[0].args]
    assert device_state.unmoved_batch_element(sem, i) is None
    assert device_state.unmoved_batch_element(sem, x) is not None


# -- TL008 facts and fix ------------------------------------------------------------------------

@pytest.mark.parametrize("expr, kind, indexed", [
    ("x.cuda()", "method", False),
    ("x.cuda(1)", "method", True),
    ("x.cuda(non_blocking=True)", "method", False),
    ('torch.zeros(3, device="cuda")', "keyword", False),
    ('torch.zeros(3, device="cuda:0")', "keyword", True),
    ('x.to("cuda")', "to", False),
    ('x.to(torch.device("cuda", 1))', "to", True),
    ('torch.zeros(3, device="cpu")', None, None),
    ("x.to(device)", None, None),
    ('torch.autocast(device_type="cuda")', None, None),
])
def test_hard_coded_cuda(expr, kind, indexed):
    sem = model(f"import torch\ny = {expr}\n")
    found = device_guards.hard_coded_cuda(sem, sem.index.nodes(cst.Assign)[-1].value)
    assert (found.kind, found.indexed) == (kind, indexed) if kind else found is None


def test_device_name_in_scope():
    sem = model("""\
        import torch
        device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
        def one(x):
            return x.cuda()
        def two(x, dev):
            return x.cuda()
        def shadowed(x):
            device = pick()
            return x.cuda()
        """)
    returns = sorted(sem.index.nodes(cst.Return), key=sem.index.order.__getitem__)
    assert [device_guards.device_name_in_scope(sem, r.value) for r in returns] == ["device", None, None]


def test_tl008_fix_safety():
    findings = lint("""\
        import torch
        import torch.nn as nn
        device = "cuda" if torch.cuda.is_available() else "cpu"
        a = torch.ones(2).cuda()
        b = nn.Linear(2, 2).cuda(0)
        def f(x):
            return x.cuda()
        c = torch.cuda.FloatTensor(2)
        """, "TL008")
    fixes = [(f.start.row, f.fix.applicability if f.fix else None) for f in findings]
    assert fixes == [(4, Applicability.SAFE), (5, Applicability.UNSAFE), (7, Applicability.UNSAFE), (8, None)]
    assert findings[0].fix.edits[0].content == "torch.ones(2).to(device)"


def test_tl008_without_a_device_name_advises_without_a_fix():
    (finding,) = lint("""\
        import torch
        use_cuda = torch.cuda.is_available()
        if use_cuda:
            torch.cuda.manual_seed(1)
        x = torch.zeros(2).cuda()
        """, "TL008")
    assert finding.fix is None and "`use_cuda = torch.cuda.is_available()`" in finding.message


# -- TL009 facts --------------------------------------------------------------------------------

@pytest.mark.parametrize("expr, half", [
    ("x.half()", True),
    ("x.bfloat16()", True),
    ("x.to(torch.float16)", True),
    ("x.to(dtype=torch.bfloat16)", True),
    ("x.to(device, torch.half)", True),
    ("x.half().to(device)", True),
    ("torch.ones(2, dtype=torch.float16)", True),
    ("x.float()", False),
    ("x.to(torch.float32)", False),
    ("x.to(device)", False),
])
def test_half_conversion(expr, half):
    sem = model(f"import torch\ny = {expr}\n")
    assert (device_state.half_conversion(sem, sem.index.nodes(cst.Assign)[-1].value) is not None) is half


# -- --verify --device cuda without CUDA --------------------------------------------------------

def _verify(*args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    return subprocess.run([sys.executable, "-m", "torchlint", "--verify", *args], cwd=ROOT,
                          capture_output=True, text=True, env=env, timeout=300)


def _cpu_only_torch() -> bool:
    from torchlint.verify.runner import torch_available, torch_build_has_cuda

    return torch_available() and not torch_build_has_cuda()


@pytest.mark.skipif(not _cpu_only_torch(), reason="needs a CPU-only torch build")
def test_verify_device_cuda_without_cuda_is_a_usage_error():
    result = _verify("TL004", "--device", "cuda")
    assert result.returncode == 2
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "--device cuda" in lines[0] and "no CUDA support" in lines[0]


@pytest.mark.slow  # the whole verifier end to end (CI and --runslow run it)
@pytest.mark.skipif(not _cpu_only_torch(), reason="needs a CPU-only torch build")
def test_verify_device_all_still_skips_what_is_absent():
    result = _verify("TL004", "--device", "all", "--output-format", "json")
    assert result.returncode == 0, result.stderr
    rows = json.loads(result.stdout)["results"]
    assert {(r["device"], r["verdict"]) for r in rows} == {("cpu", "CONFIRMED"), ("cuda", "SKIPPED")}


def test_verify_device_cuda_on_a_cuda_build_without_a_gpu(monkeypatch, capsys):
    """A CUDA build on a machine without a GPU: the child finds out; still exit 2, one line."""
    import torchlint.verify as verify
    from torchlint.verify import runner

    def run_cases(cases, devices=None, timeout=None):
        assert devices == ["cuda"]
        return {"environment": {"devices": {"cuda": {"available": False}}},
                "results": [], "summary": {}, "exit_code": 0}

    monkeypatch.setattr(runner, "cuda_build_missing", lambda: None)
    monkeypatch.setattr(runner, "run_cases", run_cases)
    monkeypatch.setattr(runner, "torch_available", lambda: True)
    import importlib.util
    real_find_spec = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: object() if name == "torch" else real_find_spec(name, *a))
    assert verify.main(["TL004", "--device", "cuda"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.strip().splitlines() == [
        "torchlint --verify: --device cuda: no CUDA device is available (torch.cuda.is_available() is False)"]


# -- device choices, guards, frameworks, autocast -----------------------------------------------

@pytest.mark.parametrize("source, chooses", [
    ('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")', True),
    ("use_cuda = torch.cuda.is_available()", True),
    ("if args.cuda:\n    model.cuda()", True),
    ('parser.add_argument("--no-cuda", action="store_true")', True),
    ('parser.add_argument("--device", default="cuda")', True),
    ('parser.add_argument("--gpu", type=int)', False),
    ("if torch.cuda.device_count() > 1:\n    model = nn.DataParallel(model).cuda()", False),
    ("if x.is_cuda:\n    y = y.cuda()", False),
    ('if x.device.type == "cuda":\n    y = y.cuda()', False),
    ("on_gpu = next(model.parameters()).is_cuda\nif on_gpu:\n    y = y.cuda()", False),
    ("if torch.cuda.is_available():\n    torch.cuda.manual_seed(0)", False),
    ('device = torch.device("cuda" if torch.cuda.is_available() else "cpu")\n'
     "print(torch.cuda.get_device_name(0))", False),
])
def test_file_device_choice(source, chooses):
    sem = model("import torch\nimport torch.nn as nn\n" + source + "\n")
    assert (device_guards.file_device_choice(sem) is not None) is chooses


@pytest.mark.parametrize("line, guarded", [
    ("if use_cuda:\n    x = x.cuda()", True),
    ("if not use_cuda:\n    pass\nelse:\n    x = x.cuda()", True),
    ("x = x.cuda() if torch.cuda.is_available() else x", True),
    ("y = use_cuda and x.cuda()", True),
    ("try:\n    x = x.cuda()\nexcept RuntimeError:\n    pass", True),
    ("assert torch.cuda.is_available()\nx = x.cuda()", True),
    ("if not use_cuda:\n    raise SystemExit(1)\nx = x.cuda()", True),
    ("if verbose:\n    x = x.cuda()", False),
    ("x = x.cuda()", False),
])
def test_guarded_by_device_condition(line, guarded):
    sem = model("import torch\nuse_cuda = torch.cuda.is_available()\n" + line + "\n")
    call = next(c for c in sem.index.nodes(cst.Call) if device_guards.hard_coded_cuda(sem, c))
    assert device_guards.guarded_by_device_condition(sem, call) is guarded


def test_function_called_under_a_guard_is_guarded():
    sem = model("""\
        import torch
        use_cuda = torch.cuda.is_available()
        def warm_up(x):
            return x.cuda()
        if use_cuda:
            warm_up(torch.ones(1))
        """)
    call = next(c for c in sem.index.nodes(cst.Call) if device_guards.hard_coded_cuda(sem, c))
    assert device_guards.guarded_by_device_condition(sem, call)


def test_guard_found_through_any_number_of_callers_and_recursion_ends():
    sem = model("""\
        import torch
        use_cuda = torch.cuda.is_available()
        def warm_up(x):
            return x.cuda()
        def step(x, n):
            return warm_up(x) if n == 0 else step(x, n - 1)
        def epoch(x):
            return step(x, 3)
        def train(x):
            return epoch(x)
        def unguarded(x):
            return unguarded(x).cuda()
        if use_cuda:
            train(torch.ones(1))
        """)
    first, second = [c for c in sem.index.nodes(cst.Call) if device_guards.hard_coded_cuda(sem, c)]
    assert device_guards.guarded_by_device_condition(sem, first)  # four callers up, through a recursion
    assert not device_guards.guarded_by_device_condition(sem, second)  # only calls itself


def test_callers_fixpoint_asks_each_call_once(monkeypatch):
    # Every `__init__` "calls" every other through `super().__init__()`: a dense cycle of
    # same-named functions, which a search that re-asks callers explores exponentially.
    classes = "".join(f"""
        class Block{i}(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4).cuda()
        """ for i in range(40))
    sem = model("""\
        import torch
        import torch.nn as nn
        use_cuda = torch.cuda.is_available()
        """ + classes)
    asked = []
    original = device_guards._guarded_here
    monkeypatch.setattr(device_guards, "_guarded_here", lambda s, n: asked.append(n) or original(s, n))
    moves = [c for c in sem.index.nodes(cst.Call) if device_guards.hard_coded_cuda(sem, c)]
    assert len(moves) == 40
    assert not any(device_guards.guarded_by_device_condition(sem, c) for c in moves)
    calls = len(list(sem.index.nodes(cst.Call)))
    assert len(asked) <= 2 * calls


@pytest.mark.parametrize("imports, moved", [
    ("import lightning as L", True),
    ("import pytorch_lightning as pl", True),
    ("from accelerate import Accelerator", True),
    ("from transformers import Trainer", True),
    ("from transformers import AutoModel", False),
    ("import torch", False),
])
def test_batches_moved_by_framework(imports, moved):
    sem = model(imports + "\nfor x in loader:\n    model(x)\n")
    call = calls_named(sem, "model")[0]
    assert device_state.batches_moved_by_framework(sem, call) is moved


@pytest.mark.parametrize("context, autocast", [
    ("with torch.autocast('cuda'):", True),
    ("with torch.cuda.amp.autocast():", True),
    ("with ctx:", True),
    ("with torch.no_grad():", False),
    ("with open('log.txt') as log:", False),
    ("if True:", False),
])
def test_may_run_under_autocast(context, autocast):
    sem = model(f"import torch\n{context}\n    model(x)\n")
    call = calls_named(sem, "model")[0]
    assert device_guards.may_run_under_autocast(sem, call) is autocast
