"""TL004: `.view()` on the non-contiguous result of permute/transpose."""

from __future__ import annotations

from typing import Optional

import libcst as cst

from torchlint.analysis import shapes
from torchlint.analysis.semantic import method_call
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

TRANSPOSING_METHODS = {"permute", "transpose", "t", "swapaxes", "swapdims", "movedim", "moveaxis"}
TRANSPOSING_ATTRIBUTES = {"T", "mT", "mH"}
TRANSPOSING_FUNCTIONS = {
    "torch.transpose", "torch.permute", "torch.t", "torch.swapaxes", "torch.swapdims",
    "torch.movedim", "torch.moveaxis",
}
# Keep strides as they are, so a transposed input stays non-contiguous through them.
STRIDE_PRESERVING = {"detach"}
DTYPE_NAMES = {
    "float", "float16", "float32", "float64", "half", "double", "bfloat16", "int8", "uint8",
    "int16", "int32", "int64", "long", "int", "short", "bool", "complex64", "complex128", "cfloat",
    "cdouble", "float8_e4m3fn", "float8_e5m2", "uint16", "uint32", "uint64",
}


class ViewAfterTranspose(Rule):
    code = "TL004"
    name = "view-after-transpose"
    summary = "`.view()` on the non-contiguous result of `permute`/`transpose` may fail"
    fix_availability = "always"
    triggers = ("view",)
    node_types = (cst.Call,)
    confirmation_module = "tl004"
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
`view(*shape)`, `view(shape)`, `view(x.size())`, and transposes with arguments that are not
literal integers — their effect is not known.

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
        receiver = node.func.value
        source = self._transposing_source(receiver, ctx)
        if source is None:
            return
        if not shapes.view_must_merge_reordered(ctx.semantic, source, node):
            return  # `x.transpose(1, 2).view(B, C, H, W)` may only split a dimension
        if shapes.may_carry_permuted_layout(ctx.semantic, source, lambda e: _is_transposing(e, ctx)):
            return  # `F.interpolate(x.permute(0, 3, 1, 2)).permute(0, 2, 3, 1)` is contiguous
        dims = shapes.permuted_shape(ctx.semantic, source)
        if dims is not None and shapes.view_only_splits(ctx.semantic, dims, node):
            return  # `B, N, C = x.shape; x.transpose(1, 2).view(B, C, N)` is a no-op
        via = ""
        if isinstance(receiver, cst.Name):
            via = f" (`{receiver.value}` is assigned from `{ctx.short(source, 40)}`)"
        ctx.report(
            node.func.attr,
            f"`.view()` on a non-contiguous tensor from `{_operation(source)}` may fail{via}; "
            "use `.reshape(...)` or `.contiguous().view(...)`",
            FixSpec("Insert `.contiguous()` before `.view()`", (Replace(node.func.attr, "contiguous().view"),)),
        )

    def _transposing_source(self, receiver: cst.BaseExpression, ctx: RuleContext) -> Optional[cst.CSTNode]:
        for _ in range(4):  # follow `y = x.t()`, `z = y.detach()` chains a few steps
            while method_call(receiver, *STRIDE_PRESERVING) and not receiver.args:
                receiver = receiver.func.value
            if not isinstance(receiver, cst.Name):
                break
            value = ctx.semantic.reaching_value(receiver, depth=1)
            if value is None:
                return None
            receiver = value
        return receiver if _is_transposing(receiver, ctx) else None


def _is_transposing(expr: cst.BaseExpression, ctx: RuleContext) -> bool:
    if isinstance(expr, cst.Attribute):
        return expr.attr.value in TRANSPOSING_ATTRIBUTES
    if not isinstance(expr, cst.Call):
        return False
    if ctx.semantic.is_torch(expr, *TRANSPOSING_FUNCTIONS):
        return True
    if method_call(expr, *TRANSPOSING_METHODS):
        owner = expr.func.value
        if isinstance(owner, cst.Name) and owner.value == "self":
            return False  # `self.t(x)` calls a submodule or method named like a transpose
        if expr.func.attr.value == "t" and expr.args:
            return False  # `Tensor.t()` takes no arguments: this is something else
        # `torch.t(x)` is handled above; `np.transpose` / `torch.Tensor.t` style calls are not ours.
        return ctx.semantic.qualified_name(owner) is None and not (
            isinstance(owner, cst.Name) and owner.value in ("np", "numpy")
        )
    return False


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
    if name is not None and name.startswith("torch.") and name.split(".")[-1] in DTYPE_NAMES:
        return True
    if isinstance(value, cst.Name) and "dtype" in value.value.lower():
        return True
    if isinstance(value, cst.Attribute) and "dtype" in value.attr.value.lower():
        return True
    return False
