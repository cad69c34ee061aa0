"""TL003: loss tensors of earlier iterations still alive with their autograd graphs.

Criterion outputs are tracked by weak reference from the moment they are created: outputs of
modules whose class name ends in `Loss`, of `torch.nn.functional` losses (seen through the
TorchFunctionMode) and tensors `backward()` is called on; a sum, product or stack of tracked
tensors is tracked as a running sum of the iterations it spans. A finding is

- loss tensors created in two or more earlier steps (of the first optimizer that steps) still
  alive with their `grad_fn` at a step, or a running sum spanning two or more steps; or
- at least `RETAINED_WITHOUT_BACKWARD` losses from one line alive at once, none of which any
  backward ever used (an evaluation loop collecting its loss tensors).

One loss kept from the previous step (`best = loss`, a value logged after the step) is not: it
does not grow. The container holding the losses is named by looking through the user's frames
(and, with --find-holders, the whole heap through gc.get_referrers); the line reported is the one
in that frame's function (or file, or the methods of the object holding it: `trainer.history` is
updated as `self.history`; also through subscripts, `history["loss"].append(loss)`) that appends to
the container or adds to the sum, and the evidence names it.
"""

from __future__ import annotations

import weakref
from collections import deque
from dataclasses import dataclass
from typing import Any, Dict, Iterable, List, Optional, Set, Tuple

from torchlint.runtime import project
from torchlint.runtime.frames import Site
from torchlint.runtime.graph import mib, saved_bytes, walk

RETAINED_WITHOUT_BACKWARD = 16
MAX_TRACKED = 50_000
_CONTAINER_SCAN_LIMIT = 100_000


@dataclass
class _Tracked:
    ref: Any
    iterations: Set[int]
    site: Optional[Site]
    kind: str  # "loss", "sum" or "copy" (a tensor with a graph read into a new tensor: TL124 only)
    used: bool = False  # a backward went through its grad_fn
    seen_at_backward: bool = False  # first seen when backward() was called on it (site: that call)
    sources: Tuple[Any, ...] = ()  # the tracked entries a sum was computed from (weak: `_Tracked` objects)
    reported: bool = False  # a finding already holds it (one bug, one finding)
    backwards: int = 0  # backward() calls seen before it was computed (detectors/unreached.py)
    made_by: str = ""  # its grad_fn's class
    copied_at: Optional[Site] = None  # the line that copied it into a new tensor (TL124)


@dataclass
class _Report:
    """One TL003 finding and what it measured: at its first sighting and at the end of the run, so
    the evidence says how the retained graphs grow per step."""
    observation: Any
    kind: str  # "container" or "sum"
    name: str
    text: str  # the evidence at the first sighting
    step: int  # the step the first sighting came before
    tensors: int
    nodes: int
    saved: int


@dataclass
class _SiteStats:
    alive: int = 0
    peak: int = 0
    used: int = 0
    unused_dead: int = 0
    # (name, lines, stack, whether the lines are the ones that add to the container)
    holder: Optional[Tuple[str, List[Tuple[str, int]], Tuple[Tuple[str, int], ...], bool]] = None
    evidence: str = ""
    reported: bool = False


