"""The shapes of the last forward, module by module, for the report of a shape error (the
entries of `shapes.ShapeTrace`, which the report renders, and the evidence of TL301-TL307).

Each call of a module records its input and output shapes (the first tensor of each), with the
module's name in the model that was called (`features.3`, `fc1`). A new forward of a model
(depth 0) starts the trace again, so when a forward raises, the trace holds that forward: the
modules that ran, and last the one the error came from, whose output is missing. Only shapes
are kept (tuples of ints), never tensors; at most MAX_ENTRIES calls per forward.
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

MAX_ENTRIES = 400


def _first_shape(value: Any) -> Optional[Tuple[int, ...]]:
    shape = getattr(value, "shape", None)
    if shape is not None and hasattr(value, "dim"):
        return tuple(int(d) for d in shape)
    if isinstance(value, (tuple, list)):
        for item in value[:4]:
            found = _first_shape(item)
            if found is not None:
                return found
    return None


class Entry:
    __slots__ = ("name", "kind", "depth", "input", "output", "failed")

    def __init__(self, name: str, kind: str, depth: int, shape: Optional[Tuple[int, ...]]) -> None:
        self.name = name
        self.kind = kind
        self.depth = depth
        self.input = shape
        self.output: Optional[Tuple[int, ...]] = None
        self.failed = False


class ForwardShapes:
    def __init__(self) -> None:
        self.entries: List[Entry] = []
        self._open: List[Entry] = []
        self._names: Dict[int, str] = {}
        self._root: Optional[int] = None
        self.failed_trace: List[Entry] = []  # the trace of the forward that raised

    def enter(self, module: Any, args: tuple, depth: int) -> None:
        if depth == 0:
            self.entries, self._open = [], []
            if id(module) != self._root:
                self._root = id(module)
                try:
                    self._names = {id(m): name for name, m in module.named_modules()}
                except Exception:  # noqa: BLE001 - a module whose children cannot be listed
                    self._names = {}
        if len(self.entries) >= MAX_ENTRIES:
            self._open.append(None)
            return
        name = self._names.get(id(module), "") or type(module).__name__
        entry = Entry(name, type(module).__name__, depth, _first_shape(args))
        self.entries.append(entry)
        self._open.append(entry)

    def leave(self, module: Any, output: Any, failed: bool) -> None:
        if not self._open:
            return
        entry = self._open.pop()
        if entry is None:
            return
        if failed:
            entry.failed = True
            if not self._open:  # the whole forward raised: keep its trace
                self.failed_trace = list(self.entries)
        else:
            entry.output = _first_shape(output)

    def at_fault(self) -> Optional[Entry]:
        """The innermost module the error came from: the last one that failed."""
        failed = [e for e in self.failed_trace if e.failed]
        return max(failed, key=lambda e: e.depth) if failed else None

    def text(self, limit: int = 12) -> str:
        """`conv1 (1, 3, 32, 32) → (1, 6, 28, 28); ...; fc1 (4, 576) ✗` for a message."""
        shown = [e for e in self.failed_trace if e.output is not None or e.failed]
        fault = self.at_fault()
        # the layers themselves: a module is shown unless the next one shown ran inside it
        leaves = [e for position, e in enumerate(shown) if e is fault or (not e.failed and (
            position + 1 == len(shown) or shown[position + 1].depth <= e.depth))]
        if len(leaves) > limit:
            leaves = leaves[-limit:]
        parts = []
        for entry in leaves:
            shape_in = "×".join(map(str, entry.input)) if entry.input else "?"
            if entry.failed:
                parts.append(f"{entry.name} ({entry.kind}) got {shape_in} ✗")
            else:
                parts.append(f"{entry.name} {shape_in} → {'×'.join(map(str, entry.output))}")
        return "; ".join(parts)
