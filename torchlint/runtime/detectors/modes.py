"""TL106 (a model in eval() run with autograd on, whose graph no backward uses) and TL107 (a
model with Dropout/BatchNorm in training mode run under no_grad/inference_mode).

Both look at model calls made from the user's own code (the frame calling `model(...)` is in the
user's files), so library helpers that run a model in train mode under no_grad on purpose
(`torch.optim.swa_utils.update_bn`) are not reported.

TL106: every such forward gets a pre-hook on the grad_fn of each tensor it returns; a backward
that reaches the graph fires it. A call site is reported once a forward there was followed by
another call at the same site (or the end of the script) without its graph ever being used.
The evidence is the bytes of the distinct storages autograd saved during that forward — the
measure the memory samples and TL003 use, so a tensor saved by two nodes (a ReLU's output that
the next Linear saves too) counts once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple

from torchlint.runtime.frames import Site
from torchlint.runtime.graph import mib


@dataclass
class _EvalCall:
    site: Site
    saved: int
    used: List[bool] = field(default_factory=lambda: [False])


@dataclass
class _SiteCalls:
    model: str
    pending: Optional[_EvalCall] = None
    unused: int = 0
    used: int = 0
    saved: List[int] = field(default_factory=list)
    site: Optional[Site] = None


class Modes:
    def __init__(self, session) -> None:
        self.session = session
        self._eval_sites: Dict[Tuple[str, int], _SiteCalls] = {}
        self._active: Optional[Tuple[Tuple[str, int], Site, int]] = None
        self._stochastic: Dict[int, List[Any]] = {}

    # -- TL107 ------------------------------------------------------------------------------------------
    def _stochastic_layers(self, root: Any) -> List[Any]:
        import torch.nn as nn

        layers = self._stochastic.get(id(root))
        if layers is None:
            layers = [m for m in root.modules() if isinstance(m, nn.modules.dropout._DropoutNd)
                      or isinstance(m, nn.modules.batchnorm._BatchNorm)]
            self._stochastic[id(root)] = layers
        return layers

    def check_no_grad_training(self, root: Any, site: Site, inference: bool) -> None:
        import torch.nn as nn

        active_dropout = [m for m in self._stochastic_layers(root)
                          if isinstance(m, nn.modules.dropout._DropoutNd) and m.training and m.p > 0]
        active_norm = [m for m in self._stochastic_layers(root)
                       if isinstance(m, nn.modules.batchnorm._BatchNorm) and m.training and m.track_running_stats]
        if not active_dropout and not active_norm:
            return
        parts = []
        if active_dropout:
            rates = sorted({m.p for m in active_dropout})
            shown = ", ".join(f"{r:g}" for r in rates)
            parts.append(f"{len(active_dropout)} Dropout (p={shown}) zeroing activations at random")
        if active_norm:
            parts.append(f"{len(active_norm)} {type(active_norm[0]).__name__} normalising with batch statistics "
                         "and updating their running statistics from this data")
        context = "torch.inference_mode()" if inference else "torch.no_grad()"
        name = type(root).__name__
        self.session.observe(
            "TL107", site,
            f"`{name}` runs under {context} in training mode: Dropout and BatchNorm behave as in training; "
            f"call `model.eval()` before evaluating (and `model.train()` after)",
            f"`{name}`.training is True under {context}: " + "; ".join(parts))

    # -- TL106 ------------------------------------------------------------------------------------------
    def eval_call_starts(self, root: Any, site: Site) -> None:
        self.session.memory.measure_begin()
        self._active = ((site.path, site.line), site)

    def eval_call_ends(self, root: Any, output: Any) -> None:
        import torch

        active, self._active = self._active, None
        if active is None:
            return
        saved = self.session.memory.measure_end()
        key, site = active
        tensors = _output_tensors(output, torch.Tensor)
        roots = [t.grad_fn for t in tensors if t.grad_fn is not None]
        if not roots:
            return
        calls = self._eval_sites.get(key)
        if calls is None:
            calls = self._eval_sites[key] = _SiteCalls(type(root).__name__, site=site)
        self._decide(calls)
        call = _EvalCall(site, saved)
        for node in roots:
            try:
                node.register_prehook(_marker(call.used))
            except Exception:  # noqa: BLE001 - cannot watch it: assume a backward uses it
                call.used[0] = True
        calls.pending = call

    @staticmethod
    def _decide(calls: _SiteCalls) -> None:
        previous, calls.pending = calls.pending, None
        if previous is None:
            return
        if previous.used[0]:
            calls.used += 1
        else:
            calls.unused += 1
            calls.saved.append(previous.saved)

    def finish(self, script_ended: bool) -> None:
        for calls in self._eval_sites.values():
            if script_ended:
                self._decide(calls)
            if calls.unused == 0 or calls.used > 0 or calls.site is None:
                continue
            per_batch = sum(calls.saved) / max(len(calls.saved), 1)
            self.session.observe(
                "TL106", calls.site,
                f"`{calls.model}` in eval() runs with autograd on: every call records a graph no backward "
                "uses; wrap the evaluation in `with torch.no_grad():` (or `torch.inference_mode()`)",
                f"{calls.unused} call{'s' if calls.unused != 1 else ''} in eval() with grad enabled, none of "
                f"whose graphs a backward used; {mib(per_batch)} of tensors saved for backward per call")


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
