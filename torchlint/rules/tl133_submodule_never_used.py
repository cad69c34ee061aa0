"""TL133: a layer with weights assigned in `__init__` that nothing in the file ever uses: the
forward pass skips it."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import silent
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

_TORCH_MODULE = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# Ways a module reaches its submodules without naming them.
_DYNAMIC = frozenset({"getattr", "_modules", "children", "named_children", "modules", "named_modules", "__dict__",
                      "vars", "parameters", "named_parameters", "state_dict", "apply"})


class SubmoduleNeverUsed(Rule):
    code = "TL133"
    name = "submodule-never-used"
    summary = "A layer with weights assigned in `__init__` that nothing uses: `forward` skips it (an output layer never applied)"
    fix_availability = "none"
    default_severity = Severity.WARNING
    severity_docs = """
A **warning**: the layer's weights are created, counted and handed to the optimizer but never take
part in the computation; when it was meant to be applied (an output layer, a projection), the
model computes something else. `DistributedDataParallel` also fails on parameters that get no
gradient unless `find_unused_parameters=True`.
"""
    triggers = ("__init__",)
    node_types = (cst.ClassDef,)
    confirmation_module = "tl133"
    docs = """
## What it does
Flags `self.name = nn.Linear(...)` (any torch layer with weights) in the `__init__` of a class
that subclasses `nn.Module` directly and defines `forward`, when the attribute `name` is not read
anywhere in the file: not by `forward`, not by another method, not from outside (`model.name`).

Not flagged: classes that reach their submodules without naming them (`getattr`,
`self._modules`, `self.children()`, `self.modules()`, `self.named_parameters()`, `vars(self)`,
`super().forward`), classes with another base (a library parent's `forward` may use the
attribute), layers without weights (`nn.ReLU`, `nn.Dropout`), and names that appear in a string
(`getattr(model, "fc")`, parameter groups by name).

## Why is this bad?
A layer assigned in `__init__` is registered: it has parameters, `model.parameters()` lists it and
the optimizer holds it, but unless `forward` calls it, it does nothing. Measured on torch 2.13:
a model with `self.out = nn.Linear(16, 2)` that `forward` never applies returns the 16 hidden
features instead of 2 logits, and after a backward pass `out.weight.grad is None`. Losses that
broadcast (MSE) or take any width of class scores can hide the mistake, so the model trains
without its output layer.

## Example
```python
class Net(nn.Module):
    def __init__(self):
        super().__init__()
        self.hidden = nn.Linear(4, 16)
        self.out = nn.Linear(16, 2)

    def forward(self, x):
        return torch.relu(self.hidden(x))
```

Use instead:
```python
    def forward(self, x):
        return self.out(torch.relu(self.hidden(x)))
```

## Fix safety
No fix: where the layer belongs is the author's choice (or it should be deleted).

## References
- https://pytorch.org/docs/stable/notes/modules.html
- https://pytorch.org/docs/stable/notes/ddp.html
"""

    def check(self, node: cst.ClassDef, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not sem.is_module_class(node) or not _direct_module_subclass(sem, node):
            return
        methods = {s.name.value: s for s in node.body.body if isinstance(s, cst.FunctionDef)}
        init = methods.get("__init__")
        if init is None or "forward" not in methods or _dynamic_access(sem, node):
            return
        strings = _string_text(sem)
        for assign in sem.index.descendants(init.body, cst.Assign):
            if len(assign.targets) != 1 or not isinstance(assign.value, cst.Call):
                continue
            target = assign.targets[0].target
            if not (isinstance(target, cst.Attribute) and isinstance(target.value, cst.Name)
                    and target.value.value == "self"):
                continue
            name = target.attr.value
            layer = silent.parametric_module(sem, assign.value)
            if layer is None or name in strings or _read_anywhere(sem, name):
                continue
            ctx.report(target, f"`self.{name} = {ctx.short(assign.value, 40)}` is never used: no code in this file "
                               f"reads `{name}`, so `forward` skips this {layer} and its weights never train; apply "
                               f"it in `forward` (or delete it)", severity=Severity.WARNING)


def _direct_module_subclass(sem, klass: cst.ClassDef) -> bool:
    if not klass.bases or klass.decorators:
        return False
    return all(base.keyword is None and sem.qualified_name(base.value) in _TORCH_MODULE for base in klass.bases)


def _dynamic_access(sem, klass: cst.ClassDef) -> bool:
    for name in sem.index.descendants(klass.body, cst.Name):
        if name.value in _DYNAMIC:
            return True
        if name.value == "super":
            method = sem.method_of(name)
            if method is None or method.name.value != "__init__":
                return True  # `super().forward(x)`: the parent may use the attribute
    for loop in sem.index.descendants(klass.body, (cst.For, cst.CompFor)):
        if isinstance(loop.iter, cst.Name) and loop.iter.value == "self":
            return True
    return False


def _read_anywhere(sem, name: str) -> bool:
    """An attribute `.name` anywhere in the file other than as the target of an assignment."""
    for node in sem.index.names_spelled(name):
        parent = sem.parent(node)
        if isinstance(parent, cst.Attribute) and parent.attr is node:
            if isinstance(sem.parent(parent), cst.AssignTarget):
                continue
            return True
    return False


def _string_text(sem) -> str:
    cached: Optional[str] = sem.__dict__.get("_tl133_strings")
    if cached is None:
        cached = " ".join(s.value for s in sem.index.nodes(cst.SimpleString))
        cached += " " + " ".join(sem.source(s) for s in sem.index.nodes(cst.FormattedString))
        sem.__dict__["_tl133_strings"] = cached
    return cached


__all__ = ["SubmoduleNeverUsed"]
