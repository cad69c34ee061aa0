"""TL002 (gradients that reach a step still holding the previous step's gradient) and the
gradient health table.

Every parameter of an optimizer gets a tensor hook, which autograd calls just before it adds a
new gradient into `.grad`. After a step, each parameter's gradient is "stale". The first time
backward reaches the parameter again, its `.grad` is either None (`zero_grad()`, `grad = None`),
all zero (`zero_grad(set_to_none=False)`, `grad.data.zero_()`) — cleared — or still the old
gradient, which backward is about to add to. When the optimizer steps with such a gradient, that
is TL002. Deliberate accumulation (k backward passes, then a step, then zero) clears before the
first of the k passes, so it never is. A GAN's generator backward that reaches the
discriminator's stale gradients is not either: the discriminator clears them before its own
next backward, which is what decides.

The health table is taken after each of the first `--health-steps` steps, from the gradients
the step used (after the step, so closures such as LBFGS's have run).
"""

from __future__ import annotations

import math
import weakref
from dataclasses import dataclass, field
from typing import Any, Dict, List, Optional, Tuple


@dataclass
class _ParamState:
    ref: Any  # weakref to the parameter
    optimizer: int  # id of the optimizer that owns it
    stale: bool = False  # .grad still holds a gradient a step already used
    contaminated: bool = False  # backward added a new gradient to a stale one
    accumulated: bool = False  # backward reached it since the last step
    stale_since: int = 0  # the step whose gradient it holds
    stale_norm: Optional[float] = None


@dataclass
class HealthRow:
    name: str
    shape: Tuple[int, ...]
    steps: int = 0
    none: int = 0
    nonfinite: int = 0
    zero: int = 0
    vanishing: int = 0
    exploding: int = 0
    norms: List[float] = field(default_factory=list)
    steps_seen: List[int] = field(default_factory=list)  # the step of each norm (the curves' x)
    # a conv/linear bias feeding a BatchNorm (that BatchNorm's name): its gradient is zero by
    # construction (the BatchNorm subtracts the batch mean), so a zero or vanishing norm is no problem
    feeds_batchnorm: Optional[str] = None
    by_construction: int = 0  # steps whose zero/vanishing norm that explains

    @property
    def problems(self) -> int:
        return self.none + self.nonfinite + self.zero + self.vanishing + self.exploding

    def to_json(self) -> dict:
        finite = [n for n in self.norms if math.isfinite(n)]
        return {
            "parameter": self.name, "shape": list(self.shape), "steps": self.steps, "grad_none": self.none,
            "nan_or_inf": self.nonfinite, "all_zero": self.zero, "vanishing": self.vanishing,
            "exploding": self.exploding, "norm_min": min(finite) if finite else None,
            "norm_max": max(finite) if finite else None,
            "norms": [n if math.isfinite(n) else None for n in self.norms], "norm_steps": list(self.steps_seen),
            "feeds_batchnorm": self.feeds_batchnorm, "zero_by_construction": self.by_construction,
        }


