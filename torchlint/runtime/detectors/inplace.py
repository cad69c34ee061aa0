"""TL001: in-place writes autograd cannot allow.

- A forward of a module defined in the user's files that bumps the version counter of one of its
  tensor inputs (the caller's tensor changed under it), reported at the in-place op when the
  TorchFunctionMode saw it, else at the forward.
- The backward error "one of the variables needed for gradient computation has been modified by
  an inplace operation", mapped back to the in-place op that caused it: every in-place op on a
  tensor that requires grad (while grad mode is on, outside optimizer steps) is remembered with
  the node that had produced the tensor and its version before the write; the error names that
  node and version.
"""

from __future__ import annotations

import re
import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Deque, Dict, List, Optional, Tuple

from torchlint.runtime.frames import Site
from torchlint.runtime.graph import describe

_HISTORY = 512
_MODIFIED = re.compile(
    r"\[(?P<kind>[\w.]+) \[(?P<shape>[\d, ]*)\]\](?:, which is output (?P<output>\d+) of (?P<node>\w+))?, "
    r"is at version (?P<now>\d+); expected version (?P<expected>\d+)")
_BACKWARD_SUFFIX = re.compile(r"Backward\d*$")
_OPERATORS = {"__iadd__": "+=", "__isub__": "-=", "__imul__": "*=", "__itruediv__": "/=", "__ifloordiv__": "//=",
              "__imod__": "%=", "__ipow__": "**=", "__iand__": "&=", "__ior__": "|=", "__ixor__": "^=",
              "__imatmul__": "@=", "__ilshift__": "<<=", "__irshift__": ">>=", "__setitem__": "item assignment"}


@dataclass
class _Write:
    site: Optional[Site]
    op: str
    producer: Optional[str]  # the node that produced the tensor, before the write ("Sigmoid")
    shape: Tuple[int, ...]
    version_before: int
    target: Any  # weakref


class InPlace:
    def __init__(self, session) -> None:
        self.session = session
        self.history: Deque[_Write] = deque(maxlen=_HISTORY)
        self._inputs: Dict[int, List[Tuple[Any, int, int]]] = {}  # module id -> (tensor, version, history length)
        self.input_ids: Dict[int, int] = {}  # ids of the tensor inputs of user forwards now running -> count
        # library modules (the mode is off inside them) given a user forward's input: (tensor, version)
        self.watching: Dict[int, List[Tuple[Any, int, Optional[Site]]]] = {}
        self._writes_seen = 0

    # -- in-place ops (from the TorchFunctionMode) ---------------------------------------------------------
    def before_write(self, op: str, target: Any) -> None:
        grad_fn = target.grad_fn
        producer = _BACKWARD_SUFFIX.sub("", grad_fn.name()) if grad_fn is not None else None
        try:
            target_ref = weakref.ref(target)
        except TypeError:
            target_ref = lambda: None  # noqa: E731
        self.history.append(_Write(self.session.site(), _OPERATORS.get(op, op), producer, tuple(target.shape),
                                   target._version, target_ref))
        self._writes_seen += 1

    def before_library_call(self, module: Any, args: tuple) -> None:
        """A library module (nn.ReLU(inplace=True), ...) is given a user forward's input: its
        writes are not seen op by op, so compare the input's version around the call."""
        given = [t for t in args if id(t) in self.input_ids]
        if given:
            site = self.session.site()
            self.watching[id(module)] = [(t, t._version, site) for t in given]

    def after_library_call(self, module: Any) -> None:
        for tensor, version, site in self.watching.pop(id(module), ()):
            if tensor._version != version:
                self.history.append(_Write(site, f"{type(module).__name__}(...)", None, tuple(tensor.shape),
                                           version, weakref.ref(tensor)))
                self._writes_seen += 1

    # -- forward inputs ------------------------------------------------------------------------------------
    def before_forward(self, module: Any, args: tuple) -> None:
        import torch

        recorded = [(t, t._version, self._writes_seen) for t in args if isinstance(t, torch.Tensor)]
        if recorded:
            self._inputs[id(module)] = recorded
            for tensor, _, _ in recorded:
                self.input_ids[id(tensor)] = self.input_ids.get(id(tensor), 0) + 1

    def forward_failed(self, module: Any) -> None:
        self._release(self._inputs.pop(id(module), None) or [])
        self.watching.pop(id(module), None)

    def _release(self, recorded: List[Tuple[Any, int, int]]) -> None:
        for tensor, _, _ in recorded:
            left = self.input_ids.get(id(tensor), 1) - 1
            if left > 0:
                self.input_ids[id(tensor)] = left
            else:
                self.input_ids.pop(id(tensor), None)

    def after_forward(self, module: Any, args: tuple) -> None:
        recorded = self._inputs.pop(id(module), None)
        if not recorded:
            return
        self._release(recorded)
        for position, (tensor, version, seen) in enumerate(recorded):
            now = tensor._version
            if now == version:
                continue
            self._report_input_write(module, tensor, version, now, seen, position)

    def _report_input_write(self, module: Any, tensor: Any, before: int, now: int, seen: int, position: int) -> None:
        session = self.session
        cls = type(module)
        forward = getattr(cls.forward, "__code__", None)
        written = self._writes_since(seen, tensor)
        site = written.site if written is not None else None
        if site is None and forward is not None:
            path, line = forward.co_filename, forward.co_firstlineno
        elif site is not None:
            path, line = site.path, site.line
        else:
            return
        name = _argument_name(cls, position)
        op = f" by `{written.op}`" if written is not None else ""
        kind = ("a leaf that requires grad" if tensor.is_leaf and tensor.requires_grad else
                "a tensor autograd tracks" if tensor.requires_grad else "a tensor without grad (data)")
        session.observe(
            "TL001", site,
            f"`{cls.__name__}.forward` writes in place into its input `{name}`, which changes the caller's tensor "
            f"(and breaks backward if autograd saved it); write into a copy (`{name} = {name}.clone()`) or use "
            "the out-of-place op",
            f"input `{name}` ({describe(tensor)}, {kind}) went from version {before} to {now} during "
            f"`{cls.__name__}.forward`{op}",
            path=path, line=line)

    def _writes_since(self, seen: int, tensor: Any) -> Optional[_Write]:
        recent = list(self.history)[-max(self._writes_seen - seen, 0):] if self._writes_seen > seen else []
        for write in recent:
            if write.target() is tensor:
                return write
        return None

    # -- the backward error ---------------------------------------------------------------------------------
    def explain_modified(self, message: str) -> Optional[Tuple[_Write, Dict[str, str]]]:
        match = _MODIFIED.search(message)
        if match is None:
            return None
        info = match.groupdict()
        shape = tuple(int(s) for s in info["shape"].replace(" ", "").split(",") if s)
        expected = int(info["expected"])
        node = info.get("node")
        candidates = [w for w in self.history if w.shape == shape and w.version_before == expected]
        if node:
            named = [w for w in candidates if w.producer == node]
            candidates = named or candidates
        if not candidates:
            return None
        return candidates[-1], info


def _argument_name(cls: type, position: int) -> str:
    code = getattr(getattr(cls, "forward", None), "__code__", None)
    if code is None:
        return f"#{position + 1}"
    names = code.co_varnames[1:code.co_argcount]  # skip self
    return names[position] if position < len(names) else f"#{position + 1}"