class Retention:
    def __init__(self, session) -> None:
        self.session = session
        self._tracked: Dict[int, _Tracked] = {}
        self._sites: Dict[Tuple[str, int], _SiteStats] = {}
        self._reported: Set[Tuple[str, int]] = set()
        # TL003 findings by the line that created the losses (container) or the sum's line: a later
        # sighting of the same losses updates that finding's evidence instead of adding one
        self._reports: Dict[Tuple[str, int], _Report] = {}

    # -- tracking ------------------------------------------------------------------------------------
    def is_tracked(self, tensor: Any) -> bool:
        return self.entry_of(tensor) is not None

    def entry_of(self, tensor: Any) -> Optional[_Tracked]:
        entry = self._tracked.get(id(tensor))
        return entry if entry is not None and entry.ref() is tensor else None

    def track_loss(self, tensor: Any, site: Optional[Site], at_backward: bool = False,
                   kind: str = "loss") -> Optional[_Tracked]:
        grad_fn = tensor.grad_fn
        if grad_fn is None or self.is_tracked(tensor) or len(self._tracked) >= MAX_TRACKED:
            return None
        entry = _Tracked(None, {self.session.iteration}, site, kind, seen_at_backward=at_backward,
                         backwards=self.session.backwards, made_by=type(grad_fn).__name__)
        key = (site.path, site.line) if site is not None and kind == "loss" else None
        stats = self._sites.get(key) if key is not None else None
        if key is not None and stats is None:
            stats = self._sites[key] = _SiteStats()
            if not at_backward:  # a loss computed here: whether a backward reaches it is seen (TL131)
                self.session.watch("TL131", (key,))
        entry.ref = weakref.ref(tensor, self._on_death(id(tensor), entry, stats))
        self._tracked[id(tensor)] = entry
        hook = self._on_backward(entry, stats)
        try:
            grad_fn.register_prehook(hook)
        except Exception:  # noqa: BLE001 - a node that takes no hooks: treat as used
            entry.used = True
        else:
            if not at_backward:  # the hook goes with the graph's node: then the loss was either used or never
                weakref.finalize(hook, self.session.unreached.freed, entry).atexit = False
        if stats is not None:
            stats.alive += 1
            stats.peak = max(stats.peak, stats.alive)
            if stats.alive >= RETAINED_WITHOUT_BACKWARD and stats.holder is None and stats.used == 0:
                self._snapshot_holder(key, stats)
        return entry

    def _on_death(self, key: int, entry: _Tracked, stats: Optional[_SiteStats]):
        def died(_ref: Any) -> None:
            if self._tracked.get(key) is entry:
                del self._tracked[key]
            if stats is not None:
                stats.alive -= 1
                if not entry.used:
                    stats.unused_dead += 1

        return died

    @staticmethod
    def _on_backward(entry: _Tracked, stats: Optional[_SiteStats]):
        def used(grad_outputs: Any) -> None:
            if not entry.used:
                entry.used = True
                if stats is not None:
                    stats.used += 1
            return None

        return used

    def derived(self, args: Iterable[Any], output: Any) -> None:
        """`output` was computed from `args` by a sum/product/stack: track it when a tracked
        tensor is among them."""
        tracked = self._tracked
        if not tracked:
            return
        spans: Set[int] = set()
        sources: List[_Tracked] = []
        for value in args:
            if type(value) in (list, tuple):
                for item in value:
                    entry = tracked.get(id(item))
                    if entry is not None and entry.ref() is item and entry.kind != "copy":
                        spans |= entry.iterations
                        sources.append(entry)
                continue
            entry = tracked.get(id(value))
            if entry is not None and entry.ref() is value and entry.kind != "copy":
                spans |= entry.iterations
                sources.append(entry)
        if not spans:
            return
        import torch

        if not isinstance(output, torch.Tensor) or output.grad_fn is None:
            return
        existing = self._tracked.get(id(output))
        if existing is not None and existing.ref() is output:
            existing.iterations |= spans
            existing.sources = existing.sources + tuple(e for e in sources if e.kind == "sum")
            if existing.kind == "loss" and len(existing.iterations) > 1:
                existing.kind = "sum"
            return
        if len(self._tracked) >= MAX_TRACKED:
            return
        entry = _Tracked(None, set(spans), self.session.site(), "sum",
                         sources=tuple(e for e in sources if e.kind == "sum"))
        entry.ref = weakref.ref(output, self._on_death(id(output), entry, None))
        self._tracked[id(output)] = entry

    # -- checks --------------------------------------------------------------------------------------
    def check(self, final: bool = False) -> None:
        """At a step of the first optimizer (and at the end of the run, where the losses of the
        last step and of anything after it are the current ones)."""
        now = self.session.iteration - (1 if final else 0)
        old_losses: List[Tuple[_Tracked, Any]] = []
        sums: List[Tuple[_Tracked, Any]] = []
        for entry in list(self._tracked.values()):
            tensor = entry.ref()
            if tensor is None or tensor.grad_fn is None:
                continue
            if entry.kind == "loss" and max(entry.iterations) < now:
                old_losses.append((entry, tensor))
            elif entry.kind == "sum" and len(entry.iterations) >= 2 and min(entry.iterations) < now:
                sums.append((entry, tensor))
        if len({i for entry, _ in old_losses for i in entry.iterations}) >= 2:
            self._report_container(old_losses, final)
        for entry, tensor in sums:
            self._report_sum(entry, tensor, final)
        for key, stats in self._sites.items():
            unused = stats.unused_dead + stats.alive
            if not stats.reported and stats.used == 0 and stats.peak >= RETAINED_WITHOUT_BACKWARD \
                    and unused >= RETAINED_WITHOUT_BACKWARD and stats.holder is not None:
                self._report_unused(key, stats)

    def _when(self, final: bool) -> Tuple[str, int]:
        """How the evidence names the moment of a check, and the number of steps done by then."""
        steps = self.session.iteration
        if final:
            return f"at the end of the run (after step {steps})", steps
        return f"at step {steps + 1}", steps

    def _measure(self, tensors: List[Any]) -> Tuple[int, int]:
        nodes = walk(t.grad_fn for t in tensors)
        return len(nodes), saved_bytes(nodes, self.session.parameter_storages())

    def _update(self, report: _Report, tensors: List[Any], final: bool) -> None:
        """A later sighting of the losses a finding holds: its evidence says how they grew."""
        if not final:
            return  # measured at the first sighting and at the end: two graph walks per finding
        when, steps = self._when(final)
        count, (nodes, saved) = len(tensors), self._measure(tensors)
        between = max(steps - (report.step - 1), 1)
        report.observation.evidence = report.text + "; " + _growth(
            when, count, nodes, saved, report, between, "loss tensors" if report.kind == "container" else "")
        report.observation.severity = _retention_severity(saved)

    def _report_container(self, retained: List[Tuple[_Tracked, Any]], final: bool) -> None:
        session = self.session
        created = retained[0][0].site
        key = (created.path, created.line) if created is not None else None
        known = self._reports.get(key) if key is not None else None
        if known is None:  # losses another finding holds (kept at another line of the same creation)
            known = next((self._reports[k] for k in self._reports
                          if any(entry.reported for entry, _ in retained) and self._reports[k].kind == "container"), None)
        if known is not None:
            for entry, _ in retained:
                entry.reported = True
            self._update(known, [t for _, t in retained], final)
            return
        ids = {id(t) for _, t in retained}
        holder = self._find_holder(ids)
        steps = sorted({i for entry, _ in retained for i in entry.iterations})
        first = retained[0][0]
        if holder is None:
            if created is None:
                return
            name, lines, stack, keeps = "an object torchlint could not name (--find-holders searches the heap)", \
                [(created.path, created.line)], created.stack, False
        else:
            name, lines, stack, keeps = holder
            name = name if " " in name else f"`{name}`"
        path, line = lines[0]
        if (path, line) in self._reported:
            return
        self._reported.add((path, line))
        when, done = self._when(final)
        nodes, saved = self._measure([t for _, t in retained])
        evidence = (f"{len(retained)} loss tensors of iterations {_span(steps)} still alive with their graphs in "
                    f"{name}{_kept_by(lines, keeps)} {when}: {nodes:,} autograd nodes, "
                    f"{mib(saved)} of saved tensors retained")
        related = tuple(lines) + tuple(stack)
        if created is not None:
            evidence += (f" (backward() called on them at line {created.line})" if first.seen_at_backward
                         else f" (created at line {created.line})")
            related += ((created.path, created.line),)
        observation = session.observe(
            "TL003", None,
            f"loss tensors kept in {name} hold every iteration's autograd graph; store `loss.item()` "
            "(or `loss.detach()`) instead",
            evidence + "; " + _per_step(nodes, saved, len(steps)), path=path, line=line, related=related,
            step=done + (0 if final else 1))
        if observation is None:
            return
        observation.severity = _retention_severity(saved)
        for entry, _ in retained:
            entry.reported = True
        if key is not None:
            self._reports[key] = _Report(observation, "container", name, evidence, done + 1, len(retained),
                                         nodes, saved)

    def _report_sum(self, entry: _Tracked, tensor: Any, final: bool) -> None:
        site = entry.site
        if site is None:
            return
        known = self._reports.get((site.path, site.line))
        if known is not None:
            entry.reported = True
            self._update(known, [tensor], final)
            return
        if _derived_from_reported(entry):
            return
        if (site.path, site.line) in self._reported:
            entry.reported = True
            return
        self._reported.add((site.path, site.line))
        entry.reported = True
        name = self._name_of(tensor) or "a running sum"
        nodes, saved = self._measure([tensor])
        steps = sorted(entry.iterations)
        shown = f"`{name}`" if name != "a running sum" else name
        when, done = self._when(final)
        evidence = (f"{shown} (added to at line {site.line}) spans the losses of iterations {_span(steps)} {when}: "
                    f"{nodes:,} autograd nodes reachable from it, {mib(saved)} of saved tensors")
        observation = self.session.observe(
            "TL003", site,
            f"{shown} adds loss tensors across iterations into one ever-growing autograd graph; add "
            "`loss.item()` instead",
            evidence + "; " + _per_step(nodes, saved, len(steps)), step=done + (0 if final else 1))
        if observation is None:
            return
        observation.severity = _retention_severity(saved)
        self._reports[(site.path, site.line)] = _Report(observation, "sum", shown, evidence, done + 1, 1, nodes, saved)

    def _snapshot_holder(self, key: Tuple[str, int], stats: _SiteStats) -> None:
        ids = {k for k, entry in self._tracked.items() if entry.site is not None
               and (entry.site.path, entry.site.line) == key and entry.ref() is not None}
        stats.holder = self._find_holder(ids)
        if stats.holder is None:
            stats.holder = ("an object torchlint could not name (--find-holders searches the heap)",
                            [key], (), False)
        tensors = [self._tracked[k].ref() for k in ids if k in self._tracked]
        nodes = walk(t.grad_fn for t in tensors if t is not None)
        stats.evidence = (f"{len(ids)} loss tensors created at line {key[1]} alive at once with their graphs: "
                          f"{len(nodes):,} autograd nodes, {mib(saved_bytes(nodes, self.session.parameter_storages()))} of saved tensors")

    def _report_unused(self, key: Tuple[str, int], stats: _SiteStats) -> None:
        stats.reported = True
        assert stats.holder is not None
        name, lines, stack, keeps = stats.holder
        shown = name if " " in name else f"`{name}`"
        path, line = lines[0]
        if (path, line) in self._reported:
            return
        self._reported.add((path, line))
        self.session.observe(
            "TL003", None,
            f"loss tensors kept in {shown} hold their autograd graphs and no backward ever uses them; "
            "store `loss.item()` instead (and evaluate under `torch.no_grad()`)",
            f"{stats.evidence}{_kept_by(lines, keeps, ' in ' + shown)}; at most {stats.peak} alive, none used by a "
            "backward",
            path=path, line=line, related=tuple(lines) + tuple(stack) + (key,))

    # -- who holds them --------------------------------------------------------------------------------
    def _find_holder(self, ids: Set[int]):
        """(name, [(path, update line)...], stack) of the variable or attribute in a user frame (or
        the script's globals) whose container holds tensors with these ids."""
        session = self.session
        frames = session.user_frames()
        variables: Dict[str, Any] = {}
        for frame in frames:
            try:
                variables = dict(frame.f_locals)
            except Exception:  # noqa: BLE001
                continue
            found = _holding_name(variables, ids)
            if found is not None:
                code = frame.f_code
                scope = project.function_node(code.co_filename, code.co_firstlineno, code.co_name)
                lines = _update_lines(scope, found) if scope is not None else []
                if not lines:  # updated in another function of the file (a logging helper)
                    tree = project.parse_file(code.co_filename)
                    lines = _update_lines(tree, found) if tree is not None else []
                located = [(code.co_filename, n) for n in lines] or [(code.co_filename, frame.f_lineno)]
                stack = tuple((f.f_code.co_filename, f.f_lineno) for f in frames)
                return found, located, stack, bool(lines)
        del variables  # not to be found by the heap scan below
        namespace = session.main_namespace()
        if namespace is not None:
            found = _holding_name(namespace, ids)
            path = namespace.get("__file__")
            if found is not None and path:
                scope = project.parse_file(path)
                lines = _update_lines(scope, found) if scope is not None else []
                if lines:
                    return found, [(path, n) for n in lines], (), True
        if session.options.find_holders:
            return self._holder_from_heap(ids)
        return None

    def _holder_from_heap(self, ids: Set[int]):
        """The container of the retained losses and who holds it, from the heap (--find-holders:
        two gc.get_referrers scans, once per finding)."""
        import gc

        for entry in list(self._tracked.values()):
            tensor = entry.ref()
            if tensor is None or id(tensor) not in ids:
                continue
            site = entry.site
            located = [(site.path, site.line)] if site else []
            stack = site.stack if site else ()
            # The container is the referrer holding the most of the retained losses (a frame's
            # locals or torchlint's own lists hold one of them at most).
            candidates = [c for c in gc.get_referrers(tensor) if isinstance(c, (list, tuple, dict, deque))
                          and c is not self._tracked]
            counts = [(sum(1 for item in (c.values() if isinstance(c, dict) else c) if id(item) in ids), c)
                      for c in candidates]
            counts = [(count, c) for count, c in counts if count >= 2]
            if not counts:
                return None
            container = max(counts, key=lambda pair: pair[0])[1]
            kind = f"a {type(container).__name__} of {len(container)}"
            for owner in gc.get_referrers(container):
                if isinstance(owner, dict):
                    for name, value in owner.items():
                        if value is container:
                            return f"{kind} held under the key {name!r} of a dict", located, stack, False
                elif hasattr(owner, "__dict__") and not isinstance(owner, type):
                    for name, value in vars(owner).items():
                        if value is container:
                            return f"{kind} in the attribute {name!r} of a {type(owner).__name__}", located, stack, False
            return kind, located, stack, False
        return None

    def _name_of(self, tensor: Any) -> Optional[str]:
        for frame in self.session.user_frames():
            try:
                for name, value in frame.f_locals.items():
                    if value is tensor:
                        return name
            except Exception:  # noqa: BLE001
                continue
        namespace = self.session.main_namespace() or {}
        for name, value in namespace.items():
            if value is tensor:
                return name
        return None


