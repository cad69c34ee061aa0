"""The value model (torchlint/analysis/interpreter.py): each facet, the interprocedural summaries,
joins and cycles — and the layout claims it relies on, each checked against torch itself."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from importlib.util import find_spec
from pathlib import Path

import libcst as cst
import pytest

from torchlint.analysis.semantic import Semantic

ROOT = Path(__file__).resolve().parent.parent
HAS_TORCH = find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAS_TORCH, reason="torch is not installed")


def model(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


def probe(source: str, name: str = "probe"):
    """The value of the expression assigned to `probe` (the last such assignment)."""
    semantic = model(source)
    assigns = [a for a in semantic.index.nodes(cst.Assign)
               if isinstance(a.targets[0].target, cst.Name) and a.targets[0].target.value == name]
    return semantic.values.of(assigns[-1].value)


# -- layout: every claim measured on torch ---------------------------------------------------------
#
# `p` is a (4, 6, 5) tensor made by `x.permute(0, 2, 1)` from a contiguous (4, 5, 6) one, `c` a
# contiguous (4, 6, 5) one. Each expression: is its result laid out like `p` (non-contiguous,
# "permuted") or in order? The value model must say what torch does.
LAYOUT_CLAIMS = [
    ("p + c", True),  # the first operand decides the strides of an element-wise result
    ("c + p", False),
    ("p * 2", True),
    ("2 * p", True),
    ("p.eq(c)", True),  # comparisons are element-wise too
    ("p == c", True),
    ("torch.where(p > 0, p, c)", True),
    ("p[:2]", True),  # basic slicing keeps the strides
    ("p[:, :3]", True),
    ("p[0]", True),
    ("p.clone()", True),  # preserve_format
    ("p.detach()", True),
    ("p.float()", True),
    ("p.half()", True),
    ("p.to(torch.float64)", True),
    ("torch.randn_like(p)", True),
    ("torch.zeros_like(p)", True),
    ("p.exp()", True),
    ("torch.sigmoid(p)", True),
    ("F.relu(p)", True),
    ("F.gelu(p)", True),
    ("F.dropout(p, 0.5)", True),
    ("F.normalize(p, dim=-1)", True),
    ("torch.randn_like(p) * p.exp() + p", True),  # a VAE's `eps * std + mu` with a permuted mu
    ("p.contiguous()", False),
    ("p.reshape(4, 30)", False),
    ("p.flatten(1)", False),
    ("p.sum(1)", False),  # reductions allocate in order
    ("p.mean(-1)", False),
    ("p.softmax(-1)", False),  # so do softmax, layer_norm, masked_fill, matmul, cat
    ("F.softmax(p, 1)", False),
    ("p.log_softmax(-1)", False),
    ("F.layer_norm(p, (5,))", False),
    ("p.masked_fill(p > 0, 0)", False),
    ("p @ c.transpose(1, 2)", False),
    ("torch.cat([p, p])", False),
    ("p.transpose(1, 2)", False),  # undoing the permutation
    ("p.new_zeros(p.shape)", False),
]

_RUNTIME = """
import json, sys, warnings
warnings.filterwarnings("ignore")
import torch
import torch.nn.functional as F
x = torch.randn(4, 5, 6)
p = x.permute(0, 2, 1)
c = torch.randn(4, 6, 5)
print(json.dumps([not eval(e).is_contiguous() for e in json.loads(sys.argv[1])]))
"""


def _static_permuted(expr: str) -> bool:
    value = probe(f"""
        import torch
        import torch.nn.functional as F
        from torch import Tensor
        def f(x: Tensor, c: Tensor):
            p = x.permute(0, 2, 1)
            probe = {expr}
    """)
    assert value.layout.state in ("permuted", "contiguous"), (expr, value.layout)
    return value.layout.state == "permuted"


@pytest.mark.parametrize("expr, permuted", LAYOUT_CLAIMS)
def test_layout_claims_statically(expr, permuted):
    assert _static_permuted(expr) is permuted


@needs_torch
def test_layout_claims_hold_on_torch():
    expressions = [e for e, _ in LAYOUT_CLAIMS]
    done = subprocess.run([sys.executable, "-c", _RUNTIME, json.dumps(expressions)], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    measured = json.loads(done.stdout)
    wrong = [(e, claimed) for (e, claimed), seen in zip(LAYOUT_CLAIMS, measured) if claimed is not seen]
    assert not wrong, f"claims that torch contradicts: {wrong}"


# The real-code forms of fixtures/TL004/through_ops_and_methods.py, run on torch: each flagged
# function raises the view error, each near-miss runs.
_FORMS = """
import importlib.util, json, sys, warnings
warnings.filterwarnings("ignore")
import torch
spec = importlib.util.spec_from_file_location("forms", sys.argv[1])
m = importlib.util.module_from_spec(spec)
spec.loader.exec_module(m)
out, target = torch.randn(8, 10), torch.randint(0, 10, (8,))
x = torch.randn(2, 8, 8, 3)
cases = {
    "accuracy": lambda: m.accuracy(out, target, (1, 5)),
    "accuracy_fixed": lambda: m.accuracy_fixed(out, target, (1, 5)),
    "accuracy_contiguous": lambda: m.accuracy_contiguous(out, target, 5),
    "ordered_first": lambda: m.ordered_first(torch.randn(4, 5), torch.randn(5, 4)),
    "VAE": lambda: m.VAE(6)(torch.randn(3, 6)),
    "VAEContiguous": lambda: m.VAEContiguous(6)(torch.randn(3, 6)),
    "window_partition": lambda: m.window_partition(x, 4),
    "window_partition_fixed": lambda: m.window_partition_fixed(x, 4),
    "window_split_only": lambda: m.window_split_only(x, 4),
    "heads": lambda: m.heads(torch.randn(2, 3, 4), 0.5),
    "softmax_resets": lambda: m.softmax_resets(torch.randn(2, 3, 4)),
    "double_transpose": lambda: m.double_transpose(torch.randn(2, 3, 4)),
}
raised = {}
for name, run in cases.items():
    try:
        run()
        raised[name] = False
    except RuntimeError as error:
        raised[name] = "view size is not compatible" in str(error)
