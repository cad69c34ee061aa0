"""TL005: only part of a model moved to a device."""

from __future__ import annotations

from typing import List, Set

import libcst as cst

from torchlint.analysis import devices
from torchlint.analysis.value import MODULE, PARAMETER
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import MODULE_SELF_METHODS, Semantic, keyword, method_call_in
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext
from torchlint.positions import code_for_node

_CPU_TEXTS = {"cpu:", "to:'cpu'", 'to:"cpu"', "to:torch.device('cpu')", 'to:torch.device("cpu")'}
_DTYPE_CASTS = MODULE_SELF_METHODS - {"to", "cuda", "cpu", "xpu", "mps"}


class PartialDeviceMove(Rule):
    code = "TL005"
    name = "partial-device-move"
    summary = "Only part of a model is moved to a device; the rest stays where it was"
    fix_availability = "none"
    triggers = (".to", ".cuda", ".cpu", ".xpu", ".mps")
    node_types = (cst.Assign, cst.Expr)
    confirmation_module = "tl005"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: moving one submodule (or one layer of a container) leaves the rest of
the model where it was built, and the first forward on the accelerator raises `Expected all
tensors to be on the same device` wherever that device is an accelerator, which is what the
move is for.
"""
    docs = """
## What it does
Flags a device move (`.cuda()`, `.cpu()`, `.to(device)`; not `.to(dtype)` or `.half()`) that
moves a submodule alone:
- inside an `nn.Module.__init__`: `self.head = nn.Linear(...).to(device)`, `self.sub.cuda()`,
  while other submodules or parameters of the same module stay where they were built, and a
  layer moved inside a container beside a layer with parameters that is not
  (`nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2).to(device))`);
- anywhere: `model.encoder.cpu()` / `model.encoder = model.encoder.to(dev)` where `model` is a
  module of this file and the whole `model` is not moved after it in the same function;
- a submodule assigned after the whole model was moved in the same function:
  `model.to(device)` then `model.fc = nn.Linear(512, 10)` — the new head is built on the CPU.

## Why is this bad?
A module's parameters must all live on the device of its input. Moving one submodule leaves the
others behind, and the first forward pass fails (measured on torch 2.13):
`RuntimeError: Expected all tensors to be on the same device, but found at least two devices,
cuda:0 and cpu!` (on a CPU machine with a meta stand-in: `Tensor on device meta is not on the
expected device cpu!`). Replacing a head after `model.to(device)` is the classic variant: the
new layer is created on the CPU.

## Example
```python
class Classifier(nn.Module):
    def __init__(self, device):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4).to(device)

model = resnet18().to(device)
model.fc = nn.Linear(512, 10)
```

Use instead:
```python
class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Linear(8, 16)
        self.head = nn.Linear(16, 4)

model = Classifier().to(device)   # move the whole model once

model = resnet18()
model.fc = nn.Linear(512, 10)
model = model.to(device)          # after the surgery
```