def _holds(value: Any, ids: Set[int]) -> bool:
    if isinstance(value, dict):
        items: Iterable[Any] = value.values()
    elif isinstance(value, (list, tuple, deque, set)):
        items = value
    else:
        return False
    for count, item in enumerate(items):
        if count >= _CONTAINER_SCAN_LIMIT:
            return False
        if id(item) in ids:
            return True
        if isinstance(item, (list, tuple)) and any(id(x) in ids for x in item[:64]):
            return True
    return False


def _holding_name(variables: Dict[str, Any], ids: Set[int]) -> Optional[str]:
    for name, value in variables.items():
        if _holds(value, ids):
            return name
    for name, value in variables.items():  # one level into objects: self.losses, trainer.history
        attributes = getattr(value, "__dict__", None)
        if not isinstance(attributes, dict) or isinstance(value, type) or type(value).__module__ == "builtins":
            continue
        for attr, item in list(attributes.items()):
            if _holds(item, ids):
                return f"{name}.{attr}"
    return None


def _update_lines(scope: Any, found: str) -> List[int]:
    """The lines of `scope` that add to the container `found`; for `trainer.history`, held by an
    object, also those of its methods (`self.history.append(...)`)."""
    lines = project.container_update_lines(scope, found)
    if not lines and "." in found and not found.startswith("self."):
        lines = project.container_update_lines(scope, "self." + found.rsplit(".", 1)[1])
    return lines


