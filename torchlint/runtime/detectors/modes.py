"""TL106 (a model run with autograd on whose graph no backward uses) and TL107 (a model with
Dropout/BatchNorm in training mode in an evaluation: under no_grad/inference_mode, or with
autograd on in calls no backward follows).

Both look at model calls made from the user's own code (the frame calling `model(...)` is in the
user's files), so library helpers that run a model in train mode under no_grad on purpose
(`torch.optim.swa_utils.update_bn`) are not reported.

Every such forward with autograd on gets a pre-hook on the grad_fn of each tensor it returns; a
backward that reaches the graph fires it. A call site (and mode) is an evaluation once a forward
there was followed by another call at the same site (or the end of the script) without its graph
ever being used, and no call there ever was. Such a site in eval() is TL106; in training mode it
is TL106 (the graph is wasted all the same) and, when the model has active Dropout or BatchNorm,
TL107. A call in training mode under no_grad/inference_mode is an evaluation at once.

TL107's evidence is measured on the evaluation calls (from the second call of a site with
autograd on, from the first under no_grad): the BatchNorm running statistics before and after
each call (how much they moved, and `num_batches_tracked`), and, once per site, each active
Dropout's output against a second draw on the same input (the random state saved and restored, so
the script's own random numbers stay as they were): two calls on the same batch that differ.

TL106's evidence is the bytes of the distinct storages autograd saved during a measured call —
the measure the memory samples and TL003 use, so a tensor saved by two nodes (a ReLU's output that
the next Linear saves too) counts once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from torchlint.runtime.frames import Site
from torchlint.runtime.graph import mib

MAX_FLAGS = 4096  # per site: the graphs a backward may still reach later (gradient accumulation)


@dataclass
class _Norm:
    name: str
    kind: str
    base: float = 0.0  # ‖running_mean‖ + ‖running_var‖ before the first measured call
    moved: float = 0.0  # the sum over measured calls of ‖Δrunning_mean‖ + ‖Δrunning_var‖
    batches: int = 0  # num_batches_tracked gained during measured calls


@dataclass
class _SiteCalls:
    model: str
    site: Site
    training: bool
    no_grad: bool = False  # calls under no_grad / inference_mode (evaluations at once)
    inference: bool = False
    calls: int = 0
    pending: Optional[List[bool]] = None
    flags: List[List[bool]] = field(default_factory=list)  # decided calls: did a backward reach their graph?
    used_early: int = 0  # calls whose graph a backward reached before the next call at the site
    saved: List[int] = field(default_factory=list)  # bytes saved by each measured call
    measured: int = 0  # calls whose BatchNorm statistics were measured
    norms: Dict[int, _Norm] = field(default_factory=dict)
    dropout: List[str] = field(default_factory=list)
    probed: bool = False
    stochastic: bool = False

    def used(self) -> int:
        return self.used_early + sum(1 for flag in self.flags if flag[0])

    def unused(self) -> int:
        return sum(1 for flag in self.flags if not flag[0])

    def evaluating(self) -> bool:
        """Every call decided so far was one no backward used."""
        return self.no_grad or (self.used_early == 0 and bool(self.flags) and not any(f[0] for f in self.flags))


@dataclass
class _Active:
    calls: _SiteCalls
    measuring_bytes: bool
    snapshot: List[Tuple[Any, Any, Any, int]]  # (module, running_mean, running_var, num_batches_tracked)
    probes: List[Any]


class Modes:
    def __init__(self, session) -> None:
        self.session = session
        self._sites: Dict[Tuple[str, int, int, bool, bool], _SiteCalls] = {}
        self._active: Optional[_Active] = None
        self._stochastic: Dict[int, List[Tuple[str, Any]]] = {}

    def _stochastic_layers(self, root: Any) -> List[Tuple[str, Any]]:
        import torch.nn as nn

        layers = self._stochastic.get(id(root))
        if layers is None:
            layers = [(name or type(m).__name__, m) for name, m in root.named_modules()
                      if isinstance(m, (nn.modules.dropout._DropoutNd, nn.modules.batchnorm._BatchNorm))]
            self._stochastic[id(root)] = layers
        return layers

    def _active_layers(self, root: Any) -> Tuple[List[Tuple[str, Any]], List[Tuple[str, Any]]]:
        import torch.nn as nn

        dropout, norm = [], []
        for name, m in self._stochastic_layers(root):
            if not m.training:
                continue
            if isinstance(m, nn.modules.dropout._DropoutNd):
                if m.p > 0:
                    dropout.append((name, m))
            elif m.track_running_stats and m.running_mean is not None:
                norm.append((name, m))
        return dropout, norm

    # -- a call of a model from the user's code -------------------------------------------------------
    def call_starts(self, root: Any, site: Optional[Site], grad: bool, inference: bool) -> None:
        """`root` is called from the user's code at `site`: in training mode under no_grad, or
        with autograd on (and parameters that require grad)."""
        self._active = None
        if site is None:
            return
        training = bool(root.training)
        if not grad and not self._stochastic_layers(root):
            return  # a loss module, a model without Dropout/BatchNorm: nothing behaves as in training
        key = (site.path, site.line, id(root), training, grad)
        calls = self._sites.get(key)
        if calls is None:
            calls = self._sites[key] = _SiteCalls(type(root).__name__, site, training, no_grad=not grad,
                                                  inference=inference)
        calls.calls += 1
        if grad:
            self._decide(calls)
            if calls.calls == 1 and training:
                dropout, norm = self._active_layers(root)
                calls.stochastic = bool(dropout or norm)
        measure_norms = training and calls.evaluating()
        measuring_bytes = grad and (not training or calls.evaluating())
        # set first: whatever happens below, call_ends undoes what was done (probes, the measure)
        active = self._active = _Active(calls, False, [], [])
        if measure_norms:
            dropout, norm = self._active_layers(root)
            calls.stochastic = calls.stochastic or bool(dropout or norm)
            for name, m in norm:
                calls.norms.setdefault(id(m), _Norm(name, type(m).__name__))
                active.snapshot.append((m, m.running_mean.detach().clone(),
                                        None if m.running_var is None else m.running_var.detach().clone(),
                                        int(m.num_batches_tracked) if m.num_batches_tracked is not None else 0))
            if dropout and not calls.probed:
                calls.probed = True
                for name, m in dropout:
                    active.probes.append(m.register_forward_hook(self._dropout_probe(calls, name)))
        if measuring_bytes:
            self.session.memory.measure_begin()
            active.measuring_bytes = True

    def call_ends(self, root: Any, output: Any) -> None:
        import torch

        active, self._active = self._active, None
        if active is None:
            return
        for handle in active.probes:
            handle.remove()
        calls = active.calls
        saved = self.session.memory.measure_end() if active.measuring_bytes else None
        if active.snapshot and output is not None:
            calls.measured += 1
            for m, mean, var, batches in active.snapshot:
                entry = calls.norms[id(m)]
                if calls.measured == 1:
                    entry.base = float(mean.norm()) + (float(var.norm()) if var is not None else 0.0)
                moved = float((m.running_mean - mean).norm())
                if var is not None and m.running_var is not None:
                    moved += float((m.running_var - var).norm())
                entry.moved += moved
                if m.num_batches_tracked is not None:
                    entry.batches += int(m.num_batches_tracked) - batches
        if calls.no_grad or output is None:
            return
        if saved is not None:
            calls.saved.append(saved)
        tensors = _output_tensors(output, torch.Tensor)
        roots = [t.grad_fn for t in tensors if t.grad_fn is not None]
        if not roots:
            return
        flag = [False]
        for node in roots:
            try:
                node.register_prehook(_marker(flag))
            except Exception:  # noqa: BLE001 - cannot watch it: assume a backward uses it
                flag[0] = True
        calls.pending = flag

    def _dropout_probe(self, calls: _SiteCalls, name: str):
        def probe(module: Any, args: tuple, output: Any) -> None:
            session = self.session
            busy, session.busy = session.busy, True
            try:
                calls.dropout.append(_dropout_evidence(name, module, args, output))
            except Exception as error:  # noqa: BLE001
                session.internal_error(error)
            finally:
                session.busy = busy
            return None

        return probe

    @staticmethod
    def _decide(calls: _SiteCalls) -> None:
        flag, calls.pending = calls.pending, None
        if flag is None:
            return
        if flag[0]:
            calls.used_early += 1
        elif calls.used_early == 0 and len(calls.flags) < MAX_FLAGS:  # once a backward used one: nothing to keep
            calls.flags.append(flag)

    # -- the end ------------------------------------------------------------------------------------------
    def finish(self, script_ended: bool) -> None:
        for calls in self._sites.values():
            if script_ended and not calls.no_grad:
                self._decide(calls)
            if calls.no_grad:
                if calls.training and calls.stochastic:
                    self._report_training(calls)
                continue
            unused, used = calls.unused(), calls.used()
            if calls.training and unused == 1 and used == 0:
                self._report_undecided(calls)
            if unused < (2 if calls.training else 1) or used > 0:  # in training mode: a loop, not a warm-up call
                continue
            self._report_unused_graph(calls, unused)
            if calls.training and calls.stochastic:
                self._report_training(calls)

    def _report_unused_graph(self, calls: _SiteCalls, unused: int) -> None:
        mode = "in eval()" if not calls.training else "in training mode"
        measured = f"; {mib(sum(calls.saved) / len(calls.saved))} of tensors saved for backward per call" \
            if calls.saved else ""
        observation = self.session.observe(
            "TL106", calls.site,
            f"`{calls.model}` {mode} runs with autograd on: every call records a graph no backward "
            "uses; wrap the evaluation in `with torch.no_grad():` (or `torch.inference_mode()`)",
            f"{unused} call{'s' if unused != 1 else ''} {mode} with grad enabled, none of whose graphs a "
            f"backward used{measured}")
        if observation is not None:
            observation.count = max(observation.count, unused)
            observation.confirms_only = calls.training

    def _report_undecided(self, calls: _SiteCalls) -> None:
        """One call in training mode, with active Dropout/BatchNorm, whose graph no backward used:
        an evaluation of one batch, or a warm-up call? The run cannot tell (it measures from the
        second call of a line), so a static TL107 there has no evidence either way."""
        codes = ("TL106", "TL107") if calls.stochastic else ("TL106",)
        layers = ", with active Dropout/BatchNorm," if calls.stochastic else ""
        for code in codes:
            observation = self.session.observe(
                code, calls.site, f"`{calls.model}` ran once here in training mode with autograd on",
                f"`{calls.model}` ran once here in training mode{layers} and no backward used its graph: one call "
                "cannot tell an evaluation from a warm-up call (the run measures a line from its second call on)")
            if observation is not None:
                observation.inconclusive = True

    def _report_training(self, calls: _SiteCalls) -> None:
        parts = []
        moved = [n for n in calls.norms.values() if n.moved > 0 or n.batches > 0]
        if moved:
            worst = max(moved, key=lambda n: n.moved / n.base if n.base else n.moved)
            share = f"{100 * worst.moved / worst.base:.1f} %" if worst.base else f"{worst.moved:.3g} (from zero)"
            others = f" (and {len(moved) - 1} more BatchNorm layers)" if len(moved) > 1 else ""
            parts.append(f"BatchNorm running statistics changed during {calls.measured} of these calls: "
                         f"{worst.kind} `{worst.name}` by {share} (‖Δrunning_mean‖ + ‖Δrunning_var‖ against "
                         f"their size), num_batches_tracked +{worst.batches}{others}")
        active = [d for d in calls.dropout if d]
        if active:
            parts.append("; ".join(active))
        if not parts:
            return
        if calls.no_grad:
            context = "torch.inference_mode()" if calls.inference else "torch.no_grad()"
            how = f"under {context}"
        else:
            context = "autograd on, and no backward used their graphs"
            how = "in an evaluation no backward follows"
        observation = self.session.observe(
            "TL107", calls.site,
            f"`{calls.model}` runs {how} in training mode: Dropout and BatchNorm behave as in training; "
            f"call `model.eval()` before evaluating (and `model.train()` after)",
            f"`{calls.model}`.training is True in {calls.calls} call{'s' if calls.calls != 1 else ''} here "
            f"({context}): " + "; ".join(parts))
        if observation is not None:
            observation.count = max(observation.count, calls.calls)


def _dropout_evidence(name: str, module: Any, args: tuple, output: Any) -> str:
    """Whether a Dropout module was active: its output against a second draw on the same input
    (the random state saved and restored), and the share of activations it zeroed."""
    import torch

    if not args or not isinstance(args[0], torch.Tensor) or not isinstance(output, torch.Tensor):
        return ""
    x = args[0]
    with torch.no_grad():
        nonzero = x != 0 if not module.inplace else None
        zeroed = output == 0
        share = float((zeroed & nonzero).sum()) / max(int(nonzero.sum()), 1) if nonzero is not None \
            else float(zeroed.float().mean())
        if module.inplace:
            return (f"Dropout `{name}` (p={module.p:g}) active: it zeroed {100 * share:.0f} % of the "
                    "activations (in place)")
        cpu_state = torch.get_rng_state()
        cuda_state = torch.cuda.get_rng_state(x.device) if x.is_cuda else None
        try:
            again = type(module).forward(module, x)
        finally:
            torch.set_rng_state(cpu_state)
            if cuda_state is not None:
                torch.cuda.set_rng_state(cuda_state, x.device)
        differ = not torch.equal(again, output)
    verdict = "two calls on the same batch differ" if differ else "two calls on the same batch agreed"
    return (f"Dropout `{name}` (p={module.p:g}) active: {verdict}, {100 * share:.0f} % of the activations "
            "zeroed")


def _marker(flag: List[bool]):
    def used(grad_outputs: Any) -> None:
        flag[0] = True
        return None

    return used


def _output_tensors(value: Any, tensor_type: type) -> List[Any]:
    if isinstance(value, tensor_type):
        return [value]
    if isinstance(value, (tuple, list)):
        return [v for v in value if isinstance(v, tensor_type)]
    if isinstance(value, dict):
        return [v for v in value.values() if isinstance(v, tensor_type)]
    return []
