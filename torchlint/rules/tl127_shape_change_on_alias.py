"""TL127: a shape-changing in-place method on `.data` or `.detach()` (`x.data.t_()`): it changes the
temporary alias's shape, not `x`'s."""

from __future__ import annotations

import libcst as cst

from torchlint.finding import Severity
from torchlint.rules.base import Rule, RuleContext

# Measured on torch 2.13: after `x.data.<op>` or `x.detach().<op>`, `x.shape` is unchanged for
# each of these (the alias is a new tensor object sharing x's storage; its sizes and strides are
# its own).
_SHAPE_CHANGING = frozenset({"t_", "transpose_", "squeeze_", "unsqueeze_", "resize_", "resize_as_", "swapaxes_",
                             "swapdims_", "as_strided_"})


class ShapeChangeOnAlias(Rule):
    code = "TL127"
    name = "shape-change-on-alias"
    summary = "A shape-changing in-place method on `.data` or `.detach()` (`x.data.t_()`): the shape change is lost"
    fix_availability = "none"
    default_severity = Severity.ERROR
    severity_docs = """
An **error**: the statement changes only a temporary alias, so the tensor keeps its old shape and
the code after it works on the wrong layout (a transposed sequence/batch pair mixes samples, or
a later shape check fails).
"""
    triggers = ("_(",)
    node_types = (cst.Call,)
    called_names = _SHAPE_CHANGING
    confirmation_module = "tl127"
    docs = """
## What it does
Flags a statement that calls `t_`, `transpose_`, `squeeze_`, `unsqueeze_`, `resize_`,
`resize_as_`, `swapaxes_`, `swapdims_` or `as_strided_` on `x.data` or `x.detach()` of a tensor
`x` and throws the result away: `feature.data.t_()`, `h.detach().unsqueeze_(0)`.

Not flagged: the same methods on `x` itself (`x.t_()` changes `x`), results that are used
(`y = x.data.t_()`), value-changing in-place methods (`x.data.zero_()`, `x.data.clamp_()`,
which write into the shared storage and so do reach `x`), and `.data` of objects the analysis
does not know are tensors (a dataset's `data` attribute).

## Why is this bad?
`x.data` and `x.detach()` return a *new* tensor object that shares `x`'s storage. A value-changing
in-place method writes into that storage and `x` sees it; a shape-changing one only changes the
new object's sizes and strides, which are thrown away with it. Measured on torch 2.13: after
`x.data.t_()` (and each method above, through `.data` or `.detach()`) a (2, 3) `x` is still
(2, 3). Code that relied on this in PyTorch 0.3, where `.data` was the tensor itself, now runs
on the untransposed tensor: a (seq, batch) feature fed where (batch, seq) is expected mixes
samples in the loss without an error.

## Example
```python
feature.data.t_()
loss = criterion(classifier(feature), labels)
```

Use instead:
```python
feature = feature.t()
loss = criterion(classifier(feature), labels)
```

## Fix safety
No fix: whether the new shape should keep the autograd graph (`x = x.t()`) or not
(`x = x.detach().t()`) is the author's choice.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.detach.html
- https://pytorch.org/blog/pytorch-0_4_0-migration-guide/
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        func = node.func
        if not isinstance(func, cst.Attribute) or func.attr.value not in _SHAPE_CHANGING:
            return
        sem = ctx.semantic
        parent = sem.parent(node)
        if not isinstance(parent, cst.Expr):
            return  # the result is used
        alias = func.value
        if isinstance(alias, cst.Attribute) and alias.attr.value == "data":
            base, how = alias.value, ".data"
        elif isinstance(alias, cst.Call) and isinstance(alias.func, cst.Attribute) \
                and alias.func.attr.value == "detach" and not alias.args:
            base, how = alias.func.value, ".detach()"
        else:
            return
        try:
            if not sem.values.of(base).is_tensor:
                return
        except Exception:  # noqa: BLE001 - unknown is not a tensor
            return
        name = ctx.short(base, 30)
        ctx.report(node, f"`{ctx.short(node, 40)}` changes the shape of a temporary alias: `{name}{how}` is a new "
                         f"tensor object, so `{name}` keeps its shape and the code after this line uses the old "
                         f"layout; write `{name} = {name}.{func.attr.value.rstrip('_')}(...)` (or keep the result)",
                   severity=Severity.ERROR)


__all__ = ["ShapeChangeOnAlias"]
