"""The shape trace of a forward that raised, for the report (the HTML report's "shape trace"
section, `ShapeTrace`).

This recorder costs nothing until a forward raises: the always-called global forward
hook sees, on the exception path, each module the error goes through (innermost first) with the
inputs it was called with; `ShapeRecorder.module_raised` keeps their shapes and the shapes of the
innermost module's parameters (a `Linear(120 → 10)` given `(8, 130)` shows which number is
wrong).

The modules that ran to their end before the failure come from the forward hooks' own record
(`forward_shapes.ForwardShapes`, `complete_with`): `ShapeTrace.complete` then says the trace lists
every module, not only those the error went through. The report renders whatever entries it holds.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

MAX_ENTRIES = 200  # modules kept per trace (the last ones before the failure)


@dataclass
class ShapeEntry:
    module: str  # its name in the model (`encoder.fc1`), or its class where the model does not name it
    kind: str  # its class (`Linear`)
    inputs: List[str]  # the shapes of its tensor inputs: `(8, 120)`
    outputs: List[str] = field(default_factory=list)  # of its tensor outputs (empty where it raised)
    parameters: List[Tuple[str, str]] = field(default_factory=list)  # (name, shape) of its own parameters
    raised: bool = False
    detail: str = ""  # the module's repr (`Linear(in_features=120, out_features=10, bias=True)`)

    def to_json(self) -> dict:
        return {"module": self.module, "kind": self.kind, "inputs": self.inputs, "outputs": self.outputs,
                "parameters": [list(p) for p in self.parameters], "raised": self.raised, "detail": self.detail}


@dataclass
class ShapeTrace:
    error: str  # `RuntimeError: mat1 and mat2 shapes cannot be multiplied (8x130 and 120x10)`
    model: str  # the outermost module the error went through
    entries: List[ShapeEntry]  # in call order; the ones the error went through last, innermost first
    at_fault: Optional[str]  # the innermost module that raised
    complete: bool = False  # True when `entries` lists every module that ran (a forward-hook trace)

    def to_json(self) -> dict:
        return {"error": self.error, "model": self.model, "at_fault": self.at_fault, "complete": self.complete,
                "entries": [e.to_json() for e in self.entries]}


def shape_of(value: Any) -> List[str]:
    import torch

    if isinstance(value, torch.Tensor):
        return ["(" + ", ".join(str(s) for s in value.shape) + ")" + ("" if value.dtype == torch.float32
                                                                       else f" {str(value.dtype).replace('torch.', '')}")]
    if isinstance(value, (list, tuple)):
        found: List[str] = []
        for item in value[:8]:
            found.extend(shape_of(item))
        return found
    if isinstance(value, dict):
        found = []
        for item in list(value.values())[:8]:
            found.extend(shape_of(item))
        return found
    return []


class ShapeRecorder:
    def __init__(self) -> None:
        self.raised: List[Tuple[Any, List[str]]] = []  # (module, inputs), innermost first
        self.error: Optional[BaseException] = None

    def module_raised(self, module: Any, args: tuple, error: BaseException) -> None:
        """A module's forward raised `error` (the always-called forward hook, on the exception path)."""
        if error is not self.error:
            self.error, self.raised = error, []
        self.raised.append((module, shape_of(args)))

    @staticmethod
    def complete_with(trace: ShapeTrace, forward: List[Any]) -> None:
        """Put before the modules the error went through every module the failed forward ran to
        its end (`forward_shapes.ForwardShapes`'s entries, in call order): the trace is complete."""
        done = [item for item in forward[-MAX_ENTRIES:] if not item.failed and item.output is not None]
        if not done or not any(item.failed for item in forward):
            return
        ran = [ShapeEntry(item.name, item.kind, ["(" + ", ".join(map(str, item.input)) + ")"] if item.input else [],
                          ["(" + ", ".join(map(str, item.output)) + ")"]) for item in done]
        trace.entries = ran + [entry for entry in trace.entries if entry.raised]
        trace.complete = True

    def trace(self) -> Optional[ShapeTrace]:
        if self.error is None or not self.raised:
            return None
        outer = self.raised[-1][0]
        names: Dict[int, str] = {}
        try:
            for name, module in outer.named_modules():
                names.setdefault(id(module), name or type(module).__name__)
        except Exception:  # noqa: BLE001
            pass

        def entry(module: Any, inputs: List[str]) -> ShapeEntry:
            params = [(n, "(" + ", ".join(str(s) for s in p.shape) + ")") for n, p in module.named_parameters(recurse=False)]
            detail = "" if list(module.children()) else " ".join(repr(module).split())[:200]
            return ShapeEntry(names.get(id(module), type(module).__name__), type(module).__name__, inputs, [],
                              params, True, detail)

        entries = [entry(m, i) for m, i in self.raised]  # the modules the error went through, innermost first
        text = " ".join(str(self.error).split())
        return ShapeTrace(f"{type(self.error).__name__}: {text[:300]}", type(outer).__name__, entries, entries[0].module)
