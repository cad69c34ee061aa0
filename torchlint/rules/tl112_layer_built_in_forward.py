"""TL112: a layer with weights constructed inside `forward`: new random weights every call."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import silent
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext


class LayerBuiltInForward(Rule):
    code = "TL112"
    name = "layer-built-in-forward"
    summary = "Layer with weights built inside `forward`: new random weights every call, never trained"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
An **error** for a layer with random weights (`nn.Linear`, `nn.Conv2d`, ...): the layer gets new
random weights on every call and is never in the optimizer, so it is never trained. An **error**
for BatchNorm / InstanceNorm too: a fresh layer is in training mode, so even after `model.eval()`
it normalises with each batch's statistics. A **warning** for `nn.LayerNorm`, `nn.GroupNorm` and
`nn.RMSNorm`: their weight starts at 1 and bias (where they have one) at 0, not random, so they
normalise correctly on every call; only the learned scale and shift are missing.
"""
    triggers = ("forward",)
    node_types = (cst.Call,)
    confirmation_module = "tl112"
    docs = """
## What it does
Flags the construction of a `torch.nn` layer that holds parameters (`nn.Linear`, `nn.Conv2d`,
`nn.Embedding`, `nn.LSTM`, `nn.BatchNorm2d`, `nn.LayerNorm`, ...) inside the `forward` method of
an `nn.Module` subclass: `nn.Linear(h.shape[-1], 8)(h)`, `layer = nn.Conv2d(...)`; also a
BatchNorm with `affine=False`, which holds no parameters but has a training and an eval mode. Parameter-free
modules (`nn.ReLU()`, `nn.Flatten()`, `nn.Dropout()`, `nn.Softmax()`, `nn.LayerNorm(...,
elementwise_affine=False)`, `nn.BatchNorm1d(..., affine=False, track_running_stats=False)`, the
same in training and eval) are not flagged, nor is lazy initialisation that stores the layer
on the module under an `if` (`if self.fc is None: self.fc = nn.Linear(...)`, also through
`self.add_module(...)` or `setattr(self, ...)`).

## Why is this bad?
Each call of `forward` builds a new layer with freshly initialised random weights. They are not
submodules of the model when the optimizer is built from `model.parameters()`, so the
optimizer never updates them, and the next call replaces them anyway. Measured on torch 2.13: a
module whose `forward` returns `nn.Linear(h.shape[-1], 8)(h)` has 0 parameters, and two calls on
the same 2×4 input give different outputs (they differed by up to 1.6 and 2.5 in two runs): the
network is a different random function every batch and never learns that layer.

## Example
```python
class Head(nn.Module):
    def forward(self, h):
        return nn.Linear(h.shape[-1], 8)(h)
```

Use instead:
```python
class Head(nn.Module):
    def __init__(self, in_features):
        super().__init__()
        self.fc = nn.Linear(in_features, 8)  # or nn.LazyLinear(8)

    def forward(self, h):
        return self.fc(h)
```

## Fix safety
No fix: the layer's sizes and its place in `__init__` are the author's choice (`nn.LazyLinear`
infers the input size at the first call).

## References
- https://pytorch.org/docs/stable/notes/modules.html
- https://pytorch.org/docs/stable/generated/torch.nn.LazyLinear.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        layer = silent.parametric_module(sem, node)  # a name and set test: before the walk up
        stateful = silent.stateful_norm_without_parameters(sem, node) if layer is None else None
        if (layer is None and stateful is None) or not sem.is_module_method(node, "forward") \
                or _lazy_initialisation(sem, node):
            return
        advice = (f"build it once in `__init__` (`self.layer = {ctx.short(node.func, 20)}(...)`) and call "
                  f"`self.layer(...)`")
        if stateful is not None:
            ctx.report(
                node,
                f"`{ctx.short(node, 40)}` builds a new {stateful} on every `forward` call: a fresh layer is in "
                f"training mode, so even after `model.eval()` it normalises with each batch's statistics (its "
                f"running statistics start anew on every call and are never used): {advice}",
                severity=Severity.ERROR)
            return
        if layer in _NORMS_WITH_ONES:
            # Measured on torch 2.13: LayerNorm, GroupNorm and RMSNorm start at weight 1 (bias 0;
            # RMSNorm has none).
            bias = "" if layer == "RMSNorm" else "and its bias at 0 "
            ctx.report(
                node,
                f"`{ctx.short(node, 40)}` builds a new {layer} on every `forward` call: its weight starts at 1 "
                f"{bias}each time (not random), and the optimizer never sees them, so it normalises but its "
                f"learned scale{'' if layer == 'RMSNorm' else ' and shift'} never change: {advice}",
                severity=Severity.WARNING)
            return
        if "BatchNorm" in layer or "InstanceNorm" in layer:
            ctx.report(
                node,
                f"`{ctx.short(node, 40)}` builds a new {layer} on every `forward` call: its weight starts at 1 "
                f"and its bias at 0 each time (not random) and are never trained, and a fresh layer is in "
                f"training mode, so even after `model.eval()` it normalises with each batch's statistics: "
                f"{advice}",
                severity=Severity.ERROR)
            return
        ctx.report(
            node,
            f"`{ctx.short(node, 40)}` builds a new {layer} with random weights on every `forward` call; "
            f"the optimizer never sees it, so it is never trained: {advice}",
            severity=Severity.ERROR)


# Normalisation layers whose affine parameters start at weight 1 and bias 0: built anew in
# `forward`, they still normalise correctly (the per-sample statistics), only without a learned
# scale and shift.
_NORMS_WITH_ONES = frozenset({"LayerNorm", "GroupNorm", "RMSNorm"})

_REGISTERING = frozenset({"add_module", "register_module", "setattr"})


def _lazy_initialisation(sem, call: cst.Call) -> bool:
    """`self.fc = nn.Linear(...)`, `self.add_module("fc", nn.Linear(...))` or
    `setattr(self, name, nn.Linear(...))` under an `if` in `forward`: built once, at the first
    call."""
    statement = sem.statement_of(call)
    parent = sem.parent(sem.parent(call))  # Arg -> Call
    registered = isinstance(parent, cst.Call) and (
        (isinstance(parent.func, cst.Attribute) and parent.func.attr.value in _REGISTERING)
        or (isinstance(parent.func, cst.Name) and parent.func.value in _REGISTERING))
    assigned = isinstance(statement, cst.Assign) and statement.value is call and all(
        isinstance(t.target, cst.Attribute) for t in statement.targets)
    if not (registered or assigned or _stored_later(sem, statement, call)):
        return False
    function = sem.function_of(call)
    for ancestor in sem.ancestors(call):
        if ancestor is function:
            return False
        if isinstance(ancestor, cst.If):
            return True
    return False


def _stored_later(sem, statement, call: cst.Call) -> bool:
    """`new = nn.Embedding(...)`, then `self.bias = new` (or `add_module`/`setattr` of it) later
    in the same block: the layer is registered, built once (transformers' UDOP re-sizes its
    bias table this way under `if self.expand:`)."""
    if not (isinstance(statement, cst.Assign) and statement.value is call and len(statement.targets) == 1
            and isinstance(statement.targets[0].target, cst.Name)):
        return False
    name = statement.targets[0].target.value
    line = sem.parent(statement)
    block = sem.parent(line)
    body = getattr(block, "body", None)
    if not isinstance(body, (list, tuple)) or line not in body:
        return False
    for later in body[body.index(line) + 1:]:
        for assign in sem.index.descendants(later, cst.Assign):
            if isinstance(assign.value, cst.Name) and assign.value.value == name and all(
                    isinstance(t.target, cst.Attribute) for t in assign.targets):
                return True
        for inner in sem.index.descendants(later, cst.Call):
            func = inner.func
            spelled = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", None)
            if spelled in _REGISTERING and any(isinstance(a.value, cst.Name) and a.value.value == name
                                               for a in inner.args):
                return True
    return False


__all__ = ["LayerBuiltInForward"]
