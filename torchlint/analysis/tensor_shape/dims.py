"""Dimensions: a known integer, a symbol, or arithmetic on symbols.

A symbol stands for a size the program never fixes (`N`, the batch; `H`, `W`, the spatial size of
an input whose resolution is not known). Arithmetic on it is kept as a small expression, so a
question like "can any input height make this flatten give 400 features?" is answered by trying
the sizes, never by guessing. Every function here takes `None` for "unknown" and gives `None`
back where the answer is not certain.
"""

from __future__ import annotations

from math import gcd
from typing import Dict, Iterable, Optional, Sequence, Tuple, Union

_TRIED = range(1, 1025)  # input sizes tried for a symbol: every image size tutorials use


class Expr:
    """Arithmetic on symbols: `op` is "sym", "+", "*", "//" or "window" (a convolution or pooling
    output length, which is invalid where it would be below 1)."""

    __slots__ = ("op", "args", "_key")

    def __init__(self, op: str, *args) -> None:
        self.op = op
        self.args = args
        self._key = (op,) + tuple(a.key() if isinstance(a, Expr) else a for a in args)

    def key(self) -> tuple:
        return self._key

    def __eq__(self, other) -> bool:
        return isinstance(other, Expr) and self._key == other._key

    def __hash__(self) -> int:
        return hash(self._key)

    @property
    def symbols(self) -> frozenset:
        if self.op == "sym":
            return frozenset({self.args[0]})
        found = frozenset()
        for arg in self.args:
            if isinstance(arg, Expr):
                found |= arg.symbols
        return found

    def evaluate(self, env: Dict[str, int]) -> Optional[int]:
        """The integer this is when each symbol has the size in `env`; None where a window would
        be empty (the layer raises) or a symbol has no size."""
        op = self.op
        if op == "sym":
            return env.get(self.args[0])
        values = [a.evaluate(env) if isinstance(a, Expr) else a for a in self.args]
        if any(v is None for v in values if not isinstance(v, (bool, str))):
            return None
        if op == "+":
            return values[0] + values[1]
        if op == "*":
            return values[0] * values[1]
        if op == "//":
            return values[0] // values[1] if values[1] else None
        if op == "reflect":
            length, left, right = values
            return length + left + right if length > max(left, right) else None
        if op == "window":
            length, kernel, stride, padding, dilation, ceil = values
            out = window_length(length, kernel, stride, padding, dilation, ceil)
            return out if out is not None and out >= 1 else None
        return None

    def __repr__(self) -> str:
        return text(self)


Dim = Union[int, Expr, None]


def symbol(name: str) -> Expr:
    return Expr("sym", name)


def is_known(dim: Dim) -> bool:
    return isinstance(dim, int) and not isinstance(dim, bool)


def add(a: Dim, b: Dim) -> Dim:
    if a is None or b is None:
        return None
    if is_known(a) and is_known(b):
        return a + b
    if b == 0:
        return a
    if a == 0:
        return b
    if is_known(a):
        a, b = b, a
    if is_known(b) and isinstance(a, Expr) and a.op == "+" and is_known(a.args[1]):
        return add(a.args[0], a.args[1] + b)  # (H + 8) - 8 is H
    return Expr("+", a, b)


def mul(a: Dim, b: Dim) -> Dim:
    if a is None or b is None:
        return None
    if is_known(a) and is_known(b):
        return a * b
    if a == 1:
        return b
    if b == 1:
        return a
    return Expr("*", a, b)


def floordiv(a: Dim, k: Dim) -> Dim:
    if a is None or not is_known(k) or k == 0:
        return None
    if is_known(a):
        return a // k
    if k == 1:
        return a
    return Expr("//", a, k)


def product(dims: Iterable[Dim]) -> Dim:
    total: Dim = 1
    for dim in dims:
        total = mul(total, dim)
    return total