## Fix safety
No fix: where the whole model should be moved depends on the surrounding code. Not flagged:
moving the whole model (`model = Net().to(device)`), moves of tensors, `self.sub = Sub()` with
the caller moving the whole model, `__init__`s that end with `self.to(device)`, and deliberate
model parallelism (submodules moved to two or more different devices).

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.to
- https://pytorch.org/tutorials/intermediate/model_parallel_tutorial.html
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if type(node) is cst.Assign:
            self._check_assign(node, ctx, sem)
        elif isinstance(node, cst.Expr) and isinstance(node.value, cst.Call):
            self._check_statement_move(node.value, ctx, sem)

    # -- `self.sub = Sub().to(dev)` in __init__; `model.fc = nn.Linear()` after `model.to(dev)` --
    def _check_assign(self, node: cst.Assign, ctx: RuleContext, sem: Semantic) -> None:
        if len(node.targets) != 1 or type(node.targets[0].target) is not cst.Attribute:
            return
        target = node.targets[0].target
        value = node.value
        owner = dotted_name(target.value)
        if owner is None:
            return
        if devices.is_device_move(sem, value):
            base = _strip_moves(value.func.value, sem)
            if owner != "self" and _is_same_receiver(value.func.value, target):
                self._check_outside_init(value, target, node, ctx, sem)
                return
            if not _is_module(sem, base):
                return
            if owner == "self" and sem.is_module_method(node, "__init__"):
                if self._init_moves_consistently(node, sem):
                    return
                ctx.report(
                    value.func.attr,
                    f"`self.{target.attr.value} = {ctx.short(value, 50)}` moves only this submodule in "
                    "`__init__`; the rest of the model stays where it was built and forward will mix "
                    "devices — build it unmoved and move the whole model (`model.to(device)`)",
                )
            return
        if owner == "self" and isinstance(value, cst.Call) and sem.is_module_method(node, "__init__"):
            self._check_container_parts(node, value, ctx, sem)
        # a new submodule after the whole owner was moved
        if not isinstance(value, cst.Call):
            return
        earlier = _whole_moves(owner, node, sem, before=True)
        if not earlier:
            return
        built = sem.values.of(value)
        if built.kind != MODULE or built.site is not value or not sem.values.stays_behind(built):
            return  # `model.fc = nn.Identity()` has nothing to move
        if earlier and _device_text(earlier[-1], sem) in _CPU_TEXTS:
            return  # moved to the CPU, where the new layer is built too
        if not earlier or _whole_moves(owner, node, sem, before=False) \
                or _whole_moves(dotted_name(target) or "", node, sem, before=False):
            return
        ctx.report(
            target,
            f"`{ctx.short(target, 40)}` is assigned a new `{ctx.short(value.func, 30)}` after "
            f"`{ctx.short(earlier[-1], 40)}`; the new layer stays on the CPU — move `{owner}` after "
            "replacing it, or build the layer on the device",
        )

    # -- `self.net = nn.Sequential(nn.Linear(8, 8), nn.Linear(8, 2).to(device))` in __init__ ------
    def _check_container_parts(self, node: cst.Assign, value: cst.Call, ctx: RuleContext, sem: Semantic) -> None:
        if not sem.is_torch(value, "torch.nn.Sequential", "torch.nn.ModuleList"):
            return
        parts = [a.value for a in value.args if a.keyword is None and not a.star]
        if len(parts) == 1 and isinstance(parts[0], (cst.List, cst.Tuple)):
            parts = [e.value for e in parts[0].elements if isinstance(e, cst.Element)]
        moved = [p for p in parts if devices.is_device_move(sem, p) and _is_module(sem, _strip_moves(p.func.value, sem))]
        behind = [p for p in parts if not devices.is_device_move(sem, p) and sem.values.stays_behind(sem.values.of(p))]
        if not moved or not behind or self._init_moves_consistently(node, sem):
            return  # `nn.Sequential(nn.Dropout(0.2), nn.Linear(a, b).to(device))` leaves nothing behind
        ctx.report(
            moved[0].func.attr,
            f"`{ctx.short(moved[0], 40)}` moves one layer of `self.{node.targets[0].target.attr.value}` "
            f"while `{ctx.short(behind[0], 30)}` in the same container stays where it was built; "
            "forward will mix devices — build the layers unmoved and move the whole model (`model.to(device)`)",
        )

    # -- `self.sub.cuda()` in __init__; `model.sub.to(dev)` -------------------------------------
    def _check_statement_move(self, call: cst.Call, ctx: RuleContext, sem: Semantic) -> None:
        if not devices.is_device_move(sem, call):
            return
        receiver = call.func.value
        if not isinstance(receiver, cst.Attribute):
            return
        owner = dotted_name(receiver.value)
        if owner is None:
            return
        if owner == "self" and sem.is_module_method(call, "__init__"):
            if not _is_module(sem, receiver):
                return
            if self._init_moves_consistently(call, sem):
                return
            ctx.report(
                call.func.attr,
                f"`{ctx.short(call, 50)}` moves only this submodule in `__init__`; the rest of the "
                "model stays where it was built and forward will mix devices — move the whole model "
                "(`model.to(device)`)",
            )
            return
        if owner != "self":
            self._check_outside_init(call, receiver, call, ctx, sem)

    def _check_outside_init(self, call: cst.Call, submodule: cst.Attribute, anchor: cst.CSTNode,
                            ctx: RuleContext, sem: Semantic) -> None:
        owner_node = submodule.value
        if not isinstance(owner_node, cst.Name) or not _is_module(sem, owner_node):
            return
        owner = owner_node.value
        if _whole_moves(owner, anchor, sem, before=False):
            return
        here = _device_text(call, sem)
        if any(_device_text(move, sem) == here for move in _whole_moves(owner, anchor, sem, before=True)):
            return  # the whole model is already there: moving a part again is harmless
        ctx.report(
            call.func.attr,
            f"`{ctx.short(call, 50)}` moves only `{ctx.short(submodule, 30)}`; the rest of `{owner}` "
            f"stays where it was and forward will mix devices — move the whole model (`{owner}.to(...)`)",
        )

    def _init_moves_consistently(self, node: cst.CSTNode, sem: Semantic) -> bool:
        """In this `__init__`: the whole module is moved too (`self.to(device)`), submodules go to
        two or more different devices on purpose (model parallelism), or every submodule and
        parameter assigned here is moved to the same device."""
        method = sem.method_of(node)
        if method is None:
            return True
        device_texts: Set[str] = set()
        unmoved = 0
        for call in sem.index.descendants(method, cst.Call):
            if devices.is_device_move(sem, call) and isinstance(call.func.value, cst.Name) \
                    and call.func.value.value == "self":
                return True
            if devices.is_device_move(sem, call):
                argument = devices.device_argument(sem, call)
                text = "" if argument is None else code_for_node(sem.module, argument)
                device_texts.add(f"{call.func.attr.value}:{text}")
        if len(device_texts) >= 2:
            return True
        moved: Set[str] = set()
        for call in sem.index.descendants(method, cst.Call):
            if devices.is_device_move(sem, call) and dotted_name(call.func.value) is not None:
                moved.add(dotted_name(call.func.value))
        for assign in sem.index.descendants(method, cst.Assign):
            if len(assign.targets) != 1:
                continue
            target = assign.targets[0].target
            if not (isinstance(target, cst.Attribute) and dotted_name(target.value) == "self"):
                continue
            value = assign.value
            if devices.is_device_move(sem, value) or dotted_name(target) in moved:
                continue
            built = sem.values.of(value)
            if built.site is not value:
                continue
            if (built.kind == MODULE and sem.values.stays_behind(built)) or \
                    (built.kind == PARAMETER and not _has_device_keyword(value)):
                unmoved += 1  # a module with parameters or buffers, or a parameter, left where it was built
        return unmoved == 0


