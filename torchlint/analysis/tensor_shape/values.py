"""The abstract values a forward is run over: a tensor's shape, a tuple, a number (a dimension).
Layers and unknown live in `modules`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Tuple

from torchlint.analysis.tensor_shape import dims as D


@dataclass(frozen=True)
class Tensor:
    shape: D.Shape


@dataclass(frozen=True)
class Tup:
    items: Tuple[Any, ...]


@dataclass(frozen=True)
class Num:
    dim: D.Dim
