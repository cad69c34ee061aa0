"""Unit tests for the shared semantic layer, including aliasing and scoping traps."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import training
from torchlint.analysis.semantic import Semantic
from torchlint.analysis.scopes import dotted_name


def model(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


def names(semantic: Semantic, spelled: str):
    """Name/Attribute nodes whose dotted spelling is `spelled`, in document order."""
    nodes = [n for t in (cst.Name, cst.Attribute) for n in semantic.index.nodes(t) if dotted_name(n) == spelled]
    return sorted(nodes, key=semantic.index.order.__getitem__)


def calls(semantic: Semantic, spelled: str):
    return [c for c in semantic.index.nodes(cst.Call) if dotted_name(c.func) == spelled]


# -- import resolution --------------------------------------------------------------------------

@pytest.mark.parametrize("source, spelled, expected", [
    ("import torch\ntorch.optim.SGD", "torch.optim.SGD", "torch.optim.SGD"),
    ("import torch as T\nT.optim.SGD", "T.optim.SGD", "torch.optim.SGD"),
    ("import torch.nn as nn\nnn.Linear", "nn.Linear", "torch.nn.Linear"),
    ("import torch.nn\ntorch.nn.Linear", "torch.nn.Linear", "torch.nn.Linear"),
    ("from torch import optim\noptim.Adam", "optim.Adam", "torch.optim.Adam"),
    ("from torch.optim import SGD\nSGD", "SGD", "torch.optim.SGD"),
    ("from torch.optim import SGD as S\nS", "S", "torch.optim.SGD"),
    ("import torch.nn.functional as F\nF.relu", "F.relu", "torch.nn.functional.relu"),
    ("from torch.nn import functional as F\nF.relu", "F.relu", "torch.nn.functional.relu"),
    ("import torch\nF = torch.nn.functional\nF.relu", "F.relu", "torch.nn.functional.relu"),
    ("from torch import nn\nnn.Module", "nn.Module", "torch.nn.Module"),
])
def test_qualified_names(source, spelled, expected):
    semantic = model(source)
    node = names(semantic, spelled)[-1]
    assert semantic.qualified_name(node) == expected


def test_unimported_name_is_unknown():
    semantic = model("torch.zeros(3)\n")
    assert semantic.qualified_name(names(semantic, "torch.zeros")[0]) is None


def test_relative_and_star_imports_resolve_nothing():
    semantic = model("from . import torch\nfrom torch.nn import *\ntorch.zeros\nLinear\n")
    assert semantic.qualified_name(names(semantic, "torch.zeros")[0]) is None
    assert semantic.qualified_name(names(semantic, "Linear")[0]) is None


def test_parameter_shadows_module_import():
    semantic = model("""
        import torch.nn as nn
        def f(nn):
            return nn.Linear
        def g():
            return nn.Linear
    """)
    inside_f, inside_g = names(semantic, "nn.Linear")
    assert semantic.qualified_name(inside_f) is None
    assert semantic.qualified_name(inside_g) == "torch.nn.Linear"


def test_local_assignment_shadows_import():
    semantic = model("""
        import torch
        def f():
            torch = make_fake()
            return torch.zeros(1)
    """)
    assert semantic.qualified_name(names(semantic, "torch.zeros")[0]) is None


def test_function_level_import():
    semantic = model("""
        def f():
            import torch.optim as O
            return O.SGD
    """)
    assert semantic.qualified_name(names(semantic, "O.SGD")[0]) == "torch.optim.SGD"


def test_class_body_names_are_not_visible_in_methods():
    semantic = model("""
        import torch
        class A:
            torch = None
            def m(self):
                return torch.zeros(1)
    """)
    assert semantic.qualified_name(names(semantic, "torch.zeros")[0]) == "torch.zeros"


def test_is_torch_patterns():
    semantic = model("from torch import optim\nopt = optim.AdamW(ps)\n")
    call = calls(semantic, "optim.AdamW")[0]
    assert semantic.is_torch(call, "torch.optim.*")
    assert not semantic.is_torch(call, "torch.nn.*")


# -- modules ------------------------------------------------------------------------------------

def test_module_classes_direct_alias_and_transitive():
    semantic = model("""
        import torch
        from torch import nn as N
        import lightning as L
        class A(torch.nn.Module): pass
        class B(N.Module): pass
        class C(A): pass
        class D(N.Sequential): pass
        class E(L.LightningModule): pass
        class NotModule(object): pass
        class Param(N.Parameter): pass
    """)
    found = {c.name.value for c in semantic.module_classes()}
    assert found == {"A", "B", "C", "D", "E"}


def test_forward_and_init_membership():
    semantic = model("""
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(2, 2)
            def forward(self, x):
                def inner():
                    return x
                return self.fc(x)
        class Plain:
            def forward(self, x):
                return x
    """)
    fc_call = [c for c in semantic.index.nodes(cst.Call) if dotted_name(c.func) == "self.fc"][0]
    assert semantic.is_module_method(fc_call, "forward")
    assert not semantic.is_module_method(fc_call, "__init__")
    plain_return = [r for r in semantic.index.nodes(cst.Return)][-1]
    assert not semantic.is_module_method(plain_return, "forward")
    inner_return = semantic.index.nodes(cst.Return)[0]
    assert semantic.is_module_method(inner_return, "forward")


def test_names_bound_to_modules():
    semantic = model("""
        import torch.nn as nn
        import torchvision
        class Net(nn.Module): pass
        def f(device):
            a = Net().to(device)
            b = nn.Linear(1, 2)
            c = torchvision.models.resnet18()
            d = make_model()
            e = a
            return a, b, c, d, e
    """)
    ret = semantic.index.nodes(cst.Return)[-1]
    elements = [e.value for e in ret.value.elements]
    assert [semantic.values.of(e).kind == "module" for e in elements] == [True, True, True, False, True]


def test_self_attribute_module():
    semantic = model("""
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.fc = nn.Linear(1, 1)
                self.scale = 2.0
            def forward(self, x):
                return self.fc, self.scale
    """)
    ret = semantic.index.nodes(cst.Return)[-1]
    fc, scale = [e.value for e in ret.value.elements]
    assert semantic.values.of(fc).kind == "module"
    assert semantic.values.of(scale).kind == "number"


# -- optimizers ---------------------------------------------------------------------------------

def test_optimizer_names_attributes_and_parameters():
    semantic = model("""
        import torch
        from torch.optim import lr_scheduler
        class Trainer:
            def __init__(self, model):
                self.opt = torch.optim.SGD(model.parameters(), lr=0.1)
                self.sched = lr_scheduler.StepLR(self.opt, 1)
            def step(self, optimizer, other):
                local = torch.optim.Adam([])
                return self.opt, self.sched, optimizer, other, local
    """)
    ret = semantic.index.nodes(cst.Return)[-1]
    values = [e.value for e in ret.value.elements]
    assert [training.is_optimizer(semantic, v) for v in values] == [True, False, True, False, True]


def test_optimizer_shadowed_module_name():
    semantic = model("""
        def f(optim):
            o = optim.SGD([])
            return o
    """)
    ret = semantic.index.nodes(cst.Return)[-1]
    assert not training.is_optimizer(semantic, ret.value)


# -- tensors requiring grad ---------------------------------------------------------------------

def test_requires_grad_leaves():
    semantic = model("""
        import torch
        import torch.nn as nn
        def f(model, x):
            a = torch.zeros(3, requires_grad=True)
            b = torch.zeros(3)
            c = nn.Parameter(torch.randn(2))
            d = torch.randn(3).requires_grad_()
            e = torch.from_numpy(x)
            g = nn.Parameter(torch.randn(2), requires_grad=False)
            return a, b, c, d, e, g
    """)
    ret = semantic.index.nodes(cst.Return)[-1]
    values = [e.value for e in ret.value.elements]
    assert [semantic.values.of(v).is_leaf_requiring_grad for v in values] == [True, False, True, True, False, False]


def test_parameter_loop_variables():
    semantic = model("""
        def f(model):
            for p in model.parameters():
                use(p)
            for name, q in model.named_parameters():
                use(q, name)
            for r in model.buffers():
                use(r)
    """)
    uses = [c.args[0].value for c in calls(semantic, "use")]
    assert [semantic.values.of(u).is_leaf_requiring_grad for u in uses] == [True, True, False]


# -- grad mode ----------------------------------------------------------------------------------

def test_grad_mode_blocks_and_decorators():
    semantic = model("""
        import torch
        from torch import no_grad
        def a(x):
            with torch.no_grad():
                use(x)
            use(x)
        @torch.inference_mode()
        def b(x):
            use(x)
        @no_grad()
        def c(x):
            def inner():
                use(x)
        def d(x, flag):
            with torch.set_grad_enabled(flag):
                use(x)
            with torch.no_grad():
                with torch.enable_grad():
                    use(x)
    """)
    modes = [semantic.values.lexical_grad_mode(c) for c in calls(semantic, "use")]
    # A nested def runs whenever it is called: the block around its definition does not apply.
    assert modes == ["off", None, "off", None, "unknown", "on"]


def test_grad_mode_with_alias_shadowed():
    semantic = model("""
        def f(torch, x):
            with torch.no_grad():
                use(x)
    """)
    assert semantic.values.lexical_grad_mode(calls(semantic, "use")[0]) is None


# -- loops --------------------------------------------------------------------------------------

def test_enclosing_loops_stop_at_function():
    semantic = model("""
        for epoch in range(3):
            while True:
                use(1)
            def helper():
                use(2)
    """)
    first, second = calls(semantic, "use")
    assert [type(l).__name__ for l in semantic.enclosing_loops(first)] == ["While", "For"]
    assert semantic.enclosing_loops(second) == []


def test_calls_under_follow_same_file_functions():
    semantic = model("""
        def clear(opt):
            opt.zero_grad()
        class T:
            def reset(self):
                self.opt.zero_grad()
            def fit(self):
                for b in data:
                    self.reset()
        for batch in data:
            clear(opt)
            loss.backward()
    """)
    loops = semantic.index.nodes(cst.For)
    inner_calls = {dotted_name(c.func) for c in semantic.calls_under(loops[1])}
    assert {"clear", "opt.zero_grad", "loss.backward"} <= inner_calls
    method_loop_calls = {dotted_name(c.func) for c in semantic.calls_under(loops[0])}
    assert "self.opt.zero_grad" in method_loop_calls
    assert any(semantic.is_zero_grad_call(c) for c in semantic.calls_under(loops[1]))
    assert any(semantic.is_backward_call(c) for c in semantic.calls_under(loops[1]))


def test_calls_under_handles_recursion():
    semantic = model("""
        def a():
            b()
        def b():
            a()
        for x in y:
            a()
    """)
    loop = semantic.index.nodes(cst.For)[0]
    assert len(semantic.calls_under(loop)) == 3


# -- dataflow -----------------------------------------------------------------------------------

def reaching(source: str, name: str = "y"):
    semantic = model(source)
    use = [c.args[0].value for c in calls(semantic, "use")][-1]
    assert isinstance(use, cst.Name) and use.value == name
    definition = semantic.reaching_definition(use)
    if definition is None:
        return None
    if definition.kind == "assign":
        if definition.path != ():
            return "unpack"
        return semantic.module.code_for_node(definition.value)
    return definition.kind


@pytest.mark.parametrize("body, expected", [
    ("y = a\nuse(y)", "a"),
    ("y = a\ny = b\nuse(y)", "b"),
    ("y = a\nif c:\n    y = b\nuse(y)", None),
    ("y = a\nif c:\n    use(y)", "a"),
    ("if c:\n    y = b\n    use(y)", "b"),
    ("y = a\nfor i in r:\n    use(y)\n    y = b", None),
    ("for i in r:\n    y = b\n    use(y)\n    y = c", "b"),
    ("y = a\ntry:\n    y = b\nexcept E:\n    pass\nuse(y)", None),
    ("with m() as y:\n    use(y)", "with"),
    ("with ctx():\n    y = a\nuse(y)", "a"),
    ("y = a; use(y)", "a"),
    ("y, z = a\nuse(y)", "unpack"),
    ("y = a\ny += 1\nuse(y)", "augassign"),
    ("y = a\ndef inner():\n    y = b\nuse(y)", "a"),
    ("y = a\n[y for y in r]\nuse(y)", "a"),  # the comprehension's `y` is its own
    ("use(y)", "param"),
])
def test_reaching_definition(body, expected):
    source = "def f(y=None, a=1, b=2, c=3, r=(), m=None, E=Exception, z=0):\n" + textwrap.indent(body, "    ") + "\n"
    assert reaching(source) == expected


def test_reaching_definition_module_level_is_unknown_without_assignment():
    assert reaching("use(y)\n") is None


def test_assigned_value_follows_copies():
    semantic = model("def f(x):\n    a = x.t()\n    b = a\n    use(b)\n")
    use = calls(semantic, "use")[0].args[0].value
    assert semantic.module.code_for_node(semantic.assigned_value(use)) == "x.t()"


# -- index queries ---------------------------------------------------------------------------------

def test_descendants_in_document_order_and_mentions():
    semantic = model("def f(x):\n    a = g(x)\n    if a:\n        b = h(a, k(x))\n    return b\n")
    function = semantic.index.nodes(cst.FunctionDef)[0]
    spelled = [semantic.module.code_for_node(c.func) for c in semantic.index.descendants(function, cst.Call)]
    assert spelled == ["g", "h", "k"]
    mixed = semantic.index.descendants(function, (cst.Return, cst.If))
    assert [type(n).__name__ for n in mixed] == ["If", "Return"]
    branch = semantic.index.nodes(cst.If)[0]
    assert semantic.index.mentions(branch, "b") and not semantic.index.mentions(branch, "g")
    assert list(semantic.index.descendants(branch, cst.BaseSmallStatement))  # abstract: walked


def test_source_is_the_text_as_the_file_has_it():
    text = ("class A:\n"
            "\tdef f(self):\n"
            "\t\tif x:\n"
            "\t\t\ty = {\n"
            "\t\t\t    'a': 1,  # kept\n"
            "\t\t\t}\n")
    semantic = model(text)
    value = semantic.index.nodes(cst.Dict)[0]
    assert semantic.source(value) == "{\n\t\t\t    'a': 1,  # kept\n\t\t\t}"
    assert semantic.source(value) in text
    assert semantic.module.code_for_node(value) not in text  # why source() exists


# -- shapes ----------------------------------------------------------------------------------------

def last_view(semantic: Semantic, spelled_from: str = "") -> cst.Call:
    """The last `.view(...)` call whose source starts with `spelled_from`."""
    return [c for c in semantic.index.nodes(cst.Call) if isinstance(c.func, cst.Attribute)
            and c.func.attr.value == "view" and semantic.module.code_for_node(c).startswith(spelled_from)][-1]


@pytest.mark.parametrize("body, splits", [
    ("B, N, C = x.shape\ny = x.transpose(1, 2).view(B, C, H, W)", True),
    ("B, N, C = x.size()\ny = x.permute(0, 2, 1).view(B, C, -1, 2)", True),
    ("B, N, C = x.shape\ny = x.transpose(-1, -2).view(B, 1, C, H, W)", True),
    ("B, N, C = x.shape\ny = x.movedim(2, 1).view(B, C, *size)", True),
    ("x = z.view(B, H * W, C)\ny = x.transpose(1, 2).view(B, C, H, W)", True),
    ("B, N, C = x.shape\ny = x.mT.view(B, C, H, W)", True),
    ("B, N, C = x.shape\ny = x.transpose(1, 2).view(B, -1)", False),
    ("B, N, C = x.shape\ny = x.transpose(0, 2).view(C, N * B)", False),
    ("B, N, C = x.shape\nC = 4\ny = x.transpose(1, 2).view(B, C, H, W)", False),
    ("B, N, C = z.shape\ny = x.transpose(1, 2).view(B, C, H, W)", False),
    ("y = x.transpose(1, 2).view(B, C, H, W)", False),
    ("B, N, C = x.shape\ny = x.transpose(1, d).view(B, C, H, W)", False),
])
def test_view_only_splits(body, splits):
    from torchlint.analysis import shapes

    source = "def f(x, z, H, W, B, C, d, size):\n" + textwrap.indent(body, "    ") + "\n"
    semantic = model(source)
    view = last_view(semantic, "x.")
    dims = semantic.values.of(view.func.value).shape
    assert (dims is not None and shapes.view_only_splits(semantic, dims, view)) is splits


@pytest.mark.parametrize("body, must_merge", [
    # fewer sizes than the in-order runs left by the permutation: must merge across a break
    ("y = x.transpose(0, 1).view(-1)", True),
    ("y = x.permute(0, 2, 3, 1).view(n, -1)", True),
    ("y = x.permute(0, 2, 3, 1).view(-1, c)", True),
    ("y = x.transpose(1, 2).view(b, n, c)", True),  # rank >= 3: a no-op at 3, a merge above
    ("y = x.mT.view(b, -1)", True),
    ("y = x.T.view(-1)", True),
    ("y = x.t().view(-1)", True),
    ("y = torch.transpose(x, 1, 2).view(b, -1)", True),
    ("y = x.permute([0, 2, 1, 3]).view((b, n, -1))", True),
    ("y = x.swapaxes(-1, -2).view(b, -1)", True),
    ("y = x.transpose(0, 1).view(x.size(1) * x.size(0))", True),
    # may only split, or merge dimensions that stayed in order
    ("y = x.permute(0, 2, 3, 1).view(1, -1, c)", False),
    ("y = x.permute(1, 2, 0).view(b, -1, h, w)", False),
    ("y = x.transpose(1, 2).view(b, c, h, w)", False),
    ("y = x.T.view(h, -1, k)", False),
    ("y = x.movedim(1, -1).view(-1, c)", False),  # a no-op at rank 2
    ("y = x.t().view(a, b)", True),  # on a transposed matrix, a no-op or a failure
    # not spelled out: arity, arguments or operation unknown
    ("y = x.transpose(1, 2).view(*shape)", False),
    ("y = x.transpose(1, 2).view(shape)", False),
    ("y = x.transpose(1, 2).view(x.size())", False),
    ("y = x.transpose(1, d).view(-1)", False),
    ("y = x.permute(*order).view(-1)", False),
    ("y = x.transpose(1, 5).view(b, -1)", True),
])
def test_view_must_merge_reordered(body, must_merge):
    from torchlint.analysis import shapes

    source = "import torch\n\ndef f(x, a, b, c, d, h, k, n, w, shape, order):\n" + textwrap.indent(body, "    ") + "\n"
    semantic = model(source)
    view = last_view(semantic)
    layout = semantic.values.of(view.func.value).layout
    assert (layout.state == "permuted" and shapes.view_must_merge_reordered(layout, view)) is must_merge


def test_view_must_merge_uses_a_known_rank():
    from torchlint.analysis import shapes

    semantic = model("def f(x):\n    B, C, H, W = x.shape\n    y = x.movedim(1, -1).view(-1, C)\n")
    view = last_view(semantic)
    layout = semantic.values.of(view.func.value).layout
    assert layout.base_rank == 4 and shapes.view_must_merge_reordered(layout, view)


def test_calls_named_finds_function_and_method_calls_in_document_order():
    from torchlint.analysis.index import Index
    from torchlint.parsing import parse_module

    module = parse_module("a.f().step()\nstep(x)\nopt.step\nx.step(y.append(1))\nappend = 1\n")
    index = Index(module)
    found = index.calls_named(("step", "append", "f"))
    assert [module.code_for_node(call) for call in found] == [
        "a.f().step()", "a.f()", "step(x)", "x.step(y.append(1))", "y.append(1)"]
    assert found == [call for call in index.nodes(cst.Call) if call in found]


def test_candidate_lists_leave_every_finding_of_the_fixtures(monkeypatch):
    """A rule handed only its candidates (`called_names`, its own `candidates`) reports what it
    reports when it looks at every node of its types."""
    from pathlib import Path

    from torchlint import engine
    from torchlint.startup import import_rules

    def findings():
        found = []
        for path in sorted((Path(__file__).resolve().parent.parent / "fixtures").rglob("*.py")):
            for f in engine.lint_source(path.read_text(encoding="utf-8"), str(path)):
                found.append((str(path), f.code, f.start, f.end, f.message))
        return found

    with_candidates = findings()
    for rule in import_rules().all_rules():
        monkeypatch.setattr(type(rule), "candidates", lambda self, node_type, semantic: None)
    assert findings() == with_candidates
    assert any(code in ("TL001", "TL002", "TL003") for _, code, *_ in with_candidates)
