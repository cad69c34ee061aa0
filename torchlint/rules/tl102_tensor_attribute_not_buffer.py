"""TL102: a tensor stored as a plain attribute of a module instead of a buffer."""

from __future__ import annotations

from typing import List, Optional

import libcst as cst

from torchlint.analysis import devices, project_uses
from torchlint.analysis.scopes import dotted_name
from torchlint.analysis.semantic import Semantic, keyword, method_call
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# A use of the attribute through one of these shows the author handles device/dtype by hand
# (`self.mask.to(x.device)`) or only needs it on the CPU (`.tolist()`).
HANDLED_METHODS = {"to", "type_as", "cuda", "cpu", "item", "tolist", "numpy", "type", "copy_"}
METADATA = {"shape", "size", "dim", "ndim", "numel", "dtype", "device", "is_cuda", "nelement"}
SCALAR_FACTORIES = {"tensor", "as_tensor"}
# Uses in these methods only show the value.
DISPLAY_METHODS = {"extra_repr", "__repr__", "__str__", "__getstate__", "__reduce__"}
DEVICE_HOOK_METHODS = {"_apply", "to", "cuda", "cpu", "_load_from_state_dict", "__setstate__"}


class TensorAttributeNotBuffer(Rule):
    code = "TL102"
    name = "tensor-attribute-not-buffer"
    summary = "Tensor stored as a plain module attribute is not moved by `.to()`; register a buffer"
    fix_availability = "always"
    triggers = ("__init__",)
    node_types = (cst.Assign,)
    confirmation_module = "tl102"
    default_severity = Severity.WARNING
    severity_docs = """
An **error** when the file moves an instance of the class to a device (`Net().to(device)`,
`model.cuda()`): the plain tensor stays behind and forward mixes devices wherever that device is
an accelerator; the same when another file of the project directories moves an instance of the
class imported from this one (`Net().to(device)` in `train.py`, named in the message). A
**warning** otherwise: the harm (a later move, a cast such as `.double()`, a
`state_dict()` that lacks the tensor) depends on how the module is used.
"""
    docs = """
## What it does
Flags, in an `nn.Module.__init__`, a tensor created with a torch factory and stored as a plain
attribute — `self.mask = torch.tril(torch.ones(n, n))`, `self.pos = torch.arange(n)` — when
another method uses it (e.g. `forward`) without moving it by hand.

## Why is this bad?
Only parameters and buffers belong to a module's state. A plain tensor attribute is skipped by
`model.to(device)`, `.cuda()`, `.half()`, `.double()` and by `state_dict()`: after moving the model
it stays on the CPU in its old dtype, and the first forward pass fails with (measured on torch
2.13) `RuntimeError: Expected all tensors to be on the same device, but found at least two
devices` (CPU machine with a meta stand-in: `Tensor on device meta is not on the expected device
cpu!`). After `model.double()` it is still `torch.float32` while the parameters are
`torch.float64` (measured by the second confirmation case). `self.register_buffer(name, tensor)`
moves and casts with the module; `persistent=False` keeps it out of the checkpoint.

## Example
```python
class CausalAttention(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.mask = torch.tril(torch.ones(n, n))

    def forward(self, scores):
        return scores.masked_fill(self.mask == 0, float("-inf"))
```

Use instead:
```python
class CausalAttention(nn.Module):
    def __init__(self, n):
        super().__init__()
        self.register_buffer("mask", torch.tril(torch.ones(n, n)), persistent=False)
```

## Fix safety
The fix rewrites the assignment to `self.register_buffer("mask", ..., persistent=False)`. It is
unsafe: the tensor now follows `.to()`, `.half()` and friends (a floating-point buffer changes
dtype with `.half()`), and it shows up in `named_buffers()`; `persistent=False` keeps
`state_dict()` and existing checkpoints unchanged. Not flagged: `nn.Parameter`s, buffers,
tensors created with `device=` (e.g. from a parameter's device), 0-dimensional constants
(`torch.tensor(0.5)` mixes with tensors on any device), tensors never used outside `__init__` or
used only through `.to(...)`, `.type_as(...)`, `.tolist()`, `.item()` or shape queries, and
classes that override `_apply` or `to`.

## References
- https://pytorch.org/docs/stable/generated/torch.nn.Module.html#torch.nn.Module.register_buffer
"""

    def check(self, node: cst.Assign, ctx: RuleContext) -> None:
        if len(node.targets) != 1:
            return
        target = node.targets[0].target
        if not (type(target) is cst.Attribute and type(target.value) is cst.Name
                and target.value.value == "self"):
            return
        sem = ctx.semantic
        value = node.value
        tensor = sem.assigned_value(value)
        if tensor is None:
            return
        factories = devices.tensor_factories(sem, tensor)
        if not factories or not sem.is_module_method(node, "__init__"):
            return
        if any(_placed_or_scalar(f, sem) for f in factories):
            return
        method = sem.method_of(node)
        klass = sem.class_of_method(method)
        attr = target.attr.value
        if klass is None or _handled_by_class(klass, attr, node, method, sem):
            return
        uses = _uses_outside(klass, method, attr, sem)
        if not uses or any(_handled_use(use, sem) for use in uses):
            return
        if all(_metadata_use(use, sem) for use in uses):
            return
        fix = FixSpec(
            f"Register `{attr}` as a non-persistent buffer",
            (Replace(node, f'self.register_buffer("{attr}", {ctx.code(value)}, persistent=False)'),),
            Applicability.UNSAFE,
        )
        moved = _moved_instance(sem, klass)
        after = f" after `{ctx.short(moved, 40)}`" if moved is not None else ""
        if moved is None:
            found = _moved_in_project(sem, klass)
            if found is not None:
                moved = found[0]
                after = f" after `{project_uses.quoted(found[0])}` at {found[1]}"
        ctx.report(
            target,
            f"`self.{attr}` is a plain tensor attribute: `model.to(device)`/`.double()` leave it on its "
            f"old device and dtype, so forward will mix devices"
            f"{after} — use "
            f"`self.register_buffer(\"{attr}\", ...)`",
            fix,
            # A move of an instance in this file makes forward mix devices where the device is an
            # accelerator; otherwise the harm depends on how the module is used.
            severity=Severity.ERROR if moved is not None else Severity.WARNING,
        )


