"""TL131 (a loss overwritten before its backward) and TL124 (a loss copied into a new tensor, whose
graph the copy cuts): a loss whose autograd graph was freed without any backward reaching it while
training went on.

Every loss the run tracks (detectors/retention.py: outputs of *Loss modules and F.* losses) has a
grad_fn pre-hook that marks it used when a backward goes through it. The hook is released with the
graph's node, and a finalizer on the hook says when: a loss freed unused is pending. At the next
optimizer step (and at the end of the run), a pending loss created before a backward that has run
since is one the training went on without: it is reported at the line that computed it (TL131)
and, when it had been copied into a new tensor (`torch.Tensor([loss])`, `torch.tensor(loss)`:
seen as `__index__` on it, the legacy constructors' first probe, or as the argument of
`torch.tensor`/`new_tensor`), at the line that copied it (TL124). A tensor with a graph copied
there that is no tracked loss is tracked from the copy on.

Both are evidence for a static finding only (`confirms_only`): an evaluation with autograd on also
frees its losses unused, and only the static rule says a line belongs to training. The lines
where a loss was computed or copied are the lines the run watched (`Session.unobservable`).
"""

from __future__ import annotations

from typing import Any, Dict, List, Optional, Tuple

from torchlint.runtime.frames import Site

MAX_PENDING = 1024


class Unreached:
    def __init__(self, session) -> None:
        self.session = session
        self._pending: List[Any] = []  # retention entries whose graph was freed unused
        # (code, path, line) -> [losses counted, grad_fn class, when the first was, site, computing site]
        self._found: Dict[Tuple[str, str, int], List[Any]] = {}

    def freed(self, entry: Any) -> None:
        """The finalizer of a tracked loss's grad_fn hook: its graph is gone."""
        if not entry.used and not entry.seen_at_backward and len(self._pending) < MAX_PENDING:
            self._pending.append(entry)

    def copied(self, tensor: Any, site: Optional[Site]) -> None:
        """`tensor` (with a graph) is read into a new tensor at `site`."""
        if site is None or tensor.grad_fn is None:
            return
        self.session.watch("TL124", ((site.path, site.line),))
        retention = self.session.retention
        entry = retention.entry_of(tensor)
        if entry is None:
            entry = retention.track_loss(tensor, site, kind="copy")
        if entry is not None and entry.copied_at is None:
            entry.copied_at = site

    def at_step(self, optimizer: Any) -> None:
        pending, self._pending = self._pending, []
        backwards = self.session.backwards
        step = f"step {self.session.step_of(optimizer) + 1} of `{type(optimizer).__name__}`"
        for entry in pending:
            if self._left_behind(entry, backwards):
                self._count(entry, step)

    def finish(self) -> None:
        pending, self._pending = self._pending, []
        for entry in pending:
            if self._left_behind(entry, self.session.backwards):
                self._count(entry, "the end of the run")
        for (code, path, line), (count, made_by, when, site, origin) in self._found.items():
            self._report(code, path, line, count, made_by, when, site, origin)

    @staticmethod
    def _left_behind(entry: Any, backwards: int) -> bool:
        """Unused, and a backward ran after it was computed (without one, nothing went on without it)."""
        return not entry.used and entry.backwards < backwards

    def _count(self, entry: Any, when: str) -> None:
        places = []
        if entry.kind == "loss" and entry.site is not None:
            places.append(("TL131", entry.site))
        if entry.copied_at is not None:
            places.append(("TL124", entry.copied_at))
        for code, site in places:
            key = (code, site.path, site.line)
            found = self._found.get(key)
            if found is None:
                self._found[key] = [1, entry.made_by, when, site, entry.site]
            else:
                found[0] += 1

    def _report(self, code: str, path: str, line: int, count: int, made_by: str, when: str, site: Site,
                origin: Optional[Site]) -> None:
        losses = f"{count} loss{'es' if count != 1 else ''}"
        graph = f" (grad_fn {made_by})" if made_by else ""
        if code == "TL131":
            observation = self.session.observe(
                "TL131", site,
                "this loss is replaced before its backward: no gradient of it reaches the model; combine it "
                "with the later value (`loss = loss + ...`) or backpropagate it",
                f"{losses} computed at this line{graph} had their graphs freed without any backward reaching "
                f"them, while backward and the optimizer went on (first before {when}): the parameters got no "
                "gradient from them")
        else:
            computed = f" computed at line {origin.line}" if origin is not None and origin.line != line else ""
            observation = self.session.observe(
                "TL124", site,
                "the loss is copied into a new tensor, which cuts its graph: the model gets no gradient from "
                "it; add the loss tensor itself (`loss + w * perceptual`)",
                f"{losses}{computed}{graph}, copied into a new tensor at this line, had their graphs freed "
                f"without any backward reaching them, while backward and the optimizer went on (first before "
                f"{when}): the parameters got no gradient from them",
                related=((origin.path, origin.line),) if origin is not None else ())
        if observation is not None:
            observation.confirms_only = True
            observation.count = max(observation.count, count)  # it may confirm as many findings in the statement
