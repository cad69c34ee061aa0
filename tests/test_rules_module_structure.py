"""Unit tests for the device facts (torchlint/analysis/devices.py) and the module-structure rules
TL005, TL101, TL102, TL103: what counts as a device move, tensor factories, the torch.nn
spelling used by fixes, and the fixes themselves."""

from __future__ import annotations

import textwrap

import libcst as cst
import pytest

from torchlint.analysis import devices
from torchlint.analysis.semantic import Semantic
from torchlint.engine import lint_source
from torchlint.finding import Applicability


def model(source: str) -> Semantic:
    return Semantic(cst.parse_module(textwrap.dedent(source)))


def last_call(sem: Semantic) -> cst.Call:
    calls = sorted(sem.index.nodes(cst.Call), key=sem.index.order.__getitem__)
    outer = [c for c in calls if not any(sem.index.contains(o, c) for o in calls if o is not c)]
    return outer[-1]


def lint(source: str, code: str):
    return [f for f in lint_source(textwrap.dedent(source), select=[code]) if f.code == code]


def apply_fix(source: str, finding) -> str:
    lines = textwrap.dedent(source).splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    text = "".join(lines)
    for edit in sorted(finding.fix.edits, key=lambda e: (e.start.row, e.start.column), reverse=True):
        start = offsets[edit.start.row - 1] + edit.start.column - 1
        end = offsets[edit.end.row - 1] + edit.end.column - 1
        text = text[:start] + edit.content + text[end:]
    return text


# -- devices.py facts ---------------------------------------------------------------------------

@pytest.mark.parametrize("expr, expected", [
    ("m.to(device)", True),
    ("m.to(dev)", True),
    ("m.to('cuda')", True),
    ("m.to('cuda:1')", True),
    ("m.to('cpu')", True),
    ("m.to('meta')", True),
    ("m.to(torch.device('cuda', 0))", True),
    ("m.to(device=device)", True),
    ("m.to(self.device)", True),
    ("m.to(x.device)", True),
    ("m.to(device, torch.float16)", True),
    ("m.to(f'cuda:{rank}')", True),
    ("m.cuda()", True),
    ("m.cuda(0)", True),
    ("m.cpu()", True),
    # not device moves
    ("m.to(torch.float16)", False),
    ("m.to(torch.half)", False),
    ("m.to(dtype=torch.bfloat16)", False),
    ("m.to(dtype)", False),
    ("m.to(x.dtype)", False),
    ("m.half()", False),
    ("m.float()", False),
    ("m.to(other)", False),
    ("m.to(memory_format=torch.channels_last)", False),
    ("m.to('float16')", False),
    ("m.to()", False),
    ("cfg.cpu(4)", False),
])
def test_is_device_move(expr, expected):
    sem = model(f"import torch\n{expr}\n")
    assert devices.is_device_move(sem, last_call(sem)) is expected


def test_dtype_alias_is_not_a_device():
    sem = model("from torch import float16 as half_t\nm.to(half_t)\n")
    assert devices.is_device_move(sem, last_call(sem)) is False


@pytest.mark.parametrize("expr, expected", [
    ("torch.zeros(3)", True),
    ("torch.tril(torch.ones(n, n)).bool()", True),
    ("torch.arange(n)[:, None] - torch.arange(n)[None, :]", True),
    ("1.0 / (10000 ** (torch.arange(0, d, 2).float() / d))", True),
    ("torch.ones(n) / n", True),
    ("-torch.ones(3)", True),
    ("torch.tensor([1.0, 2.0]).view(1, 2)", True),
    ("torch.zeros(3).to(device)", False),
    ("nn.Parameter(torch.zeros(3))", False),
    ("x * torch.ones(3)", True),  # `x` is a plain name: counted as a number
    ("x.weight * torch.ones(3)", False),
    ("np.zeros(3)", False),
    ("torch.nn.functional.relu(x)", False),
])
def test_tensor_factories(expr, expected):
    sem = model(f"import torch\nimport numpy as np\nfrom torch import nn\ny = {expr}\n")
    assign = sem.index.nodes(cst.Assign)[-1]
    assert (devices.tensor_factories(sem, assign.value) is not None) is expected


