"""TL124: a loss that requires grad copied into a new tensor (`torch.tensor(loss)`,
`torch.Tensor([loss])`) and then backpropagated: the copy has no graph, the gradient is cut."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis.backward import feeds_backward
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# Measured on torch 2.13 with `l` a 0-dim tensor with a graph: `torch.tensor(l)`,
# `torch.tensor([l])`, `torch.Tensor([l])`, `torch.FloatTensor([l])`, `torch.DoubleTensor([l])`
# have requires_grad False and no grad_fn. `torch.Tensor(l)`, `torch.FloatTensor(l)` (a tensor
# given directly) and `torch.as_tensor(l)` keep the graph: not flagged.
_COPYING = frozenset({"torch.tensor"})
_LEGACY_CONSTRUCTORS = frozenset({
    "torch.Tensor", "torch.FloatTensor", "torch.DoubleTensor", "torch.HalfTensor", "torch.BFloat16Tensor",
    "torch.cuda.FloatTensor", "torch.cuda.DoubleTensor", "torch.cuda.HalfTensor",
})


class LossRewrappedInNewTensor(Rule):
    code = "TL124"
    name = "loss-rewrapped-in-new-tensor"
    summary = "A loss copied into a new tensor (`torch.tensor(loss)`, `torch.Tensor([loss])`) and backpropagated: its gradient is cut"
    fix_availability = "sometimes"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: the copy has no autograd graph, so the term contributes nothing to the gradient
(the model trains without it) or, when it is the whole loss, `backward()` raises `element 0 of
tensors does not require grad and does not have a grad_fn`.
"""
    triggers = ("tensor(", "Tensor(")
    node_types = (cst.Call,)
    confirmation_module = "tl124"
    docs = """
## What it does
Flags `torch.tensor(x)`, `torch.tensor([x, ...])` and the legacy constructors with a list
(`torch.Tensor([x])`, `torch.FloatTensor([x])`, ...) where `x` is a tensor the analysis knows
requires grad (a loss, a model's output), when the new tensor then flows into a backward pass in
the same function (`total = mse + torch.Tensor([perceptual])`, then `total.backward()`).

Not flagged: copies used only for logging or metrics, `torch.Tensor(x)` / `torch.FloatTensor(x)`
given the tensor itself (an alias that keeps the graph), `torch.as_tensor(x)`, `torch.stack` and
`torch.cat` (they keep the graph), and values of unknown type.

## Why is this bad?
These constructors copy the *values* into a new leaf tensor with no `grad_fn`. Measured on torch
2.13: for a loss `l` with a graph, `torch.tensor(l)`, `torch.tensor([l])`, `torch.Tensor([l])`
and `torch.FloatTensor([l])` all have `requires_grad=False` and no `grad_fn`. Added to a total
loss, the term changes the printed value but not the gradient: the parameters that only it
depends on get no gradient at all and never train (a perceptual loss rebuilt this way in a
published super-resolution model had no effect on training). When the copy is the whole loss,
`backward()` raises `RuntimeError: element 0 of tensors does not require grad and does not have a
grad_fn`.

## Example
```python
perceptual = vgg_loss(sr, hr)
loss = mse(sr, hr) + 0.006 * torch.Tensor([perceptual])
loss.backward()
```

Use instead:
```python
perceptual = vgg_loss(sr, hr)
loss = mse(sr, hr) + 0.006 * perceptual
loss.backward()
```

## Fix safety
Unsafe, where the copy wraps one tensor (`torch.tensor(x)`, `torch.Tensor([x])`): it becomes `x`
itself, which restores the gradient and so changes training; a `[x]` list also had shape (1,)
where `x` is 0-dim, which changes broadcasting only for a 0-dim total.

## References
- https://pytorch.org/docs/stable/generated/torch.tensor.html
- https://pytorch.org/docs/stable/notes/autograd.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        name = sem.qualified_name(node.func)
        if name not in _COPYING and name not in _LEGACY_CONSTRUCTORS:
            return
        positional = [a for a in node.args if a.keyword is None]
        if not positional or positional[0].star:
            return
        data = positional[0].value
        if isinstance(data, (cst.List, cst.Tuple)):
            elements = [e.value for e in data.elements if not isinstance(e, cst.StarredElement)]
        elif name in _COPYING:
            elements = [data]
        else:
            return  # `torch.Tensor(loss)`: an alias that keeps the graph
        culprit = next((e for e in elements if _requires_grad(sem, e)), None)
        if culprit is None or not feeds_backward(sem, node):
            return
        fix = None
        if len(elements) == 1 and len(node.args) == 1:
            fix = FixSpec(f"Use `{ctx.short(culprit, 30)}` itself", (Replace(node, ctx.code(culprit)),),
                          Applicability.UNSAFE)
        ctx.report(node, f"`{ctx.short(node, 40)}` copies `{ctx.short(culprit, 30)}`, which requires grad, into a "
                         f"new tensor without a graph, and the result is backpropagated: no gradient flows through "
                         f"this term, so what it measures is never trained; use `{ctx.short(culprit, 30)}` itself",
                   fix, severity=Severity.ERROR)


def _requires_grad(sem, expr: cst.BaseExpression) -> bool:
    try:
        value = sem.values.of(expr)
    except Exception:  # noqa: BLE001 - an unknown value is not known to require grad
        return False
    return value.is_tensor and value.requires_grad


__all__ = ["LossRewrappedInNewTensor"]
