"""Which expressions are certainly 0-dim tensors (a loss, a full reduction, arithmetic on those),
for the rules about reading one as if it were a 1-element sequence (TL201 `loss.data[0]`, TL212
`loss.data.numpy()[0]`, `sum(loss)`). The answers come from the value model's shape facet; unknown
is "no"."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis.semantic import method_call_in
from torchlint.analysis.value import NUMBER

# Tensor methods that give a 0-dim tensor when called with no dimension.
FULL_REDUCTIONS = frozenset({"sum", "mean", "prod", "max", "min", "norm", "std", "var", "median", "all", "any",
                             "nansum", "nanmean", "amax", "amin"})
# torch functions that give a 0-dim tensor for one tensor argument and no dimension.
TORCH_FULL_REDUCTIONS = frozenset({"sum", "mean", "prod", "max", "min", "norm", "std", "var", "median", "all",
                                   "any", "nansum", "nanmean", "dot", "vdot", "trace"})
# Methods that keep a tensor's shape on the way to `.numpy()`: `loss.data.cpu().numpy()`.
SHAPE_KEEPING = frozenset({"cpu", "detach", "clone", "float", "double", "contiguous"})


def is_zero_dim_tensor(sem, expr: cst.BaseExpression) -> bool:
    """Whether `expr` is certainly a 0-dim tensor, as the value model knows it (a reducing loss, a
    full reduction, arithmetic on those, what a helper returns, what every caller passes), or a
    name that holds either a number or such a tensor (`loss = 0` then `loss += criterion(...)`):
    indexing it fails either way."""
    value = sem.values.of(expr)
    if value.is_tensor:
        return value.is_zero_dim
    if not isinstance(expr, cst.Name):
        return False
    held = sem.values.definition_values(expr)
    return bool(held) and all(v.kind == NUMBER or (v.is_tensor and v.is_zero_dim) for v in held) \
        and any(v.is_tensor for v in held)


def is_full_reduction(sem, expr: cst.BaseExpression) -> bool:
    """`x.sum()`, `x.mean()`, `torch.sum(x)`: a reduction over every dimension, whatever `x` is
    (`.data[0]` on the result is wrong for a tensor, a NumPy scalar and a Python number alike)."""
    if not isinstance(expr, cst.Call) or any(arg.star for arg in expr.args):
        return False
    keywords = [arg.keyword.value for arg in expr.args if arg.keyword is not None]
    if any(keyword != "dtype" for keyword in keywords):
        return False
    if sem.is_torch(expr, *(f"torch.{name}" for name in TORCH_FULL_REDUCTIONS)):
        needed = 2 if sem.qualified_name(expr.func) in ("torch.dot", "torch.vdot") else 1
        return len(expr.args) - len(keywords) == needed
    return method_call_in(expr, FULL_REDUCTIONS) and len(keywords) == len(expr.args)


def reduction_expression(sem, expr: cst.BaseExpression) -> cst.BaseExpression:
    """For a name, the one expression certainly assigned to it where it is read (`acc` in
    `acc = (pred == y).float().mean(); acc.data[0]`), so that a full reduction of values the model
    does not know is seen through the name as it is when written inline; else `expr` itself."""
    if isinstance(expr, cst.Name):
        assigned = sem.assigned_value(expr)
        if assigned is not None:
            return assigned
    return expr


def strip_shape_keeping(expr: cst.BaseExpression) -> cst.BaseExpression:
    """`loss.data.cpu().detach()` → `loss`: what is left after the steps that keep the shape."""
    while True:
        if isinstance(expr, cst.Attribute) and expr.attr.value == "data":
            expr = expr.value
        elif isinstance(expr, cst.Call) and not expr.args and method_call_in(expr, SHAPE_KEEPING):
            expr = expr.func.value
        else:
            return expr


def is_certainly_zero_dim(sem, expr: cst.BaseExpression) -> bool:
    """`expr` (possibly through `.data`, `.cpu()`, `.detach()`) is a 0-dim tensor the value model
    knows, or, in a file that imports torch, a full reduction (inline or through a name)."""
    if is_zero_dim_tensor(sem, expr):
        return True
    base = strip_shape_keeping(expr)
    if base is not expr and is_zero_dim_tensor(sem, base):
        return True
    return sem.imports_torch and is_full_reduction(sem, reduction_expression(sem, base))