@pytest.mark.parametrize("imports, spelled", [
    ("import torch.nn as nn", "nn.ModuleList"),
    ("from torch import nn", "nn.ModuleList"),
    ("import torch", "torch.nn.ModuleList"),
    ("import torch\nfrom torch.nn import ModuleList", "ModuleList"),
    ("from torch import nn as tnn", "tnn.ModuleList"),
    ("import numpy as np", None),
])
def test_torch_nn_spelling(imports, spelled):
    assert devices.torch_nn_spelling(model(imports + "\n"), "ModuleList") == spelled


# -- TL005 --------------------------------------------------------------------------------------

def test_tl005_partial_move_in_init_message():
    findings = lint("""\
        import torch.nn as nn
        class Net(nn.Module):
            def __init__(self, device):
                super().__init__()
                self.a = nn.Linear(2, 2)
                self.b = nn.Linear(2, 2).to(device)
        """, "TL005")
    assert [(f.start.row, f.fix) for f in findings] == [(6, None)]
    assert "self.b" in findings[0].message and "whole model" in findings[0].message


def test_tl005_dtype_and_whole_model_moves_are_silent():
    assert not lint("""\
        import torch, torch.nn as nn
        class Net(nn.Module):
            def __init__(self):
                super().__init__()
                self.a = nn.Linear(2, 2)
                self.b = nn.Linear(2, 2).to(torch.float16)
        net = Net().to("cuda")
        net = net.half()
        """, "TL005")


def test_tl005_head_replaced_after_move_then_moved_again_is_silent():
    assert not lint("""\
        import torchvision, torch.nn as nn
        def f(device):
            model = torchvision.models.resnet18().to(device)
            model.fc = nn.Linear(512, 10)
            model = model.to(device)
        """, "TL005")


def test_tl005_head_replaced_in_other_function_is_silent():
    assert not lint("""\
        import torchvision, torch.nn as nn
        def build(device):
            model = torchvision.models.resnet18().to(device)
            return model
        def surgery(model):
            model.fc = nn.Linear(512, 10)
        """, "TL005")


# -- TL101 --------------------------------------------------------------------------------------

@pytest.mark.parametrize("imports, wrapper", [
    ("import torch.nn as nn", "nn.ModuleList"),
    ("import torch\nfrom torch import nn", "nn.ModuleList"),
    ("import torch\nimport torch.nn", "torch.nn.ModuleList"),
])
def test_tl101_fix_uses_the_file_alias(imports, wrapper):
    base = "torch.nn" if wrapper.startswith("torch") else "nn"
    source = f"""\
{imports}
class M({base}.Module):
    def __init__(self):
        super().__init__()
        self.layers = [{base}.Linear(2, 2) for _ in range(3)]
"""
    (finding,) = lint(source, "TL101")
    assert finding.fix.applicability == Applicability.UNSAFE
    fixed = apply_fix(source, finding)
    assert f"self.layers = {wrapper}([{base}.Linear(2, 2) for _ in range(3)])" in fixed
    assert not lint(fixed, "TL101")


def test_tl101_empty_list_filled_by_append_fix():
    source = """\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.blocks = []
                for _ in range(n):
                    self.blocks.append(nn.Linear(2, 2))
        """
    (finding,) = lint(source, "TL101")
    assert "append" in finding.message
    fixed = apply_fix(source, finding)
    assert "self.blocks = nn.ModuleList()" in fixed
    assert not lint(fixed, "TL101")


def test_tl101_dict_and_parameters_use_matching_wrappers():
    source = """\
        import torch, torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.heads = {"a": nn.Linear(2, 2)}
                self.scales = [nn.Parameter(torch.ones(1))]
        """
    findings = lint(source, "TL101")
    assert [f.fix.message for f in findings] == ["Wrap in `nn.ModuleDict`", "Wrap in `nn.ParameterList`"]


def test_tl101_no_fix_without_torch_import():
    source = """\
        from mylib import Module, Linear
        class M(Module):
            def __init__(self):
                self.layers = [Linear(2, 2)]
        """
    assert not lint(source, "TL101")  # Module is not known to be nn.Module: silent


# -- TL102 --------------------------------------------------------------------------------------

def test_tl102_fix_registers_non_persistent_buffer():
    source = """\
        import torch, torch.nn as nn
        class M(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mask = torch.ones(n, n).tril()
            def forward(self, x):
                return x * self.mask
        """
    (finding,) = lint(source, "TL102")
    assert finding.fix.applicability == Applicability.UNSAFE
    fixed = apply_fix(source, finding)
    assert 'self.register_buffer("mask", torch.ones(n, n).tril(), persistent=False)' in fixed
    assert not lint(fixed, "TL102")


