"""Unit tests for the training facts (torchlint/analysis/training.py) and the TL002/TL003 rules:
optimizer steps, gradient clearing, loss tensors, aliasing/scoping traps and the fixes."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import training
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import Semantic
from torchlint.engine import lint_source
from torchlint.finding import Applicability


def model(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


def calls(semantic: Semantic, spelled: str):
    found = [c for c in semantic.index.nodes(cst.Call) if dotted_name(c.func) == spelled]
    return sorted(found, key=semantic.index.order.__getitem__)


def names(semantic: Semantic, spelled: str):
    found = [n for n in semantic.index.nodes(cst.Name) if n.value == spelled]
    return sorted(found, key=semantic.index.order.__getitem__)


def lint(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code == code]


# -- optimizers and steps -----------------------------------------------------------------------

@pytest.mark.parametrize("source, receiver, expected", [
    ("import torch\nopt = torch.optim.SGD(p)\nopt.step()", "opt.step", True),
    ("from torch import optim\nopt = optim.SGD(p)\nopt.step()", "opt.step", True),
    ("import torch.optim as O\nopt = O.Adam(p)\nopt.step()", "opt.step", True),
    ("from torch.optim import AdamW as A\nx = A(p)\nx.step()", "x.step", True),
    # named like an optimizer: a parameter, an attribute
    ("def f(optimizer):\n    optimizer.step()", "optimizer.step", True),
    ("class T:\n    def f(self):\n        self.optimizer.step()", "self.optimizer.step", True),
    ("def f(g_opt):\n    g_opt.step()", "g_opt.step", True),
    # the module `optim` (an import) is not an optimizer
    ("from torch import optim\noptim.step()", "optim.step", False),
    ("import torch.optim as optim\noptim.step()", "optim.step", False),
    ("import torch\ntorch.optim.step()", "torch.optim.step", False),
    # a local variable `optim` shadowing the module is an optimizer
    ("import torch\ndef f(m):\n    optim = torch.optim.SGD(m.parameters())\n    optim.step()", "optim.step", True),
    # not optimizers
    ("scheduler.step()", "scheduler.step", False),
    ("env.step(action)", "env.step", False),
    ("self.lr_scheduler.step()", "self.lr_scheduler.step", False),
    ("options.step()", "options.step", False),
])
def test_step_optimizer(source, receiver, expected):
    sem = model(source)
    (call,) = calls(sem, receiver)
    assert (training.step_optimizer(sem, call) is not None) is expected


def test_scaler_step_returns_optimizer_argument():
    sem = model("""
        import torch
        scaler = torch.amp.GradScaler("cuda")
        opt = torch.optim.SGD(p)
        scaler.step(opt)
        self.scaler.step(self.optimizer)
        scaler.step(opt, closure)
        scaler.step(model)
    """)
    first, closure, not_opt = calls(sem, "scaler.step")
    (second,) = calls(sem, "self.scaler.step")
    assert dotted_name(training.step_optimizer(sem, first)) == "opt"
    assert dotted_name(training.step_optimizer(sem, second)) == "self.optimizer"
    assert training.step_optimizer(sem, closure) is None
    assert training.step_optimizer(sem, not_opt) is None


def test_closure_step_is_not_a_plain_step():
    sem = model("import torch\nopt = torch.optim.LBFGS(p)\nopt.step(closure)")
    (call,) = calls(sem, "opt.step")
    assert training.step_optimizer(sem, call) is None
    assert training.is_closure_step(sem, call)


# -- backward and clearing ----------------------------------------------------------------------

@pytest.mark.parametrize("source, spelled, target", [
    ("loss.backward()", "loss.backward", "loss"),
    ("loss.backward(retain_graph=True)", "loss.backward", "loss"),
    ("scaler.scale(loss).backward()", "scaler.scale(loss).backward", "loss"),
    ("accelerator.backward(loss)", "accelerator.backward", "loss"),
    ("self.manual_backward(loss)", "self.manual_backward", "loss"),
    ("import torch\ntorch.autograd.backward(loss)", "torch.autograd.backward", "loss"),
])
def test_backward_target(source, spelled, target):
    sem = model(source)
    call = next(c for c in sem.index.nodes(cst.Call) if training.is_backward(sem, c))
    assert dotted_name(training.backward_target(sem, call)) == target


@pytest.mark.parametrize("body, clears", [
    ("opt.zero_grad()", True),
    ("model.zero_grad(set_to_none=True)", True),
    ("zero_grad(model)", True),
    ("self.strategy.optimizer_zero_grad(opt)", True),
    ("for p in ps:\n        p.grad = None", True),
    ("for p in ps:\n        p.grad.zero_()", True),
    ("for p in ps:\n        p.grad.data.zero_()", True),
    ("for p in ps:\n        del p.grad", True),
    ("helper()", True),  # helper() below clears
    ("other()", False),
    ("opt.step()", False),
    ("p.data.zero_()", False),
])
def test_clears_gradients(body, clears):
    sem = model(f"""
