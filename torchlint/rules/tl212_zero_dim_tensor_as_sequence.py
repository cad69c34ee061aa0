"""TL212: a 0-dim tensor read as a sequence: `loss.data.numpy()[0]`, `sum(loss)`."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.semantic import method_call
from torchlint.analysis.zero_dim import SHAPE_KEEPING, is_certainly_zero_dim, is_zero_dim_tensor
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class ZeroDimTensorAsSequence(Rule):
    code = "TL212"
    name = "zero-dim-tensor-as-sequence"
    summary = "`loss.data.numpy()[0]` / `sum(loss)` on a 0-dim tensor raise IndexError / TypeError: use `.item()`"
    fix_availability = "sometimes"
    default_severity = Severity.ERROR
    severity_docs = """
Always an **error**: `.numpy()[0]` of a 0-dim tensor raises `IndexError` and `sum()` of one raises
`TypeError` on every PyTorch since 0.4.
"""
    triggers = ("numpy", "sum")
    node_types = (cst.Subscript, cst.Call)
    confirmation_module = "tl212"
    docs = """
## What it does
Flags two ways PyTorch 0.3 code read the number out of a loss that fail on a 0-dim tensor:

- `t.numpy()[0]` where `t` is a 0-dim tensor, directly or through `.data`, `.cpu()`, `.detach()`
  (`loss.data.numpy()[0]`, `loss.cpu().data.numpy()[0]`, `loss.detach().cpu().numpy()[0]`);
- `sum(t)` (the builtin) of a 0-dim tensor.

`t` is a 0-dim tensor as TL201 knows it: the output of a reducing loss, a full reduction without a
dimension (`x.sum()`, `(pred == y).float().mean()`, also through a name), arithmetic on those.

Not flagged: `x.numpy()[0]` of a batch or of any tensor whose shape is not known to be `()`
(`out.data.numpy()[0]` is the first sample), a reduction over a dimension (`x.sum(1).numpy()[0]`),
`sum(losses)` of a list, `np.sum(...)`, a `sum` the file defines itself.

## Why is this bad?
On PyTorch 0.3 a loss was a 1-element tensor: `loss.data.numpy()` was an array of shape `(1,)` and
`[0]` its number, and `sum(loss)` iterated over its one element. Since PyTorch 0.4 a loss and a full
reduction are 0-dim. Measured on torch 2.13: `loss.data.numpy()[0]` raises `IndexError: too many
indices for array: array is 0-dimensional, but 1 were indexed`; `sum(loss)` raises `TypeError:
iteration over a 0-d tensor`. (`loss.cpu().numpy()[0]` on a loss that still has its graph stops
one step earlier, with `RuntimeError: Can't call numpy() on Tensor that requires grad`.) Every
finding is an error: the program stops there at the first iteration.

## Example
```python
loss = criterion(model(x), y)
losses.append(loss.data.numpy()[0])
total = sum(loss)
```

Use instead:
```python
loss = criterion(model(x), y)
losses.append(loss.item())
total = loss.item()
```

## Fix safety
`t.numpy()[0]` becomes `t.item()` (keeping `.data`/`.cpu()`/`.detach()`): unsafe. The program no
longer crashes and the number is the same (a float32 widened exactly to a Python float), but on
PyTorch 0.3 it was a NumPy `float32` scalar: `repr` prints more digits, and arithmetic with it runs
in float64. Where the NumPy scalar matters, `t.numpy()[()]` is the exact spelling. `sum(t)` has no
fix: use `t` where the tensor is meant and `t.item()` where the number is.

## References
- https://pytorch.org/blog/pytorch-0_4_0-migration-guide/ (0-dim tensors, `.item()`)
- https://pytorch.org/docs/stable/generated/torch.Tensor.item.html
- https://numpy.org/doc/stable/user/basics.indexing.html (indexing a 0-d array)
"""

    def check(self, node: cst.CSTNode, ctx: RuleContext) -> None:
        if type(node) is cst.Subscript:
            self._numpy_index(node, ctx)
        else:
            self._builtin_sum(node, ctx)

    def _numpy_index(self, node: cst.Subscript, ctx: RuleContext) -> None:
        numpy_call = node.value
        if not _is_index_zero(node) or not method_call(numpy_call, "numpy") or _is_target(node, ctx):
            return
        if any(arg.keyword is None or arg.keyword.value != "force" for arg in numpy_call.args):
            return
        tensor = numpy_call.func.value
        if not is_certainly_zero_dim(ctx.semantic, tensor):
            return
        fixed = f"{ctx.code(tensor)}.item()"
        shown = " ".join(fixed.split())
        advice = f"use `{shown}`" if len(shown) <= 40 else "read the number with `.item()`"
        raised = "`IndexError: too many indices for array: array is 0-dimensional`"
        if _still_has_graph(ctx.semantic, tensor):
            raised = ("`RuntimeError: Can't call numpy() on Tensor that requires grad` (and, detached, " + raised
                      + ")")
        message = (
            f"`{ctx.short(node, 40)}` raises {raised}: since PyTorch 0.4 a loss or a full reduction is 0-dim, so "
            f"`.numpy()` gives a 0-d array; {advice}"
        )
        ctx.report(node, message, FixSpec(f"Replace with `{fixed}`", (Replace(node, fixed),), Applicability.UNSAFE),
                   severity=Severity.ERROR)

    def _builtin_sum(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if not (type(func) is cst.Name and func.value == "sum") or not node.args:
            return
        first = node.args[0]
        if first.star or first.keyword is not None or len(node.args) > 2:
            return
        sem = ctx.semantic
        if sem.scopes.lookup("sum", node) is not None:  # the file's own `sum`
            return
        if not is_zero_dim_tensor(sem, first.value):
            return
        name = ctx.short(first.value, 30)
        message = (
            f"`{ctx.short(node, 40)}` raises `TypeError: iteration over a 0-d tensor`: since PyTorch 0.4 a loss or a "
            f"full reduction is 0-dim, not a 1-element tensor; use `{name}` (the tensor) or `{name}.item()` "
            f"(the number)"
        )
        ctx.report(node, message, severity=Severity.ERROR)


def _still_has_graph(sem, tensor: cst.BaseExpression) -> bool:
    """`loss.cpu().numpy()` of a loss that certainly has a graph, with no `.data`/`.detach()` on
    the way: `.numpy()` itself raises first."""
    current = tensor
    while True:
        if isinstance(current, cst.Attribute) and current.attr.value == "data":
            return False
        if isinstance(current, cst.Call) and method_call(current, "detach"):
            return False
        if isinstance(current, cst.Call) and not current.args and isinstance(current.func, cst.Attribute) \
                and current.func.attr.value in SHAPE_KEEPING:
            current = current.func.value
            continue
        break
    return sem.values.of(current).requires_grad


def _is_index_zero(node: cst.Subscript) -> bool:
    """`[0]` written exactly so (not `[ 0 ]` or `[(0)]`)."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return False
    element = node.slice[0]
    index = element.slice.value
    return isinstance(index, cst.Integer) and index.value == "0" and not index.lpar \
        and element.comma is cst.MaybeSentinel.DEFAULT and element.slice.star is None \
        and _empty(node.lbracket.whitespace_after) and _empty(node.rbracket.whitespace_before) \
        and _empty(node.whitespace_after_value)


def _empty(whitespace) -> bool:
    return isinstance(whitespace, cst.SimpleWhitespace) and whitespace.value == ""


def _is_target(node: cst.Subscript, ctx: RuleContext) -> bool:
    parent = ctx.semantic.parent(node)
    return isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.Del)) and getattr(parent, "target", None) is node
