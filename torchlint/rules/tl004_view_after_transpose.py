"""TL004: `.view()` on the non-contiguous result of permute/transpose."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import shapes
from torchlint.analysis import torch_api as api
from torchlint.analysis.semantic import method_call
from torchlint.analysis.value import PERMUTED
from torchlint.finding import Severity
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

class ViewAfterTranspose(Rule):
    code = "TL004"
    name = "view-after-transpose"
    summary = "`.view()` on the non-contiguous result of `permute`/`transpose` may fail"
    fix_availability = "always"
    triggers = ("view",)
    node_types = (cst.Call,)
    called_names = frozenset(("view",))  # check returns at once for any other call
    confirmation_module = "tl004"
    severity_docs = """
An **error** when the shape facet knows every size of the transposed tensor and all
are above 1 (`torch.randn(3, 4).t().view(12)`): the view raises on every run. A **warning**
otherwise: the view fails for most shapes but works when a dimension it merges has size 1, so it
depends on the data's shape.
"""
    docs = """
## What it does
Flags `.view(shape)` applied to the result of `.permute()`, `.transpose()`, `.t()`, `.T`, `.mT`,
`.mH`, `.swapaxes()`, `.swapdims()`, `.movedim()` or `torch.transpose/permute/t(...)`, directly or
through a variable assigned from one, with no `.contiguous()` in between, when the view must merge
dimensions that the transpose put out of memory order.

That is decided from the permutation and the number of sizes the view is given, not from the
sizes themselves: after `x.permute(0, 2, 3, 1)` only the middle pair of dimensions is still in
memory order, so `.view(n, -1)` (2 sizes for 3 runs) must merge across a break and fails, while
`.view(1, -1, dim)` can merge just that pair and is not flagged. Where the rank is not spelled out
(`x.transpose(1, 2)`), the view must fail at every rank the code allows:
`.transpose(1, 2).view(b, n, c)` is flagged, `.transpose(1, 2).view(b, c, h, w)` (which may only
split a dimension) is not. A view of the same rank over a tensor whose every neighbouring pair
was reordered can only be a no-op, and is flagged unless the code spells the shape out and the
view keeps it (`B, N, C = x.shape` then `x.transpose(1, 2).view(B, C, N)`). Not flagged either:
`view(*shape)`, `view(shape)`, `view(x.size())`, transposes with arguments that are not
literal integers — their effect is not known — and transposes that move only dimensions the
code spells as size 1 (`torch.randn(n, 1).t().view(-1)`, `x.view(-1, 1).t()`): a size-1
dimension's stride does not matter, so the result is contiguous (measured on torch 2.13:
`torch.randn(5, 1).t().is_contiguous()` is True and its `.view(-1)` works).

## Why is this bad?
Transposing only swaps strides; the data stays where it was. `.view()` never copies, so for most
shapes it cannot express the new shape over those strides and raises (measured on torch 2.13):
`RuntimeError: view size is not compatible with input tensor's size and stride (at least one
dimension spans across two contiguous subspaces). Use .reshape(...) instead.`
A dimension of size 1 can still let such a view work, which is why this bug survives tests on
toy sizes (a batch of one, a single channel) and then fails when a dimension grows.

## Example
```python
out = attn.transpose(1, 2).view(batch, seq, heads * dim)
```

Use instead:
```python
out = attn.transpose(1, 2).reshape(batch, seq, heads * dim)
# or, to keep the no-copy guarantee explicit:
out = attn.transpose(1, 2).contiguous().view(batch, seq, heads * dim)
```

## Fix safety
The fix inserts `.contiguous()` before `.view(...)` and is safe: `.contiguous()` returns the same
tensor when it already is contiguous and a contiguous copy otherwise, so every shape that worked
still gives the same values and the failing ones now work. `.view(dtype)` reinterpretations are
not flagged.

