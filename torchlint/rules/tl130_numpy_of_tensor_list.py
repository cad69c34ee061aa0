"""TL130: NumPy or matplotlib over a list of tensors that require grad: RuntimeError."""

from __future__ import annotations

from typing import Optional

import libcst as cst

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
`np.median`, `np.stack`, ... and `plt.plot` / `plt.hist` / `plt.scatter`) where `losses` is a
list the program fills with `losses.append(x)` and every `x` is a tensor the analysis knows
requires grad (a loss that is backpropagated, a model's output).

Not flagged: lists of `loss.item()` or `loss.detach()` values, lists filled in ways the analysis
does not follow (`extend`, passed to a helper), and tensors made under `torch.no_grad()`.

## Why is this bad?
NumPy turns each element into an array through `Tensor.__array__`, which calls `.numpy()`;
measured on torch 2.13 with NumPy 2.4, `np.mean([l1, l2])` of two losses with a graph raises
`RuntimeError: Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy()
instead.` matplotlib converts its data with NumPy the same way. The crash comes at the end of
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
TL003 offers).

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.item.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        sem = ctx.semantic
        name = sem.qualified_name(node.func)
        if name not in _NUMPY and name not in _PLOTTING:
            return
        positional = [a for a in node.args if a.keyword is None and not a.star]
        if not positional or not isinstance(positional[-1 if name in _PLOTTING else 0].value, cst.Name):
            return
        target = positional[-1 if name in _PLOTTING else 0].value
        items = appended(sem, target)
        if not items:
            return
        culprit = _first_requiring(sem, items)
        if culprit is None or len([i for i in items if _requires(sem, i)]) != len(items):
            return
        ctx.report(node, f"`{ctx.short(node, 40)}` converts `{target.value}`, a list of tensors that require grad "
                         f"(`{ctx.short(sem.parent(sem.parent(culprit)), 40)}`), with NumPy: it raises "
                         f"`RuntimeError: Can't call numpy() on Tensor that requires grad`; append "
                         f"`{ctx.short(culprit, 20)}.item()` instead", severity=Severity.ERROR)


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
