"""TL205: an autograd.Function instantiated and called (`Clip()(x)`), PyTorch 0.3's style."""

from __future__ import annotations

from typing import Optional, Set

import libcst as cst

from torchlint.analysis.value import INSTANCE
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

_FUNCTION_BASES = ("torch.autograd.Function", "torch.autograd.function.Function")


class LegacyAutogradFunction(Rule):
    code = "TL205"
    name = "legacy-autograd-function"
    summary = "Calling an instance of an `autograd.Function` (`Clip()(x)`) raises since PyTorch 1.5: use `Clip.apply(x)`"
    fix_availability = "none"
    triggers = ("Function",)
    node_types = (cst.Call,)
    confirmation_module = "tl205"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: calling an `autograd.Function` with a non-static `forward` as an
instance raises `RuntimeError: Legacy autograd function with non-static forward method is
deprecated`.
"""
    docs = """
## What it does
Flags a call of an instance of a `torch.autograd.Function` subclass defined in the same file:
`Clip()(x)`, or `clip = Clip()` / `self.clip = Clip()` followed by `clip(x)` / `self.clip(x)`.

Not flagged: `Clip.apply(x)` (the supported call, which also works with an old-style
`forward(self, x)`: the context is passed as `self`), functions imported from elsewhere (their
class is not known here), and calling `forward` directly.

## Why is this bad?
Before PyTorch 0.4 (and still accepted up to 1.4), an autograd function was an object with
`forward(self, ...)` and `backward(self, ...)` methods, created and called for each use. PyTorch
1.2 started warning that this style "will be removed", and 1.5 removed it. Measured on torch 2.13, calling an instance raises `RuntimeError: Legacy
autograd function with non-static forward method is deprecated. Please use new-style autograd
function with static forward method.` on the first call, whether or not its `forward` is a
`@staticmethod` (creating the instance already warns `DeprecationWarning: ... should not be
instantiated`).

## Example
```python
class Clip(torch.autograd.Function):
    def forward(self, x):
        self.save_for_backward(x)
        return x.clamp(0, 1)

    def backward(self, grad):
        x, = self.saved_tensors
        return grad * ((x >= 0) & (x <= 1))

y = Clip()(x)
```

Use instead:
```python
class Clip(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x.clamp(0, 1)

    @staticmethod
    def backward(ctx, grad):
        x, = ctx.saved_tensors
        return grad * ((x >= 0) & (x <= 1))

y = Clip.apply(x)
```

## Fix safety
No fix: state an old-style function keeps on `self` between `__init__`, `forward` and `backward`
(constructor arguments, for one) has to move to `ctx` or to `apply`'s arguments by hand.

## References
- https://pytorch.org/docs/stable/autograd.html#function
- https://pytorch.org/docs/stable/notes/extending.html#extending-torch-autograd
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        if not _function_classes(sem):
            return
        klass = _instantiated_function(sem, node.func)
        if klass is None:
            klass = _bound_instance(sem, node.func)
        if klass is None:
            return
        name = klass.name.value
        advice = f"call `{name}.apply(...)`" if _has_static_forward(klass) else \
            f"make `forward`/`backward` static methods taking `ctx` and call `{name}.apply(...)`"
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` calls an instance of the autograd.Function `{name}`, which raises "
            f"`RuntimeError: Legacy autograd function with non-static forward method is deprecated` since "
            f"PyTorch 1.5; {advice}",
        )


def _has_static_forward(klass: cst.ClassDef) -> bool:
    for statement in klass.body.body if isinstance(klass.body, cst.IndentedBlock) else ():
        if isinstance(statement, cst.FunctionDef) and statement.name.value == "forward":
            return any(isinstance(d.decorator, cst.Name) and d.decorator.value == "staticmethod"
                       for d in statement.decorators)
    return False


def _function_classes(sem) -> Set[cst.ClassDef]:
    """Classes of this file that subclass `torch.autograd.Function`, directly or through another
    class of this file."""
    cached = sem.__dict__.get("_legacy_autograd_functions")
    if cached is not None:
        return cached
    found = sem.classes_deriving(lambda base: sem.is_torch(base, *_FUNCTION_BASES))
    sem.__dict__["_legacy_autograd_functions"] = found
    return found


def _instantiated_function(sem, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
    """For `Clip(...)`, with `Clip` an autograd.Function class of this file, that class."""
    if not isinstance(expr, cst.Call) or not isinstance(expr.func, cst.Name):
        return None
    bindings = sem.scopes.lookup(expr.func.value, expr.func) or ()
    classes = [b.node for b in bindings if b.kind == "class"]
    if len(classes) != 1 or len(bindings) != 1 or classes[0] not in _function_classes(sem):
        return None
    return classes[0]


def _bound_instance(sem, expr: cst.BaseExpression) -> Optional[cst.ClassDef]:
    """For `clip` or `self.clip` holding an instance of a `Function` class of this file (as the
    value model knows it), that class."""
    if not isinstance(expr, (cst.Name, cst.Attribute)):
        return None
    value = sem.values.of(expr)
    if value.kind != INSTANCE or not isinstance(value.detail, cst.ClassDef):
        return None
    return value.detail if value.detail in _function_classes(sem) else None
