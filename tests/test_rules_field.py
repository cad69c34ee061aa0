"""Field rules TL104–TL109: the facts in torchlint/analysis/evaluation.py, messages, fixes, docs."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import evaluation, training
from torchlint.analysis.semantic import Semantic
from torchlint.engine import lint_source
from torchlint.finding import Applicability
from torchlint.rules import get_rule

FIELD_RULES = ["TL104", "TL105", "TL106", "TL107", "TL108", "TL109"]


def model(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


def lint(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), "t.py", select=[code]) if f.code == code]


def apply_fix(source: str, finding) -> str:
    """Apply one finding's edits (1-based rows/columns, end exclusive), last edit first."""
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))

    def offset(location):
        return offsets[location.row - 1] + location.column - 1

    text = source
    for edit in sorted(finding.fix.edits, key=lambda e: (e.start.row, e.start.column), reverse=True):
        text = text[: offset(edit.start)] + edit.content + text[offset(edit.end):]
    return text


def last_call(semantic: Semantic, spelled: str) -> cst.Call:
    from torchlint.analysis.scopes import dotted_name

    found = [c for c in semantic.index.nodes(cst.Call) if dotted_name(c.func) == spelled]
    return sorted(found, key=semantic.index.order.__getitem__)[-1]


# -- metadata ------------------------------------------------------------------------------------

@pytest.mark.parametrize("code", FIELD_RULES)
def test_rule_metadata_and_docs(code):
    rule = get_rule(code)
    assert rule is not None
    assert rule.name == rule.name.lower() and " " not in rule.name
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:",
                    "## Fix safety", "## References"):
        assert section in rule.docs, (code, section)
    assert rule.confirmation_module == code.lower()
    assert rule.triggers


@pytest.mark.parametrize("code", FIELD_RULES)
def test_every_field_rule_has_a_case_flagged_statically(code):
    from torchlint.verify.cases import all_cases

    cases = all_cases([code])
    assert cases, f"{code} has no confirmation case"
    for case in cases:
        bad = [f.start.row for f in lint_source(case.bad, "bad.py", select=[code]) if f.code == code]
        good = [f for f in lint_source(case.good, "good.py", select=[code]) if f.code == code]
        assert case.bad_line in bad, (code, case.title, bad)
        assert not good, (code, case.title)


# -- facts ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name, expected", [
    ("evaluate", True), ("validate", True), ("run_validation", True), ("eval_epoch", True),
    ("predict", True), ("infer", True), ("test", True), ("test_epoch", True),
    ("test_forward_shapes", False), ("test_eval_mode", False), ("validation_step", False), ("on_validation_start", False),
    ("train", False), ("interval", False), ("evalue", False), ("contest", False),
])
def test_eval_function_names(name, expected):
    assert evaluation.is_eval_function_name(name) is expected


def test_certainly_no_grad_respects_inference_mode_false():
    semantic = model("""
        import torch
        with torch.inference_mode(False):
            a = f()
        with torch.inference_mode():
            b = f()
        with torch.no_grad():
            c = f()
    """)
    calls = sorted((c for c in semantic.index.nodes(cst.Call) if getattr(c.func, "value", None) == "f"),
                   key=semantic.index.order.__getitem__)
    assert [evaluation.certainly_no_grad(semantic, c) for c in calls] == [False, True, True]


def test_is_criterion_through_names_and_self_attributes():
    semantic = model("""
        import torch.nn as nn
        crit = nn.CrossEntropyLoss()
        alias = crit
        other = nn.MSELoss()
        class M(nn.Module):
            def __init__(self):
                self.loss = nn.CrossEntropyLoss(label_smoothing=0.1)
            def f(self, x, y):
                self.loss(x, y)
        crit(a, b)
        alias(a, b)
        other(a, b)
    """)
    ce = evaluation.CROSS_ENTROPY_CLASSES
    assert training.is_criterion(semantic, last_call(semantic, "crit").func, ce)
    assert training.is_criterion(semantic, last_call(semantic, "alias").func, ce)
    assert training.is_criterion(semantic, last_call(semantic, "self.loss").func, ce)
    assert not training.is_criterion(semantic, last_call(semantic, "other").func, ce)
    assert training.is_criterion(semantic, last_call(semantic, "other").func)


