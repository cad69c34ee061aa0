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
    kind: str  # "loss" or "sum"
    used: bool = False  # a backward went through its grad_fn
    seen_at_backward: bool = False  # first seen when backward() was called on it (site: that call)


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

    # -- tracking ------------------------------------------------------------------------------------
    def is_tracked(self, tensor: Any) -> bool:
        entry = self._tracked.get(id(tensor))
        return entry is not None and entry.ref() is tensor

    def track_loss(self, tensor: Any, site: Optional[Site], at_backward: bool = False) -> None:
        if tensor.grad_fn is None or self.is_tracked(tensor) or len(self._tracked) >= MAX_TRACKED:
            return
        entry = _Tracked(None, {self.session.iteration}, site, "loss", seen_at_backward=at_backward)
        key = (site.path, site.line) if site is not None else None
        stats = self._sites.setdefault(key, _SiteStats()) if key is not None else None
        entry.ref = weakref.ref(tensor, self._on_death(id(tensor), entry, stats))
        self._tracked[id(tensor)] = entry
        try:
            tensor.grad_fn.register_prehook(self._on_backward(entry, stats))
        except Exception:  # noqa: BLE001 - a node that takes no hooks: treat as used
            entry.used = True
        if stats is not None:
            stats.alive += 1
            stats.peak = max(stats.peak, stats.alive)
            if stats.alive >= RETAINED_WITHOUT_BACKWARD and stats.holder is None and stats.used == 0:
                self._snapshot_holder(key, stats)

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
        for value in args:
            if type(value) in (list, tuple):
                for item in value:
                    entry = tracked.get(id(item))
                    if entry is not None and entry.ref() is item:
                        spans |= entry.iterations
                continue
            entry = tracked.get(id(value))
            if entry is not None and entry.ref() is value:
                spans |= entry.iterations
        if not spans:
            return
        import torch

        if not isinstance(output, torch.Tensor) or output.grad_fn is None:
            return
        existing = self._tracked.get(id(output))
        if existing is not None and existing.ref() is output:
            existing.iterations |= spans
            if existing.kind == "loss" and len(existing.iterations) > 1:
                existing.kind = "sum"
            return
        if len(self._tracked) >= MAX_TRACKED:
            return
        entry = _Tracked(None, set(spans), self.session.site(), "sum")
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
            self._report_sum(entry, tensor)
        for key, stats in self._sites.items():
            unused = stats.unused_dead + stats.alive
            if not stats.reported and stats.used == 0 and stats.peak >= RETAINED_WITHOUT_BACKWARD \
                    and unused >= RETAINED_WITHOUT_BACKWARD and stats.holder is not None:
                self._report_unused(key, stats)

    def _report_container(self, retained: List[Tuple[_Tracked, Any]], final: bool) -> None:
        session = self.session
        ids = {id(t) for _, t in retained}
        holder = self._find_holder(ids)
        steps = sorted({i for entry, _ in retained for i in entry.iterations})
        first = retained[0][0]
        created = first.site
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
        nodes = walk(t.grad_fn for _, t in retained)
        evidence = (f"{len(retained)} loss tensors of iterations {_span(steps)} still alive with their graphs in "
                    f"{name}{_kept_by(lines, keeps)} at step {session.iteration + 1}: {len(nodes):,} autograd nodes, "
                    f"{mib(saved_bytes(nodes, self.session.parameter_storages()))} of saved tensors retained")
        related = tuple(lines) + tuple(stack)
        if created is not None:
            evidence += (f" (backward() called on them at line {created.line})" if first.seen_at_backward
                         else f" (created at line {created.line})")
            related += ((created.path, created.line),)
        session.observe(
            "TL003", None,
            f"loss tensors kept in {name} hold every iteration's autograd graph; store `loss.item()` "
            "(or `loss.detach()`) instead",
            evidence, path=path, line=line, related=related, step=session.iteration + 1)

    def _report_sum(self, entry: _Tracked, tensor: Any) -> None:
        site = entry.site
        if site is None or (site.path, site.line) in self._reported:
            return
        self._reported.add((site.path, site.line))
        name = self._name_of(tensor) or "a running sum"
        nodes = walk([tensor.grad_fn])
        steps = sorted(entry.iterations)
        shown = f"`{name}`" if name != "a running sum" else name
        self.session.observe(
            "TL003", site,
            f"{shown} adds loss tensors across iterations into one ever-growing autograd graph; add "
            "`loss.item()` instead",
            f"{shown} (added to at line {site.line}) spans the losses of iterations {_span(steps)} at step "
            f"{self.session.iteration + 1}: "
            f"{len(nodes):,} autograd nodes reachable from it, {mib(saved_bytes(nodes, self.session.parameter_storages()))} of saved tensors",
            step=self.session.iteration + 1)

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


def _span(steps: List[int]) -> str:
    shown = [s + 1 for s in steps]  # iterations count from 0, steps from 1
    return f"{shown[0]}–{shown[-1]}" if len(shown) > 1 else str(shown[0])