def _device_text(call: cst.Call, sem: Semantic) -> str:
    argument = devices.device_argument(sem, call)
    return call.func.attr.value + ":" + ("" if argument is None else code_for_node(sem.module, argument))


def _strip_moves(expr: cst.BaseExpression, sem: Semantic) -> cst.BaseExpression:
    while isinstance(expr, cst.Call) and (
        devices.is_device_move(sem, expr) or method_call_in(expr, _DTYPE_CASTS)
    ):
        expr = expr.func.value
    return expr


def _is_same_receiver(expr: cst.BaseExpression, target: cst.Attribute) -> bool:
    return dotted_name(expr) is not None and dotted_name(expr) == dotted_name(target)


def _has_device_keyword(call: cst.Call) -> bool:
    return keyword(call, "device") is not None


def _whole_moves(owner: str, node: cst.CSTNode, sem: Semantic, before: bool) -> List[cst.Call]:
    """Device moves of the whole `owner` (`model.to(dev)`, `model = model.cuda()`,
    `model = Net().to(dev)`) in the function (or module code) holding `node`, before or after it."""
    scope = sem.function_of(node) or sem.module
    position = sem.index.order[node]
    found = []
    for call in sem.index.descendants(scope, cst.Call):
        if sem.function_of(call) is not (scope if scope is not sem.module else None):
            continue
        if not devices.is_device_move(sem, call):
            continue
        order = sem.index.order[call]
        if (order < position) != before or order == position:
            continue
        receiver = _strip_moves(call.func.value, sem)
        if dotted_name(call.func.value) == owner or dotted_name(receiver) == owner:
            found.append(call)
            continue
        statement = sem.statement_of(call)
        if isinstance(statement, cst.Assign) and statement.value is call and any(
            dotted_name(t.target) == owner for t in statement.targets
        ) and _is_module(sem, receiver):
            found.append(call)
    return sorted(found, key=sem.index.order.__getitem__)



def _is_module(sem: Semantic, expr: cst.BaseExpression) -> bool:
    return sem.values.of(expr).kind == MODULE


__all__ = ["PartialDeviceMove"]
