"""The shape trace of a forward that raised, for the report (the HTML report's "shape trace"
section, `ShapeTrace`).

What the run records today costs nothing until a forward raises: the always-called global forward
hook sees, on the exception path, each module the error goes through (innermost first) with the
inputs it was called with; `ShapeRecorder.module_raised` keeps their shapes and the shapes of the
innermost module's parameters (a `Linear(120 → 10)` given `(8, 130)` shows which number is
wrong).

`ShapeRecorder.module_ran` is the hook point for a full trace: a per-module forward hook that
calls it with each module's inputs and output while the forward runs (the shape-trace hook of the
shapes work) fills `ShapeTrace.entries` with the modules that ran before the failure, in call
order; `ShapeTrace.complete` then says the trace lists every module, not only those the error
went through. The report renders whatever entries it holds.
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
        self.ran: List[Tuple[Any, List[str], List[str]]] = []  # (module, inputs, outputs) in call order
        self.raised: List[Tuple[Any, List[str]]] = []  # (module, inputs), innermost first
        self.error: Optional[BaseException] = None
        self.complete = False

    def module_ran(self, module: Any, args: tuple, output: Any) -> None:
        """A module's forward returned (the hook point of a full shape trace: call it from a forward
        hook with each module's inputs and output)."""
        self.complete = True
        self.ran.append((module, shape_of(args), shape_of(output)))
        if len(self.ran) > 2 * MAX_ENTRIES:
            del self.ran[:MAX_ENTRIES]

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

        def entry(module: Any, inputs: List[str], outputs: List[str], raised: bool) -> ShapeEntry:
            params = [(n, "(" + ", ".join(str(s) for s in p.shape) + ")")
                      for n, p in module.named_parameters(recurse=False)] if raised else []
            detail = ""
            if raised and not list(module.children()):
                detail = " ".join(repr(module).split())[:200]
            return ShapeEntry(names.get(id(module), type(module).__name__), type(module).__name__, inputs, outputs,
                              params, raised, detail)

        entries = [entry(m, i, o, False) for m, i, o in self.ran[-MAX_ENTRIES:] if id(m) in names]
        entries += [entry(m, i, [], True) for m, i in self.raised]
        text = " ".join(str(self.error).split())
        return ShapeTrace(f"{type(self.error).__name__}: {text[:300]}", type(outer).__name__, entries,
                          entries[-len(self.raised)].module if self.raised else None, self.complete)
