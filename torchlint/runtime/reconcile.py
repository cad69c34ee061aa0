"""Static findings against what the run observed.

A static finding is CONFIRMED by an observation of the same code when its line is the
observation's line, in the same statement, on the observation's user call stack or among its
related lines (the assignment that put a tensor on a module, the line that appended a loss), or
— for structural codes whose static location is where the model was built rather than where it
failed (TL005, TL006, TL101, TL102) — inside the class the observation is about, or in one of the
observation's files when nothing closer matched. An observation confirms one finding per
statement for each time it was seen, and the error that ended the run confirms the finding at the
expression it was raised at (the traceback's source position) before any other of its statement:
of `print(a.data[0], b.data[0])` the one that raised. Otherwise it is RAN WITHOUT HARM when its
statement executed, NOT REACHED when it did not, and NO EVIDENCE when the run cannot tell (its
file was loaded without the reach probes). Observations that confirm nothing are the run's own
findings.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Dict, Iterable, List, Optional, Sequence, Set, Tuple

from torchlint.finding import Finding
from torchlint.runtime.observation import Observation
from torchlint.runtime.project import statement_span

CONFIRMED = "CONFIRMED"
NOT_REACHED = "NOT REACHED"
RAN_WITHOUT_HARM = "RAN WITHOUT HARM"
NO_EVIDENCE = "NO EVIDENCE"
FOUND_BY_RUN = "FOUND BY THE RUN"
STRUCTURAL = ("TL005", "TL006", "TL101", "TL102")


@dataclass
class StaticFinding:
    path: str  # absolute
    finding: Finding  # as the linter reported it (its path as displayed)

    @property
    def code(self) -> str:
        return self.finding.code

    @property
    def line(self) -> int:
        return self.finding.start.row


@dataclass
class Result:
    code: str
    path: str
    line: int
    column: Optional[int]
    status: str
    message: str
    evidence: str = ""
    static: Optional[StaticFinding] = None
    observation: Optional[Observation] = None

    @property
    def harmful(self) -> bool:
        return self.status in (CONFIRMED, FOUND_BY_RUN)


def _same_statement(path: str, a: int, b: int) -> bool:
    if a == b:
        return True
    first, last = statement_span(path, a)
    return first <= b <= last


def _close(static: StaticFinding, observation: Observation) -> bool:
    if static.code != observation.code:
        return False
    places = ((observation.path, observation.line),) + tuple(observation.related)
    for path, line in places:
        if path == static.path and _same_statement(path, line, static.line):
            return True
    return any(path == static.path and first <= static.line <= last for path, first, last in observation.spans)


def _same_file(static: StaticFinding, observation: Observation) -> bool:
    if static.code != observation.code or static.code not in STRUCTURAL:
        return False
    files = {observation.path} | {p for p, _ in observation.related} | {p for p, _, _ in observation.spans}
    return static.path in files


def _unfinished_by(static: StaticFinding, unfinished: Dict[Tuple[str, int], str]) -> Optional[str]:
    for (path, line), what in unfinished.items():
        if path == static.path and _same_statement(path, line, static.line):
            return what
    return None


def reconcile(statics: Sequence[StaticFinding], observations: Iterable[Observation],
              reached: Callable[[str, int], Optional[bool]],
              unfinished: Optional[Dict[Tuple[str, int], str]] = None,
              unobservable: Optional[Callable[[str, str, int], Optional[str]]] = None) -> List[Result]:
    """`unfinished`: the user's lines on the stack of the exception that ended the run (their
    statements started and never completed: a finding there neither did harm nor ran without).
    `unobservable(code, path, line)`: why the run cannot observe that code's harm at that line
    (no detector for the code, or — for detectors that watch values at the lines they saw — none
    seen there), None where it can; a finding whose line ran is RAN WITHOUT HARM only where its
    harm was observable and did not happen, else NO EVIDENCE with that reason."""
    observations = list(observations)
    undecided = [o for o in observations if o.inconclusive]
    observations = [o for o in observations if not o.inconclusive]
    results: List[Result] = []
    used: Set[int] = set()
    pending: List[StaticFinding] = []
    ordered = sorted(statics, key=lambda s: (s.path, s.line, s.finding.start.column))
    # One observation confirms one static finding per statement for each time it was seen: a
    # second `loss.data[0]` in a statement whose first one raised never ran. The error that ended
    # the run knows the expression it was raised at: the finding there is the one it confirms.
    confirmed_on: Dict[Tuple[int, str, int], int] = {}
    matched: Dict[int, Observation] = {}

    def claim(static: StaticFinding, observation: Observation) -> None:
        key = (id(observation), static.path, statement_span(static.path, static.line)[0])
        confirmed_on[key] = confirmed_on.get(key, 0) + 1
        matched[id(static)] = observation
        used.add(id(observation))

    def free(static: StaticFinding, observation: Observation) -> bool:
        key = (id(observation), static.path, statement_span(static.path, static.line)[0])
        return confirmed_on.get(key, 0) < observation.count

    for static in ordered:
        for observation in observations:
            if observation.column is not None and static.code == observation.code and \
                    (static.path, static.line, static.finding.start.column) == \
                    (observation.path, observation.line, observation.column) and free(static, observation):
                claim(static, observation)
                break
    for static in ordered:
        match = matched.get(id(static))
        if match is None:
            match = next((o for o in observations if _close(static, o) and free(static, o)), None)
            if match is None:
                pending.append(static)
                continue
            claim(static, match)
        results.append(_confirmed(static, match))
    for static in pending:
        match = next((o for o in observations if id(o) not in used and _same_file(static, o)), None)
        if match is not None:
            used.add(id(match))
            results.append(_confirmed(static, match))
            continue
        status = {True: RAN_WITHOUT_HARM, False: NOT_REACHED, None: NO_EVIDENCE}[reached(static.path, static.line)]
        evidence = ""
        stopped_by = _unfinished_by(static, unfinished) if unfinished and status == RAN_WITHOUT_HARM else None
        if stopped_by is not None:
            status = NO_EVIDENCE
            evidence = f"its statement started but raised ({stopped_by}) before it completed, so the run cannot tell"
        elif status == RAN_WITHOUT_HARM and any(_close(static, o) for o in undecided):
            status = NO_EVIDENCE
            evidence = next(o.evidence for o in undecided if _close(static, o))
        elif status == RAN_WITHOUT_HARM and unobservable is not None:
            why = unobservable(static.code, static.path, static.line)
            if why is not None:
                status = NO_EVIDENCE
                evidence = why
        results.append(Result(static.code, static.path, static.line, static.finding.start.column, status,
                              static.finding.message, evidence, static=static))
    for observation in observations:
        if id(observation) not in used and not observation.confirms_only:
            results.append(Result(observation.code, observation.path, observation.line, None, FOUND_BY_RUN,
                                  observation.message, observation.evidence, observation=observation))
    order = {CONFIRMED: 0, FOUND_BY_RUN: 0, RAN_WITHOUT_HARM: 1, NO_EVIDENCE: 1, NOT_REACHED: 2}
    results.sort(key=lambda r: (order[r.status], r.path, r.line, r.code))
    return results


def _confirmed(static: StaticFinding, observation: Observation) -> Result:
    return Result(static.code, static.path, static.line, static.finding.start.column, CONFIRMED,
                  static.finding.message, observation.evidence, static=static, observation=observation)


def counts(results: Sequence[Result]) -> Tuple[int, int, int, int, int]:
    """(confirmed, found by the run only, ran without harm, not reached, no evidence)."""
    tally = {status: 0 for status in (CONFIRMED, FOUND_BY_RUN, RAN_WITHOUT_HARM, NOT_REACHED, NO_EVIDENCE)}
    for result in results:
        tally[result.status] += 1
    return (tally[CONFIRMED], tally[FOUND_BY_RUN], tally[RAN_WITHOUT_HARM], tally[NOT_REACHED], tally[NO_EVIDENCE])
