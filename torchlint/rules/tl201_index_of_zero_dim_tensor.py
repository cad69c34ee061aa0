"""TL201: `loss.data[0]` / `loss[0]` on a 0-dim tensor (PyTorch 0.3's way to read a number)."""

from __future__ import annotations

import libcst as cst

from torchlint.analysis import legacy
from torchlint.analysis import torch_api as api
from torchlint.analysis.semantic import method_call
from torchlint.analysis.value import CRITERION
from torchlint.finding import Applicability
from torchlint.rules.base import FixSpec, Replace, Rule, RuleContext

# Reductions that give a 0-dim tensor when called with no dimension.
_FULL_REDUCTIONS = {"sum", "mean", "prod", "max", "min", "norm", "std", "var", "median", "all", "any",
                    "nansum", "nanmean", "amax", "amin"}
# torch functions that give a 0-dim tensor for one tensor argument and no dimension.
_TORCH_FULL_REDUCTIONS = {"sum", "mean", "prod", "max", "min", "norm", "std", "var", "median", "all",
                          "any", "nansum", "nanmean", "dot", "vdot", "trace"}
# Methods that keep a 0-dim tensor 0-dim.
_SHAPE_KEEPING_METHODS = {"cpu", "cuda", "to", "float", "double", "half", "bfloat16", "long", "int",
                          "detach", "clone", "abs", "sqrt", "exp", "log", "neg", "contiguous", "type"}
# Arithmetic that keeps a 0-dim tensor 0-dim when every argument is a number (`t.mul_(-0.5)`).
_SCALAR_ARITHMETIC = {"mul", "div", "add", "sub", "pow", "mul_", "div_", "add_", "sub_", "pow_", "clamp", "clamp_"}
_ACCUMULATING = (cst.AddAssign, cst.SubtractAssign, cst.MultiplyAssign, cst.DivideAssign)
# Tensor methods whose result is a tensor (for `(pred == y).sum()`: is `pred == y` a tensor?).
_TENSOR_METHODS = {"eq", "ne", "gt", "lt", "ge", "le", "float", "long", "int", "byte", "bool", "double",
                   "half", "cpu", "cuda", "to", "detach", "clone", "view", "view_as", "reshape", "squeeze",
                   "unsqueeze", "argmax", "argmin", "abs", "type_as", "contiguous", "t", "sum", "mean",
                   "masked_select", "flatten"}
_TORCH_TENSOR_FUNCTIONS = api.FACTORIES | api.LIKE_FACTORIES | {
    "cat", "stack", "matmul", "mm", "bmm", "exp", "log", "sigmoid", "tanh", "relu", "softmax",
    "log_softmax", "abs", "sqrt", "pow", "where", "clamp", "argmax", "argmin", "eq", "ne", "gt", "lt",
    "ge", "le", "from_numpy", "squeeze", "unsqueeze", "flatten", "masked_select", "mul", "add", "sub", "div",
}
_TUPLE_RETURNING = {"max", "min", "sort", "topk", "kthvalue", "median", "mode"}
_VARIABLE = ("torch.autograd.Variable", "torch.autograd.variable.Variable")
# nn.*Loss classes whose call does not return the loss alone.
_NOT_SCALAR_LOSSES = {"AdaptiveLogSoftmaxWithLoss"}


