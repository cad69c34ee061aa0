"""Symbolic tensor shapes and strides, just enough to tell a `.view()` that only splits
dimensions from one that must merge dimensions a transpose put out of memory order (TL004).

A shape is known only where the code spells it out (the value model's shape facet): `B, N, C =
x.shape` (or `x.size()`), or `x = y.view(B, N, C)` / `.reshape(...)`. A dimension is the
expression that gives its size; two dimensions are the same when they are the same name bound by
the same definition at both places. The permutation comes from the value model's layout facet.
Anything else is unknown, and every answer here is "not known" then.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, List, Optional, Protocol, Sequence, Tuple

import libcst as cst

if TYPE_CHECKING:
    from torchlint.analysis.value import Layout


class SemanticModel(Protocol):
    """What this module asks of the semantic model (`torchlint.analysis.semantic.Semantic`, not
    imported: it builds the value model, which uses this module)."""

    def reaching_definition(self, name: cst.Name) -> Optional[Any]:
        ...


@dataclass(frozen=True)
class Dim:
    """One dimension: the expression giving its size where the shape is spelled out, and for
    `B, N, C = x.shape` the statement that binds the name."""

    size: cst.BaseExpression
    bound_by: Optional[cst.CSTNode] = None

    def is_spelled_by(self, sem: "SemanticModel", expr: cst.BaseExpression) -> bool:
        """`expr` is certainly this dimension's size: the same name, bound by the same definition."""
        if self.bound_by is None:
            return same_value(sem, expr, self.size)
        if not (isinstance(expr, cst.Name) and isinstance(self.size, cst.Name)) or expr.value != self.size.value:
            return False
        definition = sem.reaching_definition(expr)
        return definition is not None and definition.statement is self.bound_by


def same_value(sem: "SemanticModel", a: cst.BaseExpression, b: cst.BaseExpression) -> bool:
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


def _int(expr: cst.BaseExpression) -> Optional[int]:
    if isinstance(expr, cst.Integer):
        return int(expr.value, 0)
    if isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Minus):
        inner = _int(expr.expression)
        return None if inner is None else -inner
    return None


def _view_sizes(view: cst.Call) -> Optional[List[Tuple[cst.BaseExpression, bool]]]:
    """The size arguments of `view(...)` as (expression, plain) pairs (`plain` is False for
    `*rest`), without the literal 1s (size-1 dimensions can go anywhere)."""
    if any(arg.keyword is not None for arg in view.args):
        return None
    sizes = [(arg.value, not arg.star) for arg in view.args]
    if len(sizes) == 1 and sizes[0][1] and isinstance(sizes[0][0], (cst.Tuple, cst.List)):
        sizes = [(element.value, not isinstance(element, cst.StarredElement))
                 for element in sizes[0][0].elements]
    return [(size, plain) for size, plain in sizes
            if not (plain and isinstance(size, cst.Integer) and _int(size) == 1)]


def _match_ends(sem: "SemanticModel", dims: Sequence[Dim], sizes) -> Tuple[int, int, int, int]:
    """Dimensions kept as they are, matched from both ends: (low, high, first, last) bound the
    dimensions `dims[low:high]` and sizes `sizes[first:last]` left unmatched."""
    def same(size, dim: Dim) -> bool:
        return size[1] and dim.is_spelled_by(sem, size[0])

    low, high = 0, len(dims)
    first, last = 0, len(sizes)
    while low < high and first < last and same(sizes[first], dims[low]):
        low, first = low + 1, first + 1
    while low < high and first < last and same(sizes[last - 1], dims[high - 1]):
        high, last = high - 1, last - 1
    return low, high, first, last


def view_only_splits(sem: "SemanticModel", dims: Sequence[Dim], view: cst.Call) -> bool:
    """Whether `view` (on a tensor of dimensions `dims`, strides arbitrary) certainly keeps
    every dimension, splits at most one and adds size-1 ones: such a view never needs a copy.

    Dimensions are matched from both ends; what is left of the input must be at most one
    dimension, which the remaining sizes (`H, W`, `-1`, `*size`) can only split."""
    sizes = _view_sizes(view)
    if sizes is None:
        return False
    low, high, _, _ = _match_ends(sem, dims, sizes)
    return high - low <= 1