class Gradients:
    def __init__(self, session) -> None:
        self.session = session
        self._params: Dict[int, _ParamState] = {}
        self._optimizers: Dict[int, Any] = {}  # id -> weakref
        self._counts: Dict[int, int] = {}  # id -> number of parameters adopted (add_param_group adds more)
        self._handles: List[Any] = []
        self.health: Dict[int, HealthRow] = {}
        self.health_steps_seen = 0
        self.frozen: Dict[int, str] = {}  # parameters an optimizer holds with requires_grad=False (on purpose)
        self._feeds_batchnorm: Optional[Dict[int, str]] = None

    # -- parameters ---------------------------------------------------------------------------------
    def _parameters(self, optimizer: Any) -> List[Any]:
        return [p for group in optimizer.param_groups for p in group["params"]
                if getattr(p, "requires_grad", False)]

    def _adopt(self, optimizer: Any) -> None:
        self._optimizers[id(optimizer)] = weakref.ref(optimizer)
        params = self._parameters(optimizer)
        self._counts[id(optimizer)] = len(params)
        for param in params:
            if id(param) in self._params:
                continue
            state = _ParamState(weakref.ref(param), id(optimizer))
            self._params[id(param)] = state
            try:
                self._handles.append(param.register_hook(self._hook_for(state)))
            except RuntimeError:  # a parameter that does not require grad after all
                continue

    def _hook_for(self, state: _ParamState):
        import torch

        def before_accumulate(grad: Any) -> None:
            if self.session.disabled:
                return None
            try:
                with torch._C.DisableTorchFunction():  # our reads are not the script's ops
                    self._before_accumulate(state)
            except Exception as error:  # noqa: BLE001 - never break the user's backward
                self.session.internal_error(error)
            return None

        return before_accumulate

    def _before_accumulate(self, state: _ParamState) -> None:
        state.accumulated = True
        if not (state.stale or state.contaminated):
            return
        param = state.ref()
        current = None if param is None else param.grad
        if current is None or not bool(current.any()):
            # cleared since the step (or since a backward that added to a stale gradient, as a
            # GAN's generator backward does to the discriminator's gradients)
            state.stale = state.contaminated = False
            return
        if state.stale:
            state.contaminated = True
            state.stale = False

    def remove_hooks(self) -> None:
        for handle in self._handles:
            try:
                handle.remove()
            except Exception:  # noqa: BLE001
                pass
        self._handles.clear()

    # -- steps ---------------------------------------------------------------------------------------
    def before_step(self, optimizer: Any, closure: bool) -> None:
        if id(optimizer) not in self._optimizers:
            self._adopt(optimizer)
            return
        if self._counts.get(id(optimizer)) != sum(len(g["params"]) for g in optimizer.param_groups):
            self._adopt(optimizer)
        if closure:
            return  # its backward runs inside the step; judged after it
        self._report_contamination(optimizer)
        self._report_cleared_before_step(optimizer)

    def after_step(self, optimizer: Any, closure: bool, step: int) -> None:
        if id(optimizer) not in self._optimizers:
            self._adopt(optimizer)
        if closure:
            self._report_contamination(optimizer)
        options = self.session.options
        record_health = step <= max(options.health_steps, getattr(options, "curve_steps", 0))
        params = self._parameters(optimizer)
        if record_health:
            for group in optimizer.param_groups:
                for param in group["params"]:
                    if not getattr(param, "requires_grad", True) and id(param) not in self.frozen:
                        self.frozen[id(param)] = self.session.param_name(param)
        norms = self._norms(params) if record_health else {}
        for param in params:
            state = self._params.get(id(param))
            if state is None:
                continue
            state.stale = param.grad is not None
            state.stale_since = step
            state.stale_norm = norms.get(id(param))
            state.accumulated = False
            state.contaminated = False
        if record_health:
            self._record_health(params, norms)

    def _owned(self, optimizer: Any) -> List[Tuple[Any, _ParamState]]:
        found = []
        for param in self._parameters(optimizer):
            state = self._params.get(id(param))
            if state is not None and state.optimizer == id(optimizer):
                found.append((param, state))
        return found

    def _report_contamination(self, optimizer: Any) -> None:
        hit = [(p, s) for p, s in self._owned(optimizer) if s.contaminated]
        if not hit:
            return
        session = self.session
        step = session.step_of(optimizer) + 1
        names = [session.param_name(p) for p, _ in hit]
        param, state = hit[0]
        now = _norm(param.grad)
        before = state.stale_norm
        ratio = f" ({now / before:.2f}× the gradient the previous step used)" if before and now is not None else ""
        evidence = (f"{len(hit)} of {len(self._owned(optimizer))} parameters reached step {step} with the "
                    f"gradient of step {state.stale_since} still in .grad and the new one added to it: "
                    f"{_names(names)}; ‖{names[0]}.grad‖ = {_fmt(now)} at step {step}, "
                    f"{_fmt(before)} at step {state.stale_since}{ratio}")
        session.observe(
            "TL002", session.site(),
            f"`{type(optimizer).__name__}.step()` uses gradients summed over steps because nothing clears them "
            "between steps; call `optimizer.zero_grad()` once per step (before backward)",
            evidence, step=step)
        for _, item in hit:
            item.contaminated = False

    def _report_cleared_before_step(self, optimizer: Any) -> None:
        owned = self._owned(optimizer)
        reached = [(p, s) for p, s in owned if s.accumulated]
        if not reached or any(p.grad is not None for p, _ in reached):
            return
        session = self.session
        step = session.step_of(optimizer) + 1
        session.observe(
            "TL002", session.site(),
            f"`{type(optimizer).__name__}.step()` finds every gradient cleared although backward ran since "
            "the last step: the step updates nothing; clear gradients before backward, not between "
            "backward and step",
            f"backward reached {len(reached)} parameters after step {step - 1}, and all their .grad were "
            f"None at step {step}", step=step)

    # -- health ---------------------------------------------------------------------------------------
    def _norms(self, params: List[Any]) -> Dict[int, float]:
        import torch

        groups: Dict[Tuple[str, str], List[Any]] = {}
        for param in params:
            grad = param.grad
            if grad is None or grad.is_sparse:
                continue
            groups.setdefault((str(grad.device), str(grad.dtype)), []).append(param)
        norms: Dict[int, float] = {}
        for members in groups.values():
            grads = [p.grad for p in members]
            try:
                values = torch.stack([n.float() for n in torch._foreach_norm(grads)]).tolist()
            except Exception:  # noqa: BLE001 - meta tensors, subclasses: one at a time
                values = [_norm(g) for g in grads]
            for param, value in zip(members, values):
                if value is not None:
                    norms[id(param)] = float(value)
        return norms

    def _bias_feeding_batchnorm(self) -> Dict[int, str]:
        """id(bias) -> the BatchNorm it feeds: a Conv/Linear child followed, among its parent's
        children, by a BatchNorm over its output channels (`nn.Sequential(conv, bn)`, or `self.conv`
        and `self.bn` declared in that order). Its gradient is then zero by construction."""
        if self._feeds_batchnorm is not None:
            return self._feeds_batchnorm
        import torch.nn as nn

        found: Dict[int, str] = {}
        session = self.session
        for key in session._root_order:
            root = session._roots.get(key)
            if root is None:
                continue
            for parent_name, parent in root.named_modules():
                children = list(parent.named_children())
                for (_, first), (name, second) in zip(children, children[1:]):
                    bias = getattr(first, "bias", None)
                    if bias is None or not isinstance(second, nn.modules.batchnorm._BatchNorm):
                        continue
                    width = getattr(first, "out_channels", getattr(first, "out_features", None))
                    if isinstance(first, (nn.modules.conv._ConvNd, nn.Linear)) and width == second.num_features:
                        found[id(bias)] = f"{parent_name}.{name}" if parent_name else name
        self._feeds_batchnorm = found
        return found

    def _record_health(self, params: List[Any], norms: Dict[int, float]) -> None:
        options = self.session.options
        step = self.session.step_of_last_step
        counted = step <= options.health_steps  # later steps (up to --curve-steps) only add to the curves
        if counted:
            self.health_steps_seen = max(self.health_steps_seen, step)
        feeds = self._bias_feeding_batchnorm()
        for param in params:
            row = self.health.get(id(param))
            if row is None:
                row = self.health[id(param)] = HealthRow(self.session.param_name(param), tuple(param.shape))
                row.feeds_batchnorm = feeds.get(id(param))
            if not counted:
                value = norms.get(id(param))
                if value is not None:
                    row.norms.append(value)
                    row.steps_seen.append(step)
                continue
            row.steps += 1
            if param.grad is None:
                row.none += 1
                continue
            value = norms.get(id(param))
            if value is None:
                continue
            row.norms.append(value)
            row.steps_seen.append(step)
            if row.feeds_batchnorm is not None and math.isfinite(value) and value < max(options.vanishing, 1e-5):
                row.by_construction += 1  # the BatchNorm subtracts the batch mean: zero up to rounding
            elif not math.isfinite(value):
                row.nonfinite += 1
            elif value == 0.0:
                row.zero += 1
            elif value < options.vanishing:
                row.vanishing += 1
            elif value > options.exploding:
                row.exploding += 1

    def health_rows(self) -> List[HealthRow]:
        return sorted(self.health.values(), key=lambda r: (-r.problems, r.name))


def _norm(grad: Any) -> Optional[float]:
    if grad is None:
        return None
    try:
        return float(grad.detach().float().norm())
    except Exception:  # noqa: BLE001
        return None


def _fmt(value: Optional[float]) -> str:
    return "n/a" if value is None else f"{value:.4g}"


def _names(names: List[str], limit: int = 3) -> str:
    shown = ", ".join(f"`{n}`" for n in names[:limit])
    return shown + (f" and {len(names) - limit} more" if len(names) > limit else "")

