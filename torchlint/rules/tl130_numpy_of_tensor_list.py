"""TL130: NumPy or matplotlib over a list of tensors that require grad: RuntimeError."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import silent
from torchlint.analysis.lists import appended
from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

# Measured on torch 2.13 with numpy 2.4: each of these over a list of tensors that require grad
# raises `RuntimeError: Can't call numpy() on Tensor that requires grad`.
_NUMPY = frozenset(f"numpy.{name}" for name in (
    "mean", "sum", "average", "std", "var", "array", "asarray", "median", "max", "min", "stack",
    "concatenate", "cumsum", "nanmean", "percentile", "argmax", "argmin", "ptp", "savetxt", "save",
    "hstack", "vstack"))
_PLOTTING = frozenset({"matplotlib.pyplot.plot", "matplotlib.pyplot.hist", "matplotlib.pyplot.scatter"})


class NumpyOfTensorList(Rule):
    code = "TL130"
    name = "numpy-of-tensor-list"
    summary = "NumPy or matplotlib over a list of tensors that require grad (`np.mean(losses)`): RuntimeError"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: NumPy converts each element with `Tensor.__array__`, which raises `RuntimeError:
Can't call numpy() on Tensor that requires grad` for the first element that requires grad.
"""
    triggers = ("np.", "numpy", "plt.", "pyplot")
    node_types = (cst.Call,)
    confirmation_module = "tl130"
    docs = """
## What it does
Flags `np.mean(losses)` (and `np.array`, `np.asarray`, `np.sum`, `np.std`, `np.average`,
`np.median`, `np.stack`, ... and `plt.plot` / `plt.hist` / `plt.scatter`, any of their
positional data arguments) where `losses`, or a slice of it (`losses[-100:]`), is a list the
program fills with `losses.append(x)` and every `x` is a tensor the analysis knows requires grad
(a loss that is backpropagated, a model's output). `float(np.mean(losses))` is the same finding.

Not flagged: lists of `loss.item()` or `loss.detach()` values, lists filled in ways the analysis
does not follow (`extend`, passed to a helper), tensors made under `torch.no_grad()`, a
conversion that itself runs under `torch.no_grad()` (there `.numpy()` works on tensors that
require grad), and Python's own `sum(losses)` / `float(sum(losses))`, which add the tensors with
torch and convert one 0-dim tensor: measured on torch 2.13, both work.

## Why is this bad?
NumPy turns each element into an array through `Tensor.__array__`, which calls `.numpy()`;
measured on torch 2.13 with NumPy 2.4, `np.mean([l1, l2])` of two losses with a graph raises
`RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy()
instead.` matplotlib converts its data with NumPy the same way (measured with matplotlib 3.11:
`plt.plot`, `plt.hist`, `plt.scatter` raise the same error). The crash comes at the end of
an epoch or a run, after the training time was spent; and the list kept every iteration's graph
alive until then (TL003).

## Example
```python
losses = []
for x, y in loader:
    loss = criterion(model(x), y)
    loss.backward()
    losses.append(loss)
print(np.mean(losses))
```

Use instead:
```python
losses.append(loss.item())
```

## Fix safety
No fix here: the fix belongs where the list is filled (`losses.append(loss.item())`, which
TL003 offers). None at the call is exact: `np.mean([t.detach() for t in losses])` still fails
for CUDA tensors (`can't convert cuda:0 device type tensor to numpy`), and
`torch.stack(losses).mean().item()` gives a Python float summed in another order, not NumPy's
float32 result.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.item.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        name = sem.qualified_name(node.func)
        if name not in _NUMPY and name not in _PLOTTING:
            return
        positional = [a.value for a in node.args if a.keyword is None and not a.star]
        if not positional:
            return
        # NumPy's first argument is the data; matplotlib's data are its positional arguments
        # (`plt.plot(losses)`, `plt.plot(epochs, losses, "r-")`).
        candidates = positional if name in _PLOTTING else positional[:1]
        for argument in candidates:
            target = _listed_name(argument)
            if target is None:
                continue
            items = appended(sem, target)
            if not items:
                continue
            culprit = _first_requiring(sem, items)
            if culprit is None or len([i for i in items if _requires(sem, i)]) != len(items):
                continue
            # `.numpy()` raises only while grad is enabled (torch 2.13: under `no_grad` the same
            # call converts the tensors).
            if silent.grad_may_be_off(sem, node):
                return
            ctx.report(node, f"`{ctx.short(node, 40)}` converts `{target.value}`, a list of tensors that require "
                             f"grad (`{ctx.short(sem.parent(sem.parent(culprit)), 40)}`), with NumPy: it raises "
                             f"`RuntimeError: Can't call numpy() on Tensor that requires grad`; append "
                             f"`{ctx.short(culprit, 20)}.item()` instead", severity=Severity.ERROR)
            return


def _listed_name(argument: cst.BaseExpression) -> Optional[cst.Name]:
    """`losses`, or a slice of it (`losses[-100:]`: a list of the same tensors)."""
    if isinstance(argument, cst.Name):
        return argument
    if isinstance(argument, cst.Subscript) and isinstance(argument.value, cst.Name) and len(argument.slice) == 1 \
            and isinstance(argument.slice[0].slice, cst.Slice):
        return argument.value
    return None


def _requires(sem, expr: cst.BaseExpression) -> bool:
    try:
        value = sem.values.of(expr)
    except Exception:  # noqa: BLE001
        return False
    return value.is_tensor and value.requires_grad


def _first_requiring(sem, items) -> Optional[cst.BaseExpression]:
    for item in items:
        if _requires(sem, item):
            return item
    return None


__all__ = ["NumpyOfTensorList"]