def view_merges_across_break(sem: "SemanticModel", dims: Sequence[Dim], order: Sequence[int], view: cst.Call) -> bool:
    """Whether `view` must merge, into one size, dimensions of `dims` (laid out in memory in
    `order`) that do not lie next to each other in memory: after the sizes the view keeps at both
    ends, the rest of the input goes into a single size (`-1`) across a broken boundary.
    `B, H, W, C = x.shape; x.view(B, H // s, s, W // s, s, C).permute(0, 1, 3, 2, 4, 5).view(-1, s, s, C)`
    merges dimensions 0-2, whose memory order is 0, 1, 3: it fails unless a size is 1."""
    sizes = _view_sizes(view)
    if sizes is None or len(order) != len(dims):
        return False
    low, high, first, last = _match_ends(sem, dims, sizes)
    if last - first != 1 or high - low < 2 or not sizes[first][1]:
        return False
    return any(order[k + 1] != order[k] + 1 for k in range(low, high - 1))


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


def permutation(operation: str, numbers: Sequence[int], rank: int) -> Optional[List[int]]:
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
    if operation in ("t", "adjoint", "H") and not numbers:
        return order[::-1] if rank == 2 else None
    if operation in ("transpose", "swapaxes", "swapdims") and len(numbers) == 2:
        order[numbers[0]], order[numbers[1]] = order[numbers[1]], order[numbers[0]]
        return order
    if operation == "permute" and sorted(numbers) == order:
        return numbers
    if operation in ("movedim", "moveaxis") and len(numbers) == 2:
        order.insert(numbers[1], order.pop(numbers[0]))
        return order
    return None


def _ranks(layout: "Layout") -> List[int]:
    """The ranks the transposed tensor can have: exact where the code tells, else the smallest
    that the arguments allow (2 at least: transposing fewer dimensions is a no-op) and a few more."""
    if layout.order is not None:
        return [len(layout.order)]
    if layout.base_rank is not None:
        return [layout.base_rank]
    if layout.operation == "permute":
        return [len(layout.numbers)]
    if layout.operation in ("t", "adjoint", "H"):
        return [2]
    lowest = max([2] + [n + 1 if n >= 0 else -n for n in layout.numbers])
    return list(range(lowest, lowest + _RANKS_TRIED))


def view_arity(view: cst.Call) -> Optional[int]:
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


def view_must_merge_reordered(layout: "Layout", view: cst.Call) -> bool:
    """Whether `view`, applied to a tensor laid out as `layout` (PERMUTED), must merge dimensions
    that the permutation put out of memory order, at every rank the tensor can have."""
    arity = view_arity(view)
    if arity is None or layout.operation is None:
        return False
    for rank in _ranks(layout):
        order = list(layout.order) if layout.order is not None else permutation(layout.operation, layout.numbers, rank)
        if order is None:
            return False
        broken = sum(1 for a, b in zip(order, order[1:]) if b != a + 1)
        no_op_only = broken == rank - 1 and arity == rank
        if not (arity <= broken or no_op_only):
            return False
    return True


def layout_order(layout: "Layout") -> Optional[List[int]]:
    """The permutation of a PERMUTED layout when its rank is certain."""
    if layout.order is not None:
        return list(layout.order)
    ranks = _ranks(layout)
    if len(ranks) != 1:
        return None
    return permutation(layout.operation, layout.numbers, ranks[0])


# -- what known sizes tell ---------------------------------------------------------------------------

def is_size_one(dim: Dim) -> bool:
    """The dimension's size is spelled `1` (`torch.randn(n, 1)`, `x.view(-1, 1)`)."""
    return _int(dim.size) == 1


def contiguous_apart_from_size_one(layout: "Layout", dims: Sequence[Dim]) -> bool:
    """Whether a PERMUTED tensor of (result) dimensions `dims` is contiguous after all: the
    dimensions the permutation moved that are not of size 1 still lie in memory order. A size-1
    dimension's stride never matters, so `torch.randn(n, 1).t()` is contiguous and every
    `.view()` of it works (measured on torch 2.13: `is_contiguous()` is True)."""
    if layout.order is not None:
        order = list(layout.order)
    elif layout.operation is not None:
        order = permutation(layout.operation, layout.numbers, len(dims))
    else:
        return False
    if order is None or len(order) != len(dims) or not any(is_size_one(d) for d in dims):
        return False
    kept = [source for source, dim in zip(order, dims) if not is_size_one(dim)]
    return kept == sorted(kept)


def every_size_above_one(dims: Optional[Sequence[Dim]]) -> bool:
    """Every dimension's size is a literal integer of 2 or more: no size-1 dimension can save a
    view that merges across a broken boundary."""
    if not dims:
        return False
    sizes = [_int(d.size) for d in dims]
    return all(size is not None and size >= 2 for size in sizes)