def window_length(length: int, kernel: int, stride: int, padding: int, dilation: int = 1, ceil: bool = False) -> Optional[int]:
    """Output length of a convolution or pooling window over `length` (the formula torch documents
    and `--verify` checks): floor((L + 2p - d(k-1) - 1) / s + 1), or ceil with `ceil_mode`, where
    the last window must start inside the input or its left padding."""
    span = length + 2 * padding - dilation * (kernel - 1) - 1
    if span < 0:
        return span // stride + 1  # zero or negative: the layer raises
    if not ceil:
        return span // stride + 1
    out = -(-span // stride) + 1
    if (out - 1) * stride >= length + padding:
        out -= 1
    return out


def window(length: Dim, kernel: int, stride: int, padding: int, dilation: int = 1, ceil: bool = False) -> Dim:
    if length is None:
        return None
    if is_known(length):
        return window_length(length, kernel, stride, padding, dilation, ceil)
    return Expr("window", length, kernel, stride, padding, dilation, ceil)


def reflect(length: Dim, left: int, right: int) -> Dim:
    """The length after reflection padding, which needs each pad smaller than the input."""
    if length is None:
        return None
    if is_known(length):
        return length + left + right if length > max(left, right) else None
    return Expr("reflect", length, left, right)


def same(a: Dim, b: Dim) -> Optional[bool]:
    """Whether two dimensions are certainly equal (True), certainly differ for every input size
    (False), or either may hold (None)."""
    if a is None or b is None:
        return None
    if is_known(a) and is_known(b):
        return a == b
    if a == b:
        return True
    if is_known(b):
        a, b = b, a
    if is_known(a):
        return False if not can_equal(b, a) else None
    return False if _never(a, b, lambda x, y: x == y) else None


def broadcastable(a: Dim, b: Dim) -> Optional[bool]:
    """Whether two dimensions certainly broadcast (equal, or one is 1), certainly never do for any
    input size the layers accept (False), or either may hold (None)."""
    if a is None or b is None:
        return None
    if a == b or a == 1 or b == 1:
        return True
    if is_known(a) and is_known(b):
        return False
    if is_known(a) or is_known(b):
        known, other = (a, b) if is_known(a) else (b, a)
        return False if not can_equal(other, known) and not can_equal(other, 1) else None
    return False if _never(a, b, lambda x, y: x == y or x == 1 or y == 1) else None


def _never(a: Expr, b: Expr, holds) -> bool:
    """For expressions of one common symbol: some size makes both valid, and none of those sizes
    makes `holds` true."""
    symbols = a.symbols | b.symbols
    if len(symbols) != 1 or "N" in symbols:
        return False
    (name,) = symbols
    valid = False
    for size in _TRIED:
        x, y = a.evaluate({name: size}), b.evaluate({name: size})
        if x is None or y is None:
            continue
        valid = True
        if holds(x, y):
            return False
    return valid


def can_equal(expr: Dim, target: int) -> bool:
    """Whether some size of the symbols makes `expr` equal `target` (True where not decidable).

    One symbol: every size in 1..1024 is tried. A product whose factors each use one symbol (what
    flattening `C x H' x W'` gives): `target` must split into one value of each factor."""
    if not isinstance(expr, Expr):
        return expr == target
    symbols = expr.symbols
    if "N" in symbols:
        return True
    if len(symbols) == 1:
        (name,) = symbols
        return any(expr.evaluate({name: size}) == target for size in _TRIED)
    factors = _factors(expr)
    if factors is None:
        return True
    constant = 1
    choices = []
    for factor in factors:
        if is_known(factor):
            constant *= factor
            continue
        if len(factor.symbols) != 1:
            return True
        (name,) = factor.symbols
        choices.append({v for v in (factor.evaluate({name: s}) for s in _TRIED) if v is not None})
    if constant == 0 or target % constant:
        return False
    return _splits(target // constant, choices)


def _factors(expr: Expr) -> Optional[list]:
    if expr.op == "*":
        found = []
        for arg in expr.args:
            inner = _factors(arg) if isinstance(arg, Expr) else [arg]
            if inner is None:
                return None
            found.extend(inner)
        return found
    return [expr]


def _splits(target: int, choices: Sequence[set]) -> bool:
    if not choices:
        return target == 1
    first, rest = choices[0], choices[1:]
    return any(value and target % value == 0 and _splits(target // value, rest) for value in first)


def _affine(dim: Dim):
    """(base, offset) where `dim` is `base + offset` through sums and stride-1 windows."""
    if isinstance(dim, Expr) and dim.op == "+" and is_known(dim.args[1]):
        base, offset = _affine(dim.args[0])
        return base, offset + dim.args[1]
    if isinstance(dim, Expr) and dim.op == "reflect":
        base, offset = _affine(dim.args[0])
        return base, offset + dim.args[1] + dim.args[2]
    if isinstance(dim, Expr) and dim.op == "window" and dim.args[2] == 1:
        length, kernel, _, padding, dilation, _ = dim.args
        base, offset = _affine(length)
        return base, offset + 2 * padding - dilation * (kernel - 1)
    return dim, 0


def text(dim: Dim) -> str:
    """How a message writes the dimension: `576`, `N`, `(H-4)/2`."""
    if dim is None:
        return "?"
    if not isinstance(dim, Expr):
        return str(dim)
    base, offset = _affine(dim)
    if base is not dim:
        inner = text(base) if not (isinstance(base, Expr) and base.op == "+") else f"({text(base)})"
        return inner if offset == 0 else (f"{inner}+{offset}" if offset > 0 else f"{inner}-{-offset}")
    op, args = dim.op, dim.args
    if op == "sym":
        return args[0]
    if op == "+":
        right = args[1]
        if is_known(right) and right < 0:
            return f"{text(args[0])}-{-right}"
        return f"{text(args[0])}+{text(right)}"
    if op == "*":
        return "·".join(_grouped(a) for a in args)
    if op == "//":
        return f"{_grouped(args[0])}/{args[1]}"
    if op == "window":
        length, kernel, stride, padding, dilation, ceil = args
        base, offset = _affine(length)
        # floor((L + 2p - d(k-1) - 1) / s) + 1 == floor((L + c) / s) with c = 2p - d(k-1) - 1 + s
        shift = offset + 2 * padding - dilation * (kernel - 1) - 1 + stride
        inner = text(base)
        if isinstance(base, Expr) and base.op in ("+", "*"):
            inner = f"({inner})"
        if ceil:
            shift += stride - 1
        if shift == 0:
            return f"{inner}/{stride}"
        if shift == stride - 1:
            return f"⌈{inner}/{stride}⌉"
        return f"({inner}{'+' if shift > 0 else '-'}{abs(shift)})/{stride}"
    return "?"


def _grouped(dim: Dim) -> str:
    rendered = text(dim)
    return f"({rendered})" if isinstance(dim, Expr) and dim.op in ("+",) else rendered


Shape = Optional[Tuple[Dim, ...]]


def shape_text(shape: Shape, batch: bool = True) -> str:
    """`N×3×32×32`; without the batch: `3×32×32`."""
    if shape is None:
        return "?"
    dims = shape if batch else shape[1:]
    return "×".join(text(d) for d in dims) if dims else "scalar"


def common_divisor(a: int, b: int) -> int:
    return gcd(a, b)
