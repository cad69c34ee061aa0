"""TL009: a float16/bfloat16 input fed to a model whose parameters are float32."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import device_guards, device_state
from torchlint.analysis import torch_api as api
from torchlint.analysis.semantic import Semantic
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext


class HalfInputToFloatModel(Rule):
    code = "TL009"
    name = "half-input-to-float-model"
    summary = "Half-precision input to a float32 model outside autocast fails with a dtype mismatch"
    fix_availability = "none"
    triggers = ("half", "float16", "HalfTensor")
    cross_file_triggers = True
    node_types = (cst.Call,)
    confirmation_module = "tl009"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: a half-precision input to a float32 model raises `mat1 and mat2 must
have the same dtype` at the first layer.
"""
    docs = """
## What it does
Flags a model call that gets an input converted to half precision — `x.half()`,
`x.bfloat16()`, `x.to(torch.float16)`, `x.to(device, torch.half)`, `x.type(torch.HalfTensor)`,
a factory with `dtype=torch.float16`, or a name bound to one — when the model certainly has
float32 parameters: it is built by `torch.nn`, torchvision or timm without `dtype=` (or by a
same-file class that never mentions dtypes or casts), moved only with device moves, and no call
in the file converts it (`model.half()`, `model.to(torch.bfloat16)`, `model.to(device, dtype)`).

Not flagged: calls under `torch.autocast` / `torch.cuda.amp.autocast` (block or decorator),
under any `with` whose context manager is not known to leave dtypes alone (`with ctx:`), in a
function that a same-file caller runs that way, in files that call
`torch.set_default_dtype`, and layers without parameters (`nn.ReLU()`).

## Why is this bad?
Outside autocast, a layer computes in the dtype of its input and its weights, and they must
match. Measured on torch 2.13 (CPU): `nn.Linear` raises
`RuntimeError: mat1 and mat2 must have the same dtype, but got Half and Float`, `nn.Conv2d`
raises `Input type (c10::Half) and bias type (float) should be the same` (CUDA reports the
same mismatch as `Input type ... and weight type ... should be the same`). Converting the input alone does not make
inference faster: either convert the model as well, or let autocast choose per operation.

## Example
```python
model = nn.Linear(4, 2).to(device)
y = model(x.half())
```

Use instead:
```python
model = nn.Linear(4, 2).to(device)
with torch.autocast(device_type="cuda", dtype=torch.float16):
    y = model(x)
# or convert both: model = model.half(); y = model(x.half())
```

## Fix safety
No fix: converting the model changes its numerics everywhere it is used, and autocast needs a
device type; which one is right is the author's choice.

## References
- https://pytorch.org/docs/stable/amp.html
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.half
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not _is_model_spelling(node.func):
            return
        converted = next((c for c in map(lambda v: _half_input(sem, v), device_state.iter_call_arguments(node))
                          if c is not None), None)
        if converted is None:
            return
        construction = _float32_model(sem, node.func)
        if construction is None or _may_autocast(sem, node):
            return
        ctx.report(
            node,
            f"`{ctx.short(converted, 30)}` is half precision but `{ctx.short(node.func, 30)}` has float32 "
            f"parameters (`{ctx.short(construction, 30)}`, never converted): forward fails with `mat1 and "
            "mat2 must have the same dtype` — run it under `torch.autocast` or convert the model too",
        )


def _is_model_spelling(func: cst.BaseExpression) -> bool:
    if type(func) is cst.Name:
        return True
    return isinstance(func, cst.Attribute) and isinstance(func.value, cst.Name) and func.value.value == "self"


def _half_input(sem: Semantic, value: cst.BaseExpression) -> Optional[cst.CSTNode]:
    if not device_state.may_hold_half(sem, value):
        return None
    return device_state.half_conversion(sem, value)


def _float32_model(sem: Semantic, model: cst.BaseExpression) -> Optional[cst.Call]:
    construction = device_state.float32_module(sem, model)
    if construction is None:
        return None
    value = sem.values.of(model)
    klass = value.module.klass if value.module is not None else None
    if isinstance(klass, cst.ClassDef) and not _class_holds_parameters(sem, klass):
        return None  # a loss module of the file with no parameters: nothing float32 to clash with
    return construction


def _class_holds_parameters(sem: Semantic, klass: cst.ClassDef) -> bool:
    """Whether a same-file `nn.Module` subclass may hold parameters or buffers. Not when it derives
    from `nn.Module` (or torch's `_Loss`) directly, never makes a `Parameter` or registers
    anything, and every `self.x = ...` it writes is a plain value or a torch layer without
    parameters (`nn.L1Loss()`, `nn.ReLU()`, `nn.Dropout()`): half inputs then meet nothing float32
    (measured on torch 2.13: `nn.MSELoss()` and `nn.CrossEntropyLoss()` of half tensors work on
    the CPU)."""
    for base in klass.bases:
        if (sem.qualified_name(base.value) or "") not in ("torch.nn.Module", "torch.nn.modules.loss._Loss"):
            return True
    text = sem.source(klass)
    if any(word in text for word in ("Parameter", "register_", "add_module", "ModuleList", "ModuleDict")):
        return True
    for assign in sem.index.descendants(klass, cst.Assign):
        for target in assign.targets:
            if not (isinstance(target.target, cst.Attribute) and isinstance(target.target.value, cst.Name)
                    and target.target.value.value == "self"):
                continue
            value = assign.value
            if not isinstance(value, cst.Call):
                if isinstance(value, (cst.Integer, cst.Float, cst.SimpleString)):
                    continue
                return True
            name = sem.qualified_name(value.func) or ""
            member = name.rsplit(".", 1)[-1]
            if not (name.startswith("torch.nn.") and (member.endswith("Loss") or "Dropout" in member
                                                      or member in api.STATELESS_MODULES)):
                return True
            if any(arg.keyword is not None and arg.keyword.value in ("weight", "pos_weight") for arg in value.args):
                return True
    return False


def _may_autocast(sem: Semantic, node: cst.CSTNode) -> bool:
    return device_guards.may_run_under_autocast(sem, node)


__all__ = ["HalfInputToFloatModel"]