def test_activation_output_follows_models_of_this_file():
    semantic = model("""
        import torch, torch.nn as nn, torch.nn.functional as F
        class Head(nn.Module):
            def __init__(self):
                self.net = nn.Sequential(nn.Linear(2, 2), nn.Softmax(dim=1))
            def forward(self, x):
                return self.net(x)
        class Mixed(nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    return F.softmax(x, 1)
                return x
        a = Head()
        b = Mixed()
        p = F.softmax(z, 1)
        use(a(x), b(x), p, torch.sigmoid(z), z.sigmoid(), self.sigmoid(z))
    """)
    use = last_call(semantic, "use")
    args = [a.value for a in use.args]
    assert evaluation.activation_output(semantic, args[0], "softmax") is not None
    assert evaluation.activation_output(semantic, args[1], "softmax") is None  # one path returns logits
    assert evaluation.activation_output(semantic, args[2], "softmax") is not None
    assert evaluation.activation_output(semantic, args[3], "sigmoid") is not None
    assert evaluation.activation_output(semantic, args[4], "sigmoid") is not None
    assert evaluation.activation_output(semantic, args[5], "sigmoid") is None  # a method of ours


def test_stochastic_layers():
    semantic = model("""
        import torch.nn as nn, torchvision
        class A(nn.Module):
            def __init__(self):
                self.d = nn.Dropout(0.1)
        class B(A):
            pass
        class C(nn.Module):
            def __init__(self):
                self.n = nn.InstanceNorm2d(3)
        b = B()
        c = C()
        r = torchvision.models.resnet18()
        v = torchvision.models.vit_b_16()
        s = nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
        use(b, c, r, v, s)
    """)
    args = [a.value for a in last_call(semantic, "use").args]
    found = [evaluation.stochastic_layer_of(semantic, a) for a in args]
    assert found[0] is not None and "Dropout" in found[0]
    assert found[1] is None  # InstanceNorm without running stats does not depend on the mode
    assert found[2] is not None
    assert found[3] is None
    assert found[4] == "BatchNorm1d"


@pytest.mark.parametrize("expr, non_leaf", [
    ("w * 2", True), ("w.sum()", True), ("torch.sigmoid(w)", True), ("w[0]", True), ("-w", True),
    ("w.detach()", False), ("w", False), ("a * 2", False), ("w.to(device)", False),
    ("torch.ones(3, requires_grad=True).cuda()", True),
    ("torch.ones(3, requires_grad=True, device='cuda').cuda()", False),
    ("torch.ones(3, requires_grad=True).to(torch.float64)", True),
    ("torch.ones(3, requires_grad=True).float()", False),
    ("torch.ones(3, requires_grad=True).to(dtype=torch.half, copy=False)", True),
    ("torch.ones(3, requires_grad=True).to(copy=True)", False),
])
def test_non_leaf_tensors(expr, non_leaf):
    semantic = model(f"""
        import torch
        w = torch.zeros(3, requires_grad=True)
        a = torch.zeros(3)
        y = {expr}
        y.grad
    """)
    use = [n for n in semantic.index.nodes(cst.Attribute) if n.attr.value == "grad"][-1]
    assert (semantic.values.of(use.value).autograd == "graph") is non_leaf


# -- messages and fixes --------------------------------------------------------------------------

def test_tl104_message_names_the_variable():
    [finding] = lint("""
        import torch
        def f(model, x):
            with torch.no_grad():
                loss = model(x).sum()
            loss.backward()
    """, "TL104")
    assert "`loss`" in finding.message and finding.fix is None


def test_tl105_message():
    [finding] = lint("""
        import torch
        w = torch.ones(3, requires_grad=True).cuda()
        w.sum().backward()
        print(w.grad)
    """, "TL105")
    assert "retain_grad" in finding.message and "`w`" in finding.message


def test_tl106_not_when_backward_in_a_called_helper():
    assert not lint("""
        import torch.nn as nn
        def step(model, x):
            model(x).sum().backward()
        def evaluate(model, loader):
            model.eval()
            for x in loader:
                model(x)
                step(model, x)
    """, "TL106")