class IndexOfZeroDimTensor(Rule):
    code = "TL201"
    name = "index-of-zero-dim-tensor"
    summary = "`loss.data[0]` / `loss[0]` on a 0-dim tensor raises IndexError since PyTorch 0.4: use `.item()`"
    fix_availability = "always"
    triggers = ("[0]",)
    node_types = (cst.Subscript,)
    confirmation_module = "tl201"
    docs = """
## What it does
Flags `t.data[0]` and `t[0]` where `t` is certainly a 0-dim tensor: the output of a loss
(`criterion(out, y)` with an `nn.*Loss` whose reduction is not `"none"`, `F.nll_loss(...)`), a full
reduction without a dimension (`x.sum()`, `x.mean()`, `torch.sum(x)`, `(pred == y).sum()`), a
name or `self.attr` bound to one, a parameter that every call of its function in the file passes
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
            if not (_is_zero_dim_tensor(sem, receiver) or _imports_torch(sem) and _is_full_reduction(sem, receiver, True)):
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
        ctx.report(node, message, FixSpec(f"Replace with `{fixed}`", (Replace(node, fixed),), applicability))


def _imports_torch(sem) -> bool:
    """Whether the file imports torch (so `.sum().data[0]` is the PyTorch 0.3 idiom)."""
    cached = sem.__dict__.get("_legacy_imports_torch")
    if cached is None:
        cached = any(binding.kind == "import" and (binding.qualified_name or "").split(".")[0] == "torch"
                     for names in sem.scopes.bindings.values() for bindings in names.values() for binding in bindings)
        sem.__dict__["_legacy_imports_torch"] = cached
    return cached


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
    return isinstance(parent, (cst.AssignTarget, cst.AugAssign, cst.Del)) and getattr(parent, "target", None) is node


def _is_zero_dim_tensor(sem, expr: cst.BaseExpression, depth: int = 8) -> bool:
    """Whether `expr` is certainly a 0-dim tensor."""
    if depth <= 0:
        return False
    if isinstance(expr, cst.Call):
        if _is_reducing_loss_call(sem, expr) or _is_full_reduction(sem, expr, False, depth - 1):
            return True
        if method_call(expr, *_SHAPE_KEEPING_METHODS) or method_call(expr, *_SCALAR_ARITHMETIC) and all(
                _is_number(arg.value) for arg in expr.args):
            return _is_zero_dim_tensor(sem, expr.func.value, depth - 1)
        return _returns_zero_dim(sem, expr, depth - 1)
    if isinstance(expr, cst.Attribute):
        if expr.attr.value == "data":
            return _is_zero_dim_tensor(sem, expr.value, depth - 1)
        return legacy.values_satisfy(sem, expr, lambda v: _is_zero_dim_tensor(sem, v, depth - 1))
    if isinstance(expr, cst.BinaryOperation) and isinstance(
            expr.operator, (cst.Add, cst.Subtract, cst.Multiply, cst.Divide, cst.Power)):
        sides = (expr.left, expr.right)
        if not all(_is_number(side) or _is_zero_dim_tensor(sem, side, depth - 1) for side in sides):
            return False
        return not all(_is_number(side) for side in sides)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        return _is_zero_dim_tensor(sem, expr.expression, depth - 1)
    if isinstance(expr, cst.Name):
        return _bound_or_passed(sem, expr, lambda v: _is_zero_dim_tensor(sem, v, depth - 1)) \
            or _accumulates_zero_dim(sem, expr, depth - 1)
    return False


def _bound_or_passed(sem, expr: cst.BaseExpression, predicate) -> bool:
    """`expr` is bound to values satisfying `predicate`, or is a parameter that every call of its
    function in this file passes such a value for (`train(..., criterion, ...)`)."""
    if legacy.values_satisfy(sem, expr, predicate):
        return True
    values = legacy.passed_values(sem, expr) if isinstance(expr, cst.Name) else None
    return values is not None and all(predicate(value) for value in values)


def _accumulates_zero_dim(sem, name: cst.Name, depth: int) -> bool:
    """`loss = 0` and then `loss += criterion(out, y)` (in a loop): every definition that may reach
    the name is a number or a 0-dim tensor, added, subtracted, multiplied or divided in, and one is
    a tensor. Whichever it holds, indexing it fails (a number cannot be indexed either)."""
    if depth <= 0:
        return False
    definitions = legacy.reaching_definitions(sem, name) or ()
    tensor = False
    for definition in definitions:
        if definition.kind == "assign" and definition.path == () and definition.value is not None:
            value = definition.value
        elif definition.kind == "augassign" and isinstance(definition.statement, cst.AugAssign) \
                and isinstance(definition.statement.operator, _ACCUMULATING):
            value = definition.value
        else:
            return False
        if _is_number(value):
            continue
        if not _is_zero_dim_tensor(sem, value, depth):
            return False
        tensor = True
    return tensor


def _is_number(expr: cst.BaseExpression) -> bool:
    return isinstance(expr, (cst.Integer, cst.Float)) or (
        isinstance(expr, cst.UnaryOperation) and isinstance(expr.expression, (cst.Integer, cst.Float)))


def _is_reducing_loss_call(sem, call: cst.Call) -> bool:
    """A torch loss call whose reduction is "mean" or "sum": `criterion(out, y)`, `F.nll_loss(...)`."""
    name = sem.qualified_name(call.func)
    if name is not None and name.startswith("torch.nn.functional."):
        return name.rsplit(".", 1)[-1] in api.FUNCTIONAL_LOSSES \
            and legacy.effective_reduction(sem, call) in ("mean", "sum")
    return _is_reducing_criterion(sem, call.func)


def _is_reducing_criterion(sem, expr: cst.BaseExpression, depth: int = 5) -> bool:
    """An `nn.*Loss` instance whose reduction is "mean" or "sum" (also moved: `.cuda()`)."""
    if depth <= 0:
        return False
    if isinstance(expr, cst.Call):
        name = sem.qualified_name(expr.func) or ""
        if name and api.is_loss_class(name):
            return name.rsplit(".", 1)[-1] not in _NOT_SCALAR_LOSSES \
                and legacy.effective_reduction(sem, expr) in ("mean", "sum")
        if method_call(expr, "cuda", "to", "cpu"):
            return _is_reducing_criterion(sem, expr.func.value, depth - 1)
        return False
    if _bound_or_passed(sem, expr, lambda v: _is_reducing_criterion(sem, v, depth - 1)):
        return True
    return _model_criterion_reduces(sem, expr)


def _model_criterion_reduces(sem, expr: cst.BaseExpression) -> bool:
    """The value model knows `expr` as one `nn.*Loss` instance (through `self.criterion`, a
    parameter, a container), and its construction reduces."""
    value = sem.values.of(expr)
    site = value.site
    if value.kind != CRITERION or not isinstance(site, cst.Call) or isinstance(site.func, cst.Attribute) \
            and site.func.attr.value in ("cuda", "to", "cpu"):
        return False
    name = sem.qualified_name(site.func) or ""
    return bool(name) and api.is_loss_class(name) and name.rsplit(".", 1)[-1] not in _NOT_SCALAR_LOSSES \
        and legacy.effective_reduction(sem, site) in ("mean", "sum")


def _is_full_reduction(sem, expr: cst.BaseExpression, any_receiver: bool, depth: int = 8) -> bool:
    """`x.sum()`, `x.mean()`, `torch.sum(x)`: a reduction over every dimension. With
    `any_receiver`, `x` may be anything (`.data[0]` on the result is wrong for a tensor, a NumPy
    scalar and a Python number alike); otherwise `x` must be a tensor."""
    if depth <= 0:
        return False
    if isinstance(expr, cst.Name):
        return legacy.values_satisfy(sem, expr, lambda v: _is_full_reduction(sem, v, any_receiver, depth - 1))
    if not isinstance(expr, cst.Call) or any(arg.star for arg in expr.args):
        return False
    keywords = [arg.keyword.value for arg in expr.args if arg.keyword is not None]
    if any(keyword != "dtype" for keyword in keywords):
        return False
    if sem.is_torch(expr, *(f"torch.{name}" for name in _TORCH_FULL_REDUCTIONS)):
        needed = 2 if sem.qualified_name(expr.func) in ("torch.dot", "torch.vdot") else 1
        return len(expr.args) - len(keywords) == needed
    if not method_call(expr, *_FULL_REDUCTIONS) or len(keywords) != len(expr.args):
        return False
    return any_receiver or _is_tensor(sem, expr.func.value, depth - 1)


def _is_tensor(sem, expr: cst.BaseExpression, depth: int = 4) -> bool:
    """Whether `expr` is certainly a tensor (of any shape)."""
    if depth <= 0:
        return False
    if _is_zero_dim_tensor(sem, expr, depth - 1):
        return True
    if isinstance(expr, cst.Call):
        name = sem.qualified_name(expr.func)
        if name in _VARIABLE:
            return True
        if name is not None and name.startswith("torch.") and name.count(".") == 1:
            function = name.split(".")[1]
            return function in _TORCH_TENSOR_FUNCTIONS or function.endswith("Tensor")
        if method_call(expr, *_TENSOR_METHODS):
            receiver = expr.func.value
            if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
                return True  # `out.data.max(1)`: only a tensor has `.data` with tensor methods
            return _is_tensor(sem, receiver, depth - 1)
        return False
    if isinstance(expr, cst.Comparison):
        return any(_is_tensor(sem, side, depth - 1)
                   for side in (expr.left, *(c.comparator for c in expr.comparisons)))
    if isinstance(expr, cst.Subscript):
        return _is_tuple_of_tensors(sem, expr.value, depth - 1)
    if isinstance(expr, cst.Name):
        if _unpacked_from_tuple_of_tensors(sem, expr, depth - 1):
            return True
        return legacy.values_satisfy(sem, expr, lambda v: _is_tensor(sem, v, depth - 1))
    return False


def _is_tuple_of_tensors(sem, call: cst.BaseExpression, depth: int) -> bool:
    """`torch.max(out, 1)`, `out.data.max(1)`: (values, indices), both tensors."""
    if depth <= 0 or not isinstance(call, cst.Call) or not call.args:
        return False
    if sem.is_torch(call, *(f"torch.{name}" for name in _TUPLE_RETURNING)):
        return True
    if method_call(call, *_TUPLE_RETURNING):
        receiver = call.func.value
        if isinstance(receiver, cst.Attribute) and receiver.attr.value == "data":
            return True
        return _is_tensor(sem, receiver, depth - 1)
    return False


def _unpacked_from_tuple_of_tensors(sem, name: cst.Name, depth: int) -> bool:
    """`_, pred = torch.max(out.data, 1)` binds `pred` to a tensor."""
    definitions = legacy.reaching_definitions(sem, name)
    if not definitions or len(definitions) != 1:
        return False
    definition = definitions[0]
    return definition.kind == "assign" and definition.path is not None and len(definition.path) == 1 \
        and _is_tuple_of_tensors(sem, definition.value, depth)


def _returns_zero_dim(sem, call: cst.Call, depth: int) -> bool:
    """`call` runs the one same-file function of that name, and each of its returns is 0-dim."""
    functions = sem.resolve_local_function(call, call)
    if len(functions) != 1 or depth <= 0:
        return False
    function = functions[0]
    returns = [r for r in sem.index.descendants(function.body, cst.Return) if sem.function_of(r) is function]
    return bool(returns) and all(r.value is not None and _is_zero_dim_tensor(sem, r.value, depth) for r in returns)
