"""Symbolic tensor shapes, just enough to tell a `.view()` that only splits dimensions from one
that merges them (TL004).

A shape is known only where the code spells it out: `B, N, C = x.shape` (or `x.size()`), or
`x = y.view(B, N, C)` / `.reshape(...)`. A dimension is the expression that gives its size; two
dimensions are the same when they are the same name bound by the same definition at both
places. Anything else is unknown, and every answer here is "not known" then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import List, Optional, Sequence

import libcst as cst

from torchlint.analysis.semantic import Semantic

@dataclass(frozen=True)
class Dim:
    """One dimension: the expression giving its size where the shape is spelled out, and for
    `B, N, C = x.shape` the statement that binds the name."""

    size: cst.BaseExpression
    bound_by: Optional[cst.CSTNode] = None

    def is_spelled_by(self, sem: "Semantic", expr: cst.BaseExpression) -> bool:
        """`expr` is certainly this dimension's size: the same name, bound by the same definition."""
        if self.bound_by is None:
            return same_value(sem, expr, self.size)
        if not (isinstance(expr, cst.Name) and isinstance(self.size, cst.Name)) or expr.value != self.size.value:
            return False
        definition = sem.reaching_definition(expr)
        return definition is not None and definition.statement is self.bound_by


# `Tensor.<method>(...)` / `torch.<function>(x, ...)` that permute dimensions.
_SWAPS = {"transpose", "swapaxes", "swapdims"}
_MOVES = {"movedim", "moveaxis"}
_SHAPED = {"view", "reshape"}
# Methods whose result has the shape of their receiver.
_SAME_SHAPE = {"float", "half", "double", "bfloat16", "long", "int", "bool", "contiguous", "clone",
               "detach", "to", "cpu", "cuda", "type_as", "requires_grad_"}


def _int(expr: cst.BaseExpression) -> Optional[int]:
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _int(expr.expression)
        return None if inner is None else -inner
    return None


def _ints(args: Sequence[cst.Arg]) -> Optional[List[int]]:
    """`(0, 2, 1)` spelled as arguments or as one tuple/list argument."""
    if any(arg.keyword is not None or arg.star for arg in args):
        return None
    if len(args) == 1 and isinstance(args[0].value, (cst.Tuple, cst.List)):
        elements = args[0].value.elements
        if any(isinstance(element, cst.StarredElement) for element in elements):
            return None
        values = [element.value for element in elements]
    else:
        values = [arg.value for arg in args]
    numbers = []
    for value in values:
        number = _int(value)
        if number is None:
            return None
        numbers.append(number)
    return numbers


def _shape_arguments(args: Sequence[cst.Arg]) -> Optional[List[Dim]]:
    """The dimensions of `view(a, b, c)` / `view((a, b, c))`; None with a `*rest`."""
    if len(args) == 1 and isinstance(args[0].value, (cst.Tuple, cst.List)) and not args[0].star:
        elements = args[0].value.elements
        if any(isinstance(element, cst.StarredElement) for element in elements):
            return None
        return [Dim(element.value) for element in elements]
    if not args or any(arg.star or arg.keyword is not None for arg in args):
        return None
    return [Dim(arg.value) for arg in args]


