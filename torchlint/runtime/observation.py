"""What a runtime detector reports: an `Observation` — a rule code at the user's source line,
what went wrong, and the evidence the run produced (measured values, never constants)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from torchlint.runtime.frames import Site
from torchlint.runtime.project import display_path


@dataclass
class Observation:
    code: str
    path: str  # absolute
    line: int
    message: str  # one line: what is wrong, why it hurts, the fix
    evidence: str  # what the run measured
    # Other user lines this observation is about (the call stack at the event, the assignment
    # that put a tensor on a module, ...): a static finding of the same code at any of them is
    # the one this observation confirms.
    related: Tuple[Tuple[str, int], ...] = ()
    # Source spans (path, first, last) a structural finding belongs to (the class of the module).
    spans: Tuple[Tuple[str, int, int], ...] = ()
    count: int = 1
    step: Optional[int] = None  # the optimizer step it was first seen at (1-based), if any
    ended_run: bool = False  # the script stopped with this error
    column: Optional[int] = None  # where on `line` the error that ended the run was raised (1-based)
    # the severity what the run measured gives the finding (TL003: retained saved tensors are a
    # warning, graphs whose saved tensors backward freed a note); None: the static finding's
    severity: Optional[str] = None
    # evidence for a static finding only: where it confirms none, the run does not report it on its
    # own (a model in training mode run with autograd on and no backward: the static finding says
    # it is an evaluation; without one it may be a warm-up call or a shape probe)
    confirms_only: bool = False
    # the run saw the finding's situation but cannot tell whether it did harm (one call in training
    # mode whose graph no backward used: an evaluation or a warm-up call?): the finding's status is
    # NO EVIDENCE with this observation's evidence, never RAN WITHOUT HARM; it confirms nothing
    inconclusive: bool = False

    @property
    def key(self) -> Tuple[str, str, int]:
        return (self.code, self.path, self.line)

    @property
    def where(self) -> str:
        return f"{display_path(self.path)}:{self.line}"

    def to_json(self) -> dict:
        return {
            "code": self.code,
            "filename": display_path(self.path),
            "line": self.line,
            "message": self.message,
            "evidence": self.evidence,
            "count": self.count,
            "step": self.step,
            "ended_run": self.ended_run,
            "severity": self.severity,
        }


@dataclass
class Observations:
    """Observations deduplicated by (code, path, line): a repeat only counts."""

    items: Dict[Tuple[str, str, int], Observation] = field(default_factory=dict)

    def add(self, code: str, site: Optional[Site], message: str, evidence: str,
            related: Tuple[Tuple[str, int], ...] = (), spans: Tuple[Tuple[str, int, int], ...] = (),
            step: Optional[int] = None, path: Optional[str] = None, line: Optional[int] = None,
            ended_run: bool = False) -> Optional[Observation]:
        if site is None and (path is None or line is None):
            return None
        path = path if path is not None else site.path  # type: ignore[union-attr]
        line = line if line is not None else site.line  # type: ignore[union-attr]
        stack = site.stack if site is not None else ()
        key = (code, path, line)
        existing = self.items.get(key)
        if existing is not None:
            existing.count += 1
            existing.ended_run = existing.ended_run or ended_run
            return existing
        observation = Observation(code, path, line, message, evidence,
                                  related=tuple(dict.fromkeys(tuple(related) + tuple(stack))),
                                  spans=tuple(spans), step=step, ended_run=ended_run,
                                  column=site.column if site is not None and (path, line) == (site.path, site.line) else None)
        self.items[key] = observation
        return observation

    def find(self, code: str) -> List[Observation]:
        return [o for o in self.items.values() if o.code == code]

    def all(self) -> List[Observation]:
        return sorted(self.items.values(), key=lambda o: (o.path, o.line, o.code))