## References
- https://pytorch.org/docs/stable/generated/torch.Tensor.view.html
- https://pytorch.org/docs/stable/generated/torch.Tensor.contiguous.html
"""

    def check(self, node: cst.Call, ctx: RuleContext) -> None:
        if not method_call(node, "view") or not node.args or _is_dtype_view(node, ctx):
            return
        sem = ctx.semantic
        receiver = node.func.value
        tensor = sem.values.of(receiver)
        layout = tensor.layout
        if layout.state != PERMUTED:
            return  # laid out in order, or may be: `F.interpolate(x.permute(...)).permute(...)`
        dims = tensor.shape
        if dims is not None and shapes.view_only_splits(sem, dims, node):
            return  # `B, N, C = x.shape; x.transpose(1, 2).view(B, C, N)` is a no-op
        if dims is not None and shapes.contiguous_apart_from_size_one(layout, dims):
            return  # `torch.randn(n, 1).t()` moved only a size-1 dimension: still contiguous
        if _transposed_column(layout.source):
            return  # `labels.unsqueeze(1).t()`: a 2-D tensor with a size-1 dimension, still contiguous
        if not shapes.view_must_merge_reordered(layout, node):
            order = shapes.layout_order(layout)
            if dims is None or order is None or not shapes.view_merges_across_break(sem, dims, order, node):
                return  # `x.transpose(1, 2).view(B, C, H, W)` may only split a dimension
        source = layout.source
        via = ""
        if source is not receiver and source is not None:
            where = sem.elsewhere(source)  # a helper or forward of another project file
            via = f" (`{ctx.short(receiver, 30)}` comes from `{ctx.short(source, 40)}`{', ' + where if where else ''})"
        always = shapes.every_size_above_one(dims)
        ctx.report(
            node.func.attr,
            f"`.view()` on a non-contiguous tensor from `{_operation(source)}` "
            f"{'fails' if always else 'may fail'}{via}; use `.reshape(...)` or `.contiguous().view(...)`",
            FixSpec("Insert `.contiguous()` before `.view()`", (Replace(node.func.attr, "contiguous().view"),)),
            # Every size known and above 1: it raises on every run; else only for some shapes.
            severity=Severity.ERROR if always else Severity.WARNING,
        )


def _transposed_column(source: Optional[cst.CSTNode]) -> bool:
    """`x.unsqueeze(1).t()`, `x[:, None].t()`: `.t()` takes at most two dimensions, so its input is
    (n, 1) or (1, n), and the transpose of a tensor with a size-1 dimension is contiguous (measured
    on torch 2.13: `torch.randn(5, 1).t().is_contiguous()` is True, `.view(-1)` works)."""
    if not (isinstance(source, cst.Call) and isinstance(source.func, cst.Attribute)
            and source.func.attr.value == "t" and not source.args):
        return False
    inner = source.func.value
    if isinstance(inner, cst.Call) and isinstance(inner.func, cst.Attribute) \
            and inner.func.attr.value in ("unsqueeze", "unsqueeze_"):
        return True
    return isinstance(inner, cst.Subscript) and any(
        isinstance(element.slice, cst.Index) and isinstance(element.slice.value, cst.Name)
        and element.slice.value.value == "None" for element in inner.slice)


def _operation(expr: cst.CSTNode) -> str:
    if isinstance(expr, cst.Attribute):
        return f".{expr.attr.value}"
    func = expr.func
    name = func.attr.value if isinstance(func, cst.Attribute) else getattr(func, "value", "transpose")
    return f".{name}()"


def _is_dtype_view(call: cst.Call, ctx: RuleContext) -> bool:
    if len(call.args) != 1:
        return False
    arg = call.args[0]
    if arg.keyword is not None:
        return arg.keyword.value == "dtype"
    value = arg.value
    name = ctx.semantic.qualified_name(value)
    if name is not None and name.startswith("torch.") and api.is_dtype_name(name.split(".")[-1]):
        return True
    if isinstance(value, cst.Name) and "dtype" in value.value.lower():
        return True
    if isinstance(value, cst.Attribute) and "dtype" in value.attr.value.lower():
        return True
    return False