def same_value(sem: Semantic, a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
    """`a` and `b` are the same name certainly bound by the same definition at both places."""
    if not (isinstance(a, cst.Name) and isinstance(b, cst.Name)) or a.value != b.value:
        return False
    first = sem.reaching_definition(a)
    second = sem.reaching_definition(b)
    return (
        first is not None
        and second is not None
        and first.statement is second.statement
        and first.target is second.target
    )


def known_shape(sem: Semantic, tensor: cst.BaseExpression, depth: int = 4) -> Optional[List[Dim]]:
    """The size expression of each dimension of `tensor`, when the code spells them out."""
    if depth <= 0:
        return None
    if isinstance(tensor, cst.Call) and isinstance(tensor.func, cst.Attribute):
        if tensor.func.attr.value in _SHAPED:
            return _shape_arguments(tensor.args)
        if tensor.func.attr.value in _SAME_SHAPE:
            return known_shape(sem, tensor.func.value, depth - 1)
        return None
    if not isinstance(tensor, cst.Name):
        return None
    definition = sem.reaching_definition(tensor)
    if definition is None:
        return None
    if definition.kind == "assign" and isinstance(definition.value, cst.Call):
        shape = known_shape(sem, definition.value, depth - 1)
        if shape is not None:
            return shape
    return _unpacked_shape(sem, tensor)


def _unpacked_shape(sem: Semantic, tensor: cst.Name) -> Optional[List[Dim]]:
    """`B, N, C = tensor.shape` (or `.size()`) earlier in the function, for this same value."""
    scope = sem.function_of(tensor) or sem.module
    for assign in sem.index.descendants(scope, cst.Assign):
        if len(assign.targets) != 1 or not isinstance(assign.targets[0].target, (cst.Tuple, cst.List)):
            continue
        value = assign.value
        if isinstance(value, cst.Call) and not value.args:
            value = value.func
            if not (isinstance(value, cst.Attribute) and value.attr.value == "size"):
                continue
        elif not (isinstance(value, cst.Attribute) and value.attr.value == "shape"):
            continue
        if not same_value(sem, value.value, tensor):
            continue
        names = [element.value for element in assign.targets[0].target.elements]
        if all(isinstance(name, cst.Name) for name in names) \
                and len({name.value for name in names}) == len(names):
            return [Dim(name, assign) for name in names]
    return None


def permuted_shape(sem: Semantic, expr: cst.BaseExpression) -> Optional[List[Dim]]:
    """The dimensions of a transposing expression (`x.transpose(1, 2)`, `x.permute(0, 2, 1)`,
    `x.T`, `torch.transpose(x, 1, 2)`, ...) when the shape of `x` is known."""
    transposition = _transposition(sem, expr)
    if transposition is None:
        return None
    operation, tensor, numbers = transposition
    shape = known_shape(sem, tensor)
    if shape is None:
        return None
    order = _permutation(operation, numbers, len(shape))
    return None if order is None else [shape[n] for n in order]


def view_only_splits(sem: Semantic, dims: List[Dim], view: cst.Call) -> bool:
    """Whether `view` (on a tensor of dimensions `dims`, strides arbitrary) certainly keeps
    every dimension, splits at most one and adds size-1 ones: such a view never needs a copy.

    Dimensions are matched from both ends; what is left of the input must be at most one
    dimension, which the remaining sizes (`H, W`, `-1`, `*size`) can only split."""
    if any(arg.keyword is not None for arg in view.args):
        return False
    sizes = [(arg.value, not arg.star) for arg in view.args]
    if len(sizes) == 1 and sizes[0][1] and isinstance(sizes[0][0], (cst.Tuple, cst.List)):
        sizes = [(element.value, not isinstance(element, cst.StarredElement))
                 for element in sizes[0][0].elements]
    sizes = [(size, plain) for size, plain in sizes
             if not (plain and isinstance(size, cst.Integer) and _int(size) == 1)]

    def same(size, dim: Dim) -> bool:
        return size[1] and dim.is_spelled_by(sem, size[0])

    low, high = 0, len(dims)
    first, last = 0, len(sizes)
    while low < high and first < last and same(sizes[first], dims[low]):
        low, first = low + 1, first + 1
    while low < high and first < last and same(sizes[last - 1], dims[high - 1]):
        high, last = high - 1, last - 1
    return high - low <= 1


# -- which views must merge dimensions the transpose reordered --------------------------------------
#
# Over a contiguous tensor permuted by `p`, two neighbouring dimensions can be merged by `.view()`
# only where `p[k + 1] == p[k] + 1` (they still lie next to each other in memory, in order); every
# other neighbour pair is a "broken" boundary. A view keeps, splits or merges runs of dimensions,
# never merging across a broken boundary: with `broken` of them the input falls into at least
# `broken + 1` runs, each giving one output dimension or more. So a view to fewer sizes than that
# must merge across a broken boundary and fails (unless a dimension has size 1); one to exactly
# `rank` sizes when every boundary is broken can only be a no-op. Sizes are unknown here: only the
# permutation and the number of output sizes are used, so a view that adds dimensions (`(B, C, N)`
# to `(B, C, H, W)`) is never called failing. Where the rank is unknown (`x.transpose(1, 2)`), the
# view must fail at every rank the code allows.

_RANKS_TRIED = 4  # past the transposed dimensions each extra one only adds unbroken boundaries


def _transposition(sem: Semantic, expr: cst.BaseExpression):
    """(operation, tensor, literal int arguments) of a transposing expression, or None."""
    if isinstance(expr, cst.Attribute) and expr.attr.value in ("T", "mT", "mH"):
        return expr.attr.value, expr.value, []
    if not isinstance(expr, cst.Call):
        return None
    name = sem.qualified_name(expr.func)
    if name is not None and name.startswith("torch.") and expr.args:
        operation, tensor, args = name.rsplit(".", 1)[1], expr.args[0].value, expr.args[1:]
    elif isinstance(expr.func, cst.Attribute):
        operation, tensor, args = expr.func.attr.value, expr.func.value, expr.args
    else:
        return None
    numbers = _ints(args) if args else []
    if numbers is None:
        return None
    return operation, tensor, numbers


def _permutation(operation: str, numbers: List[int], rank: int) -> Optional[List[int]]:
    """Where each dimension of the result comes from, for a tensor of `rank` dimensions."""
    if rank < 2 or any(not -rank <= n < rank for n in numbers):
        return None
    numbers = [n % rank for n in numbers]
    order = list(range(rank))
    if operation == "T" and not numbers:
        return order[::-1]
    if operation in ("mT", "mH") and not numbers:
        order[-1], order[-2] = order[-2], order[-1]
        return order
    if operation == "t" and not numbers:
        return order[::-1] if rank == 2 else None
    if operation in _SWAPS and len(numbers) == 2:
        order[numbers[0]], order[numbers[1]] = order[numbers[1]], order[numbers[0]]
        return order
    if operation == "permute" and sorted(numbers) == order:
        return numbers
    if operation in _MOVES and len(numbers) == 2:
        order.insert(numbers[1], order.pop(numbers[0]))
        return order
    return None


def _ranks(sem: Semantic, operation: str, tensor: cst.BaseExpression, numbers: List[int]) -> List[int]:
    """The ranks the transposed tensor can have: exact where the code tells, else the smallest
    that the arguments allow (2 at least: transposing fewer dimensions is a no-op) and a few more."""
    if operation == "permute":
        return [len(numbers)]
    shape = known_shape(sem, tensor)
    if shape is not None:
        return [len(shape)]
    if operation == "t":
        return [2]
    lowest = max([2] + [n + 1 if n >= 0 else -n for n in numbers])
    return list(range(lowest, lowest + _RANKS_TRIED))


def _view_arity(view: cst.Call) -> Optional[int]:
    """How many sizes `view(...)` is given, or None when that is not spelled out (`*shape`,
    `view(shape)`, `view(x.size())`)."""
    args = view.args
    if not args or any(arg.keyword is not None or arg.star for arg in args):
        return None
    if len(args) > 1:
        return len(args)
    value = args[0].value
    if isinstance(value, (cst.Tuple, cst.List)):
        if any(isinstance(element, cst.StarredElement) for element in value.elements):
            return None
        return len(value.elements)
    if _int(value) is not None or isinstance(value, cst.BinaryOperation):
        return 1
    if isinstance(value, cst.Subscript) or (isinstance(value, cst.Call) and value.args):
        return 1  # `x.shape[0]`, `x.size(0)`, `len(xs)`: one size
    return None


def view_must_merge_reordered(sem: Semantic, source: cst.BaseExpression, view: cst.Call) -> bool:
    """Whether `view`, applied to the transposing expression `source`, must merge dimensions
    that `source` put out of memory order, at every rank the tensor can have."""
    arity = _view_arity(view)
    transposition = _transposition(sem, source)
    if arity is None or transposition is None:
        return False
    operation, tensor, numbers = transposition
    ranks = _ranks(sem, operation, tensor, numbers)
    for rank in ranks:
        order = _permutation(operation, numbers, rank)
        if order is None:
            return False
        broken = sum(1 for a, b in zip(order, order[1:]) if b != a + 1)
        no_op_only = broken == rank - 1 and arity == rank
        if not (arity <= broken or no_op_only):
            return False
    return True


# torch functions whose result keeps its input's memory format (a channels-last input gives a
# channels-last result); other torch functions (matmul, softmax, layer_norm, cat, ...) are taken
# to return a tensor laid out in order.
_LAYOUT_KEEPING = {
    "torch.nn.functional." + name for name in (
        "interpolate", "upsample", "upsample_bilinear", "upsample_nearest", "gelu", "relu", "silu",
        "leaky_relu", "elu", "hardswish", "sigmoid", "tanh", "dropout", "conv2d", "conv1d",
        "conv3d", "batch_norm")
} | {"torch.relu", "torch.sigmoid", "torch.tanh", "torch.nn.functional.relu_", "torch.clamp"}


def may_carry_permuted_layout(sem: Semantic, source: cst.BaseExpression, is_transposing) -> bool:
    """Whether the tensor that `source` transposes may itself be laid out in a permuted order, so
    that `source` could be contiguous again: it is a transposed tensor, or comes from one through
    an operation that keeps the memory format (`F.interpolate`, element-wise ops, `.float()`) or
    through a call we cannot see into (a submodule: convolutions keep channels-last). After
    `y = F.interpolate(x.permute(0, 3, 1, 2), ...)`, `y.permute(0, 2, 3, 1)` is contiguous;
    transformers' position-embedding interpolation relies on that."""
    transposition = _transposition(sem, source)
    if transposition is None:
        return False
    return _permuted_layout(sem, transposition[1], is_transposing, 3)


def _permuted_layout(sem: Semantic, expr: cst.BaseExpression, is_transposing, depth: int) -> bool:
    if depth <= 0:
        return False
    if isinstance(expr, cst.Name):
        value = sem.reaching_value(expr, depth=2)
        if value is None:
            return False
        expr = value
    if is_transposing(expr):
        return True
    if isinstance(expr, cst.BinaryOperation):
        return any(_permuted_layout(sem, side, is_transposing, depth - 1) for side in (expr.left, expr.right))
    if not isinstance(expr, cst.Call):
        return False
    func = expr.func
    inputs = [arg.value for arg in expr.args if arg.keyword is None and not arg.star]
    name = sem.qualified_name(func)
    if name is not None and name.startswith("torch."):
        if name not in _LAYOUT_KEEPING:
            return False
    elif isinstance(func, cst.Attribute) and not (isinstance(func.value, cst.Name) and func.value.value == "self"):
        if func.attr.value not in _SAME_SHAPE:
            return False  # a tensor method such as `.softmax()` or `.matmul()`
        inputs = [func.value]
    return any(_permuted_layout(sem, e, is_transposing, depth - 1) for e in inputs)