def test_tl107_fix_inserts_eval_before_the_loop():
    source = textwrap.dedent("""\
        import torch
        import torch.nn as nn

        def evaluate(loader):
            net = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
            with torch.no_grad():
                for x in loader:
                    print(net(x))
    """)
    [finding] = lint(source, "TL107")
    assert finding.fix is not None and finding.fix.applicability is Applicability.UNSAFE
    fixed = apply_fix(source, finding)
    assert "        net.eval()\n        for x in loader:" in fixed
    assert not lint(fixed, "TL107")


def test_tl107_no_fix_inside_a_training_epoch_loop():
    source = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.5))
        for epoch in range(3):
            for x in data:
                model(x).sum().backward()
            with torch.no_grad():
                for x in val:
                    print(model(x))
    """)
    [finding] = lint(source, "TL107")
    assert finding.fix is None


@pytest.mark.parametrize("before, after", [
    ("criterion(F.softmax(logits, dim=1), y)", "criterion(logits, y)"),
    ("F.cross_entropy(logits.softmax(-1), y)", "F.cross_entropy(logits, y)"),
    ("F.nll_loss(F.softmax(logits, dim=1), y)", "F.nll_loss(F.log_softmax(logits, dim=1), y)"),
    ("F.nll_loss(torch.softmax(logits, 1), y)", "F.nll_loss(torch.log_softmax(logits, 1), y)"),
])
def test_tl108_fixes(before, after):
    source = ("import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"
              f"criterion = nn.CrossEntropyLoss()\nloss = {before}\n")
    [finding] = lint(source, "TL108")
    assert finding.fix.applicability is Applicability.UNSAFE
    assert apply_fix(source, finding).endswith(f"loss = {after}\n")


def test_tl108_no_fix_through_a_variable():
    [finding] = lint("""
        import torch.nn.functional as F
        probs = F.softmax(logits, dim=1)
        loss = F.cross_entropy(probs, y)
    """, "TL108")
    assert finding.fix is None


@pytest.mark.parametrize("before, after", [
    ("F.binary_cross_entropy(torch.sigmoid(z), y)", "F.binary_cross_entropy_with_logits(z, y)"),
    ("nn.BCELoss()(z.sigmoid(), y)", "nn.BCEWithLogitsLoss()(z, y)"),
    ("nn.BCELoss(reduction='sum')(torch.sigmoid(z), y)", "nn.BCEWithLogitsLoss(reduction='sum')(z, y)"),
])
def test_tl109_fixes(before, after):
    source = f"import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\nloss = {before}\n"
    [finding] = lint(source, "TL109")
    assert finding.fix.applicability is Applicability.UNSAFE
    assert apply_fix(source, finding).endswith(f"loss = {after}\n")


def test_tl109_no_fix_for_a_criterion_variable():
    [finding] = lint("""
        import torch, torch.nn as nn
        bce = nn.BCELoss()
        loss = bce(torch.sigmoid(z), y)
    """, "TL109")
    assert finding.fix is None


def test_evaluation_loops_include_comprehension_elements_only():
    semantic = model("""
        def f(loader, model):
            a = [model(x) for x in loader]
            b = [x for x in model(loader)]
    """)
    calls = sorted((c for c in semantic.index.nodes(cst.Call) if getattr(c.func, "value", None) == "model"),
                   key=semantic.index.order.__getitem__)
    assert len(semantic.enclosing_loops(calls[0], comprehensions=True)) == 1
    assert semantic.enclosing_loops(calls[1], comprehensions=True) == []


def test_tl107_eval_not_undone_message():
    [finding] = lint("""
        import torch, torch.nn as nn
        model = nn.Sequential(nn.Linear(4, 4), nn.Dropout(0.1))
        opt = torch.optim.SGD(model.parameters(), lr=0.1)
        for epoch in range(2):
            model(x).sum().backward()
            opt.step()
            model.eval()
    """, "TL107")
    assert finding.start.row == 8 and "model.train()" in finding.message and finding.fix is None