@pytest.mark.parametrize("use", [
    "x * self.mask.to(x.device)",
    "x * self.mask.type_as(x)",
    "x[: self.mask.shape[0]]",
    "x * torch.as_tensor(self.mask, device=x.device)",
    "x * self.mask.cuda()",
])
def test_tl102_handled_uses_are_silent(use):
    assert not lint(f"""\
        import torch, torch.nn as nn
        class M(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mask = torch.ones(n)
            def forward(self, x):
                return {use}
        """, "TL102")


def test_tl102_unused_outside_init_is_silent():
    assert not lint("""\
        import torch, torch.nn as nn
        class M(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.mask = torch.ones(n)
                self.fc = nn.Linear(n, n)
                self.fc.weight.data *= self.mask
        """, "TL102")


# -- TL103 --------------------------------------------------------------------------------------

def test_tl103_fix_calls_the_module():
    source = """\
        import torch.nn as nn
        net = nn.Linear(2, 2)
        y = net.forward(x, scale=2)
        """
    (finding,) = lint(source, "TL103")
    assert finding.fix.applicability == Applicability.UNSAFE
    assert apply_fix(source, finding).splitlines()[-1] == "y = net(x, scale=2)"


@pytest.mark.parametrize("call", [
    "super().forward(x)",
    "nn.Module.forward(self, x)",
    "Base.forward(self, x)",
    "self.forward(x)",
    "self.unknown.forward(x)",
])
def test_tl103_override_and_unknown_calls_are_silent(call):
    assert not lint(f"""\
        import torch.nn as nn
        class Base(nn.Module):
            def forward(self, x):
                return x
        class Child(Base):
            def forward(self, x):
                return {call}
        """, "TL103")


def test_tl103_annotated_parameter_is_a_module():
    findings = lint("""\
        import torch.nn as nn
        def run(net: nn.Module, x):
            return net.forward(x)
        def run2(net: "nn.Module", x):
            return net.forward(x)
        """, "TL103")
    assert [f.start.row for f in findings] == [3]


def test_tl005_every_stateful_layer_moved_is_silent():
    # torch's SimpleMegatronLM: both Linears moved with `.cuda(rank)`, GELU has nothing to move
    assert not lint("""\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self, rank):
                super().__init__()
                self.fc1 = nn.Linear(2, 2)
                self.gelu = nn.GELU()
                self.fc2 = nn.Linear(2, 2)
                self.fc1.cuda(rank)
                self.fc2.cuda(rank)
        """, "TL005")


def test_tl005_part_moved_to_where_the_model_already_is_is_silent():
    source = """\
        import torchvision
        def f(device):
            model = torchvision.models.resnet18().to(device)
            model.fc.to({})
        """
    assert not lint(source.format("device"), "TL005")
    assert [f.start.row for f in lint(source.format('"cpu"'), "TL005")] == [4]


def test_tl102_display_only_use_is_silent():
    assert not lint("""\
        import torch, torch.nn as nn
        class M(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.levels = torch.linspace(0, 1, n)
            def extra_repr(self):
                return str(self.levels)
        """, "TL102")


def test_stateless_module_construction():
    sem = model("import torch.nn as nn\na = nn.GELU()\nb = nn.Linear(2, 2)\nc = nn.MaxPool2d(2)\n")
    values = [a.value for a in sorted(sem.index.nodes(cst.Assign), key=sem.index.order.__getitem__)]
    assert [sem.values.of(v).module.stateless for v in values] == [True, False, True]


def test_module_container_items_are_modules():
    sem = model("""\
        import torch.nn as nn
        class M(nn.Module):
            def __init__(self):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Linear(2, 2)])
                self.plain = [nn.Linear(2, 2)]
            def forward(self, x):
                for a in self.blocks:
                    use(a)
                for i, b in enumerate(self.blocks):
                    use(b)
                for c in self.plain:
                    use(c)
                d = self.blocks[0]
                use(d)
        """)
    calls = [c for c in sem.index.nodes(cst.Call) if getattr(c.func, "value", None) == "use"]
    calls.sort(key=sem.index.order.__getitem__)
    names = [c.args[0].value for c in calls]
    # Layers held in a plain list are modules too (TL101 reports the list itself).
    assert [sem.values.of(n).kind == "module" for n in names] == [True, True, True, True]