def helper():
    optimizer.zero_grad()

def other():
    return 1

for batch in loader:
    {body}
""")
    loop = [f for f in sem.index.nodes(cst.For) if dotted_name(f.iter) == "loader"][0]
    assert (training.clears_gradients(sem, loop.body) is not None) is clears


def test_training_loop_follows_same_file_methods():
    sem = model("""
        class T:
            def train_step(self, b):
                self.loss(b).backward()

            def fit(self, loader):
                for b in loader:
                    self.train_step(b)
                    self.optimizer.step()
    """)
    (step,) = calls(sem, "self.optimizer.step")
    assert training.training_loop_of(sem, step) is not None


def test_training_loop_is_innermost_loop_with_backward():
    sem = model("""
        for x in loader:
            loss.backward()
            for opt in optimizers:
                opt.step()
    """)
    (step,) = calls(sem, "opt.step")
    loop = training.training_loop_of(sem, step)
    assert dotted_name(loop.iter) == "loader"


# -- loss tensors -------------------------------------------------------------------------------

def _loss_of(source: str, name: str = "t", index: int = -1) -> bool:
    sem = model(source)
    use = names(sem, name)[index]
    return training.is_loss_tensor(sem, use)


@pytest.mark.parametrize("source, expected", [
    ("import torch.nn as nn\nc = nn.CrossEntropyLoss()\nt = c(a, b)\nt", True),
    ("from torch import nn\nt = nn.MSELoss(reduction='sum')(a, b)\nt", True),
    ("import torch.nn.functional as F\nt = F.cross_entropy(a, b)\nt", True),
    ("from torch.nn import functional as F\nt = F.binary_cross_entropy_with_logits(a, b)\nt", True),
    ("from torch.nn.functional import nll_loss\nt = nll_loss(a, b)\nt", True),
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b) / 4\nt", True),
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b).cpu()\nt", True),
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b).mean() * 0.5\nt", True),
    # a name on which backward is called
    ("t = out.loss\nt.backward()\nt", True),
    ("t = out.loss\nscaler.scale(t).backward()\nt", True),
    ("t = out.loss\naccelerator.backward(t)\nt", True),
    # detached values and non-losses
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b).item()\nt", False),
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b).detach()\nt", False),
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b).detach().cpu()\nt", False),
    ("import torch.nn.functional as F\nt = float(F.mse_loss(a, b))\nt", False),
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b).data\nt", False),
    ("import torch.nn.functional as F\nt = F.mse_loss(a, b).tolist()\nt", False),
    ("import torch.nn.functional as F\nt = F.relu(a)\nt", False),
    ("t = model(x)\nt", False),
    ("t = criterion(a, b)\nt", False),  # unknown criterion: stay silent
    ("t = out.loss\nt.backward()\nt = t.item()\nt", False),
    ("t = out.loss\nt.backward()\nif c:\n    t = t.item()\nt", False),
    # a local function named like a loss is not torch's
    ("def cross_entropy(a, b):\n    return 0\nt = cross_entropy(a, b)\nt", False),
    # F rebound locally
    ("import torch.nn.functional as F\ndef f(F):\n    t = F.mse_loss(a, b)\n    t", False),
])
def test_is_loss_tensor(source, expected):
    assert _loss_of(source) is expected


def test_criterion_attribute_of_class():
    sem = model("""
        import torch.nn as nn
        class T:
            def __init__(self):
                self.criterion = nn.BCEWithLogitsLoss()
                self.other = make_loss()
            def f(self, a, b):
                t = self.criterion(a, b)
                u = self.other(a, b)
                t, u
    """)
    assert training.is_loss_tensor(sem, names(sem, "t")[-1])
    assert not training.is_loss_tensor(sem, names(sem, "u")[-1])


# -- rules end to end ---------------------------------------------------------------------------

def test_tl002_misplaced_zero_grad_reported_at_zero_grad():
    findings = lint("""
        import torch
        opt = torch.optim.SGD(p)
        for x in loader:
            loss = f(x)
            loss.backward()
            opt.zero_grad()
            opt.step()
    """, "TL002")
    assert [(f.start.row, f.start.column) for f in findings] == [(7, 5)]
    assert "no gradients" in findings[0].message


def test_tl002_not_straight_line_is_silent():
    findings = lint("""
        import torch
        opt = torch.optim.SGD(p)
        for x in loader:
            loss = f(x)
            loss.backward()
            opt.zero_grad()
            if extra:
                g(x).backward()
            opt.step()
    """, "TL002")
    assert findings == []


def test_tl002_nested_function_without_loop_is_silent():
    assert lint("""
        def step(loss, optimizer):
            loss.backward()
            optimizer.step()
    """, "TL002") == []


def apply_fix(source: str, finding) -> str:
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    text = source
    for edit in sorted(finding.fix.edits, key=lambda e: (e.start.row, e.start.column), reverse=True):
        start = offsets[edit.start.row - 1] + edit.start.column - 1
        end = offsets[edit.end.row - 1] + edit.end.column - 1
        text = text[:start] + edit.content + text[end:]
    return text


def test_tl002_fix_inserts_zero_grad_first():
    source = textwrap.dedent("""
        import torch
        scaler = torch.amp.GradScaler()
        for x, y in loader:
            # forward
            loss = crit(model(x), y)
            scaler.scale(loss).backward()
            scaler.step(self.opt)
    """)
    (finding,) = lint(source, "TL002")
    assert finding.fix.applicability is Applicability.UNSAFE
    fixed = apply_fix(source, finding)
    cst.parse_module(fixed)
    assert "for x, y in loader:\n    self.opt.zero_grad()\n    # forward\n    loss = crit" in fixed or \
        "for x, y in loader:\n    # forward\n    self.opt.zero_grad()\n    loss = crit" in fixed
    assert lint(fixed, "TL002") == []


def test_tl002_fix_with_compound_first_statement():
    source = textwrap.dedent("""
        def train(model, loader, optimizer):
            for x, y in loader:
                with autocast():
                    loss = model(x, y)
                loss.backward()
                optimizer.step()
    """)
    (finding,) = lint(source, "TL002")
    fixed = apply_fix(source, finding)
    cst.parse_module(fixed)
    assert "    for x, y in loader:\n        optimizer.zero_grad()\n        with autocast():" in fixed
    assert lint(fixed, "TL002") == []


def test_tl002_no_fix_when_optimizer_made_in_loop():
    (finding,) = lint("""
        import torch
        for x in loader:
            opt = torch.optim.SGD(p)
            loss = f(x)
            loss.backward()
            opt.step()
    """, "TL002")
    assert finding.fix is None


@pytest.mark.parametrize("line, fixed_line, applicability", [
    ("losses.append(loss)", "losses.append(loss.detach())", Applicability.SAFE),
    ("losses.append(loss / 4)", "losses.append((loss / 4).detach())", Applicability.SAFE),
    ("losses.extend([loss])", "losses.extend([loss.detach()])", Applicability.SAFE),
    ("losses += [loss]", "losses += [loss.detach()]", Applicability.SAFE),
    ("total += loss", "total += loss.item()", Applicability.UNSAFE),
    ("total = total + 0.5 * loss", "total = total + (0.5 * loss).item()", Applicability.UNSAFE),
])
def test_tl003_fixes(line, fixed_line, applicability):
    source = textwrap.dedent(f"""
        import torch.nn.functional as F
        losses, total = [], 0
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            {line}
    """)
    (finding,) = lint(source, "TL003")
    assert finding.fix.applicability is applicability
    fixed = apply_fix(source, finding)
    cst.parse_module(fixed)
    assert fixed_line in fixed
    assert lint(fixed, "TL003") == []


def test_tl003_message_names_the_operation():
    (finding,) = lint("""
        import torch.nn.functional as F
        for x, y in loader:
            loss = F.cross_entropy(model(x), y)
            loss.backward()
            history.append(loss)
    """, "TL003")
    assert "`history.append(loss)`" in finding.message and "loss.item()" in finding.message


def test_tl003_outside_loop_is_silent():
    assert lint("""
        import torch.nn.functional as F
        loss = F.cross_entropy(model(x), y)
        losses.append(loss)
    """, "TL003") == []


def test_tl003_under_set_grad_enabled_false_is_silent():
    assert lint("""
        import torch
        import torch.nn.functional as F
        with torch.set_grad_enabled(False):
            for x, y in loader:
                losses.append(F.cross_entropy(model(x), y))
    """, "TL003") == []