def _kept_by(lines: List[Tuple[str, int]], keeps: bool, prefix: str = "") -> str:
    """` (kept by line 12)`: the line that adds to the container (where the finding is reported),
    when the holder's source shows one."""
    if not keeps or not lines:
        return ""
    shown = sorted({line for _, line in lines})
    numbers = ", ".join(str(n) for n in shown)
    return f"{prefix} (kept by line{'s' if len(shown) > 1 else ''} {numbers})"


def _derived_from_reported(entry: _Tracked) -> bool:
    """Whether a sum was computed from one a finding already holds (`avg = total / n` after
    `total += loss`): the same bug, so no finding of its own. Marks it so, for its own sums."""
    seen: Set[int] = set()
    stack = list(entry.sources)
    while stack:
        source = stack.pop()
        if id(source) in seen:
            continue
        seen.add(id(source))
        if source.reported:
            entry.reported = True
            return True
        stack.extend(source.sources)
    return False


def _retention_severity(saved: int) -> str:
    """What the retained graphs cost decides the finding's severity: with saved tensors (their
    activations, often MiBs a step) memory runs out; after backward() freed them only the graphs'
    nodes remain (a few hundred bytes each): a slow leak."""
    return "warning" if saved > 0 else "note"


def _per_step(nodes: int, saved: int, iterations: int) -> str:
    iterations = max(iterations, 1)
    freed = "" if saved else " (backward() freed their saved tensors: only the graphs' nodes are kept)"
    return f"≈ {nodes / iterations:,.0f} nodes and {mib(saved / iterations)} of saved tensors per iteration{freed}"


def _growth(when: str, count: int, nodes: int, saved: int, first: _Report, steps: int, what: str) -> str:
    """The second measurement of a finding, and the growth per step since the first."""
    grew = (nodes - first.nodes) / steps
    grew_bytes = (saved - first.saved) / steps
    held = f"{count} {what} with " if what else ""
    freed = ("; backward() freed their saved tensors: only the graphs' nodes grow" if saved == 0 else "")
    return (f"{when}: {held}{nodes:,} autograd nodes, {mib(saved)} of saved tensors: {grew:+,.1f} nodes and "
            f"{'+' if grew_bytes >= 0 else '-'}{mib(abs(grew_bytes))} of saved tensors per step{freed}")


def _span(steps: List[int]) -> str:
    shown = [s + 1 for s in steps]  # iterations count from 0, steps from 1
    return f"{shown[0]}–{shown[-1]}" if len(shown) > 1 else str(shown[0])