def _placed_or_scalar(factory: cst.Call, sem: Semantic) -> bool:
    if keyword(factory, "device") is not None:
        return True
    name = (sem.call_name(factory) or "").split(".")[-1]
    if name in SCALAR_FACTORIES:
        first = factory.args[0].value if factory.args else None
        if not isinstance(first, (cst.List, cst.ListComp, cst.Tuple)):
            return True  # a 0-d constant, or data of unknown shape
    return False


def _handled_by_class(klass: cst.ClassDef, attr: str, node: cst.Assign, init: cst.FunctionDef,
                      sem: Semantic) -> bool:
    """Registered as a buffer/parameter under that name, reassigned somewhere else, or the class
    moves tensors itself (`_apply`/`to` overrides)."""
    for function in sem.index.descendants(klass, cst.FunctionDef):
        if function.name.value in DEVICE_HOOK_METHODS and sem.class_of_method(function) is klass:
            return True
    for call in sem.index.descendants(klass, cst.Call):
        if method_call(call, "register_buffer", "register_parameter") and call.args:
            first = call.args[0].value
            if not isinstance(first, cst.SimpleString) or first.evaluated_value == attr:
                return True
    for assign in sem.index.descendants(klass, (cst.Assign, cst.AugAssign, cst.AnnAssign)):
        if assign is node:
            continue
        targets = [t.target for t in assign.targets] if isinstance(assign, cst.Assign) else [assign.target]
        for t in targets:
            if dotted_name(t) == f"self.{attr}":
                return True
    return False


def _uses_outside(klass: cst.ClassDef, init: cst.FunctionDef, attr: str, sem: Semantic) -> List[cst.Attribute]:
    uses = []
    for attribute in sem.index.descendants(klass, cst.Attribute):
        if attribute.attr.value != attr or not isinstance(attribute.value, cst.Name) \
                or attribute.value.value != "self":
            continue
        method = sem.method_of(attribute)
        if method is None or method is init or sem.class_of_method(method) is not klass \
                or method.name.value in DISPLAY_METHODS:
            continue
        uses.append(attribute)
    return uses


def _outer_use(use: cst.CSTNode, sem: Semantic) -> cst.CSTNode:
    """`self.mask[:n]` and `self.mask.T` count as the use itself."""
    node = use
    parent = sem.parent(node)
    while isinstance(parent, cst.Subscript) and parent.value is node:
        node, parent = parent, sem.parent(parent)
    return node


def _handled_use(use: cst.Attribute, sem: Semantic) -> bool:
    node = _outer_use(use, sem)
    parent = sem.parent(node)
    if isinstance(parent, cst.Attribute) and parent.value is node:
        grand = sem.parent(parent)
        if parent.attr.value in HANDLED_METHODS and isinstance(grand, cst.Call) and grand.func is parent:
            return True
    # passed to a call that places it: `torch.as_tensor(self.x, device=...)`, `x.new_tensor(self.x)`
    arg = sem.parent(node)
    if isinstance(arg, cst.Arg):
        call = sem.parent(arg)
        if isinstance(call, cst.Call) and (
            keyword(call, "device") is not None or method_call(call, "new_tensor", "to", "type_as")
        ):
            return True
    # on the left of an in-place copy target: `self.x.copy_(...)` counted above
    return False


def _metadata_use(use: cst.Attribute, sem: Semantic) -> bool:
    parent = sem.parent(use)
    if isinstance(parent, cst.Attribute) and parent.value is use:
        return parent.attr.value in METADATA
    if isinstance(parent, cst.Arg):
        call = sem.parent(parent)
        return isinstance(call, cst.Call) and isinstance(call.func, cst.Name) and call.func.value in ("len",)
    return False


__all__ = ["TensorAttributeNotBuffer"]


_ACCELERATOR_MOVES = devices.DEVICE_MOVE_METHODS - {"cpu"}


def _moved_in_project(sem: Semantic, klass) -> Optional[tuple]:
    """(the call, "train.py:12") for a call of another project file that moves an instance of
    `klass` to a device (`model = Net().to(device)` with `Net` imported from this file)."""
    def match(other, call, is_instance) -> bool:
        if not (method_call(call, *_ACCELERATOR_MOVES)
                or method_call(call, "to") and devices.is_device_move(other, call)):
            return False
        return is_instance(call.func.value)
    return project_uses.instance_call(sem, klass, ("cuda", ), match) or \
        project_uses.instance_call(sem, klass, (".to(",), match)


def _moved_instance(sem: Semantic, klass) -> Optional[cst.Call]:
    """A call of this file that moves an instance of `klass` to a device (`Net().to(device)`,
    `model.cuda()` with `model = Net()`), or None. (A dtype cast alone, `.double()`, breaks only
    some operations: elementwise ones promote.)"""
    for call in sem.index.nodes(cst.Call):
        if not (method_call(call, *_ACCELERATOR_MOVES) or method_call(call, "to") and devices.is_device_move(sem, call)):
            continue
        owner = sem.values.of(call.func.value)
        if owner.module is not None and owner.module.klass is klass:
            return call
    return None
