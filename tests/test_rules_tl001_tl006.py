"""TL001 / TL006: the autograd facts (torchlint/analysis/autograd.py), scoping and aliasing traps,
and the fixes (they must parse, and fix what they claim)."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import autograd
from torchlint.analysis.semantic import Semantic
from torchlint.engine import lint_source, select_rules
from torchlint.fixer import fix_text, parses
from torchlint.rules import all_rules


def semantic(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


def codes(source: str, code: str):
    return [(f.start.row, f.start.column) for f in lint_source(textwrap.dedent(source), select=[code])
            if f.code == code]


def rows(source: str, code: str):
    return [row for row, _ in codes(source, code)]


def find_name(sem: Semantic, value: str, occurrence: int = -1) -> cst.Name:
    names = [n for n in sem.index.nodes(cst.Name) if n.value == value]
    return names[occurrence]


def expression(sem: Semantic, code: str) -> cst.BaseExpression:
    """The last expression node in the module whose code is `code`."""
    found = [n for kind in (cst.Call, cst.Name, cst.Attribute, cst.BinaryOperation, cst.Subscript)
             for n in sem.index.nodes(kind) if sem.module.code_for_node(n) == code]
    assert found, code
    return max(found, key=lambda n: sem.index.order[n])


# -- facts ---------------------------------------------------------------------------------------

def test_inplace_method_list_excludes_bookkeeping() -> None:
    for name in ("requires_grad_", "share_memory_", "retain_grad", "detach_", "set_"):
        assert name not in autograd.INPLACE_METHODS
    for name in ("add_", "sub_", "mul_", "div_", "clamp_", "zero_", "fill_", "copy_", "relu_",
                 "sigmoid_", "tanh_", "exp_", "masked_fill_", "index_add_", "scatter_", "normal_",
                 "uniform_"):
        assert name in autograd.INPLACE_METHODS
    assert not autograd.INPLACE_ONLY & autograd.INPLACE_WITH_OUT_OF_PLACE


def test_inplace_method_ignores_module_functions() -> None:
    sem = semantic("""
        import torch
        from torch.nn import init
        torch.nn.init.zeros_(w)
        init.normal_(w)
        torch.relu_(x)
        w.add_(1)
    """)
    calls = sem.index.nodes(cst.Call)
    assert [autograd.inplace_method(sem, c) for c in calls] == [None, None, None, "add_"]


@pytest.mark.parametrize("code, base", [
    ("x[0].view(-1).T", "x"), ("x[:, 1:3]", "x"), ("x[..., None]", "x"), ("x.transpose(0, 1)", "x"),
    ("x[mask]", "x[mask]"), ("x.data", "x.data"), ("x.detach()", "x.detach()"), ("x.clone()", "x.clone()"),
])
def test_view_base(code: str, base: str) -> None:
    node = cst.parse_expression(code)
    assert cst.Module([]).code_for_node(autograd.view_base(node)) == base


def test_leaf_survives_augmented_updates_in_loops() -> None:
    sem = semantic("""
        import torch
        w = torch.randn(3, requires_grad=True)
        b = torch.zeros(3)
        for _ in range(3):
            w -= 0.1 * w.grad
            b += 1
        c = torch.ones(2, requires_grad=True)
        c = c * 2
        use(w, b, c)
    """)
    w, b, c = [a.value for a in sem.index.nodes(cst.Call)[-1].args]
    assert sem.values.of(w).is_leaf_requiring_grad  # an in-place update keeps the leaf
    assert not sem.values.of(b).requires_grad
    assert sem.values.of(c).autograd == "graph"  # rebound to a result with a graph


def test_parameter_loops() -> None:
    sem = semantic("""
        def f(model, other):
            for p in model.parameters():
                p.add_(1)
            for n, q in model.named_parameters():
                q.add_(1)
            for r in other:
                r.add_(1)
            for s, t in zip(model.parameters(), other.parameters()):
                s.add_(1)
    """)
    leaf = [sem.values.of(find_name(sem, n)).is_leaf_requiring_grad for n in "pqrs"]
    # `zip` of two parameter iterators gives parameters too.
    assert leaf == [True, True, False, True]


def test_loop_variable_reused_for_something_else() -> None:
    sem = semantic("""
        def f(model, tensors):
            for p in model.parameters():
                pass
            for p in tensors:
                p.add_(1)
    """)
    assert not sem.values.of(find_name(sem, "p")).is_leaf_requiring_grad


def test_grad_mode_follows_callers() -> None:
    sem = semantic("""
        import torch
        def inner(model):
            for p in model.parameters():
                p.add_(1)
        def outer(model):
            inner(model)
        def train(model):
            with torch.no_grad():
                outer(model)
        def alone(model):
            for p in model.parameters():
                p.add_(1)
    """)
    calls = [c for c in sem.index.nodes(cst.Call) if autograd.inplace_method(sem, c)]
    assert sem.values.grad_mode(calls[0]) == "off"
    assert sem.values.grad_mode(calls[1]) == "inherited"


def test_forward_input_aliases_and_rebinding() -> None:
    sem = semantic("""
        import torch.nn as nn
        class M(nn.Module):
            def forward(self, x, y, z):
                a = x
                b = y.view(-1)
                z = z.clone()
                c = x * 2
                a.add_(1); b.add_(1); z.add_(1); c.add_(1)
                def helper(x):
                    x.add_(1)
                self.add_(1)
    """)
    receivers = [c.func.value for c in sem.index.nodes(cst.Call) if autograd.inplace_method(sem, c)]
    found = [autograd.forward_input(sem, sem.values.of(autograd.view_base(r)), r) for r in receivers]
    names = [p.name.value if p is not None else None for p in found]
    assert names == ["x", "y", None, None, None, None]


def test_forward_input_only_in_module_forward() -> None:
    sem = semantic("""
        import torch.nn as nn
        class NotModule:
            def forward(self, x):
                x.add_(1)
        class M(nn.Module):
            def helper(self, x):
                x.add_(1)
    """)
    receivers = [c.func.value for c in sem.index.nodes(cst.Call) if autograd.inplace_method(sem, c)]
    assert [autograd.forward_input(sem, sem.values.of(r), r) for r in receivers] == [None, None]


GRAPH, INPUT, NEITHER = "carries a graph", "an input as it is", "neither"


@pytest.mark.parametrize("code, kind", [
    ("self.fc(x)", GRAPH),
    ("self.fc(x).sigmoid()", GRAPH),
    ("torch.tanh(x)", GRAPH),
    ("x @ w", GRAPH),
    ("h", GRAPH),
    ("h.cpu()", GRAPH),
    ("h[:, 0]", GRAPH),
    ("t", GRAPH),
    ("x", INPUT),
    ("x * 2", INPUT),
    ("h.detach()", NEITHER),
    ("h.detach().cpu()", NEITHER),
    ("h.clone().detach()", NEITHER),
    ("h.item()", NEITHER),
    ("h.shape", NEITHER),
    ("h.size(0)", NEITHER),
    ("h.argmax(-1)", NEITHER),
    ("torch.zeros_like(h)", NEITHER),
    ("self.other", NEITHER),
    ("n", NEITHER),
    ("nn.Linear(4, 4)", NEITHER),
    ("nn.Parameter(h)", NEITHER),
])
def test_values_in_forward(code: str, kind) -> None:
    sem = semantic(f"""
        import torch
        import torch.nn as nn
        from torch import Tensor
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(4, 4)
            def forward(self, x, t: Tensor, w, n: int = 3):
                h = self.fc(x)
                probe = {{code}}
    """.replace("{code}", code))
    value = sem.values.of(sem.index.nodes(cst.Assign)[-1].value)
    found = GRAPH if autograd.caches_graph(value) else (INPUT if value.kind == "input" else NEITHER)
    assert found == kind


def test_values_through_tuple_unpacking_and_branches() -> None:
    sem = semantic("""
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.LSTM(4, 4)
            def forward(self, x, flag):
                out, (h, c) = self.rnn(x)
                if flag:
                    y = self.rnn(x)[0]
                else:
                    y = out * 2
                z = None
                if flag:
                    z = out
                a, b = x, 1
                probe = (out, h, y, z, a, b)
    """)
    probe = sem.index.nodes(cst.Assign)[-1].value
    kinds = [autograd.caches_graph(sem.values.of(e.value)) for e in probe.elements]
    assert kinds == [True] * 4 + [False, False]


def test_wrap_in_no_grad_indents_nested_code() -> None:
    source = textwrap.dedent("""\
        import torch

        class T:
            def step(self, model, lr):
                # update
                for p in model.parameters():
                    if p.grad is None:  # skip
                        continue

                    p -= lr * p.grad
                return 1
    """)
    sem = Semantic(cst.parse_module(source))
    loop = sem.index.nodes(cst.For)[0]
    text = autograd.wrap_in_no_grad(sem, loop)
    assert text == (
        "with torch.no_grad():\n"
        "            for p in model.parameters():\n"
        "                if p.grad is None:  # skip\n"
        "                    continue\n"
        "\n"
        "                p -= lr * p.grad\n"
    )


def test_wrap_in_no_grad_refuses_multiline_strings_and_missing_torch() -> None:
    sem = semantic('''
        import torch
        for p in model.parameters():
            """doc
            string"""
            p.add_(1)
    ''')
    assert autograd.wrap_in_no_grad(sem, sem.index.nodes(cst.For)[0]) is None
    sem = semantic("""
        import torch as th
        for p in model.parameters():
            p.add_(1)
    """)
    assert autograd.wrap_in_no_grad(sem, sem.index.nodes(cst.For)[0]) is None


# -- rule behaviour: traps ---------------------------------------------------------------------

def test_tl001_shadowed_torch_no_grad_is_not_no_grad() -> None:
    source = """
        import torch
        import contextlib
        no_grad = contextlib.nullcontext
        w = torch.zeros(3, requires_grad=True)
        with no_grad():
            w.add_(1)
    """
    assert rows(source, "TL001") == [7]


def test_tl001_imported_no_grad_alias() -> None:
    source = """
        from torch import no_grad as ng
        import torch
        w = torch.zeros(3, requires_grad=True)
        with ng():
            w.add_(1)
    """
    assert rows(source, "TL001") == []


def test_tl001_comprehension_variable_is_not_the_parameter() -> None:
    source = """
        import torch
        def f(model, xs):
            for p in model.parameters():
                pass
            return [p.add_(1) for p in xs]
    """
    assert rows(source, "TL001") == []


def test_tl001_self_parameter_in_forward() -> None:
    source = """
        import torch
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.w = nn.Parameter(torch.ones(3))
                self.b = torch.zeros(3)
            def forward(self, x):
                self.w.clamp_(0, 1)
                self.b.add_(1)
                self.w.data.clamp_(0, 1)
                return x * self.w
    """
    assert rows(source, "TL001") == [10]


def test_tl006_nested_function_in_forward_is_not_forward() -> None:
    source = """
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
            def forward(self, x):
                def hook(grad):
                    self.grad_seen = grad
                h = self.fc(x)
                h.register_hook(hook)
                return h
    """
    assert rows(source, "TL006") == []


def test_tl006_helper_method_call_is_unknown() -> None:
    source = """
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
            def shapes(self, x):
                return x.shape
            def forward(self, x):
                self.s = self.shapes(x)
                return self.fc(x)
    """
    assert rows(source, "TL006") == []


# -- fixes -------------------------------------------------------------------------------------

def fixed(source: str, code: str) -> str:
    outcome = fix_text(textwrap.dedent(source), "<test>", select_rules([code]), unsafe=True)
    assert not outcome.invalid
    assert parses(outcome.text)
    return outcome.text


def test_tl001_fix_forward_input_rebinds() -> None:
    text = fixed("""
        import torch.nn as nn
        from torch import Tensor
        class M(nn.Module):
            def forward(self, x, y: Tensor, z):
                x.add_(y, alpha=2)
                y *= x + 1
                z.zero_()
                return x + z
    """, "TL001")
    assert "x = x.add(y, alpha=2)" in text
    assert "y = y * (x + 1)" in text
    assert "z.zero_()" in text  # no out-of-place twin: no fix


def test_tl001_fix_wraps_parameter_loop_and_leaf_statement() -> None:
    text = fixed("""
        import torch
        w = torch.randn(3, requires_grad=True)
        for step in range(3):
            (w * 2).sum().backward()
            w -= 0.1 * w.grad  # update
            w.grad.zero_()

        def sgd(model, lr):
            for p in model.parameters():
                p.sub_(lr * p.grad)
                p.mul_(0.99)
    """, "TL001")
    assert "    with torch.no_grad():\n        w -= 0.1 * w.grad  # update\n" in text
    assert ("    with torch.no_grad():\n        for p in model.parameters():\n"
            "            p.sub_(lr * p.grad)\n            p.mul_(0.99)\n") in text
    assert lint_source(text, select=["TL001"]) == []


def test_tl001_no_loop_fix_when_the_loop_backpropagates() -> None:
    source = textwrap.dedent("""
        import torch
        def f(model, batches, lr):
            for p in model.parameters():
                model(batches).sum().backward()
                p.sub_(lr * p.grad)
    """)
    findings = lint_source(source, select=["TL001"])
    assert len(findings) == 1 and findings[0].fix is None


def test_tl006_fix_detaches() -> None:
    text = fixed("""
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
                self.cache = []
            def forward(self, x):
                h = self.fc(x)
                self.last = h
                self.both = h * 2 + 1
                self.cache.append(h.sigmoid())
                self.table["k"] = h
                out, self.state = self.fc(x), h
                return h
    """, "TL006")
    assert "self.last = h.detach()" in text
    assert "self.both = (h * 2 + 1).detach()" in text
    assert "self.cache.append(h.sigmoid().detach())" in text
    assert 'self.table["k"] = h.detach()' in text
    assert "out, self.state = self.fc(x), h.detach()" in text


def test_tuple_target_has_no_fix() -> None:
    source = textwrap.dedent("""
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.rnn = nn.GRU(2, 2)
            def forward(self, x):
                out, self.h = self.rnn(x)
                return out
    """)
    findings = lint_source(source, select=["TL006"])
    assert len(findings) == 1 and findings[0].fix is None


# -- metadata ----------------------------------------------------------------------------------

@pytest.mark.parametrize("code", ["TL001", "TL006"])
def test_docs_and_metadata(code: str) -> None:
    rule = next(r for r in all_rules() if r.code == code)
    for section in ("## What it does", "## Why is this bad?", "## Example", "Use instead:",
                    "## Fix safety", "## References"):
        assert section in rule.docs
    assert rule.fix_availability == "sometimes"
    assert rule.confirmation_module == code.lower()


def test_docs_quote_measured_errors() -> None:
    rules = {r.code: r for r in all_rules()}
    assert "a leaf Variable that requires grad is being used in an in-place operation." in rules["TL001"].docs
    assert "one of the variables needed for gradient computation" in rules["TL001"].docs
    assert "Trying to backward through the graph a second time" in rules["TL006"].docs