print(json.dumps(raised))
"""


@needs_torch
def test_tl004_forms_fail_on_torch_where_flagged():
    path = ROOT / "fixtures" / "TL004" / "through_ops_and_methods.py"
    done = subprocess.run([sys.executable, "-c", _FORMS, str(path)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    raised = json.loads(done.stdout)
    assert {name for name, r in raised.items() if r} == {"accuracy", "VAE", "window_partition", "heads"}


# -- kinds -----------------------------------------------------------------------------------------

@pytest.mark.parametrize("expr, kind", [
    ("nn.Linear(2, 2)", "module"),
    ("nn.Linear(2, 2).cuda()", "module"),
    ("torchvision.models.resnet18()", "module"),
    ("timm.create_model('resnet50')", "module"),
    ("nn.CrossEntropyLoss()", "criterion"),
    ("nn.CrossEntropyLoss().cuda()", "criterion"),  # a moved criterion is still a criterion
    ("torch.optim.SGD(m.parameters(), lr=0.1)", "optimizer"),
    ("torch.optim.lr_scheduler.StepLR(opt, 1)", "scheduler"),
    ("DataLoader(ds, batch_size=4)", "loader"),
    ("nn.Parameter(torch.zeros(3))", "parameter"),
    ("torch.zeros(3)", "tensor"),
    ("F.cross_entropy(torch.zeros(3), y)", "loss"),
    ("nn.MSELoss()(m(x), y) * 2", "loss"),
    ("torch.zeros(3).item()", "number"),
    ("[nn.Linear(2, 2)]", "container"),
    ("torch.device('cuda')", "device"),
    ("torch.float16", "dtype"),
])
def test_kinds(expr, kind):
    value = probe(f"""
        import torch, timm, torchvision
        import torch.nn as nn
        import torch.nn.functional as F
        from torch.utils.data import DataLoader
        m = nn.Linear(2, 2)
        opt = torch.optim.SGD(m.parameters(), lr=0.1)
        probe = {expr}
    """)
    assert value.kind == kind


def test_module_facts():
    values = model("""
        import torch.nn as nn, torchvision
        class Block(nn.Module):
            def __init__(self):
                super().__init__()
                self.body = self._make()
            def _make(self):
                return nn.Sequential(nn.Linear(2, 2), nn.BatchNorm1d(2))
        class Head(nn.Module):
            def __init__(self):
                super().__init__()
                self.net = nn.Sequential(nn.Linear(2, 2), nn.Sigmoid())
            def forward(self, x):
                return self.net(x)
        use(Block(), Head(), torchvision.models.alexnet(), nn.Dropout(0.1), nn.ReLU())
    """)
    args = [c for c in values.index.nodes(cst.Call) if getattr(c.func, "value", None) == "use"][0].args
    found = [values.values.of(a.value) for a in args]
    assert [values.values.stochastic_layer(v) is not None for v in found] == [True, False, True, True, False]
    assert values.values.output_activation(found[1]) == "sigmoid"
    assert found[4].module.stateless and not found[3].module.stateless


# -- autograd: the grad mode where a value is made ------------------------------------------------

@pytest.mark.parametrize("body, autograd", [
    ("probe = model(x)", "graph"),
    ("with torch.no_grad():\n    probe = model(x)", "none"),
    ("with torch.inference_mode():\n    out = model(x)\nprobe = out", "none"),  # used outside: still none
    ("out = model(x)\nwith torch.no_grad():\n    probe = out", "graph"),  # made outside: graph
    ("with torch.set_grad_enabled(flag):\n    probe = model(x)", "maybe"),
    ("probe = torch.zeros(3, requires_grad=True)", "leaf"),
    ("probe = torch.zeros(3, requires_grad=True) * 2", "graph"),
    ("probe = model(x).detach()", "none"),
    ("probe = model(x).data", "none"),
    ("probe = torch.zeros(3)", "none"),
    ("probe = model(x).argmax(1)", "none"),
    ("probe = criterion(model(x), y)", "graph"),
    ("with torch.no_grad():\n    probe = criterion(model(x), y)", "none"),
])
def test_autograd_where_made(body, autograd):
    header = textwrap.dedent("""\
        import torch
        import torch.nn as nn
        model = nn.Linear(2, 2)
        criterion = nn.MSELoss()
        def f(x, y, flag):
    """)
    value = probe(header + textwrap.indent(body, "    ") + "\n")
    assert value.autograd == autograd


def test_grad_mode_of_every_caller():
    semantic = model("""
        import torch
        def helper(m, x):
            return m(x)
        def only_no_grad(m, x):
            return m(x)
        def run(m, x):
            with torch.no_grad():
                a = only_no_grad(m, x)
                b = helper(m, x)
            c = helper(m, x)
    """)
    functions = {f.name.value: f for f in semantic.index.nodes(cst.FunctionDef)}
    assert semantic.values.generic_frame(functions["only_no_grad"]).grad == "off"
    assert semantic.values.generic_frame(functions["helper"]).grad == "unknown"
    assert semantic.values.generic_frame(functions["run"]).grad == "inherited"


# -- interprocedural -------------------------------------------------------------------------------

def test_summaries_depend_on_the_arguments():
    semantic = model("""
        import torch
        def swap(t):
            return t.transpose(0, 1)
        def f(x: torch.Tensor):
            a = swap(x)
            b = swap(swap(x))
            c = swap(torch.zeros(2, 3))
    """)
    values = {a.targets[0].target.value: semantic.values.of(a.value) for a in semantic.index.nodes(cst.Assign)
              if isinstance(a.targets[0].target, cst.Name)}
    assert values["a"].layout.state == "permuted"
    assert values["b"].layout.state == "contiguous"  # transposed back
    assert values["c"].layout.state == "permuted" and values["c"].autograd == "none"


def test_parameters_from_every_call_site():
    semantic = model("""
        import torch, torch.nn as nn
        class Net(nn.Module):
            pass
        def test(model, loader, criterion, updater):
            use(model, loader, criterion, updater)
        def main():
            net = Net().cuda()
            loader = torch.utils.data.DataLoader(ds)
            test(net, loader, nn.CrossEntropyLoss(), torch.optim.SGD(net.parameters(), lr=1))
    """)
    use = [c for c in semantic.index.nodes(cst.Call) if getattr(c.func, "value", None) == "use"][0]
    kinds = [semantic.values.of(a.value).kind for a in use.args]
    assert kinds == ["module", "loader", "criterion", "optimizer"]
    assert semantic.values.of(use.args[0].value).device.where == "cuda"


def test_parameters_of_escaping_functions_stay_unknown():
    semantic = model("""
        import torch.nn as nn
        def hook(module, x):
            use(module)
        def main(model):
            model.register_forward_hook(hook)
            hook(nn.Linear(2, 2), 1)
    """)
    use = [c for c in semantic.index.nodes(cst.Call) if getattr(c.func, "value", None) == "use"][0]
    assert semantic.values.of(use.args[0].value).kind != "module"  # other callers are unknown


def test_self_attributes_across_methods_and_builders():
    semantic = model("""
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self, rnn):
                super().__init__()
                self.rnn = rnn
                self.stage = self.build()
                self.layers = [nn.Linear(2, 2) for _ in range(3)]
            def build(self):
                return nn.Sequential(nn.Linear(2, 2))
            def forward(self, x):
                use(self.rnn, self.stage, self.layers[0])
        m = M(nn.GRU(2, 2))
    """)
    use = [c for c in semantic.index.nodes(cst.Call) if getattr(c.func, "value", None) == "use"][0]
    found = [semantic.values.of(a.value) for a in use.args]
    assert [v.kind for v in found] == ["module", "module", "module"]
    assert found[0].module.class_name == "GRU"


def test_tuple_targets_take_their_element():
    value = probe("""
        import torch.nn as nn
        lstm = nn.LSTM(2, 2)
        def f(x):
            out, (h, c) = lstm(x)
            _, indices = out.topk(3, 1)
            probe = indices
    """)
    assert value.is_tensor and value.autograd == "none"  # the indices


# -- joins and cycles ------------------------------------------------------------------------------

def test_branches_join_and_loops_reach_a_fixpoint():
    semantic = model("""
        import torch, torch.nn as nn
        cell = nn.GRUCell(2, 2)
        def f(x, n, flag):
            h = torch.zeros(1, 2)
            for _ in range(n):
                h = cell(x, h)
            a = h
            b = x.t() if flag else x.t()
            c = x.t() if flag else x
            total = 0
            for _ in range(n):
                total = total + cell(x, h).sum()
            d = total
    """)
    values = {a.targets[0].target.value: semantic.values.of(a.value) for a in semantic.index.nodes(cst.Assign)
              if isinstance(a.targets[0].target, cst.Name)}
    assert values["a"].is_tensor and values["a"].autograd == "maybe"  # zeros, or a cell's output
    assert values["b"].layout.state == "permuted"
    assert values["c"].layout.state == "unknown"
    assert values["d"].kind == "unknown"  # a number, or a tensor: not certain


def test_recursion_terminates():
    value = probe("""
        def f(x, n):
            if n == 0:
                return x.t()
            return f(x, n - 1)
        probe = f(y, 3)
    """)
    assert value.kind in ("tensor", "unknown")


def test_a_cycle_recomputes_only_what_depends_on_it():
    """`h` is loop-carried (a cycle solved by iteration); `w` is not. Recomputing the cycle must
    not recompute `w`'s value, and both must come out as before."""
    semantic = model("""
        import torch
        import torch.nn as nn
        cell = nn.RNNCell(4, 8)
        w = torch.zeros(8).permute(0)
        h = torch.zeros(3, 8)
        for x in xs:
            scale = w.sum()
            h = cell(x, h) * scale
        probe = h
    """)
    from torchlint.analysis import interpreter

    values = semantic.values
    evaluated = []
    original = dict(interpreter._HANDLERS)

    def counting(handler):
        def count(self, node, frame):
            evaluated.append(node)
            return handler(self, node, frame)
        return count

    interpreter._HANDLERS.update({kind: counting(handler) for kind, handler in original.items()})
    try:
        probe_node = [a for a in semantic.index.nodes(cst.Assign) if a.targets[0].target.value == "probe"][0]
        value = values.of(probe_node.value)
    finally:
        interpreter._HANDLERS.update(original)
    assert value.is_tensor and value.autograd in ("graph", "maybe")
    sums = [node for node in evaluated if isinstance(node, cst.Call) and semantic.source(node) == "w.sum()"]
    assert len(sums) == 1
    assert not values._tentative and not values._lows and not values._tentative_at
